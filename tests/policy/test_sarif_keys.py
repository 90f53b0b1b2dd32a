"""SARIF on the line to change (issue 36): a one-line change to a copy of a shipped stack file gives a finding whose
region starts on exactly that line, one change per policy family a stack file can break (quotas, security,
telemetry, guards, sizing, data safety, billing); a key the file leaves to its default points at the nearest enclosing
key and the message says which key to add. Fabric and Slurm findings cannot come from a stack file the spec accepts
(its rules refuse the same changes first), so theirs are checked on the shipped graph broken the way
``blueprint policy --explain`` breaks it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.clouds.aws.examples import AWS_MUTATIONS, SLURM_MUTATIONS
from blueprint.graph.provenance import locate
from blueprint.policy.runner import run_policies
from blueprint.policy.sarif import render_sarif
from tests.conftest import offline_run, stack


def _change(name: str, pattern: str, line: str, tmp_path: Path, *, nth: int = 0, insert: bool = False) -> tuple[
        Path, int]:
    """A copy of stack ``name``'s file with its ``nth`` line matching ``pattern`` replaced by ``line`` (or ``line``
    inserted after it, at its indentation); the copy and the changed line's number."""
    lines = stack(name).path.read_text().splitlines()
    at = [i for i, text in enumerate(lines) if re.search(pattern, text)][nth]
    indent = re.match(r"\s*", lines[at]).group(0)  # type: ignore[union-attr]
    if insert:
        at += 1
        lines.insert(at, indent + line)
    else:
        lines[at] = indent + line
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, at + 1


def _results(path: Path, tmp_path: Path, config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out, args = tmp_path / "policy.sarif", ["policy", str(path), "--format", "sarif"]
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
        args += ["--config", str(tmp_path / "config.json")]
    assert main([*args, "-o", str(out)]) in (0, 1)
    return json.loads(out.read_text())["runs"][0]["results"]  # type: ignore[no-any-return]


def _region(result: dict[str, Any]) -> dict[str, int]:
    return result["locations"][0]["physicalLocation"]["region"]  # type: ignore[no-any-return]


# family: (stack, line to change (pattern), the new line, which match, insert after it, policies that must land there)
ONE_LINE = {
    # the issue's own pull request: a GPU group's maxSize 2 -> 80 was reported at `- name: l4`, outside the diff
    "quotas": ("dev-aws", r"^\s*maxSize: 2$", "maxSize: 80", 1, False, {"aws-eks-gpu-nodegroup-max-size-cap"}),
    "security": ("dev-aws", r"^\s*logRetentionDays: 30$", "secretsEncryption: false", 0, True,
                 {"aws-eks-secrets-encrypted-with-kms"}),
    "telemetry": ("prod-aws", r"^\s*efaExporterImage:", "containerLogs: {enabled: false}", 0, True,
                  {"aws-container-logs-in-production"}),
    # storage metrics off: the storage alerts go (guards) and the metrics policy fails (telemetry), both on the line
    "guards": ("prod-aws", r"^\s*efaExporterImage:", "storageMetrics: false", 0, True,
               {"alerts-minimum-telemetry", "aws-storage-metrics-in-production"}),
    "sizing": ("prod-aws", r"^\s*target: 0\.97$", "target: 0.999", 0, False,
               {"checkpoint-storage-reaches-goodput-target"}),
}


@pytest.mark.parametrize("family", sorted(ONE_LINE))
def test_a_one_line_change_is_reported_on_that_line(family: str, tmp_path: Path) -> None:
    name, pattern, line, nth, insert, policies = ONE_LINE[family]
    path, changed = _change(name, pattern, line, tmp_path, nth=nth, insert=insert)
    assert not policies & {v.policy for v in run_policies(offline_run(name).graph).violations}  # the change did it
    results = [r for r in _results(path, tmp_path) if r["ruleId"] in policies]
    assert {r["ruleId"] for r in results} == policies
    for result in results:
        assert _region(result)["startLine"] == changed, (result["ruleId"], result["properties"]["specPath"])
        assert result["message"]["text"].endswith(f"\nStack file: {result['properties']['specPath']}")


def test_the_region_is_the_key_and_its_value(tmp_path: Path) -> None:
    """From the key to the end of its value, columns 1-based; inside a flow mapping, the key inside it."""
    path, changed = _change("dev-aws", r"^\s*maxSize: 2$", "maxSize: 80", tmp_path, nth=1)
    (cap,) = [r for r in _results(path, tmp_path) if r["ruleId"] == "aws-eks-gpu-nodegroup-max-size-cap"]
    assert cap["properties"]["specPath"] == "gpu-cluster:spec.aws.nodeGroups[1].maxSize"
    assert _region(cap) == {"startLine": changed, "startColumn": 11, "endLine": changed, "endColumn": 22}
    text = stack("prod-aws").path.read_text().replace("      telemetry:\n", "      telemetry:\n"
                                                        "        containerLogs: {enabled: false}\n")
    where = locate(text, "gpu-cluster:spec.aws.telemetry.containerLogs.enabled")
    line = text.splitlines()[where.line - 1]
    assert where.exact and line[where.column - 1:where.end_column - 1] == "enabled: false"


def test_data_safety_points_at_the_protection_to_turn_on(tmp_path: Path) -> None:
    """dev-aws turns deletion protection off, which the policy allows outside production: judged as production (pack
    config), each unprotected resource's finding is on the `deletionProtection: false` line."""
    results = _results(stack("dev-aws").path, tmp_path, {"stateful-resources-protected-in-production": {
        "protectedEnvironments": ["prod", "dev"]}})
    hits = [r for r in results if r["ruleId"] == "stateful-resources-protected-in-production"]
    text = stack("dev-aws").path.read_text()
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if t.strip() == "deletionProtection: false")
    assert hits and {_region(r)["startLine"] for r in hits} == {line}


