"""Nodes following the control plane. EKS: a custom AMI says which minor it is built for (EKS takes no version for
such a group), a pinned AMI release belongs to the cluster's minor, and no node runs newer than the control plane or
further behind than the skew EKS documents. GKE: each pool's upgrade settings fit its capacity."""

from __future__ import annotations

import re

from components.catalog import load_aws_catalog
from components.catalog.versions import ami_family, minor_of
from components.spec.aws import AwsSpec
from components.spec.decisions import derive_ami_type, pool_upgrade
from components.spec.errors import _Collector
from components.spec.gcp import GcpSpec

# "Starting from Kubernetes version 1.28, kubelet may be up to three minor versions older than kube-apiserver"; never
# newer (EKS user guide, "Update existing cluster to new Kubernetes version", awsdocs/amazon-eks-user-guide
# latest/ug/clusters/update-cluster.adoc; Kubernetes "Version Skew Policy"). Read 2026-12-02.
EKS_KUBELET_SKEW = 3
_AL2023_RELEASE = re.compile(r"^(\d+)\.(\d+)\.\d+-\d{8}$")
_BOTTLEROCKET_RELEASE = re.compile(r"^\d+\.\d+\.\d+-[0-9a-f]{8}$")


def check_node_versions(aws: AwsSpec, out: _Collector) -> None:
    """Each group's Kubernetes minor and AMI release against the control plane's minor."""
    catalog = load_aws_catalog()
    plane = aws.control_plane.kubernetes_version
    for i, ng in enumerate(aws.node_groups):
        where = f".aws.nodeGroups[{i}]"
        if ng.ami_id is not None and ng.ami_kubernetes_version is None:
            out.add(f"{where}.amiKubernetesVersion", "custom-ami-kubernetes-version",
                    f"a custom AMI (amiId {ng.ami_id}) needs the Kubernetes minor it is built for: EKS takes no "
                    "version for such a group (CreateNodegroup: a launch template with a custom AMI and a version "
                    f"fails), so the stack must say it, and it is checked against the control plane's {plane}")
        if ng.ami_kubernetes_version is not None:
            if ng.ami_id is None:
                out.add(f"{where}.amiKubernetesVersion", "custom-ami-kubernetes-version",
                        "amiKubernetesVersion describes a custom AMI (amiId); an EKS AMI's version is the cluster's")
            else:
                _check_skew(ng.ami_kubernetes_version, plane, f"{where}.amiKubernetesVersion", out)
        release = ng.ami_release_version
        if release is None or ng.instance_type not in catalog:
            continue
        if ng.ami_id is not None:
            out.add(f"{where}.amiReleaseVersion", "ami-release-version",
                    "a custom AMI is the group's release: EKS refuses releaseVersion beside a launch template's "
                    "ImageId (CreateNodegroup, UpdateNodegroupVersion)")
            continue
        family = ami_family(derive_ami_type(ng, catalog[ng.instance_type]))
        if family == "bottlerocket":
            if not _BOTTLEROCKET_RELEASE.fullmatch(release):
                out.add(f"{where}.amiReleaseVersion", "ami-release-version",
                        f"'{release}' is not a Bottlerocket release (<Bottlerocket version>-<8 hex digits>, e.g. "
                        "1.61.0-8ef015e0): the group's amiType is Bottlerocket")
            continue
        m = _AL2023_RELEASE.fullmatch(release)
        if m is None:
            out.add(f"{where}.amiReleaseVersion", "ami-release-version",
                    f"'{release}' is not an AL2023 EKS AMI release (<Kubernetes patch>-<YYYYMMDD>, e.g. "
                    "1.35.8-20260930)")
        elif f"{m.group(1)}.{m.group(2)}" != plane:
            out.add(f"{where}.amiReleaseVersion", "ami-release-version",
                    f"{release} is an AMI release of Kubernetes {m.group(1)}.{m.group(2)}, and the group runs the "
                    f"cluster's {plane}: give a {plane} release (aws ssm get-parameter --name /aws/service/eks/"
                    f"optimized-ami/{plane}/amazon-linux-2023/x86_64/nvidia/recommended/release_version)")


