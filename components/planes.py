"""The seam where a cloud plugs in: what a cloud module hands the cloud-neutral wiring.

A cloud is a package ``components/<cloud>/`` whose ``build(spec) -> CloudPlanes`` creates that cloud's
planes (network, compute, storage, control plane) and returns the Kubernetes provider, the description of
the cluster the Kubernetes platform is built from (GPU pools and their facts, the fabric device and its
plugin, the topology levels, the storage class, the egress its agents need, the data-access service
accounts) and the stack outputs. ``components/cluster.py`` picks the module from ``spec.cloud``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import pulumi

from components.kubernetes.inputs import PlatformInputs


@dataclass
class ClusterOutputs:
    """What operators need from a stack; ``__main__`` exports it."""

    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    kubeconfig_command: pulumi.Output[str]
    gpu_availability_zone: pulumi.Output[str]
    checkpoint_bucket: pulumi.Output[str]
    filesystem_dns_name: Optional[pulumi.Output[str]]
    filesystem_mount_name: Optional[pulumi.Output[str]]
    node_group_names: dict[str, pulumi.Output[str]] = field(default_factory=dict)
    checkpoint_role_arns: dict[str, pulumi.Output[str]] = field(default_factory=dict)
    cost_export_bucket: Optional[pulumi.Output[str]] = None



@dataclass(frozen=True, kw_only=True)
class CloudPlanes:
    """What a cloud module returns: the provider Kubernetes objects go through, the platform's inputs and
    the stack outputs."""

    kubernetes_provider: pulumi.ProviderResource
    platform: PlatformInputs
    outputs: ClusterOutputs


class ResourceView(Protocol):
    """A resource of a graph as a cloud's preview summary reads it (``blueprint.graph.model.GraphResource``)."""

    @property
    def urn(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def parent(self) -> str | None: ...

    @property
    def inputs(self) -> dict[str, Any]: ...

    @property
    def protect(self) -> bool: ...


class GraphView(Protocol):
    """The graph queries a cloud's preview summary needs (``blueprint.graph.model.ResourceGraph``)."""

    def of_type(self, type_: str) -> Sequence[ResourceView]: ...

    def children(self, urn: str) -> Sequence[ResourceView]: ...


@dataclass(frozen=True, kw_only=True)
class CloudSummary:
    """A cloud module's part of the preview: where the cluster is, its planes' figures, GPU totals, notes."""

    location: str
    planes: dict[str, list[str]]
    gpus_desired: int
    gpus_max: int
    gpus_note: str = ""
    notes: list[str] = field(default_factory=list)
