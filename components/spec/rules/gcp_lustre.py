"""Rules on an existing Managed Lustre instance the stack mounts without creating it (gcp.storage.filesystem.existing).

Nothing reads the instance at preview, so what the stack is told about it is checked for shape: a zone of the stack's
region, the mount point's IPv4 address (an address the private service access peering gives, never one of the stack's
own ranges) and the Lustre filesystem name (Managed Lustre: up to eight letters and digits, starting with a letter;
GKE Managed Lustre CSI driver reference, StorageClass `filesystem`, read 2026-12-02). The driver mounts
``<ip>@tcp:/<filesystem>`` (GoogleCloudPlatform/lustre-csi-driver v0.6.11 pkg/csi_driver/node.go).
"""

from __future__ import annotations

import ipaddress
import re

from components.spec.decisions import parse_cidr
from components.spec.errors import _Collector
from components.spec.gcp import GcpSpec

_FSNAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,7}$")
# The instance's address comes from the private service access range, which the stack allocates without an address
# (GCP picks a private one); private (RFC 1918) and the shared range 100.64.0.0/10 are accepted, as the stack's own
# ranges are (rules/gcp.py _check_ranges). Google's list of valid IPv4 ranges was not read for this rule.
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
_WHERE = ".gcp.storage.filesystem.existing"


def check_existing_lustre(gcp: GcpSpec, out: _Collector) -> None:
    """An existing instance is Managed Lustre, in the stack's region, at a private address outside the stack's own
    ranges, with a filesystem name Lustre accepts."""
    fs = gcp.storage.filesystem
    if fs is None or fs.existing is None:
        return
    existing = fs.existing
    if fs.type != "managed-lustre":
        out.add(_WHERE, "lustre-existing-type",
                f"existing names a Managed Lustre instance; a {fs.type} filesystem is created by the stack: remove "
                "existing or set type managed-lustre")
        return
    if not existing.location.startswith(f"{gcp.region}-"):
        out.add(f"{_WHERE}.location", "lustre-existing-location",
                f"'{existing.location}' is not a zone of gcp.region '{gcp.region}': the nodes mount the instance over "
                f"the stack's VPC and its private service access peering; use an instance in {gcp.region} (best in "
                f"gpuZone {gcp.gpu_zone})")
    _check_ip(gcp, existing.ip, out)
    if not _FSNAME.fullmatch(existing.filesystem):
        hint = " (give only the part after @tcp:/ of the mount point)" if "/" in existing.filesystem or "@" in \
            existing.filesystem else ""
        out.add(f"{_WHERE}.filesystem", "lustre-existing-filesystem",
                f"'{existing.filesystem}' is not a Lustre filesystem name: up to 8 letters and digits, starting with "
                f"a letter{hint}")


def _check_ip(gcp: GcpSpec, ip: str, out: _Collector) -> None:
    key = f"{_WHERE}.ip"
    if "@" in ip:
        out.add(key, "lustre-existing-ip",
                f"'{ip}' is a mount point: give its address before @tcp as ip and the name after @tcp:/ as filesystem")
        return
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        out.add(key, "lustre-existing-ip", f"'{ip}' is not an IPv4 address (the instance's mount point address, e.g. "
                "10.90.1.4)")
        return
    if not isinstance(address, ipaddress.IPv4Address):
        out.add(key, "lustre-existing-ip", f"'{ip}' is IPv6: the Lustre mount point is an IPv4 address")
        return
    special = address.is_loopback or address.is_link_local or address.is_multicast or address.is_unspecified or \
        address.is_reserved
    if special or not (address.is_private or address in _SHARED):
        out.add(key, "lustre-existing-ip",
                f"'{ip}' is not a private address: the instance is reached at an address of the private service "
                "access range of the stack's VPC (RFC 1918 or 100.64.0.0/10)")
        return
    net = gcp.network
    for name, value in (("nodeCidr", net.node_cidr), ("podsCidr", net.pods_cidr), ("servicesCidr", net.services_cidr),
                        ("controlPlaneCidr", net.control_plane_cidr), ("gpuNetworksCidr", net.gpu_networks_cidr),
                        ("proxyOnlyCidr", net.proxy_only_cidr)):
        cidr = parse_cidr(value) if value is not None else None
        if isinstance(cidr, ipaddress.IPv4Network) and address in cidr:
            out.add(key, "lustre-existing-ip",
                    f"'{ip}' is inside gcp.network.{name} '{cidr}': the instance's address comes from the private "
                    "service access range of the stack's VPC, never from the stack's own ranges")
            return
