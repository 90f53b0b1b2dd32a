"""What a node's user data configures and how it is written, for AL2023 (MIME with a nodeadm NodeConfig) and
Bottlerocket (TOML settings): pure, so the spec rules size it before anything exists and tests read it directly."""

from __future__ import annotations

import base64
import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.catalog import InstanceFacts
from components.catalog.charts import autoscaler_gpu_types
from components.spec.aws import NodeGroupSpec
from components.spec.base import GPU_TAINT_KEY, READINESS_TAINT_KEY, TEAM_CPU_TAINT_KEY
from components.spec.decisions import derive_ami_type

_BOUNDARY = "//GPU-CLUSTER-BOUNDARY"
# EC2 takes at most 16 KB of user data, in raw form before base64: components.spec.base.USER_DATA_LIMIT.


@dataclass(frozen=True)
class ClusterConnection:
    """What a node needs to join the cluster when EKS does not merge its own bootstrap data (a custom AMI)."""

    name: str
    endpoint: str
    certificate_authority: str  # base64 PEM, as EKS returns it
    service_cidr: str  # the cluster's service IPv4 or IPv6 CIDR


@dataclass(frozen=True)
class NodeBootstrap:
    """What a group's user data configures: RAID0 of the local NVMe (AL2023), kubelet settings, commands before and
    after kubelet starts, and, for a custom AMI, the node labels and taints EKS cannot apply in time."""

    os: str  # "al2023" or "bottlerocket"
    raid0_local_nvme: bool = False
    kubelet: Mapping[str, Any] = field(default_factory=dict)  # KubeletConfiguration fields
    pre_commands: Sequence[str] = ()
    post_commands: Sequence[str] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[tuple[str, str, str]] = ()  # (key, value, effect as Kubernetes spells it)
    # Bottlerocket only: its SSH server is the admin host container, off by default; once enabled it reads the key
    # pair's public key from IMDS (bottlerocket-os/bottlerocket-admin-container README, "Authenticating").
    admin_container: bool = False

    @property
    def empty(self) -> bool:
        return not (self.raid0_local_nvme or self.kubelet or self.pre_commands or self.post_commands
                    or self.admin_container)


def unused_marker(base: str, texts: Sequence[str]) -> str:
    """``base``, or ``base`` with the first numeric suffix that no text contains: a MIME boundary or heredoc
    terminator that what the user writes cannot contain, so no content ends its container early (RFC 2046 5.1.1:
    the boundary must not appear inside the encapsulated parts; bash: a heredoc ends at its word alone on a line)."""
    candidate, n = base, 0
    while any(candidate in text for text in texts):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _mime(parts: Sequence[tuple[str, str]]) -> str:
    """The multipart/mixed document of ``(content type, body)`` parts, under a boundary no body contains."""
    bodies = [body.rstrip() for _, body in parts]
    boundary = unused_marker(_BOUNDARY, bodies)
    return ("MIME-Version: 1.0\n"
            f'Content-Type: multipart/mixed; boundary="{boundary}"\n\n'
            + "".join(f"--{boundary}\nContent-Type: {ctype}\n\n{body}\n\n"
                      for (ctype, _), body in zip(parts, bodies, strict=True))
            + f"--{boundary}--\n")


# After bootstrap: AL2023 has no hook once kubelet runs (nodeadm-run.service starts it after cloud-final), so a
# oneshot unit ordered after nodeadm-run does it (awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/
# system/nodeadm-run.service; terraform-aws-eks keeps post_bootstrap_user_data to AL2 for the same reason).
_POST_UNIT = "gpu-cluster-post-bootstrap"


def _post_bootstrap_script(commands: Sequence[str]) -> str:
    script = "#!/bin/bash\nset -euo pipefail\n" + "\n".join(commands) + "\n"
    eof = unused_marker("GPU_CLUSTER_EOF", [script])
    unit = (f"[Unit]\nDescription=gpu-cluster post-bootstrap commands\nAfter=nodeadm-run.service\n"
            f"Requires=nodeadm-run.service\n\n[Service]\nType=oneshot\nExecStart=/usr/local/bin/{_POST_UNIT}.sh\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
    return ("#!/bin/bash\nset -euo pipefail\n"
            f"cat > /usr/local/bin/{_POST_UNIT}.sh <<'{eof}'\n{script}{eof}\n"
            f"chmod 0755 /usr/local/bin/{_POST_UNIT}.sh\n"
            f"cat > /etc/systemd/system/{_POST_UNIT}.service <<'GPU_CLUSTER_EOF'\n{unit}GPU_CLUSTER_EOF\n"
            "systemctl daemon-reload\n"
            f"systemctl enable {_POST_UNIT}.service\n"
            f"systemctl start --no-block {_POST_UNIT}.service\n")


def _taint_flag(taints: Sequence[tuple[str, str, str]]) -> str:
    return "--register-with-taints=" + ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints)


