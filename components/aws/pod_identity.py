"""A role bound to one Kubernetes service account through EKS Pod Identity, with one inline policy: the shape every
controller of this program that calls AWS uses (the Cluster Autoscaler, the telemetry exporters, External Secrets)."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from components.aws.iam import pod_identity_trust, to_json
from components.tags import merge_tags


def pod_identity_role(parent: pulumi.Resource, name: str, *, physical: str, eks_cluster_name: pulumi.Input[str],
                      eks_cluster_arn: pulumi.Input[str], namespace: str, service_account: str,
                      policy: pulumi.Input[str], labels: Mapping[str, str]) -> aws.eks.PodIdentityAssociation:
    """``<name>-role`` (trusted by Pod Identity for ``namespace/service_account`` of this cluster only), its inline
    ``<name>-policy``, and ``<name>-pod-identity``, the association, made once the policy is in place (a pod started
    before the association exists gets no credentials, so what runs the pod waits for it)."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        f"{name}-role", name=physical,
        assume_role_policy=pulumi.Output.from_input(eks_cluster_arn).apply(
            lambda arn: to_json(pod_identity_trust(arn, namespace, service_account))),
        tags=merge_tags(labels, physical), opts=child)
    attached = aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy, opts=child)
    return aws.eks.PodIdentityAssociation(
        f"{name}-pod-identity", cluster_name=eks_cluster_name, namespace=namespace, service_account=service_account,
        role_arn=role.arn, tags=merge_tags(labels, f"{physical}-pod-identity"),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[attached]))
