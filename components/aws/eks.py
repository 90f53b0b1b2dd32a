"""The control plane on AWS: EKS with private endpoint, KMS secrets, audit logs, OIDC, access entries."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.aws.stateful import rotating_kms_key, stateful_options
from components.spec import ControlPlaneSpec
from components.tags import merge_tags

ADMIN_POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
NODE_POLICIES: tuple[str, ...] = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    # Session Manager instead of SSH: no key pair and no port 22 anywhere in the cluster.
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)


def assume_role_policy(service: str) -> str:
    """Trust policy letting one AWS service principal assume a role."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service},
                       "Action": "sts:AssumeRole"}],
    })


class EksControlPlane(pulumi.ComponentResource):
    """An EKS cluster fit for a shared GPU platform.

    API authentication through access entries only (no aws-auth ConfigMap), secrets envelope-encrypted
    with a rotating KMS key, every control-plane log type to CloudWatch with a retention, standard
    support only (no silent extended-support charges), and an IAM OIDC provider for service-account
    roles. vpc-cni and kube-proxy are installed as managed add-ons before any node exists.

    Attributes:
        cluster_name, endpoint, certificate_authority: what a kubeconfig needs.
        cluster_security_group_id: the EKS-managed security group nodes must join.
        node_role_arn: the IAM role every managed node group uses.
        oidc_provider_arn, oidc_issuer: for IAM roles for service accounts.
    """

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    certificate_authority: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: ControlPlaneSpec,
        cluster_name: str,
        subnet_ids: Sequence[pulumi.Input[str]],
        labels: Mapping[str, str],
        protect: bool,
        team_access: Sequence[tuple[str, str]] = (),
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:control-plane:EksControlPlane", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        secrets_key = rotating_kms_key(
            self, f"{name}-secrets-key", f"{cluster_name}-eks-secrets",
            f"{cluster_name}: envelope encryption of Kubernetes secrets", labels, protect,
        )
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-log-group",
            # EKS writes to this exact name; creating it first sets retention instead of "never expire".
            name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=spec.log_retention_days,
            tags=merge_tags(labels, f"{cluster_name}-control-plane-logs"),
            # Audit logs are evidence: kept through renames and protected like the cluster itself.
            opts=stateful_options(self, protect, ignore_changes=["name"]),
        )

        cluster_role = aws.iam.Role(
            f"{name}-cluster-role",
            name=f"{cluster_name}-eks-cluster",
            assume_role_policy=assume_role_policy("eks.amazonaws.com"),
            tags=merge_tags(labels, f"{cluster_name}-eks-cluster"),
            opts=child,
        )
        cluster_policy = aws.iam.RolePolicyAttachment(
            f"{name}-cluster-policy",
            role=cluster_role.name,
            policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
            opts=child,
        )

        public = spec.endpoint_access == "public"
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=spec.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config={
                "subnet_ids": list(subnet_ids),
                "endpoint_private_access": True,
                "endpoint_public_access": public,
                "public_access_cidrs": list(spec.public_access_cidrs) if public else None,
            },
            access_config={
                "authentication_mode": "API",
                "bootstrap_cluster_creator_admin_permissions": False,
            },
            encryption_config={"provider": {"key_arn": secrets_key.arn}, "resources": ["secrets"]}
            if spec.secrets_encryption else None,
            enabled_cluster_log_types=list(spec.log_types),
            upgrade_policy={"support_type": "STANDARD"},
            deletion_protection=protect,
            tags=merge_tags(labels, cluster_name),
            opts=stateful_options(self, protect, ignore_changes=["name"],
                                  depends_on=[log_group, cluster_policy]),
        )

        oidc_issuer = cluster.identities.apply(lambda ids: ids[0].oidcs[0].issuer if ids and ids[0].oidcs else "")
        oidc = aws.iam.OpenIdConnectProvider(
            f"{name}-oidc",
            url=oidc_issuer,
            client_id_lists=["sts.amazonaws.com"],
            tags=merge_tags(labels, f"{cluster_name}-oidc"),
            opts=child,
        )

        node_role = aws.iam.Role(
            f"{name}-node-role",
            name=f"{cluster_name}-eks-node",
            assume_role_policy=assume_role_policy("ec2.amazonaws.com"),
            tags=merge_tags(labels, f"{cluster_name}-eks-node"),
            opts=child,
        )
        node_policies = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-policy-{arn.rsplit('/', 1)[1]}", role=node_role.name, policy_arn=arn, opts=child
            )
            for arn in NODE_POLICIES
        ]

        for i, principal in enumerate(spec.admin_role_arns):
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{i}",
                cluster_name=cluster.name,
                principal_arn=principal,
                type="STANDARD",
                tags=merge_tags(labels, f"{cluster_name}-admin-{i}"),
                opts=child,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}-policy",
                cluster_name=cluster.name,
                principal_arn=principal,
                policy_arn=ADMIN_POLICY_ARN,
                access_scope={"type": "cluster"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
            )

        for i, (principal, group) in enumerate(team_access):
            # Team roles get no cluster-wide access policy: only their namespace's RoleBinding applies.
            aws.eks.AccessEntry(
                f"{name}-team-{i}",
                cluster_name=cluster.name,
                principal_arn=principal,
                type="STANDARD",
                kubernetes_groups=[group],
                tags=merge_tags(labels, f"{cluster_name}-team-{i}"),
                opts=child,
            )

        # Networking add-ons come before compute so that nodes become Ready when they join. The VPC
        # CNI enforces NetworkPolicy (team namespaces are default-deny) only when asked to.
        for addon, config in (("vpc-cni", {"enableNetworkPolicy": "true"}), ("kube-proxy", None)):
            aws.eks.Addon(
                f"{name}-addon-{addon}",
                cluster_name=cluster.name,
                addon_name=addon,
                configuration_values=json.dumps(config) if config else None,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=merge_tags(labels, f"{cluster_name}-{addon}"),
                opts=child,
            )

        self.cluster_name = cluster.name
        self.endpoint = cluster.endpoint
        self.certificate_authority = cluster.certificate_authority.apply(lambda ca: ca.data or "")
        self.cluster_security_group_id = cluster.vpc_config.apply(lambda v: v.cluster_security_group_id or "")
        self.node_role_arn = pulumi.Output.all(node_role.arn, *[p.id for p in node_policies]).apply(
            lambda args: str(args[0])
        )
        self.oidc_provider_arn = oidc.arn
        self.oidc_issuer = oidc_issuer
        self.register_outputs({
            "clusterName": cluster.name,
            "endpoint": cluster.endpoint,
            "oidcProviderArn": oidc.arn,
        })


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str) -> str:
    """Trust policy letting exactly one Kubernetes service account assume a role through the OIDC provider."""
    issuer = oidc_issuer.removeprefix("https://")
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {
                f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                f"{issuer}:aud": "sts.amazonaws.com",
            }},
        }],
    })


