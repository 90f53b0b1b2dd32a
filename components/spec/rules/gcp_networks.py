"""Rules on a GCP stack's GPU networks: the NICs of GPUDirect machine types (one flavour per stack, a known NIC count,
pinned node agents) and the subnets they take: one of gpuSubnetPrefixLength per network, or on RDMA machine types the
second gVNIC network's subnet sized apart (gvnicSubnetPrefixLength, as cluster-toolkit's A3 Ultra blueprint sizes it).
The subnets must be ones GCP creates, fit in gpuNetworksCidr and hold the pools' nodes."""

from __future__ import annotations

import ipaddress
import math

from components.catalog.gcp_machines import MachineFacts, gcp_storage_limits, gpudirect_manifests
from components.spec.decisions import (
    gpu_network_count,
    gpu_subnet_layout,
    gpu_subnet_prefix,
    gpudirect_pools,
    parse_cidr,
)
from components.spec.errors import _Collector
from components.spec.gcp import GcpNodePoolSpec, GcpSpec

_NET = ".gcp.network"


def check_gpu_networks(gcp: GcpSpec, gpu: list[tuple[GcpNodePoolSpec, MachineFacts]], out: _Collector) -> None:
    """The GPU NICs of GPUDirect machine types: one flavour per stack, a known NIC count, and subnets that GCP creates,
    that gpuNetworksCidr holds and that hold the pools' nodes (each node takes one address of every GPU subnet)."""
    net = gcp.network
    direct = gpudirect_pools(gpu)
    if not direct:
        for key, value in (("gpuNetworksCidr", net.gpu_networks_cidr),
                           ("gpuSubnetPrefixLength", net.gpu_subnet_prefix_length),
                           ("gvnicSubnetPrefixLength", net.gvnic_subnet_prefix_length)):
            if value is not None:
                out.add(f"{_NET}.{key}", "gpu-networks-required",
                        "no node pool has a GPUDirect machine type, so there are no GPU networks to address")
        return
    flavours = sorted({f"{f.gpudirect} ({f.gpu_nic_count} NICs)" for _, f in direct})
    if len(flavours) > 1:
        out.add(".gcp.nodePools", "gpudirect-one-flavour",
                f"the GPUDirect pools need different GPU networks ({', '.join(flavours)}); one stack wires one set: "
                "put the machine types in separate stacks")
    manifests = gpudirect_manifests()
    for pool, facts in direct:
        uncovered = [m.name for m in manifests.get(facts.gpudirect, ()) if facts.accelerator not in m.accelerators]
        if uncovered or facts.gpudirect not in manifests:
            i = next(k for k, p in enumerate(gcp.node_pools) if p is pool)
            out.add(f".gcp.nodePools[{i}].machineType", "gpudirect-plugin-pinned",
                    f"the pinned GPUDirect-{facts.gpudirect} node agents (components/catalog/gke_manifests.yaml) do "
                    f"not select {facts.accelerator} ({', '.join(uncovered) or 'none pinned'}): its pods would get no "
                    "NCCL plugin; pin a manifest that covers it")
        if not facts.gpu_nic_count:
            i = next(k for k, p in enumerate(gcp.node_pools) if p is pool)
            out.add(f".gcp.nodePools[{i}].machineType", "gpu-nic-count-known",
                    f"{pool.machine_type} uses GPUDirect-{facts.gpudirect} but the catalog does not confirm how many "
                    "GPU NICs it has, so its networks cannot be wired")
    gvnic = net.gvnic_subnet_prefix_length
    not_rdma = [(p, f) for p, f in direct if f.gpudirect != "RDMA"]
    if gvnic is not None and not_rdma:
        pool, facts = not_rdma[0]
        out.add(f"{_NET}.gvnicSubnetPrefixLength", "gvnic-subnet-rdma-only",
                "only RDMA machine types (A3 Ultra, A4) have a second gVNIC network to size apart; "
                f"{pool.machine_type} uses GPUDirect-{facts.gpudirect}, whose networks all take "
                "gpuSubnetPrefixLength: remove gvnicSubnetPrefixLength")
        return
    limits = gcp_storage_limits()
    prefix = gpu_subnet_prefix(gcp)
    for key, value in (("gpuSubnetPrefixLength", prefix), ("gvnicSubnetPrefixLength", gvnic)):
        if value is not None and not limits.subnet_prefix_min <= value <= limits.subnet_prefix_max:
            out.add(f"{_NET}.{key}", "gpu-subnet-prefix-range",
                    f"GCP creates IPv4 subnets from /{limits.subnet_prefix_min} to /{limits.subnet_prefix_max} "
                    f"(components/catalog/gcp_storage.yaml: {limits.subnet_prefix_source}); got /{value}")
            return
    count = max(gpu_network_count(f.gpudirect, f.gpu_nic_count) for _, f in direct)
    if net.gpu_networks_cidr is None:
        each = f"one /{prefix} each" if gvnic is None else \
            f"a /{gvnic} for the gVNIC network, one /{prefix} for each other"
        out.add(f"{_NET}.gpuNetworksCidr", "gpu-networks-required",
                f"{direct[0][0].machine_type} needs {count} GPU networks "
                f"(GPUDirect-{direct[0][1].gpudirect}): give their address space ({each}), e.g. 192.168.0.0/16")
        return
    base = parse_cidr(net.gpu_networks_cidr)
    if not isinstance(base, ipaddress.IPv4Network):
        return  # reported by _check_ranges
    if gvnic is None:
        fits = 2 ** (prefix - base.prefixlen) if prefix >= base.prefixlen else 0
        if fits < count:
            out.add(f"{_NET}.gpuNetworksCidr", "gpu-networks-cidr-size",
                    f"{count} GPU networks take {count} /{prefix} subnets; '{base}' holds {fits}")
    else:
        _check_gvnic_layout(base, count, prefix, gvnic, out)
    nodes = sum(p.max_size for p, _ in direct)
    _check_subnet_holds(nodes, prefix, "gpuSubnetPrefixLength", "each GPU network's" if gvnic is None
                        else "each RDMA", count if gvnic is None else count - 1, net.gpu_subnet_prefix_length is None,
                        out)
    if gvnic is not None:
        _check_subnet_holds(nodes, gvnic, "gvnicSubnetPrefixLength", "the gVNIC network's", 1, False, out)


