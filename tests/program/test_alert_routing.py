"""Alert delivery that a missing Secret cannot silence wholesale (issue 33): one AlertmanagerConfig per receiver, each
alert routed as Alertmanager would route it through the objects the chart's Alertmanager selects
(tests/program/alert_routing.py models the operator and Alertmanager, with its sources)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.kubernetes.objects import secret_refs
from tests.conftest import offline_run
from tests.program.alert_routing import notified, selected

PROD = ["prod-aws", "prod-gcp", "prod-aws-slurm"]
SEVERITIES = ("critical", "warning", "info")
# An alert of a team's namespace, of a team's queue only, of another team, and of no team (a node, the fabric).
WHERE = ({"namespace": "research"}, {"cluster_queue": "research"}, {"namespace": "applied"}, {"node": "ip-10-40-0-1"})


def _routing(stack_name: str) -> tuple[list[dict[str, Any]], str]:
    """The AlertmanagerConfigs the stack's Alertmanager selects, and its matcher strategy (the chart's values)."""
    graph = offline_run(stack_name).graph
    configs = [r.inputs for r in graph.resources if r.type.endswith(":AlertmanagerConfig")]
    values = next(r.inputs["values"] for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["name"] == "kube-prometheus-stack")
    am = values["alertmanager"]["alertmanagerSpec"]
    picked = selected(configs, am)
    assert len(picked) == len(configs) >= 4, "every object the stack makes is selected"
    return picked, str((am.get("alertmanagerConfigMatcherStrategy") or {}).get("type", "OnNamespace"))


def _alerts() -> list[dict[str, str]]:
    return [{"alertname": "GpuXidError", "severity": s, **w} for s in SEVERITIES for w in WHERE]


@pytest.mark.parametrize("stack_name", PROD)
def test_every_severity_reaches_a_receiver_and_critical_also_the_default(stack_name: str) -> None:
    configs, strategy = _routing(stack_name)
    for labels in _alerts():
        got = notified(configs, labels, strategy)
        assert got, f"{labels} reaches no receiver"
        assert len(got) == len(set(got)), f"{labels} is sent twice to {got}"
        if labels["severity"] == "critical":
            assert {"platform-pager", "platform-slack"} <= set(got), labels  # the pager, and the default channel
    research_warning = {"alertname": "X", "severity": "warning", "namespace": "research"}
    assert notified(configs, research_warning, strategy) == ["research-leads"]  # not copied to the default channel
    assert notified(configs, {"alertname": "X", "severity": "info", "namespace": "research"}, strategy) == [
        "platform-slack"]
    assert notified(configs, {"alertname": "Watchdog", "severity": "none"}, strategy) == []


@pytest.mark.parametrize("stack_name", PROD)
def test_a_missing_secret_silences_only_the_receivers_that_read_it(stack_name: str) -> None:
    """The operator rejects an object whose Secret it cannot read: every other receiver still gets what it got."""
    configs, strategy = _routing(stack_name)
    readers: dict[tuple[str, str], set[str]] = {}
    for c in configs:
        for ref in secret_refs(c):
            readers.setdefault((ref.secret, ref.key), set()).add(c["metadata"]["name"])
    assert len(readers) == 3
    for (secret, _key), rejected in readers.items():
        lost = {r for c in configs if c["metadata"]["name"] in rejected
                for r in (x["name"] for x in c["spec"]["receivers"]) if r != "none"}
        for labels in _alerts():
            before = set(notified(configs, labels, strategy))
            after = set(notified(configs, labels, strategy, rejected=rejected))
            assert after == before - lost, (secret, labels, before, after)
            if labels["severity"] == "critical":
                assert after, f"without {secret}, a critical alert {labels} reaches nobody"
    # The pager's Secret missing: critical alerts still reach the default channel.
    pager = {"gpu-cluster-alerts-platform-pager"}
    assert notified(configs, {"alertname": "X", "severity": "critical"}, strategy, rejected=pager) == [
        "platform-slack"]


def test_one_object_for_every_receiver_would_lose_them_all() -> None:
    """The reason for the split: the old single object, rejected for a missing SMTP password, took the pager along."""
    configs, strategy = _routing("prod-aws")
    merged = copy.deepcopy(configs[0])
    merged["metadata"]["name"] = "gpu-cluster-alerts"
    merged["spec"]["receivers"] = [r for c in configs for r in c["spec"]["receivers"] if r["name"] != "none"] + [
        {"name": "none"}]
    smtp = [ref for ref in secret_refs(merged) if ref.secret == "alertmanager-smtp"]
    assert smtp
    assert notified([merged], {"alertname": "X", "severity": "critical"}, strategy, rejected={"gpu-cluster-alerts"}) \
        == []


def test_team_alerts_reach_the_routes_only_with_the_chart_s_strategy() -> None:
    """With the CRD's default strategy (OnNamespace) every object's route would match namespace=monitoring only, and
    no alert of a team namespace would reach a team route; the chart's values keep the objects of the monitoring
    namespace free of that matcher, and select no other namespace's."""
    configs, strategy = _routing("prod-aws")
    assert strategy == "OnNamespaceExceptForAlertmanagerNamespace"
    research = {"alertname": "X", "severity": "warning", "namespace": "research"}
    assert notified(configs, research, "OnNamespace") == []
    assert notified(configs, research, strategy) == ["research-leads"]
    stray = copy.deepcopy(configs[0])
    stray["metadata"]["namespace"] = "research"  # a team's own object would not be selected
    values = next(r.inputs["values"] for r in offline_run("prod-aws").graph.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["name"] == "kube-prometheus-stack")
    assert selected([stray], values["alertmanager"]["alertmanagerSpec"]) == []


def test_routes_alone_must_cover_every_severity_in_prod() -> None:
    from components.spec import SpecError, parse_spec
    from tests.conftest import raw_stack_config

    raw = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    raw["platform"]["monitoring"]["alerts"]["defaultReceiver"] = None
    with pytest.raises(SpecError) as info:
        parse_spec(raw, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
    assert str(info.value).splitlines() == [
        "stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.platform.monitoring.alerts.defaultReceiver: warning, info "
        "alerts of a team no route names, or of no team (nodes, fabric, storage), reach no receiver: set "
        "defaultReceiver, or add a route without teams for them [rule: prod-every-severity-routed]"]
    raw["platform"]["monitoring"]["alerts"]["routes"].append({"receiver": "platform-slack",
                                                              "severity": ["warning", "info"]})
    parse_spec(raw, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
