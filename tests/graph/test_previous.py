"""The second apply is a no-op: ``blueprint graph <stack> --previous FILE`` runs the program with the previous run's
ids and outputs as the provider's answers, and every shipped stack, run again, and run again a day later, sends the
same inputs for every resource. The one change meant to happen is named: once a Capacity Block has begun, its start
action is gone (the scheduled action already ran). A version step EKS or GKE refuses is an error naming the stack
file, the key and the rule."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.graph.engine import run_program
from blueprint.graph.model import ResourceGraph
from blueprint.graph.previous import load_previous
from blueprint.graph.stackfile import StackFile, load_stack
from tests.conftest import SHIPPED_STACKS, TEST_NOW

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "stacks").glob("Pulumi.*.yaml"))
ALL_STACKS = SHIPPED_STACKS + EXAMPLES


def perpetual_diffs(before: ResourceGraph, after: ResourceGraph) -> list[str]:
    """What a second ``pulumi up`` would change: resources added or removed, and inputs that differ (the engine
    diffs inputs; dependencies and parents are not sent to the provider)."""
    old = {r.urn: r for r in before.resources}
    new = {r.urn: r for r in after.resources}
    out = [f"added {u}" for u in sorted(new.keys() - old.keys())]
    out += [f"removed {u}" for u in sorted(old.keys() - new.keys())]
    for urn in sorted(old.keys() & new.keys()):
        a, b = old[urn].inputs, new[urn].inputs
        out += [f"{urn}: {key}: {json.dumps(a.get(key))[:200]} -> {json.dumps(b.get(key))[:200]}"
                for key in sorted(a.keys() | b.keys()) if a.get(key) != b.get(key)]
        if old[urn].protect != new[urn].protect or old[urn].ignore_changes != new[urn].ignore_changes:
            out.append(f"{urn}: resource options differ")
    return out


def _stack(name: str) -> StackFile:
    return load_stack(str(ROOT / name) if name.endswith(".yaml") else name)


def _run(sf: StackFile, previous: Path | None = None) -> ResourceGraph:
    answers = load_previous(previous, sf.region).answers if previous is not None else None
    return run_program(sf.name, sf.config, sf.region, previous=answers).graph


def _at(monkeypatch: pytest.MonkeyPatch, when: datetime) -> None:
    monkeypatch.setenv("GPU_CLUSTER_NOW", when.strftime("%Y-%m-%dT%H:%M:%SZ"))


@pytest.mark.parametrize("name", ALL_STACKS)
def test_a_second_run_and_a_run_a_day_later_send_the_same_inputs(name: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    sf = _stack(name)
    first = _run(sf)
    path = tmp_path / "previous.json"
    path.write_text(first.to_json())
    assert perpetual_diffs(first, _run(sf, path)) == []
    _at(monkeypatch, datetime.fromisoformat(TEST_NOW) + timedelta(days=1))
    assert perpetual_diffs(first, _run(sf, path)) == []


def test_the_comparison_sees_a_changed_input() -> None:
    """The test above can fail: a timestamp in a tag is a perpetual diff it reports."""
    graph = ResourceGraph.from_dict(json.loads((ROOT / "tests" / "golden" / "dev-aws.json").read_text()))
    res = next(r for r in graph.resources if r.type == "aws:s3/bucket:Bucket")
    stamped = replace(res, inputs={**res.inputs, "tags": {**(res.inputs.get("tags") or {}), "applied": "2026-11-30"}})
    diffs = perpetual_diffs(graph, ResourceGraph(graph.stack, [stamped if r is res else r for r in graph.resources]))
    assert len(diffs) == 1 and diffs[0].startswith(f"{res.urn}: tags: ") and "2026-11-30" in diffs[0]


def test_once_the_capacity_block_has_begun_only_its_start_action_goes(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """prod-aws's block starts 2027-01-04 11:30 UTC: applied the day before, then the day after, the scheduled action
    that scaled the group to the block's count has run and is removed, and the group's version is held while the block
    runs; no input changes."""
    sf = _stack("prod-aws")
    _at(monkeypatch, datetime(2027, 1, 4))
    before = _run(sf)
    path = tmp_path / "previous.json"
    path.write_text(before.to_json())
    _at(monkeypatch, datetime(2027, 1, 5))
    diffs = perpetual_diffs(before, _run(sf, path))
    assert diffs == ["removed urn:pulumi:prod-aws::gpu-cluster::gpu-cluster:compute:AwsNodeGroup$"
                     "aws:autoscaling/schedule:Schedule::nodegroup-h100-block-start",
                     # ... and, while the block runs, the group's rolling inputs are held (ignoreChanges), an option
                     # and not an input: what the provider is sent does not change.
                     "urn:pulumi:prod-aws::gpu-cluster::gpu-cluster:compute:AwsNodeGroup$"
                     "aws:eks/nodeGroup:NodeGroup::nodegroup-h100-ng: resource options differ"]


def _export(graph: ResourceGraph, outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A ``pulumi stack export`` of the graph's resources with the given outputs (by resource name)."""
    return {"version": 3, "deployment": {"manifest": {}, "resources": [
        {"urn": r.urn, "type": r.type, "custom": not r.is_component, "id": f"id-{r.name}", "inputs": r.inputs,
         "outputs": {**r.inputs, **outputs.get(r.name, {})}, **({"parent": r.parent} if r.parent else {})}
        for r in graph.resources if not r.type.startswith("pulumi:pulumi:")]}}


