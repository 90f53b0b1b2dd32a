"""The direct policy engine (each policy's validate called on the graph's data) gives the report the CrossGuard
analyzer path gives (the pack's analyzer servicer fed protobuf requests, as `pulumi preview --policy-pack` runs it):
on every shipped stack, every mutation fixture, event-log and preview-JSON graphs, pack configs, arbitrary inputs, and
a probe pack that records every argument the two hand a policy.

Reports are compared whole and in order (every Violation field, then the not-applicable list, the levels, the rules)
and as the JSON, table and Markdown the CLI prints: run_policies sorts the violations, so the order is part of what a
user reads, and an engine that found the same violations in another order where the sort key ties would show in the
output; comparing sorted lists would hide that.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from blueprint import clouds
from blueprint.graph.eventlog import load_event_log
from blueprint.graph.model import UNKNOWN, GraphResource, ResourceGraph
from blueprint.policy.cloud import cloud_examples
from blueprint.policy.mutations import Mutation
from blueprint.policy.runner import (
    DEPENDENCY_POLICIES,
    ENGINE_ENV,
    LEVELS,
    OPTION_POLICIES,
    LevelConfig,
    Pack,
    PolicyConfigError,
    PolicyReport,
    load_pack,
    normalize_config,
    render_json,
    render_markdown,
    render_table,
    run_policies,
)
from blueprint.policy.sarif import render_sarif
from tests.conftest import ROOT, SHIPPED_STACKS, offline_run
from tests.policy.test_policy_properties import mutated_inputs

EVENT_LOG = ROOT / "tests" / "fixtures" / "eventlog" / "preview-prod-aws.jsonl"


@cache
def pack() -> Pack:
    return load_pack()


def same_report(graph: ResourceGraph, config: LevelConfig | None = None, the_pack: Pack | None = None) -> PolicyReport:
    """The report of both engines, which must be identical; the direct one."""
    the_pack = the_pack or pack()
    direct = run_policies(graph, config, the_pack, engine="direct")
    analyzer = run_policies(graph, config, the_pack, engine="analyzer")
    assert [dataclasses.astuple(v) for v in direct.violations] == \
        [dataclasses.astuple(v) for v in analyzer.violations]
    assert direct.not_applicable == analyzer.not_applicable
    assert (direct.pack, direct.levels, direct.rules) == (analyzer.pack, analyzer.levels, analyzer.rules)
    # 1 and 1.0 are equal in Python but not in the JSON a reader parses: compare what is printed too
    assert render_json(direct) == render_json(analyzer)
    assert render_table(direct) == render_table(analyzer)
    assert render_markdown(direct, graph.stack) == render_markdown(analyzer, graph.stack)
    sarif = [render_sarif(report, graph.stack, graph, None, None) for report in (direct, analyzer)]
    assert sarif[0] == sarif[1]
    return direct


# --- the shipped pack -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_shipped_stack_gets_the_same_report(stack: str) -> None:
    same_report(offline_run(stack).graph)


MUTATIONS: dict[str, tuple[str, Mutation, str]] = {
    f"{cloud}: {how}": found for cloud in clouds.names() for how, found in cloud_examples(cloud).MUTATIONS.items()}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_every_mutation_fixture_gets_the_same_report(mutation: str) -> None:
    stack, mutate, policy = MUTATIONS[mutation]
    report = same_report(mutate(offline_run(stack).graph))
    assert policy in {v.policy for v in report.violations}  # the fixture breaks what it says: the comparison has teeth


def test_the_mutation_fixtures_cover_every_cloud_and_their_stacks() -> None:
    assert {m.split(":")[0] for m in MUTATIONS} == set(clouds.names())
    assert len(MUTATIONS) >= 100


def test_event_log_graphs_get_the_same_report_and_skip_the_same_policies() -> None:
    """An event log records neither dependencies nor options: both engines leave out DEPENDENCY_POLICIES and
    OPTION_POLICIES, with the same reasons."""
    log = load_event_log(EVENT_LOG)
    for graph in (log.new, log.old):
        report = same_report(graph)
        assert report.violations
        skipped = (*DEPENDENCY_POLICIES, *OPTION_POLICIES)
        assert {name for name, _ in report.not_applicable} >= set(skipped)
        assert {report.levels[name] for name in skipped} == {"disabled"}
        assert not [v for v in report.violations if v.policy in skipped]


def test_a_graph_without_recorded_options_gets_the_same_report() -> None:
    """`pulumi preview --json` and `stack export` graphs do not carry ignoreChanges."""
    graph = offline_run("prod-aws").graph
    report = same_report(ResourceGraph(graph.stack, [dataclasses.replace(r, ignore_changes=None)
                                                     for r in graph.resources]))
    assert report.levels["stateful-names-ignore-changes"] == "disabled"


CONFIGS: dict[str, dict[str, Any]] = {
    "all mandatory": {"all": "mandatory"},
    "all remediate": {"all": "remediate"},
    "all disabled but one": {"all": "disabled", "aws-resources-require-billing-tags": "advisory"},
    "knobs": {"aws-resources-require-billing-tags": {"requiredTags": ["team", "not-on-any-resource"]},
              "aws-eks-gpu-nodegroup-max-size-cap": {"enforcementLevel": "remediate", "maxNodes": 1},
              "aws-ec2-launch-template-requires-imdsv2": {"maxHopLimit": 1},
              "stateful-resources-protected-in-production": "disabled"},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_pack_configs_give_the_same_report(name: str) -> None:
    graph = MUTATIONS["aws: allow IMDSv1"][1](offline_run("prod-aws").graph)
    report = same_report(graph, normalize_config(CONFIGS[name], pack().policies))
    if name != "all disabled but one":
        assert report.violations


def test_a_remediate_level_reports_as_mandatory() -> None:
    config = normalize_config(CONFIGS["knobs"], pack().policies)
    report = same_report(offline_run("prod-aws").graph, config)
    capped = [v for v in report.violations if v.policy == "aws-eks-gpu-nodegroup-max-size-cap"]
    assert capped and {v.enforcement for v in capped} == {"mandatory"}
    assert any(v.policy == "aws-resources-require-billing-tags" for v in report.violations)


POLICY_NAMES = sorted(p.name for p in load_pack().policies)


@given(data=st.data())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_arbitrary_inputs_get_the_same_report(data: st.DataObject) -> None:
    """Wrongly typed, missing and added inputs (numbers of every kind, nested lists, unicode keys, unknowns) on one
    resource of prod-aws, under one policy, give the same findings whichever engine runs it."""
    graph = offline_run("prod-aws").graph
    policy = data.draw(st.sampled_from(POLICY_NAMES))
    target = data.draw(st.sampled_from([r for r in graph.resources if not r.is_component]))
    inputs = data.draw(mutated_inputs(target.inputs))
    if data.draw(st.booleans()) and inputs:
        inputs[data.draw(st.sampled_from(sorted(inputs)))] = UNKNOWN
    changed = [dataclasses.replace(r, inputs=inputs) if r.urn == target.urn else r for r in graph.resources]
    levels = {p.name: "disabled" for p in pack().policies} | {policy: "advisory"}
    same_report(ResourceGraph(graph.stack, changed), normalize_config(levels, pack().policies))


# --- the engines' contract, with a probe pack --------------------------------------------------------------------


def describe(value: Any) -> Any:
    """A value as a policy can see it: each type, each number's exact type and value, an unknown's error message
    (keys sorted: the analyzer's come in protobuf's map order, the direct engine's in the graph's)."""
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return type(value).__name__, value
    if isinstance(value, Mapping):
        out = []
        for key in sorted(value):
            try:
                out.append((key, describe(value[key])))
            except UnknownValueError as err:
                out.append((key, ("unknown", err.message, err.props)))
        return type(value).__name__, len(value), out
    if isinstance(value, Sequence):
        items = []
        for i in range(len(value)):
            try:
                items.append(describe(value[i]))
            except UnknownValueError as err:
                items.append(("unknown", err.message, err.props))
        return type(value).__name__, items
    return type(value).__name__, describe(vars(value))  # an asset or archive


def describe_resource(args: ResourceValidationArgs) -> Any:
    opts = args.opts
    provider = args.provider
    return ("resource", args.resource_type, args.urn, args.name, describe(args.props),
            (opts.protect, list(opts.ignore_changes), opts.delete_before_replace, list(opts.aliases),
             vars(opts.custom_timeouts), list(opts.additional_secret_outputs), opts.parent),
            provider and (provider.resource_type, provider.urn, provider.name, describe(provider.props)),
            describe(args.get_config()), type(args.stack_tags).__name__, dict(args.stack_tags))


def describe_stack(args: StackValidationArgs) -> Any:
    return ("stack", describe(args.get_config()), type(args.stack_tags).__name__, dict(args.stack_tags), [
        (r.resource_type, r.urn, r.name, describe(r.props), r.opts.protect, list(r.opts.ignore_changes), r.opts.parent,
         r.provider and r.provider.urn, r.parent and r.parent.urn, [d.urn for d in r.dependencies],
         r.property_dependencies) for r in args.resources])


P = "urn:pulumi:probe::gpu-cluster::"
SIG = "4dabf18193072939515e22adb298388d"
SECRET = {SIG: "1b47061264138c4ac30d75fd1eb44270", "value": {"password": 42, "list": [1, 2.5]}}
ASSET = {SIG: "c44067f5952c0a294b673a41bacd8c17", "path": "./chart.tgz"}
TEXT_ASSET = {SIG: "c44067f5952c0a294b673a41bacd8c17", "text": "hello"}
ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7"
ARCHIVE = {SIG: ARCHIVE_SIG, "assets": {"a": ASSET, "b": {SIG: ARCHIVE_SIG, "path": "./dir"}}}
PROVIDER = GraphResource(f"{P}pulumi:providers:aws::aws", "pulumi:providers:aws", "aws",
                         inputs={"region": "us-east-1", "maxRetries": 3, "defaultTags": '{"tags":{"team":"a"}}',
                                 "nested": {"n": 1, "unknown": UNKNOWN}})
COMPONENT = GraphResource(f"{P}gpu-cluster:probe:Probe::probe", "gpu-cluster:probe:Probe", "probe")
INPUTS: dict[str, Any] = {
    "zeta": 1, "alpha": 2**60, "float": 1.5, "whole": 2.0, "negative": -7, "flag": True, "none": None, "text": "ü",
    "list": [1, "two", [3, {"four": 4}], None, False, UNKNOWN], "empty": {}, "emptyList": [],
    "nested": {"b": {"c": [{"d": UNKNOWN}]}, "a": 0}, "unknown": UNKNOWN, "secret": SECRET, "asset": ASSET,
    "textAsset": TEXT_ASSET, "archive": ARCHIVE, "__target": "a key the proxies treat specially", "ключ": "é",
}
RESOURCES = [
    GraphResource(f"{P}pulumi:pulumi:Stack::probe-stack", "pulumi:pulumi:Stack", "probe-stack"),
    PROVIDER, COMPONENT,
    GraphResource(f"{P}gpu-cluster:probe:Probe$aws:s3/bucket:Bucket::one", "aws:s3/bucket:Bucket", "one",
                  parent=COMPONENT.urn, provider=f"{PROVIDER.urn}::04da6b54-id", inputs=INPUTS, protect=True,
                  dependencies=[COMPONENT.urn, f"{P}aws:ec2/vpc:Vpc::not-in-the-graph"], ignore_changes=["bucket"]),
    GraphResource(f"{P}aws:s3/bucket:Bucket::two", "aws:s3/bucket:Bucket", "two",
                  provider=f"{P}pulumi:providers:aws::elsewhere::id", inputs={"n": 3, "skip": "yes"},
                  dependencies=[f"{P}gpu-cluster:probe:Probe$aws:s3/bucket:Bucket::one"]),
    GraphResource(f"{P}aws:s3/bucket:Bucket::three", "aws:s3/bucket:Bucket", "three", inputs={"async": True},
                  ignore_changes=None),
]
KNOBS = PolicyConfigSchema({"limit": {"type": "integer"}, "names": {"type": "array"}, "table": {"type": "object"}})


def probe_pack(seen: list[Any]) -> Pack:
    """A pack whose policies record everything they are handed and exercise the analyzer's contract: violations with
    and without a URN or a message, not-applicable, an unknown input escaping, an awaitable, a remediation-only
    policy, every severity, a remediate level, a disabled policy."""
    def record(args: ResourceValidationArgs, report: ReportViolation) -> None:
        seen.append(describe_resource(args))
        report(f"one finding on {args.name}", None)
        report("", None)
        report("blamed elsewhere", f"{P}aws:s3/bucket:Bucket::two")
        if args.props.get("skip"):
            args.not_applicable("skipped because the input says so")

    def unknowing(args: ResourceValidationArgs, report: ReportViolation) -> None:
        report(f"saw {args.props.get('unknown')}", None)  # raises on the unknown input

    async def later(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if "async" in args.props:
            report("reported from a coroutine", None)

    def stack(args: StackValidationArgs, report: ReportViolation) -> None:
        seen.append(describe_stack(args))
        report("on the stack", None)
        report("on one resource", f"{P}aws:s3/bucket:Bucket::three")
        report("on a resource not in the graph", f"{P}aws:s3/bucket:Bucket::nowhere")

    def stack_unknowing(args: StackValidationArgs, report: ReportViolation) -> None:
        for r in args.resources:
            if r.name == "one":
                report(str(r.props["nested"]["b"]["c"][0]["d"]), r.urn)

    def never(args: ResourceValidationArgs | StackValidationArgs, report: ReportViolation) -> None:
        raise AssertionError("a disabled policy ran")

    policies = [
        ResourceValidationPolicy("probe-record", "Records what it sees.", validate=record, config_schema=KNOBS,
                                 enforcement_level=EnforcementLevel.MANDATORY, severity=Severity.HIGH),
        ResourceValidationPolicy("probe-unknown", "Reads an unknown input.", validate=unknowing,
                                 severity=Severity.LOW),
        ResourceValidationPolicy("probe-async", "Validates in a coroutine.", validate=later,
                                 severity=Severity.CRITICAL),
        ResourceValidationPolicy("probe-remediate-only", "Only remediates.", remediate=lambda args: None),
        ResourceValidationPolicy("probe-disabled", "Never runs.", validate=never,
                                 enforcement_level=EnforcementLevel.DISABLED),
        StackValidationPolicy("probe-stack", "Records the stack.", validate=stack, config_schema=KNOBS,
                              severity=Severity.MEDIUM),
        StackValidationPolicy("probe-stack-unknown", "Reads an unknown input of the stack.", validate=stack_unknowing,
                              enforcement_level=EnforcementLevel.MANDATORY),
        StackValidationPolicy("probe-stack-disabled", "Never runs.", validate=never,
                              enforcement_level=EnforcementLevel.DISABLED),
    ]
    real = pack()
    return Pack("probe-pack", policies, [], real.decode, real.absent)


PROBE_CONFIG: LevelConfig = {
    "probe-record": (LEVELS["remediate"], {"limit": 3, "names": ["a", 2], "table": {"x": 1.0, "y": [4]}}),
    "probe-stack": (LEVELS["advisory"], {"limit": 2**60}),
    "probe-disabled": (LEVELS["disabled"], {}),
    "probe-stack-disabled": (LEVELS["disabled"], {}),
    "probe-remediate-only": (LEVELS["remediate"], {}),
}


def probe(engine: str, graph: ResourceGraph, config: LevelConfig | None) -> tuple[PolicyReport, list[Any]]:
    seen: list[Any] = []
    report = run_policies(graph, config, probe_pack(seen), engine=engine)
    return report, seen


@pytest.mark.parametrize("config", [PROBE_CONFIG, None], ids=["configured", "pack levels"])
def test_the_probe_pack_is_handed_the_same_arguments_and_gets_the_same_report(config: LevelConfig | None) -> None:
    graph = ResourceGraph("probe", list(RESOURCES))
    direct, direct_seen = probe("direct", graph, config)
    analyzer, analyzer_seen = probe("analyzer", graph, config)
    assert direct_seen == analyzer_seen
    assert direct == analyzer
    assert render_json(direct) == render_json(analyzer)
    # the probe saw what the contract says, so the comparison is not of two empty lists
    assert len(direct_seen) == 4  # three bucket resources, one stack pass
    props = dict(direct_seen[0][4][2])
    assert props["unknown"] == ("unknown", "string value at .unknown can't be known during preview", ["unknown"])
    assert ("probe-remediate-only", "Policy does not implement validate") in direct.not_applicable
    assert ("probe-record", "skipped because the input says so") in direct.not_applicable
    assert {v.policy for v in direct.violations} >= {"probe-record", "probe-unknown", "probe-async", "probe-stack",
                                                     "probe-stack-unknown"}
    (cant_run,) = [v for v in direct.violations if v.policy == "probe-unknown" and v.message.startswith("can't")]
    assert cant_run.message == ("can't run policy 'probe-unknown' from policy pack 'probe-pack@v0.1.0' during "
                                "preview: string value at .unknown can't be known during preview")
    assert (cant_run.enforcement, cant_run.severity, cant_run.urn) == ("advisory", "unspecified", RESOURCES[3].urn)
    record = {v.enforcement for v in direct.violations if v.policy == "probe-record"}
    assert record == {"mandatory"}  # remediate (configured) or mandatory (the policy's own): mandatory either way


def test_the_probe_is_handed_doubles_decoded_secrets_assets_and_archives() -> None:
    """What the analyzer's protobuf round trip makes of the inputs, which the direct engine must make too."""
    _, seen = probe("direct", ResourceGraph("probe", list(RESOURCES)), PROBE_CONFIG)
    props = dict(seen[0][4][2])
    assert props["zeta"] == ("float", 1.0) and props["alpha"] == ("float", float(2**60))
    assert props["flag"] == ("bool", True) and props["none"] == ("NoneType", None)
    assert props["secret"][0] == "_DictProxy" and dict(props["secret"][2])["password"] == ("float", 42.0)
    assert props["asset"] == ("FileAsset", ("dict", 1, [("path", ("str", "./chart.tgz"))]))
    assert props["archive"][0] == "AssetArchive"
    config = dict(seen[0][7][2])
    assert config["limit"] == ("float", 3.0)


