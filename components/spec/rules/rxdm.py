"""Rules on the RxDM releases a GKE stack accepts in its GPUDirect sidecar (``gcp.rxdm``): each is one the catalog
knows with the container upstream runs it in (components/catalog/gke_manifests.yaml, rxdm), and each mirror or
digest form names one of them and passes the registry admission policy."""

from __future__ import annotations

from components.catalog.gcp_machines import coupled_rxdm_releases, load_gcp_catalog, rxdm_releases
from components.spec.decisions import gpudirect_pools
from components.spec.errors import _Collector
from components.spec.gcp import GcpSpec
from components.spec.model import ClusterSpec


def stack_rxdm_flavour(gcp: GcpSpec) -> str | None:
    """The GPUDirect flavour whose pods run an RxDM sidecar (TCPX or TCPXO), or None (no such pool)."""
    catalog = load_gcp_catalog()
    known = [(p, catalog[p.machine_type]) for p in gcp.node_pools if p.machine_type in catalog]
    flavours = sorted({f.gpudirect for _, f in gpudirect_pools(known)} & {"TCPX", "TCPXO"})
    return flavours[0] if flavours else None


def accepted_rxdm_releases(gcp: GcpSpec, flavour: str) -> tuple[str, ...]:
    """The release tags the stack's sidecar may run: gcp.rxdm.releases, or the one the pinned installer couples."""
    return tuple(gcp.rxdm.releases) if gcp.rxdm.releases is not None else coupled_rxdm_releases(flavour)


def check_rxdm(spec: ClusterSpec, gcp: GcpSpec, out: _Collector) -> None:
    """gcp.rxdm names releases of the catalog for the stack's flavour, and copies of those only."""
    flavour = stack_rxdm_flavour(gcp)
    named = gcp.rxdm.releases is not None or bool(gcp.rxdm.images)
    if flavour is None:
        if named:
            out.add(".gcp.rxdm", "rxdm-releases-known",
                    "no node pool runs GPUDirect-TCPX or -TCPXO, so no pod runs an RxDM sidecar: remove gcp.rxdm")
        return
    known = [r.tag for r in rxdm_releases(flavour)]
    for i, tag in enumerate(gcp.rxdm.releases or []):
        if tag not in known:
            out.add(f".gcp.rxdm.releases[{i}]", "rxdm-releases-known",
                    f"{tag} is not an RxDM release the catalog knows for GPUDirect-{flavour} "
                    f"(components/catalog/gke_manifests.yaml, rxdm: {', '.join(known)}): add it there with the "
                    "command, args, env and host mounts upstream's manifests run it with, and their commit")
    accepted = accepted_rxdm_releases(gcp, flavour)
    for i, copy in enumerate(gcp.rxdm.images):
        where = f".gcp.rxdm.images[{i}]"
        if copy.release not in accepted:
            out.add(f"{where}.release", "rxdm-image-of-release",
                    f"{copy.release} is not an accepted release ({', '.join(accepted)}): list it in gcp.rxdm.releases")
        image_tag = None if "@" in copy.image else copy.image.rsplit(":", 1)[1]
        if image_tag is not None and image_tag != copy.release:
            out.add(f"{where}.image", "rxdm-image-of-release",
                    f"{copy.image} is tagged {image_tag}, not {copy.release}: a mirror keeps the release's tag, or "
                    "give the image by digest (<repository>@sha256:<64 hex>)")
        if not any(copy.image.startswith(p) for p in spec.platform.allowed_registries):
            out.add(f"{where}.image", "rxdm-image-of-release",
                    f"{copy.image.split('@')[0]} is not under platform.allowedRegistries, whose admission policy "
                    "would refuse the pods that run it")
