"""Decisions several places need, written once as functions of the spec and the catalog (which subnets a
group uses, whether its capacity is reserved, whether it gets or sits in a placement group, its AMI type),
and the syntax checks the rules and the program share."""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components.catalog import (
    InstanceFacts,
    load_aws_catalog,
)
from components.catalog.gcp_machines import MachineFacts, load_gcp_catalog
from components.catalog.gke_versions import VersionFloor, load_gke_versions
from components.catalog.versions import NodeRelease, ami_family, load_node_releases
from components.spec.aws import AwsSpec, NodeGroupSpec
from components.spec.gcp import GcpNodePoolSpec, GcpSpec, GkeBlueGreenSpec
from components.spec.inference import ServedModelSpec
from components.spec.model import ClusterSpec
from components.spec.platform import GpuSharingSpec
from components.spec.slurm import SlurmPartitionSpec
from components.spec.teams import CpuQuotaSpec, TeamSpec

_PREFIX_NOTATION = re.compile(r"^[0-9A-Fa-f.:]+/\d{1,3}$")


def parse_cidr(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | str:
    """A CIDR in prefix notation (``10.0.0.0/16``) without host bits, or the reason it is not one.

    Python also reads ``10.0.0.0/255.255.0.0`` and a bare address; AWS APIs take prefix notation only.
    """
    if not _PREFIX_NOTATION.fullmatch(value):
        return "not in prefix notation"
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        return str(err)


def covers_everything(nets: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    """Whether the networks, alone or together (0.0.0.0/1 and 128.0.0.0/1), cover a whole address family."""
    for version in (4, 6):
        family = [n for n in nets if n.version == version]
        if any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(family)):  # type: ignore[type-var]
            return True
    return False


# The /64 subnets of the /56 IPv6 block Amazon gives a VPC.
IPV6_SUBNETS = 256


def ipv6_slice_prefix(vpc: ipaddress.IPv4Network) -> int:
    """The prefix length of one of the 256 equal slices of the VPC's IPv4 CIDR (a /24 of a /16; a single address
    when the VPC holds fewer than 256)."""
    return min(32, vpc.prefixlen + 8)


def ipv6_subnet_index(vpc: ipaddress.IPv4Network, subnet: ipaddress.IPv4Network) -> int:
    """Which /64 of the VPC's /56 an IPv6 subnet gets: the slice of the VPC's IPv4 CIDR (:func:`ipv6_slice_prefix`)
    the subnet's IPv4 CIDR starts in, 0 to 255 for a subnet inside the VPC.

    Derived from the subnet's own CIDR, never from its place in ``network.subnets``: adding, removing or reordering
    subnets moves no other subnet's IPv6 block (EC2 refuses to disassociate a block whose addresses nodes, pods or
    the NAT gateway use). Two subnets that start in one slice would share a /64; the rules refuse that."""
    offset = int(subnet.network_address) - int(vpc.network_address)
    return offset >> (32 - ipv6_slice_prefix(vpc))


def _gpu_zone_given_once(aws: AwsSpec) -> bool:
    return (aws.gpu_availability_zone is None) != (aws.gpu_availability_zone_id is None)


def _gpu_zone_key(aws: AwsSpec) -> str:
    return "gpuAvailabilityZoneId" if aws.zones_by_id else "gpuAvailabilityZone"


def default_subnets(aws: AwsSpec, facts: InstanceFacts) -> list[str]:
    """The subnets a node group uses when it names none: gpu subnets for GPU types, system otherwise."""
    role = "gpu" if facts.gpu_count > 0 else "system"
    return [sn.name for sn in aws.network.subnets if sn.role == role]


def is_reserved(group: NodeGroupSpec) -> bool:
    """Whether the group runs on capacity bought ahead (a Capacity Block or an ODCR): bound to one zone and needing a
    reservation id (or, for ODCRs, a reservation group). Placed only as :func:`is_placed` says."""
    return group.capacity.type in ("capacity-block", "reserved")


def uses_placement_group(group: NodeGroupSpec, facts: InstanceFacts) -> bool:
    """Whether the program creates a cluster placement group for the group (validated specs only)."""
    if group.placement == "cluster":
        return True
    if group.placement == "none":
        return False
    return facts.efa_capable and group.max_size > 1 and not is_reserved(group) and group.placement_group_name is None


def is_placed(group: NodeGroupSpec, facts: InstanceFacts) -> bool:
    """Whether a multi-node EFA group's nodes sit close together (its placement group, an existing one, or a Capacity
    Block), so Kueue's topology-aware scheduling applies to it. AWS places a Capacity Block ("colocated in EC2
    UltraClusters", EC2 User Guide, "Capacity Blocks for ML"); an ODCR is placed only when it was created in a cluster
    placement group, which the group then names in placementGroupName (EC2 User Guide, "Capacity Reservations in
    cluster placement groups")."""
    return facts.efa_capable and group.max_size > 1 and (
        group.capacity.type == "capacity-block" or uses_placement_group(group, facts)
        or group.placement_group_name is not None)


def is_autoscaled(group: NodeGroupSpec, facts: InstanceFacts) -> bool:
    """Whether the Cluster Autoscaler manages the group: open capacity (on-demand or spot) with room between its sizes
    (minSize < maxSize), and not placed for topology-aware scheduling.

    Never reserved capacity: a Capacity Block is scaled by its schedule, and an autoscaler would launch outside the
    window and fight EKS's scale-down before the block ends; an ODCR group holds what was reserved, and a scale-up
    beyond it has no capacity to launch into (``capacity-reservations-only``). Never a placed multi-node EFA group
    (:func:`is_placed`): its Kueue flavor is topology-aware, and Kueue assigns a topology over the nodes that exist
    unless a ProvisioningRequest check provisions them first (Kueue, "Topology Aware Scheduling", ClusterAutoscaler
    support), so CA would shrink the group and never grow it back for a queued job; it keeps its desired size."""
    return not is_reserved(group) and group.min_size < group.max_size and not is_placed(group, facts)


_QUALIFIED = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def k8s_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label or taint key (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "its prefix must be a DNS subdomain (lowercase, at most 253 characters)"
    if not _QUALIFIED.fullmatch(name):
        return ("its name must be 1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None


# Labels kubelet may set on its own Node (kubernetes/kubernetes staging/src/k8s.io/kubelet/pkg/apis/
# well_known_labels.go, IsKubeletLabel): node labels reach kubelet's --node-labels on EKS managed node groups and
# GKE node pools, and kubelet refuses to start on any other key in the kubernetes.io or k8s.io namespaces
# ("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels"; terraform-aws-eks issue #3346:
# NodeCreationFailure). eksctl's validateLabels applies the same list.
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in_namespace(prefix: str, namespace: str) -> bool:
    return prefix == namespace or prefix.endswith("." + namespace)


def kubelet_label_problem(key: str) -> str | None:
    """Why kubelet refuses to set node label ``key``, or None."""
    prefix = key.partition("/")[0] if "/" in key else ""
    if not (_in_namespace(prefix, "kubernetes.io") or _in_namespace(prefix, "k8s.io")):
        return None
    if key in KUBELET_LABELS:
        # issue 35: accepted before; the node's own value (its name, zone, type) would become the group's, the same
        # on every node, and whatever spreads or places pods by it would be misplaced
        return ("the kubelet sets this label from the node itself (its name, OS, architecture, type or zone); a "
                "group's value would give every node the same one: leave it out, or use a label of your own "
                "(gpu-cluster/)")
    if any(_in_namespace(prefix, ns) for ns in KUBELET_LABEL_NAMESPACES):
        return None
    return ("kubelet sets no kubernetes.io or k8s.io label but its own (kubernetes.io/hostname, os, arch, "
            "topology.kubernetes.io/*, node.kubernetes.io/*, kubelet.kubernetes.io/*), and the node would never join; "
            "use a prefix of your own (gpu-cluster/)")


# Where a filesystem may not be mounted in a pod: runc refuses any mount inside /proc ("cannot be mounted because it
# is inside /proc", opencontainers/runc libcontainer/rootfs_linux.go checkProcMount); over /dev or /sys it hides the
# device nodes and kernel interfaces the GPU and EFA stacks use (/dev/nvidia*, /dev/infiniband, /dev/shm,
# /sys/class); over the image's own directories it hides the image (the shell, libc, CUDA, /etc/passwd).
RESERVED_MOUNT_PATHS = ("/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                        "/boot", "/run", "/var/run")


def mount_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be where pods mount the shared filesystem, or None."""
    clean = "/" + "/".join(part for part in path.split("/") if part)
    if clean == "/":
        return "the root directory is the container's image"
    for reserved in RESERVED_MOUNT_PATHS:
        if clean == reserved or clean.startswith(reserved + "/"):
            return (f"it is under {reserved}, which the container runtime and the image need (runc refuses mounts "
                    "inside /proc; /dev and /sys hold the GPU and EFA devices); use a path such as /checkpoints")
    if ".." in path.split("/") or "." in path.split("/") or "//" in path or (path.endswith("/") and path != "/"):
        return "write it in its plain form (no '.', '..', '//' or trailing '/')"
    return None


def k8s_value_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes label (or taint) value, or None; empty is allowed."""
    if value and not _QUALIFIED.fullmatch(value):
        return ("a value is empty or 1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a "
                "letter or digit")
    return None


def derive_ami_type(ng: NodeGroupSpec, facts: InstanceFacts) -> str:
    """The EKS AMI type of a group: the spec's, else :func:`default_ami_type`."""
    return ng.ami_type if ng.ami_type is not None else default_ami_type(facts)


def node_release(group: NodeGroupSpec, facts: InstanceFacts, kubernetes_version: str) -> NodeRelease | None:
    """The EKS AMI release a managed node group runs: the group's own amiReleaseVersion, else the catalog's pin for
    the cluster's minor and the group's AMI family (components/catalog/eks_node_releases.yaml); None for a custom AMI
    (EKS refuses a release beside one) and where the catalog has no pin (EKS then uses its latest)."""
    if group.ami_id is not None:
        return None
    family = ami_family(derive_ami_type(group, facts))
    if group.ami_release_version is not None:
        return NodeRelease(family=family, minor=kubernetes_version, release_version=group.ami_release_version,
                           status="stack", as_of="", source="the stack's amiReleaseVersion")
    return load_node_releases().get((family, kubernetes_version))


def default_ami_type(facts: InstanceFacts) -> str:
    """AL2023 for the instance's architecture, NVIDIA where it has GPUs (EKS AMITypes values)."""
    arch = "ARM_64" if facts.arch == "arm64" else "x86_64"
    return f"AL2023_{arch}_{'NVIDIA' if facts.gpu_count else 'STANDARD'}"


def gpu_units_per_gpu(sharing: GpuSharingSpec) -> int:
    """nvidia.com/gpu units one physical GPU advertises (time-slicing replicas, else 1)."""
    return sharing.replicas if sharing.mode == "time-slicing" else 1


def cloud_node_groups(spec: ClusterSpec) -> list[NodeGroupSpec] | list[GcpNodePoolSpec]:
    """The node groups (GKE: node pools) of the stack's cloud, for rules that do not depend on the cloud."""
    if spec.cloud == "gcp":
        return list(spec.gcp.node_pools) if spec.gcp is not None else []
    return list(spec.aws.node_groups) if spec.aws is not None else []


def group_billing_labels(spec: ClusterSpec, group_team: str | None) -> dict[str, str]:
    """The billing labels a node group's resources carry: the stack's, or, for a group dedicated to a team, the
    team's ``team`` and ``cost-center`` over them (so the team's cloud budget sees the nodes)."""
    labels = dict(spec.billing_labels)
    team = next((t for t in spec.teams if t.name == group_team), None) if group_team else None
    if team is not None:
        labels.update({"team": team.name, "cost-center": team.cost_center})
    return labels


def teams_billed_directly(spec: ClusterSpec) -> set[str]:
    """Teams with a node group dedicated to them: their cloud budget has something billed under their tag."""
    return {g.team for g in cloud_node_groups(spec) if g.team is not None}


def instance_catalog(spec: ClusterSpec) -> Mapping[str, InstanceFacts] | Mapping[str, MachineFacts]:
    """The instance catalog of the stack's cloud (a new cloud adds its catalog file and a branch here)."""
    if spec.cloud == "gcp":
        return load_gcp_catalog()
    return load_aws_catalog()


def gpudirect_pools(
    pools: list[tuple[GcpNodePoolSpec, MachineFacts]],
) -> list[tuple[GcpNodePoolSpec, MachineFacts]]:
    """The GKE pools whose machine type has GPU NICs to wire (GPUDirect-TCPX, -TCPXO or RDMA)."""
    return [(p, f) for p, f in pools if f.gpu_count and f.gpudirect != "none"]


def gcs_bucket_name(project: str, cluster: str, purpose: str) -> str:
    """The physical name of one of ``gcp.storage.buckets``: project, cluster and what it holds (never truncated: the
    rules refuse a name Cloud Storage would, over 63 characters included, rather than let two buckets share a
    prefix)."""
    return f"{project}-{cluster}-{purpose}"


def gcs_checkpoint_bucket_name(project: str, cluster: str) -> str:
    """The checkpoint bucket's name when the stack creates it: project and cluster, cut to GCS's 63 characters (as
    it always was: a stack's bucket keeps its name)."""
    return f"{project}-{cluster}-checkpoints"[:63]


# Every GPU network's subnet is a /24 unless gcp.network.gpuSubnetPrefixLength says otherwise: what stacks got before
# the setting existed, kept as the default so their subnets never move.
DEFAULT_GPU_SUBNET_PREFIX = 24


def gpu_subnet_prefix(gcp: GcpSpec) -> int:
    """The prefix length of each GPU network's subnet."""
    given = gcp.network.gpu_subnet_prefix_length
    return DEFAULT_GPU_SUBNET_PREFIX if given is None else given


def gpu_network_count(flavour: str, nics: int) -> int:
    """How many GPU subnets a GPUDirect flavour takes: one per GPU NIC, and on RDMA one more for the second gVNIC."""
    return nics + (1 if flavour == "RDMA" else 0)


def gpu_subnet_layout(cidr: str, count: int, prefix: int, gvnic_prefix: int | None = None) -> list[str]:
    """The GPU networks' subnets in order from the start of ``cidr``: ``count`` subnets of ``prefix`` (TCPX/TCPXO:
    one per VPC; RDMA: the second gVNIC network's, then the RDMA subnets). With ``gvnic_prefix`` (RDMA only) the first
    subnet is a /gvnic_prefix of its own and the others are the first ``prefix`` subnets that do not overlap it, so the
    two never overlap. Fewer than ``count`` when ``cidr`` cannot hold them (the rules refuse that)."""
    base = ipaddress.ip_network(cidr)
    if prefix < base.prefixlen or (gvnic_prefix is not None and gvnic_prefix < base.prefixlen):
        return []
    if gvnic_prefix is None:
        return [str(n) for n in itertools.islice(base.subnets(new_prefix=prefix), count)]
    gvnic = ipaddress.ip_network((base.network_address, gvnic_prefix))
    size = 2 ** (base.max_prefixlen - prefix)
    # The prefix-sized subnets inside the gVNIC one (or the one holding it) come first in cidr: skip them.
    first = max(gvnic.num_addresses, size) // size
    fits = min(count - 1, base.num_addresses // size - first)
    start = int(base.network_address) + first * size
    return [str(gvnic), *(str(ipaddress.ip_network((start + k * size, prefix))) for k in range(max(fits, 0)))]


def gke_version_floors(gcp: GcpSpec) -> list[tuple[VersionFloor, list[str]]]:
    """The GKE version floors what the stack builds needs (components/catalog/gke_versions.yaml), each with what
    brings it: GPUDirect per machine family of its pools (a family the catalog has no floor for is left out; the rules
    refuse it), Managed Lustre on the port its instances serve."""
    versions = load_gke_versions()
    catalog = load_gcp_catalog()
    needs: dict[str, tuple[VersionFloor, list[str]]] = {}
    for pool, facts in gpudirect_pools([(p, catalog[p.machine_type]) for p in gcp.node_pools
                                        if p.machine_type in catalog]):
        floor = versions.gpudirect_floors.get(facts.accelerator or "")
        if floor is not None:
            needs.setdefault(floor.what, (floor, []))[1].append(f"node pool {pool.name}, {pool.machine_type}")
    fs = gcp.storage.filesystem
    if fs is not None and fs.type == "managed-lustre":
        needs.setdefault(versions.lustre_floor.what, (versions.lustre_floor, []))[1].append("storage.filesystem")
    return list(needs.values())


def gke_checked_version(gcp: GcpSpec) -> tuple[str, str] | None:
    """The least GKE version the cluster runs, as the floors are checked against it, and where it comes from:
    minMasterVersion, or else the release channel's default as a dated GKE release note gives it (defaults only move
    forward, so a new cluster in the channel gets at least that). None when the catalog has no default for it."""
    gke = gcp.cluster
    if gke.min_master_version is not None:
        return gke.min_master_version, "minMasterVersion"
    default = load_gke_versions().channel_defaults.get(gke.release_channel)
    if default is None:
        return None
    return default.version, (f"the {gke.release_channel} channel's default version as of the GKE release notes of "
                             f"{default.announced}")


def is_compact(pool: GcpNodePoolSpec, facts: MachineFacts) -> bool:
    """Whether a GKE pool gets a compact placement policy: compact always; auto for multi-node GPUDirect pools on
    on-demand or Spot capacity. A reservation places its own VMs and flex-start VMs come from the Dynamic Workload
    Scheduler, so neither gets one from auto (and the rules refuse compact on a reservation)."""
    if pool.placement == "compact":
        return True
    return (pool.placement == "auto" and facts.gpudirect != "none" and pool.max_size > 1
            and pool.capacity.type in ("on-demand", "spot"))


@dataclass(frozen=True)
class PoolUpgrade:
    """How GKE rolls a pool (its upgradeSettings), decided once for the program and the preview."""

    strategy: str  # SURGE or BLUE_GREEN (pulumi_gcp NodePoolUpgradeSettingsArgs.strategy)
    max_surge: int | None
    max_unavailable: int | None
    blue_green: GkeBlueGreenSpec | None


def pool_upgrade(pool: GcpNodePoolSpec) -> PoolUpgrade | None:
    """The pool's upgrade settings: the stack's, with defaults by capacity. Open capacity (on-demand, Spot) surges one
    node first and drains none ahead; a reservation has no spare VM for a surge node, so it replaces one node at a
    time in place (maxSurge 0, maxUnavailable 1: the settings Google's cluster-toolkit gke-node-pool module defaults
    to for GPU pools). None for flex-start: GKE gives queued-provisioning pools its own strategy (SHORT_LIVED, which
    the provider cannot express), and settings sent there would differ from GKE's at every refresh."""
    if pool.capacity.type == "flex-start":
        return None
    given = pool.upgrade
    if given is not None and given.strategy == "blue-green":
        return PoolUpgrade("BLUE_GREEN", None, None, given.blue_green)
    surge = given.max_surge if given is not None and given.max_surge is not None else (
        1 if pool.capacity.type in ("on-demand", "spot") else 0)
    unavailable = given.max_unavailable if given is not None and given.max_unavailable is not None else (
        0 if surge else 1)
    return PoolUpgrade("SURGE", surge, unavailable, None)


def serving_node_groups(spec: ClusterSpec) -> frozenset[str]:
    """The node groups (GKE: pools) a served model runs on (inference.models): not part of the training fleet the
    goodput model counts."""
    return frozenset(m.node_group for m in spec.inference.models) if spec.inference is not None else frozenset()


def slurm_node_groups(spec: ClusterSpec) -> frozenset[str]:
    """The GPU node groups (GKE: pools) Slurm runs on; every other GPU group is Kueue's."""
    slurm = spec.scheduler.slurm
    return frozenset(slurm.node_groups) if slurm is not None else frozenset()


def team_cpu_groups(spec: ClusterSpec) -> frozenset[str]:
    """The node groups (GKE: node pools) some team has CPU quota on (``teams[].cpuQuotas``): each is a Kueue flavor
    for CPU-only team work, not a home for system pods (the rules keep another group without GPUs for those)."""
    return frozenset(q.node_group for t in spec.teams for q in t.cpu_quotas)


def slurm_cpu_groups(spec: ClusterSpec) -> frozenset[str]:
    """Slurm's node groups (GKE: pools) without GPUs: CPU-only partitions (debug, data preparation). Like a team CPU
    group they carry the team-CPU taint, so platform pods stay on the system groups; slurmd tolerates it."""
    slurm = spec.scheduler.slurm
    if slurm is None:
        return frozenset()
    catalog = instance_catalog(spec)
    out = set()
    for group in cloud_node_groups(spec):
        if group.name not in slurm.node_groups:
            continue
        facts = catalog.get(group.instance_type)
        if facts is not None and not facts.gpu_count:
            out.add(group.name)
    return frozenset(out)


def dedicated_cpu_groups(spec: ClusterSpec) -> frozenset[str]:
    """The node groups without GPUs that are not the system's: a team's CPU quota (Kueue) or Slurm's CPU partitions.
    They carry :data:`~components.spec.base.TEAM_CPU_TAINT_KEY`; the Cluster Autoscaler and the platform stay off."""
    return team_cpu_groups(spec) | slurm_cpu_groups(spec)


def acceptance_runs(spec: ClusterSpec) -> list[tuple[str, str, int]]:
    """(node group, instance type, nodes) of every run the acceptance gate creates: on each of Kueue's GPU groups with
    more than one GPU per node the per-node NVLink run (nodes 1, once on every node), and on each multi-node group with
    a fabric the pods reach (EFA; GKE GPUDirect-TCPXO or RDMA) the all_reduce over its maxSize nodes. Mirrors the
    Acceptance component (components/kubernetes/platform.py)."""
    if not spec.acceptance.enabled:
        return []
    catalog = instance_catalog(spec)
    slurm = slurm_node_groups(spec)
    runs: list[tuple[str, str, int]] = []
    for group in cloud_node_groups(spec):
        facts = catalog.get(group.instance_type)
        if facts is None or not facts.gpu_count or group.name in slurm:
            continue
        if spec.cloud == "gcp":
            fabric = getattr(facts, "gpudirect", "none") in ("TCPXO", "RDMA")
        else:
            wired = getattr(group, "efa_interfaces", None)
            efa = getattr(facts, "efa_count", 0)
            fabric = (efa if wired is None else min(wired, efa)) > 0
        if facts.gpu_count > 1:
            runs.append((group.name, group.instance_type, 1))
        if fabric and group.max_size > 1:
            runs.append((group.name, group.instance_type, group.max_size))
    return runs


def slurm_hugepages(spec: ClusterSpec, group: str) -> int:
    """GiB of 2 MiB hugepages a node group (GKE: pool) reserves at boot: what Slurm's slurmd pods there ask for, else
    none."""
    slurm = spec.scheduler.slurm
    if slurm is None or group not in slurm.node_groups or group in slurm_cpu_groups(spec):
        return 0  # a CPU partition's group reserves none: its slurmd asks for none
    return slurm.hugepages_2mi_gib


def slurm_partition_teams(teams: Sequence[TeamSpec], partition: SlurmPartitionSpec) -> list[str]:
    """The teams whose accounts may submit to a Slurm partition, by name: those it lists, else every team with a GPU
    quota on one of its node groups."""
    if partition.teams is not None:
        return sorted(partition.teams)
    groups = set(partition.node_groups)
    return sorted(t.name for t in teams if any(q.node_group in groups and q.gpus > 0 for q in t.quotas))


def pool_image_type(pool: GcpNodePoolSpec, gpu: bool) -> str:
    """The image a pool's nodes run: its imageType, else Ubuntu where the GPU Operator builds the driver (a GPU pool
    with gpuDriver operator), else Container-Optimized OS, GKE's default."""
    return pool.image_type or ("UBUNTU_CONTAINERD" if gpu and pool.gpu_driver == "operator" else "COS_CONTAINERD")


def served_group(spec: ClusterSpec, model: ServedModelSpec
                 ) -> tuple[NodeGroupSpec | GcpNodePoolSpec, InstanceFacts | MachineFacts]:
    """(the node group, its instance facts) a served model (inference.models[]) runs on, in a validated spec (the rule
    inference-node-group has checked the group exists with GPUs)."""
    group = next(g for g in cloud_node_groups(spec) if g.name == model.node_group)
    return group, instance_catalog(spec)[group.instance_type]


def picker_quota(team: TeamSpec) -> CpuQuotaSpec | None:
    """The CPU quota a team's endpoint pickers run on (inference.gateway; components/kubernetes/objects/gateway.py):
    its largest by cores (the first of equals), None without one."""
    return max(team.cpu_quotas, key=lambda q: q.cpu) if team.cpu_quotas else None
