"""The only module that knows every plane: it picks the cloud module from ``spec.cloud``, lets it build its
planes, and builds the cloud-neutral Kubernetes platform on the provider the cloud hands back."""

from __future__ import annotations

import importlib

import pulumi

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
    build_platform(planes.platform, pulumi.ResourceOptions(providers={"kubernetes": planes.kubernetes_provider}))
    return planes.outputs