def _check_skew(node: str, plane: str, key: str, out: _Collector) -> None:
    n, p = minor_of(node), minor_of(plane)
    if n > p:
        out.add(key, "node-version-skew",
                f"the AMI is built for Kubernetes {node}, newer than the control plane's {plane}: kubelet must not "
                "be newer than the API server (Kubernetes version skew policy); upgrade the control plane first")
    elif n[0] == p[0] and p[1] - n[1] > EKS_KUBELET_SKEW:
        out.add(key, "node-version-skew",
                f"the AMI is built for Kubernetes {node}, {p[1] - n[1]} minors behind the control plane's {plane}: "
                f"EKS allows kubelet at most {EKS_KUBELET_SKEW} minors older (EKS user guide, update-cluster); "
                f"build it for 1.{p[1] - EKS_KUBELET_SKEW} or later")


def check_pool_upgrades(gcp: GcpSpec, out: _Collector) -> None:
    """GKE pools' upgrade settings: complete for their strategy, and none that needs capacity a reservation does not
    have (a surge node, a green pool) on a reserved pool; flex-start pools keep GKE's way (their nodes come from the
    Dynamic Workload Scheduler and are replaced by new requests, not surged)."""
    for i, pool in enumerate(gcp.node_pools):
        up, where = pool.upgrade, f".gcp.nodePools[{i}].upgrade"
        if up is None:
            continue
        cap = pool.capacity.type
        if cap == "flex-start":
            out.add(where, "pool-upgrade-settings",
                    "a flex-start pool's nodes come from the Dynamic Workload Scheduler and live at most maxRunHours: "
                    "GKE does not surge or blue-green them (short-lived upgrades); leave upgrade out")
            continue
        if up.strategy == "blue-green":
            if cap == "reservation":
                out.add(f"{where}.strategy", "pool-upgrade-on-reservation",
                        "blue-green creates a second pool's worth of nodes before draining the first, and a "
                        "reservation has no spare VM for them (GKE: the strategy needs 'enough quota, resource "
                        "availability, or reservation capacity'); use surge with maxSurge 0")
            if up.blue_green is None:
                out.add(f"{where}.blueGreen", "pool-upgrade-settings",
                        "strategy blue-green needs blueGreen with batchPercentage or batchNodeCount")
            elif (up.blue_green.batch_percentage is None) == (up.blue_green.batch_node_count is None):
                out.add(f"{where}.blueGreen", "pool-upgrade-settings",
                        "give one of batchPercentage (a share in (0, 1]) and batchNodeCount: the blue pool is drained "
                        "in batches of either size (GKE StandardRolloutPolicy)")
            for key, value in (("maxSurge", up.max_surge), ("maxUnavailable", up.max_unavailable)):
                if value is not None:
                    out.add(f"{where}.{key}", "pool-upgrade-settings", f"{key} is a surge setting; blue-green "
                            "drains in the batches of blueGreen")
            continue
        if up.blue_green is not None:
            out.add(f"{where}.blueGreen", "pool-upgrade-settings", "blueGreen applies to strategy blue-green only")
        settings = pool_upgrade(pool)
        if settings is None:
            continue
        if cap == "reservation" and settings.max_surge:
            out.add(f"{where}.maxSurge", "pool-upgrade-on-reservation",
                    f"maxSurge {settings.max_surge} asks for VMs beyond the pool's, and a reservation has no spare "
                    "one: the upgrade stalls waiting for them (GKE retries until it can); use maxSurge 0 and "
                    "maxUnavailable 1 (one node replaced in place at a time)")
        if not settings.max_surge and not settings.max_unavailable:
            out.add(where, "pool-upgrade-settings",
                    "maxSurge and maxUnavailable are both 0: GKE could replace no node (at least one must be above "
                    "0: pulumi_gcp NodePoolUpgradeSettingsArgs)")