def _irsa_policy_output(
    provider_arn: pulumi.Input[str], issuer: pulumi.Input[str], service_account: str
) -> pulumi.Output[str]:
    return pulumi.Output.all(provider_arn, issuer).apply(
        lambda a: irsa_trust_policy(str(a[0]), str(a[1]), "kube-system", service_account)
    )


# (add-on, service account, AWS managed policy) for the CSI drivers that need AWS permissions.
CSI_ADDONS: dict[str, tuple[str, str]] = {
    "aws-ebs-csi-driver": ("ebs-csi-controller-sa", "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"),
    "aws-fsx-csi-driver": ("fsx-csi-controller-sa", "arn:aws:iam::aws:policy/AmazonFSxFullAccess"),
}


class EksAddons(pulumi.ComponentResource):
    """Managed add-ons that need running nodes: CoreDNS and the storage CSI drivers.

    Created after the node groups (CoreDNS cannot become healthy without nodes). The EBS CSI driver is
    always installed; the FSx CSI driver only where a filesystem exists. Each CSI driver gets its own
    IAM role bound to its controller's service account (IRSA), not the node role.
    """

    def __init__(
        self,
        name: str,
        cluster_name: pulumi.Input[str],
        physical_prefix: str,
        oidc_provider_arn: pulumi.Input[str],
        oidc_issuer: pulumi.Input[str],
        with_fsx: bool,
        labels: Mapping[str, str],
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:control-plane:EksAddons", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        aws.eks.Addon(
            f"{name}-coredns",
            cluster_name=cluster_name,
            addon_name="coredns",
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=merge_tags(labels, f"{physical_prefix}-coredns"),
            opts=child,
        )
        for addon, (service_account, policy_arn) in CSI_ADDONS.items():
            if addon == "aws-fsx-csi-driver" and not with_fsx:
                continue
            short = addon.removeprefix("aws-").removesuffix("-driver")
            role = aws.iam.Role(
                f"{name}-{short}-role",
                name=f"{physical_prefix}-{short}",
                assume_role_policy=_irsa_policy_output(oidc_provider_arn, oidc_issuer, service_account),
                tags=merge_tags(labels, f"{physical_prefix}-{short}"),
                opts=child,
            )
            attachment = aws.iam.RolePolicyAttachment(
                f"{name}-{short}-policy", role=role.name, policy_arn=policy_arn, opts=child
            )
            aws.eks.Addon(
                f"{name}-{short}",
                cluster_name=cluster_name,
                addon_name=addon,
                service_account_role_arn=role.arn,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=merge_tags(labels, f"{physical_prefix}-{short}"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment]),
            )
        self.register_outputs({})
