"""The AWS side of the preview: the figures of each AWS plane, read from the graph (what the program would
create), with the catalog's hardware facts the graph cannot carry. ``blueprint/preview/render.py`` asks the cloud
module of the stack for them and renders the cloud-neutral parts itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from components.aws.autoscaler import AUTOSCALE_TAG, NODE_TEMPLATE
from components.aws.autoscaler import RELEASE as AUTOSCALER_RELEASE
from components.aws.capacity_block import BlockWindow, utc_text
from components.aws.data_access import CHECKPOINT_SERVICE_ACCOUNT
from components.aws.figures import NodeGroupFigures as NodeGroupFigures
from components.aws.figures import node_group_figures as node_group_figures
from components.aws.upgrades import pin_notes, support_notes, upgrade_lines
from components.bootstrap import is_bottlerocket
from components.catalog import AddonPin, load_addon_pins, load_aws_catalog
from components.kubernetes.objects.telemetry import spend_watch_lines
from components.planes import CloudSummary, GraphView
from components.sizing import spec_warnings
from components.sizing.plan import SCRATCH_2_MBPS_PER_TIB
from components.sizing.summary import checkpoint_lines
from components.spec import ClusterSpec, NodeGroupSpec, derive_ami_type, is_autoscaled
from components.spec.notes import spec_notes

# Checkpoint bytes per parameter when the stack gives no goodput inputs (the spec's default, with its source).

PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"


def _customisation_lines(spec: ClusterSpec) -> list[str]:
    """What each group's nodes get beyond the EKS-optimized AMI's defaults: what changes on the node."""
    catalog = load_aws_catalog()
    lines = []
    for g in spec.aws_spec().node_groups:
        facts = catalog.get(g.instance_type)
        if facts is None:
            continue
        bottlerocket = is_bottlerocket(g, facts)
        family = "Bottlerocket" if bottlerocket else "AL2023"
        if g.ami_id is not None:
            lines.append(f"  {g.name}: custom AMI {g.ami_id} ({family}, amiType {derive_ami_type(g, facts)} as built "
                         "from): EKS merges no bootstrap data, so the user data joins the node to the cluster and "
                         "registers its labels and taints" + ("; it must carry the NVIDIA driver and the EFA "
                                                              "installer" if facts.gpu_count else ""))
        if g.kubelet is not None and g.kubelet.kubelet_config():
            where = "settings.kubernetes" if bottlerocket else "the NodeConfig's kubelet config"
            lines.append(f"  {g.name}: kubelet ({where}): " + ", ".join(
                f"{k} {v if not isinstance(v, dict) else ', '.join(f'{a}={b}' for a, b in v.items())}"
                for k, v in g.kubelet.kubelet_config().items()))
            if g.kubelet.max_pods is not None and "memory" not in g.kubelet.kube_reserved and not bottlerocket:
                lines.append(f"  {g.name}: note: nodeadm sizes kubeReserved memory from its own default maxPods; "
                             "with maxPods set, give kubeReserved.memory too")
        slurm = spec.scheduler.slurm
        if slurm is not None and g.name in slurm.node_groups and slurm.hugepages_2mi_gib:
            lines.append(f"  {g.name}: {slurm.hugepages_2mi_gib * 512} hugepages of 2 MiB ({slurm.hugepages_2mi_gib} "
                         "GiB) reserved at boot (vm.nr_hugepages, before kubelet starts) for Slurm's slurmd pods")
        if g.pre_bootstrap_commands:
            lines.append(f"  {g.name}: {len(g.pre_bootstrap_commands)} command(s) run as root before kubelet starts "
                         "(cloud-init, before nodeadm's run)")
        if g.post_bootstrap_commands:
            lines.append(f"  {g.name}: {len(g.post_bootstrap_commands)} command(s) run as root once kubelet has "
                         "started (systemd unit gpu-cluster-post-bootstrap, after nodeadm-run)")
        if g.ssh is not None:
            lines.append(f"  {g.name}: SSH with key pair {g.ssh.key_name} from {', '.join(g.ssh.source_cidrs)} "
                         "(security group of its own; Session Manager works on every node)"
                         + ("; Bottlerocket's admin container is turned on for it (its SSH server, root on the "
                            "host)" if bottlerocket else ""))
        if bottlerocket:
            lines.append(f"  {g.name}: Bottlerocket: rootVolumeGiB {g.root_volume_gib} sizes the data volume "
                         "/dev/xvdb (images, pod storage); the OS volume /dev/xvda keeps the AMI's size; both "
                         "encrypted")
        if facts.efa_count and g.efa_interfaces is not None and g.efa_interfaces < facts.efa_count:
            lines.append(f"  {g.name}: {g.efa_interfaces} of the {facts.efa_count} EFA interfaces of "
                         f"{g.instance_type} wired ({g.efa_interfaces_reason}): inter-node bandwidth is capped "
                         "accordingly")
    return ["node customisation:", *lines] if lines else []


def _node_group_line(f: NodeGroupFigures) -> str:
    gpus = f"{f.gpus_per_node} x {f.gpu_model}" if f.gpus_per_node else "no GPU"
    parts = [
        f"{f.name}: {f.instance_type} ({gpus}), nodes {f.min_size}/{f.desired_size}/{f.max_size} (min/desired/max)",
        f"capacity {f.capacity_type}" + (f" {f.reservation_id}" if f.reservation_id else ""),
    ]
    if f.efa_catalog:
        parts.append(f"EFA {f.efa_per_node} of {f.efa_catalog} interfaces per node")
    if f.gpus_per_node:
        placement = "cluster placement group" if f.placement_group else "no placement group"
        if f.existing_placement_group:
            placement = f"existing placement group {f.existing_placement_group} (not created here)"
        if not f.placement_group and f.capacity_type == "CAPACITY_BLOCK":
            placement += " (a Capacity Block is placed by AWS, in an UltraCluster)"
        elif not f.placement_group and f.reservation_id:
            placement += " (an ODCR is placed only if it was created in a cluster placement group: name that one)"
        parts.append(placement)
        parts.append(f"GPUs at max {f.gpus_per_node * f.max_size}")
    if f.raid0:
        parts.append("local NVMe RAID0")
    return "; ".join(parts)


@dataclass(frozen=True)
class BlockPlan:
    """A Capacity Block of a node group: its window compared with now, and what the preview tells the operator
    (``headline`` and ``steps``, the preview's own lines); the report draws it on a timeline."""

    group: str
    reservation_id: str
    instance_type: str
    max_size: int
    window: BlockWindow
    scale_up_scheduled: bool  # the program declares the scheduled action that scales the group up at the start
    headline: str
    steps: tuple[str, ...]


def capacity_block_plans(graph: GraphView, spec: ClusterSpec, now: datetime) -> list[BlockPlan]:
    """Each Capacity Block's window, where it stands now, and the operator's steps for it."""
    plans = []
    schedules = graph.of_type("aws:autoscaling/schedule:Schedule")
    for group in spec.aws_spec().node_groups:
        cap = group.capacity
        if cap.type != "capacity-block" or not (cap.start and cap.end and cap.instance_count):
            continue
        block = BlockWindow(start=cap.start, end=cap.end, instance_count=cap.instance_count, now=now)
        headline = (
            f"Capacity Block {cap.reservation_id} ({group.name}): {block.instance_count} x {group.instance_type}, "
            f"{utc_text(block.start)} -> {utc_text(block.end)} ({block.hours:,.0f} h, paid whether nodes run or "
            f"not); now {utc_text(now)}: {block.phase.upper()}")
        scheduled = [s for s in schedules if str(s.inputs.get("scheduledActionName", "")).endswith(
            f"-{group.name}-capacity-block-start")]
        scale = (f"aws eks update-nodegroup-config --cluster-name {spec.name} --nodegroup-name "
                 f"{spec.name}-{group.name} --scaling-config minSize=0,maxSize={group.max_size},"
                 f"desiredSize={group.max_size}")
        steps = []
        if block.phase == "future" and scheduled:
            steps.append(f"the group is created at 0 nodes; a scheduled action scales it to {group.max_size} at "
                         f"{utc_text(block.start)}")
        elif block.phase == "future":
            steps.append(f"the group is created at 0 nodes; scale it when the block starts: {scale}")
        elif block.phase == "active":
            steps.append(f"the block is active: the group is created at 0 nodes; scale it now: {scale}")
        if block.phase in ("future", "active"):
            steps.append(f"operator step: scale to 0 at least 30 minutes before the block ends (by "
                         f"{utc_text(block.scale_to_zero_by)}; EC2 reclaims the instances then); EKS's own "
                         f"scheduled action does it at {utc_text(block.eks_scaledown_at)}")
            steps.append("upgrades of this node group need desiredSize 0: apply AMI or launch template changes "
                         "outside the window")
        elif block.phase == "ending":
            steps.append("EC2 is reclaiming the instances: the group must be at 0")
        else:
            steps.append("the block has ended: the group stays at 0; buy a new block and update "
                         "reservationId, start, end and instanceCount")
        plans.append(BlockPlan(group=group.name, reservation_id=str(cap.reservation_id),
                               instance_type=group.instance_type, max_size=group.max_size, window=block,
                               scale_up_scheduled=bool(scheduled), headline=headline, steps=tuple(steps)))
    return plans


def _block_lines(graph: GraphView, spec: ClusterSpec, now: datetime) -> list[str]:
    """Each Capacity Block's window, where it stands now, and the operator's steps for it."""
    return [line for plan in capacity_block_plans(graph, spec, now)
            for line in (plan.headline, *(f"  {step}" for step in plan.steps))]


HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
ASG_TAG = "aws:autoscaling/tag:Tag"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def _asg_tags(graph: GraphView) -> dict[str, dict[str, str]]:
    """The Auto Scaling group tags the graph sets, by the node group (its EKS name) they sit beside."""
    out: dict[str, dict[str, str]] = {}
    for ng in graph.of_type(NODE_GROUP):
        siblings = graph.children(ng.parent) if ng.parent else []
        tags = {str((t.inputs.get("tag") or {}).get("key")): str((t.inputs.get("tag") or {}).get("value"))
                for t in siblings if t.type == ASG_TAG}
        out[str(ng.inputs.get("nodeGroupName", ng.name))] = tags
    return out


def _left_alone(group: NodeGroupSpec, spec: ClusterSpec) -> str:
    """Why the Cluster Autoscaler does not manage a group (``is_autoscaled``)."""
    if group.capacity.type == "capacity-block":
        return (f"Capacity Block: its window's schedule scales it (to {group.max_size} at the start; EKS scales it "
                "to 0 40 minutes before the end), and an autoscaler would launch outside the window")
    if group.capacity.type == "reserved":
        return (f"reserved (ODCR): it holds what was reserved ({group.min_size}/{group.desired_size}/"
                f"{group.max_size}); size it with `aws eks update-nodegroup-config --cluster-name {spec.name} "
                f"--nodegroup-name {spec.name}-{group.name} --scaling-config ...`")
    if group.min_size == group.max_size:
        return f"minSize = maxSize: fixed at {group.max_size} node(s)"
    return (f"placed multi-node EFA group: its Kueue flavor is topology-aware and Kueue assigns a topology over the "
            f"nodes that exist (without a ProvisioningRequest check), so an autoscaler would shrink it and never grow "
            f"it back; it keeps its desired size {group.desired_size} (set minSize = maxSize to say so)")


def _autoscaler_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    """Which node groups the Cluster Autoscaler manages (the opt-in tag on their Auto Scaling group, read from the
    graph) and which it leaves alone, and why."""
    groups = spec.aws_spec().node_groups
    catalog = load_aws_catalog()
    tags = _asg_tags(graph)
    release = next((r for r in graph.of_type(HELM_RELEASE) if r.inputs.get("name") == AUTOSCALER_RELEASE), None)
    lines = []
    if release is None:
        lines.append("node autoscaler: none (no node group is on on-demand or spot capacity with minSize < maxSize)")
    else:
        values = release.inputs.get("values") or {}
        image = values.get("image") or {}
        terms = (((values.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        on = sorted({str(v) for t in terms for e in t.get("matchExpressions") or [] for v in e.get("values") or []})
        lines.append(
            f"node autoscaler: Cluster Autoscaler {image.get('tag', '?')} (chart {release.inputs.get('chart')} "
            f"{release.inputs.get('version')}, {release.inputs.get('namespace')}"
            + (f", on node group(s) {', '.join(on)}" if on else "")
            + f"); it discovers and may scale only Auto Scaling groups tagged {AUTOSCALE_TAG}=true in this cluster "
            "(its IAM role, through EKS Pod Identity, too)")
    for group in groups:
        physical = f"{spec.name}-{group.name}"
        mine = tags.get(physical, {})
        if mine.get(AUTOSCALE_TAG) == "true":
            template = sorted(f"{k.rsplit('/resources/', 1)[1]} {v}" for k, v in mine.items()
                              if k.startswith(f"{NODE_TEMPLATE}/resources/"))
            lines.append(f"  manages {group.name}: {group.min_size}..{group.max_size} nodes ({group.capacity.type}, "
                         f"desired {group.desired_size} at creation, then the autoscaler's); from 0 nodes it reads the "
                         f"group's labels, taints and {', '.join(template)} from its tags")
        elif is_autoscaled(group, catalog[group.instance_type]):
            lines.append(f"  warning: {group.name} is on {group.capacity.type} capacity with minSize < maxSize but "
                         f"its Auto Scaling group is not tagged {AUTOSCALE_TAG}=true: nothing grows it")
        else:
            lines.append(f"  leaves alone {group.name}: {_left_alone(group, spec)}")
    if release is not None:
        lines.append("  scale-down (CA's defaults): a node whose pods request under half of it (its GPUs on a GPU "
                     "node, its CPU or memory otherwise) for 10 minutes is drained when they fit on other nodes; never "
                     "one running a pod with emptyDir or hostPath volumes, a kube-system pod or a pod of a custom "
                     "controller (an MPIJob's workers); a Job's pod that must not be moved carries the annotation "
                     "cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"")
    return lines


def _nvme_lines(spec: ClusterSpec) -> list[str]:
    """Groups whose local NVMe stays unused because the catalog does not confirm the type has any."""
    catalog = load_aws_catalog()
    lines = []
    for group in spec.aws_spec().node_groups:
        facts = catalog.get(group.instance_type)
        if group.local_nvme == "auto" and facts is not None and facts.has_local_nvme is None:
            lines.append(f"note: {group.name}: localNvme auto found no confirmed local NVMe for {group.instance_type} "
                         "in the catalog, so no RAID0 is written; confirm the type's instance store and set raid0")
    return lines


def _data_access_lines(graph: GraphView) -> list[str]:
    """Who can read and write the checkpoint bucket (EKS Pod Identity associations)."""
    assoc = graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    teams = sorted(str(a.inputs.get("namespace")) for a in assoc
                   if a.inputs.get("serviceAccount") == CHECKPOINT_SERVICE_ACCOUNT)
    if not assoc:
        return []
    lines = []
    if teams:
        lines.append(f"team data access (EKS Pod Identity): service account <team>/{CHECKPOINT_SERVICE_ACCOUNT} "
                     f"reads and writes only s3://<bucket>/<team>/ for {', '.join(teams)}")
    return lines


def _storage_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    lines = []
    storage = spec.aws_spec().storage
    if storage.checkpoint_bucket.existing_name:
        key = storage.checkpoint_bucket.existing_kms_key_arn
        lines.append(f"existing checkpoint bucket {storage.checkpoint_bucket.existing_name}, not managed here"
                     + (f" (SSE-KMS {key})" if key else " (no KMS key given: teams get no key grant)"))
    if storage.checkpoint_bucket.existing_name:
        roles = sorted(str(r.inputs.get("name")) for r in graph.of_type("aws:iam/role:Role")
                       if str(r.name).startswith("data-access-"))
        if roles:
            lines.append("  the bucket's owner must not deny these roles in the bucket policy, its VPC endpoint policy "
                         "or the key policy: " + ", ".join(roles))
    fs_spec = storage.filesystem
    if fs_spec is not None and fs_spec.existing is not None:
        tier = fs_spec.per_unit_storage_throughput or (SCRATCH_2_MBPS_PER_TIB if fs_spec.deployment_type ==
                                                       "SCRATCH_2" else 0)
        mbps = fs_spec.capacity_gib / 1024 * tier
        lines.append(f"existing FSx for Lustre {fs_spec.existing.file_system_id} ({fs_spec.deployment_type} "
                     f"{fs_spec.capacity_gib} GiB x {tier} MB/s/TiB = {mbps:,.0f} MB/s as described), not managed "
                     "here; LNet opened between it and the nodes")
        lines += checkpoint_lines(spec, mbps)
    for b in graph.of_type("aws:s3/bucket:Bucket"):
        if not b.name.endswith("-checkpoints"):
            continue  # the cost export's bucket is the cost plane's
        versioned = any(v.inputs.get("versioningConfiguration", {}).get("status") == "Enabled"
                        for v in graph.of_type("aws:s3/bucketVersioning:BucketVersioning")
                        if v.name == f"{b.name}-versioning")
        days = [r.get("noncurrentVersionExpiration", {}).get("noncurrentDays")
                for lc in graph.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
                if lc.name == f"{b.name}-lifecycle"
                for r in lc.inputs.get("rules", []) if isinstance(r, dict)]
        days = [d for d in days if d]
        lines.append(
            f"checkpoint bucket {b.inputs.get('bucketPrefix', b.name)}*: "
            f"{'versioned' if versioned else 'NOT versioned'}, SSE-KMS, public access blocked"
            + (f", noncurrent versions expire after {days[0]} days" if days else "")
            + (", protected" if b.protect else "")
        )
    for fs in graph.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        cap_gib = int(fs.inputs.get("storageCapacity", 0))
        dtype = str(fs.inputs.get("deploymentType"))
        given = fs.inputs.get("perUnitStorageThroughput")
        per_tib = int(given) if given else (SCRATCH_2_MBPS_PER_TIB if dtype == "SCRATCH_2" else 0)
        mbps = cap_gib / 1024 * per_tib
        line = f"FSx for Lustre {dtype} {cap_gib} GiB x {per_tib} MB/s/TiB = {mbps:,.0f} MB/s"
        if dtype == "SCRATCH_2":
            line += " (baseline; SCRATCH_2 figure is secondary)"
        lines.append(line + (", protected" if fs.protect else ""))
        lines += checkpoint_lines(spec, mbps)
    return lines


def _control_plane_lines(graph: GraphView) -> list[str]:
    lines = []
    for c in graph.of_type("aws:eks/cluster:Cluster"):
        vpc = c.inputs.get("vpcConfig", {})
        access = "private" if not vpc.get("endpointPublicAccess") else \
            f"public from {', '.join(vpc.get('publicAccessCidrs') or [])}"
        enc = "KMS-encrypted secrets" if c.inputs.get("encryptionConfig") else "secrets NOT encrypted"
        logs = ", ".join(c.inputs.get("enabledClusterLogTypes") or []) or "none"
        lines.append(f"EKS {c.inputs.get('name')} {c.inputs.get('version')}: endpoint {access}; {enc}; logs: {logs}"
                     + ("; protected" if c.protect else ""))
    addons = sorted((str(a.inputs.get("addonName")), a.inputs.get("addonVersion"))
                    for a in graph.of_type("aws:eks/addon:Addon"))
    if addons:
        pins = {name: p for p in _all_addon_pins(graph) for name in [p.name]}
        lines.append("managed add-ons: " + ", ".join(
            (f"{name} {version}" if version else f"{name} (EKS default, not pinned)")
            + (" [secondary source]" if version and pins.get(name) and pins[name].status == "secondary" else "")
            for name, version in addons))
    entries = graph.of_type("aws:eks/accessEntry:AccessEntry")
    associations = graph.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    admins = {a.inputs.get("principalArn") for a in associations}
    teams = [e for e in entries if e.inputs.get("kubernetesGroups")]
    lines.append(f"access entries: {len(admins)} cluster-admin role(s), {len(teams)} team role(s) mapped to "
                 "namespace groups; no aws-auth ConfigMap")
    return lines


def _all_addon_pins(graph: GraphView) -> list[AddonPin]:
    versions = {str(c.inputs.get("version")) for c in graph.of_type("aws:eks/cluster:Cluster")}
    return [pin for v in sorted(versions) for pin in load_addon_pins(v).values()]


def _deployer_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    aws = spec.aws_spec()
    dep = aws.control_plane.deployer
    if dep.api_access == "in-vpc":
        path = (f"from inside the VPC: a self-hosted CI runner or Pulumi Deployments agent in "
                f"{', '.join(dep.runner_cidrs)} (HTTPS 443 allowed on the cluster security group)")
    else:
        path = f"through the public endpoint from {', '.join(dep.runner_cidrs)}"
    lines = [f"deployer: {dep.role_arn} (the AWS provider and the kubeconfig assume it; cluster-admin access entry "
             f"created before any Kubernetes resource) {path}"]
    attachments = graph.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")
    if attachments:
        routes = [r for r in graph.of_type("aws:ec2/route:Route") if r.inputs.get("transitGatewayId")]
        lines.append(
            f"  runner network: Transit Gateway {attachments[0].inputs.get('transitGatewayId')} attached in "
            f"{len(attachments[0].inputs.get('subnetIds') or [])} zone(s), {len(routes)} route(s) back to the runners; "
            "the endpoint's public DNS name answers with its private addresses, so no DNS forwarding is needed")
        lines.append(
            f"  outside this stack: the Transit Gateway route tables and the runners' route to {aws.network.vpc_cidr}")
    elif dep.api_access == "in-vpc":
        lines.append("  the runners sit inside this VPC: they must exist before the Kubernetes layer is applied")
    return lines


def _cost_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    """Budgets, allocation tags and the export, read from the graph; what the payer account must do."""
    lines = []
    for budget in sorted(graph.of_type("aws:budgets/budget:Budget"), key=lambda r: r.name):
        inputs = budget.inputs
        notes = inputs.get("notifications") or []
        actual = [f"{n.get('threshold', 0):g} %" for n in notes if n.get("notificationType") == "ACTUAL"]
        forecast = [f"{n.get('threshold', 0):g} %" for n in notes if n.get("notificationType") == "FORECASTED"]
        to = sorted({a for n in notes for a in n.get("subscriberEmailAddresses") or []})
        filters = [v for f in inputs.get("costFilters") or [] for v in f.get("values") or []]
        lines.append(f"budget {inputs.get('name')}: ${float(inputs.get('limitAmount') or 0):,.2f} a month on "
                     f"{', '.join(filters) or 'the whole account'}; alerts at {', '.join(actual)} actual and "
                     f"{', '.join(forecast)} forecast to {', '.join(to)}")
    budgeted = {str(v).removeprefix("user:team$") for b in graph.of_type("aws:budgets/budget:Budget")
                for f in b.inputs.get("costFilters") or [] for v in f.get("values") or []
                if str(v).startswith("user:team$")}
    shared = [t for t in spec.teams if t.name not in budgeted and t.budget is not None]
    if shared:
        lines.append("teams on shared nodes: "
                     + ", ".join(f"{t.name} ${float(t.budget.monthly_usd):,.0f}/month" for t in shared if t.budget)
                     + "; no AWS Budget for them: nothing is billed under their team tag (a node group of their own, "
                     "nodeGroups[].team, would be)")
    if graph.of_type("aws:budgets/budget:Budget"):
        lines.append("  AWS Budgets read Cost Explorer data, where the shared nodes carry the cluster's tags: the "
                     "cluster budget sees them, a team's budget only what AWS bills under its own team tag; each "
                     "team's share of the shared nodes is in the CUR export (split cost allocation data, by "
                     "namespace), not in Budgets")
    lines += spend_watch_lines([r.inputs for r in graph.of_type(PROMETHEUS_RULE)])
    for export in graph.of_type("aws:bcmdata/export:Export"):
        ex = export.inputs.get("export") or {}
        query = (ex.get("dataQueries") or [{}])[0]
        table = (query.get("tableConfigurations") or {}).get("COST_AND_USAGE_REPORT") or {}
        split = "with" if table.get("INCLUDE_SPLIT_COST_ALLOCATION_DATA") == "TRUE" else "without"
        lines.append(f"CUR 2.0 export {ex.get('name')}: {str(table.get('TIME_GRANULARITY', '?')).lower()}, Parquet, "
                     f"{split} EKS split cost allocation data (cost per pod and namespace), into a versioned, "
                     "SSE-S3, TLS-only bucket that only the Data Exports service of this account may write")
    activated = sorted(str(t.inputs.get("tagKey")) for t in
                       graph.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag"))
    keys = sorted({*spec.billing_labels, "cluster"})
    if activated:
        lines.append(f"cost allocation tags activated here: {', '.join(activated)} (AWS accepts a key about 24 hours "
                     "after it first appears on a resource: a first apply in a new account may have to be re-run)")
        pending = "enable split cost allocation data for Amazon EKS in Billing preferences"
    else:
        pending = (f"activate the cost allocation tags {', '.join(keys)}, and enable split cost allocation data for "
                   "Amazon EKS in Billing preferences")
    lines.append(f"  outside this stack (the payer account): {pending}")
    odcrs = sorted(g.name for g in spec.aws_spec().node_groups if g.capacity.type == "reserved")
    if odcrs:
        lines.append(f"  outside this stack: tag the reservations of {', '.join(odcrs)} with cluster={spec.name} "
                     "and the billing labels (they are bought, not created, here), so their charges reach the "
                     "cluster budget")
    for g in spec.aws_spec().node_groups:
        if g.capacity.type == "capacity-block":
            lines.append(f"  the cluster budget cannot see the Capacity Block of {g.name} "
                         f"({g.capacity.reservation_id}):"
                         " its fee is charged once, when the block is bought outside this stack, and carries no tag; "
                         "find it in the bill by the block's id (the CUR 2.0 export keeps line_item_resource_id and "
                         "capacity_reservation_capacity_reservation_arn) and count it against the run's plan")
    return lines


def _network_lines(graph: GraphView, spec: ClusterSpec) -> list[str]:
    net = spec.aws_spec().network
    if net.existing is not None:
        used: Counter[str] = Counter(sn.role for sn in net.subnets)
        lines = [f"existing VPC {net.existing.vpc_id} ({net.vpc_cidr}), not managed here: {len(net.subnets)} subnets "
                 "used by id (" + ", ".join(f"{k} {v}" for k, v in sorted(used.items())) + "); routing, NAT and "
                 "endpoints are the VPC owner's"]
        if graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
            lines.append("EFA security group (created in the existing VPC): all protocols from and to itself")
        return lines
    vpcs = graph.of_type("aws:ec2/vpc:Vpc")
    subnets = graph.of_type("aws:ec2/subnet:Subnet")
    roles = Counter(str(s.inputs.get("tags", {}).get("subnet-role", "?")) for s in subnets)
    nats = len(graph.of_type("aws:ec2/natGateway:NatGateway"))
    lines = [
        f"VPC {vpcs[0].inputs.get('cidrBlock') if vpcs else '?'}: {len(subnets)} subnets ("
        + ", ".join(f"{k} {v}" for k, v in sorted(roles.items())) + f"), {nats} NAT gateway(s), S3 gateway endpoint"
    ]
    if vpcs and vpcs[0].inputs.get("assignGeneratedIpv6CidrBlock"):
        lines.append("IPv6 cluster: dual-stack VPC (Amazon's /56, one /64 per subnet, addresses assigned on launch), "
                     "egress-only internet gateway for the private subnets; pods and services get IPv6 addresses, "
                     "the VPC CNI runs in IPv6 prefix mode with the AmazonEKS_CNI_IPv6_Policy grants")
    efa_rules = [r for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                 if r.name.endswith("efa-ingress-self")]
    if efa_rules:
        lines.append("EFA security group: all protocols from and to itself")
    return lines


def summarize(graph: GraphView, spec: ClusterSpec, outputs: Mapping[str, Any], now: datetime) -> CloudSummary:
    """The AWS parts of the preview: where the cluster is, each AWS plane's figures, the GPU totals and the
    closing notes (Kubernetes support, the kubeconfig command, unconfirmed EFA counts)."""
    aws = spec.aws_spec()
    zone = f"GPU zone {aws.gpu_zone}"
    if aws.zones_by_id:
        zone += (f" = {outputs.get('gpuAvailabilityZone', '?')} in this account (resolved with "
                 "aws.get_availability_zones; offline, a placeholder name)")
    figures = node_group_figures(graph)
    in_blocks = sum(f.gpus_per_node * f.max_size for f in figures if f.capacity_type == "CAPACITY_BLOCK")
    notes = support_notes(spec, now)
    notes += [f"warning: {w}" for w in spec_warnings(spec)] + spec_notes(spec, now)
    notes += pin_notes(graph, spec)
    if "kubeconfigCommand" in outputs:
        notes.append(f"kubeconfig for people (their own admin or team role): {outputs['kubeconfigCommand']}")
    unconfirmed = sorted({f.instance_type for f in figures
                          if (fa := load_aws_catalog().get(f.instance_type)) and fa.efa_interfaces.status != "confirmed"
                          and fa.efa_count})
    if unconfirmed:
        notes.append(f"note: EFA interface counts for {', '.join(unconfirmed)} are not confirmed by a primary source "
                     "(components/catalog/aws_instances.yaml)")
    return CloudSummary(
        location=f"aws {aws.region} ({zone})",
        planes={
            "network": _network_lines(graph, spec),
            "compute": [_node_group_line(f) for f in figures] + _autoscaler_lines(graph, spec)
            + _block_lines(graph, spec, now) + _nvme_lines(spec) + _customisation_lines(spec)
            + upgrade_lines(graph, spec, now),
            "storage": _storage_lines(graph, spec) + _data_access_lines(graph),
            "control-plane": _deployer_lines(graph, spec) + _control_plane_lines(graph),
            "cost": _cost_lines(graph, spec),
        },
        gpus_desired=sum(f.gpus_per_node * f.desired_size for f in figures),
        gpus_max=sum(f.gpus_per_node * f.max_size for f in figures),
        gpus_note=f" ({in_blocks} on Capacity Blocks, running only in their window)" if in_blocks else "",
        notes=notes,
    )
