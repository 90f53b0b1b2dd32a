"""The policy pack through its real analyzer: compliant stacks pass, each single mutation is rejected by
the policy that owns the rule (pulumi/compliance-policies style), config overrides work as documented."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from gpu_policies.common import ABSENT, decode_finding, encode_finding, plain, seen
from gpu_policies.common import path as field_path

from blueprint.cli import main
from blueprint.clouds.aws.examples import AWS_MUTATIONS as MUTATIONS
from blueprint.clouds.aws.examples import LT
from blueprint.graph.model import ResourceGraph
from blueprint.policy.mutations import edit
from blueprint.policy.mutations import set_path as _set
from blueprint.policy.runner import (
    PolicyConfigError,
    PolicyReport,
    Violation,
    load_pack,
    normalize_config,
    render_markdown,
    render_table,
    run_policies,
)
from components.catalog import load_aws_catalog
from tests.conftest import SHIPPED_STACKS, offline_run, run_spec


@cache
def baseline(stack_name: str) -> PolicyReport:
    return run_policies(offline_run(stack_name).graph)


def prod() -> ResourceGraph:
    return offline_run("prod-aws").graph


def policies_of(report: PolicyReport) -> set[str]:
    return {v.policy for v in report.violations}


@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_shipped_stacks_pass_every_policy(stack_name: str) -> None:
    report = baseline(stack_name)
    assert report.violations == [], [(v.policy, v.message) for v in report.violations]
    assert report.passed


def test_pack_has_one_documented_rule_per_policy() -> None:
    pack = load_pack()
    names = [p.name for p in pack.policies]
    assert len(names) == len(set(names)) == len(pack.rules) >= 25
    for p in pack.policies:
        assert p.name == p.name.lower() and " " not in p.name
        assert p.description.endswith(".") and p.description.count(". ") == 0, p.name
        assert p.remediation_steps and p.severity is not None and p.tags, p.name
    readme = (Path(__file__).resolve().parents[2] / "policies" / "README.md").read_text()
    for name in names:
        assert f"`{name}`" in readme, f"{name} missing from policies/README.md"
























ANY = object()  # whatever the graph holds at the field (test_each_mutation_is_rejected_by_its_policy checks it is that)
CIDR = "0.0.0.0/0"
# What each mutation's violation of its policy names: (field, value seen there; None for a missing field), or None
# where no field applies: the stack or resource lacks a whole resource, or the setting is an option (protect).
Expected = tuple[str, Any] | None
FIELDS: dict[str, Expected] = {
    "remove a billing tag from a resource and the provider defaults": ('tags["cost-center"]', None),
    "remove the owner of the GPU node group": ("tags.owner", None),
    "drop a team's in-cluster spend alert": None,
    "point the cluster's budget at a tag nothing billed carries": ("costFilters[0].values[0]", "user:team$research"),
    "model a goodput below the target": ("data.GOODPUT_MODELLED", "0.9000"),
    "remove the cluster's budget": None,
    "remove a team namespace's cost-center label": ('metadata.labels["cost-center"]', None),
    "route every alert to a receiver that notifies no one": ("spec.route.receiver", "none"),
    "drop the alert routing": None,
    "drop the DCGM exporter": ("values.dcgmExporter.enabled", False),
    "remove the Prometheus stack": None,
    "turn off the DCGM ServiceMonitor": ("values.dcgmExporter.serviceMonitor.enabled", False),
    "turn off Kueue metrics": ("values.enablePrometheus", False),
    "stop auditing the control plane": ("enabledClusterLogTypes", ["api", "scheduler"]),
    "remove OpenCost": None,
    "delete a team's LocalQueue": None,
    "delete a team's ResourceQuota": None,
    "set every nominal GPU quota to zero": ("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "0"),
    "let the GPU node group scale to 100 nodes": ("scalingConfig.maxSize", 100),
    "open the endpoint to 0.0.0.0/0": ("vpcConfig.publicAccessCidrs[0]", CIDR),
    "stop encrypting secrets": ("encryptionConfig.resources", None),
    "allow IMDSv1": ("metadataOptions.httpTokens", "optional"),
    "raise the IMDS hop limit to 2": ("metadataOptions.httpPutResponseHopLimit", 2),
    "open SSH to the world": ("cidrIpv4", CIDR),
    "give a node group SSH remote access": ("remoteAccess.sourceSecurityGroupIds", None),
    "leave the root volume unencrypted": ("blockDeviceMappings[0].ebs.encrypted", "false"),
    "drop the filesystem's KMS key": ("kmsKeyId", None),
    "remove the bucket's default encryption": None,
    "allow public bucket policies": ("blockPublicPolicy", False),
    "remove a team's default-deny policy": None,
    "make a team namespace privileged": ('metadata.labels["pod-security.kubernetes.io/enforce"]', "privileged"),
    "run a privileged pod in a team namespace": ("spec.containers[0].securityContext.privileged", True),
    "put the served model on an internet-facing load balancer": ("spec.type", "LoadBalancer"),
    "put the inference gateway's proxy on an internet-facing load balancer": ("spec.service.spec.type",
                                                                               "LoadBalancer"),
    "serve the models through an external gateway class": ("spec.gatewayClassName",
                                                           "gke-l7-regional-external-managed"),
    "drop the served model's latency alerts": None,
    "stop scraping the served model": None,
    "promise a failover faster than the served model loads": ('metadata.annotations["gpu-cluster/cold-start-seconds"]',
                                                              "600"),
    "drop an EFA interface": ("networkInterfaces[32]", None),  # the 32nd EFA interface, after the primary ENA one
    "force a placement group onto the capacity block": ("placement.groupName", "prod-train-h100"),
    "opt the Capacity Block group in to the Cluster Autoscaler": ("tag.value", "true"),
    "run a multi-node EFA group on demand without a placement group": ("placement.groupName", None),
    "spread a multi-node EFA group over two zones": ("subnetIds", ANY),
    "remove the EFA security group's self ingress": None,
    "add a GCP bucket without its cost-center label": ('labels["cost-center"]', None),
    "turn off bucket versioning": ("versioningConfiguration.status", "Suspended"),
    "expire current checkpoint versions": ("rules[0].expiration.days", 30),
    "unprotect the checkpoint bucket in prod": None,
    "let a cluster rename replace the checkpoint bucket in prod": ("bucketPrefix", "prod-train-ckpt-"),
    "let the Prometheus volume be deleted with its claim in prod": ("reclaimPolicy", "Delete"),
    "unprotect the monitoring namespace in prod": None,
    "turn off the cluster's deletion protection in prod": ("deletionProtection", False),
    "drop the EFA node exporter": None,
    "stop scraping the EFA node exporter": ("values.prometheus.monitor.enabled", False),
    "remove the storage metrics exporter": None,
    "turn off the checkpoint bucket's request metrics": None,
    "stop shipping container logs": None,
    "leave the container log group unencrypted": ("kmsKeyId", None),
    "unbind every admission policy": None,
    "open the monitoring namespace's egress": None,
    "drop the GPU XID alert": None,
}
_STEP = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def resolve(inputs: Any, field: str) -> Any:
    """The value at a field path (``a.b[0]["c-d"]``) of a resource's inputs, through inputs that hold JSON text (the
    pack reads those as the object they encode); ABSENT where a step is missing."""
    cur, at = inputs, 0
    while at < len(field):
        match = _STEP.match(field, at)
        assert match, (field, at)
        name, index, quoted = match.groups()
        step: str | int = int(index) if index is not None else json.loads(quoted) if quoted else name
        if isinstance(cur, str):
            try:
                cur = json.loads(cur)
            except ValueError:
                return ABSENT
        if isinstance(step, int):
            if not isinstance(cur, list) or step >= len(cur):
                return ABSENT
        elif not isinstance(cur, dict) or step not in cur:
            return ABSENT
        cur, at = cur[step], match.end()
    return cur


def assert_fields_hold(graph: ResourceGraph, violations: list[Violation]) -> None:
    """Every field names what the violating resource's inputs hold there (nothing, for a missing one)."""
    for v in violations:
        if v.field:
            resource = graph.get(v.urn)
            assert resource is not None, v
            held = resolve(resource.inputs, v.field)
            assert held in (ABSENT, None) if v.value is None else held == v.value, (v.field, v.value, held)


