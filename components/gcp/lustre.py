"""Managed Lustre as pods mount it: the instance the stack creates (storage.filesystem), statically provisioned
through GKE's Managed Lustre CSI driver.
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

    def attributes(path: str | None) -> dict[str, Any]:
        assert path is None  # the driver mounts the whole filesystem
        return {"ip": ip, "filesystem": LUSTRE_FILESYSTEM}
    handle = f"{g.project}/{g.gpu_zone}/{lustre_instance_id(spec.name)}"
    return SharedFilesystem(
        driver=LUSTRE_CSI, volume_handle=handle, attributes=attributes, capacity_gib=fs.capacity_gib, team_root="",
        scoped=False, tool_image=tool_image(), source=LUSTRE_SOURCE,
        generation=ip.apply(lambda address: volume_generation(handle, address, LUSTRE_FILESYSTEM)))
