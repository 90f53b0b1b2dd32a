"""What a GKE node pool boots: the node image it names (GKE's Linux images only, Ubuntu under the GPU Operator) and
a boot disk type the machine type takes (A3 Ultra and A4: Hyperdisk), refused at load with the source."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import run_spec
from tests.inference.specs import without_serving
from tests.program.test_gcp_pool_accounts import POOL, P, errors, h100, spec

__all__ = ["spec"]  # the fixture
FILESTORE = {"type": "filestore", "capacityGiB": 10240, "filestoreTier": "ZONAL", "mountPath": "/checkpoints"}
LUSTRE = "GKE 'About the Managed Lustre CSI driver', Limitations: only Container-Optimized OS nodes"


def test_ubuntu_nodes_cannot_mount_managed_lustre(spec: dict[str, Any]) -> None:
    """GKE's Managed Lustre CSI driver mounts on COS nodes only: an Ubuntu pool, asked for or following from the GPU
    Operator, is refused while the filesystem is Managed Lustre, and accepted beside Filestore."""
    without_serving(spec)  # one GPU pool: the driver owner is the h100 pool's alone
    h100(spec)["imageType"] = "UBUNTU_CONTAINERD"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].imageType: pool 'h100' runs UBUNTU_CONTAINERD (imageType UBUNTU_CONTAINERD), but "
        f"the stack's Managed Lustre filesystem mounts on Container-Optimized OS nodes only ({LUSTRE}): its pods "
        "could never mount it; use COS_CONTAINERD (gpuDriver gke-latest or gke-default) [rule: lustre-cos-only]"]
    del h100(spec)["imageType"]
    h100(spec)["gpuDriver"] = "operator"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].gpuDriver: pool 'h100' runs UBUNTU_CONTAINERD (gpuDriver operator (the GPU Operator "
        f"needs Ubuntu nodes)), but the stack's Managed Lustre filesystem mounts on Container-Optimized OS nodes only "
        f"({LUSTRE}): its pods could never mount it; use COS_CONTAINERD (gpuDriver gke-latest or gke-default) "
        "[rule: lustre-cos-only]"]
    spec["gcp"]["storage"]["filesystem"] = FILESTORE
    run_spec(spec, "prod-gcp")



def test_a_pool_boots_the_image_it_names(spec: dict[str, Any]) -> None:
    h100(spec)["imageType"] = "UBUNTU_CONTAINERD"
    spec["gcp"]["storage"]["filesystem"] = FILESTORE  # Ubuntu nodes cannot mount Managed Lustre
    pools = {r.inputs["name"]: r for r in run_spec(spec, "prod-gcp").graph.of_type(POOL)}
    assert pools["h100"].inputs["nodeConfig"]["imageType"] == "UBUNTU_CONTAINERD"
    assert pools["system"].inputs["nodeConfig"]["imageType"] == "COS_CONTAINERD"  # the default, unchanged


def test_an_image_gke_does_not_offer_is_refused(spec: dict[str, Any]) -> None:
    source = "GKE 'Node images', docs.cloud.google.com/kubernetes-engine/docs/concepts/node-images"
    h100(spec)["imageType"] = "COS"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].imageType: 'COS' is not a node image GKE offers (Docker-based images are not "
        f"supported from GKE 1.24): COS_CONTAINERD or UBUNTU_CONTAINERD ({source}) [rule: gke-image-type]"]
    h100(spec)["imageType"] = "ubuntu_containerd"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].imageType: 'ubuntu_containerd' is not a node image GKE offers: COS_CONTAINERD or "
        f"UBUNTU_CONTAINERD ({source}) [rule: gke-image-type]"]
    h100(spec)["imageType"] = "WINDOWS_LTSC_CONTAINERD"
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].imageType: WINDOWS_LTSC_CONTAINERD is a Windows Server image; the platform's node "
        "agents (GPU stack, fabric, node checks) are Linux DaemonSets: use COS_CONTAINERD or UBUNTU_CONTAINERD "
        "[rule: gke-image-type]"]


def test_the_gpu_operator_needs_ubuntu(spec: dict[str, Any]) -> None:
    h100(spec).update(gpuDriver="operator", imageType="COS_CONTAINERD")
    assert f"{P}.gcp.nodePools[h100].imageType: gpuDriver operator needs UBUNTU_CONTAINERD: the GPU Operator's " \
        "driver containers run on Ubuntu nodes (GKE 'Manage the GPU stack with the NVIDIA GPU Operator') " \
        "[rule: gke-image-type]" in errors(spec)


@pytest.mark.parametrize("machine", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_an_a3_ultra_or_a4_pool_boots_from_hyperdisk_only(spec: dict[str, Any], machine: str) -> None:
    h100(spec).update(machineType=machine, capacity={"type": "spot"}, diskType="pd-balanced")
    (line,) = [e for e in errors(spec) if "[rule: boot-disk-type-supported]" in e]
    assert line.startswith(f"{P}.gcp.nodePools[h100].diskType: {machine} boots from hyperdisk-balanced only, not "
                           "pd-balanced (catalog: GoogleCloudPlatform/cluster-toolkit @10470803")
    h100(spec)["diskType"] = "hyperdisk-balanced"
    assert not [e for e in _errors_or_none(spec) if "boot-disk-type-supported" in e]


def _errors_or_none(spec: dict[str, Any]) -> list[str]:
    try:
        return errors(spec)
    except pytest.fail.Exception:
        return []