def assert_names(hits: list[Violation], expected: Expected) -> None:
    """The violations of a mutated policy name the ``expected`` field and value, or no field."""
    if expected is None:
        assert [v.field for v in hits] == [""] * len(hits)
        return
    field, value = expected
    assert any(v.field == field and (value is ANY or json.dumps(v.value) == json.dumps(value)) for v in hits), \
        [(v.field, v.value) for v in hits]


MANDATORY_AREAS = ("billing", "quotas", "telemetry")
# Security policies made mandatory on AWS as on GKE (issue 20): an API endpoint open to the internet.
MANDATORY_POLICIES = ("aws-eks-endpoint-not-open-to-internet",)
# The guards (gpu_policies/guards.py) are mandatory in production, which prod-aws is.
MANDATORY_POLICIES += ("kubernetes-team-admission-policies", "kubernetes-team-namespaces-pod-security",
                       "kubernetes-team-namespaces-isolated", "kubernetes-platform-namespaces-deny-egress",
                       "alerts-minimum-telemetry")
MANDATORY_POLICIES += ("inference-endpoint-private",)  # it judges production Services only


def _mandatory(rule: Any) -> bool:
    return rule.area in MANDATORY_AREAS or rule.name in MANDATORY_POLICIES


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_mutation_is_rejected_by_its_policy(mutation: str) -> None:
    mutate, expected = MUTATIONS[mutation]
    graph = mutate(prod())
    report = run_policies(graph)
    assert expected in policies_of(report), [(v.policy, v.message) for v in report.violations]
    rule = next(r for r in load_pack().rules if r.name == expected)
    hits = [v for v in report.violations if v.policy == expected]
    assert all(v.enforcement == ("mandatory" if _mandatory(rule) else "advisory") for v in hits)
    assert report.passed is not _mandatory(rule)
    assert_fields_hold(graph, report.violations)
    assert_names(hits, FIELDS[mutation])
    assert all(v.fix == rule.remediation for v in hits)


