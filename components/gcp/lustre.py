"""Managed Lustre as pods mount it: the instance the stack creates (storage.filesystem) or an existing one
(storage.filesystem.existing), statically provisioned through GKE's Managed Lustre CSI driver.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.catalog.charts import tool_image
from components.gcp.storage import LUSTRE_FILESYSTEM, lustre_instance_id
from components.kubernetes.objects import SharedFilesystem, volume_generation
from components.spec import ClusterSpec

# Managed Lustre through GKE's CSI driver, statically provisioned (GKE "Access existing Managed Lustre instances on
# GKE using the Managed Lustre CSI driver" and the driver reference: volumeHandle PROJECT_ID/LOCATION/INSTANCE_NAME,
# volumeAttributes ip and filesystem, Retain). The driver mounts only whole filesystems (GoogleCloudPlatform/
# lustre-csi-driver v0.6.11 pkg/csi_driver/node.go: "<ip>@tcp:/<fsname>" and nothing after it), so every team's
# volume is the instance, and pods reach their directory with subPath <team> (an admission policy enforces it).
LUSTRE_CSI = "lustre.csi.storage.gke.io"
LUSTRE_SOURCE = ("GKE, Access existing Managed Lustre instances with the Managed Lustre CSI driver; "
                 "GoogleCloudPlatform/lustre-csi-driver v0.6.11")


def lustre_volume(spec: ClusterSpec, mount_point: pulumi.Input[str] | None) -> SharedFilesystem | None:
    """The Managed Lustre instance as pods mount it, or None (no filesystem, or Filestore/Parallelstore, whose
    static volume formats this blueprint has not confirmed: no shared-fs claim is built for them)."""
    g = spec.gcp_spec()
    fs = g.storage.filesystem
    if fs is None or fs.type != "managed-lustre" or mount_point is None:
        return None
    ip = pulumi.Output.from_input(mount_point).apply(lambda m: str(m or "").split("@", 1)[0])
    name = lustre_filesystem_name(spec)
    assert name is not None

    def attributes(path: str | None) -> dict[str, Any]:
        assert path is None  # the driver mounts the whole filesystem
        return {"ip": ip, "filesystem": name}
    # The volume handle names the instance as the driver's ParseVolumeID reads it (PROJECT_ID/LOCATION/INSTANCE_NAME,
    # lustre-csi-driver v0.6.11 pkg/util/util.go; docs/preprov-guide.md): the stack's own instance, or the existing one.
    existing = fs.existing
    handle = f"{g.project}/{existing.location}/{existing.name}" if existing is not None else \
        f"{g.project}/{g.gpu_zone}/{lustre_instance_id(spec.name)}"
    return SharedFilesystem(
        driver=LUSTRE_CSI, volume_handle=handle, attributes=attributes, capacity_gib=fs.capacity_gib, team_root="",
        scoped=False, tool_image=tool_image(), source=LUSTRE_SOURCE, owned=existing is None,
        generation=ip.apply(lambda address: volume_generation(handle, address, name)))


def lustre_filesystem_name(spec: ClusterSpec) -> str | None:
    """The Lustre filesystem name pods mount: the stack's instance's (lustrefs) or the existing instance's; None
    without Managed Lustre."""
    fs = spec.gcp_spec().storage.filesystem
    if fs is None or fs.type != "managed-lustre":
        return None
    return fs.existing.filesystem if fs.existing is not None else LUSTRE_FILESYSTEM