def al2023_user_data(boot: NodeBootstrap, cluster: ClusterConnection | None = None) -> str | None:
    """The raw MIME user data of an AL2023 node, or None when nothing needs configuring.

    On the EKS-optimized AMI (``cluster`` None) EKS merges its own NodeConfig (the cluster's connection, maxPods)
    after this one; with a custom AMI EKS merges nothing, so the NodeConfig carries the cluster's connection and the
    node's labels and taints as kubelet flags (EKS applies API taints late on custom AMIs). Parts: the commands
    before kubelet (shell, run by cloud-init before nodeadm starts kubelet), the post-bootstrap unit, then the
    NodeConfig (nodeadm, node.eks.aws/v1alpha1: spec.cluster, spec.kubelet.config/flags,
    spec.instance.localStorage; awslabs/amazon-eks-ami nodeadm/doc/api.md).
    """
    if boot.empty and cluster is None:
        return None
    parts: list[tuple[str, str]] = []
    if boot.pre_commands:
        parts.append(('text/x-shellscript; charset="us-ascii"',
                      "#!/bin/bash\nset -euo pipefail\n" + "\n".join(boot.pre_commands)))
    if boot.post_commands:
        parts.append(('text/x-shellscript; charset="us-ascii"', _post_bootstrap_script(boot.post_commands)))
    spec: dict[str, Any] = {}
    if cluster is not None:
        spec["cluster"] = {"name": cluster.name, "apiServerEndpoint": cluster.endpoint,
                           "certificateAuthority": cluster.certificate_authority, "cidr": cluster.service_cidr}
    kubelet: dict[str, Any] = {}
    if boot.kubelet:
        kubelet["config"] = dict(boot.kubelet)
    if cluster is not None:
        flags = []
        if boot.labels:
            flags.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(boot.labels.items())))
        if boot.taints:
            flags.append(_taint_flag(boot.taints))
        if flags:
            kubelet["flags"] = flags
    if kubelet:
        spec["kubelet"] = kubelet
    if boot.raid0_local_nvme:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if spec:
        node_config = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
        parts.append(("application/node.eks.aws", yaml.safe_dump(node_config, sort_keys=False)))
    return _mime(parts)


# Bottlerocket settings (TOML, settings.kubernetes.*; Bottlerocket settings reference, kubernetes 1.50.x): the
# kubelet names in kebab case. On the EKS Bottlerocket AMI EKS merges its settings and the user's override them
# (EKS user guide, launch templates, Bottlerocket user data); a custom AMI needs the cluster's own.
_BOTTLEROCKET_KEYS = {"maxPods": "max-pods", "kubeReserved": "kube-reserved", "systemReserved": "system-reserved",
                      "evictionHard": "eviction-hard", "evictionSoft": "eviction-soft",
                      "evictionSoftGracePeriod": "eviction-soft-grace-period",
                      "evictionMaxPodGracePeriod": "eviction-max-pod-grace-period"}


def cluster_dns_ip(service_cidr: str) -> str:
    """CoreDNS's service address: .10 of an IPv4 service CIDR, ::a of an IPv6 one (as nodeadm derives it)."""
    net = ipaddress.ip_network(service_cidr, strict=False)
    return str(net.network_address + 10)


