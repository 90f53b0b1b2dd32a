"""``blueprint admit`` walks a serving workload's routing objects as the gateway meets them: an InferencePool selects
a Deployment's pods on a port they declare, its endpoint picker is a Service of the namespace, an HTTPRoute attaches to
a Gateway that admits its namespace and routes to a pool, and the gateway's proxies reach the pods through the
namespace's NetworkPolicies. A team serving its own model alongside the stack's gets the same walk."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.cli import main
from tests.admit.test_admit import graph_without
from tests.conftest import offline_run

Manifest = dict[str, Any]
POOL = "kubernetes:inference.networking.k8s.io/v1:InferencePool"
ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
STACKS = ["prod-aws", "prod-gcp"]


def _admit(graph: Path, tmp_path: Path, manifests: list[Manifest],
           capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump_all(manifests, sort_keys=False), encoding="utf-8")
    code = main(["admit", str(graph), str(path), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def _stack_objects(stack: str) -> tuple[Manifest, Manifest]:
    """The stack's own pool and route of its served model, as the program writes them."""
    graph = offline_run(stack).graph
    (pool,) = [r.inputs for r in graph.of_type(POOL)]
    (route,) = [r.inputs for r in graph.of_type(ROUTE)]
    return copy.deepcopy(pool), copy.deepcopy(route)


def _rules(report: dict[str, Any]) -> set[str]:
    return {r["rule"] for w in report["workloads"] for r in w["reasons"]}


@pytest.mark.parametrize("stack", STACKS)
def test_the_stacks_own_pool_and_route_are_admitted(stack: str, graph_files: Callable[[str], Path],
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool, route = _stack_objects(stack)
    code, report = _admit(graph_files(stack), tmp_path, [pool, route], capsys)
    assert code == 0, report
    steps = {w["object"].split("/")[0]: w["steps"] for w in report["workloads"]}
    assert steps["InferencePool"] == {"schema": "ok", "namespace": "ok", "routing": "ok", "network": "ok"}
    assert steps["HTTPRoute"]["routing"] == "ok"


def _team_model(namespace: str = "applied", labels: dict[str, str] | None = None) -> list[Manifest]:
    """A team's own served model: its Deployment, picker Service, pool and route (the picker's Deployment left out:
    the pool needs its Service)."""
    pods = labels if labels is not None else {"gpu-cluster/served-model": "my-model", "app": "my-model"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "my-model", "namespace": namespace},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "my-model"}},
                           "template": {"metadata": {"labels": pods}, "spec": {"containers": [
                               {"name": "engine", "image": "registry.k8s.io/pause:3.10",
                                "ports": [{"containerPort": 8000}]}]}}}}
    picker = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "my-model-epp", "namespace": namespace},
              "spec": {"selector": {"gpu-cluster/endpoint-picker": "my-model"},
                       "ports": [{"name": "grpc-ext-proc", "port": 9002}]}}
    pool = {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "my-model", "namespace": namespace},
            "spec": {"targetPorts": [{"number": 8000}], "selector": {"matchLabels": {"app": "my-model"}},
                     "endpointPickerRef": {"name": "my-model-epp", "port": {"number": 9002}}}}
    route = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
             "metadata": {"name": "my-model", "namespace": namespace},
             "spec": {"parentRefs": [{"name": "inference", "namespace": "inference-gateway"}],
                      "rules": [{"backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                                  "name": "my-model"}]}]}}
    return [deployment, picker, pool, route]


def _routing(report: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [w for w in report["workloads"] if w["object"].startswith(f"{kind}/")]
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_a_pool_whose_pods_the_gateway_cannot_reach_is_refused(stack: str, graph_files: Callable[[str], Path],
                                                               tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Labelled as a served model: the namespace's gateway policy admits the proxies.
    _, report = _admit(graph_files(stack), tmp_path, _team_model(), capsys)
    assert _routing(report, "InferencePool")["steps"]["network"] == "ok", report
    # Without the label, the team's default-deny keeps the proxies out.
    _, report = _admit(graph_files(stack), tmp_path, _team_model(labels={"app": "my-model"}), capsys)
    pool = _routing(report, "InferencePool")
    assert pool["steps"]["network"] == "FAIL"
    (reason,) = [r for r in pool["reasons"] if r["rule"] == "ingress-blocked"]
    assert "port 8000" in reason["message"] and "Deployment/applied/my-model" in reason["message"]


def test_a_pool_that_selects_nothing_or_names_no_picker_is_refused(graph_files: Callable[[str], Path],
                                                                   tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    objects = _team_model()
    objects[2]["spec"]["selector"]["matchLabels"] = {"app": "nobody"}
    objects[2]["spec"]["endpointPickerRef"]["name"] = "missing-epp"
    code, report = _admit(graph_files("prod-aws"), tmp_path, objects, capsys)
    assert code != 0
    assert {"pool-selects-pods", "pool-picker"} <= _rules(report)
    objects = _team_model()
    objects[2]["spec"]["targetPorts"] = [{"number": 9000}]
    _, report = _admit(graph_files("prod-aws"), tmp_path, objects, capsys)
    assert "pool-target-port" in _rules(report)


def test_a_route_to_a_missing_gateway_or_from_a_namespace_it_refuses_is_refused(
        graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = _team_model()
    objects[3]["spec"]["parentRefs"] = [{"name": "public", "namespace": "inference-gateway"}]
    _, report = _admit(graph_files("prod-aws"), tmp_path, objects, capsys)
    assert "route-parent" in _rules(report)
    # A route in a namespace that is not a team's: the listener admits tenant namespaces only.
    objects = _team_model(namespace="default")
    _, report = _admit(graph_files("prod-aws"), tmp_path, objects[2:], capsys)
    assert "route-not-allowed" in _rules(report)
    objects = _team_model()
    objects[3]["spec"]["rules"][0]["backendRefs"][0]["name"] = "other"
    _, report = _admit(graph_files("prod-aws"), tmp_path, objects, capsys)
    assert "route-backend" in _rules(report)


def test_without_a_gateway_a_pool_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = graph_without("prod-aws", tmp_path,
                          lambda r: r["type"] == "kubernetes:gateway.networking.k8s.io/v1:Gateway")
    _, report = _admit(graph, tmp_path, _team_model(), capsys)
    assert "gateway-installed" in _rules(report)


@pytest.mark.parametrize("stack", STACKS)
def test_the_stacks_endpoint_picker_is_admitted_to_the_teams_cpu_flavor(stack: str,
                                                                        graph_files: Callable[[str], Path],
                                                                        tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    graph = offline_run(stack).graph
    (picker,) = [r.inputs for r in graph.of_type("kubernetes:apps/v1:Deployment")
                 if r.name.endswith("-picker-deployment")]
    code, report = _admit(graph_files(stack), tmp_path, [copy.deepcopy(picker)], capsys)
    assert code == 0, report
    (result,) = report["workloads"]
    assert result["flavor"].startswith("cpu") and result["placements"][0]["node_group"] == "cpu"
