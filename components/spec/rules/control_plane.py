"""Rules on the control plane: endpoint, logs, Kubernetes version, add-ons, the deployer."""

from __future__ import annotations

import ipaddress
from datetime import datetime

from components.catalog import load_aws_catalog, load_eks_versions, supported_eks_versions
from components.catalog.charts import cluster_autoscaler_image, cluster_autoscaler_versions
from components.spec.aws import AwsSpec
from components.spec.base import _ROLE_ARN_RE, MAX_PUBLIC_ACCESS_CIDRS, PROD_REQUIRED_LOG_TYPES
from components.spec.decisions import covers_everything, is_autoscaled, parse_cidr
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec
from components.spec.rules.cidrs import valid_cidrs


def _check_control_plane(spec: ClusterSpec, aws: AwsSpec, now: datetime, out: _Collector) -> None:
    cp = aws.control_plane
    where = ".aws.controlPlane"
    for i, arn in enumerate(cp.admin_role_arns):
        if not _ROLE_ARN_RE.fullmatch(arn):
            out.add(f"{where}.adminRoleArns[{i}]", "admin-role-arn",
                    f"'{arn}' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)")
    public_nets: list[ipaddress.IPv4Network] = []
    for i, cidr in enumerate(cp.public_access_cidrs):
        net = parse_cidr(cidr)
        if not isinstance(net, ipaddress.IPv4Network):
            reason = net if isinstance(net, str) else "an IPv6 network"
            out.add(f"{where}.publicAccessCidrs[{i}]", "cidr-valid",
                    f"'{cidr}' is not an IPv4 CIDR (address/prefix, no host bits): {reason}")
            continue
        if net.prefixlen == 0:
            out.add(f"{where}.publicAccessCidrs[{i}]", "endpoint-not-open",
                    f"{cidr} opens the API endpoint to the whole internet; list the networks that "
                    "need access")
        else:
            public_nets.append(net)
    if covers_everything(public_nets):
        out.add(f"{where}.publicAccessCidrs", "endpoint-not-open",
                "publicAccessCidrs together cover the whole internet (e.g. 0.0.0.0/1 and 128.0.0.0/1); list the "
                "networks that need access")
    if len(cp.public_access_cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        out.add(f"{where}.publicAccessCidrs", "endpoint-cidr-limit",
                f"EKS accepts at most {MAX_PUBLIC_ACCESS_CIDRS} publicAccessCidrs, got {len(cp.public_access_cidrs)}")
    principals: dict[str, str] = {}
    for i, arn in enumerate(cp.admin_role_arns):
        if arn in principals:
            out.add(f"{where}.adminRoleArns[{i}]", "unique-principals",
                    f"'{arn}' is already {principals[arn]}; EKS allows one access entry per principal")
        principals.setdefault(arn, f"adminRoleArns[{i}]")
    for t, team in enumerate(spec.teams):
        for j, arn in enumerate(team.role_arns):
            if arn in principals:
                out.add(f".teams[{t}].roleArns[{j}]", "unique-principals",
                        f"'{arn}' is already {principals[arn]}; EKS allows one access entry per principal")
            principals.setdefault(arn, out.ref(f".teams[{t}].roleArns[{j}]"))
    if cp.endpoint_access == "public" and not cp.public_access_cidrs:
        out.add(f"{where}.publicAccessCidrs", "endpoint-not-open",
                "a public endpoint needs publicAccessCidrs restricted to listed networks")
    if cp.endpoint_access == "private" and cp.public_access_cidrs:
        out.add(f"{where}.publicAccessCidrs", "endpoint-not-open",
                "publicAccessCidrs only applies when endpointAccess is public")
    _check_deployer(spec, aws, out)
    release = load_eks_versions().get(cp.kubernetes_version)
    loadable = ", ".join(supported_eks_versions(now)) or "none (update components/catalog/eks_versions.yaml)"
    if release is None:
        out.add(f"{where}.kubernetesVersion", "kubernetes-version-supported",
                f"Kubernetes {cp.kubernetes_version} is not a version of the EKS catalog "
                f"(components/catalog/eks_versions.yaml); versions in EKS standard support today: {loadable}")
    elif now >= release.end_of_standard_support:
        out.add(f"{where}.kubernetesVersion", "kubernetes-version-supported",
                f"Kubernetes {cp.kubernetes_version} left EKS standard support on "
                f"{release.end_of_standard_support:%Y-%m-%d}; this blueprint keeps clusters on standard support "
                f"(no extended-support charges): versions in EKS standard support today: {loadable}")
    elif now < release.released:
        out.add(f"{where}.kubernetesVersion", "kubernetes-version-supported",
                f"Kubernetes {cp.kubernetes_version} is not released on EKS before {release.released:%Y-%m-%d}; "
                f"versions in EKS standard support today: {loadable}")
    _check_autoscaler_release(aws, out)
    if len(set(cp.log_types)) != len(cp.log_types):
        out.add(f"{where}.logTypes", "unique-names", "log types are listed twice")
    if spec.environment == "prod":
        missing = [t for t in PROD_REQUIRED_LOG_TYPES if t not in cp.log_types]
        if missing:
            out.add(f"{where}.logTypes", "prod-audit-logs",
                    f"prod clusters must log {', '.join(PROD_REQUIRED_LOG_TYPES)}; missing "
                    f"{', '.join(missing)}")
        if not cp.secrets_encryption:
            out.add(f"{where}.secretsEncryption", "prod-secrets-encryption",
                    "prod clusters must encrypt Kubernetes secrets with KMS")


def _check_autoscaler_release(aws: AwsSpec, out: _Collector) -> None:
    """The Cluster Autoscaler runs the release of the cluster's Kubernetes minor (its README's recommendation): a
    stack whose groups it would manage needs one in the catalog."""
    version = aws.control_plane.kubernetes_version
    catalog = load_aws_catalog()
    autoscaled = [g.name for g in aws.node_groups if g.instance_type in catalog and is_autoscaled(g, catalog[
        g.instance_type])]
    if not autoscaled or cluster_autoscaler_image(version) is not None:
        return
    known = ", ".join(cluster_autoscaler_versions()) or "none"
    latest = cluster_autoscaler_versions()[-1] if cluster_autoscaler_versions() else None
    out.add(".aws.controlPlane.kubernetesVersion", "cluster-autoscaler-release",
            f"the Cluster Autoscaler has no release for Kubernetes {version} in components/catalog/charts.yaml "
            f"(clusterAutoscaler; releases for {known}), and it would manage node group(s) {', '.join(autoscaled)} "
            "(on-demand or spot with minSize < maxSize); it runs the release of the cluster's minor, so "
            + (f"use kubernetesVersion {latest}, or " if latest else "")
            + f"give those groups minSize = maxSize until a {version} release is pinned")


def _check_deployer(spec: ClusterSpec, aws: AwsSpec, out: _Collector) -> None:
    """The deployer must be able to reach the API it applies the platform through, as an admin."""
    cp = aws.control_plane
    dep = cp.deployer
    where = ".aws.controlPlane.deployer"
    if not _ROLE_ARN_RE.fullmatch(dep.role_arn):
        out.add(f"{where}.roleArn", "admin-role-arn",
                f"'{dep.role_arn}' is not an IAM role ARN (arn:aws:iam::<12 digits>:role/<name>)")
    others = {*cp.admin_role_arns, *(arn for t in spec.teams for arn in t.role_arns)}
    if dep.role_arn in others:
        out.add(f"{where}.roleArn", "deployer-access-entry",
                f"'{dep.role_arn}' is also listed as an admin or team role; the deployer gets its own cluster-admin "
                "access entry and EKS allows one access entry per principal: list it only as the deployer")
    runners = valid_cidrs(dep.runner_cidrs, f"{where}.runnerCidrs", out)
    if covers_everything([n for _, n in runners]):
        out.add(f"{where}.runnerCidrs", "runner-cidrs-not-open",
                f"runnerCidrs ({', '.join(dep.runner_cidrs)}) cover the whole internet: list the networks the CI "
                "runners are in; the stack opens HTTPS to the API from them and routes them through the Transit "
                "Gateway, and a 0.0.0.0/0 route there collides with the NAT gateway's default route (EC2 refuses "
                "a second route to the same destination in a route table)")
        return
    if cp.endpoint_access == "private" and dep.api_access != "in-vpc":
        out.add(f"{where}.apiAccess", "deployer-reaches-api",
                "the API endpoint is private, so a deployer outside the VPC cannot apply the Kubernetes platform "
                "(every namespace and Helm release would time out); either run pulumi up inside the VPC (a "
                "self-hosted CI runner or Pulumi Deployments agent) and set apiAccess: in-vpc with its runnerCidrs, "
                "or set endpointAccess: public with publicAccessCidrs that include the runner and apiAccess: "
                "public-endpoint")
    vpc = parse_cidr(aws.network.vpc_cidr)
    outside = [str(r) for _, r in runners if not isinstance(vpc, str) and not (
        r.version == vpc.version and r.subnet_of(vpc))]  # type: ignore[arg-type]
    if dep.api_access == "in-vpc" and outside and dep.transit_gateway_id is None:
        out.add(f"{where}.transitGatewayId", "deployer-reaches-api",
                f"runner CIDR(s) {', '.join(outside)} are outside the VPC ({aws.network.vpc_cidr}): give the Transit "
                "Gateway that connects them (transitGatewayId), so the stack attaches the VPC, routes their traffic "
                "back and lets them resolve the private endpoint; or run the deployer inside the VPC")
    if dep.transit_gateway_id is not None and aws.network.existing is not None:
        out.add(f"{where}.transitGatewayId", "deployer-reaches-api",
                "with network.existing the VPC's route tables are its owner's: connect the runners there and leave "
                "transitGatewayId out")
    if dep.api_access != "in-vpc" and dep.transit_gateway_id is not None:
        out.add(f"{where}.transitGatewayId", "deployer-reaches-api",
                "transitGatewayId only applies to apiAccess: in-vpc")
    if dep.api_access == "public-endpoint" and cp.endpoint_access == "public":
        allowed = []
        for cidr in cp.public_access_cidrs:
            net = parse_cidr(cidr)
            if not isinstance(net, str):  # a bad one is reported on publicAccessCidrs
                allowed.append(net)
        for i, runner in runners:
            if not any(runner.version == a.version and runner.subnet_of(a) for a in allowed):  # type: ignore[arg-type]
                out.add(f"{where}.runnerCidrs[{i}]", "deployer-reaches-api",
                        f"runner CIDR {runner} is not inside publicAccessCidrs, so the deployer cannot reach the "
                        "public endpoint; add it to publicAccessCidrs")
