"""The GCP part of the preview: node pools with their GPUs, GPU networks, reservation and placement; the network;
storage and who may use it; the control plane and who deploys it from where; budgets. Read from the graph, so
the preview shows what the program registered, not what the spec asked for."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from components.catalog.gcp_machines import gcp_storage_limits, load_gcp_catalog, rxdm_image
from components.catalog.gke_versions import load_gke_versions
from components.catalog.versions import days_left, support_warning
from components.gcp.figures import NODE_POOL as NODE_POOL
from components.gcp.figures import PoolFigures as PoolFigures
from components.gcp.figures import pool_figures as pool_figures
from components.kubernetes.objects.telemetry import spend_watch_lines
from components.planes import CloudSummary, GraphView
from components.sizing import spec_warnings
from components.sizing.summary import checkpoint_lines
from components.spec import ClusterSpec
from components.spec.decisions import gke_checked_version, gke_version_floors
from components.spec.notes import spec_notes

CLUSTER = "gcp:container/cluster:Cluster"

PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"


def _pool_lines(graph: GraphView) -> tuple[list[str], int, int]:
    lines: list[str] = []
    desired = maximum = 0
    pools = {str(p.inputs.get("name")): p for p in graph.of_type(NODE_POOL)}
    for f in pool_figures(graph):
        pool = pools[f.name]
        gpus = f.gpus_per_node
        desired += gpus * f.initial_size
        maximum += gpus * f.max_size
        gpu_text = (f"{gpus} x {f.gpu_model or '?'} ({f.accelerator}, driver {f.driver})"
                    if f.accelerator else "no GPU")
        parts = [
            f"{f.name}: {f.machine_type} ({gpu_text}), nodes "
            f"{f.min_size}/{f.initial_size}/{f.max_size} (min/initial/max) in {', '.join(f.zones)}",
            f.capacity,
            f"{f.gpu_networks} GPU networks" + (f" ({f.gpudirect})" if f.gpudirect and f.gpu_networks else ""),
            f"placement {f.placement}" if f.placement else "no compact placement policy",
        ]
        if f.local_ssds:
            parts.append(f"{f.local_ssds} local SSDs as ephemeral storage")
        lines.append(", ".join(parts))
        lines.append(f"  {f.name} rolls (a version or node configuration change): {_rolls(pool.inputs)}")
        held = any((p.get("exclusionUntilEndOfSupports") or [{}])[0].get("enabled")
                   for p in pool.inputs.get("maintenancePolicies") or [])
        pinned = pool.inputs.get("version")
        if pinned:
            lines.append(f"  {pool.inputs.get('name')} is pinned at GKE {pinned}: created at it and not auto-upgraded "
                         "by GKE until that version's end of support (the pool's maintenance exclusion, which GKE sets "
                         "only when a pool is created: on a pool created before the pin it does not hold); GKE may "
                         "still apply critical security fixes. Upgrade it by changing its version in the stack "
                         "(one node at a time), not with gcloud: a refreshed apply would set the pinned version back")
        elif held:
            lines.append(f"  {pool.inputs.get('name')} is not auto-upgraded by GKE until the control plane version's "
                         "end of support (the pool's maintenance exclusion, set when the pool is created; GKE may "
                         "still apply critical security fixes, and auto-repair or host maintenance can still "
                         "recreate a node). Upgrade it between runs: gcloud container clusters upgrade <cluster> "
                         f"--node-pool {pool.inputs.get('name')} --location {pool.inputs.get('location')} "
                         "(recreates one node at a time, no surge node on a full reservation: hold its queues "
                         "first)")
    return lines, desired, maximum


def _rolls(inputs: dict[str, Any]) -> str:
    """How GKE replaces the pool's nodes, from its upgradeSettings."""
    settings = inputs.get("upgradeSettings") or {}
    if not settings and (inputs.get("queuedProvisioning") or {}).get("enabled"):
        return ("GKE's short-lived upgrades (flex-start: nodes are not upgraded in place; the next request gets the "
                "new version)")
    if settings.get("strategy") == "BLUE_GREEN":
        policy = (settings.get("blueGreenSettings") or {}).get("standardRolloutPolicy") or {}
        batch = (f"{policy['batchNodeCount']} node(s)" if policy.get("batchNodeCount") else
                 f"{float(policy.get('batchPercentage') or 0):.0%} of the nodes")
        soak = (settings.get("blueGreenSettings") or {}).get("nodePoolSoakDuration")
        return (f"blue-green: a second pool's worth of nodes first, then the old ones drained {batch} at a time"
                + (f", deleted after a soak of {soak}" if soak else "") + " (needs capacity for both)")
    surge, unavailable = int(settings.get("maxSurge") or 0), int(settings.get("maxUnavailable") or 0)
    if surge:
        return (f"surge: {surge} new node(s) first, {unavailable} drained ahead of them" if unavailable else
                f"surge: {surge} new node(s) first, then the old one(s) drained (no node lost before its replacement "
                "is up; needs the spare capacity)")
    return f"in place: {unavailable} node(s) at a time drained and recreated (no spare VM needed)"


