"""Rules on a GKE stack's private inference gateway (inference.gateway): GKE's internal Application Load Balancer
(GatewayClass gke-l7-rilb) needs a proxy-only subnet in the stack's region and VPC (gcp.network.proxyOnlyCidr), and
the cluster must run a GKE version that installs the InferencePool CRD the gateway routes to."""

from __future__ import annotations

import ipaddress

from components.catalog.gke_versions import VersionFloor, load_gke_versions
from components.spec.decisions import parse_cidr
from components.spec.errors import _Collector
from components.spec.gcp import GcpSpec
from components.spec.model import ClusterSpec

_KEY = ".gcp.network.proxyOnlyCidr"
# A proxy-only subnet's primary range is a /26 or larger (Cloud Load Balancing, "Proxy-only subnets": "A proxy-only
# subnet must provide 64 or more IP addresses. This corresponds to a prefix length of /26 or shorter"); the proxies
# scale with the traffic, each taking addresses from it, so the example is a /23 (the size Google's GKE Gateway
# examples create, not a documented minimum).
PROXY_ONLY_MIN_PREFIX = 26
PROXY_ONLY_RECOMMENDED_PREFIX = 23



def gateway_version_floors(spec: ClusterSpec) -> list[tuple[VersionFloor, list[str]]]:
    """The GKE version floor the gateway brings (checked with the others by the rule gke-version-floor,
    rules/gcp.py)."""
    if spec.inference is None or spec.inference.gateway is None:
        return []
    return [(load_gke_versions().inference_pool_floor, ["inference.gateway"])]


def check_serving_gateway(spec: ClusterSpec, gcp: GcpSpec, out: _Collector) -> None:
    """With inference.gateway: a proxy-only subnet of at least /26 (its version floor:
    :func:`gateway_version_floors`)."""
    if spec.inference is None or spec.inference.gateway is None:
        return
    cidr = gcp.network.proxy_only_cidr
    if cidr is None:
        out.add(_KEY, "gke-gateway-proxy-only-subnet",
                "inference.gateway on GKE is a regional internal Application Load Balancer (GatewayClass "
                "gke-l7-rilb), whose Envoy proxies take their addresses from a proxy-only subnet in the stack's region "
                f"and VPC: give its range, at least a /{PROXY_ONLY_MIN_PREFIX} (e.g. a "
                f"/{PROXY_ONLY_RECOMMENDED_PREFIX}, 10.40.48.0/23), apart from the stack's other ranges")
    else:
        parsed = parse_cidr(cidr)
        # an invalid or overlapping value is cidr-valid's or cidr-no-overlap's (rules/gcp.py _check_ranges)
        if isinstance(parsed, ipaddress.IPv4Network) and parsed.prefixlen > PROXY_ONLY_MIN_PREFIX:
            out.add(_KEY, "gke-gateway-proxy-only-subnet",
                    f"a proxy-only subnet is a /{PROXY_ONLY_MIN_PREFIX} or larger (Cloud Load Balancing, 'Proxy-only "
                    f"subnets': 64 or more addresses); "
                    f"got /{parsed.prefixlen}")
