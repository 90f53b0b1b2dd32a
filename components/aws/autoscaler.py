"""The Cluster Autoscaler on EKS: which node groups it may scale, what it reads from their Auto Scaling groups, its IAM
role (EKS Pod Identity) and its chart's values.

Why Cluster Autoscaler and not Karpenter: the node groups are EKS managed node groups with launch templates that wire
every EFA interface, a cluster placement group and the Capacity Block or ODCR target, and EKS upgrades and repairs
them. Cluster Autoscaler scales those groups as they are (it only changes an Auto Scaling group's desired capacity);
Karpenter launches its own instances from NodePools and EC2NodeClasses, so each launch template would be rewritten as
EC2NodeClass fields and a second node lifecycle (its interruption queue and EventBridge rules, node role access
entry, instance profiles) would run beside EKS's. README, "Node autoscaling (EKS)".

Facts (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md and aws_manager.go at
cluster-autoscaler-1.35.2, read 2026-12-01):

- auto-discovery finds the Auto Scaling groups that carry every listed tag (``key`` or ``key=value``); EKS tags every
  managed node group's Auto Scaling group with ``k8s.io/cluster-autoscaler/enabled`` and
  ``k8s.io/cluster-autoscaler/<cluster>`` ("tagged for auto-discovery", EKS user guide, managed-node-groups), Capacity
  Block and ODCR groups too, so the platform adds a third, opt-in tag (:data:`AUTOSCALE_TAG`) to the groups it means;
- scaling a group from zero, CA builds a template node from the instance type (CPU, memory, GPUs), the group's
  ``k8s.io/cluster-autoscaler/node-template/{label,taint,resources}/...`` tags and, for a managed node group that has
  never had a node (or after CA restarts), EKS's DescribeNodegroup labels and taints; once the group has had nodes the
  tags are all it reads, so every label and taint is also written as a tag;
- EKS puts ``eks:cluster-name: <cluster>`` on a managed node group's Auto Scaling group (CA's
  proposals/circumvent-tag-limit-aws.md; CA reads it to recognise one), which the IAM condition names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import ConditionBlock, PolicyDocument, document, to_json
from components.aws.names import AUTOSCALER_RELEASE
from components.aws.pod_identity import pod_identity_role
from components.catalog.charts import AutoscalerImage
from components.node_template import AUTOSCALE_TAG as AUTOSCALE_TAG
from components.node_template import NODE_TEMPLATE as NODE_TEMPLATE
from components.node_template import node_template_tags as node_template_tags
from components.spec import HEALTH_TAINT_KEY, READINESS_TAINT_KEY

# The tag EKS puts on a managed node group's Auto Scaling group, naming its cluster.
EKS_CLUSTER_TAG = "eks:cluster-name"
# kube-system, as the chart's and CA's AWS examples install it: it runs with system-cluster-critical priority and
# needs no privilege (the Pod Security settings below are those of CA's own example Deployment).
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
RELEASE = AUTOSCALER_RELEASE
# CA's "Full Cluster Autoscaler Features Policy" (cloudprovider/aws/README.md): what auto-discovery, the
# instance-type list and DescribeNodegroup need, on every resource (they are reads).
READ_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",
)
# What changes a group, which the README asks to restrict "by ASG ARN or tag condition".
WRITE_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")
# Requests and limits of CA's AWS example Deployment (cloudprovider/aws/examples/cluster-autoscaler-autodiscover.yaml
# at cluster-autoscaler-1.35.2); the chart sets none.
RESOURCES = {"requests": {"cpu": "100m", "memory": "600Mi"}, "limits": {"cpu": "100m", "memory": "600Mi"}}


def discovery_tags(cluster_name: str) -> list[str]:
    """The tags an Auto Scaling group must all carry for CA to manage it: EKS's two, and the opt-in with its value."""
    return ["k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{cluster_name}", f"{AUTOSCALE_TAG}=true"]


def write_condition(cluster_name: str) -> ConditionBlock:
    """Where CA may change a group: opted in, and in this cluster."""
    return {"StringEquals": {f"autoscaling:ResourceTag/{AUTOSCALE_TAG}": "true",
                             f"autoscaling:ResourceTag/{EKS_CLUSTER_TAG}": cluster_name}}


def autoscaler_policy(cluster_name: str) -> PolicyDocument:
    """CA's permissions: the reads on every resource; setting the desired capacity and terminating an instance only
    on Auto Scaling groups tagged for this cluster and opted in (never a Capacity Block's or an ODCR's, even if
    discovery were misconfigured)."""
    return document(
        {"Sid": "DiscoverNodeGroups", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": "*"},
        {"Sid": "ScaleOptedInNodeGroups", "Effect": "Allow", "Action": list(WRITE_ACTIONS), "Resource": "*",
         "Condition": write_condition(cluster_name)},
    )


def autoscaler_values(cluster_name: str, region: str, image: AutoscalerImage,
                      system_groups: Sequence[str]) -> dict[str, Any]:
    """Values of the cluster-autoscaler chart: AWS auto-discovery on EKS's tags plus the opt-in, the image of the
    cluster's Kubernetes minor, credentials from EKS Pod Identity (no keys: the chart's ``awsAccessKeyID`` stays
    empty), its pod on the system node groups only, and CA's example security settings. Every flag keeps CA's
    default (expander least-waste, nodes with emptyDir pods never drained, GPU nodes scaled down below 50 % of their
    GPUs requested after 10 minutes unneeded)."""
    values: dict[str, Any] = {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name, "tags": discovery_tags(cluster_name)},
        "image": {"repository": image.image, "tag": image.tag},
        "fullnameOverride": RELEASE,
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "resources": RESOURCES,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "fsGroup": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                     "readOnlyRootFilesystem": True},
        # GPU nodes register with the readiness taint and may carry the health taint (objects/node_check.py): CA
        # leaves both out of its node templates, or a pending pod (which tolerates neither) would never scale a group
        # up. The first is a startup taint (the node counts as unready until it goes); the second a status taint (a
        # node that went unhealthy is not counted as unready). Flags from cluster-autoscaler's main.go
        # (multiStringFlag startup-taint, status-taint); the chart renders extraArgs as --key=value.
        "extraArgs": {"startup-taint": READINESS_TAINT_KEY, "status-taint": HEALTH_TAINT_KEY},
    }
    if system_groups:
        values["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "gpu-cluster/node-group", "operator": "In", "values": sorted(system_groups)}]}]}}}
    return values


class AwsAutoscalerIdentity(pulumi.ComponentResource):
    """The Cluster Autoscaler's IAM role, bound to ``kube-system/cluster-autoscaler`` through EKS Pod Identity.

    Attributes:
        association: the Pod Identity association (the chart's release waits for it: a pod started before it exists
            gets no credentials).
    """

    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, *, eks_cluster_name: pulumi.Input[str], eks_cluster_arn: pulumi.Input[str],
                 cluster_name: str, physical_prefix: str, labels: Mapping[str, str],
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:compute:AwsAutoscalerIdentity", name, provenance.props(), opts)
        self.association = pod_identity_role(
            self, name, physical=f"{physical_prefix}-cluster-autoscaler", eks_cluster_name=eks_cluster_name,
            eks_cluster_arn=eks_cluster_arn, namespace=NAMESPACE, service_account=SERVICE_ACCOUNT,
            policy=to_json(autoscaler_policy(cluster_name)), labels=labels)
        self.register_outputs({"roleArn": self.association.role_arn})
