"""What the Kubernetes platform needs to know of GKE: the topology labels GKE puts on nodes, the CMEK-encrypted
Persistent Disk storage class, the GPU networks pods attach to (multi-networking objects), the GPUDirect NCCL
plugin installers, and each team's checkpoint volume through the GCS FUSE CSI driver.

The Kubernetes layer (``components/kubernetes/``) names no cloud; this module is the GKE side of the seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components.kubernetes.objects import Manifest, NetworkTopology

# Kueue topology-aware scheduling on GKE: the labels GKE puts on nodes of dense (reservation-placed) A3 Mega,
# A3 Ultra and A4 capacity, top layer first (GKE "Schedule workloads with Topology Aware Scheduling": block,
# sub-block, host), then the node.
GKE_TOPOLOGY = NetworkTopology(name="gke-network", node_labels=(
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "kubernetes.io/hostname",
))
# The Compute Engine PD CSI driver (GKE add-on) with a customer-managed key for the platform's own volumes
# (GKE "Using customer-managed encryption keys": parameter disk-encryption-kms-key).
PD_CSI = "pd.csi.storage.gke.io"
# The GCS FUSE CSI driver (GKE add-on gcs_fuse_csi_driver_config). Mount options for checkpoints follow GKE's
# "Optimize Cloud Storage FUSE CSI driver for GKE performance" (read 2026-11-30): implicit-dirs so prefixes act as
# directories, an unlimited metadata cache TTL for the job's own tree, and parallel downloads from a file cache for
# restores; the team's prefix is the only directory mounted (only-dir).
GCSFUSE_CSI = "gcsfuse.csi.storage.gke.io"
CHECKPOINT_MOUNT_OPTIONS = (
    "implicit-dirs",
    "metadata-cache:ttl-secs:-1",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
    "file-cache:max-size-mb:-1",
    "file-cache:cache-file-for-range-read:true",
    "file-cache:enable-parallel-downloads:true",
)
CHECKPOINT_VOLUME = "checkpoints"


@dataclass(frozen=True)
class GpuNetwork:
    """One GPU network pods attach to: its Kubernetes name, its VPC and subnet, and how the NIC is exposed."""

    name: str  # the Network object's name, which pods name in networking.gke.io/interfaces
    vpc: str
    subnet: str
    device_mode: str  # NetDevice (gVNIC: TCPX, TCPXO, the extra NIC of RDMA types) or RDMA


def network_objects(networks: Sequence[GpuNetwork]) -> list[Manifest]:
    """A GKENetworkParamSet and a Device-type Network per GPU network (GKE multi-networking; cluster-toolkit
    gke-cluster templates gke-network-paramset and network-object)."""
    out: list[Manifest] = []
    for net in networks:
        out.append({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": net.name},
                    "spec": {"vpc": net.vpc, "vpcSubnet": net.subnet, "deviceMode": net.device_mode}})
        out.append({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": net.name},
                    "spec": {"type": "Device",
                             "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                               "name": net.name}}})
    return out


def pd_storage_class_parameters(kms_key: str | None) -> dict[str, str]:
    """Balanced PD for the platform's volumes, encrypted with the stack's key when it has one."""
    params = {"type": "pd-balanced"}
    if kms_key:
        params["disk-encryption-kms-key"] = kms_key
    return params


def checkpoint_volume(team: str, bucket: str, labels: dict[str, str]) -> tuple[Manifest, Manifest]:
    """A team's checkpoint volume: a PersistentVolume on the GCS FUSE CSI driver mounting only ``<team>/`` of the
    bucket, and the claim in the team's namespace bound to it. Pods mount the claim and run as the team's
    ``checkpoints`` service account, which IAM lets write that prefix only (Workload Identity Federation)."""
    pv_name = f"{CHECKPOINT_VOLUME}-{team}"
    pv: Manifest = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": dict(labels)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "capacity": {"storage": "5Ti"},  # informational for GCS FUSE; the bucket has no size
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "gcs-fuse-checkpoints",
            "claimRef": {"namespace": team, "name": CHECKPOINT_VOLUME},
            "mountOptions": [*CHECKPOINT_MOUNT_OPTIONS, f"only-dir={team}"],
            # The driver's pre-mount check lists the whole bucket, which the team may not (its grant is on its
            # managed folder): skipped, the sidecar lists only the team's prefix (gcs-fuse-csi-driver
            # skipCSIBucketAccessCheck).
            "csi": {"driver": GCSFUSE_CSI, "volumeHandle": bucket,
                    "volumeAttributes": {"gcsfuseMetadataPrefetchOnMount": "true",
                                         "skipCSIBucketAccessCheck": "true"}},
        },
    }
    pvc: Manifest = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": CHECKPOINT_VOLUME, "namespace": team, "labels": dict(labels)},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "5Ti"}},
                 "volumeName": pv_name, "storageClassName": "gcs-fuse-checkpoints"},
    }
    return pv, pvc


def bucket_volume(purpose: str, team: str, bucket: str, read_only: bool,
                  labels: dict[str, str]) -> tuple[Manifest, Manifest]:
    """A team's volume of one of gcp.storage.buckets: the whole bucket through the GCS FUSE CSI driver, mounted with
    the checkpoint volume's options, and the claim ``<purpose>`` in the team's namespace. A read-only volume is
    ReadOnlyMany with ``csi.readOnly`` (the driver mounts it ``ro``: gcs-fuse-csi-driver pkg/csi_driver/utils.go
    parseRequestArguments); IAM (roles/storage.objectViewer) is what keeps the team from writing.

    The volume is ``<purpose>.<team>``: a dot, which neither name has, keeps it apart from every other bucket's and
    from ``checkpoints-<team>`` (a bucket ``data`` of team ``ml-ops`` and a bucket ``data-ml`` of team ``ops``)."""
    pv_name = f"{purpose}.{team}"
    storage_class = f"gcs-fuse-{purpose}"
    modes = ["ReadOnlyMany"] if read_only else ["ReadWriteMany"]
    pv: Manifest = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": dict(labels)},
        "spec": {
            "accessModes": modes,
            "capacity": {"storage": "5Ti"},  # informational for GCS FUSE; the bucket has no size
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "claimRef": {"namespace": team, "name": purpose},
            "mountOptions": list(CHECKPOINT_MOUNT_OPTIONS),
            "csi": {"driver": GCSFUSE_CSI, "volumeHandle": bucket, "readOnly": read_only,
                    "volumeAttributes": {"gcsfuseMetadataPrefetchOnMount": "true"}},
        },
    }
    pvc: Manifest = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": purpose, "namespace": team, "labels": dict(labels)},
        "spec": {"accessModes": modes, "resources": {"requests": {"storage": "5Ti"}},
                 "volumeName": pv_name, "storageClassName": storage_class},
    }
    return pv, pvc