def test_every_mutation_says_which_field_it_breaks() -> None:
    assert set(FIELDS) == set(MUTATIONS)


def test_mutation_suite_is_broad() -> None:
    assert len(MUTATIONS) >= 25
    from blueprint.clouds.aws.examples import SLURM_MUTATIONS
    from tests.policy.test_policies_gcp import MUTATIONS as GCP_MUTATIONS

    covered = {policy for _, policy in MUTATIONS.values()} | {p for _, _, p in GCP_MUTATIONS.values()} \
        | {p for _, _, p in SLURM_MUTATIONS.values()}
    pack = {p.name for p in load_pack().policies}
    assert pack == covered  # every policy has at least one mutation it rejects


def test_a_finding_names_the_resource_to_edit_or_none() -> None:
    """Where the fix is in another resource than the one short of the requirement (a budget that alerts nobody,
    the launch template of a node group), the violation names that resource and its field; where a whole resource
    is missing, the one short of it and no field."""
    budget = "aws:budgets/budget:Budget"
    report = run_policies(edit(prod(), budget, "cost-budget-cluster", _set(["notifications"], [])))
    (hit,) = [v for v in report.violations if v.policy == "aws-cluster-has-a-budget"]
    assert hit.urn.endswith("::cost-budget-cluster") and (hit.field, hit.value) == ("notifications", [])
    report = run_policies(edit(prod(), LT, "nodegroup-h100-lt", lambda i: i["networkInterfaces"].append(
        {**i["networkInterfaces"][-1], "networkCardIndex": 32})))
    (hit,) = report.violations
    assert hit.urn.endswith("::nodegroup-h100-lt") and hit.field == "networkInterfaces[33]"
    assert hit.value["networkCardIndex"] == 32
    graph = prod()
    for team in ("research", "pretraining", "applied"):  # no team queue lists GPUs: no queue is at fault
        graph = edit(graph, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", f"clusterqueue-{team}",
                     _set(["spec", "resourceGroups"], []))
    (hit,) = [v for v in run_policies(graph).violations if v.policy == "kueue-cluster-queue-requires-gpu-quota"]
    assert (hit.urn, hit.field, hit.value) == ("", "", None)


def test_the_pack_never_imports_the_program() -> None:
    pack_dir = Path(__file__).resolve().parents[2] / "policies"
    for path in pack_dir.rglob("*.py"):
        text = path.read_text()
        assert "import components" not in text and "from components" not in text, path
        assert "import blueprint" not in text and "from blueprint" not in text, path


