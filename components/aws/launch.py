"""Pure launch-template logic for GPU nodes: the EFA interface layout (user data: components/bootstrap.py).

Kept free of Pulumi so it is tested directly and reused by policies' expectations.
"""

from __future__ import annotations

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


def efa_layout(facts: InstanceFacts, count: int | None = None) -> list[NetworkInterface]:
    """Every EFA interface the type supports (or the first ``count``), in AWS's current recommended layout.

    Network card 0 holds the ENA primary (device 0) and an EFA-only interface (device 1); every other
    card up to ``MaximumEfaInterfaces`` holds one EFA-only interface at device 0 (AWS EC2 User Guide,
    "Maximize network bandwidth on instances with multiple network cards"). Types without EFA get an
    empty list, meaning the launch template does not declare interfaces at all.
    """
    count = facts.efa_count if count is None else min(count, facts.efa_count)
    if count == 0:
        return []
    layout = [NetworkInterface(0, 0, None), NetworkInterface(0, 1, "efa-only")]
    layout += [NetworkInterface(card, 0, "efa-only") for card in range(1, count)]
    return layout
