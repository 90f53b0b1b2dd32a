"""What a pod names that the cluster must hold (issue 36): a PriorityClass, RuntimeClass or ResourceClaimTemplate the
stack adds is found, one it lacks is named with the ones it has (the refusals themselves: tests/admit/heldout)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.admit.test_admit import admit, graph_without, job, reasons

K8S = "kubernetes:"


def _object(kind: str, api_version: str, name: str, namespace: str | None = None, **rest: Any) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"urn": f"urn:pulumi:prod-aws::gpu-cluster::{K8S}{api_version}:{kind}::{name}",
            "type": f"{K8S}{api_version}:{kind}", "name": name, "parent": None, "provider": None,
            "dependencies": [], "protect": False,
            "inputs": {"apiVersion": api_version, "kind": kind, "metadata": meta, **rest}}


def _graph_with(tmp_path: Path, *objects: dict[str, Any]) -> Path:
    import json

    path = graph_without("prod-aws", tmp_path, lambda r: False)
    doc = json.loads(path.read_text())
    doc["resources"] += list(objects)
    path.write_text(json.dumps(doc))
    return path


def test_a_priority_class_of_the_stack_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = _graph_with(tmp_path, _object("PriorityClass", "scheduling.k8s.io/v1", "team-high", value=1000))
    code, report = admit(graph, tmp_path, job(priorityClassName="team-high"), capsys=capsys)
    assert not reasons(report, "priority-class-exists"), report
    # Found, and still refused in a team namespace: the stack offers teams no PriorityClass (team_priority_policy).
    assert {r["object"] for r in report["workloads"][0]["reasons"]} == {
        "ValidatingAdmissionPolicy/gpu-cluster-team-priority-templates",
        "ValidatingAdmissionPolicy/gpu-cluster-team-priority-pods"}, report
    code, report = admit(graph, tmp_path, job(priorityClassName="team-low"), capsys=capsys)
    (reason,) = reasons(report, "priority-class-exists")
    assert code == 1 and "team-high (PriorityClass/team-high)" in reason["message"]


def test_a_dra_claim_needs_its_template_where_dra_is_set_up(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    graph = _graph_with(
        tmp_path, _object("DeviceClass", "resource.k8s.io/v1", "gpu.nvidia.com"),
        _object("ResourceClaimTemplate", "resource.k8s.io/v1", "one-gpu", "research",
                spec={"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.nvidia.com"}}]}}}))
    claims = [{"name": "gpu", "resourceClaimTemplateName": "eight-gpus"}]
    code, report = admit(graph, tmp_path, job(resourceClaims=claims), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason == {
        "object": "ResourceClaimTemplate/research/eight-gpus", "rule": "resource-claim",
        "message": "pod set main claim gpu names ResourceClaimTemplate eight-gpus, which is not in namespace research "
                   "(its ResourceClaimTemplates: one-gpu): the claim is never allocated and the pods stay Pending; "
                   "name one of those, or add it to the stack"}
    claims[0]["resourceClaimTemplateName"] = "one-gpu"
    code, report = admit(graph, tmp_path, job(resourceClaims=claims), capsys=capsys)
    assert code == 0, report


def test_critical_priority_is_allowed_where_the_namespace_has_its_quota(
        graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gpu-node-check on prod-gcp has the critical-pods quota (each GPU node's check runs at system-node-critical)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "gpu-node-check"},
           "spec": {"priorityClassName": "system-node-critical",
                    "containers": [{"name": "c", "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04"}]}}
    _, report = admit(graph_files("prod-gcp"), tmp_path, pod, capsys=capsys)
    assert not reasons(report, "priority-class-quota"), report
