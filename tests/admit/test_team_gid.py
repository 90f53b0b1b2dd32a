"""Team GID on every pod (issue 33): team directories on the shared filesystem are root:<gid> mode 2770, so a pod in
a team namespace runs with the team's group (the namespace's label gpu-cluster/gid) or the gpu-cluster-team-gid
ValidatingAdmissionPolicy refuses it, and `blueprint admit` says why and how to fix it. The policy is in every
shipped stack for every team; without it a pod that lacks the group is admitted, which these tests would see."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.admit.cluster import ClusterView, matches_selector
from blueprint.admit.policies import evaluate_policies
from tests.admit.test_admit import EXAMPLES, KUEUE_STACKS, admit, graph_without, job, reasons, team_gid
from tests.conftest import ROOT, SHIPPED_STACKS, offline_run
from tests.conftest import stack as stack_file

POLICY = "gpu-cluster-team-gid"
GID_LABEL = "gpu-cluster/gid"


def without_group(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = copy.deepcopy(manifest)
    manifest["spec"]["template"]["spec"].pop("securityContext")
    return manifest


def test_a_pod_without_the_teams_group_is_refused_with_the_fix(graph_files: Callable[[str], Path], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    gid = team_gid("research")
    code, report = admit(graph_files("prod-aws"), tmp_path, without_group(job()), capsys=capsys)
    (reason,) = reasons(report, "admission-policy")
    assert code == 1 and reason["object"] == f"ValidatingAdmissionPolicy/{POLICY}"
    assert reason["message"].startswith(
        f"pod set main breaks it: the pod runs outside the team's group {gid} (label gpu-cluster/gid of namespace "
        f"research), which owns the team's directory on the shared filesystem (root:{gid}, mode 2770): add {gid} to "
        "spec.securityContext.supplementalGroups")
    code, report = admit(graph_files("prod-aws"), tmp_path, job(), capsys=capsys)  # job() carries it
    assert code == 0, report


@pytest.mark.parametrize(("context", "containers", "admitted"), [
    ({"supplementalGroups": [1000, "GID"]}, {}, True),
    ({"fsGroup": "GID"}, {}, True),  # the kubelet adds fsGroup to every container's supplementary groups
    ({"runAsUser": 1000, "runAsGroup": "GID"}, {}, True),  # the primary group
    ({}, {"runAsGroup": "GID"}, True),  # every container's own primary group
    ({"runAsGroup": "GID"}, {"runAsGroup": 1000}, False),  # the container sets another primary group
    ({"runAsUser": 1000, "runAsGroup": 1000}, {}, False),
    ({"supplementalGroups": [4242]}, {}, False),  # not the team's group
    # the team's group and another team's too (issue 33 review): the other team's directory would be writable
    ({"supplementalGroups": ["GID", "OTHER"]}, {}, False),
    ({"supplementalGroups": ["GID"], "fsGroup": "OTHER"}, {}, False),
    ({"supplementalGroups": ["GID"]}, {"runAsGroup": "OTHER"}, False),
])
def test_the_group_reaches_every_container_one_way_or_another(
        context: dict[str, Any], containers: dict[str, Any], admitted: bool) -> None:
    gid = team_gid("research")

    def put(value: Any) -> Any:
        if value == "OTHER":
            return team_gid("pretraining")
        return gid if value == "GID" else [put(v) for v in value] if isinstance(value, list) else value

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "research"},
           "spec": {"securityContext": {k: put(v) for k, v in context.items()},
                    "initContainers": [{"name": "fetch", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}],
                    "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                    **({"securityContext": {k: put(v) for k, v in containers.items()}}
                                       if containers else {})}]}}
    if containers:
        pod["spec"]["initContainers"][0]["securityContext"] = {k: put(v) for k, v in containers.items()}
    view = ClusterView(offline_run("prod-aws").graph)
    denied = [p for p, _ in evaluate_policies(view, pod, "research", view.namespace_labels("research")).denied]
    assert (f"ValidatingAdmissionPolicy/{POLICY}" not in denied) is admitted, denied


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_team_of_every_shipped_stack_is_held_to_its_group(stack: str) -> None:
    """Each team namespace says its group and is bound, with Deny, by the policy, which refuses a pod without it."""
    view = ClusterView(offline_run(stack).graph)
    (binding,) = [b for b in view.of_kind("ValidatingAdmissionPolicyBinding") if b.name == POLICY]
    assert view.get("ValidatingAdmissionPolicy", POLICY) is not None
    assert binding.spec["validationActions"] == ["Deny"]
    teams = stack_file(stack).spec.teams
    assert teams
    for team in teams:
        labels = view.namespace_labels(team.name)
        assert labels is not None and labels[GID_LABEL] == str(team.posix_gid), team.name
        assert matches_selector(binding.spec["matchResources"]["namespaceSelector"], labels), team.name
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": team.name},
               "spec": {"containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}]}}
        denied = evaluate_policies(view, pod, team.name, labels).denied
        assert any(p == f"ValidatingAdmissionPolicy/{POLICY}" and f"add {team.posix_gid} to" in m
                   for p, m in denied), (team.name, denied)
        pod["spec"]["securityContext"] = {"supplementalGroups": [team.posix_gid]}
        assert not [p for p, _ in evaluate_policies(view, pod, team.name, labels).denied
                    if p == f"ValidatingAdmissionPolicy/{POLICY}"], team.name
    # Platform namespaces are not team namespaces: their pods (acceptance jobs, Slurm, controllers) are not held.
    for ns in view.of_kind("Namespace"):
        if ns.name not in {t.name for t in teams}:
            assert not matches_selector(binding.spec["matchResources"]["namespaceSelector"],
                                        view.namespace_labels(ns.name) or {}), ns.name


def test_without_the_policy_the_pod_is_admitted(graph_files: Callable[[str], Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal is this policy's alone: a graph without it admits the group-less pod (so removing the policy
    from the program fails the tests above)."""
    graph = graph_without("prod-aws", tmp_path, lambda r: r["type"].startswith(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
        and r["inputs"]["metadata"]["name"] == POLICY)
    code, report = admit(graph, tmp_path, without_group(job()), capsys=capsys)
    assert code == 0, report


@pytest.mark.parametrize("stack", KUEUE_STACKS)
def test_every_example_carries_its_teams_group(stack: str) -> None:
    gids = {t.name: t.posix_gid for t in stack_file(stack).spec.teams}
    for path in sorted((EXAMPLES / stack).glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        for doc in yaml.safe_load_all(text):
            if doc["kind"] == "ConfigMap":  # applied with the workload (the benchmark's config)
                continue
            namespace = doc["metadata"]["namespace"]
            assert re.search(rf"supplementalGroups:( \[{gids[namespace]}\]|\n\s*- {gids[namespace]}\n)", text), path


def test_the_first_job_guide_shows_the_security_context() -> None:
    text = (ROOT / "docs" / "first-job.md").read_text(encoding="utf-8")
    assert "supplementalGroups:" in text and GID_LABEL in text and POLICY in text
