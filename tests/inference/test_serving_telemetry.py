"""A served model is watched at its objectives: its engine is scraped, its latencies are recorded and alerted on at
the objective's percentile and threshold, the alerts reach its team, the dashboard has a serving view, and the policy
inference-objective-alerted refuses an objective nobody is alerted on."""

from __future__ import annotations

import copy
import json
from typing import Any

import promql_parser
import pytest

from blueprint.graph.model import ResourceGraph
from blueprint.policy.mutations import edit
from components.kubernetes.objects.serving_telemetry import OBJECTIVE_TPOT, OBJECTIVE_TTFT
from tests.conftest import offline_run, stack
from tests.inference.test_serving_objects import STACKS, served
from tests.k8s_checks import validate_crd_object

RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"


def _rules(graph: ResourceGraph) -> list[dict[str, Any]]:
    (rule,) = [r.inputs for r in graph.of_type(RULE)]
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def _serving_alerts(graph: ResourceGraph, model: str) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in _rules(graph) if r.get("labels", {}).get("served_model") == model}


@pytest.mark.parametrize("name", STACKS)
def test_the_engine_is_scraped_on_its_serving_port_with_the_model_as_a_label(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    (monitor,) = [r.inputs for r in graph.of_type(POD_MONITOR) if r.name == f"serving-{model.name}-metrics"]
    validate_crd_object(copy.deepcopy(monitor))
    (deployment,) = [r.inputs for r in graph.of_type("kubernetes:apps/v1:Deployment")
                     if r.name == f"serving-{model.name}-deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert monitor["metadata"]["namespace"] == model.team == deployment["metadata"]["namespace"]
    assert all(pod_labels[k] == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = {p["name"]: p["containerPort"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    # The relabelling copies the pod's served-model label (Prometheus's pod meta label, sanitized) to served_model.
    (relabel,) = endpoint["relabelings"]
    assert relabel["sourceLabels"] == ["__meta_kubernetes_pod_label_gpu_cluster_served_model"]
    assert relabel["targetLabel"] == "served_model"


@pytest.mark.parametrize("name", STACKS)
def test_each_objective_has_an_alert_at_its_percentile_and_threshold(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    alerts = _serving_alerts(graph, model.name)
    q = model.objectives.percentile / 100
    for alert, metric, ms in (("ServedModelTtftOverObjective", "vllm:time_to_first_token_seconds_bucket",
                               model.objectives.ttft_ms),
                              ("ServedModelTpotOverObjective", "vllm:inter_token_latency_seconds_bucket",
                               model.objectives.tpot_ms)):
        rule = alerts[alert]
        parsed = promql_parser.parse(rule["expr"])
        assert isinstance(parsed, promql_parser.BinaryExpr) and str(parsed.op) == ">"
        assert parsed.rhs.val == pytest.approx(ms / 1000)  # type: ignore[attr-defined]
        assert f"histogram_quantile({q:g}," in rule["expr"] and metric in rule["expr"]
        assert f'served_model="{model.name}"' in rule["expr"] and f'namespace="{model.team}"' in rule["expr"]
        assert rule["labels"]["namespace"] == model.team and rule["labels"]["severity"] == "warning"
        assert rule["annotations"]["runbook_url"].endswith("#served-model-latency")
    assert {"ServedModelRequestsQueued", "ServedModelKvCacheFull", "ServedModelErrors", "ServedModelDown",
            "ServedModelReplicasUnavailable"} <= set(alerts)
    assert alerts["ServedModelDown"]["labels"]["severity"] == "critical"
    assert f"< {model.replicas.min}" in alerts["ServedModelReplicasUnavailable"]["expr"]
    for rule in _rules(graph):
        promql_parser.parse(rule["expr"])
    # The Deployment states what the alerts watch, for the policy.
    (deployment,) = [r.inputs for r in graph.of_type("kubernetes:apps/v1:Deployment")
                     if r.name == f"serving-{model.name}-deployment"]
    annotations = deployment["metadata"]["annotations"]
    assert float(annotations[OBJECTIVE_TTFT]) == pytest.approx(model.objectives.ttft_ms / 1000)
    assert float(annotations[OBJECTIVE_TPOT]) == pytest.approx(model.objectives.tpot_ms / 1000)
    assert "pulumi.com/timeoutSeconds" in annotations


def test_the_alerts_are_routed_by_the_team_that_owns_the_model() -> None:
    # As the pack's own name (tests/conftest.py puts policies/ on the path): importing it as policies.gpu_policies
    # would load every module twice and register each policy twice.
    from gpu_policies.guards import _receivers

    graph = offline_run("prod-aws").graph
    model = served("prod-aws")
    alerts = _serving_alerts(graph, model.name)
    configs = [r.inputs for r in graph.of_type("kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig")]

    def reached(alert: dict[str, Any], **labels: str) -> set[str]:
        offered = {**alert["labels"], "alertname": alert["alert"], **labels}
        return {r.rsplit("/", 1)[-1] for c in configs for r in _receivers(c["spec"]["route"], offered, None) or []
                if not r.endswith("none")}

    # prod-aws routes no team-specific warnings for applied: they go to the default receiver, critical ones also page.
    alerts_spec = stack("prod-aws").spec.platform.monitoring.alerts
    assert reached(alerts["ServedModelTtftOverObjective"]) == {alerts_spec.default_receiver}
    assert reached(alerts["ServedModelDown"]) == {alerts_spec.default_receiver, "platform-pager"}
    # The namespace label is the team's: the same alert of a model research owned reaches research's route.
    assert "research-leads" in reached(alerts["ServedModelTtftOverObjective"], namespace="research")


def test_the_jobs_dashboard_has_a_serving_view_on_recorded_series() -> None:
    graph = offline_run("prod-gcp").graph
    (cm,) = [r.inputs for r in graph.of_type("kubernetes:core/v1:ConfigMap")
             if r.inputs["metadata"]["name"] == "gpu-cluster-jobs-dashboard"]
    panels = json.loads(cm["data"]["gpu-cluster-jobs.json"])["panels"]
    rows = [p for p in panels if p["type"] == "row"]
    assert [r["title"] for r in rows] == ["Serving"]
    serving = [p for p in panels if p["gridPos"]["y"] > rows[0]["gridPos"]["y"]]
    recorded = {r["record"] for r in _rules(graph) if "record" in r}
    assert len(serving) == 6
    for panel in serving:
        expr = panel["targets"][0]["expr"]
        promql_parser.parse(expr)
        assert expr in recorded, panel["title"]
    assert len({p["id"] for p in panels}) == len(panels)


def test_a_stack_without_served_models_has_no_serving_rules_or_view() -> None:
    graph = offline_run("dev-aws").graph
    assert not graph.of_type(POD_MONITOR) or all("serving" not in r.name for r in graph.of_type(POD_MONITOR))
    assert not [r for r in _rules(graph) if "served_model" in str(r)]
    (cm,) = [r.inputs for r in graph.of_type("kubernetes:core/v1:ConfigMap")
             if r.inputs["metadata"]["name"] == "gpu-cluster-jobs-dashboard"]
    assert all(p["type"] != "row" for p in json.loads(cm["data"]["gpu-cluster-jobs.json"])["panels"])


def _verdict(graph: ResourceGraph) -> list[str]:
    from blueprint.policy.runner import run_policies

    report = run_policies(graph)
    return [v.message for v in report.violations if v.policy == "inference-objective-alerted"]


def _with_alert(expr_change: Any) -> ResourceGraph:
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            for rule in group["rules"]:
                if rule.get("labels", {}).get("objective") == "tpot":
                    expr_change(rule)
    return edit(offline_run("prod-aws").graph, RULE, "monitoring-rules", change)


def test_the_policy_passes_the_shipped_stacks_and_names_what_an_alert_gets_wrong() -> None:
    assert _verdict(offline_run("prod-aws").graph) == []
    assert _verdict(offline_run("prod-gcp").graph) == []
    q = served("prod-aws").objectives.percentile / 100
    median = _verdict(_with_alert(lambda r: r.update(expr=r["expr"].replace(f"histogram_quantile({q:g},",
                                                                           "histogram_quantile(0.5,"))))
    assert len(median) == 1 and "time per output token" in median[0] and f"does not take the {q:g} quantile" in \
        median[0]
    other = _verdict(_with_alert(lambda r: r["labels"].update(served_model="someone-else")))
    assert len(other) == 1 and "no alert watches:" in other[0]
    tighter = _verdict(_with_alert(lambda r: r.update(expr=r["expr"].rsplit(">", 1)[0] + "> 0.01")))
    assert tighter == []  # an alert that fires earlier than the objective still watches it


def test_the_preview_says_what_watches_each_objective(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", "prod-aws"]) == 0
    out = capsys.readouterr().out
    assert ("served model llama-3-1-8b-instruct (applied): p95 time to first token within 500 ms, per output token "
            "within 40 ms; 9 alerts watch it (ServedModel*), dashboard row 'Serving'; measure it: blueprint inference "
            "benchmark prod-aws") in out


def test_the_policy_refuses_hidden_objectives_and_a_scrape_without_the_model_label() -> None:
    graph = offline_run("prod-aws").graph
    model = served("prod-aws").name

    def strip(inputs: dict[str, Any]) -> None:
        for key in (OBJECTIVE_TTFT, OBJECTIVE_TPOT):
            inputs["metadata"]["annotations"].pop(key)

    hidden = _verdict(edit(graph, "kubernetes:apps/v1:Deployment", f"serving-{model}-deployment", strip))
    assert len(hidden) == 1 and "does not state its objectives" in hidden[0]
    unlabelled = _verdict(edit(graph, POD_MONITOR, f"serving-{model}-metrics",
                               lambda i: i["spec"]["podMetricsEndpoints"][0].pop("relabelings")))
    assert len(unlabelled) == 1 and "labels their series served_model" in unlabelled[0]


@pytest.mark.parametrize(("failover", "read_mbps", "expected"), [
    (30.0, 500.0, "takes 32 s to load a replica"),  # 16.06 GB at 500 MB/s, no engine start given
    (120.0, 500.0, None),
    (120.0, None, "its cold start is not known"),
])
def test_the_failover_objective_is_judged_by_the_computed_cold_start(
        prod_spec: dict[str, Any], failover: float, read_mbps: float | None, expected: str | None) -> None:
    from blueprint.policy.runner import run_policies
    from tests.conftest import run_spec

    model = prod_spec["inference"]["models"][0]
    model["objectives"]["failoverSeconds"] = failover
    if read_mbps is not None:
        model["weights"].update(readMBps=read_mbps, readSource="a test's figure")
    found = [v for v in run_policies(run_spec(prod_spec, "prod-aws").graph).violations
             if v.policy == "inference-failover-within-objective"]
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0].message and found[0].enforcement == "advisory"


def test_the_policy_pack_reads_the_names_the_program_writes() -> None:
    """The pack cannot import the program (it runs in Pulumi's policy host): its copies of the label, annotation and
    metric names must be the program's, or its policies would look for what no Deployment states."""
    from gpu_policies import inference as pack

    from components.kubernetes.objects import serving_telemetry as telemetry
    from components.kubernetes.objects.serving import MODEL_LABEL

    assert pack.MODEL_LABEL == MODEL_LABEL
    assert pack.PERCENTILE == telemetry.OBJECTIVE_PERCENTILE
    assert pack.FAILOVER == telemetry.OBJECTIVE_FAILOVER and pack.COLD_START == telemetry.COLD_START
    assert [(name, key, metric) for name, key, metric, _ in pack.OBJECTIVES] == [
        ("ttft", telemetry.OBJECTIVE_TTFT, telemetry.TTFT_METRIC), ("tpot", telemetry.OBJECTIVE_TPOT,
                                                                    telemetry.TPOT_METRIC)]
