"""The Auto Scaling group tags through which the Cluster Autoscaler manages an EKS node group and builds its
scale-from-zero template node: pure, so the spec rules count them before anything exists and the AWS program writes
the same ones (components/aws/compute.py, components/aws/autoscaler.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components.aws.names import AUTOSCALE_TAG as AUTOSCALE_TAG
from components.aws.names import NODE_TEMPLATE as NODE_TEMPLATE
from components.bootstrap import KUBERNETES_EFFECTS, efa_interfaces, node_labels, node_taints, wants_raid0
from components.catalog import InstanceFacts
from components.spec.aws import NodeGroupSpec
from components.spec.base import READINESS_TAINT_KEY
from components.spec.decisions import is_autoscaled

# The extended resource the EFA device plugin advertises.
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Amazon EC2 Auto Scaling user guide, "Tag Auto Scaling groups and instances", tag restrictions: at most 50 tags per
# Auto Scaling group; API reference, Tag: keys of 1 to 128 characters.
MAX_ASG_TAGS = 50
MAX_ASG_TAG_KEY = 128
# Tags EKS itself puts on a managed node group's Auto Scaling group, which count towards the 50: eks:cluster-name,
# eks:nodegroup-name, kubernetes.io/cluster/<cluster> and CA's two discovery tags (k8s.io/cluster-autoscaler/enabled
# and k8s.io/cluster-autoscaler/<cluster>).
EKS_ASG_TAGS = 5


def template_resources(group: NodeGroupSpec, facts: InstanceFacts, gpu_units_per_gpu: int) -> dict[str, str]:
    """What a node of the group offers that the Cluster Autoscaler's scale-from-zero template would otherwise lack or
    get wrong (its template has only the instance type's CPU, memory and GPU count):

    - ``vpc.amazonaws.com/efa``: the EFA interfaces the launch template wires (``efaInterfaces``, else every one the
      type has), which the EFA device plugin advertises;
    - ``nvidia.com/gpu`` under time-slicing: each GPU advertises ``replicas`` units, so a 0-node group grows by the
      nodes the units need, not one node per unit;
    - ``ephemeral-storage``: the disk kubelet's storage lives on, the local NVMe RAID0 array (the catalog's disks x
      size, in GB as EC2 sells them) or else the volume ``rootVolumeGiB`` sizes (AL2023's root volume, Bottlerocket's
      data volume); the disk's size, an upper bound of what kubelet
      offers (the filesystem's overhead and kubelet's eviction threshold come off), as CA's own example
      (``ephemeral-storage: 100G``) gives it.
    """
    out: dict[str, str] = {}
    efa = efa_interfaces(group, facts)
    if efa:
        out[EFA_RESOURCE] = str(efa)
    if facts.gpu_count and gpu_units_per_gpu > 1:
        out["nvidia.com/gpu"] = str(facts.gpu_count * gpu_units_per_gpu)
    if wants_raid0(group, facts) and facts.nvme_disks and facts.nvme_disk_gb:
        out["ephemeral-storage"] = f"{facts.nvme_disks * facts.nvme_disk_gb}G"
    else:
        out["ephemeral-storage"] = f"{group.root_volume_gib}Gi"
    return out


def node_template_tags(labels: Mapping[str, str], taints: Sequence[Mapping[str, str]],
                       resources: Mapping[str, str]) -> dict[str, str]:
    """The opt-in tag and the node-template tags of one group: each label (``label/<key>: <value>``), each taint
    (``taint/<key>: <value>:<Effect>``, effects as Kubernetes writes them) and each resource that CA's template would
    otherwise lack or get wrong (``resources/<name>: <quantity>``)."""
    tags = {AUTOSCALE_TAG: "true"}
    tags.update({f"{NODE_TEMPLATE}/label/{k}": v for k, v in labels.items()})
    tags.update({f"{NODE_TEMPLATE}/taint/{t['key']}": f"{t.get('value', '')}:{t['effect']}" for t in taints})
    tags.update({f"{NODE_TEMPLATE}/resources/{name}": q for name, q in resources.items()})
    return tags


def autoscaler_tags(group: NodeGroupSpec, facts: InstanceFacts, gpu_units_per_gpu: int,
                    team_cpu: bool = False) -> dict[str, str]:
    """The Auto Scaling group tags of a group the Cluster Autoscaler manages (none for the others): the opt-in tag,
    and the node group's labels, taints and :func:`template_resources` as node-template tags."""
    if not is_autoscaled(group, facts):
        return {}
    # The readiness taint is a startup taint (CA's --startup-taint): CA drops it from templates, so it is not tagged.
    taints = [{**t, "effect": KUBERNETES_EFFECTS[t["effect"]]} for t in node_taints(group, facts, team_cpu)
              if t["key"] != READINESS_TAINT_KEY]
    return node_template_tags(node_labels(group, facts), taints, template_resources(group, facts, gpu_units_per_gpu))
