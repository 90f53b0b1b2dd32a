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
