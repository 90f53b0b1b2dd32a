"""What a change does to the running cluster, in ``cost diff`` (so in the pull-request comment): the node groups that
roll (in order, how many nodes, whether running jobs stop, the GPU-hours at risk), the resources the provider
replaces and the fields that force it, and the check that fails when data or identity would be lost without an
``upgrades.allowReplace`` entry."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.changes.render import day_two, failures
from blueprint.changes.replacements import replacements
from blueprint.cli import main
from blueprint.graph.model import GraphResource, ResourceGraph
from tests.conftest import ROOT, offline_run

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
KMS = "aws:kms/key:Key"
BUCKET = "aws:s3/bucket:Bucket"


def _stack(tmp_path: Path, edit: Any, name: str = "prod-aws") -> Path:
    """The shipped stack file with ``edit`` applied to its spec, under the same name (so its URNs match)."""
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())
    edit(doc["config"]["gpu-cluster:spec"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _diff(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any,
          name: str = "prod-aws") -> tuple[int, dict[str, Any], str]:
    base = tmp_path / "base.json"
    base.write_text(offline_run(name).graph.to_json())
    status = main(["cost", "diff", "--base", str(base), str(_stack(tmp_path, edit, name)), "--format", "json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def _bump(spec: dict[str, Any]) -> None:
    spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.36"


def test_a_minor_bump_rolls_the_system_groups_then_the_gpu_groups(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    status, doc, _ = _diff(tmp_path, capsys, _bump)
    assert status == 0
    rolls = doc["node_rolls"]
    assert [(r["node_group"], r["order"]) for r in rolls] == [("cpu", 1), ("system", 1), ("h100", 2), ("l40s", 2)]
    assert {"node_group", "nodes", "reason", "order", "interrupts_jobs"} <= rolls[0].keys()
    cpu, system, h100, l40s = rolls
    # The served model's group surges one node at a time: its disruption budget keeps a replica serving.
    assert l40s["nodes"] == 2 and l40s["interrupts_jobs"] and "surges" in l40s["how"]
    assert cpu["nodes"] == 2 and not cpu["interrupts_jobs"]  # the teams' CPU work rolls with the groups without GPUs
    assert system["nodes"] == 3 and not system["interrupts_jobs"]  # no GPU: nothing a training job loses
    assert "Kubernetes version 1.35 -> 1.36" in system["reason"] and "AMI release 1.35." in system["reason"]
    # The Capacity Block has not begun (2027-01-04): the group has no node, so nothing is interrupted now.
    assert h100["nodes"] == 0 and not h100["interrupts_jobs"] and "outside the block's window" in h100["when"]
    assert doc["replacements"] == [] and doc["version_problems"] == []


def test_inside_the_block_the_gpu_group_is_held_for_the_next_apply(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """During the block the group runs its 16 nodes, and MINIMAL would terminate them all at once: the program holds
    what rolls them (ignoreChanges), so this apply upgrades the rest and the group rolls after the block, at 0."""
    monkeypatch.setenv("GPU_CLUSTER_NOW", "2027-01-10T00:00:00Z")
    offline_run.cache_clear()  # the runs cached at the tests' clock are outside the window
    try:
        status, doc, _ = _diff(tmp_path, capsys, _bump)
        (group,) = [g for g in offline_run("prod-aws").graph.of_type("aws:eks/nodeGroup:NodeGroup")
                    if g.name == "nodegroup-h100-ng"]
    finally:
        offline_run.cache_clear()  # nor may this test's runs, inside it, reach the next tests
    assert {"version", "releaseVersion", "launchTemplate.version"} <= set(group.ignore_changes or [])
    h100 = next(r for r in doc["node_rolls"] if r["node_group"] == "h100")
    assert status == 0 and h100["nodes"] == 0 and not h100["interrupts_jobs"]
    assert "held while its Capacity Block runs" in h100["when"] and "after 2027-01-18 11:30 UTC" in h100["when"]
    system = next(r for r in doc["node_rolls"] if r["node_group"] == "system")
    assert system["nodes"] == 3  # the rest of the cluster moves now


def test_a_running_gpu_group_that_rolls_counts_the_gpu_hours_at_risk() -> None:
    """A GPU group with nodes running and nothing holding it: every wave stops the multi-node jobs on it, each losing
    the restart and, on average, half a checkpoint interval of work (the teams' checkpoint-policy ConfigMap)."""
    graph = offline_run("prod-aws").graph

    def running(g: ResourceGraph, version: str) -> ResourceGraph:
        out = []
        for r in g.resources:
            if r.name == "nodegroup-h100-ng":
                inputs = copy.deepcopy(r.inputs)
                inputs.update(capacityType="ON_DEMAND", version=version)
                inputs["scalingConfig"]["desiredSize"] = 4
                r = replace(r, inputs=inputs)
            out.append(r)
        return ResourceGraph(g.stack, out)

    changes = day_two(running(graph, "1.35"), running(graph, "1.36"), {})
    (h100,) = [r for r in changes.node_rolls if r.node_group == "h100"]
    policy = next(r for r in graph.of_type("kubernetes:core/v1:ConfigMap")
                  if r.inputs["metadata"]["name"] == "checkpoint-policy").inputs["data"]
    per_gpu = (float(policy["RESTART_SECONDS"]) + float(policy["CHECKPOINT_INTERVAL_SECONDS"]) / 2) / 3600
    assert h100.nodes == 4 and h100.interrupts_jobs
    assert h100.gpu_hours_at_risk == pytest.approx(round(1 * 4 * 8 * per_gpu, 1))  # MINIMAL at 100%: one wave


def test_replacing_the_filesystem_fails_the_check_naming_the_field(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """FSx for Lustre cannot shrink: a smaller capacity replaces the filesystem (and loses its data)."""
    def shrink(spec: dict[str, Any]) -> None:
        spec["aws"]["storage"]["filesystem"]["capacityGiB"] = 4800

    status, doc, err = _diff(tmp_path, capsys, shrink)
    assert status == 1
    (fsx,) = [r for r in doc["replacements"] if r["type"] == FSX]
    assert fsx["name"] == "storage-lustre" and fsx["fields"] == ["storageCapacity"] and fsx["holds_data"]
    assert "storage-lustre" in err and "field storageCapacity" in err and "upgrades.allowReplace" in err


def test_an_allow_replace_entry_lets_it_through_with_its_reason(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    def shrink_allowed(spec: dict[str, Any]) -> None:
        spec["aws"]["storage"]["filesystem"]["capacityGiB"] = 4800
        spec["upgrades"] = {"allowReplace": [{"resource": "storage-lustre",
                                              "reason": "scratch data only; checkpoints are in S3"}]}

    status, doc, err = _diff(tmp_path, capsys, shrink_allowed)
    assert status == 0, err
    (fsx,) = [r for r in doc["replacements"] if r["type"] == FSX]
    assert fsx["allowed"] == "scratch data only; checkpoints are in S3"


def test_raising_throughput_updates_the_filesystem_in_place(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """perUnitStorageThroughput is updated in place by the provider (UpdateFileSystem), so it passes."""
    def faster(spec: dict[str, Any]) -> None:
        spec["aws"]["storage"]["filesystem"]["perUnitStorageThroughput"] = 1000

    status, doc, _ = _diff(tmp_path, capsys, faster)
    assert status == 0 and doc["replacements"] == []


def test_renaming_the_cluster_replaces_it_through_its_role(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The cluster's own name is ignoreChanges (a rename never sends it), but its IAM role is named after it: a new
    role name replaces the role, whose new ARN replaces the EKS cluster (roleArn). The check names both; the
    buckets, whose prefix is ignoreChanges too, are kept."""
    def rename(spec: dict[str, Any]) -> None:
        spec["name"] = "prod-train2"

    status, doc, err = _diff(tmp_path, capsys, rename)
    assert status == 1
    found = {r["name"]: r for r in doc["replacements"]}
    assert found["control-plane-eks"]["fields"] == ["roleArn"] and found["control-plane-eks"]["holds_data"]
    assert found["control-plane-cluster-role"]["fields"] == ["name"]
    assert "storage-checkpoints" not in found and "cost-exports" not in found
    assert "control-plane-eks" in err and "field roleArn" in err


def _graph() -> ResourceGraph:
    return offline_run("prod-aws").graph


def _edited(graph: ResourceGraph, name: str, **inputs: Any) -> ResourceGraph:
    return ResourceGraph(graph.stack, [replace(r, inputs={**copy.deepcopy(r.inputs), **inputs}) if r.name == name
                                       else r for r in graph.resources])


def test_a_kms_key_change_that_replaces_it_fails() -> None:
    graph = _graph()
    key = next(r for r in graph.of_type(KMS) if r.name == "storage-data-key")
    changes = day_two(graph, _edited(graph, key.name, multiRegion=True), {})
    (found,) = [r for r in changes.replacements if r.name == key.name]
    assert found.fields == ("multiRegion",) and found.blocks
    doc = {"stack": "prod-aws", **changes.document()}
    assert any("storage-data-key" in line and "field multiRegion" in line for line in failures(doc))


def test_a_bucket_name_is_replacing_unless_ignored() -> None:
    graph = _graph()
    bucket = next(r for r in graph.of_type(BUCKET) if r.name == "storage-checkpoints")
    renamed = _edited(graph, bucket.name, bucketPrefix="other-ckpt-")
    assert replacements(graph, renamed) == []  # the program sets ignoreChanges on it: a rename keeps the bucket
    unguarded = ResourceGraph(renamed.stack, [replace(r, ignore_changes=[]) if r.name == bucket.name else r
                                              for r in renamed.resources])
    (found,) = replacements(graph, unguarded)
    assert found.fields == ("bucketPrefix",) and found.blocks


def test_removing_what_holds_data_fails_too() -> None:
    graph = _graph()
    without = ResourceGraph(graph.stack, [r for r in graph.resources if r.type != FSX])
    (found,) = replacements(graph, without)
    assert found.fields == ("(removed)",) and found.blocks


def test_a_changed_field_the_table_did_not_read_is_named_as_unknown() -> None:
    graph = _graph()
    fsx: GraphResource = next(iter(graph.of_type(FSX)))
    (found,) = replacements(graph, _edited(graph, fsx.name, efaEnabled=True))
    assert found.fields == () and found.unknown == ("efaEnabled",) and not found.blocks


def test_the_pr_comment_shows_the_rolls_and_the_replacement(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.json"
    base.write_text(offline_run("prod-aws").graph.to_json())

    def bump_and_shrink(spec: dict[str, Any]) -> None:
        _bump(spec)
        spec["aws"]["storage"]["filesystem"]["capacityGiB"] = 4800

    assert main(["cost", "diff", "--base", str(base), str(_stack(tmp_path, bump_and_shrink))]) == 1
    text = capsys.readouterr().out
    assert "**Node groups that roll** (in this order; each waits for the one before):" in text
    assert "| 1 | `system` | 3 |" in text and "| 2 | `h100` | 0 |" in text
    assert "- `storage-lustre` (aws:fsx/lustreFileSystem:LustreFileSystem): replaced by `storageCapacity`" in text
    assert "**(fails the check)**" in text


def test_two_minors_between_base_and_change_fail_the_check(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Base at 1.34, the change at 1.36: EKS would refuse it at apply time; the pull request says so first."""
    old = tmp_path / "old"
    old.mkdir()
    old_stack = _stack(old, lambda s: s["aws"]["controlPlane"].update(kubernetesVersion="1.34"))
    base = tmp_path / "base.json"
    assert main(["graph", str(old_stack), "-o", str(base)]) == 0
    capsys.readouterr()
    status = main(["cost", "diff", "--base", str(base), str(_stack(tmp_path, _bump)), "--format", "json"])
    captured = capsys.readouterr()
    assert status == 1
    (problem,) = json.loads(captured.out)["version_problems"]
    assert problem["rule"] == "one-minor-per-update" and problem["key"] == "aws.controlPlane.kubernetesVersion"
    assert "1.34 -> 1.36 skips 1.35" in captured.err


def test_a_gke_minor_bump_rolls_the_channel_pools_and_not_the_held_reservation() -> None:
    """prod-gcp's system pool follows the channel: GKE upgrades it after the control plane. The h100 pool on the
    reservation carries the end-of-support exclusion: nothing rolls it until the operator does, between runs."""
    from tests.conftest import raw_stack_config, run_spec

    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35"
    before = run_spec(copy.deepcopy(spec), "prod-gcp").graph
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.36"
    after = run_spec(spec, "prod-gcp").graph
    changes = day_two(before, after, {})
    cpu, system, l4 = changes.node_rolls  # the pools without GPUs and the served model's; the reserved h100 is held
    assert l4.node_group == "l4" and l4.nodes == 2 and l4.order == 2
    assert cpu.node_group == "cpu" and cpu.nodes == 2 and not cpu.interrupts_jobs
    assert system.node_group == "system" and system.nodes == 3 and not system.interrupts_jobs
    assert "the control plane moves 1.35 -> 1.36: GKE auto-upgrades this pool" in system.reason
    assert changes.version_problems == () and changes.replacements == ()


def test_a_custom_ami_group_behind_the_control_plane_blocks_the_next_minor() -> None:
    """A custom-AMI group carries no version (EKS takes none); its tag says the minor its AMI is built for, and the
    check refuses a control-plane update while it lags, as UpdateClusterVersion does for managed node groups."""
    from blueprint.changes.steps import step_problems
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack

    sf = load_stack(str(ROOT / "examples" / "stacks" / "Pulumi.custom-ami-aws.yaml"))
    graph = run_program(sf.name, sf.config, sf.region).graph
    (custom,) = [g for g in graph.of_type("aws:eks/nodeGroup:NodeGroup") if g.name == "nodegroup-l4-ng"]
    assert custom.inputs["tags"]["ami-kubernetes-version"] == "1.35" and "version" not in custom.inputs

    def edited(g: ResourceGraph, cluster: str, ami: str) -> ResourceGraph:
        out = []
        for r in g.resources:
            if r.type == "aws:eks/cluster:Cluster":
                r = replace(r, inputs={**r.inputs, "version": cluster})
            elif r.name == "nodegroup-l4-ng":
                r = replace(r, inputs={**r.inputs, "tags": {**r.inputs["tags"], "ami-kubernetes-version": ami}})
            elif "version" in r.inputs and r.type == "aws:eks/nodeGroup:NodeGroup":
                r = replace(r, inputs={**r.inputs, "version": cluster})  # EKS AMI groups follow the cluster
            out.append(r)
        return ResourceGraph(g.stack, out)

    assert step_problems(edited(graph, "1.35", "1.35"), edited(graph, "1.36", "1.35")) == []
    (problem,) = step_problems(edited(graph, "1.36", "1.35"), edited(graph, "1.37", "1.35"))
    assert problem.rule == "nodes-match-control-plane" and problem.key == "aws.nodeGroups[l4]"


def test_a_gke_control_plane_two_minors_up_is_refused() -> None:
    from blueprint.changes.steps import step_problems
    from tests.conftest import raw_stack_config, run_spec

    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35"
    before = run_spec(copy.deepcopy(spec), "prod-gcp").graph
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.37"
    (problem,) = step_problems(before, run_spec(spec, "prod-gcp").graph)
    assert problem.rule == "one-minor-per-update" and problem.key == "gcp.cluster.minMasterVersion"
    assert "1.35 -> 1.37 skips 1.36: GKE moves the control plane one minor per update" in problem.message


@pytest.mark.parametrize(("new", "replaced"), [
    ("10.0.0.0/19", False),  # grows around the old range: expanded in place
    ("10.0.0.0/21", True),   # shrinks
    ("10.8.0.0/20", True),   # moves (an independently sized gVNIC subnet moves the RDMA ones this way)
])
def test_a_subnet_range_that_does_not_hold_the_old_one_replaces_the_subnet(new: str, replaced: bool) -> None:
    """GCP expands a subnetwork's range in place and replaces it otherwise (ForceNewIfChange(IsShrinkageIpCidr)); a
    CIDR is not a number, so the old 'decrease' reading never saw a move or a shrink."""
    graph = offline_run("prod-gcp").graph
    subnet = next(r for r in graph.of_type("gcp:compute/subnetwork:Subnetwork"))
    before = ResourceGraph(graph.stack, [replace(r, inputs={**r.inputs, "ipCidrRange": "10.0.0.0/20"})
                                         if r.urn == subnet.urn else r for r in graph.resources])
    after = _edited(before, subnet.name, ipCidrRange=new)
    found = [r for r in replacements(before, after) if r.name == subnet.name]
    assert bool(found) == replaced, found
    if replaced:
        assert found[0].fields == ("ipCidrRange",)


def test_a_replaced_pool_goes_in_one_wave_not_by_its_surge_settings() -> None:
    """Giving a GKE pool its own service account replaces the pool (nodeConfig.serviceAccount): the provider deletes
    it and creates it again, so all its nodes go at once, even the system pool's, whatever its surge settings say."""
    from tests.conftest import raw_stack_config, run_spec

    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    before = run_spec(copy.deepcopy(spec), "prod-gcp").graph
    for pool in spec["gcp"]["nodePools"]:
        pool["serviceAccount"] = {"accountId": "gke-np-sa", "roles": ["roles/container.defaultNodeServiceAccount",
                                                                      "roles/artifactregistry.reader"]}
    changes = day_two(before, run_spec(spec, "prod-gcp").graph, {})
    rolls = {r.node_group: r for r in changes.node_rolls}
    assert set(rolls) == {"system", "cpu", "h100", "l4"}
    for roll in rolls.values():
        assert roll.reason.startswith("the node group is replaced (nodeConfig.serviceAccount changed)")
        assert roll.how.startswith(f"the whole group is deleted and created again: all {roll.nodes} node(s) go at "
                                   "once")
        assert "surge" not in roll.how and roll.interrupts_jobs