def test_a_key_the_file_does_not_write_points_at_its_parent_and_says_to_add_it(tmp_path: Path) -> None:
    """billing: a tag the pack requires (config) that the stack's labels lack is reported at `labels:` with the key
    to add; adding it (one line) clears every such finding."""
    config = {"aws-resources-require-billing-tags": {"requiredTags": ["team", "cost-center", "owner", "project"]}}
    text = stack("dev-aws").path.read_text()
    labels = next(i for i, t in enumerate(text.splitlines(), start=1) if t.strip() == "labels:")
    hits = [r for r in _results(stack("dev-aws").path, tmp_path, config)
            if r["ruleId"] == "aws-resources-require-billing-tags"]
    assert hits and {_region(r)["startLine"] for r in hits} == {labels}
    assert {r["properties"]["specPath"] for r in hits} == {"gpu-cluster:spec.labels.project"}
    assert all(r["message"]["text"].endswith("\nStack file: gpu-cluster:spec.labels.project is not in the file (its "
                                             "default applies): add it under gpu-cluster:spec.labels") for r in hits)
    path, _ = _change("dev-aws", r"^\s*owner: ml-platform-oncall$", "project: gpu-platform", tmp_path, insert=True)
    assert not [r for r in _results(path, tmp_path, config) if r["ruleId"] == "aws-resources-require-billing-tags"]


# fabric and Slurm: the shipped graph broken as --explain breaks it; the finding on the key the fix changes
BROKEN = {
    "fabric: placement": ("prod-aws", AWS_MUTATIONS["force a placement group onto the capacity block"][0],
                          "aws-no-placement-group-on-reserved-capacity", "gpu-cluster:spec.aws.nodeGroups[1].placement",
                          r"^\s*placement: auto$", True),
    "fabric: EFA interfaces": ("prod-aws", AWS_MUTATIONS["drop an EFA interface"][0],
                               "aws-efa-node-groups-wire-all-interfaces",
                               "gpu-cluster:spec.aws.nodeGroups[1].efaInterfaces", r"^\s*- name: h100$", False),
    "slurm: login": ("prod-aws-slurm", SLURM_MUTATIONS["open the Slurm login to every address"][1],
                     "slurm-login-not-open-to-the-internet", "gpu-cluster:spec.scheduler.slurm.login.sourceCidrs[0]",
                     r"^\s*sourceCidrs: \[10\.200\.0\.0/16\]", True),
    "slurm: partition": ("prod-aws-slurm", SLURM_MUTATIONS["give a partition no time limit"][1],
                         "slurm-partitions-have-limits", "gpu-cluster:spec.scheduler.slurm.partitions[train]",
                         r"^\s*- \{name: train,", True),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_fabric_and_slurm_findings_are_on_their_key(case: str) -> None:
    name, mutate, policy, key, line_pattern, exact = BROKEN[case]
    graph = mutate(offline_run(name).graph)
    text = stack(name).path.read_text()
    doc = json.loads(render_sarif(run_policies(graph), name, graph, f"stacks/Pulumi.{name}.yaml", text))
    hits = [r for r in doc["runs"][0]["results"] if r["ruleId"] == policy]
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if re.search(line_pattern, t))
    assert hits and all(r["properties"]["specPath"] == key and _region(r)["startLine"] == line for r in hits)
    assert all(r["message"]["text"].endswith(f"\nStack file: {key}") is exact for r in hits)
    if case == "slurm: login":  # the list item itself, inside the flow list
        assert _region(hits[0])["startColumn"] == text.splitlines()[line - 1].index("10.200.0.0/16") + 1


