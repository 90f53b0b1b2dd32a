"""The control plane on AWS: EKS with private endpoint, KMS secrets, audit logs, access entries, add-ons."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import cni_ipv6_policy, fsx_csi_static_policy, pod_identity_trust, service_trust, to_json
from components.aws.stateful import rotating_kms_key, stateful_options
from components.catalog import AddonPin
from components.spec import ControlPlaneSpec
from components.tags import merge_tags

ADMIN_POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
NODE_POLICIES: tuple[str, ...] = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    # Session Manager on every node (SSH only where a group names a key pair and its networks).
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)
CNI_IPV4_POLICY = "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"


def addon(
    parent: pulumi.Resource,
    logical_name: str,
    cluster_name: pulumi.Input[str],
    pin: AddonPin,
    tags: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    **extra: Any,
) -> aws.eks.Addon:
    """An EKS managed add-on at its pinned version (``components/catalog/charts.yaml``, eksAddons).

    A pinned version makes upgrades deliberate: a Kubernetes version bump that needs a newer add-on is a
    catalog change reviewed in a pull request, not a silent change of EKS's default. Where the catalog has no
    sourced version for the cluster's Kubernetes version, the version is left out: EKS installs its default
    version for that Kubernetes version (EKS API CreateAddon: addonVersion is optional) and keeps it until the
    add-on is updated, since the provider records the installed version (computed) rather than drift to a new
    default; the preview warns and prints the command that finds a version to pin.
    """
    return aws.eks.Addon(
        logical_name,
        cluster_name=cluster_name,
        addon_name=pin.name,
        addon_version=pin.version,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        tags=dict(tags),
        opts=pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=parent), opts),
        **extra,
    )


class EksControlPlane(pulumi.ComponentResource):
    """An EKS cluster fit for a shared GPU platform.

    API authentication through access entries only (no aws-auth ConfigMap), secrets envelope-encrypted
    with a rotating KMS key, every control-plane log type to CloudWatch with a retention, standard
    support only (no silent extended-support charges). vpc-cni, kube-proxy and the EKS Pod Identity
    agent are installed as managed add-ons before any node exists.

    The deployer (the role that runs ``pulumi up``) gets its own cluster-admin access entry, and, when it
    runs inside the VPC, HTTPS from its CIDRs on the cluster security group (which the control plane's
    network interfaces carry). :attr:`deployer_access` is what every Kubernetes resource must wait for.

    Attributes:
        eks_cluster_name, endpoint, certificate_authority: what a kubeconfig needs.
        service_cidr: the cluster's service range (IPv4, or IPv6 on an IPv6 cluster): custom AMIs need it to join.
        eks_cluster_arn: the cluster's ARN (Pod Identity trust policies name it).
        cluster_security_group_id: the EKS-managed security group nodes must join.
        node_role_arn: the IAM role every managed node group uses.
        deployer_access: the resources that let the deployer reach and administer the API.
        pod_identity_agent: the EKS Pod Identity agent add-on (add-ons with pod identities wait for it).
    """

    eks_cluster_name: pulumi.Output[str]
    eks_cluster_arn: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    certificate_authority: pulumi.Output[str]
    service_cidr: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    deployer_access: list[pulumi.Resource]
    pod_identity_agent: aws.eks.Addon

    def __init__(
        self,
        name: str,
        *,
        spec: ControlPlaneSpec,
        physical_name: str,
        subnet_ids: Sequence[pulumi.Input[str]],
        labels: Mapping[str, str],
        protect: bool,
        addons: Mapping[str, AddonPin],
        team_access: Sequence[tuple[str, str]] = (),
        ip_family: str = "ipv4",
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:control-plane:EksControlPlane", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = physical_name

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
            assume_role_policy=to_json(service_trust("eks.amazonaws.com")),
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
                # The deployer is named explicitly below; whoever happens to create the cluster gets nothing.
                "bootstrap_cluster_creator_admin_permissions": False,
            },
            encryption_config={"provider": {"key_arn": secrets_key.arn}, "resources": ["secrets"]}
            if spec.secrets_encryption else None,
            enabled_cluster_log_types=list(spec.log_types),
            upgrade_policy={"support_type": "STANDARD"},
            # IPv6 is chosen at creation and never changed (EKS API KubernetesNetworkConfigRequest.ipFamily); the
            # service range is then EKS's own from fc00::/7.
            kubernetes_network_config={"ip_family": "ipv6"} if ip_family == "ipv6" else None,
            deletion_protection=protect,
            tags=merge_tags(labels, cluster_name),
            opts=stateful_options(self, protect, ignore_changes=["name"],
                                  depends_on=[log_group, cluster_policy]),
        )
        cluster_sg = cluster.vpc_config.apply(lambda v: v.cluster_security_group_id or "")

        node_role = aws.iam.Role(
            f"{name}-node-role",
            name=f"{cluster_name}-eks-node",
            assume_role_policy=to_json(service_trust("ec2.amazonaws.com")),
            tags=merge_tags(labels, f"{cluster_name}-eks-node"),
            opts=child,
        )
        node_policies: list[pulumi.CustomResource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-policy-{arn.rsplit('/', 1)[1]}", role=node_role.name, policy_arn=arn, opts=child
            )
            for arn in NODE_POLICIES if not (ip_family == "ipv6" and arn == CNI_IPV4_POLICY)
        ]
        if ip_family == "ipv6":
            node_policies.append(aws.iam.RolePolicy(
                f"{name}-node-cni-ipv6", name=f"{cluster_name}-cni-ipv6", role=node_role.id,
                policy=to_json(cni_ipv6_policy()), opts=child))

        def admin_entry(key: str, principal: str) -> aws.eks.AccessPolicyAssociation:
            entry = aws.eks.AccessEntry(
                f"{name}-{key}",
                cluster_name=cluster.name,
                principal_arn=principal,
                type="STANDARD",
                tags=merge_tags(labels, f"{cluster_name}-{key}"),
                opts=child,
            )
            return aws.eks.AccessPolicyAssociation(
                f"{name}-{key}-policy",
                cluster_name=cluster.name,
                principal_arn=principal,
                policy_arn=ADMIN_POLICY_ARN,
                access_scope={"type": "cluster"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
            )

        for i, principal in enumerate(spec.admin_role_arns):
            admin_entry(f"admin-{i}", principal)

        deployer = spec.deployer
        self.deployer_access = [admin_entry("deployer", deployer.role_arn)]
        if deployer.api_access == "in-vpc":
            for i, cidr in enumerate(deployer.runner_cidrs):
                v6 = ipaddress.ip_network(cidr).version == 6
                self.deployer_access.append(aws.vpc.SecurityGroupIngressRule(
                    f"{name}-deployer-https-{i}",
                    security_group_id=cluster_sg,
                    cidr_ipv4=None if v6 else cidr,
                    cidr_ipv6=cidr if v6 else None,
                    ip_protocol="tcp",
                    from_port=443,
                    to_port=443,
                    description=f"Kubernetes API (HTTPS) from the deployer's runners {cidr}",
                    tags=merge_tags(labels, f"{cluster_name}-deployer-https-{i}"),
                    opts=child,
                ))

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

        # Networking add-ons and the Pod Identity agent come before compute, so that nodes become Ready
        # when they join and pods can get AWS credentials from the start. The VPC CNI enforces
        # NetworkPolicy (team namespaces are default-deny) only when asked to; it keeps the node role's
        # AmazonEKS_CNI_Policy.
        vpc_cni = addon(self, f"{name}-addon-vpc-cni", cluster.name, addons["vpc-cni"],
                        merge_tags(labels, f"{cluster_name}-vpc-cni"), pulumi.ResourceOptions(),
                        configuration_values=json.dumps({"enableNetworkPolicy": "true"}))
        kube_proxy = addon(self, f"{name}-addon-kube-proxy", cluster.name, addons["kube-proxy"],
                           merge_tags(labels, f"{cluster_name}-kube-proxy"), pulumi.ResourceOptions())
        self.pod_identity_agent = addon(
            self, f"{name}-addon-eks-pod-identity-agent", cluster.name, addons["eks-pod-identity-agent"],
            merge_tags(labels, f"{cluster_name}-eks-pod-identity-agent"), pulumi.ResourceOptions())
        # On an upgrade the add-ons whose pins change move right after the control plane and before any node rolls
        # (EKS user guide, update-cluster: update the add-ons with the cluster, then the nodes): every node group
        # depends on them.
        self.network_addons: list[pulumi.Resource] = [vpc_cni, kube_proxy, self.pod_identity_agent]

        self.eks_cluster_name = cluster.name
        self.eks_cluster_arn = cluster.arn
        self.endpoint = cluster.endpoint
        self.certificate_authority = cluster.certificate_authority.apply(lambda ca: ca.data or "")
        self.service_cidr = cluster.kubernetes_network_config.apply(
            lambda c: (c.service_ipv6_cidr if ip_family == "ipv6" else c.service_ipv4_cidr) or "" if c else "")
        self.cluster_security_group_id = cluster_sg
        self.node_role_arn = pulumi.Output.all(node_role.arn, *[p.id for p in node_policies]).apply(
            lambda args: str(args[0])
        )
        self.register_outputs({
            "clusterName": cluster.name,
            "endpoint": cluster.endpoint,
        })


# (add-on, controller service account, AWS managed policy) for the CSI drivers that call AWS APIs.
# The CSI drivers' controller service accounts (in kube-system, created by the add-ons) and their AWS permissions:
# the EBS driver's managed policy (it provisions the platform's volumes), and for FSx only what static volumes need.
CSI_ADDONS: dict[str, tuple[str, str | None]] = {
    "aws-ebs-csi-driver": ("ebs-csi-controller-sa", "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"),
    "aws-fsx-csi-driver": ("fsx-csi-controller-sa", None),
}
CSI_NAMESPACE = "kube-system"


def csi_trust(cluster_arn: pulumi.Input[str], service_account: str) -> pulumi.Output[str]:
    """The Pod Identity trust policy of a CSI controller's role: this cluster, kube-system, its service account."""
    return pulumi.Output.from_input(cluster_arn).apply(
        lambda arn: to_json(pod_identity_trust(arn, CSI_NAMESPACE, service_account)))


