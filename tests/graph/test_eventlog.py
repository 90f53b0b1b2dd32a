"""The engine event log of a real `pulumi preview --event-log` feeds the same readers: graph, policy, cost, cost
diff. The fixture is a prod-aws preview in the apitype shape (tests/fixtures/eventlog/SOURCE.md)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.cost.diff import diff_document, diff_event_log, render_diff_markdown
from blueprint.cost.engine import price_graph
from blueprint.cost.prices import Price, prices_for
from blueprint.graph.eventlog import EventLogPreview, is_event_log, load_event_log, read_event_log
from blueprint.graph.load import load_graph
from blueprint.graph.model import SECRET, UNKNOWN, GraphFormatError, GraphResource, ResourceGraph
from blueprint.policy.runner import DEPENDENCY_POLICIES, OPTION_POLICIES, load_pack, run_policies
from tests.conftest import ROOT, offline_run

FIXTURE = ROOT / "tests" / "fixtures" / "eventlog" / "preview-prod-aws.jsonl"
P = "urn:pulumi:prod-aws::gpu-cluster::"
STACK = P + "pulumi:pulumi:Stack::gpu-cluster-prod-aws"
AWS = P + "pulumi:providers:aws::aws"
K8S = P + "pulumi:providers:kubernetes::kubernetes"
NG_SYSTEM = P + "gpu-cluster:compute:AwsNodeGroup::nodegroup-system"
LT = P + "gpu-cluster:compute:AwsNodeGroup$aws:ec2/launchTemplate:LaunchTemplate::nodegroup-system-lt"
NG = P + "gpu-cluster:compute:AwsNodeGroup$aws:eks/nodeGroup:NodeGroup::nodegroup-system-ng"
FSX = P + "gpu-cluster:storage:AwsStorage$aws:fsx/lustreFileSystem:LustreFileSystem::storage-lustre"
NS = P + "gpu-cluster:control-plane:Tenancy$kubernetes:core/v1:Namespace::tenancy-ns-vision"
NAT = P + "gpu-cluster:network:AwsNetwork$aws:ec2/natGateway:NatGateway::network-nat-use1-az6"
PRIVILEGED = "kubernetes-privileged-pods-only-in-system-namespaces"
POD_SECURITY = "kubernetes-team-namespaces-pod-security"


@pytest.fixture(scope="module")
def log() -> EventLogPreview:
    return load_event_log(FIXTURE)


def _events() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


# --- the reader -----------------------------------------------------------------------------------


def test_each_resource_has_the_step_its_events_say(log: EventLogPreview) -> None:
    assert log.ops[NG] == "replace" and log.ops[FSX] == "update" and log.ops[NS] == "create"
    assert log.ops[NAT] == "delete" and log.ops[LT] == "same"
    assert {log.ops[u] for u in (STACK, AWS, K8S, NG_SYSTEM)} == {"same"}
    # the summary's counts are the logical steps: a replacement's three events count once
    summary = next(e["summaryEvent"] for e in _events() if "summaryEvent" in e)
    assert Counter(log.ops.values()) == Counter(summary["resourceChanges"])
    assert log.replaced == [NG] and log.renamed == {} and log.is_preview
    assert log.config == {"aws:region": "us-east-1", "gpu-cluster:spec": "[secret]"}


def test_the_new_graph_is_the_state_after_the_update(log: EventLogPreview) -> None:
    new = log.new
    assert new.stack == "prod-aws"
    assert new.get(NAT) is None  # deleted
    created = new.get(NS)
    assert created is not None and created.op == "create"
    assert created.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert created.parent == P + "gpu-cluster:control-plane:Tenancy::tenancy"
    assert created.provider_urn == K8S
    group = new.get(NG)
    assert group is not None and group.op == "replace" and group.inputs["instanceTypes"] == ["m7i.2xlarge"]
    assert group.parent == NG_SYSTEM and group.provider_urn == AWS
    assert group.provider == AWS + "::5b4c1f0e-7d2a-4c39-9e61-2f8a0b6d3c17"
    lustre = new.get(FSX)
    assert lustre is not None and lustre.inputs["storageCapacity"] == 12000
    assert lustre.protect and lustre.retain_on_delete
    provider = new.get(K8S)
    assert provider is not None and provider.inputs["kubeconfig"] == SECRET  # the engine's blinded secret object
    # what the events do not carry
    assert not new.dependencies_recorded and all(r.dependencies == [] for r in new.resources)
    assert all(r.ignore_changes is None for r in new.resources)
    assert graph_types(new)["aws:eks/nodeGroup:NodeGroup"] == 1


def graph_types(graph: ResourceGraph) -> Counter[str]:
    return Counter(r.type for r in graph.resources)


def test_the_old_graph_is_the_state_before_the_update(log: EventLogPreview) -> None:
    old = log.old
    assert old.get(NS) is None  # not created yet
    nat = old.get(NAT)
    assert nat is not None and nat.op == "delete" and nat.inputs["connectivityType"] == "public"
    group = old.get(NG)
    assert group is not None and group.op == "replace" and group.inputs["instanceTypes"] == ["m6i.2xlarge"]
    lustre = old.get(FSX)
    assert lustre is not None and lustre.inputs["storageCapacity"] == 9600
    assert {r.urn for r in old.resources} - {r.urn for r in log.new.resources} == {NAT}


def test_load_recognises_an_event_log_by_shape_whatever_its_name(tmp_path: Path) -> None:
    for name in ("events.jsonl", "events.json", "events"):
        copy = tmp_path / name
        shutil.copy(FIXTURE, copy)
        graph = load_graph(copy)
        assert graph.get(NS) is not None and graph.get(NAT) is None
    assert is_event_log(FIXTURE.read_text())
    assert not is_event_log(offline_run("dev-aws").graph.to_json())
    assert not is_event_log(json.dumps({"steps": []}) + "\n")
    cut_short = tmp_path / "cut.json"  # killed while writing the first event
    cut_short.write_text(FIXTURE.read_text()[:50])
    with pytest.raises(GraphFormatError, match=r"^line 1 is cut off"):
        load_graph(cut_short)


def test_a_graph_written_from_an_event_log_keeps_its_ops_and_what_it_lacks(log: EventLogPreview,
                                                                          tmp_path: Path) -> None:
    path = tmp_path / "graph.json"
    path.write_text(log.new.to_json())
    doc = json.loads(path.read_text())
    assert doc["unrecorded"] == ["dependencies"]
    assert {r["urn"]: r["op"] for r in doc["resources"]}[NG] == "replace"
    again = load_graph(path)
    assert again.to_json() == log.new.to_json() and not again.dependencies_recorded
    # offline graphs are unchanged: no op, nothing unrecorded
    assert "unrecorded" not in offline_run("dev-aws").graph.to_dict()


def test_preview_json_records_the_step_too() -> None:
    state = {"urn": NG, "type": "aws:eks/nodeGroup:NodeGroup", "inputs": {}}
    graph = ResourceGraph.from_preview_json({"steps": [{"op": "replace", "urn": NG, "newState": state}]})
    assert graph.resources[0].op == "replace"
    with pytest.raises(GraphFormatError, match=r"steps\[0\]\.op: \"rename\" is not a step of the engine"):
        ResourceGraph.from_preview_json({"steps": [{"op": "rename", "urn": NG, "newState": state}]})


# --- synthetic logs: the rules of the reader --------------------------------------------------------


def _state(urn: str, type_: str = "aws:eks/nodeGroup:NodeGroup", **extra: Any) -> dict[str, Any]:
    return {"type": type_, "urn": urn, "custom": True, "id": "", "parent": "", "inputs": {}, "outputs": {},
            "provider": "", **extra}


def _pre(op: str, urn: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    return {"resourcePreEvent": {"metadata": {"op": op, "urn": urn, "type": (new or old or {}).get("type", ""),
                                              "old": old, "new": new, "detailedDiff": None, "provider": ""},
                                 "planning": True}}


def _log(*payloads: dict[str, Any], summary: dict[str, Any] | None = None) -> str:
    events = [{"preludeEvent": {"config": {}}}, *payloads,
              {"summaryEvent": summary or {"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": {},
                                           "PolicyPacks": {}, "isPreview": True, "result": "succeeded"}},
              {"cancelEvent": {}}]
    return "".join(json.dumps({"sequence": i, "timestamp": 1787302861, **e}) + "\n" for i, e in enumerate(events))


def test_unknowns_and_secrets_read_as_the_preview_json_reader_reads_them() -> None:
    inputs = {"scalingConfig": {"desiredSize": UNKNOWN, "maxSize": 4, "minSize": 0}, "nodeRoleArn": UNKNOWN,
              "tags": {"Name": "x"}, "labels": {"a": {"4dabf18193072939515e22adb298388d":
                                                       "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "[secret]"}}}
    state = _state(NG, parent=NG_SYSTEM, provider=AWS + "::" + UNKNOWN, inputs=inputs)
    from_log = read_event_log(_log(_pre("create", NG, None, state))).new.resources[0]
    preview_state = dict(state, inputs=dict(inputs, labels={"a": SECRET}))
    from_preview = ResourceGraph.from_preview_json({"steps": [{"op": "create", "urn": NG,
                                                               "newState": preview_state}]}).resources[0]
    assert from_log == from_preview
    assert from_log.inputs["scalingConfig"]["desiredSize"] == UNKNOWN and from_log.provider_urn == AWS
    priced = price_graph(ResourceGraph("prod-aws", [from_log]))  # an unknown size prices as no nodes
    assert priced.resources[0].monthly_usd == 0


def test_a_replacement_in_either_order_is_one_replace_and_the_old_state_is_before_it() -> None:
    old = _state(NG, inputs={"instanceTypes": ["m6i.2xlarge"]})
    pending = dict(old, delete=True)
    new = _state(NG, inputs={"instanceTypes": ["m7i.2xlarge"]})
    create_first = [_pre("create-replacement", NG, old, new), _pre("replace", NG, pending, new),
                    _pre("delete-replaced", NG, pending, None)]
    delete_first = [_pre("delete-replaced", NG, old, None), _pre("replace", NG, old, new),
                    _pre("create-replacement", NG, old, new)]
    for steps in (create_first, delete_first):
        log = read_event_log(_log(*steps))
        assert log.ops == {NG: "replace"}
        assert log.new.resources[0].inputs["instanceTypes"] == ["m7i.2xlarge"]
        assert log.old.resources[0].inputs["instanceTypes"] == ["m6i.2xlarge"]


def test_a_pending_delete_leftover_does_not_hide_the_live_resource() -> None:
    leftover = _state(NG, delete=True, inputs={"instanceTypes": ["old"]})
    live = _state(NG, inputs={"instanceTypes": ["live"]})
    log = read_event_log(_log(_pre("delete-replaced", NG, leftover, None), _pre("same", NG, live, live)))
    assert log.ops == {NG: "same"}
    assert log.old.resources[0].inputs["instanceTypes"] == ["live"]
    assert log.new.resources[0].inputs["instanceTypes"] == ["live"]


def test_refresh_steps_are_not_the_update_and_a_renamed_resource_is_matched() -> None:
    before = _state(NG, inputs={"instanceTypes": ["m6i.2xlarge"]})
    after = _state(NG, inputs={"instanceTypes": ["m7i.2xlarge"]})
    log = read_event_log(_log(_pre("refresh", NG, before, before), _pre("update", NG, before, after)))
    assert log.ops == {NG: "update"}
    old_urn = NG.replace("nodegroup-system-ng", "system-ng")  # renamed with an alias: refreshed under its old URN
    renamed = _state(old_urn, inputs={"instanceTypes": ["m6i.2xlarge"]})
    log = read_event_log(_log(_pre("refresh", old_urn, renamed, renamed), _pre("same", NG, renamed, before)))
    assert log.ops == {NG: "same"} and log.renamed == {old_urn: NG}
    assert [r.urn for r in log.old.resources] == [old_urn] and [r.urn for r in log.new.resources] == [NG]


def test_contradictory_steps_for_one_urn_are_an_error() -> None:
    state = _state(NG)
    with pytest.raises(GraphFormatError, match="has the steps create, update; the engine gives a resource one"):
        read_event_log(_log(_pre("create", NG, None, state), _pre("update", NG, state, state)))


def test_events_of_a_newer_cli_are_skipped() -> None:
    log = read_event_log(_log({"someFutureEvent": {"x": 1}}, _pre("create", NG, None, _state(NG))))
    assert log.ops == {NG: "create"}


def test_a_preview_failed_only_by_mandatory_policies_is_read() -> None:
    violation = {"policyEvent": {"resourceUrn": NG, "message": "m", "color": "never", "policyName": "p",
                                 "policyPackName": "gpu-cluster-policies", "policyPackVersion": "0.1.0",
                                 "policyPackVersionTag": "0.1.0", "enforcementLevel": "mandatory"}}
    failed = {"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": {"create": 1}, "PolicyPacks": {},
              "isPreview": True, "result": "failed"}
    log = read_event_log(_log(_pre("create", NG, None, _state(NG)), violation, summary=failed))
    assert [f.enforcement for f in log.policy_findings] == ["mandatory"]
    with pytest.raises(GraphFormatError, match=r"the preview failed \(summaryEvent.result\)"):
        read_event_log(_log(_pre("create", NG, None, _state(NG)), summary=failed))


# --- malformed logs: a clear error naming the line, never a traceback ------------------------------


def _lines() -> list[str]:
    return FIXTURE.read_text().splitlines(keepends=True)


def _broken(mutate: Any) -> str:
    events = [json.loads(line) for line in _lines()]
    mutate(events)
    return "".join(json.dumps(e) + "\n" for e in events)


def _insert(events: list[dict[str, Any]], payload: dict[str, Any]) -> None:
    """Insert an event before the summary, numbering every event again (only the payload is wrong)."""
    events.insert(-2, payload)
    for i, event in enumerate(events):
        event.update(sequence=i, timestamp=event.get("timestamp", 1787302861))


def _first(events: list[dict[str, Any]], op: str) -> dict[str, Any]:
    return next(e["resourcePreEvent"]["metadata"] for e in events
                if "resourcePreEvent" in e and e["resourcePreEvent"]["metadata"]["op"] == op)


@pytest.mark.parametrize(("text", "message"), [
    ("".join(_lines()[:5]) + '{"sequence": 5, "timestamp": 1787302864, "resourcePreEvent": {"metad\n'
     + "".join(_lines()[6:]), r"^line 6: not JSON: Unterminated string"),
    ("".join(_lines())[:-40], r"^line 35 is cut off \(the file does not end with a newline\): the CLI stopped while "
                              "writing the log, so the preview did not finish$"),
    ("".join(_lines()[:20]), r"^no summaryEvent: the log stops at sequence 19 before the preview finished \(was the "
                             r"CLI killed\?\), so its graph would lack resources$"),
    (_broken(lambda ev: _first(ev, "update").pop("op")),
     r"^line \d+ \(resourcePreEvent\)\.metadata\.op: missing is not a step of the engine"),
    (_broken(lambda ev: _first(ev, "update").update(old=None)),
     r"^line \d+ \(resourcePreEvent\)\.metadata \(update urn:pulumi:.*storage-lustre\): a update step has an old "
     r"state; metadata\.old is missing$"),
    (_broken(lambda ev: _first(ev, "create")["new"].pop("type")),
     r"^line \d+ \(resourcePreEvent\)\.metadata\.new\.type: required$"),
    (_broken(lambda ev: _first(ev, "update")["new"]["inputs"].update(storageCapacity=-1200)),
     r"^line \d+ \(resourcePreEvent\)\.metadata\.new\.inputs\.storageCapacity: -1200 is not a capacity in GiB"),
    (_broken(lambda ev: ev[7].pop("sequence")), r"^line 8\.sequence: must be a whole number from 0, got missing$"),
    (_broken(lambda ev: ev[7].update(sequence=3)), r"^line 8: sequence 3 after 6; the engine numbers its events"),
    (_broken(lambda ev: ev[7].update(summaryEvent={})), r"^line 8: one event holds summaryEvent, resOutputsEvent"),
    (_broken(lambda ev: _insert(ev, {"diagnosticEvent": {
        "message": "error: creating FSx Lustre File System: AccessDenied", "color": "never", "severity": "error"}})),
     r"^the preview failed \(1 error\(s\)\); first: line 34 \(diagnosticEvent\): error: creating FSx Lustre File "
     r"System: AccessDenied$"),
    (_broken(lambda ev: _insert(ev, {"cancelEvent": {}})),
     r"^the log has a cancelEvent before any summaryEvent: the preview was cancelled"),
    ("\n\n", r"^an empty event log"),
])
def test_malformed_logs_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(GraphFormatError, match=message):
        read_event_log(text)


def test_the_cli_names_the_file_and_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.json"  # the CLI takes graph files by a .json name today
    path.write_text("".join(_lines())[:-40])
    assert main(["policy", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err == (f"error: {path}: line 35 is cut off (the file does not end with a newline): the CLI stopped "
                   "while writing the log, so the preview did not finish\n")
    with pytest.raises(GraphFormatError, match=rf"^{path}: line 35 is cut off"):
        load_event_log(path)


# --- policy -----------------------------------------------------------------------------------------


def test_policy_reports_the_violation_the_created_namespace_introduces(log: EventLogPreview) -> None:
    report = run_policies(log.new)
    # A team namespace's Pod Security level is the guard's since issue 33 (the recorded run predates it)
    found = [v for v in report.violations if v.policy == POD_SECURITY]
    assert [(v.urn, v.type) for v in found] == [(NS, "kubernetes:core/v1:Namespace")]
    assert "Team namespace vision must enforce Pod Security baseline or restricted" in found[0].message
    assert not [v for v in run_policies(log.old).violations if v.policy == POD_SECURITY]
    # the engine's own run of the pack (policyEvent) said it under the policy that judged it then
    assert [(f.policy, f.urn) for f in log.policy_findings] == [(PRIVILEGED, NS)]
    skipped = dict(report.not_applicable)
    assert set(DEPENDENCY_POLICIES) | set(OPTION_POLICIES) <= skipped.keys()
    assert "does not record dependencies (a pulumi event log omits them)" in skipped[DEPENDENCY_POLICIES[0]]


def test_the_policy_cli_reads_an_event_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.json"
    shutil.copy(FIXTURE, path)
    code = main(["policy", str(path), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1)  # the fixture is a slice of the stack: stack rules see what it lacks
    assert any(v["policy"] == POD_SECURITY and v["urn"] == NS for v in doc["violations"])


def _same_log(graph: ResourceGraph) -> str:
    """An event log in which every resource of ``graph`` stays the same, as a preview of an unchanged stack."""
    def state(r: GraphResource) -> dict[str, Any]:
        return _state(r.urn, r.type, parent=r.parent or "", provider=r.provider or "", inputs=r.inputs,
                      protect=r.protect, retainOnDelete=r.retain_on_delete)
    return _log(*(_pre("same", r.urn, state(r), state(r)) for r in graph.resources))


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp", "byo-aws"])
def test_an_unchanged_stack_read_from_its_event_log_gets_the_offline_verdicts_and_cost(stack: str) -> None:
    """Every policy but those that follow dependencies or ignoreChanges gives the same verdict on the graph read
    from an event log as on the offline graph it was written from; so DEPENDENCY_POLICIES is complete."""
    offline = offline_run(stack).graph
    read = read_event_log(_same_log(offline)).new
    assert [(r.urn, r.inputs, r.parent, r.provider) for r in read.resources] == \
        [(r.urn, r.inputs, r.parent, r.provider) for r in offline.resources]
    pack = load_pack()
    assert set(DEPENDENCY_POLICIES) <= {p.name for p in pack.policies}
    skipped = set(DEPENDENCY_POLICIES) | set(OPTION_POLICIES)
    expected = sorted((v.policy, v.urn) for v in run_policies(offline, pack=pack).violations
                      if v.policy not in skipped)
    assert sorted((v.policy, v.urn) for v in run_policies(read, pack=pack).violations) == expected
    # without the skip, a graph that lost its dependencies does change the verdict of a listed policy only
    lost = ResourceGraph(offline.stack, [GraphResource(**{**r.__dict__, "dependencies": []})
                                         for r in offline.resources])
    changed = {v.policy for v in run_policies(lost, pack=pack).violations} - {v.policy for v in expected}
    assert changed <= set(DEPENDENCY_POLICIES)
    assert price_graph(read).total_monthly_usd == pytest.approx(price_graph(offline).total_monthly_usd)


# --- cost and cost diff -------------------------------------------------------------------------------


def _all_priced() -> dict[str, Price]:
    """The catalog with a figure for the lines it has none for, so that every line of the fixture is priced."""
    prices = dict(prices_for("aws"))
    for key, usd, unit in (("ec2_on_demand.m6i.2xlarge", 0.384, "hour"), ("ec2_on_demand.m7i.2xlarge", 0.4032, "hour"),
                           ("fsx_lustre.PERSISTENT_2_500", 0.42, "GB-month")):
        section, item = key.split(".", 1)
        prices[key] = Price(section, item, usd, unit, "us-east-1", "confirmed", "test figure", "2026-08-21")
    return prices


def test_cost_diff_of_one_event_log(log: EventLogPreview) -> None:
    prices = _all_priced()
    diff = diff_event_log(log, prices)
    changes = {r.name: r for r in diff.resources}
    assert set(changes) == {"nodegroup-system-ng", "network-nat-use1-az6", "storage-lustre"}
    nat = changes["network-nat-use1-az6"]  # a delete removes the monthly cost
    assert (nat.change, nat.previous_monthly_usd, nat.new_monthly_usd) == ("removed", pytest.approx(730 * 0.045), 0)
    group = changes["nodegroup-system-ng"]  # a replace keeps it (at the new instance type's price) and is flagged
    assert group.change == "replaced"
    assert group.previous_monthly_usd == pytest.approx(3 * 730 * 0.384 + 600 * 0.08)
    assert group.new_monthly_usd == pytest.approx(3 * 730 * 0.4032 + 600 * 0.08)
    lustre = changes["storage-lustre"]
    assert (lustre.change, lustre.new_monthly_usd - lustre.previous_monthly_usd) == ("changed",
                                                                                       pytest.approx(2400 * 0.42))
    assert diff.diff_monthly_usd == pytest.approx(-730 * 0.045 + 3 * 730 * (0.4032 - 0.384) + 2400 * 0.42)
    assert diff.replaced == ("nodegroup-system-ng",)
    text = render_diff_markdown([diff_document(diff)])
    assert "| `nodegroup-system-ng` | replaced |" in text
    assert ("**Replaced** (deleted and created again: the monthly cost carries over, what the resource holds does "
            "not): `nodegroup-system-ng`") in text
    assert diff_document(diff)["replaced"] == ["nodegroup-system-ng"]


def test_a_replacement_at_the_same_cost_is_still_listed(log: EventLogPreview) -> None:
    prices = _all_priced()
    prices["ec2_on_demand.m7i.2xlarge"] = dataclasses.replace(prices["ec2_on_demand.m6i.2xlarge"], item="m7i.2xlarge")
    diff = diff_event_log(log, prices)  # m6i and m7i at one price: the group's lines cost the same
    group = next(r for r in diff.resources if r.name == "nodegroup-system-ng")
    assert group.change == "replaced" and group.previous_monthly_usd == group.new_monthly_usd
    assert diff.diff_monthly_usd == pytest.approx(-730 * 0.045 + 2400 * 0.42)


def test_the_cost_cli_prices_the_state_after_the_update(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.json"
    shutil.copy(FIXTURE, path)
    assert main(["cost", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    urns = {r["urn"] for r in doc["resources"]}
    assert NG in urns and FSX in urns and NAT not in urns
    m7i = prices_for("aws")["ec2_on_demand.m7i.2xlarge"].usd
    assert m7i is not None  # the replaced system group's new type, and its gp3 root volumes
    assert doc["total_monthly_usd"] == pytest.approx(3 * 730 * m7i + 600 * 0.08)


def test_a_renamed_resource_is_matched_not_removed_and_added() -> None:
    old_urn = NAT.replace("network-nat-use1-az6", "nat-b")
    log = read_event_log(_log(_pre("same", NAT, _state(old_urn, "aws:ec2/natGateway:NatGateway"),
                                   _state(NAT, "aws:ec2/natGateway:NatGateway"))))
    diff = diff_event_log(log)
    assert diff.previous.total_monthly_usd == pytest.approx(730 * 0.045)
    assert diff.resources == () and diff.diff_monthly_usd == 0


def test_the_cli_reads_an_event_log_by_its_jsonl_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``blueprint policy events.jsonl`` and ``cost diff --event-log`` take the file `pulumi preview --event-log`
    writes under its own name."""
    path = tmp_path / "prod-aws.events.jsonl"
    shutil.copy(FIXTURE, path)
    assert main(["policy", str(path), "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)["violations"]
    assert any(v["urn"].endswith("::tenancy-ns-vision") for v in found)
    assert main(["cost", "diff", "--event-log", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["replaced"] == ["nodegroup-system-ng"]
    assert {r["name"]: r["change"] for r in doc["resources"]}["network-nat-use1-az6"] == "removed"
    assert main(["cost", "diff", "--event-log", str(path), "prod-aws"]) == 2
    assert "give no --base and no target" in capsys.readouterr().err


def test_the_event_log_diff_uses_the_stacks_usage_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The log names its stack (prod-aws): its usage file prices the usage-priced resources, as for a stack target."""
    log = load_event_log(FIXTURE)
    without = diff_event_log(log)
    assert main(["cost", "diff", "--event-log", str(FIXTURE), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["previous_monthly_usd"] > without.previous.total_monthly_usd
