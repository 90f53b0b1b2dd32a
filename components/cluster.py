"""The only module that knows every plane: it picks the cloud module from ``spec.cloud``, lets it build its
planes, and builds the cloud-neutral Kubernetes platform on the provider the cloud hands back."""

from __future__ import annotations

import dataclasses
import importlib

import pulumi

from components.kubernetes.objects.storage_check import storage_check
from components.kubernetes.platform import build_platform
from components.planes import CloudPlanes, ClusterOutputs
from components.spec import ClusterSpec


def build_cluster(spec: ClusterSpec) -> ClusterOutputs:
    """Create every resource of a validated spec (call :func:`components.spec.parse_spec` first).

    Adding a cloud means a package ``components/<cloud>/`` with ``build(spec) -> CloudPlanes``, a catalog
    file and stacks; nothing here changes.
    """
    cloud = importlib.import_module(f"components.{spec.cloud}")
    planes: CloudPlanes = cloud.build(spec)
    # The storage acceptance check is cloud-neutral: it comes from the spec's goodput model, not from the cloud.
    inputs = dataclasses.replace(planes.platform, storage_check=storage_check(spec),
                                 gateway_spec=spec.inference.gateway if spec.inference else None)
    build_platform(inputs, pulumi.ResourceOptions(providers={"kubernetes": planes.kubernetes_provider}))
    return planes.outputs


def gateway_host(spec: ClusterSpec) -> str | None:
    """Where a team's pods reach the stack's inference gateway (None without one), as its cloud makes it
    (``components/<cloud>/serving_gateway.py``)."""
    module = importlib.import_module(f"components.{spec.cloud}.serving_gateway")
    host: str | None = module.gateway_host(spec)
    return host