class EksAddons(pulumi.ComponentResource):
    """Managed add-ons that need running nodes: CoreDNS, the storage CSI drivers and node monitoring.

    Created after the node groups (CoreDNS cannot become healthy without nodes). The EBS CSI driver is
    always installed; the FSx CSI driver only where a filesystem exists. Each CSI driver gets its own IAM
    role, bound to its controller's service account through EKS Pod Identity (the add-on's
    ``podIdentityAssociations``), not the node role. The node monitoring agent reports GPU, kernel,
    network and storage faults as node conditions, which is what node auto repair acts on.
    """

    def __init__(
        self,
        name: str,
        *,
        eks_cluster_name: pulumi.Input[str],
        eks_cluster_arn: pulumi.Input[str],
        physical_prefix: str,
        addons: Mapping[str, AddonPin],
        with_fsx: bool,
        labels: Mapping[str, str],
        nodes: Sequence[pulumi.Resource],
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:control-plane:EksAddons", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        # A component's depends_on does not reach its children: each add-on names the node groups its pods run on
        # (the system group), or EKS creates it before any node exists and it sits DEGRADED until its 20-minute
        # timeout (terraform-aws-eks creates only vpc-cni and eks-pod-identity-agent before compute).
        on_nodes = pulumi.ResourceOptions(depends_on=list(nodes))
        # The GPU groups roll after these (they depend on them): an upgrade moves the add-ons before the GPU nodes.
        self.addons: list[pulumi.Resource] = [
            addon(self, f"{name}-coredns", eks_cluster_name, addons["coredns"],
                  merge_tags(labels, f"{physical_prefix}-coredns"), on_nodes),
            addon(self, f"{name}-node-monitoring", eks_cluster_name, addons["eks-node-monitoring-agent"],
                  merge_tags(labels, f"{physical_prefix}-node-monitoring"), on_nodes)]
        for addon_name, (service_account, policy_arn) in CSI_ADDONS.items():
            if addon_name == "aws-fsx-csi-driver" and not with_fsx:
                continue
            short = addon_name.removeprefix("aws-").removesuffix("-driver")
            role = aws.iam.Role(
                f"{name}-{short}-role",
                name=f"{physical_prefix}-{short}",
                assume_role_policy=csi_trust(eks_cluster_arn, service_account),
                tags=merge_tags(labels, f"{physical_prefix}-{short}"),
                opts=child,
            )
            grant: pulumi.Resource
            if policy_arn is not None:
                grant = aws.iam.RolePolicyAttachment(
                    f"{name}-{short}-policy", role=role.name, policy_arn=policy_arn, opts=child
                )
            else:
                grant = aws.iam.RolePolicy(f"{name}-{short}-policy", role=role.id,
                                           policy=to_json(fsx_csi_static_policy()), opts=child)
            self.addons.append(addon(
                self, f"{name}-{short}", eks_cluster_name, addons[addon_name],
                merge_tags(labels, f"{physical_prefix}-{short}"), pulumi.ResourceOptions(depends_on=[grant, *nodes]),
                pod_identity_associations=[{"role_arn": role.arn, "service_account": service_account}]))
        self.register_outputs({})
