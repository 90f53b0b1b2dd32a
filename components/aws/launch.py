"""Pure launch-template logic for GPU nodes: EFA interface layout and AL2023 node user data.

Kept free of Pulumi so it is tested directly and reused by policies' expectations.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from components.catalog import InstanceFacts


@dataclass(frozen=True)
class NetworkInterface:
    """One launch-template network interface."""

    network_card_index: int
    device_index: int
    interface_type: str | None  # None = a plain ENA interface; "efa-only" = EFA without an IP

    @property
    def is_efa(self) -> bool:
        """True for interfaces that give the node an EFA device."""
        return self.interface_type in ("efa", "efa-only")


def efa_layout(facts: InstanceFacts) -> list[NetworkInterface]:
    """Every EFA interface the type supports, in AWS's current recommended layout.

    Network card 0 holds the ENA primary (device 0) and an EFA-only interface (device 1); every other
    card up to ``MaximumEfaInterfaces`` holds one EFA-only interface at device 0 (AWS EC2 User Guide,
    "Maximize network bandwidth on instances with multiple network cards"). Types without EFA get an
    empty list, meaning the launch template does not declare interfaces at all.
    """
    count = facts.efa_count
    if count == 0:
        return []
    layout = [NetworkInterface(0, 0, None), NetworkInterface(0, 1, "efa-only")]
    layout += [NetworkInterface(card, 0, "efa-only") for card in range(1, count)]
    return layout


_BOUNDARY = "//GPU-CLUSTER-BOUNDARY"


def nodeadm_user_data(raid0_local_nvme: bool) -> str | None:
    """Base64 MIME user data with an AL2023 ``NodeConfig``, or None when nothing needs configuring.

    EKS managed node groups merge the cluster connection details into it; this part only asks
    nodeadm to assemble the instance-store NVMe disks into one RAID0 array, which it mounts for the
    kubelet and containerd (``spec.instance.localStorage.strategy: RAID0``).
    """
    if not raid0_local_nvme:
        return None
    body = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{_BOUNDARY}"\n\n'
        f"--{_BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n\n"
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "spec:\n"
        "  instance:\n"
        "    localStorage:\n"
        "      strategy: RAID0\n\n"
        f"--{_BOUNDARY}--\n"
    )
    return base64.b64encode(body.encode()).decode()