def test_violation_messages_state_the_requirement() -> None:
    report = run_policies(MUTATIONS["allow IMDSv1"][0](prod()))
    (violation,) = [v for v in report.violations if v.policy == "aws-ec2-launch-template-requires-imdsv2"]
    assert violation.message == (
        "Node launch templates require IMDSv2 with a hop limit of 1, so pods cannot read the node role.\n"
        "Launch template prod-train-h100 must require IMDSv2 (httpTokens: required); IMDSv1 lets any SSRF read "
        "the node's credentials.")
    assert violation.type == LT and violation.urn.endswith("::nodegroup-h100-lt")
    assert violation.severity == "high" and violation.enforcement == "advisory"
    report = run_policies(MUTATIONS["delete a team's LocalQueue"][0](prod()))
    (violation,) = report.violations
    assert violation.message.endswith(
        "Team namespace applied must have a Kueue LocalQueue, a ResourceQuota and a LimitRange; missing: LocalQueue.")
    assert violation.type == "kubernetes:core/v1:Namespace" and violation.enforcement == "mandatory"


def test_unknown_values_make_a_policy_not_applicable() -> None:
    from blueprint.graph.model import UNKNOWN

    graph = edit(prod(), LT, "nodegroup-h100-lt", _set(["metadataOptions"], UNKNOWN))
    report = run_policies(graph)
    assert report.violations == []
    assert ("aws-ec2-launch-template-requires-imdsv2",) in {(p,) for p, _ in report.not_applicable}


