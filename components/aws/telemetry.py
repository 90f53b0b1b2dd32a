"""What the seed asks to see on AWS beyond the cluster (issue 27): the EFA fabric's counters, the filesystem's and the
checkpoint bucket's CloudWatch metrics in the platform's Prometheus, and container and node logs in CloudWatch Logs.

Choices, and why (docs/telemetry.md; sources read 2026-12-01):

- **Fabric: a Prometheus exporter, not Container Insights.** The platform's alerts, routes, runbooks and dashboards are
  Prometheus's; EFA counters there join DCGM's and Kueue's (the jobs dashboard's "GPUs idle while their job waited on
  the network"). The CloudWatch agent of the amazon-cloudwatch-observability add-on does collect EFA counters
  (retransmits and impaired connections included: aws/amazon-cloudwatch-agent @ ab55b8d, translator sample configs
  node_efa_*), but into CloudWatch, behind a second alerting path, with its own DCGM exporter and Fluent Bit beside the
  GPU Operator's. Upstream node_exporter's infiniband collector reads no EFA counter (prometheus/procfs @ 3c943fd
  sysfs/class_infiniband.go parses mlx5's hw_counters names only; EFA devices are rdmap*, not efa_*). AWS's sample
  EFA exporter (aws-samples/awsome-distributed-training @ 7217859, 4.validation_and_observability/3.efa-node-exporter:
  node_exporter v1.10.2 with an amazonefa collector over /sys/class/infiniband/*/ports/*/hw_counters, metrics
  node_amazonefa_<counter>{device, port}) is what runs here, from the prometheus-node-exporter chart as its EKS README
  installs it, on port 9102 (its CI values: the cluster's node-exporter holds 9100), with no default collector. It is
  published as source only: the stack names its build by digest (aws.telemetry.efaExporterImage).
- **Storage: yet-another-cloudwatch-exporter**, read-only through EKS Pod Identity: FSx for Lustre's AWS/FSx metrics
  (FSx for Lustre user guide, "Amazon FSx for Lustre metrics and dimensions": DataReadBytes, DataWriteBytes, their
  operations, MetadataOperations, FreeDataStorageCapacity, by FileSystemId) and the bucket's S3 request metrics
  (AllRequests, 4xxErrors, 5xxErrors, FirstByteLatency, TotalRequestLatency, BytesUploaded, BytesDownloaded; S3 user
  guide, "Metrics and dimensions"), found by the stack's cluster tag, or the existing filesystem by id.
- **Logs: aws-for-fluent-bit**, not the observability add-on: the same Fluent Bit the add-on runs, but writing only to
  two log groups the stack creates (KMS key of their own, retention from the spec) with a role that may only create
  streams and put events there (no CreateLogGroup, no PutRetentionPolicy: the add-on's CloudWatchAgentServerPolicy
  grants logs:* creation on every group). Node logs: kubelet's and containerd's journal (Fluent Bit's systemd input,
  as Container Insights' own Fluent Bit configuration reads them for its dataplane group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pulumi
import pulumi_aws as aws
import yaml

from components import provenance
from components.aws.iam import (
    cloudwatch_read_policy,
    log_shipping_policy,
    logs_key_policy,
    to_json,
)
from components.aws.pod_identity import pod_identity_role
from components.aws.stateful import rotating_kms_key, stateful_options
from components.kubernetes.objects import MONITORING_NAMESPACE, NODE_AGENT_TOLERATIONS, NODE_GROUP_LABEL
from components.tags import merge_tags

EFA_EXPORTER_RELEASE = "efa-node-exporter"
EFA_EXPORTER_PORT = 9102
CLOUDWATCH_EXPORTER_RELEASE = "cloudwatch-exporter"
CLOUDWATCH_EXPORTER_ACCOUNT = "cloudwatch-exporter"
LOGS_NAMESPACE = "logging"
FLUENT_BIT_RELEASE = "aws-for-fluent-bit"
FLUENT_BIT_ACCOUNT = "fluent-bit"
# A minute per CloudWatch datapoint, the last five minutes read on each scrape (CloudWatch publishes FSx and S3
# request metrics every minute, with a delay of a few minutes).
CLOUDWATCH_PERIOD_S = 60
CLOUDWATCH_LENGTH_S = 300
FSX_METRICS = (("DataReadBytes", "Sum"), ("DataWriteBytes", "Sum"), ("DataReadOperations", "Sum"),
               ("DataWriteOperations", "Sum"), ("MetadataOperations", "Sum"), ("FreeDataStorageCapacity", "Sum"))
S3_REQUEST_METRICS = (("AllRequests", "Sum"), ("4xxErrors", "Sum"), ("5xxErrors", "Sum"),
                      ("FirstByteLatency", "Average"), ("TotalRequestLatency", "Average"), ("BytesUploaded", "Sum"),
                      ("BytesDownloaded", "Sum"))


def log_group_names(cluster: str) -> dict[str, str]:
    """The container and node log groups (beside EKS's own /aws/eks/<cluster>/cluster)."""
    return {"containers": f"/aws/eks/{cluster}/containers", "nodes": f"/aws/eks/{cluster}/nodes"}


def efa_exporter_values(image: str, node_groups: Sequence[str]) -> dict[str, Any]:
    """The prometheus-node-exporter chart running the EFA exporter image (``<registry>/<repository>@sha256:...``) on
    the EFA node groups only, with only its amazonefa collector, on port 9102, scraped by its ServiceMonitor with the
    node's name as the ``node`` label."""
    registry, _, rest = image.partition("/")
    repository, _, digest = rest.partition("@")
    return {
        "fullnameOverride": EFA_EXPORTER_RELEASE,
        "image": {"registry": registry, "repository": repository, "digest": digest, "pullPolicy": "IfNotPresent"},
        "extraArgs": ["--collector.disable-defaults", "--collector.amazonefa"],
        "service": {"port": EFA_EXPORTER_PORT, "targetPort": EFA_EXPORTER_PORT, "portName": "metrics"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": NODE_GROUP_LABEL, "operator": "In", "values": sorted(node_groups)}]}]}}},
        "tolerations": list(NODE_AGENT_TOLERATIONS),
        # It reads /sys only (the amazonefa collector): the host's root filesystem is not mounted.
        "hostRootFsMount": {"enabled": False},
        "prometheus": {"monitor": {"enabled": True, "relabelings": [
            {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}]}},
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
    }


def _metrics(pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"name": n, "statistics": [stat]} for n, stat in pairs]


def cloudwatch_exporter_config(region: str, cluster: str, filesystem_id: Optional[str], discover_filesystem: bool,
                               request_metrics: bool) -> str:
    """YACE's configuration (v1alpha1): the stack's FSx filesystem (discovered by its cluster tag, or an existing one
    by id) and the checkpoint bucket's request metrics (discovered by the cluster tag)."""
    common = {"regions": [region], "period": CLOUDWATCH_PERIOD_S, "length": CLOUDWATCH_LENGTH_S}
    tags = [{"key": "cluster", "value": f"^{cluster}$"}]
    discovery: list[dict[str, Any]] = []
    static: list[dict[str, Any]] = []
    if discover_filesystem:
        discovery.append({"type": "AWS/FSx", "searchTags": tags, **common, "metrics": _metrics(FSX_METRICS)})
    elif filesystem_id is not None:
        static.append({"name": "filesystem", "namespace": "AWS/FSx", **common,
                       "dimensions": [{"name": "FileSystemId", "value": filesystem_id}],
                       "metrics": _metrics(FSX_METRICS)})
    if request_metrics:
        discovery.append({"type": "AWS/S3", "searchTags": tags, **common,
                          "dimensionNameRequirements": ["BucketName", "FilterId"],
                          "metrics": _metrics(S3_REQUEST_METRICS)})
    config: dict[str, Any] = {"apiVersion": "v1alpha1", "sts-region": region}
    if discovery:
        config["discovery"] = {"jobs": discovery}
    if static:
        config["static"] = static
    return yaml.safe_dump(config, sort_keys=False)


def cloudwatch_exporter_values(config: str) -> dict[str, Any]:
    """The prometheus-yet-another-cloudwatch-exporter chart: its service account (bound by Pod Identity), the
    configuration, a ServiceMonitor every minute."""
    return {
        "fullnameOverride": CLOUDWATCH_EXPORTER_RELEASE,
        "serviceAccount": {"create": True, "name": CLOUDWATCH_EXPORTER_ACCOUNT},
        "config": config,
        "serviceMonitor": {"enabled": True, "interval": f"{CLOUDWATCH_PERIOD_S}s"},
        "testConnection": False,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }


def fluent_bit_values(region: str, groups: Mapping[str, str], node_logs: bool) -> dict[str, Any]:
    """The aws-for-fluent-bit chart: container logs (/var/log/containers, Kubernetes metadata added) to the containers
    group, and with ``node_logs`` kubelet's and containerd's journal to the nodes group; groups never created by it
    (they exist, with the stack's key and retention), on every node (every taint tolerated), its metrics scraped."""
    values: dict[str, Any] = {
        "fullnameOverride": FLUENT_BIT_RELEASE,
        "serviceAccount": {"create": True, "name": FLUENT_BIT_ACCOUNT},
        "cloudWatchLogs": {"enabled": True, "match": "kube.*", "region": region,
                           "logGroupName": groups["containers"], "logStreamPrefix": "container-",
                           "autoCreateGroup": False},
        "tolerations": [{"operator": "Exists"}],
        "serviceMonitor": {"enabled": True},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }
    if node_logs:
        values["additionalInputs"] = (
            "[INPUT]\n    Name systemd\n    Tag node.*\n    Path /var/log/journal\n"
            "    Systemd_Filter _SYSTEMD_UNIT=kubelet.service\n    Systemd_Filter _SYSTEMD_UNIT=containerd.service\n"
            "    DB /var/log/flb_systemd.db\n    Read_From_Tail On\n    Strip_Underscores On\n")
        values["additionalOutputs"] = (
            f"[OUTPUT]\n    Name cloudwatch_logs\n    Match node.*\n    region {region}\n"
            f"    log_group_name {groups['nodes']}\n    log_stream_prefix node-\n    auto_create_group false\n")
    return values


class AwsTelemetry(pulumi.ComponentResource):
    """The cloud side of the telemetry: the log groups (a KMS key of their own, the spec's retention, protected like
    the cluster's audit logs) and the roles the log shipper and the storage metrics exporter run with (EKS Pod
    Identity, least privilege).

    Attributes:
        log_shipper: the Fluent Bit role's Pod Identity association (its release waits for it), or None.
        metrics_reader: the storage exporter's association, or None.
    """

    log_shipper: Optional[aws.eks.PodIdentityAssociation]
    metrics_reader: Optional[aws.eks.PodIdentityAssociation]

    def __init__(self, name: str, *, eks_cluster_name: pulumi.Input[str], eks_cluster_arn: pulumi.Input[str],
                 cluster_name: str, region: str, labels: Mapping[str, str], protect: bool, ship_logs: bool,
                 retention_days: int, read_metrics: bool, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:telemetry:AwsTelemetry", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)

        def role(key: str, namespace: str, account: str, policy: pulumi.Input[str]) -> aws.eks.PodIdentityAssociation:
            return pod_identity_role(self, f"{name}-{key}", physical=f"{cluster_name}-{key}",
                                     eks_cluster_name=eks_cluster_name, eks_cluster_arn=eks_cluster_arn,
                                     namespace=namespace, service_account=account, policy=policy, labels=labels)

        self.log_shipper = None
        self.metrics_reader = None
        if ship_logs:
            identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
            partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
            key = rotating_kms_key(self, f"{name}-logs-key", f"{cluster_name}-logs",
                                   f"{cluster_name}: container and node logs", labels, protect)
            prefix = f"/aws/eks/{cluster_name}/"
            key_policy = aws.kms.KeyPolicy(
                f"{name}-logs-key-policy", key_id=key.key_id,
                policy=pulumi.Output.all(partition.partition, identity.account_id).apply(
                    lambda a: to_json(logs_key_policy(str(a[0]), str(a[1]), region, prefix))),
                opts=child)
            groups = []
            for purpose, group_name in log_group_names(cluster_name).items():
                groups.append(aws.cloudwatch.LogGroup(
                    f"{name}-{purpose}-logs", name=group_name, retention_in_days=retention_days, kms_key_id=key.arn,
                    tags=merge_tags(labels, f"{cluster_name}-{purpose}-logs"),
                    # Evidence, as the control plane's audit logs: kept through renames and protected in prod; the
                    # key's policy must let CloudWatch Logs use it before the group names it.
                    opts=stateful_options(self, protect, ignore_changes=["name"], depends_on=[key_policy])))
            shipping = pulumi.Output.all(*[g.arn for g in groups]).apply(
                lambda arns: to_json(log_shipping_policy([str(a) for a in arns])))
            self.log_shipper = role("fluent-bit", LOGS_NAMESPACE, FLUENT_BIT_ACCOUNT, shipping)
        if read_metrics:
            self.metrics_reader = role("cloudwatch-exporter", MONITORING_NAMESPACE, CLOUDWATCH_EXPORTER_ACCOUNT,
                                       to_json(cloudwatch_read_policy()))
        self.register_outputs({})
