"""Kueue's ResourceFlavor CRD (v0.19) refuses an update of nodeLabels, tolerations or topologyName once topologyName
is set: a flavor with a topology whose immutable fields change must be a new object under a new name
(``topology_flavor_name``), and the ClusterQueues that name it wait for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.kubernetes.objects import TOPOLOGY_IMMUTABLE, cpu_flavor_name, cpu_resource_flavor
from components.kubernetes.quotas import CpuPool
from tests.conftest import SHIPPED_STACKS, offline_run

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
MAIN = Path(__file__).resolve().parents[1] / "fixtures" / "flavors" / "main-8e2a1d3.json"


def immutable(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: spec.get(k) for k in TOPOLOGY_IMMUTABLE}


def renamed_in_place(before: dict[str, list[dict[str, Any]]], stacks: list[str]) -> list[str]:
    """Every flavor with a topology in ``before`` that a stack still names while its immutable fields differ."""
    bad = []
    for stack in stacks:
        now = {r.inputs["metadata"]["name"]: r.inputs["spec"]
               for r in offline_run(stack).graph.of_type(KUEUE + "ResourceFlavor")}
        for old in before.get(stack, []):
            name, spec = old["metadata"]["name"], old["spec"]
            if "topologyName" in spec and name in now and immutable(now[name]) != immutable(spec):
                bad.append(f"{stack}: {name} {immutable(spec)} -> {immutable(now[name])}")
    return bad


def test_no_flavor_with_a_topology_applied_from_main_changes_an_immutable_field_under_its_name() -> None:
    """main's flavors (tests/fixtures/flavors): the cpu flavor had the hosts topology and no toleration; the team CPU
    taint adds one, so the flavor takes a new name; the GPU flavors with a topology are unchanged and keep theirs."""
    before = json.loads(MAIN.read_text(encoding="utf-8"))["stacks"]
    assert {m["metadata"]["name"] for m in before["prod-aws"]} == {"cpu", "h100"}
    assert renamed_in_place(before, list(SHIPPED_STACKS)) == []


def test_the_check_finds_a_flavor_changed_under_its_old_name() -> None:
    """The comparison itself: main's cpu flavor against a graph holding a changed flavor of the same name."""
    before = json.loads(MAIN.read_text(encoding="utf-8"))["stacks"]
    now = {r.inputs["metadata"]["name"] for r in offline_run("prod-aws").graph.of_type(KUEUE + "ResourceFlavor")}
    changed = [{**m, "metadata": {"name": n}} for m in before["prod-aws"] for n in now
               if n.startswith(m["metadata"]["name"] + "-")]
    assert changed, now
    assert renamed_in_place({"prod-aws": changed}, ["prod-aws"])


POOL = CpuPool("cpu", "m6i.8xlarge", 2, 32, 128)


def test_a_cpu_flavor_with_a_topology_is_named_by_its_immutable_fields() -> None:
    flavor = cpu_resource_flavor(POOL, tas=True)
    name = flavor["metadata"]["name"]
    assert name.startswith("cpu-") and len(name) == len("cpu-") + 8 and name == cpu_flavor_name(POOL, True, False)
    other = CpuPool("cpu", "m6i.4xlarge", 4, 16, 64)
    assert cpu_flavor_name(other, True, False) == name  # quota and size are not in the spec: the name stays
    assert cpu_resource_flavor(POOL)["metadata"]["name"] == "cpu"  # without a topology: mutable, the group's name
    assert cpu_resource_flavor(POOL, both=True)["metadata"]["name"] == "cpu-no-topology"


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_cluster_queues_wait_for_the_flavors_they_name(stack: str) -> None:
    """A renamed flavor exists before the team queues move to it (Pulumi then deletes the old one after the updates).
    The acceptance queue names GPU flavors only, whose names do not change (docs/limits.md)."""
    graph = offline_run(stack).graph
    flavors = {r.inputs["metadata"]["name"]: r.urn for r in graph.of_type(KUEUE + "ResourceFlavor")}
    queues = [cq for cq in graph.of_type(KUEUE + "ClusterQueue") if "Queues$" in cq.urn]
    assert len(queues) >= 2
    for cq in queues:
        names = [f["name"] for g in cq.inputs["spec"].get("resourceGroups", []) for f in g["flavors"]]
        assert names and all(flavors[n] in cq.dependencies for n in names), (cq.urn, names)