def _network_lines(graph: GraphView) -> list[str]:
    vpcs = graph.of_type("gcp:compute/network:Network")
    subnets = graph.of_type("gcp:compute/subnetwork:Subnetwork")
    primary = next((s for s in subnets if s.inputs.get("secondaryIpRanges")), None)
    lines = []
    if primary is not None:
        ranges = ", ".join(f"{r.get('rangeName')} {r.get('ipCidrRange')}" for r in primary.inputs["secondaryIpRanges"])
        lines.append(f"VPC subnet {primary.inputs.get('ipCidrRange')} (nodes; {ranges}), Private Google Access, "
                     f"Cloud NAT x{len(graph.of_type('gcp:compute/routerNat:RouterNat'))}")
    gpu_vpcs = [v for v in vpcs if "gpunet" in str(v.inputs.get("name")) or v.inputs.get("networkProfile")]
    if gpu_vpcs:
        mtus = sorted({str(v.inputs.get("mtu")) for v in gpu_vpcs})
        roce = [v for v in gpu_vpcs if v.inputs.get("networkProfile")]
        names = {str(v.inputs.get("name")) for v in gpu_vpcs}
        gpu_subnets = [s for s in subnets if str(s.inputs.get("network", "")).rsplit("/", 1)[-1] in names]
        prefixes = sorted({str(s.inputs.get("ipCidrRange", "?/?")).rsplit("/", 1)[-1] for s in gpu_subnets})
        sizes = ", ".join(f"/{p} ({2 ** (32 - int(p)) - gcp_storage_limits().subnet_reserved_addresses:,} nodes each)"
                          for p in prefixes if p.isdigit())
        lines.append(f"GPU networks: {len(gpu_vpcs)} VPC(s), MTU {'/'.join(mtus)}"
                     + (f", RoCE profile {roce[0].inputs['networkProfile']}" if roce else "")
                     + (f"; {len(gpu_subnets)} subnets of {sizes}" if sizes else ""))
    if graph.of_type("gcp:servicenetworking/connection:Connection"):
        lines.append("private service access (the filesystem's peering)")
    return lines