def test_policies_work_on_a_program_variant(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["nodeGroups"][1].update(capacity={"type": "on-demand"}, placement="auto")
    assert run_policies(run_spec(prod_spec).graph).violations == []
    # placement none on a group of fixed size: nothing places it, and nothing autoscales it either
    prod_spec["aws"]["nodeGroups"][1].update(placement="none", minSize=16, desiredSize=16)
    assert policies_of(run_policies(run_spec(prod_spec).graph)) == {"aws-efa-node-groups-single-az-and-placed"}


def test_an_autoscaled_efa_group_needs_no_placement_group() -> None:
    """The spot example's gpu-4 (multi-node EFA, placement none) is left unplaced so the Cluster Autoscaler can grow
    it (a placed group is topology-aware in Kueue and never grown): the pack asks for no placement group while its
    Auto Scaling group is opted in, and asks again once it is not."""
    graph = offline_run("examples/stacks/Pulumi.spot-gpus-from-zero-aws.yaml").graph
    placed = "aws-efa-node-groups-single-az-and-placed"
    assert placed not in policies_of(run_policies(graph))
    for opted_out in (edit(graph, "aws:autoscaling/tag:Tag", "nodegroup-gpu-4-asg-autoscale", remove=True),
                      edit(graph, "aws:autoscaling/tag:Tag", "nodegroup-gpu-4-asg-autoscale",
                           _set(["tag", "value"], "false"))):
        hits = [v for v in run_policies(opted_out).violations if v.policy == placed]
        assert [(v.urn.rsplit("::", 1)[1], v.field) for v in hits] == [("nodegroup-gpu-4-lt", "placement.groupName")]


# --- config overrides ---------------------------------------------------------------------------


def test_disabling_a_policy_removes_its_violations() -> None:
    graph = MUTATIONS["remove OpenCost"][0](prod())
    pack = load_pack()
    assert not run_policies(graph, normalize_config({}, pack.policies)).passed
    report = run_policies(graph, normalize_config({"cost-attribution-installed": "disabled"}, pack.policies))
    assert report.passed and report.violations == []


def test_changing_required_keys_changes_the_verdict() -> None:
    pack = load_pack()
    config = normalize_config({"aws-resources-require-billing-tags": {"requiredTags": ["team", "project"]}},
                              pack.policies)
    report = run_policies(prod(), config)
    hits = [v for v in report.violations if v.policy == "aws-resources-require-billing-tags"]
    assert hits and all(v.message.endswith("missing: project.") for v in hits)


def test_all_advisory_lets_mandatory_violations_pass() -> None:
    graph = MUTATIONS["remove OpenCost"][0](prod())
    report = run_policies(graph, normalize_config({"all": "advisory"}, load_pack().policies))
    assert report.passed and [v.enforcement for v in report.violations] == ["advisory"]


def test_security_can_be_made_mandatory() -> None:
    graph = MUTATIONS["allow IMDSv1"][0](prod())
    config = normalize_config({"aws-ec2-launch-template-requires-imdsv2": {"enforcementLevel": "mandatory"}},
                              load_pack().policies)
    assert not run_policies(graph, config).passed


@pytest.mark.parametrize(("raw", "message"), [
    ({"no-such-policy": "disabled"}, "policy config: no-such-policy: no such policy (known: "),
    ({"kueue-requires-metrics": "off"}, "policy config: kueue-requires-metrics: enforcement level must be one of "
                                        "advisory, mandatory, remediate, disabled, got 'off'"),
    ({"aws-eks-gpu-nodegroup-max-size-cap": {"maxNode": 10}}, "policy config: aws-eks-gpu-nodegroup-max-size-cap: "
                                                               "unknown setting(s) maxNode (known: maxNodes)"),
    ([1], "policy config: must be a JSON object of policy names"),
])
def test_bad_config_is_a_clear_error(raw: Any, message: str) -> None:
    with pytest.raises(PolicyConfigError) as info:
        normalize_config(raw, load_pack().policies)
    assert str(info.value).startswith(message)


# --- the pack stays in step with the program ---------------------------------------------------


def test_pack_efa_table_matches_the_catalog() -> None:
    from gpu_policies.fabric import EFA_INTERFACES

    catalog = {name: f.efa_count for name, f in load_aws_catalog().items() if f.efa_count}
    assert EFA_INTERFACES.default == catalog


def test_pack_autoscaler_opt_in_tag_is_the_programs() -> None:
    from gpu_policies.fabric import AUTOSCALE_TAG

    from components.aws.autoscaler import AUTOSCALE_TAG as PROGRAM_TAG

    assert AUTOSCALE_TAG == PROGRAM_TAG


def test_pack_taggable_types_cover_every_taggable_resource_of_the_program() -> None:
    from gpu_policies.billing import TAGGABLE

    from tests.program.test_program import _taggable

    used = {r.type for s in SHIPPED_STACKS for r in offline_run(s).graph.resources
            if r.type.startswith("aws:") and _taggable(r.type)}
    assert used <= set(TAGGABLE.default), sorted(used - set(TAGGABLE.default))


# --- command line and formats -------------------------------------------------------------------


def _line(text: str) -> int:
    """The number of prod-aws's stack-file line that reads ``text`` (stripped): where the CLI says a key is."""
    lines = (Path(__file__).parents[2] / "stacks" / "Pulumi.prod-aws.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line.strip() == text)


def _write_graph(tmp_path: Path, graph: ResourceGraph) -> Path:
    path = tmp_path / "graph.json"
    path.write_text(graph.to_json())
    return path


def test_cli_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "prod-aws"]) == 0
    assert capsys.readouterr().out.startswith("policy verdict: PASS (0 mandatory, 0 advisory violation(s)")
    mandatory = _write_graph(tmp_path, MUTATIONS["delete a team's LocalQueue"][0](prod()))
    assert main(["policy", str(mandatory)]) == 1
    advisory = _write_graph(tmp_path, MUTATIONS["allow IMDSv1"][0](prod()))
    assert main(["policy", str(advisory)]) == 0
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"team-namespaces-require-queue-and-quotas": "advisory"}))
    assert main(["policy", str(mandatory), "--config", str(config)]) == 0
    config.write_text("{not json")
    assert main(["policy", "prod-aws", "--config", str(config)]) == 2
    assert "not a readable JSON file" in capsys.readouterr().err