def test_a_policy_that_breaks_report_violation_fails_the_same_way() -> None:
    def bad(args: ResourceValidationArgs, report: ReportViolation) -> None:
        report(42, None)  # type: ignore[arg-type]

    policy = ResourceValidationPolicy("probe-bad", "Reports a number.", validate=bad)
    the_pack = Pack("probe-pack", [policy], [], pack().decode, pack().absent)
    graph = ResourceGraph("probe", list(RESOURCES))
    errors = []
    for engine in ("direct", "analyzer"):
        with pytest.raises(TypeError) as err:
            run_policies(graph, None, the_pack, engine=engine)
        errors.append(str(err.value))
    assert errors[0] == errors[1] == "Expected message to be a string"


# --- selecting an engine -----------------------------------------------------------------------------------------


def test_the_level_numbers_are_the_analyzers() -> None:
    from pulumi.runtime.proto import analyzer_pb2 as proto

    assert LEVELS == {"advisory": proto.ADVISORY, "mandatory": proto.MANDATORY, "remediate": proto.REMEDIATE,
                      "disabled": proto.DISABLED}


def spy_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which engine module runs (each one's entry point wrapped to record its name)."""
    from blueprint.policy import analyzer, direct

    ran: list[str] = []

    def wrap(name: str, function: Callable[..., None]) -> Callable[..., None]:
        def call(*args: Any) -> None:
            ran.append(name)
            function(*args)
        return call
    monkeypatch.setattr(analyzer, "analyze", wrap("analyzer", analyzer.analyze))
    monkeypatch.setattr(direct, "run_direct", wrap("direct", direct.run_direct))
    return ran


def test_the_direct_engine_is_the_default_and_the_analyzer_is_selectable(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = spy_on(monkeypatch)
    graph = ResourceGraph("probe", list(RESOURCES))
    run_policies(graph, None, probe_pack([]))
    monkeypatch.setenv(ENGINE_ENV, "analyzer")
    run_policies(graph, None, probe_pack([]))
    run_policies(graph, None, probe_pack([]), engine="direct")  # the argument wins over the variable
    assert ran == ["direct", "analyzer", "direct"]
    monkeypatch.setenv(ENGINE_ENV, "grpc")
    with pytest.raises(PolicyConfigError, match="BLUEPRINT_POLICY_ENGINE='grpc'"):
        run_policies(graph, None, probe_pack([]))
