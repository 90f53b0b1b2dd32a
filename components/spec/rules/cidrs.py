"""CIDR lists in the spec (SSH sources, runner networks, Slurm login sources): each parsed once, the same way."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from components.spec.decisions import parse_cidr
from components.spec.errors import _Collector

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def valid_cidrs(cidrs: Sequence[str], where: str, out: _Collector) -> list[tuple[int, Network]]:
    """(index, network) of each entry of ``cidrs`` that parses; each one that does not is reported at
    ``<where>[i]`` (rule cidr-valid: prefix notation, no host bits, as AWS and GCP APIs take them)."""
    nets = []
    for i, cidr in enumerate(cidrs):
        net = parse_cidr(cidr)
        if isinstance(net, str):
            out.add(f"{where}[{i}]", "cidr-valid", f"'{cidr}' is not a CIDR (address/prefix, no host bits): {net}")
        else:
            nets.append((i, net))
    return nets
