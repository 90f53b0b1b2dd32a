"""Telemetry: GPU, queue and control-plane signals, and cost attribution, exist before production."""

from __future__ import annotations

from typing import Any

from pulumi_policy import PolicyResource, ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    GKE_CLUSTER,
    GKE_NODE_POOL,
    REQUIRED_LIST,
    Knob,
    Reporter,
    gcp_environment,
    get,
    helm_release,
    of_type,
    path,
    resource_policy,
    seen,
    stack_policy,
)


def _values(release: Any) -> dict[str, Any]:
    return dict(release.props.get("values") or {})


POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"


def _gke_dcgm(resources: Any) -> list[PolicyResource]:
    """GKE clusters whose managed DCGM exporter is on (monitoringConfig.enableComponents has DCGM): GKE's own GPU
    stack, which needs no GPU Operator."""
    return [c for c in of_type(resources, GKE_CLUSTER)
            if "DCGM" in (get(c.props, "monitoringConfig", "enableComponents") or [])]


def _dcgm_scrapes(resources: Any) -> list[PolicyResource]:
    """PodMonitors and ServiceMonitors that select a DCGM exporter (a selector label value naming one)."""
    return [m for m in of_type(resources, POD_MONITOR, SERVICE_MONITOR)
            if any("dcgm-exporter" in str(v) for v in (get(m.props, "spec", "selector", "matchLabels") or {}).values())]