def _check_gvnic_layout(base: ipaddress.IPv4Network, count: int, prefix: int, gvnic: int, out: _Collector) -> None:
    """The gVNIC subnet first in gpuNetworksCidr, then the RDMA subnets after it (decisions.gpu_subnet_layout): both
    must fit; they cannot overlap (the RDMA subnets skip the gVNIC one)."""
    if gvnic < base.prefixlen:
        out.add(f"{_NET}.gvnicSubnetPrefixLength", "gpu-networks-cidr-size",
                f"the gVNIC network's /{gvnic} subnet is larger than gpuNetworksCidr '{base}': give a /{gvnic} or "
                "larger range, or a longer prefix")
        return
    rdma = count - 1
    placed = len(gpu_subnet_layout(str(base), count, prefix, gvnic)) - 1
    if placed < rdma:
        size = 2 ** (32 - prefix)
        taken = max(2 ** (32 - gvnic), size) + rdma * size  # the gVNIC subnet (or the RDMA-sized block it sits in)
        needed = 32 - math.ceil(math.log2(taken))
        out.add(f"{_NET}.gpuNetworksCidr", "gpu-networks-cidr-size",
                f"the gVNIC network's /{gvnic} subnet and {rdma} RDMA subnets of /{prefix} do not fit in '{base}': "
                f"beside the /{gvnic} it holds {max(placed, 0)} /{prefix}; give a /{needed} or larger")


def _check_subnet_holds(nodes: int, prefix: int, key: str, what: str, count: int, default: bool,
                        out: _Collector) -> None:
    """A GPU subnet of ``prefix`` holds the GPUDirect pools' nodes (one address each; GCP reserves four)."""
    limits = gcp_storage_limits()
    usable = 2 ** (32 - prefix) - limits.subnet_reserved_addresses
    if nodes <= usable:
        return
    needed = next(p for p in range(prefix, limits.subnet_prefix_min - 1, -1)
                  if 2 ** (32 - p) - limits.subnet_reserved_addresses >= nodes)
    room = 2 ** (32 - needed) - limits.subnet_reserved_addresses
    if default:
        out.add(f"{_NET}.{key}", "gpu-network-subnet-size",
                f"the GPUDirect pools reach {nodes} nodes, and {what} /{prefix} subnet (the default) holds {usable} "
                f"(four addresses of a subnet are reserved): set {key} to {needed} (a /{needed} holds {room:,}) and "
                f"a gpuNetworksCidr that holds {count} of them")
    else:
        out.add(f"{_NET}.{key}", "gpu-network-subnet-size",
                f"the GPUDirect pools reach {nodes} nodes, and {what} /{prefix} subnet holds {usable} (four "
                f"addresses of a subnet are reserved): use {needed} or less (a /{needed} holds {room:,})")