def bottlerocket_user_data(boot: NodeBootstrap, cluster: ClusterConnection | None = None) -> str | None:
    """The TOML settings of a Bottlerocket node, or None when nothing needs configuring."""
    scalars: dict[str, Any] = {}
    tables: dict[str, Mapping[str, Any]] = {}
    if cluster is not None:
        scalars.update({"cluster-name": cluster.name, "api-server": cluster.endpoint,
                        "cluster-certificate": cluster.certificate_authority,
                        "cluster-dns-ip": cluster_dns_ip(cluster.service_cidr)})
        if boot.labels:
            tables["node-labels"] = dict(sorted(boot.labels.items()))
        if boot.taints:
            taints: dict[str, list[str]] = {}
            for k, v, e in boot.taints:
                taints.setdefault(k, []).append(f"{v}:{e}")
            tables["node-taints"] = taints
    for key, value in boot.kubelet.items():
        if isinstance(value, Mapping):
            tables[_BOTTLEROCKET_KEYS[key]] = value
        else:
            scalars[_BOTTLEROCKET_KEYS[key]] = value
    if not scalars and not tables and not boot.admin_container:
        return None
    lines = ["[settings.kubernetes]", *(f"{k} = {json.dumps(v)}" for k, v in scalars.items())] if scalars or tables \
        else []
    for table, values in tables.items():
        lines += ["", f"[settings.kubernetes.{table}]", *(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in
                                                            values.items())]
    if boot.admin_container:
        lines += [*([""] if lines else []), "[settings.host-containers.admin]", "enabled = true"]
    return "\n".join(lines) + "\n"


def encode_user_data(raw: str | None) -> str | None:
    """Base64, as launch templates take user data."""
    return None if raw is None else base64.b64encode(raw.encode()).decode()


# The Cluster Autoscaler's AWS GPU label (GPULabel in kubernetes/autoscaler cloudprovider/aws/aws_cloud_provider.go;
# its README, "Special note on GPU instances").
GPU_LABEL = "k8s.amazonaws.com/accelerator"
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
KUBERNETES_EFFECTS = {v: k for k, v in TAINT_EFFECTS.items()}


def efa_interfaces(group: NodeGroupSpec, facts: InstanceFacts) -> int:
    """EFA interfaces the group wires: the spec's efaInterfaces, else every one the type has."""
    return facts.efa_count if group.efa_interfaces is None else min(group.efa_interfaces, facts.efa_count)


def is_bottlerocket(group: NodeGroupSpec, facts: InstanceFacts) -> bool:
    """The group's nodes run Bottlerocket (its AMI type, or the type its custom AMI is built from)."""
    return derive_ami_type(group, facts).startswith("BOTTLEROCKET")


def hugepage_commands(gib: int) -> tuple[str, ...]:
    """Reserve ``gib`` GiB of 2 MiB hugepages before kubelet starts, so it reports them allocatable
    (``hugepages-2Mi``; Kubernetes "Manage HugePages": pre-allocated on the node), and keep them across reboots."""
    if not gib:
        return ()
    pages = gib * 512
    return (f"echo 'vm.nr_hugepages = {pages}' > /etc/sysctl.d/90-gpu-cluster-hugepages.conf && "
            f"sysctl -w vm.nr_hugepages={pages}",)


def node_bootstrap(group: NodeGroupSpec, facts: InstanceFacts, hugepages_2mi_gib: int = 0,
                   team_cpu: bool = False) -> NodeBootstrap:
    """What the group's user data configures. With a custom AMI it also carries the node's labels and taints, which
    EKS cannot apply before the node registers (EKS user guide, "Specifying an AMI": API taints applied
    asynchronously). ``hugepages_2mi_gib``: 2 MiB hugepages the node reserves at boot (Slurm's NodeSets ask for
    them)."""
    custom = group.ami_id is not None
    return NodeBootstrap(
        os="bottlerocket" if is_bottlerocket(group, facts) else "al2023",
        raid0_local_nvme=wants_raid0(group, facts),
        kubelet=group.kubelet.kubelet_config() if group.kubelet is not None else {},
        pre_commands=(*hugepage_commands(hugepages_2mi_gib), *group.pre_bootstrap_commands),
        post_commands=tuple(group.post_bootstrap_commands),
        labels=node_labels(group, facts) if custom else {},
        admin_container=group.ssh is not None and is_bottlerocket(group, facts),
        taints=tuple((t["key"], t["value"], KUBERNETES_EFFECTS[t["effect"]])
                     for t in node_taints(group, facts, team_cpu))
        if custom else (),
    )