def _dcgm(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    operators = helm_release(args.resources, "gpu-operator")
    standalone = helm_release(args.resources, "dcgm-exporter")
    on = [r for r in operators if get(_values(r), "dcgmExporter", "enabled", default=True) is not False]
    # On GKE's own GPU stack (no operator) the managed DCGM is gcp-gke-gpu-monitoring's to require.
    if not on and not standalone and not of_type(args.resources, GKE_CLUSTER):
        message = ("The stack must run the NVIDIA DCGM exporter (GPU Operator dcgmExporter.enabled, the "
                   "dcgm-exporter chart, or GKE's managed DCGM: monitoringConfig.enableComponents DCGM) so GPU "
                   "utilization, memory, power, temperature and ECC/XID errors are measured.")
        if not operators:  # no field: the stack lacks a whole release
            report(message)
            return
        # The GPU Operator release that turned it off.
        report(message, operators[0].urn, field="values.dcgmExporter.enabled", value=False)


dcgm_exporter = stack_policy(
    "gpu-telemetry-requires-dcgm-exporter", "telemetry",
    "A DCGM exporter runs on the GPU nodes.",
    "Keep the GPU Operator's dcgmExporter enabled (components/kubernetes/objects/gpu_stack.py), or GKE's managed DCGM "
    "(monitoringConfig DCGM, components/gcp/gke.py).",
    Severity.HIGH, _dcgm,
)


def _prometheus(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    stacks = helm_release(args.resources, "kube-prometheus-stack")
    if not stacks:  # no field: the stack lacks a whole release
        report("The stack must install a Prometheus stack (kube-prometheus-stack) to store GPU and queue metrics.")
        return
    selector = ("prometheus", "prometheusSpec", "serviceMonitorSelectorNilUsesHelmValues")
    spec = get(_values(stacks[0]), *selector[:2], default={}) or {}
    if spec.get(selector[-1], True) is not False:
        report("Prometheus must select every ServiceMonitor in the cluster "
               "(prometheusSpec.serviceMonitorSelectorNilUsesHelmValues: false), or it never scrapes DCGM.",
               stacks[0].urn, field=path("values", *selector), value=seen(spec, selector[-1]))
    monitor = ("dcgmExporter", "serviceMonitor", "enabled")
    for op in helm_release(args.resources, "gpu-operator"):
        if get(_values(op), *monitor, default=False) is not True:
            report("The GPU Operator must create the DCGM exporter's ServiceMonitor "
                   "(dcgmExporter.serviceMonitor.enabled: true) so Prometheus scrapes it.", op.urn,
                   field=path("values", *monitor), value=seen(_values(op), *monitor))
    if not helm_release(args.resources, "gpu-operator") and not _dcgm_scrapes(args.resources):
        for cluster in _gke_dcgm(args.resources):  # no field: the stack lacks the scrape object
            report("Prometheus must scrape GKE's managed DCGM exporter (a PodMonitor of the gke-managed-system pods "
                   "app.kubernetes.io/name=gke-managed-dcgm-exporter), or the GPU alerts see no GPU.", cluster.urn)


prometheus_scrapes_dcgm = stack_policy(
    "prometheus-scrapes-gpu-metrics", "telemetry",
    "A Prometheus stack is installed and scrapes the DCGM exporter.",
    "Keep kube-prometheus-stack with serviceMonitorSelectorNilUsesHelmValues: false and the DCGM ServiceMonitor on "
    "(on GKE's own GPU stack, the cloud-dcgm-exporter PodMonitor).",
    Severity.HIGH, _prometheus,
)


def _kueue_metrics(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for kueue in helm_release(args.resources, "kueue"):
        values = _values(kueue)
        config_yaml = ("managerConfig", "controllerManagerConfigYaml")
        config = str(get(values, *config_yaml, default=""))
        prometheus = values.get("enablePrometheus") is True
        if not prometheus or "enableClusterQueueResources: true" not in config:
            field = ("enablePrometheus",) if not prometheus else config_yaml
            report("Kueue must export metrics (enablePrometheus: true) including quota usage "
                   "(metrics.enableClusterQueueResources: true), so queue time and quota denials are measured.",
                   kueue.urn, field=path("values", *field), value=seen(values, *field))


kueue_metrics = stack_policy(
    "kueue-requires-metrics", "telemetry",
    "Kueue exports its metrics, including per-ClusterQueue quota usage.",
    "Keep enablePrometheus and enableClusterQueueResources in the Kueue values (kueue_values).",
    Severity.MEDIUM, _kueue_metrics,
)

LOG_TYPES = Knob("requiredLogTypes", REQUIRED_LIST,
                 ["api", "audit", "authenticator"])


def _control_plane_logs(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/cluster:Cluster":
        return
    enabled = set(args.props.get("enabledClusterLogTypes") or [])
    missing = [t for t in cfg["requiredLogTypes"] if t not in enabled]
    if missing:
        report(f"EKS cluster {args.props.get('name', args.name)} must send the {', '.join(cfg['requiredLogTypes'])} "
               f"control-plane logs to CloudWatch; missing: {', '.join(missing)}.", field="enabledClusterLogTypes",
               value=seen(args.props, "enabledClusterLogTypes"))


control_plane_logs = resource_policy(
    "aws-eks-control-plane-logging", "telemetry",
    "The EKS control plane logs api, audit and authenticator events.",
    "Add the missing types to gpu-cluster:spec.aws.controlPlane.logTypes.",
    Severity.HIGH, _control_plane_logs, [LOG_TYPES],
)


def _opencost(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if not helm_release(args.resources, "opencost"):  # no field: the stack lacks a whole release
        report("The stack must install cost attribution (OpenCost) so cost per job, team and model can be read.")


cost_attribution = stack_policy(
    "cost-attribution-installed", "telemetry",
    "Cost attribution (OpenCost) is installed.",
    "Keep the OpenCost release of the Monitoring component.",
    Severity.MEDIUM, _opencost,
)

# --- GCP -----------------------------------------------------------------------------------------

GKE_LOG_COMPONENTS = Knob("requiredLogComponents", REQUIRED_LIST, ["SYSTEM_COMPONENTS", "WORKLOADS"])
GKE_PROD_LOG_COMPONENTS = Knob("productionLogComponents", REQUIRED_LIST, ["APISERVER"])
PROTECTED_ENVS = Knob("protectedEnvironments", REQUIRED_LIST, ["prod"])


def _gke_logging(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != GKE_CLUSTER:
        return
    required = list(cfg["requiredLogComponents"])
    env = gcp_environment(args.resource_type, args.props, args.provider.props if args.provider else None)
    if env in cfg["protectedEnvironments"]:
        required += [c for c in cfg["productionLogComponents"] if c not in required]
    enabled = set(get(args.props, "loggingConfig", "enableComponents", default=[]) or [])
    missing = [c for c in required if c not in enabled]
    if missing:
        report(f"GKE cluster {args.props.get('name', args.name)} in {env} must send the {', '.join(required)} logs "
               f"to Cloud Logging (loggingConfig.enableComponents); missing: {', '.join(missing)}.",
               field="loggingConfig.enableComponents", value=seen(args.props, "loggingConfig", "enableComponents"))


gke_logging = resource_policy(
    "gcp-gke-logging", "telemetry",
    "The GKE cluster logs system components and workloads, and in production the API server.",
    "Keep loggingConfig.enableComponents of the cluster (components/gcp/gke.py) with SYSTEM_COMPONENTS, WORKLOADS "
    "and APISERVER.",
    Severity.HIGH, _gke_logging, [GKE_LOG_COMPONENTS, GKE_PROD_LOG_COMPONENTS, PROTECTED_ENVS],
)

GKE_MANAGED_DRIVERS = ("LATEST", "DEFAULT")


def _gke_managed_drivers(pool: PolicyResource) -> bool:
    """A GPU node pool whose drivers GKE installs (gpuDriverVersion LATEST or DEFAULT), so GKE's DCGM runs on it."""
    return any(get(acc, "gpuDriverInstallationConfig", "gpuDriverVersion") in GKE_MANAGED_DRIVERS
               for acc in get(pool.props, "nodeConfig", "guestAccelerators", default=[]) or [])


def _gke_gpu_monitoring(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    clusters = of_type(args.resources, GKE_CLUSTER)
    needing: dict[str, tuple[PolicyResource, str]] = {}  # cluster URN -> (cluster, first such pool), in order
    for pool in of_type(args.resources, GKE_NODE_POOL):
        if not _gke_managed_drivers(pool):
            continue
        # A pool depends on its cluster; a graph without dependencies still has one cluster per stack.
        linked = [d for d in pool.dependencies if d.resource_type == GKE_CLUSTER]
        for cluster in linked or (clusters if len(clusters) == 1 else []):
            needing.setdefault(cluster.urn, (cluster, str(pool.props.get("name", pool.name))))
    for cluster, pool_name in needing.values():
        monitoring = cluster.props.get("monitoringConfig") or {}
        components = set(get(monitoring, "enableComponents", default=[]) or [])
        managed = get(monitoring, "managedPrometheus", "enabled") is True
        if not managed or "DCGM" not in components:
            field = ("managedPrometheus", "enabled") if not managed else ("enableComponents",)
            report(f"GKE cluster {cluster.props.get('name', cluster.name)} runs GKE-managed GPU drivers (node pool "
                   f"{pool_name}), so it must collect their DCGM metrics: monitoringConfig.managedPrometheus.enabled: "
                   "true and DCGM in monitoringConfig.enableComponents.", cluster.urn,
                   field=path("monitoringConfig", *field), value=seen(monitoring, *field))


gke_gpu_monitoring = stack_policy(
    "gcp-gke-gpu-monitoring", "telemetry",
    "A GKE cluster with GKE-managed GPU drivers collects DCGM metrics through Managed Service for Prometheus.",
    "Keep monitoringConfig with managedPrometheus and the DCGM component on the cluster (components/gcp/gke.py).",
    Severity.HIGH, _gke_gpu_monitoring,
)

ALERTING_ENVS = Knob("alertedEnvironments", REQUIRED_LIST, ["prod"])
ALERTMANAGER_CONFIG = "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig"
_NOTIFIERS = ("slackConfigs", "pagerdutyConfigs", "emailConfigs", "webhookConfigs", "opsgenieConfigs",
              "msteamsConfigs", "msteamsv2Configs", "snsConfigs", "telegramConfigs", "victoropsConfigs",
              "pushoverConfigs", "wechatConfigs", "discordConfigs", "webexConfigs")


def _stack_environment(resources: list[PolicyResource]) -> str | None:
    """The environment label of the monitoring namespace (the platform labels its namespaces with the stack's)."""
    for ns in of_type(resources, "kubernetes:core/v1:Namespace"):
        meta = ns.props.get("metadata") or {}
        if meta.get("name") == "monitoring":
            env = (meta.get("labels") or {}).get("environment")
            return str(env) if env is not None else None
    return None


def _routed(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    env = _stack_environment(list(args.resources))
    if env is None or env not in cfg["alertedEnvironments"]:
        return
    reached: set[str] = set()
    first: tuple[PolicyResource, tuple[str, ...]] | None = None  # the first config, at what to edit in it
    for config in of_type(args.resources, ALERTMANAGER_CONFIG):
        spec = config.props.get("spec") or {}
        notifying = {str(r.get("name")) for r in spec.get("receivers") or []
                     if any(r.get(k) for k in _NOTIFIERS)}
        route = spec.get("route") or {}
        targets = {str(route.get("receiver"))} | {str(r.get("receiver")) for r in route.get("routes") or []
                                                   if isinstance(r, dict)}
        reached |= notifying & targets
        if first is None:  # its route when a receiver notifies, else its receivers
            first = (config, ("spec", "route", "receiver") if notifying else ("spec", "receivers"))
    message = (f"A {env} stack's alerts must reach someone: an AlertmanagerConfig with a receiver that notifies "
               "(Slack, PagerDuty, email, webhook, ...) and a route to it; without one, XID, ECC and quota alerts "
               "fire in Prometheus and nobody hears them.")
    if reached:
        return
    if first is None:  # no field: the stack lacks a whole AlertmanagerConfig
        report(message)
        return
    config, field = first
    report(message, config.urn, field=path(*field), value=seen(config.props, *field))


alerts_routed = stack_policy(
    "alerts-reach-a-receiver", "telemetry",
    "In production, alerts are routed to a receiver that notifies someone.",
    "Add receivers and routes under gpu-cluster:spec.platform.monitoring.alerts (credentials in a Secret of the "
    "monitoring namespace, named by the receiver).",
    Severity.HIGH, _routed, [ALERTING_ENVS],
)

# --- Fabric, storage and logs in production (issue 27) --------------------------------------------------------------

PRODUCTION_ENVS = Knob("productionEnvironments", REQUIRED_LIST, ["prod"])
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
S3_BUCKET = "aws:s3/bucket:Bucket"
S3_METRICS = "aws:s3/bucketMetric:BucketMetric"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
MANAGED_LUSTRE = "gcp:lustre/instance:Instance"
GCS_BUCKET = "gcp:storage/bucket:Bucket"


def _production(args: StackValidationArgs, cfg: dict[str, Any]) -> str | None:
    """The stack's environment when it is one the knob calls production (the monitoring namespace's label)."""
    env = _stack_environment(list(args.resources))
    return env if env is not None and env in cfg["productionEnvironments"] else None


def _efa_templates(resources: Any) -> list[PolicyResource]:
    """Launch templates that wire EFA interfaces (interfaceType efa or efa-only)."""
    return [lt for lt in of_type(resources, LAUNCH_TEMPLATE)
            if any(str((n or {}).get("interfaceType")) in ("efa", "efa-only")
                   for n in lt.props.get("networkInterfaces") or [])]


def _fabric_metrics(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    env = _production(args, cfg)
    templates = _efa_templates(args.resources)
    if env is None or not templates:
        return
    exporters = [r for r in helm_release(args.resources, "prometheus-node-exporter")
                 if "--collector.amazonefa" in [str(a) for a in get(_values(r), "extraArgs", default=[]) or []]]
    if not exporters:  # no field: the stack lacks a whole release; named at the EFA node group's launch template
        report(f"A {env} stack with EFA node groups must run the EFA node exporter (its amazonefa collector, "
               "gpu-cluster:spec.aws.telemetry.efaExporterImage), so retransmits, impaired connections and device "
               "errors of the fabric are measured and alerted on.", templates[0].urn)
        return
    monitor = ("prometheus", "monitor", "enabled")
    for exporter in exporters:
        if get(_values(exporter), *monitor) is not True:
            report("The EFA node exporter must be scraped by Prometheus (prometheus.monitor.enabled: true: its "
                   "ServiceMonitor), or the fabric alerts see nothing.", exporter.urn,
                   field=path("values", *monitor), value=seen(_values(exporter), *monitor))


fabric_metrics = stack_policy(
    "aws-fabric-metrics-in-production", "telemetry",
    "A production stack with EFA node groups scrapes every EFA device's counters into Prometheus.",
    "Give gpu-cluster:spec.aws.telemetry.efaExporterImage (your build of the EFA node exporter, by digest); keep its "
    "release's ServiceMonitor on (components/aws/telemetry.py).",
    Severity.HIGH, _fabric_metrics, [PRODUCTION_ENVS],
)


def _checkpoint_buckets(resources: Any) -> list[PolicyResource]:
    return [b for b in of_type(resources, S3_BUCKET)
            if (b.props.get("tags") or {}).get("data-class") == "checkpoints"]


def _aws_storage_metrics(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    env = _production(args, cfg)
    filesystems = of_type(args.resources, FSX_LUSTRE)
    buckets = _checkpoint_buckets(args.resources)
    if env is None or not (filesystems or buckets):
        return
    exporters = helm_release(args.resources, "prometheus-yet-another-cloudwatch-exporter")
    if not exporters:  # no field: the stack lacks a whole release; named at what goes unwatched
        report(f"A {env} stack must scrape its filesystem's and checkpoint bucket's CloudWatch metrics into "
               "Prometheus (yet-another-cloudwatch-exporter, gpu-cluster:spec.aws.telemetry.storageMetrics), so "
               "throughput, free capacity and request errors are alerted on.", (filesystems or buckets)[0].urn)
        return
    exporter = exporters[0]
    values = _values(exporter)
    if get(values, "serviceMonitor", "enabled") is not True:
        report("The storage metrics exporter must be scraped by Prometheus (serviceMonitor.enabled: true).",
               exporter.urn, field="values.serviceMonitor.enabled", value=seen(values, "serviceMonitor", "enabled"))
    if filesystems and "AWS/FSx" not in str(values.get("config", "")):
        report("The storage metrics exporter must read the FSx for Lustre filesystem's metrics (an AWS/FSx job in "
               "its config).", exporter.urn, field="values.config", value=seen(values, "config"))
    configs = of_type(args.resources, S3_METRICS)
    for bucket in buckets:
        # A metrics configuration of this bucket: it depends on the bucket (its name is the bucket's output); where the
        # graph lost its dependencies (an event log), the stack's one checkpoint bucket and a configuration.
        linked = any(bucket.urn in {d.urn for d in m.dependencies} for m in configs)
        if not linked and not (configs and len(buckets) == 1 and not any(m.dependencies for m in configs)):
            report(f"The {env} checkpoint bucket must publish S3 request metrics (a metrics configuration), so its "
                   "server errors and latency reach the storage alerts.", bucket.urn)


aws_storage_metrics = stack_policy(
    "aws-storage-metrics-in-production", "telemetry",
    "A production stack scrapes its FSx filesystem's and checkpoint bucket's CloudWatch metrics into Prometheus.",
    "Keep gpu-cluster:spec.aws.telemetry.storageMetrics on: the yet-another-cloudwatch-exporter release with its "
    "ServiceMonitor and AWS/FSx job, and the bucket's request metrics (components/aws/telemetry.py, storage.py).",
    Severity.HIGH, _aws_storage_metrics, [PRODUCTION_ENVS],
)


def _container_logs(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    env = _production(args, cfg)
    clusters = of_type(args.resources, EKS_CLUSTER)
    if env is None or not clusters:
        return
    shippers = [r for r in helm_release(args.resources, "aws-for-fluent-bit")
                if get(_values(r), "cloudWatchLogs", "enabled") is True]
    if not shippers:  # no field: the stack lacks a whole release; named at the cluster whose logs go nowhere
        report(f"A {env} EKS cluster must ship its container logs to CloudWatch Logs (aws-for-fluent-bit, "
               "gpu-cluster:spec.aws.telemetry.containerLogs), so a failed job's output outlives its pod.",
               clusters[0].urn)
        return
    groups = {str(g.props.get("name")): g for g in of_type(args.resources, LOG_GROUP)}
    for shipper in shippers:
        field = ("cloudWatchLogs", "logGroupName")
        name = str(get(_values(shipper), *field, default=""))
        group = groups.get(name)
        if group is None:
            report("The log shipper must write to a log group the stack creates (with its KMS key and retention), "
                   "not one it would create itself.", shipper.urn, field=path("values", *field),
                   value=seen(_values(shipper), *field))
            continue
        if not group.props.get("kmsKeyId"):
            report(f"Log group {name} must be encrypted with the stack's KMS key (kmsKeyId).", group.urn,
                   field="kmsKeyId", value=seen(group.props, "kmsKeyId"))
        if not group.props.get("retentionInDays"):
            report(f"Log group {name} must keep logs for the spec's retention (retentionInDays), not forever.",
                   group.urn, field="retentionInDays", value=seen(group.props, "retentionInDays"))


container_logs = stack_policy(
    "aws-container-logs-in-production", "telemetry",
    "A production EKS cluster ships container logs to KMS-encrypted CloudWatch log groups with a retention.",
    "Keep gpu-cluster:spec.aws.telemetry.containerLogs enabled (retentionDays defaults to the control plane's): the "
    "aws-for-fluent-bit release and the log groups of components/aws/telemetry.py.",
    Severity.HIGH, _container_logs, [PRODUCTION_ENVS],
)


def _gcp_storage_metrics(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    env = _production(args, cfg)
    instances = of_type(args.resources, MANAGED_LUSTRE)
    buckets = of_type(args.resources, GCS_BUCKET)
    if env is None or not of_type(args.resources, GKE_CLUSTER) or not (instances or buckets):
        return
    exporters = helm_release(args.resources, "prometheus-stackdriver-exporter")
    if not exporters:  # no field: the stack lacks a whole release; named at what goes unwatched
        report(f"A {env} GKE stack must scrape Managed Lustre's and the checkpoint bucket's Cloud Monitoring metrics "
               "into Prometheus (the stackdriver exporter, gpu-cluster:spec.gcp.telemetry.storageMetrics).",
               (instances or buckets)[0].urn)
        return
    exporter = exporters[0]
    values = _values(exporter)
    if get(values, "serviceMonitor", "enabled") is not True:
        report("The storage metrics exporter must be scraped by Prometheus (serviceMonitor.enabled: true).",
               exporter.urn, field="values.serviceMonitor.enabled", value=seen(values, "serviceMonitor", "enabled"))
    prefixes = ("stackdriver", "metrics", "typePrefixes")
    if instances and "lustre.googleapis.com/" not in str(get(values, *prefixes, default="")):
        report("The storage metrics exporter must read Managed Lustre's metrics (lustre.googleapis.com/ in "
               "stackdriver.metrics.typePrefixes).", exporter.urn, field=path("values", *prefixes),
               value=seen(values, *prefixes))


gcp_storage_metrics = stack_policy(
    "gcp-storage-metrics-in-production", "telemetry",
    "A production GKE stack scrapes Managed Lustre's and the checkpoint bucket's Cloud Monitoring metrics.",
    "Keep gpu-cluster:spec.gcp.telemetry.storageMetrics on: the stackdriver exporter release with its ServiceMonitor "
    "and the lustre.googleapis.com/ prefix (components/gcp/telemetry.py).",
    Severity.HIGH, _gcp_storage_metrics, [PRODUCTION_ENVS],
)

POLICIES = [dcgm_exporter, prometheus_scrapes_dcgm, kueue_metrics, control_plane_logs, cost_attribution, gke_logging,
            gke_gpu_monitoring, alerts_routed, fabric_metrics, aws_storage_metrics, container_logs,
            gcp_storage_metrics]
