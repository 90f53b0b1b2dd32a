"""Rules on the Kubernetes platform settings."""

from __future__ import annotations

import re

from components.spec.decisions import cloud_node_groups, instance_catalog
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec


def _check_platform(spec: ClusterSpec, out: _Collector) -> None:
    sharing = spec.platform.gpu_sharing
    if sharing.mode == "mig":
        catalog = instance_catalog(spec)
        for ng in cloud_node_groups(spec):
            facts = catalog.get(ng.instance_type)
            if facts is not None and facts.gpu_count and not facts.mig.value:
                out.add(".platform.gpuSharing.mode", "mig-supported",
                        f"MIG needs GPUs that support it, and {ng.instance_type} ({facts.gpu_model}) does not "
                        f"(catalog: {facts.mig.source}); use time-slicing or none")
    if sharing.mode == "time-slicing" and sharing.replicas < 2:
        out.add(".platform.gpuSharing.replicas", "time-slicing-replicas",
                "time-slicing needs replicas >= 2 (1 replica is whole-GPU allocation: use mode none)")
    if sharing.mode != "time-slicing" and sharing.replicas != 1:
        out.add(".platform.gpuSharing.replicas", "time-slicing-replicas",
                f"replicas only applies to time-slicing, not '{sharing.mode}'")
    for i, prefix in enumerate(spec.platform.allowed_registries):
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9._/-]*)?/", prefix):
            out.add(f".platform.allowedRegistries[{i}]", "registry-prefix",
                    f"'{prefix}' must be a registry host (and optional path) ending in '/', e.g. nvcr.io/nvidia/")


_DIGEST_IMAGE = re.compile(r"[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}")


def _check_acceptance(spec: ClusterSpec, out: _Collector) -> None:
    """The acceptance image is pinned by digest and passes the registry admission policy."""
    acc = spec.acceptance
    if not acc.enabled:
        return
    if acc.image is None or not _DIGEST_IMAGE.fullmatch(acc.image):
        out.add(".acceptance.image", "acceptance-image-digest",
                f"{'acceptance.image is required' if acc.image is None else repr(acc.image) + ' is not pinned'}: "
                "give the nccl-tests image as <repository>@sha256:<64 hex> (the catalog has no verified digest)")
    elif not any(acc.image.startswith(p) for p in spec.platform.allowed_registries):
        out.add(".acceptance.image", "acceptance-image-allowed",
                f"{acc.image.split('@')[0]} is not under platform.allowedRegistries, whose admission policy would "
                "refuse the acceptance pods")
