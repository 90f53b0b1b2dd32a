"""The governed GPU platform on the cluster: GPU stack, queues and quotas, tenancy, telemetry.

Four components, created in dependency order by :func:`build_platform`: Monitoring first (its CRDs,
ServiceMonitor and PrometheusRule, are needed by the others), then the GPU stack, team tenancy, and the
Kueue queues, whose objects wait for Kueue's release (and so for its admission webhook) to be ready.
Every Kubernetes object comes from :mod:`components.kubernetes.objects`, so what is deployed is what
the tests validate and what ``blueprint manifests`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import provenance
from components.catalog import load_charts
from components.catalog.acceptance import load_acceptance
from components.catalog.charts import pytorch_image
from components.kubernetes import objects as obj
from components.kubernetes.apply import apply, object_name, release
from components.kubernetes.inputs import CloudRelease, CloudTelemetry, PlatformInputs
from components.kubernetes.namespaces import egress_policies, system_namespace
from components.kubernetes.objects.serving import serving_ready_allowance_s
from components.kubernetes.quotas import (
    cpu_quota_room,
    lendable_by_pool,
    namespace_hard_limits,
    sidecar_headroom,
    team_cpu_flavor_quotas,
    team_flavor_quotas,
)
from components.kubernetes.readiness import NodeReadiness
from components.kubernetes.serving import build_serving
from components.provenance import from_spec, spec_path, team_items

GRAFANA_SECRET = "grafana-admin"




class Monitoring(pulumi.ComponentResource):
    """kube-prometheus-stack with the GPU and queue rules and dashboard, and OpenCost.

    Attributes:
        prometheus: the kube-prometheus-stack release (its CRDs are needed by every ServiceMonitor).
    """

    prometheus: k8s.helm.v3.Release

    def __init__(self, name: str, inputs: PlatformInputs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:telemetry:Monitoring", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        charts = load_charts()
        # The Prometheus volume holds the metrics history: with deletion protection its storage class
        # retains volumes and the namespace and release that own the claim are protected and retained.
        keep = pulumi.ResourceOptions(parent=self, protect=inputs.retain_data, retain_on_delete=inputs.retain_data)
        mon_ns = system_namespace(self, obj.MONITORING_NAMESPACE, inputs, keep)
        cost_ns = system_namespace(self, obj.OPENCOST_NAMESPACE, inputs)
        storage = apply(f"{name}-storageclass",
                        obj.storage_class(inputs.storage_class_name, inputs.storage_provisioner,
                                          inputs.storage_parameters,
                                          inputs.retain_data),
                        child)
        password = random.RandomPassword(f"{name}-grafana-password", length=32, special=False, opts=child)
        secret = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata={"name": GRAFANA_SECRET, "namespace": obj.MONITORING_NAMESPACE, "labels": dict(inputs.labels)},
            string_data={"admin-user": "admin", "admin-password": password.result},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[mon_ns]),
        )
        mon = inputs.platform.monitoring
        self.prometheus = release(
            obj.PROMETHEUS_RELEASE, charts["kube-prometheus-stack"], obj.MONITORING_NAMESPACE,
            obj.prometheus_stack_values(mon.retention_days, mon.storage_gib, inputs.storage_class_name, GRAFANA_SECRET),
            pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=[mon_ns, storage, secret])),
        )
        after_prometheus = pulumi.ResourceOptions(parent=self, depends_on=[self.prometheus])
        slurm_pools = [p.pool for p in inputs.slurm.pools] if inputs.slurm is not None else []
        # A team on both schedulers: its Kueue spend alert watches the Kueue part of its budget, its Slurm account
        # (GrpTRESMins) the rest.
        budgets = {t.name: float(t.budget.monthly_usd) * (1 - obj.slurm_budget_share(t, inputs.pools, slurm_pools))
                   for t in inputs.teams if t.budget is not None}
        tel = inputs.telemetry or CloudTelemetry()
        apply(f"{name}-rules", obj.prometheus_rules(mon.alerts.runbook_url, budgets,
                                                     obj.spend_pricing(inputs.pools, mon.retention_days),
                                                     slurm=inputs.slurm is not None, fabric=tel.fabric,
                                                     storage=tel.storage, logs=tel.logs,
                                                     checkpoint_allowed_s=inputs.checkpoint_allowed_s,
                                                     not_visible=tel.not_visible,
                                                     team_groups={t.name: [q.node_group for q in t.quotas]
                                                                  for t in inputs.teams},
                                                     serving=inputs.serving),
              after_prometheus)
        # One AlertmanagerConfig per receiver: a receiver whose Secret is missing loses only its own alerts.
        notify = obj.budget_addresses(inputs.teams, inputs.platform_budget_notify)
        for config in obj.alertmanager_configs(mon.alerts, notify):
            receiver = config["metadata"]["labels"][obj.RECEIVER_LABEL]
            apply(f"{name}-alert-routing-{receiver}", config, after_prometheus)
        apply(f"{name}-dashboard", obj.grafana_dashboard(), after_prometheus)
        apply(f"{name}-jobs-dashboard", obj.jobs_dashboard(tel.fabric is not None, serving=bool(inputs.serving)),
              after_prometheus)
        if inputs.checkpoint_metrics:
            # A Pushgateway per team, which only the team's pods may reach, its series labelled with the team's
            # namespace by the scrape (objects/jobs.py): no team can write another's checkpoint durations. The
            # release waits for the NetworkPolicy, so the gateway is never open to every namespace.
            for team in inputs.teams:
                fence = apply(f"{name}-networkpolicy-{obj.pushgateway_name(team.name)}",
                              obj.pushgateway_network_policy(team.name),
                              pulumi.ResourceOptions(parent=self, depends_on=[mon_ns]))
                release(obj.pushgateway_name(team.name), charts["pushgateway"], obj.MONITORING_NAMESPACE,
                        obj.pushgateway_values(team.name),
                        pulumi.ResourceOptions(parent=self, depends_on=[self.prometheus, fence]))
        # The cloud's exporters and log shipper: each after Prometheus (its ServiceMonitor's CRD) and the identity it
        # reads the cloud with; a namespace other than monitoring is created for it (its DaemonSet reads host paths).
        spaces: dict[str, pulumi.Resource] = {obj.MONITORING_NAMESPACE: mon_ns}
        for rel in tel.releases:
            if rel.namespace not in spaces:
                spaces[rel.namespace] = system_namespace(self, rel.namespace, inputs)
            release(rel.release, charts[rel.chart], rel.namespace, rel.values,
                    pulumi.ResourceOptions(parent=self, depends_on=[self.prometheus, spaces[rel.namespace],
                                                                    *rel.ready]))
        release("opencost", charts["opencost"], obj.OPENCOST_NAMESPACE, obj.opencost_values(inputs.cluster_name),
                pulumi.ResourceOptions(parent=self, depends_on=[cost_ns, self.prometheus]))
        self.register_outputs({})


class GpuStack(pulumi.ComponentResource):
    """The NVIDIA GPU Operator, or the scrape of the GPU stack the cloud runs itself (GKE), and, where node groups
    have fabric devices, the cloud's device plugin."""

    def __init__(self, name: str, inputs: PlatformInputs, prometheus: pulumi.Resource,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GpuStack", name, provenance.props(), opts)
        charts = load_charts()
        if inputs.cloud_gpu_stack is not None:
            apply(f"{name}-cloud-dcgm", obj.cloud_dcgm_pod_monitor(inputs.cloud_gpu_stack),
                  pulumi.ResourceOptions(parent=self, depends_on=[prometheus]))
        else:
            ns = system_namespace(self, obj.GPU_OPERATOR_NAMESPACE, inputs)
            if inputs.critical_priority_quota:
                # its daemonsets run at system-node-critical; sized as NVIDIA/aicr sizes it: max(nodes x 32, 32)
                nodes = sum(p.max_nodes for p in inputs.pools)
                ns = apply(f"{name}-critical-pods",
                           obj.critical_priority_quota(obj.GPU_OPERATOR_NAMESPACE, inputs.labels, max(nodes * 32, 32)),
                           pulumi.ResourceOptions(parent=self, depends_on=[ns]))
            values = obj.gpu_operator_values(inputs.platform.gpu_sharing, inputs.driver_on_host)
            if inputs.slurm is not None and inputs.slurm.job_mapping:
                # Slurm's prolog writes the job id per GPU there; dcgm-exporter adds it as the hpc_job label
                # (GPU Operator 25.10.1+ dcgmExporter.hpcJobMapping, commented in the chart's values at v26.7.0).
                values["dcgmExporter"]["hpcJobMapping"] = {"enabled": True, "directory": obj.JOB_MAPPING_DIR}
            # The GPU agents wait for the GPU nodes where the cloud lets the rest of the platform go ahead without
            # them: an atomic release that starts while 16 nodes are joining could time out and roll back.
            release("gpu-operator", charts["gpu-operator"], obj.GPU_OPERATOR_NAMESPACE,
                    obj.merge_values(values, inputs.gpu_operator_overrides or {}),
                    pulumi.ResourceOptions(parent=self, depends_on=[ns, prometheus, *inputs.gpu_node_dependencies]))
        fabric = inputs.fabric
        slurm_pools = [p.pool for p in inputs.slurm.pools] if inputs.slurm is not None else []
        if fabric is not None and any(p.fabric_per_node for p in [*inputs.pools, *slurm_pools]):
            release(fabric.plugin_release, charts[fabric.plugin_chart], fabric.plugin_namespace,
                    fabric.plugin_values, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


class Tenancy(pulumi.ComponentResource):
    """One isolated namespace per team, and the cluster-wide admission policies.

    Attributes:
        namespaces: the team namespaces by team name (LocalQueues are created in them).
    """

    namespaces: dict[str, pulumi.Resource]

    def __init__(self, name: str, inputs: PlatformInputs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:Tenancy", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        pools = inputs.pools_by_name
        fabric_name = inputs.fabric.resource_name if inputs.fabric else None
        covered = obj.covered_resources(inputs.pools, fabric_name)
        fabric_resource = fabric_name if fabric_name in covered else None
        self.namespaces = {}
        lendable = lendable_by_pool(list(inputs.teams), pools)
        for team in inputs.teams:
            # The namespace says which POSIX group is the team's (it owns the team's directory on the shared
            # filesystem), so every pod adds it (securityContext.supplementalGroups: the gpu-cluster-team-gid policy
            # refuses one that does not) and `blueprint admit` can say so. Every stack labels it, with or without a
            # filesystem today: a job written for one stack runs on the others, and on a filesystem added later.
            gid = {obj.TEAM_GID_LABEL: str(team.posix_gid)}
            ns = apply(f"{name}-ns-{team.name}",
                       obj.namespace(team.name, {**obj.team_labels(team, inputs.labels), **gid},
                                     inputs.tenant_pod_security,
                                     tenant=True, warn_level="baseline" if inputs.tenant_pod_security != "baseline"
                                     else None),
                       child)
            self.namespaces[team.name] = ns
            in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns])
            hard = namespace_hard_limits(team, list(inputs.teams), pools, inputs.platform.cohort, lendable)
            hard = hard + cpu_quota_room(team, inputs.cpu_pools_by_name)
            if inputs.injected_sidecar is not None:
                hard = hard + sidecar_headroom(team, pools, inputs.injected_sidecar, inputs.cpu_pools_by_name)
            manifests = [
                *([obj.service_account(inputs.checkpoint_service_account, team.name,
                                       obj.team_labels(team, inputs.labels),
                                       f"read and write {inputs.bucket_scheme}://<checkpoint bucket>/{team.name}/")]
                  if inputs.checkpoint_service_account else []),
                obj.team_role(team),
                obj.team_role_binding(team),
                obj.resource_quota(team, hard, fabric_resource),
                obj.limit_range(team, [pools[q.node_group] for q in team.quotas if q.node_group in pools]),
                *obj.network_policies(team, inputs.platform.allow_https_egress, inputs.extra_egress,
                                       inputs.anywhere, push_metrics=inputs.checkpoint_metrics),
                *([obj.checkpoint_policy(team, inputs.labels, {
                    **inputs.checkpoint_policy, **(obj.checkpoint_push_settings(team.name) if inputs.checkpoint_metrics
                                                   else {})})]
                  if inputs.checkpoint_policy is not None else []),
                *(inputs.team_objects or {}).get(team.name, ()),
            ]
            for m in manifests:
                apply(object_name(name, m), m, in_ns)
            if inputs.shared_filesystem is not None:
                pv, pvc = obj.team_shared_fs(inputs.shared_filesystem, team, obj.team_labels(team, inputs.labels))
                # Named by role, not by the volume's name (which ends in the filesystem's generation); the claim
                # waits for its volume, since pulumi-kubernetes gives a claim five minutes to bind.
                volume = apply(f"{name}-persistentvolume-shared-fs-{team.name}", pv, child)
                apply(f"{name}-persistentvolumeclaim-{team.name}-{obj.SHARED_FS_CLAIM}", pvc,
                      pulumi.ResourceOptions(parent=self, depends_on=[ns, volume]))
        allowed = [*inputs.platform.allowed_registries,
                   *(r for r in inputs.system_registries if r not in inputs.platform.allowed_registries)]
        limits = [*obj.gpudirect_pod_policy(inputs.gpudirect_pod_rules),
                  *obj.gpudirect_exec_policy(inputs.gpudirect_pod_rules)] if inputs.gpudirect_pod_rules is not None \
            else []
        fs = inputs.shared_filesystem
        subpaths = obj.subpath_policy() if fs is not None and not fs.scoped else []
        for m in [*obj.registry_policy(allowed), *obj.privileged_policy(inputs.cloud_namespaces), *limits, *subpaths,
                  *(obj.team_gid_policy([t.posix_gid for t in inputs.teams]) if inputs.teams else []),
                  *(obj.team_priority_policy() if inputs.teams else []),
                  *(obj.team_viewer_role(inputs.teams) if inputs.teams else [])]:
            apply(object_name(name, m), m, child)
        self.register_outputs({})


class SharedStorage(pulumi.ComponentResource):
    """The platform's side of the shared filesystem: its whole tree claimed in kube-system, and the Job that creates
    each team's directory, owned by the team's group (the teams' own claims are made with their namespaces)."""

    def __init__(self, name: str, inputs: PlatformInputs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:SharedStorage", name, provenance.props(), opts)
        fs = inputs.shared_filesystem
        assert fs is not None
        pv, pvc = obj.admin_shared_fs(fs, inputs.labels)
        volume = apply(f"{name}-admin-pv", pv, pulumi.ResourceOptions(parent=self))
        claim = apply(f"{name}-admin-pvc", pvc, pulumi.ResourceOptions(parent=self, depends_on=[volume]))
        roots = [obj.HOME_DIR] if inputs.slurm is not None and inputs.slurm.shared_filesystem else []
        self.dirs = apply(f"{name}-team-dirs", obj.team_dirs_job(fs, inputs.teams, inputs.labels, roots),
                          pulumi.ResourceOptions(parent=self, depends_on=[claim, *fs.ready]))
        self.register_outputs({})


class Queues(pulumi.ComponentResource):
    """Kueue and the queue objects: flavors, cohort, one ClusterQueue and LocalQueue per team,
    priority classes, and the network topology for placed node groups.

    Attributes:
        kueue: the Kueue release (queue objects elsewhere wait for its webhooks).
    """

    kueue: k8s.helm.v3.Release

    def __init__(self, name: str, inputs: PlatformInputs, prometheus: pulumi.Resource,
                 namespaces: Mapping[str, pulumi.Resource], opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:Queues", name, provenance.props(), opts)
        charts = load_charts()
        ns = system_namespace(self, obj.KUEUE_NAMESPACE, inputs)
        serving_s = max((serving_ready_allowance_s(m) for m in inputs.serving), default=0)
        kueue = release("kueue", charts["kueue"], obj.KUEUE_NAMESPACE,
                        obj.kueue_values(inputs.pools, inputs.cpu_pools, serving_s),
                        pulumi.ResourceOptions(parent=self, depends_on=[ns, prometheus]))
        # Kueue's webhooks reject every queue object until its controller is ready ("failed calling
        # webhook mresourceflavor.kb.io", kueue#12008, #3794): the release waits for readiness, and
        # every object below waits for the release.
        self.kueue = kueue
        after = pulumi.ResourceOptions(parent=self, depends_on=[kueue])
        pools = inputs.pools_by_name
        covered = obj.covered_resources(inputs.pools, inputs.fabric.resource_name if inputs.fabric else None)
        topology = inputs.topology
        cohort_name = f"{inputs.cluster_name}-gpus" if inputs.platform.cohort else None
        manifests: list[dict[str, Any]] = []
        if topology is not None and any(p.placed for p in inputs.pools):
            manifests.append(obj.topology(topology))
        manifests += [obj.resource_flavor(p, topology.name if topology else None) for p in inputs.pools]
        cpu_pools = inputs.cpu_pools_by_name

        def tas_only(team: Any) -> bool:  # every GPU flavor of the team's queue has a topology
            gpu = team_flavor_quotas(team, pools)
            return topology is not None and bool(gpu) and all(fq.pool.placed or fq.pool.host_topology for fq in gpu)
        variants = {(fq.pool.name, tas_only(t)) for t in inputs.teams for fq in team_cpu_flavor_quotas(t, cpu_pools)}
        both = {name for name, tas in variants if (name, not tas) in variants}
        if any(tas for _, tas in variants) or (topology is not None and any(p.host_topology for p in inputs.pools)):
            manifests.append(obj.topology(obj.HOST_TOPOLOGY))
        manifests += [obj.cpu_resource_flavor(cpu_pools[name], tas, name in both) for name, tas in sorted(variants)]
        if cohort_name:
            manifests.append(obj.cohort(cohort_name))
        manifests += obj.priority_classes()
        if any(p.queued for p in inputs.pools):
            manifests += obj.provisioning_request_check(covered)
        manifests += [obj.cluster_queue(
            t, team_flavor_quotas(t, pools), cohort_name, covered, team_cpu_flavor_quotas(t, cpu_pools),
            [obj.cpu_flavor_name(fq.pool, tas_only(t), fq.pool.name in both)
             for fq in team_cpu_flavor_quotas(t, cpu_pools)]) for t in inputs.teams]
        # A ClusterQueue waits for the flavors it names: when a flavor with a topology changes it is a new object
        # under a new name (obj.topology_flavor_name), which must exist before the queues move to it; Pulumi deletes
        # the old one after the updates, and Kueue's resource-in-use finalizer holds it until no queue names it.
        flavors: dict[str, pulumi.Resource] = {}
        for m in manifests:
            names = {str(f["name"]) for g in m["spec"].get("resourceGroups", []) for f in g["flavors"]} \
                if m["kind"] == "ClusterQueue" else set()
            opts = after if not names else pulumi.ResourceOptions(
                parent=self, depends_on=[kueue, *(flavors[n] for n in sorted(names))])
            resource = apply(object_name(name, m), m, opts)
            if m["kind"] == "ResourceFlavor":
                flavors[str(m["metadata"]["name"])] = resource
        for team in inputs.teams:
            m = obj.local_queue(team)
            apply(object_name(name, m), m,
                  pulumi.ResourceOptions(parent=self, depends_on=[kueue, namespaces[team.name]]))
        self.register_outputs({})


class Controllers(pulumi.ComponentResource):
    """The job controllers the queues admit work for (objects/controllers.py): JobSet and Kubeflow Trainer v2 from
    their pinned charts with the torch-distributed runtime, and the MPI Operator from its pinned release manifest
    (the acceptance gate's MPIJobs use it too).

    Attributes:
        mpi_operator: the MPI Operator's manifest (MPIJobs wait for its CRD).
    """

    mpi_operator: pulumi.Resource

    def __init__(self, name: str, inputs: PlatformInputs, kueue: pulumi.Resource,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:platform:Controllers", name, provenance.props(), opts)
        charts = load_charts()
        catalog = load_acceptance()
        self.mpi_operator = k8s.yaml.v2.ConfigFile(
            f"{name}-mpi-operator", file=catalog.operator_manifest, opts=pulumi.ResourceOptions(parent=self))
        # The pinned manifest creates the operator's namespace (mpi-operator); its egress is closed like the others'.
        egress_policies(self, obj.MPI_OPERATOR_NAMESPACE, self.mpi_operator, inputs)
        jobset_ns = system_namespace(self, obj.JOBSET_NAMESPACE, inputs)
        jobset = release("jobset", charts["jobset"], obj.JOBSET_NAMESPACE,
                         obj.jobset_values(f"v{charts['jobset'].version}"),
                         pulumi.ResourceOptions(parent=self, depends_on=[jobset_ns]))
        trainer_ns = system_namespace(self, obj.TRAINER_NAMESPACE, inputs)
        # Trainer runs TrainJobs as JobSets: it waits for JobSet; Kueue suspends what it admits, so both wait for Kueue.
        trainer = release("kubeflow-trainer", charts["kubeflow-trainer"], obj.TRAINER_NAMESPACE, obj.trainer_values(),
                          pulumi.ResourceOptions(parent=self, depends_on=[trainer_ns, jobset, kueue]))
        apply(f"{name}-runtime-torch", obj.torch_runtime(pytorch_image()),
              pulumi.ResourceOptions(parent=self, depends_on=[trainer]))
        self.register_outputs({})


class Acceptance(pulumi.ComponentResource):
    """The NCCL acceptance gate: a namespace and queue of its own, per multi-node fabric node group an all_reduce_perf
    MPIJob over all its nodes (the MPI Operator comes with the controllers), and per GPU group an indexed Job running
    the single-node NVLink all_reduce on every node, each pod uploading its record to the bucket through the recorder
    service account; every job is created suspended, so ``pulumi up`` never starts a benchmark."""

    def __init__(self, name: str, inputs: PlatformInputs, kueue: pulumi.Resource, operator: pulumi.Resource,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:platform:Acceptance", name, provenance.props(), opts)
        assert inputs.acceptance_image is not None
        catalog = load_acceptance()
        fabrics = dict(inputs.acceptance_fabrics or {})
        fabric = inputs.fabric.resource_name if inputs.fabric else None
        for pool in inputs.pools:
            if fabric and pool.fabric_per_node and pool.name not in fabrics:
                fabrics[pool.name] = obj.efa_fabric(fabric, pool.fabric_per_node,
                                                    pool.instance_type in catalog.efa_device_rdma)
        # A namespace whose benchmark pods mount host paths (GKE GPUDirect) cannot enforce Pod Security baseline: it
        # says why, and the per-container GPUDirect admission policy binds it as it binds the teams' (README).
        host_paths = any(f.host_paths for f in fabrics.values())
        ns = apply(f"ns-{obj.ACCEPTANCE_NAMESPACE}",
                   obj.namespace(obj.ACCEPTANCE_NAMESPACE, inputs.labels, "privileged" if host_paths else "baseline",
                                 gpudirect=host_paths),
                   pulumi.ResourceOptions(parent=self))
        egress_policies(self, obj.ACCEPTANCE_NAMESPACE, ns, inputs)
        # The jobs name their queue (kueue.x-k8s.io/queue-name), so Kueue manages them like a team's: all-or-nothing
        # admission and waitForPodsReady.
        tested = [p for p in inputs.pools if p.gpus_per_node > 1 or (p.name in fabrics and p.max_nodes > 1)]
        covered = obj.covered_resources(tested, fabric)
        after_kueue = pulumi.ResourceOptions(parent=self, depends_on=[kueue, ns])
        apply(f"{name}-clusterqueue", obj.acceptance_cluster_queue(tested, covered), after_kueue)
        queue = apply(f"{name}-localqueue", obj.acceptance_local_queue(), after_kueue)
        recorder = inputs.acceptance_recorder
        assert recorder is not None, "the cloud names where acceptance records go"
        account = apply(f"{name}-recorder-account",
                        obj.service_account(obj.RECORDER_SERVICE_ACCOUNT, obj.ACCEPTANCE_NAMESPACE, inputs.labels,
                                            f"write {recorder.scheme}://<checkpoint bucket>/{obj.RECORDS_PREFIX}/ "
                                            "only (the per-node runs' records)"),
                        pulumi.ResourceOptions(parent=self, depends_on=[ns]))
        node_jobs = pulumi.ResourceOptions(parent=self, depends_on=[queue, account, *recorder.ready])
        # EFA registers hugepages (AWS); GKE's nodes offer none unless configured, so a request would never schedule.
        hugepages = inputs.fabric is not None
        topology = inputs.topology.node_labels[0] if inputs.topology is not None else None
        for pool in tested:
            level = topology if pool.placed else None
            if pool.name in fabrics and pool.max_nodes > 1:
                apply(f"{name}-allreduce-{pool.name}",
                      obj.nccl_mpijob(pool, inputs.acceptance_image, pool.max_nodes, fabrics[pool.name],
                                      inputs.labels, tests_dir=inputs.acceptance_tests_dir, hugepages=hugepages,
                                      topology_level=level, recorder=recorder),
                      pulumi.ResourceOptions(parent=self, depends_on=[operator, queue, account, *recorder.ready]))
            if pool.gpus_per_node > 1:
                apply(f"{name}-nodes-{pool.name}",
                      obj.nccl_node_job(pool, inputs.acceptance_image, fabrics.get(pool.name), inputs.labels,
                                        recorder, tests_dir=inputs.acceptance_tests_dir), node_jobs)
        # The storage check (issue 34): a checkpoint of the model's size written and read back on the shared
        # filesystem and, where the team's checkpoints reach it, the bucket, from the nodes the goodput model counts;
        # recorded under acceptance/storage/; on the largest tested group, behind the same held queue.
        from components.kubernetes.objects.storage_check import (
            STORAGE_CHECK_SERVICE_ACCOUNT,
            storage_check_job,
            storage_check_pool,
            storage_check_volume,
        )
        check, fs, pool_for_check = inputs.storage_check, inputs.shared_filesystem, storage_check_pool(tested)
        if check is not None and (fs is not None or not check.filesystem) and pool_for_check is not None:
            after: list[pulumi.Resource] = [queue, account, *recorder.ready]
            if check.filesystem and fs is not None:
                pv, pvc = storage_check_volume(fs, inputs.labels)
                volume = apply(f"{name}-storage-check-pv", pv, pulumi.ResourceOptions(parent=self))
                after.append(apply(f"{name}-storage-check-pvc", pvc,
                                   pulumi.ResourceOptions(parent=self, depends_on=[ns, volume])))
            if check.bucket:
                assert inputs.storage_check_ready, "the cloud binds the storage check's identity"
                after.append(apply(
                    f"{name}-storage-check-account",
                    obj.service_account(STORAGE_CHECK_SERVICE_ACCOUNT, obj.ACCEPTANCE_NAMESPACE, inputs.labels,
                                        f"write, read and delete {recorder.scheme}://<checkpoint bucket>/"
                                        f"{obj.RECORDS_PREFIX}/storage/ only (the storage check's bucket leg)"),
                    pulumi.ResourceOptions(parent=self, depends_on=[ns])))
                after.extend(inputs.storage_check_ready)
            apply(f"{name}-storage-check",
                  storage_check_job(check, pool_for_check, fs if check.filesystem else None, recorder, inputs.labels),
                  pulumi.ResourceOptions(parent=self, depends_on=after))
        self.register_outputs({})


class NodeAutoscaler(pulumi.ComponentResource):
    """The cloud's node autoscaler from its pinned chart, after the identity it calls the cloud with exists."""

    def __init__(self, name: str, autoscaler: CloudRelease, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:compute:NodeAutoscaler", name, provenance.props(), opts)
        release(autoscaler.release, load_charts()[autoscaler.chart], autoscaler.namespace, autoscaler.values,
                pulumi.ResourceOptions(parent=self, depends_on=list(autoscaler.ready)))
        self.register_outputs({})


class CloudObjects(pulumi.ComponentResource):
    """What the cloud needs on the cluster before workloads run: its node agents' pinned manifests (GKE: the NCCL
    GPUDirect plugin installer and the NRI device injector) and cluster objects (GKE: the GPU networks pods attach
    to, the storage classes of its CSI drivers)."""

    def __init__(self, name: str, inputs: PlatformInputs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:platform:CloudObjects", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        after_gpu_nodes = pulumi.ResourceOptions(parent=self, depends_on=list(inputs.gpu_node_dependencies))
        for file_name, source in inputs.cloud_manifests:
            k8s.yaml.v2.ConfigFile(f"{name}-{file_name}", file=source, opts=after_gpu_nodes)
        for m in inputs.cloud_objects:
            apply(object_name(name, m), m, child)
        self.register_outputs({})


class Slurm(pulumi.ComponentResource):
    """Slurm on the cluster (Slinky): the operator and its CRDs, the auth keys, slurmdbd on the cloud's database,
    slurmctld, slurmrestd, one NodeSet per Slurm node group, the login pods and the accounts Job."""

    def __init__(self, name: str, inputs: PlatformInputs, prometheus: pulumi.Resource,
                 opts: Optional[pulumi.ResourceOptions] = None, dirs: pulumi.Resource | None = None) -> None:
        super().__init__("gpu-cluster:control-plane:Slurm", name, provenance.props(), opts)
        cluster = inputs.slurm
        assert cluster is not None
        charts = load_charts()
        child = pulumi.ResourceOptions(parent=self)
        ns = apply(f"{name}-ns", obj.slurm_namespace(inputs.labels), child)
        egress_policies(self, obj.SLURM_NAMESPACE, ns, inputs)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        # The operator in a namespace of its own (as its docs install it): its pods/binding webhook skips the
        # operator's namespace, so slurmd pods in that namespace would never get the node's topology annotation.
        op_ns = system_namespace(self, obj.SLINKY_NAMESPACE, inputs)
        # The CRDs from their own release, kept if it is ever removed: uninstalling them would delete every Slurm
        # object (the operator chart's CRDs sit in its templates, slurm-operator docs/installation.md).
        crds = release("slurm-operator-crds", charts["slurm-operator-crds"], obj.SLINKY_NAMESPACE, {},
                       pulumi.ResourceOptions(parent=self, depends_on=[op_ns], retain_on_delete=True))
        operator = release("slurm-operator", charts["slurm-operator"], obj.SLINKY_NAMESPACE,
                           obj.slurm_operator_values(),
                           pulumi.ResourceOptions(parent=self, depends_on=[op_ns, crds, prometheus]))
        # What the Slurm objects read before the operator builds them (its webhook refuses a Controller whose config
        # ConfigMaps are missing): the keys the operator reads and never creates (slurm chart templates/secrets:
        # randAscii 1024, immutable), the database password, the shared filesystem's claim, the ConfigMaps.
        inputs_ready: list[pulumi.Resource] = [ns]
        for secret, key in ((obj.SLURM_KEY_SECRET, "slurm.key"), (obj.JWT_KEY_SECRET, "jwt.key")):
            value = random.RandomPassword(f"{name}-{key.replace('.', '-')}", length=1024, special=False, opts=child)
            inputs_ready.append(k8s.core.v1.Secret(
                f"{name}-{secret}", metadata={"name": secret, "namespace": obj.SLURM_NAMESPACE,
                                               "labels": dict(inputs.labels)},
                string_data={key: value.result}, immutable=True, opts=in_ns))
        if inputs.slurm_db_password is not None:
            inputs_ready.append(k8s.core.v1.Secret(
                f"{name}-{obj.DB_SECRET}", metadata={"name": obj.DB_SECRET, "namespace": obj.SLURM_NAMESPACE,
                                                      "labels": dict(inputs.labels)},
                string_data={"password": inputs.slurm_db_password}, opts=in_ns))
        if cluster.shared_filesystem and inputs.shared_filesystem is not None:
            pv, pvc = obj.slurm_shared_fs(inputs.shared_filesystem, inputs.labels)
            volume = apply(f"{name}-shared-fs-pv", pv, in_ns)
            inputs_ready.append(apply(f"{name}-shared-fs-pvc", pvc,
                                      pulumi.ResourceOptions(parent=self, depends_on=[ns, volume])))
        if dirs is not None:
            # the homes' directory (root, 0755) before the pods mount it: kubelet would make a missing subPath
            # itself, root-only (0750), and no user could reach their home until the Job ran
            inputs_ready.append(dirs)
        # Only the login pods read sssd.conf: a store that cannot be read yet holds them back, not slurmctld or slurmd
        login_ready: list[pulumi.Resource] = []
        source = cluster.spec.login.sssd_conf_from
        if source is not None and inputs.slurm_secret_store is not None:
            # sssd.conf from the cloud's store (objects/slurm_secrets.py): External Secrets after the identity it
            # reads the store with (a pod started before its Pod Identity association gets no credentials), its CRDs
            # and webhook ready before the SecretStore and ExternalSecret (the release waits for its Deployments)
            eso_ns = system_namespace(self, obj.ESO_NAMESPACE, inputs)
            eso = release(obj.ESO_RELEASE, charts["external-secrets"], obj.ESO_NAMESPACE,
                          obj.eso_values(obj.SLURM_NAMESPACE),
                          pulumi.ResourceOptions(parent=self, depends_on=[eso_ns, ns, *inputs.slurm_secret_ready]))
            after_eso = pulumi.ResourceOptions(parent=self, depends_on=[ns, eso])
            store = apply(f"{name}-secretstore", obj.secret_store(inputs.slurm_secret_store, obj.SLURM_NAMESPACE,
                                                                  inputs.labels), after_eso)
            login_ready.append(apply(
                f"{name}-externalsecret-sssd",
                obj.sssd_external_secret(source.key, cluster.spec.login.sssd_conf_secret, obj.SLURM_NAMESPACE,
                                         inputs.labels),
                pulumi.ResourceOptions(parent=self, depends_on=[ns, eso, store])))
        objects = obj.slurm_objects(cluster)
        for m in objects:
            if m["kind"] == "ConfigMap":
                inputs_ready.append(apply(object_name(name, m), m, in_ns))
        # Then Accounting, the Controller (its config names the Accounting), the rest, and the accounts Job last (it
        # waits for slurmdbd itself, up to 15 minutes; Pulumi waits up to 30 for the Job to complete).
        stage = [operator, *inputs_ready]
        for kinds in (("Accounting",), ("Controller",), ("RestApi", "NodeSet", "LoginSet"), ("Job",)):
            made = []
            for m in objects:
                if m["kind"] in kinds:
                    made.append(apply(object_name(name, m), m, pulumi.ResourceOptions(
                        parent=self, depends_on=[*stage, *(login_ready if m["kind"] == "LoginSet" else [])],
                        custom_timeouts=pulumi.CustomTimeouts(create="30m", update="30m")
                        if m["kind"] == "Job" else None)))
            stage = [*stage, *made]
        self.register_outputs({})


def build_platform(inputs: PlatformInputs, opts: pulumi.ResourceOptions) -> None:
    """Create the platform components in dependency order, each marked with the stack-file key it comes from."""
    teams = team_items([t.name for t in inputs.teams])
    if inputs.node_autoscaler is not None:
        with from_spec(inputs.node_autoscaler.spec_path or spec_path()):
            NodeAutoscaler("node-autoscaler", inputs.node_autoscaler, opts=opts)
    if inputs.cloud_objects or inputs.cloud_manifests:
        with from_spec(inputs.cloud_objects_spec_path or spec_path()):
            CloudObjects("cloud-objects", inputs, opts=opts)
    with from_spec(spec_path("platform", "monitoring"), teams):
        monitoring = Monitoring("monitoring", inputs, opts=opts)
    with from_spec(spec_path("platform")):
        GpuStack("gpu-stack", inputs, monitoring.prometheus, opts=opts)
    if inputs.pools or inputs.slurm is not None:
        with from_spec(spec_path("platform")):
            NodeReadiness("node-readiness", inputs, opts=opts)
    with from_spec(spec_path("teams"), teams):
        tenancy = Tenancy("tenancy", inputs, opts=opts)
    dirs = None
    if inputs.shared_filesystem is not None:
        with from_spec(inputs.filesystem_spec_path or spec_path(), teams):
            dirs = SharedStorage("shared-storage", inputs, opts=opts).dirs
    with from_spec(spec_path("teams"), teams):
        queues = Queues("queues", inputs, monitoring.prometheus, tenancy.namespaces, opts=opts)
    with from_spec(spec_path("platform")):
        controllers = Controllers("controllers", inputs, queues.kueue, opts=opts)
    if inputs.serving:
        build_serving(inputs, queues.kueue, tenancy.namespaces, monitoring.prometheus, opts)
    if inputs.slurm is not None:
        with from_spec(spec_path("scheduler", "slurm"), teams):
            Slurm("slurm", inputs, monitoring.prometheus, opts=opts, dirs=dirs)
    if inputs.acceptance_image is not None:
        with from_spec(spec_path("acceptance")):
            Acceptance("acceptance", inputs, queues.kueue, controllers.mpi_operator, opts=opts)