def _storage_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    lines = []
    for b in graph.of_type("gcp:storage/bucket:Bucket"):
        soft = int((b.inputs.get("softDeletePolicy") or {}).get("retentionDurationSeconds", 0)) // 86400
        hns = (b.inputs.get("hierarchicalNamespace") or {}).get("enabled")
        cmek = (b.inputs.get("encryption") or {}).get("defaultKmsKeyName")
        lines.append(
            f"bucket {b.inputs.get('name')}: uniform access, public access {b.inputs.get('publicAccessPrevention')}, "
            f"versioning {'on' if (b.inputs.get('versioning') or {}).get('enabled') else 'off'}"
            f"{' (hierarchical namespace)' if hns else ''}, soft delete {soft} d, "
            f"{'CMEK' if cmek else 'Google-managed keys'}, {'protected' if b.protect else 'not protected'}")
    for fs in graph.of_type("gcp:lustre/instance:Instance"):
        cap = int(str(fs.inputs.get("capacityGib", 0)))
        tier = int(str(fs.inputs.get("perUnitStorageThroughput", 0)))
        lines.append(f"Managed Lustre {fs.inputs.get('instanceId')} in {fs.inputs.get('location')}: {cap:,} GiB at "
                     f"{tier} MB/s per TiB = {cap / 1024 * tier / 1000:,.1f} GB/s, "
                     f"{'protected' if fs.protect else 'not protected'}")
        lines += checkpoint_lines(spec, cap / 1024 * tier)
        if not fs.inputs.get("kmsKey"):
            lines.append("  encrypted with Google-managed keys, not CMEK: Managed Lustre documents that "
                         "CMEK-protected instances cannot be used from GKE (Managed Lustre 'Customer-managed "
                         "encryption keys', limitations); the checkpoint bucket and disks keep CMEK")
    fs_spec = spec.gcp_spec().storage.filesystem
    if fs_spec is not None and fs_spec.existing is not None:
        ex, tier = fs_spec.existing, fs_spec.per_unit_storage_throughput or 0
        lines.append(f"existing Managed Lustre {ex.name} in {ex.location}, not managed here (not created, priced or "
                     f"protected by this stack): mounted as {ex.ip}@tcp:/{ex.filesystem}, described as "
                     f"{fs_spec.capacity_gib:,} GiB at {tier} MB/s per TiB")
        lines += checkpoint_lines(spec, fs_spec.capacity_gib / 1024 * tier)
    for fs in graph.of_type("gcp:filestore/instance:Instance"):
        lines.append(f"Filestore {fs.inputs.get('name')} ({fs.inputs.get('tier')})")
    for fs in graph.of_type("gcp:parallelstore/instance:Instance"):
        lines.append(f"Parallelstore {fs.inputs.get('instanceId')}: {fs.inputs.get('capacityGib')} GiB")
    folders = sorted(str(f.inputs.get("name")) for f in graph.of_type("gcp:storage/managedFolder:ManagedFolder"))
    foldered = {str(f.inputs.get("bucket")) for f in graph.of_type("gcp:storage/managedFolder:ManagedFolder")}
    # gcp.storage.buckets: the teams' grants on the whole bucket and the GCS FUSE claims of it in their namespaces.
    modes = {"roles/storage.objectViewer": "read", "roles/storage.objectUser": "read-write"}
    volumes = graph.of_type("kubernetes:core/v1:PersistentVolume")
    for b in graph.of_type("gcp:storage/bucket:Bucket"):
        name = str(b.inputs.get("name"))
        if name in foldered:
            continue
        teams = sorted((str(m.inputs.get("member")).split("/ns/", 1)[1].split("/", 1)[0], modes[str(m.inputs["role"])])
                       for m in graph.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
                       if m.inputs.get("bucket") == name and m.inputs.get("role") in modes
                       and "/ns/" in str(m.inputs.get("member")))
        claims = {}
        for pv in volumes:
            csi = (pv.inputs.get("spec") or {}).get("csi") or {}
            ref = (pv.inputs.get("spec") or {}).get("claimRef") or {}
            if csi.get("volumeHandle") == name:
                claims[str(ref.get("namespace"))] = (str(ref.get("name")), csi.get("readOnly") is True)
        if not teams:
            lines.append(f"bucket {name}: no team has access")
            continue
        lines.append(f"bucket {name} access (Workload Identity, ns/<team>/sa/checkpoints, the whole bucket): "
                     + ", ".join(f"{team} {mode}" + (f" (claim {claims[team][0]}"
                                                     + (", read-only)" if claims[team][1] else ")")
                                                     if team in claims else " (no claim)")
                                 for team, mode in teams))
    if folders:
        lines.append(f"checkpoint access (Workload Identity): ns/<team>/sa/checkpoints may read and write its managed "
                     f"folder only ({', '.join(folders)}); no identity reads every folder")
    return lines