def test_cli_reads_a_pulumi_preview_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = MUTATIONS["remove OpenCost"][0](prod())
    steps = [{"op": "create", "urn": r.urn, "newState": {
        "urn": r.urn, "type": r.type, "custom": True, "inputs": r.inputs, "parent": r.parent or "",
        "provider": r.provider or "", "protect": r.protect, "dependencies": r.dependencies}}
        for r in graph.resources]
    path = tmp_path / "preview.json"
    path.write_text(json.dumps({"steps": steps}))
    assert main(["policy", str(path), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [v["policy"] for v in doc["violations"]] == ["cost-attribution-installed"]
    # and the stack-file key to change, with its line in the stack's file (stacks/Pulumi.<stack>.yaml)
    assert set(doc["violations"][0]) == {"policy", "enforcement", "severity", "urn", "type", "message", "field",
                                         "value", "fix", "specPath", "stackFile", "addKey"}


def test_markdown_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_graph(tmp_path, MUTATIONS["allow IMDSv1"][0](prod()))
    assert main(["policy", str(path), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### ✅ Policy check for `prod-aws`\n")
    assert "| enforcement | severity | policy | resource | field | stack-file key | requirement |\n" \
           "| --- | --- | --- | --- | --- | --- | --- |\n" in out
    assert "| advisory | high | `aws-ec2-launch-template-requires-imdsv2` | `nodegroup-h100-lt` | " \
           "`metadataOptions.httpTokens` | `gpu-cluster:spec.aws.nodeGroups[1]` (stacks/Pulumi.prod-aws.yaml:" \
           f"{_line('- name: h100')}) | Launch template prod-train-h100 must require IMDSv2" in out
    path = _write_graph(tmp_path, MUTATIONS["open the endpoint to 0.0.0.0/0"][0](prod()))
    assert main(["policy", str(path), "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("### ❌ Policy check for `prod-aws`\n")
    assert "| mandatory | critical | `aws-eks-endpoint-not-open-to-internet` | `control-plane-eks` | " \
           "`vpcConfig.publicAccessCidrs[0]` |" in out
    assert "- `aws-eks-endpoint-not-open-to-internet`: Set controlPlane.endpointAccess: private" in out
    # a violation with no field leaves the cell empty; one whose field holds a pipe keeps the table's columns
    path = _write_graph(tmp_path, MUTATIONS["remove OpenCost"][0](prod()))
    main(["policy", str(path), "--format", "markdown"])
    assert "| mandatory | medium | `cost-attribution-installed` | `(stack)` |  | `gpu-cluster:spec` " \
           f"(stacks/Pulumi.prod-aws.yaml:{_line('gpu-cluster:spec:')}) | The stack must install" in \
        capsys.readouterr().out
    violation = Violation("p", "advisory", "low", "", "", "d\nm", field='metadata.labels["a|b"]', value="x")
    row = render_markdown(PolicyReport("pack", [violation]), "s").splitlines()[6]
    assert row == '| advisory | low | `p` | `(stack)` | `metadata.labels["a\\|b"]` | m |'


def test_text_and_json_carry_field_value_and_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_graph(tmp_path, MUTATIONS["allow IMDSv1"][0](MUTATIONS["remove OpenCost"][0](prod())))
    assert main(["policy", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        "  ADVISORY  high     aws-ec2-launch-template-requires-imdsv2\n"
        "            urn:pulumi:prod-aws::gpu-cluster::gpu-cluster:compute:AwsNodeGroup$"
        "aws:ec2/launchTemplate:LaunchTemplate::nodegroup-h100-lt\n"
        "            Launch template prod-train-h100 must require IMDSv2 (httpTokens: required); IMDSv1 lets any SSRF "
        "read the node's credentials.\n"
        "            field: metadataOptions.httpTokens = \"optional\"\n"
        "            stack file: gpu-cluster:spec.aws.nodeGroups[1] (stacks/Pulumi.prod-aws.yaml:"
        f"{_line('- name: h100')})\n"
        "            fix: Keep metadataOptions httpTokens: required and httpPutResponseHopLimit: 1 "
        "(components/aws/compute.py).\n") in out
    # no field: no field line, but the fix
    assert ("            (stack)\n"
            "            The stack must install cost attribution (OpenCost) so cost per job, team and model can be "
            "read.\n"
            f"            stack file: gpu-cluster:spec (stacks/Pulumi.prod-aws.yaml:{_line('gpu-cluster:spec:')})\n"
            "            fix: Keep the OpenCost release of the Monitoring component.\n") in out
    assert main(["policy", str(path), "--format", "json"]) == 1
    doc = {v["policy"]: v for v in json.loads(capsys.readouterr().out)["violations"]}
    imds = doc["aws-ec2-launch-template-requires-imdsv2"]
    assert (imds["field"], imds["value"]) == ("metadataOptions.httpTokens", "optional")
    assert imds["fix"] == next(r.remediation for r in load_pack().rules if r.name == imds["policy"])
    assert imds["message"].endswith("lets any SSRF read the node's credentials.")  # the field lines parsed out
    opencost = doc["cost-attribution-installed"]
    assert (opencost["field"], opencost["value"]) == ("", None) and opencost["fix"].startswith("Keep the OpenCost")


def test_the_table_shows_a_missing_field_and_cuts_a_long_value() -> None:
    missing = Violation("p", "advisory", "low", "u", "t", "d\nm", field="kmsKeyId", fix="Set it.")
    long = Violation("p", "advisory", "low", "u", "t", "d\nm", field="data.x", value="y" * 500)
    out = render_table(PolicyReport("pack", [missing, long])).splitlines()
    assert out[4:6] == ["            field: kmsKeyId (not set)", "            fix: Set it."]
    start = "            field: data.x = "
    assert out[9] == f"{start}\"{'y' * 198}…" and len(out[9]) == len(start) + 200


# --- the finding encoding: what the pack appends to a violation message ---------------------------


@pytest.mark.parametrize(("message", "field", "value"), [
    ("Bucket b must be versioned.", None, ABSENT),
    ("Bucket b must be versioned.", "versioningConfiguration.status", ABSENT),
    ("Bucket b must be versioned.", "versioningConfiguration.status", "Suspended"),
    ("m", 'metadata.labels["cost-center"]', None),
    ("m", "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", 0),
    ("m", "data.x", "two\nlines and \"quotes\" and a \\ backslash"),
    ("m", "data.x", {"a": ["b\nc", 1.5, True, None], "k\"ey": {"field: x": "seen: y"}}),
    ("m", "data.x", "seen: 1\nfield: y"),
    ("", "x", 1),
    ("ends like a field\nfield: spoofed", None, ABSENT),
    ("field: looks like one", None, ABSENT),
    ("seen: 1", "x", ABSENT),
])
def test_the_finding_encoding_round_trips(message: str, field: str | None, value: Any) -> None:
    encoded = encode_finding(message, field, value)
    lines = encoded.split("\n")
    assert len(lines) == 1 + (field is not None) + (value is not ABSENT)  # the requirement is one line
    if field is not None:
        assert lines[1] == f"field: {field}"
    if value is not ABSENT:
        assert lines[2].startswith("seen: ") and json.loads(lines[2][6:]) == value
    # as the analyzer reports it: the policy description first
    one_line = " ".join(message.splitlines())
    assert decode_finding("The rule.\n" + encoded) == (f"The rule.\n{one_line}", field, value)


def test_a_message_without_encoded_lines_decodes_to_itself() -> None:
    for message in ("The rule.\nBucket b must be versioned.", "The rule.", "The rule.\nfield: a",
                    "The rule.\nfield: a\nseen: 1", "The rule.\nm\nfield: a\nseen: not json"):
        assert decode_finding(message) == (message, None, ABSENT)


def test_field_paths_and_plain_values() -> None:
    assert field_path("vpcConfig", "publicAccessCidrs", 0) == "vpcConfig.publicAccessCidrs[0]"
    assert field_path("metadata", "labels", "cost-center") == 'metadata.labels["cost-center"]'
    assert field_path("tags", "a\"b") == 'tags["a\\"b"]' and field_path(0, "x") == "[0].x"
    assert plain(3.0) == 3 and isinstance(plain(3.0), int) and plain(2.5) == 2.5
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

    proxied = unknown_checking_proxy({"a": [1.0, {"b": UNKNOWN_STRING_VALUE}], "c": None})
    assert plain(proxied) == {"a": [1, {"b": "[unknown]"}], "c": None}
    assert seen(proxied, "c") is ABSENT and seen(proxied, "a", 5) is ABSENT and seen(proxied, "a", 0) == 1.0


def test_preview_shows_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "prod-aws"]) == 0
    count = len(load_pack().policies)
    assert count >= 49
    assert f"policy verdict: PASS (0 mandatory, 0 advisory violation(s); {count} policies in gpu-cluster-policies)" \
        in capsys.readouterr().out