def block_devices(group: NodeGroupSpec, facts: InstanceFacts) -> list[dict[str, Any]]:
    """The launch template's EBS volumes, all encrypted gp3. AL2023 has one volume, /dev/xvda, for the OS, kubelet and
    images. Bottlerocket has two: /dev/xvda holds the read-only OS (kept at the AMI's size) and /dev/xvdb the data
    (images, pod storage), so rootVolumeGiB sizes /dev/xvdb there; mapping only /dev/xvda would grow the OS disk and
    leave the data disk at the AMI's size, unencrypted where EBS default encryption is off (Bottlerocket's EKS
    quickstart, "Data volume"; eksctl sizes /dev/xvdb for Bottlerocket; terraform-aws-eks's Bottlerocket example maps
    both)."""
    def ebs(size: int | None) -> dict[str, Any]:
        return {**({"volume_size": size} if size is not None else {}), "volume_type": "gp3", "encrypted": "true",
                "delete_on_termination": "true"}

    if is_bottlerocket(group, facts):
        return [{"device_name": "/dev/xvda", "ebs": ebs(None)},
                {"device_name": "/dev/xvdb", "ebs": ebs(group.root_volume_gib)}]
    return [{"device_name": "/dev/xvda", "ebs": ebs(group.root_volume_gib)}]


def render_user_data(boot: NodeBootstrap, cluster: ClusterConnection | None = None) -> str | None:
    """The group's raw user data in the form its OS reads (AL2023 MIME with a NodeConfig, Bottlerocket TOML)."""
    return (bottlerocket_user_data if boot.os == "bottlerocket" else al2023_user_data)(boot, cluster)


def node_labels(group: NodeGroupSpec, facts: InstanceFacts) -> dict[str, str]:
    """Kubernetes labels of a group's nodes: the spec's, then the group and hardware facts."""
    labels = dict(group.labels)
    labels["gpu-cluster/node-group"] = group.name
    labels["gpu-cluster/instance-type"] = group.instance_type
    if facts.gpu_count:
        labels["gpu-cluster/gpu-count"] = str(facts.gpu_count)
    if facts.efa_capable:
        labels["gpu-cluster/efa-interfaces"] = str(efa_interfaces(group, facts))
    accelerator = accelerator_label(facts.gpu_model) if facts.gpu_count else None
    if accelerator is not None:
        # Set by kubelet when the node registers, before the device plugin advertises the GPUs: the Cluster
        # Autoscaler then waits for them instead of adding another node (its README, "Special note on GPU instances").
        labels[GPU_LABEL] = accelerator
    return labels


def accelerator_label(gpu_model: str | None) -> str | None:
    """The ``k8s.amazonaws.com/accelerator`` value of a GPU model (``NVIDIA L4 24GB`` -> ``nvidia-l4``): the Cluster
    Autoscaler's own name where its AWS provider lists the GPU (``nvidia-tesla-a100`` for the A100), else
    ``nvidia-<model>``; None without GPUs. The autoscaler only checks that the label is there."""
    if not gpu_model:
        return None
    words = gpu_model.split()
    name = words[1] if len(words) > 1 and words[0].upper() == "NVIDIA" else words[0]
    token = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    known = autoscaler_gpu_types()
    return next((c for c in (f"nvidia-{token}", f"nvidia-tesla-{token}") if c in known), f"nvidia-{token}")


def node_taints(group: NodeGroupSpec, facts: InstanceFacts, team_cpu: bool = False) -> list[dict[str, str]]:
    """Taints in the EKS API's form; GPU nodes always repel pods that do not ask for GPUs, and a group teams have CPU
    quota on (``team_cpu``: teams[].cpuQuotas) repels pods its Kueue CPU flavor did not admit (platform pods)."""
    taints = [{"key": t.key, "value": t.value, "effect": TAINT_EFFECTS[t.effect]} for t in group.taints]
    if team_cpu and not any(t["key"] == TEAM_CPU_TAINT_KEY for t in taints):
        taints.append({"key": TEAM_CPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"})
    if facts.gpu_count and group.gpu_taint and not any(t["key"] == GPU_TAINT_KEY for t in taints):
        taints.insert(0, {"key": GPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"})
    if facts.gpu_count and not any(t["key"] == READINESS_TAINT_KEY for t in taints):
        # Held until the node's check passes (the Node Readiness Controller removes it; objects/node_check.py).
        taints.append({"key": READINESS_TAINT_KEY, "value": "pending", "effect": "NO_SCHEDULE"})
    return taints


def wants_raid0(group: NodeGroupSpec, facts: InstanceFacts) -> bool:
    """RAID0 the local NVMe when asked, or by default when the catalog confirms the type has it (AL2023's nodeadm
    does it; Bottlerocket nodes are not configured by it, so auto leaves their disks alone)."""
    if group.local_nvme == "none" or is_bottlerocket(group, facts):
        return False
    return bool(facts.has_local_nvme)