def _control_plane_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    g = spec.gcp_spec()
    lines = []
    dep = g.cluster.deployer
    where = {
        "dns-endpoint": "through the control plane's DNS endpoint (IAM-authorized; no network path needed)",
        "in-vpc": f"from {', '.join(dep.runner_cidrs)} in the VPC or a network connected to it (Cloud VPN or "
                  "Interconnect advertising the control plane's range: outside this stack), to the private endpoint",
        "authorized-networks": f"from {', '.join(dep.runner_cidrs)} to the public endpoint",
    }[dep.api_access]
    lines.append(f"deployer: {dep.service_account}, impersonated by the runner (which needs "
                 f"roles/iam.serviceAccountTokenCreator on it and gcloud with gke-gcloud-auth-plugin), {where}; it "
                 "needs roles/container.admin and the rights to create the rest (it is not granted here)")
    for c in graph.of_type(CLUSTER):
        priv = c.inputs.get("privateClusterConfig", {})
        authorized = c.inputs.get("masterAuthorizedNetworksConfig") or {}
        nets = [b.get("cidrBlock") for b in authorized.get("cidrBlocks", [])]
        mon = (c.inputs.get("monitoringConfig") or {}).get("enableComponents", [])
        logs = (c.inputs.get("loggingConfig") or {}).get("enableComponents", [])
        lines.append(
            f"GKE {c.inputs.get('name')} ({c.inputs.get('location')}), channel "
            f"{(c.inputs.get('releaseChannel') or {}).get('channel')}, private nodes, "
            f"{'private IP endpoint' if priv.get('enablePrivateEndpoint') else 'public IP endpoint'} "
            f"(authorized: {', '.join(map(str, nets)) or 'none beyond the VPC'})"
            + ("; DNS endpoint on" if (c.inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig", {})
               .get("allowExternalTraffic") else "") + "; Dataplane V2"
            + (", multi-networking" if c.inputs.get("enableMultiNetworking") else "")
            + "; Workload Identity; secrets "
            + ("CMEK" if c.inputs.get("databaseEncryption") else "Google-managed keys"))
        lines.append(f"telemetry: Managed Prometheus ({'with' if 'DCGM' in mon else 'without'} DCGM); logging "
                     f"{', '.join(map(str, logs))}")
        if (c.inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig", {}).get(
                "allowExternalTraffic"):
            lines.append("  the DNS endpoint takes traffic from any network that reaches Google APIs, gated by IAM "
                         "(container.clusters.connect) and RBAC; to bound it by network too, put the project in a VPC "
                         "Service Controls perimeter restricting container.googleapis.com and "
                         "kubernetesmetadata.googleapis.com (GKE network isolation: the perimeter protects the DNS "
                         "endpoint; outside this stack)")
    floors, checked = gke_version_floors(g), gke_checked_version(g)
    if floors and checked:
        lines.append(f"GKE version: {checked[0]} or later ({checked[1]}), which meets what the stack needs: "
                     + "; ".join(f"{floor.what} {floor.short()}" for floor, _ in floors)
                     + " (components/catalog/gke_versions.yaml, checked at load)")
    return lines


def _cost_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    budgets = graph.of_type("gcp:billing/budget:Budget")
    if not budgets:
        return ["no budgets: the stack names no billing account (gcp.billingAccount); GKE cost allocation is on, so "
                "the Cloud Billing export carries cost per namespace"]
    lines = []
    for b in sorted(budgets, key=lambda r: r.name):
        amount = (b.inputs.get("amount") or {}).get("specifiedAmount", {})
        labels = (b.inputs.get("budgetFilter") or {}).get("labels", {})
        lines.append(f"budget {b.inputs.get('displayName')}: ${int(str(amount.get('units', 0))):,}/month on "
                     + ", ".join(f"{k}={v}" for k, v in labels.items()))
    budgeted = {str(v) for b in budgets for k, v in ((b.inputs.get("budgetFilter") or {}).get("labels") or {}).items()
                if k == "team"}
    shared = [t for t in spec.teams if t.name not in budgeted and t.budget is not None]
    if shared:
        lines.append("teams on shared nodes: "
                     + ", ".join(f"{t.name} ${float(t.budget.monthly_usd):,.0f}/month" for t in shared if t.budget)
                     + "; no Cloud Billing budget for them: nothing is billed under their team label (a node pool of "
                     "their own, nodePools[].team, would be)")
    lines += spend_watch_lines([r.inputs for r in graph.of_type(PROMETHEUS_RULE)])
    lines.append("team budgets see what carries the team label; shared GPU nodes carry the cluster's labels (the "
                 "cluster budget); each team's share of them is in the Cloud Billing export by namespace (GKE cost "
                 "allocation, BigQuery export only)")
    return lines


def gke_support_notes(spec: ClusterSpec, now: datetime) -> list[str]:
    """The warning that the cluster's minor (minMasterVersion's, else its channel's default) leaves GKE standard
    support within upgrades.supportWarningDays (components/catalog/gke_versions.yaml, secondary dates)."""
    checked = gke_checked_version(spec.gcp_spec())
    if checked is None:
        return []
    minor = ".".join(checked[0].split("-")[0].split(".")[:2])
    end = load_gke_versions().end_of_standard_support.get(minor)
    if end is None:
        return []
    date, status = end
    ends = datetime.fromisoformat(date).replace(tzinfo=UTC)
    if days_left(ends, now) < 0:
        return [f"warning: Kubernetes {minor} left GKE standard support on {date}, as the GKE release schedule "
                f"predicts it ({status}; components/catalog/gke_versions.yaml): GKE upgrades such a control plane "
                "on its own (or bills extended support on the EXTENDED channel); raise minMasterVersion one minor at "
                "a time (docs/upgrades.md)"]
    warning = support_warning("GKE", minor, ends, now, spec.upgrades.support_warning_days)
    if warning is None:
        return []
    return [f"warning: {warning}, as the GKE release schedule predicts it ({status}; components/catalog/"
            f"gke_versions.yaml): GKE upgrades the control plane then; move minMasterVersion one minor "
            "(docs/upgrades.md)"]


def summarize(graph: GraphView, spec: ClusterSpec, outputs: Mapping[str, Any], now: datetime) -> CloudSummary:
    """The GCP parts of the preview."""
    g = spec.gcp_spec()
    pools, desired, maximum = _pool_lines(graph)
    installers = [r.name for r in graph.of_type("kubernetes:yaml/v2:ConfigFile") if "cloud-objects" in r.name]
    compute = pools + ([f"GPUDirect node agents: {', '.join(n.removeprefix('cloud-objects-') for n in installers)}"]
                       if installers else [])
    catalog = load_gcp_catalog()
    sidecars = sorted({image for p in g.node_pools if p.machine_type in catalog
                       and (image := rxdm_image(catalog[p.machine_type].gpudirect))})
    compute += [f"GPUDirect pods run the RxDM sidecar {image} beside NCCL (the one the pinned plugin installer "
                "matches: components/catalog/gke_manifests.yaml rxdm_image)" for image in sidecars]
    notes = [f"warning: {w}" for w in spec_warnings(spec)] + spec_notes(spec, now)
    notes += gke_support_notes(spec, now)
    if any(p.gpu_driver == "operator" for p in g.node_pools):
        from components.gcp.cloud import GKE_OPERATOR_ISSUES

        notes.append(f"warning: gcp.nodePools[].gpuDriver operator: {GKE_OPERATOR_ISSUES}")
    if "kubeconfigCommand" in outputs:
        notes.append(f"kubeconfig for people: {outputs['kubeconfigCommand']}")
    if any(catalog[p.machine_type].zones is None for p in g.node_pools if catalog[p.machine_type].gpu_count):
        notes.append(f"note: the catalog has no confirmed zone list for these GPU machine types; check that "
                     f"{g.gpu_zone} offers them (blueprint preflight, or gcloud compute accelerator-types list)")
    return CloudSummary(
        location=f"gcp {g.project} {g.region} (GPU zone {g.gpu_zone})",
        planes={
            "network": _network_lines(graph),
            "compute": compute,
            "storage": _storage_lines(graph, spec),
            "control-plane": _control_plane_lines(graph, spec),
            "cost": _cost_lines(graph, spec),
        },
        gpus_desired=desired,
        gpus_max=maximum,
        notes=notes,
    )
