"""Rules on the compute plane: node groups, capacity, Capacity Block windows, labels, taints, types."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from components.catalog import (
    InstanceFacts,
    load_aws_catalog,
)
from components.spec.aws import AwsSpec, NodeGroupSpec, TaintSpec
from components.spec.base import _RESERVATION_RE, GPU_TAINT_KEY, MAX_TAINTS, USER_DATA_LIMIT
from components.spec.decisions import (
    _gpu_zone_given_once,
    _gpu_zone_key,
    covers_everything,
    dedicated_cpu_groups,
    default_ami_type,
    default_subnets,
    derive_ami_type,
    gpu_units_per_gpu,
    is_reserved,
    k8s_key_problem,
    k8s_value_problem,
    kubelet_label_problem,
)
from components.spec.errors import _Collector, _path
from components.spec.model import ClusterSpec
from components.spec.rules.cidrs import valid_cidrs

# Capacity Blocks as EC2 sells them (EC2 user guide, "How Capacity Blocks work" and "Find and purchase Capacity
# Blocks", read 2026-12-01): "up to 64 instances per Capacity Block"; durations "in 1-day increments up to 14 days,
# and in 7-day increments up to 182 days"; "All Capacity Blocks end at 11:30AM UTC"; "a start time up to 8 weeks in
# advance". A block that starts at once may begin at any time of day (the API's example: 04:55 to 11:30), so the
# duration is counted in started days.
MAX_BLOCK_INSTANCES = 64
BLOCK_DAYS = frozenset(range(1, 15)) | frozenset(range(21, 183, 7))
BLOCK_END_TIME = (11, 30)
BLOCK_MAX_LEAD = timedelta(weeks=8)


def _check_block_window(start: datetime, end: datetime, count: int | None, now: datetime, where: str,
                        out: _Collector) -> None:
    """The recorded window and size are ones EC2 sells, and the block has not ended."""
    if count is not None and not 1 <= count <= MAX_BLOCK_INSTANCES:
        out.add(f"{where}.capacity.instanceCount", "capacity-block-window",
                f"a Capacity Block has 1 to {MAX_BLOCK_INSTANCES} instances (EC2 user guide, Capacity Blocks), got "
                f"{count}")
    utc_end = end.astimezone(UTC)
    if (utc_end.hour, utc_end.minute, utc_end.second) != (*BLOCK_END_TIME, 0):
        out.add(f"{where}.capacity.end", "capacity-block-window",
                f"every Capacity Block ends at 11:30 UTC (EC2 user guide, Capacity Blocks); {_utc(end)} is not a "
                "block's end: copy EndDate from `aws ec2 describe-capacity-reservations`")
    if end > start:
        days = math.ceil((end - start) / timedelta(days=1))
        if days not in BLOCK_DAYS:
            out.add(f"{where}.capacity.end", "capacity-block-window",
                    f"the window {_utc(start)} to {_utc(end)} spans {days} days; Capacity Blocks last 1 to 14 days, "
                    "or 21 to 182 days in steps of 7 (EC2 user guide, Capacity Blocks)")
    if now >= end:
        out.add(f"{where}.capacity.end", "capacity-block-window",
                f"the block ended on {_utc(end)}: its instances are gone; record the next block (reservationId, "
                "start, end, instanceCount) or change the group's capacity type")
    elif start - now > BLOCK_MAX_LEAD:
        out.add(f"{where}.capacity.start", "capacity-block-window",
                f"the block starts on {_utc(start)}, more than 8 weeks from now ({_utc(now)}); EC2 sells blocks "
                "that start at most 8 weeks ahead, so no block bought by today starts then: check the start")


def _check_capacity_block(ng: NodeGroupSpec, where: str, now: datetime, out: _Collector) -> None:
    """A Capacity Block is a dated window of a fixed number of instances: the spec records it, and the
    node group is sized so that it can be created, updated and left outside the window."""
    cap = ng.capacity
    given = {"start": cap.start, "end": cap.end, "instanceCount": cap.instance_count}
    if cap.type != "capacity-block":
        for key, value in given.items():
            if value is not None:
                out.add(f"{where}.capacity.{key}", "capacity-block-window",
                        f"{key} only applies to capacity-block capacity, not '{cap.type}'")
        return
    for key, value in given.items():
        if value is None:
            out.add(f"{where}.capacity.{key}", "capacity-block-window",
                    f"capacity-block capacity needs the block's {key} (start and end in UTC, and the instance "
                    "count, as shown by `aws ec2 describe-capacity-reservations`): the preview shows the window "
                    "and the node group is scaled for it")
    for key, value in (("start", cap.start), ("end", cap.end)):
        if value is not None and value.utcoffset() != timedelta(0):
            out.add(f"{where}.capacity.{key}", "capacity-block-window",
                    f"{key} must be given in UTC with a Z suffix (e.g. 2027-01-04T11:30:00Z), got "
                    f"'{value.isoformat()}'")
    if cap.start is not None and cap.end is not None and cap.start.utcoffset() is not None \
            and cap.end.utcoffset() is not None:
        if cap.end <= cap.start:
            out.add(f"{where}.capacity.end", "capacity-block-window",
                    f"end ({_utc(cap.end)}) must be after start ({_utc(cap.start)})")
        _check_block_window(cap.start, cap.end, cap.instance_count, now, where, out)
    if ng.min_size > 0 or ng.desired_size > 0:
        field = "minSize" if ng.min_size > 0 else "desiredSize"
        out.add(f"{where}.{field}", "capacity-block-scales-from-zero",
                f"a capacity-block node group is created with minSize 0 and desiredSize 0 (got {ng.min_size} and "
                f"{ng.desired_size}): no instance can launch before the block starts or after it ends, and EKS "
                "needs desiredSize 0 to update such a group; its scheduled actions scale it to the block for the "
                "window (EKS user guide, capacity-blocks-mng)")
    if cap.instance_count is not None and ng.max_size > cap.instance_count:
        out.add(f"{where}.maxSize", "capacity-block-size",
                f"maxSize ({ng.max_size}) must be <= the block's instanceCount ({cap.instance_count}): nodes beyond "
                "the block cannot launch")


# Taint keys EKS refuses on managed node groups: kubernetes.io/ ("EKS have decided that kubernetes.io/anything is
# reserved and should not be set when applying a taint", alphagov/govuk-infrastructure PR #1264, 2024), and the
# prefixes the EKS API reserved for node-group labels ("Label cannot contain reserved prefixes [kubernetes.io/,
# k8s.io/, eks.amazonaws.com/]", eksctl issue #4007); EKS sets eks.amazonaws.com/ labels itself. The EKS API
# reference (Taint, UpdateLabelsPayload) limits keys and values to 63 characters, and label values to at least 1.
EKS_RESERVED_PREFIXES = ("kubernetes.io", "k8s.io", "eks.amazonaws.com")
EKS_MAX_KEY = 63


def _eks_key_problem(key: str, kind: str) -> str | None:
    prefix = key.partition("/")[0] if "/" in key else ""
    reserved = next((ns for ns in EKS_RESERVED_PREFIXES if prefix == ns or prefix.endswith("." + ns)), None)
    if reserved is not None and kind == "taint":
        return (f"the EKS node-group API refuses {kind} keys under {reserved}/ (reserved); use a prefix of your own "
                "(e.g. gpu-cluster/)")
    if reserved == "eks.amazonaws.com":
        return "EKS sets eks.amazonaws.com/ labels itself and refuses them in a node group's labels"
    if len(key) > EKS_MAX_KEY:
        return f"the EKS API takes {kind} keys of at most {EKS_MAX_KEY} characters, prefix included ({len(key)})"
    return None


def _check_node_labels(ng: NodeGroupSpec, facts: InstanceFacts, where: str, out: _Collector) -> None:
    """Labels and taints EKS and Kubernetes accept; GPU nodes keep repelling pods that ask for no GPU."""
    if len(ng.taints) > MAX_TAINTS:
        out.add(f"{where}.taints", "taint-limit", f"EKS accepts at most {MAX_TAINTS} taints per node group, "
                f"got {len(ng.taints)}")
    check_labels_and_taints(ng.labels, ng.taints, facts.gpu_count > 0, "true", where, out)
    for key, value in ng.labels.items():
        problem = _eks_key_problem(key, "label") or (
            "the EKS API takes label values of 1 to 63 characters; give a value" if value == "" else None)
        if problem:
            out.add(f"{where}{_path(['labels', key], root='')}", "eks-label-key", f"'{key}': {problem}")
    for j, taint in enumerate(ng.taints):
        problem = _eks_key_problem(taint.key, "taint")
        if problem:
            out.add(f"{where}.taints[{j}].key", "eks-taint-key", f"'{taint.key}': {problem}")


def check_labels_and_taints(labels: Mapping[str, str], taints: Sequence[TaintSpec], gpu: bool, gpu_taint_value: str,
                            where: str, out: _Collector) -> None:
    """Kubernetes label and taint syntax, no taint twice, and the GPU taint kept NoSchedule (any cloud's nodes)."""
    for key, value in labels.items():
        problem = k8s_key_problem(key) or k8s_value_problem(value)
        if problem:
            out.add(f"{where}{_path(['labels', key], root='')}", "k8s-label-syntax",
                    f"'{key}: {value}' is not a valid Kubernetes label: {problem}")
        elif (refused := kubelet_label_problem(key)) is not None:
            out.add(f"{where}{_path(['labels', key], root='')}", "kubelet-node-label", f"'{key}': {refused}")
    seen: set[tuple[str, str]] = set()
    for j, taint in enumerate(taints):
        problem = k8s_key_problem(taint.key) or k8s_value_problem(taint.value)
        if problem:
            out.add(f"{where}.taints[{j}]", "k8s-taint-syntax", f"taint '{taint.key}={taint.value}' is not valid: "
                    f"{problem}")
        if (taint.key, taint.effect) in seen:
            out.add(f"{where}.taints[{j}]", "taint-unique", f"taint {taint.key}:{taint.effect} is listed twice")
        seen.add((taint.key, taint.effect))
        if gpu and taint.key == GPU_TAINT_KEY and taint.effect != "NoSchedule":
            out.add(f"{where}.taints[{j}].effect", "gpu-taint-noschedule",
                    f"GPU nodes keep {GPU_TAINT_KEY}={gpu_taint_value}:NoSchedule so that pods without GPU requests "
                    f"stay off them; remove this taint or make it NoSchedule (got {taint.effect})")


def _check_instance_types(ng: NodeGroupSpec, facts: InstanceFacts, catalog: Mapping[str, InstanceFacts],
                          where: str, out: _Collector) -> None:
    """Several instance types for one group: CPU groups only, all known, one architecture; the AMI type
    fits the architecture and the GPUs; GPU-only options stay on GPU types."""
    if ng.instance_types is not None and facts.gpu_count:
        out.add(f"{where}.instanceTypes", "instance-types-cpu-only",
                "instanceTypes (several types) is for CPU groups; a GPU group's quotas and EFA layout need one "
                "instance type")
    elif ng.instance_types is not None:
        if ng.instance_types[0] != ng.instance_type:
            out.add(f"{where}.instanceTypes", "instance-types-cpu-only",
                    f"instanceTypes must start with instanceType ({ng.instance_type})")
        for j, other in enumerate(ng.instance_types):
            known = catalog.get(other)
            if known is None:
                out.add(f"{where}.instanceTypes[{j}]", "instance-type-in-catalog",
                        f"'{other}' is not in the instance catalog (components/catalog/aws_instances.yaml)")
            elif known.arch != facts.arch or known.gpu_count:
                out.add(f"{where}.instanceTypes[{j}]", "instance-types-cpu-only",
                        f"'{other}' ({known.arch}, {known.gpu_count} GPUs) does not match {ng.instance_type} "
                        f"({facts.arch}, CPU only): a group's types share one architecture and AMI")
    if ng.ami_type is not None:
        arch_ok = ("ARM_64" in ng.ami_type) == (facts.arch == "arm64")
        gpu_ok = ng.ami_type.endswith("_NVIDIA") == bool(facts.gpu_count)
        if not (arch_ok and gpu_ok):
            out.add(f"{where}.amiType", "ami-type-fits",
                    f"{ng.ami_type} does not fit {ng.instance_type} ({facts.arch}, "
                    f"{'GPUs' if facts.gpu_count else 'no GPU'}); use {default_ami_type(facts)}")
        if arch_ok and gpu_ok and ng.ami_type.startswith("BOTTLEROCKET") and ng.ami_type.endswith("_NVIDIA"):
            # The EKS-optimized Bottlerocket NVIDIA AMIs include the NVIDIA device plugin (EKS user guide, "Install
            # Kubernetes device plugin for GPUs", considerations), configured by settings.kubelet-device-plugins.nvidia
            # (Bottlerocket settings reference: time-slicing, MIG). Every AWS stack installs the GPU Operator with its
            # device plugin on all GPU nodes (only the driver and toolkit are off), so both would serve nvidia.com/gpu
            # there, and gpuSharing, written as the operator's device-plugin config, would not reach the node.
            out.add(f"{where}.amiType", "bottlerocket-nvidia-gpu-operator",
                    f"{ng.ami_type} nodes run their own NVIDIA device plugin (EKS user guide, GPU device plugin), "
                    "so the platform's GPU Operator would register nvidia.com/gpu there a second time, and its "
                    "time-slicing and MIG settings do not reach Bottlerocket: use "
                    f"{default_ami_type(facts)} for GPU groups (Bottlerocket suits groups without GPUs)")
        if ng.ami_type.startswith("BOTTLEROCKET") and ng.local_nvme == "raid0":
            out.add(f"{where}.localNvme", "ami-type-fits",
                    "localNvme raid0 is written as AL2023 nodeadm user data; Bottlerocket nodes are not configured "
                    "by it: use an AL2023 AMI type or localNvme none")
    if not ng.gpu_taint and not facts.gpu_count:
        out.add(f"{where}.gpuTaint", "gpu-taint-noschedule", "gpuTaint applies to GPU node groups only")


# Kubelet refuses a soft eviction threshold without a grace period, and a grace period names a soft threshold
# (Kubernetes docs, "Node-pressure Eviction", soft eviction thresholds: "you must also specify a grace period").
# Placeholders for the cluster's connection at its largest (a 2048-character base64 CA, a 128-character endpoint)
# size the user data before the cluster exists.
# components.bootstrap and components.node_template import components.spec, so they are imported where used, never
# at module load (a CLI that imports this module first would otherwise find them half-initialised).


def _check_customisation(ng: NodeGroupSpec, facts: InstanceFacts, where: str, out: _Collector) -> None:
    """A custom AMI, kubelet settings, bootstrap commands, SSH and fewer EFA interfaces, each as its AMI, EKS and
    EC2 accept them."""
    bottlerocket = derive_ami_type(ng, facts).startswith("BOTTLEROCKET")
    kubelet = ng.kubelet
    if kubelet is not None:
        soft, grace = set(kubelet.eviction_soft), set(kubelet.eviction_soft_grace_period)
        for signal in sorted(soft - grace):
            out.add(f"{where}.kubelet.evictionSoftGracePeriod", "kubelet-soft-eviction",
                    f"evictionSoft.{signal} needs a grace period in evictionSoftGracePeriod (kubelet refuses a soft "
                    "threshold without one)")
        for signal in sorted(grace - soft):
            out.add(f"{where}.kubelet.evictionSoftGracePeriod", "kubelet-soft-eviction",
                    f"a grace period for {signal}, which has no evictionSoft threshold")
        # kubelet's ParseThresholdStatement (pkg/kubelet/eviction/api): a percentage above 100 % and an amount of
        # zero are errors and the kubelet does not start; 0 % and 100 % only turn the threshold off.
        for key, thresholds in (("evictionHard", kubelet.eviction_hard), ("evictionSoft", kubelet.eviction_soft)):
            for signal, value in sorted(thresholds.items()):
                number = float(value.rstrip("%").rstrip("kMGTKi") or 0) if value[-1:] != "%" else float(value[:-1])
                if value.endswith("%") and number > 100:
                    out.add(f"{where}.kubelet.{key}.{signal}", "kubelet-eviction-threshold",
                            f"{value} is above 100 % (kubelet refuses it and does not start)")
                elif not value.endswith("%") and number == 0:
                    out.add(f"{where}.kubelet.{key}.{signal}", "kubelet-eviction-threshold",
                            f"{value}: an amount of zero (kubelet refuses it and does not start; 0% turns the "
                            "threshold off)")
        if kubelet.max_pods is not None and ng.ami_id is None and not bottlerocket:
            out.add(f"{where}.kubelet.maxPods", "kubelet-max-pods-custom-ami",
                    "on the EKS AL2023 AMI, EKS appends its own NodeConfig with maxPods after the launch template's "
                    "user data, and the later one wins (eksctl refuses maxPodsPerNode on AL2023 managed nodes for "
                    "this reason, eksctl #8037): set maxPods with a custom AMI (amiId), or leave it to EKS")
        memory = sum(_gib(v) for v in (kubelet.kube_reserved.get("memory"), kubelet.system_reserved.get("memory"),
                                       kubelet.eviction_hard.get("memory.available")) if v and not v.endswith("%"))
        if facts.memory_gib.value and memory >= facts.memory_gib.value:
            out.add(f"{where}.kubelet", "kubelet-reserved-fits",
                    f"kubeReserved, systemReserved and evictionHard together hold back {memory:g} GiB of memory, "
                    f"and {ng.instance_type} has {facts.memory_gib.value} GiB: nothing would be left for pods")
    if bottlerocket:
        for key, commands in (("preBootstrapCommands", ng.pre_bootstrap_commands),
                              ("postBootstrapCommands", ng.post_bootstrap_commands)):
            if commands:
                out.add(f"{where}.{key}", "bootstrap-commands-al2023",
                        "Bottlerocket runs no shell user data (its bootstrap containers and apiclient commands take "
                        "their place, and are not built here): use an AL2023 AMI type or drop the commands")
    if ng.ssh is not None:
        nets = [net for _, net in valid_cidrs(ng.ssh.source_cidrs, f"{where}.ssh.sourceCidrs", out)]
        if covers_everything(nets):
            out.add(f"{where}.ssh.sourceCidrs", "ssh-not-open",
                    f"sourceCidrs ({', '.join(ng.ssh.source_cidrs)}) open SSH to the whole internet: list the "
                    "networks of your bastion or VPN (Session Manager needs no open port)")
    if ng.efa_interfaces is not None:
        if not facts.efa_count:
            out.add(f"{where}.efaInterfaces", "efa-interfaces-fit",
                    f"{ng.instance_type} has no EFA interface (catalog: "
                    f"{facts.efa_interfaces.source or 'unconfirmed'})")
        elif ng.efa_interfaces > facts.efa_count:
            out.add(f"{where}.efaInterfaces", "efa-interfaces-fit",
                    f"{ng.instance_type} has {facts.efa_count} EFA interfaces, not {ng.efa_interfaces}")
        elif ng.efa_interfaces < facts.efa_count and not ng.efa_interfaces_reason:
            out.add(f"{where}.efaInterfacesReason", "efa-interfaces-reason",
                    f"efaInterfaces {ng.efa_interfaces} wires fewer than the {facts.efa_count} EFA interfaces of "
                    f"{ng.instance_type}, which caps the node's inter-node bandwidth: say why in efaInterfacesReason")
    if ng.efa_interfaces_reason and (ng.efa_interfaces is None or ng.efa_interfaces >= facts.efa_count):
        out.add(f"{where}.efaInterfacesReason", "efa-interfaces-reason",
                "efaInterfacesReason explains efaInterfaces below the type's count; it is set without such a count")
    raw = _user_data_size(ng, facts)
    if raw > USER_DATA_LIMIT:
        out.add(f"{where}", "user-data-size",
                f"the group's user data takes {raw:,} bytes with the cluster's connection details, over EC2's "
                f"{USER_DATA_LIMIT:,}-byte limit: shorten the bootstrap commands (fetch a script instead)")


def _check_asg_tags(ng: NodeGroupSpec, facts: InstanceFacts, units: int, where: str, out: _Collector,
                    team_cpu: bool = False) -> None:
    """An autoscaled group's Auto Scaling group takes its opt-in and node-template tags (the labels, taints and
    resources the Cluster Autoscaler builds a scale-from-zero node from) within EC2 Auto Scaling's tag limits."""
    # Imported here: components.node_template imports components.spec (see USER_DATA_LIMIT above).
    from components.node_template import EKS_ASG_TAGS, MAX_ASG_TAG_KEY, MAX_ASG_TAGS, NODE_TEMPLATE, autoscaler_tags

    tags = autoscaler_tags(ng, facts, units, team_cpu)
    total = len(tags) + EKS_ASG_TAGS
    if tags and total > MAX_ASG_TAGS:
        out.add(where, "asg-tag-limit",
                f"the Cluster Autoscaler reads this group's labels, taints and resources from its Auto Scaling "
                f"group's tags: {len(tags)} of them and the {EKS_ASG_TAGS} EKS puts there make {total}, over the "
                f"{MAX_ASG_TAGS} EC2 Auto Scaling allows per group (Auto Scaling user guide, tag restrictions): use "
                "fewer labels or taints, or fixed sizes (minSize = maxSize: not autoscaled)")
    taint_at = {f"{NODE_TEMPLATE}/taint/{t.key}": j for j, t in reversed(list(enumerate(ng.taints)))}
    for key in tags:
        if len(key) <= MAX_ASG_TAG_KEY:
            continue
        label = key.removeprefix(f"{NODE_TEMPLATE}/label/")
        at = (f"{where}{_path(['labels', label], root='')}" if label in ng.labels
              else f"{where}.taints[{taint_at[key]}].key" if key in taint_at else where)
        out.add(at, "asg-tag-limit",
                f"its Auto Scaling group tag for the Cluster Autoscaler, {key}, has {len(key)} characters, over the "
                f"{MAX_ASG_TAG_KEY} of an Auto Scaling tag key (API reference, Tag): shorten the key")


def _gib(quantity: str) -> float:
    """A Kubernetes memory quantity in GiB (for a sanity sum; unknown suffixes count as bytes)."""
    factors = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}
    for suffix in sorted(factors, key=len, reverse=True):
        if quantity.endswith(suffix):
            return float(quantity[:-len(suffix)]) * factors[suffix] / 2**30
    return float(quantity) / 2**30