def test_a_stack_exports_outputs_answer_the_second_run(tmp_path: Path) -> None:
    """The provider generated the checkpoint bucket's name from its prefix; the second run reads the real name from
    the stack's state, as `pulumi up` does, and every policy and ConfigMap that names the bucket carries it."""
    sf = _stack("dev-aws")
    first = _run(sf)
    bucket = next(r for r in first.resources if r.type == "aws:s3/bucket:Bucket" and "bucketPrefix" in r.inputs)
    real = f"{bucket.inputs['bucketPrefix']}20261130093000000000000001"
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_export(first, {bucket.name: {"bucket": real, "arn": f"arn:aws:s3:::{real}"}})))
    second = _run(sf, path)
    readers = [r.name for r in second.resources if real in json.dumps(r.inputs)]
    assert readers, "no resource reads the bucket name the provider returned"
    assert not any(real in json.dumps(r.inputs) for r in first.resources)


def _bumped(tmp_path: Path, version: str) -> Path:
    """prod-aws's stack file with another control-plane version (same stack name, so the URNs match)."""
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod-aws.yaml").read_text())
    doc["config"]["gpu-cluster:spec"]["aws"]["controlPlane"]["kubernetesVersion"] = version
    path = tmp_path / "Pulumi.prod-aws.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "blueprint", *args], capture_output=True, text=True, check=False,
                          cwd=ROOT)


def test_two_minors_after_the_previous_run_are_refused_naming_the_file_key_and_rule(tmp_path: Path) -> None:
    previous = tmp_path / "prod-aws.json"
    old = tmp_path / "old"
    old.mkdir()
    assert _cli("graph", str(_bumped(old, "1.34")), "-o", str(previous)).returncode == 0
    done = _cli("graph", str(_bumped(tmp_path, "1.36")), "--previous", str(previous))
    assert done.returncode == 2, done.stderr
    assert "Pulumi.prod-aws.yaml: gpu-cluster:spec.aws.controlPlane.kubernetesVersion: 1.34 -> 1.36 skips 1.35" in \
        done.stderr
    assert "[rule: one-minor-per-update]" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # nothing written
    # One minor is one step: the same run goes through, and the nodes follow (Kubernetes version 1.35).
    step = _cli("graph", str(_bumped(tmp_path, "1.35")), "--previous", str(previous))
    assert step.returncode == 0, step.stderr
    groups = [r for r in json.loads(step.stdout)["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    assert groups and {g["inputs"]["version"] for g in groups} == {"1.35"}
    # Going back is refused too (after the shipped 1.35).
    shipped = tmp_path / "shipped.json"
    assert _cli("graph", "prod-aws", "-o", str(shipped)).returncode == 0
    back = _cli("graph", str(_bumped(tmp_path, "1.34")), "--previous", str(shipped))
    assert back.returncode == 2 and "[rule: no-downgrade]" in back.stderr, back.stderr


def test_a_previous_run_of_another_stack_is_refused(tmp_path: Path) -> None:
    previous = tmp_path / "dev-aws.json"
    assert _cli("graph", "dev-aws", "-o", str(previous)).returncode == 0
    done = _cli("graph", "prod-aws", "--previous", str(previous))
    assert done.returncode == 2 and "is a run of stack dev-aws, not prod-aws" in done.stderr


def test_the_preview_after_a_previous_run_says_what_rolls_and_what_is_replaced(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped.json"
    assert _cli("graph", "prod-aws", "-o", str(shipped)).returncode == 0
    same = _cli("preview", "prod-aws", "--previous", str(shipped))
    assert same.returncode == 0 and "no node group rolls, nothing is replaced or removed" in same.stdout
    bumped = _cli("preview", str(_bumped(tmp_path, "1.36")), "--previous", str(shipped))
    assert bumped.returncode == 0, bumped.stderr
    section = bumped.stdout.split("== day two: this run after ", 1)[1]
    assert "   node groups that roll (in this order; each waits for the one before):" in section
    assert section.index("1. system rolls 3 node(s): Kubernetes version 1.35 -> 1.36") < \
        section.index("2. h100 rolls 0 node(s)")
    # A change that replaces the filesystem fails the preview as it fails the pull-request check.
    doc = yaml.safe_load(_bumped(tmp_path, "1.35").read_text())
    doc["config"]["gpu-cluster:spec"]["aws"]["storage"]["filesystem"]["capacityGiB"] = 4800
    (tmp_path / "Pulumi.prod-aws.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    shrunk = _cli("preview", str(tmp_path / "Pulumi.prod-aws.yaml"), "--previous", str(shipped))
    assert shrunk.returncode == 1
    assert "storage-lustre (aws:fsx/lustreFileSystem:LustreFileSystem): replaced by storageCapacity" in shrunk.stdout
    assert "FAILS (list it under upgrades.allowReplace" in shrunk.stdout


def test_each_registration_thread_gets_its_own_previous_answer() -> None:
    """The SDK registers resources from several threads: the URN a registration answers for is the one its own
    thread set, not the last one any thread set (a shared field gave one role's ARN to another role's user)."""
    import threading

    from pulumi.runtime.mocks import MockResourceArgs

    from blueprint.graph.engine import OfflineMocks

    role = "aws:iam/role:Role"
    mocks = OfflineMocks("us-east-1", {"urn:a": (role, "a", {"arn": "arn:a"}), "urn:b": (role, "b", {"arn": "arn:b"})})
    mine_set, other_set = threading.Event(), threading.Event()
    seen: dict[str, str] = {}

    def register(urn: str, first: bool) -> None:
        mocks.registering.urn = urn
        (mine_set if first else other_set).set()
        (other_set if first else mine_set).wait(5)  # both threads have set their URN before either answers
        seen[urn] = mocks.new_resource(MockResourceArgs(role, urn[-1], {}))[1]["arn"]

    threads = [threading.Thread(target=register, args=("urn:a", True)),
               threading.Thread(target=register, args=("urn:b", False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"urn:a": "arn:a", "urn:b": "arn:b"}
