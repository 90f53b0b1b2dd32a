"""How the platform's manifests become Pulumi resources: a typed resource for built-in kinds, a CRD object for the
rest, and pinned Helm releases that wait for their workloads (used by every component of the platform)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import ChartPin

_TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange"): k8s.core.v1.LimitRange,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("v1", "PersistentVolume"): k8s.core.v1.PersistentVolume,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("storage.k8s.io/v1", "StorageClass"): k8s.storage.v1.StorageClass,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"):
        k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"):
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
}


class CrdObject(pulumi.CustomResource):
    """An object of a CRD kind, with every top-level field of its manifest.

    ``kubernetes.apiextensions.CustomResource`` in Python takes only ``metadata`` and ``spec``, which
    cannot express kinds such as Kueue's WorkloadPriorityClass (``value``, ``description`` at the top
    level). The type token is the same (``kubernetes:<apiVersion>:<kind>``), so the provider treats it
    exactly like a CustomResource.
    """

    def __init__(self, name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        api_version, kind = str(manifest["apiVersion"]), str(manifest["kind"])
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_version()))
        super().__init__(f"kubernetes:{api_version}:{kind}", name, dict(manifest), opts)


def k8s_version() -> str:
    """The pulumi-kubernetes plugin version this SDK asks the engine for."""
    from pulumi_kubernetes import _utilities

    return str(_utilities.get_version())  # type: ignore[no-untyped-call]


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def apply(name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Create one Kubernetes object from its manifest: a typed resource for built-in kinds, a
    ``CustomResource`` for CRD kinds. Nested keys stay camelCase, as the API expects."""
    api_version, kind = str(manifest["apiVersion"]), str(manifest["kind"])
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    cls = _TYPED.get((api_version, kind))
    if cls is not None:
        resource: pulumi.CustomResource = cls(name, opts=opts, **{_snake(k): v for k, v in fields.items()})
        return resource
    return CrdObject(name, manifest, opts)


def object_name(prefix: str, manifest: Mapping[str, Any]) -> str:
    meta = manifest["metadata"]
    parts = [prefix, str(manifest["kind"]).lower()]
    if "namespace" in meta:
        parts.append(str(meta["namespace"]))
    parts.append(str(meta["name"]))
    return "-".join(parts)


def release(name: str, pin: ChartPin, namespace: str, values: Mapping[str, Any],
            opts: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
    """A Helm release of a pinned chart that waits until its workloads are ready (``skip_await`` off),
    rolls back a failed upgrade (``atomic``) and keeps a bounded history."""
    chart = f"{pin.repository}/{pin.chart}" if pin.is_oci else pin.chart
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=chart,
        version=pin.version,
        repository_opts=None if pin.is_oci else {"repo": pin.repository},
        namespace=namespace,
        create_namespace=False,
        values=dict(values),
        atomic=True,
        cleanup_on_fail=True,
        timeout=900,
        max_history=10,
        skip_await=False,
        opts=opts,
    )