def _user_data_size(ng: NodeGroupSpec, facts: InstanceFacts) -> int:
    from components.bootstrap import ClusterConnection, node_bootstrap, render_user_data

    size_cluster = ClusterConnection(name="x" * 100, endpoint="https://" + "x" * 120,
                                     certificate_authority="x" * 2048, service_cidr="fd00:ffff:ffff:ffff::/108")
    raw = render_user_data(node_bootstrap(ng, facts), size_cluster if ng.ami_id is not None else None)
    return len(raw.encode()) if raw else 0


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_node_groups(spec: ClusterSpec, aws: AwsSpec, now: datetime, out: _Collector) -> None:
    catalog = load_aws_catalog()
    subnets = {sn.name: sn for sn in aws.network.subnets}
    dedicated = dedicated_cpu_groups(spec)
    names: set[str] = set()
    for i, ng in enumerate(aws.node_groups):
        where = f".aws.nodeGroups[{i}]"
        if ng.name in names:
            out.add(f"{where}.name", "unique-names", f"node group name '{ng.name}' is used twice")
        names.add(ng.name)
        if not ng.min_size <= ng.desired_size:
            out.add(f"{where}.desiredSize", "node-group-size-order",
                    f"desiredSize ({ng.desired_size}) must be >= minSize ({ng.min_size}); "
                    "sizes must satisfy minSize <= desiredSize <= maxSize")
        if not ng.desired_size <= ng.max_size:
            out.add(f"{where}.desiredSize", "node-group-size-order",
                    f"desiredSize ({ng.desired_size}) must be <= maxSize ({ng.max_size}); "
                    "sizes must satisfy minSize <= desiredSize <= maxSize")
        cap = ng.capacity
        reserved = is_reserved(ng)
        by_group = cap.reservation_resource_group_arn is not None
        if by_group and cap.type != "reserved":
            out.add(f"{where}.capacity.reservationResourceGroupArn", "reservation-id",
                    f"a reservation resource group only applies to reserved (ODCR) capacity, not '{cap.type}'")
        if by_group and cap.reservation_id is not None:
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    "give reservationId or reservationResourceGroupArn, not both")
        if reserved and cap.reservation_id is None and not (by_group and cap.type == "reserved"):
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    f"capacity type '{cap.type}' needs the Capacity Reservation id (cr-...)"
                    + (" or, for reserved, reservationResourceGroupArn" if cap.type == "reserved" else ""))
        if cap.reservation_id is not None and not reserved:
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    f"reservationId only applies to capacity-block and reserved, not '{cap.type}'")
        if cap.reservation_id is not None and not _RESERVATION_RE.fullmatch(cap.reservation_id):
            out.add(f"{where}.capacity.reservationId", "reservation-id",
                    f"'{cap.reservation_id}' is not a Capacity Reservation id (cr- and 8-17 hex digits)")
        _check_capacity_block(ng, where, now, out)
        if reserved and ng.placement == "cluster":
            why = ("the block is already placed by AWS" if cap.type == "capacity-block" else
                   "an ODCR is placed only in the cluster placement group it was created in (name that one in "
                   "placementGroupName)")
            out.add(f"{where}.placement", "no-placement-group-on-reserved-capacity",
                    f"a new cluster placement group must not be forced onto {cap.type} capacity: {why}, and a "
                    "placement group the reservation is not in causes InsufficientInstanceCapacity "
                    "(terraform-aws-eks PR #3730); use auto or none")
        if ng.placement_group_name is not None:
            if cap.type == "capacity-block":
                out.add(f"{where}.placementGroupName", "no-placement-group-on-reserved-capacity",
                        "a placement group must not be forced onto capacity-block capacity: the block is already "
                        "placed (terraform-aws-eks PR #3730)")
            if ng.placement == "none":
                out.add(f"{where}.placementGroupName", "placement-group-existing",
                        "placementGroupName and placement: none contradict each other")
        facts = catalog.get(ng.instance_type)
        if facts is None:
            close = difflib.get_close_matches(ng.instance_type, list(catalog), n=3)
            out.add(f"{where}.instanceType", "instance-type-in-catalog",
                    f"'{ng.instance_type}' is not in the instance catalog (components/catalog/aws_instances.yaml, "
                    f"{len(catalog)} types)" + (f"; closest: {', '.join(close)}" if close else ""))
            continue
        _check_instance_types(ng, facts, catalog, where, out)
        if cap.type == "capacity-block" and not facts.capacity_blocks.value:
            out.add(f"{where}.capacity.type", "capacity-block-instance-type",
                    f"{ng.instance_type} is not sold as an EC2 Capacity Block for ML (catalog: "
                    f"{facts.capacity_blocks.source}); use on-demand, spot or a reserved ODCR")
        _check_node_labels(ng, facts, where, out)
        _check_customisation(ng, facts, where, out)
        _check_asg_tags(ng, facts, gpu_units_per_gpu(spec.platform.gpu_sharing), where, out,
                        ng.name in dedicated)
        if ng.local_nvme == "raid0" and not facts.has_local_nvme:
            known = "has no" if facts.has_local_nvme is False else "has no confirmed"
            out.add(f"{where}.localNvme", "local-nvme-exists",
                    f"localNvme raid0 needs instance-store NVMe, and the catalog {known} local NVMe "
                    f"for {ng.instance_type}; use auto or none")
        group_subnets = ng.subnets if ng.subnets is not None else default_subnets(aws, facts)
        missing = [s for s in group_subnets if s not in subnets]
        if missing:
            out.add(f"{where}.subnets", "subnet-exists",
                    f"unknown subnet(s) {', '.join(missing)}; known: {', '.join(subnets)}")
            continue
        public = [s for s in group_subnets if subnets[s].role == "public"]
        if public:
            out.add(f"{where}.subnets", "nodes-in-private-subnets",
                    f"nodes must run in private subnets, not public {', '.join(public)}")
        zones = sorted({subnets[s].zone for s in group_subnets})
        if facts.efa_capable and ng.max_size > 1 and len(zones) > 1:
            out.add(f"{where}.subnets", "efa-group-single-az",
                    f"{ng.instance_type} is EFA-capable and the group spans nodes (maxSize "
                    f"{ng.max_size}), so its subnets must be in one availability zone; got "
                    f"{', '.join(zones)}")
        if reserved and _gpu_zone_given_once(aws) and zones != [aws.gpu_zone]:
            out.add(f"{where}.subnets", "reserved-capacity-in-gpu-zone",
                    f"{cap.type} capacity is bound to one zone; the group's subnets must all be in "
                    f"{_gpu_zone_key(aws)} '{aws.gpu_zone}'")
    if any(ng.instance_type not in catalog for ng in aws.node_groups):
        return  # the fleet-wide rules below need every group's facts; the unknown type is reported
    catalog_groups = [(ng, catalog[ng.instance_type]) for ng in aws.node_groups]
    tainted = any(f.gpu_count and ng.gpu_taint for ng, f in catalog_groups)
    if catalog_groups and tainted and not any(f.gpu_count == 0 for _, f in catalog_groups):
        out.add(".aws.nodeGroups", "system-node-group",
                "a node group without GPUs is required for system pods (GPU nodes carry the "
                f"{GPU_TAINT_KEY}=true:NoSchedule taint)")
    if catalog_groups and not any(f.gpu_count > 0 for _, f in catalog_groups):
        out.add(".aws.nodeGroups", "gpu-node-group", "at least one node group with GPUs is required")
    max_gpus = sum(ng.max_size * f.gpu_count for ng, f in catalog_groups)
    if catalog_groups and spec.workload.peak_gpus > max_gpus:
        out.add(".workload.peakGpus", "peak-gpus-fit",
                f"peakGpus ({spec.workload.peak_gpus}) exceeds the {max_gpus} GPUs the node groups "
                "provide at maxSize")