def _schema_node(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its references, allOf and anyOf (``X or null``) followed to the object or array it is."""
    while True:
        if "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        elif node.get("allOf"):
            node = node["allOf"][0]
        elif node.get("anyOf"):
            node = next(n for n in node["anyOf"] if n.get("type") != "null")
        else:
            return node


def test_every_key_a_finding_can_point_at_is_a_key_of_the_stack_file() -> None:
    """Each key of the table (its groups filled with a sample) names a key of the stack-file schema, so no finding is
    sent to a key that cannot exist (a relative key is checked under each resource key it is used with)."""
    from blueprint import clouds
    from blueprint.policy.cloud import cloud_examples
    from blueprint.policy.spec_keys import RULES, _fill
    from blueprint.schema.stack_file import stack_file_schema

    schema = stack_file_schema()
    under = {".{1}": "gpu-cluster:spec.aws.nodeGroups[0]", ".ssh.sourceCidrs": "gpu-cluster:spec.aws.nodeGroups[0]",
             ".efaInterfaces": "gpu-cluster:spec.aws.nodeGroups[0]", ".placement": "gpu-cluster:spec.aws.nodeGroups[0]",
             ".checkpointBucket.softDeleteDays": "gpu-cluster:spec.gcp.storage",
             ".database.backupRetentionDays": "gpu-cluster:spec.scheduler.slurm.accounting",
             ".containerLogs.retentionDays": "gpu-cluster:spec.aws.telemetry", ".quotas": "gpu-cluster:spec.teams[0]",
             ".budget": "gpu-cluster:spec.teams[0]", ".costCenter": "gpu-cluster:spec.teams[0]",
             ".name": "gpu-cluster:spec.teams[0]",
             ".login.sourceCidrs{1}": "gpu-cluster:spec.scheduler.slurm",
             ".accounting.enabled": "gpu-cluster:spec.scheduler.slurm",
             ".partitions[{name}]": "gpu-cluster:spec.scheduler.slurm"}
    for rule in [*RULES, *(r for cloud in clouds.names() for r in cloud_examples(cloud).SPEC_KEYS)]:
        base = {"aws:eks/cluster:Cluster": "gpu-cluster:spec.aws.controlPlane",
                "gcp:container/cluster:Cluster": "gpu-cluster:spec.gcp.cluster",
                "gcp:container/nodePool:NodePool": "gpu-cluster:spec.gcp.nodePools[0]"}.get(rule.type, "")
        key = rule.key if rule.key.startswith("gpu-cluster:spec") else (base or under[rule.key]) + rule.key
        key = _fill(key, {"1": "maxSize" if rule.key == ".{1}" else "", "name": "0"})
        node = _schema_node(schema, schema["properties"]["config"]["properties"]["gpu-cluster:spec"])
        for step in re.findall(r"\.([^.\[\]]+)|\[([^\]]+)\]", key.removeprefix("gpu-cluster:spec")):
            node = _schema_node(schema, node["properties"][step[0]] if step[0] else node["items"]) \
                if not (step[0] and node.get("additionalProperties") and "properties" not in node) else {}


def test_table_markdown_and_json_name_the_key_to_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not only SARIF: each format names the stack-file key a finding's fix changes and its line; a key the file
    leaves to its default is named with its nearest enclosing key's line and the word to add it."""
    path, changed = _change("dev-aws", r"^\s*maxSize: 2$", "maxSize: 80", tmp_path, nth=1)
    where = f"{path}:{changed}"
    assert main(["policy", str(path)]) in (0, 1)
    assert f"            stack file: gpu-cluster:spec.aws.nodeGroups[1].maxSize ({where})\n" in capsys.readouterr().out
    assert main(["policy", str(path), "--format", "markdown"]) in (0, 1)
    out = capsys.readouterr().out
    assert "| field | stack-file key | requirement |" in out
    assert f"| `scalingConfig.maxSize` | `gpu-cluster:spec.aws.nodeGroups[1].maxSize` ({where}) | GPU node" in out
    assert main(["policy", str(path), "--format", "json"]) in (0, 1)
    (cap,) = [v for v in json.loads(capsys.readouterr().out)["violations"]
              if v["policy"] == "aws-eks-gpu-nodegroup-max-size-cap"]
    assert (cap["specPath"], cap["stackFile"], cap["addKey"]) == ("gpu-cluster:spec.aws.nodeGroups[1].maxSize",
                                                                  where, False)
    (tmp_path / "config.json").write_text(json.dumps({"aws-resources-require-billing-tags": {
        "requiredTags": ["team", "cost-center", "owner", "project"]}}))
    labels = next(i for i, t in enumerate(path.read_text().splitlines(), start=1) if t.strip() == "labels:")
    assert main(["policy", str(path), "--config", str(tmp_path / "config.json")]) in (0, 1)
    assert (f"            stack file: gpu-cluster:spec.labels.project (not in the file: add it under the key at "
            f"{path}:{labels})\n") in capsys.readouterr().out
    assert main(["policy", str(path), "--config", str(tmp_path / "config.json"), "--format", "json"]) in (0, 1)
    tags = [v for v in json.loads(capsys.readouterr().out)["violations"]
            if v["policy"] == "aws-resources-require-billing-tags"]
    assert tags and {(v["specPath"], v["stackFile"], v["addKey"]) for v in tags} == {
        ("gpu-cluster:spec.labels.project", f"{path}:{labels}", True)}
