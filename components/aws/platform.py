"""What the Kubernetes platform needs to know of AWS: the EFA fabric and its device plugin, the network
topology labels AWS puts on nodes, encrypted gp3 volumes, and the egress to the Pod Identity agent.

The Kubernetes layer (``components/kubernetes/``) names no cloud; this module is the AWS side of the seam.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.kubernetes.inputs import CloudFabric
from components.kubernetes.objects import NODE_AGENT_TOLERATIONS, EgressRule, Manifest, NetworkTopology
from components.node_template import EFA_RESOURCE as EFA_RESOURCE

# Network topology labels that AWS's cloud controller puts on nodes of supported instance types
# (top layer first), then the host: Kueue's topology-aware scheduling packs pods by these levels.
AWS_TOPOLOGY = NetworkTopology(name="aws-network", node_labels=(
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
))
# EKS's encrypted gp3 volumes through the EBS CSI driver, for the platform's own volumes.
EBS_GP3: tuple[str, dict[str, str]] = ("ebs.csi.aws.com", {"type": "gp3", "encrypted": "true"})
# The EKS Pod Identity agent serves credentials on the node's link-local address, port 80 (EKS user
# guide, pod-id-agent-setup); the VPC CNI's policy engine filters link-local traffic like any other.
POD_IDENTITY_EGRESS = EgressRule(name="allow-pod-identity-agent", cidr="169.254.170.23/32", port=80)
# On an IPv6 cluster pods reach the agent at [fd00:ec2::23] (EKS user guide, "EKS Pod Identity agent": it listens on
# 169.254.170.23 and fd00:ec2::23).
POD_IDENTITY_EGRESS_IPV6 = EgressRule(name="allow-pod-identity-agent-ipv6", cidr="fd00:ec2::23/128", port=80)


def efa_plugin_values(instance_types: Sequence[str]) -> Manifest:
    """AWS EFA device plugin values: run on the EFA node groups' types, tolerate the GPU taint."""
    return {
        "supportedInstanceLabels": {"keys": ["node.kubernetes.io/instance-type"],
                                    "values": sorted(set(instance_types))},
        "tolerations": list(NODE_AGENT_TOLERATIONS),
    }


def efa_fabric(instance_types: Sequence[str]) -> CloudFabric:
    """The EFA fabric: pods request ``vpc.amazonaws.com/efa``; the plugin runs on the EFA node types."""
    return CloudFabric(resource_name=EFA_RESOURCE, plugin_release="aws-efa-k8s-device-plugin",
                       plugin_chart="aws-efa-k8s-device-plugin", plugin_namespace="kube-system",
                       plugin_values=efa_plugin_values(instance_types))
