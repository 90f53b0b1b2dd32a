"""``blueprint audit``'s ``alert-secrets`` check against a recorded Kubernetes API (tests/acceptance/kube_recorded.py):
every Secret key the alert receivers read is there, and each one missing, without its key or empty fails, naming the
receivers it silences and the fix; a cluster that cannot be read is cannot-check, never a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprint.acceptance.alert_secrets import alert_secret_checks
from blueprint.acceptance.checks import Check
from blueprint.acceptance.cloud import cloud_checks
from blueprint.acceptance.kube import KubeCluster, pick_context, secret_reader
from components.spec import ClusterSpec, parse_spec
from tests.acceptance.kube_recorded import RecordedKube, kubeconfig
from tests.conftest import raw_stack_config

EKS_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/prod-train"
GKE = "gke_acme-ml-prod_us-central1_prod-train-gke"
SECRETS = ["monitoring/alertmanager-pagerduty:routing-key", "monitoring/alertmanager-slack:webhook-url",
           "monitoring/alertmanager-smtp:password"]


def spec_of(name: str) -> ClusterSpec:
    return parse_spec(raw_stack_config(name)["gpu-cluster:spec"], f"stacks/Pulumi.{name}.yaml")


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> RecordedKube:
    """The recorded API, and a kubeconfig with prod-aws's cluster (as aws eks update-kubeconfig writes it) beside
    another cluster's context, which is current."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config", {
        "arn:aws:eks:us-east-1:123456789012:cluster/dev-gpu": "arn:aws:eks:us-east-1:123456789012:cluster/dev-gpu",
        EKS_ARN: EKS_ARN, GKE: GKE})))
    return RecordedKube().install(monkeypatch)


def audit(name: str = "prod-aws", context: str | None = None) -> list[Check]:
    spec = spec_of(name)
    cluster = cloud_checks(spec.cloud).kube_cluster(spec)
    return alert_secret_checks(spec, lambda: secret_reader(cluster, context))


def test_every_alert_secret_present(kube: RecordedKube) -> None:
    checks = audit()
    assert checks == [
        Check("alert-secrets", "monitoring/alertmanager-pagerduty:routing-key", "pass",
              "present, read by platform-pager"),
        Check("alert-secrets", "monitoring/alertmanager-slack:webhook-url", "pass", "present, read by platform-slack"),
        Check("alert-secrets", "monitoring/alertmanager-smtp:password", "pass",
              "present, read by research-leads, budget-applied, budget-pretraining, budget-research")]
    # read only, each Secret once, in the monitoring namespace
    assert sorted(kube.requests) == [("GET", f"/api/v1/namespaces/monitoring/secrets/{s}") for s in
                                     ("alertmanager-pagerduty", "alertmanager-slack", "alertmanager-smtp")]


def test_a_missing_secret_fails_naming_what_it_silences_and_the_fix(kube: RecordedKube) -> None:
    kube.drop("monitoring", "alertmanager-smtp")
    checks = audit()
    assert [c.status for c in checks] == ["pass", "pass", "fail"]
    assert checks[2] == Check(
        "alert-secrets", "monitoring/alertmanager-smtp:password", "fail",
        "Secret alertmanager-smtp does not exist in monitoring: the operator rejects AlertmanagerConfig "
        "gpu-cluster-alerts-research-leads, gpu-cluster-alerts-budget-applied, gpu-cluster-alerts-budget-pretraining, "
        "gpu-cluster-alerts-budget-research, so these receivers get nothing: research-leads (critical and warning "
        "alerts of team research); budget-applied (TeamSpendOverBudget of team applied, once a day, to "
        "applied-leads@example.com, ml-platform-oncall@example.com, finops@example.com); budget-pretraining "
        "(TeamSpendOverBudget of team pretraining, once a day, to pretraining-leads@example.com, "
        "ml-platform-oncall@example.com, finops@example.com); budget-research (TeamSpendOverBudget of team research, "
        "once a day, to research-leads@example.com, ml-platform-oncall@example.com, finops@example.com). Fix: "
        "kubectl -n monitoring create secret generic alertmanager-smtp --from-literal=password='<SMTP password>'")
    kube.drop("monitoring", "alertmanager-pagerduty")
    (pager, *_) = audit()
    assert pager.status == "fail" and "platform-pager (critical alerts)" in pager.detail
    assert pager.detail.endswith("kubectl -n monitoring create secret generic alertmanager-pagerduty "
                                 "--from-literal=routing-key='<PagerDuty Events v2 routing key>'")


def test_a_missing_or_empty_key_fails(kube: RecordedKube) -> None:
    kube.edit("monitoring", "alertmanager-slack", lambda s: s.update(data={"url": "aHR0cHM6Ly9leGFtcGxl"}))
    kube.edit("monitoring", "alertmanager-pagerduty", lambda s: s["data"].update({"routing-key": ""}))
    pager, slack, smtp = audit()
    assert slack.status == "fail" and slack.detail.startswith(
        "Secret alertmanager-slack has no key webhook-url (its keys: url): the operator rejects AlertmanagerConfig "
        "gpu-cluster-alerts-platform-slack, so these receivers get nothing: platform-slack (every critical alert and "
        "what no other route takes (default)).")
    assert slack.detail.endswith("Fix: kubectl -n monitoring patch secret alertmanager-slack --type merge -p "
                                 "'{\"stringData\":{\"webhook-url\":\"<Slack incoming-webhook URL>\"}}'")
    assert pager.status == "fail" and pager.detail.startswith("key routing-key of Secret alertmanager-pagerduty is "
                                                              "empty: ")
    assert smtp.status == "pass"
    assert "not-a-real" not in " ".join(c.detail for c in (pager, slack, smtp))  # values are never shown


def test_the_gke_cluster_is_found_by_the_context_gcloud_writes(kube: RecordedKube) -> None:
    checks = audit("prod-gcp")
    assert [c.status for c in checks] == ["pass"] * 3 and [c.subject for c in checks] == SECRETS


def test_no_kubeconfig_is_skipped_not_passed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    recorded = RecordedKube().install(monkeypatch)
    (check,) = audit()
    assert check.status == "cannot-check" and check.subject == "monitoring"
    assert check.detail == (
        f"skipped, the cluster was not read: no kubeconfig ({tmp_path / 'absent'}: Invalid kube-config file. No "
        "configuration found.); write one with `aws eks update-kubeconfig --region us-east-1 --name prod-train` "
        "(3 Secret key(s) of the alert receivers unchecked)")
    assert recorded.requests == []


def test_a_kubeconfig_without_the_cluster_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Another cluster's Secrets say nothing of this one: its current context is not used."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config", {"kind-dev": "kind-dev"})))
    recorded = RecordedKube().install(monkeypatch)
    (check,) = audit()
    assert check.status == "cannot-check" and "no context of the kubeconfig" in check.detail
    assert "cluster prod-train's (contexts: kind-dev); write one with `aws eks update-kubeconfig --region us-east-1 " \
           "--name prod-train`, or name one with --kube-context" in check.detail
    assert recorded.requests == []
    # Named, it is used.
    assert [c.status for c in audit(context="kind-dev")] == ["pass"] * 3
    (unknown,) = audit(context="nope")
    assert unknown.status == "cannot-check" and "--kube-context nope is not in the kubeconfig" in unknown.detail


def test_rbac_that_forbids_reading_secrets_is_cannot_check(kube: RecordedKube) -> None:
    kube.forbid("monitoring", "alertmanager-pagerduty")
    checks = audit()
    assert [c.status for c in checks] == ["cannot-check"] * 3
    assert checks[0].detail == (f"skipped: 403 Forbidden: context {EKS_ARN}'s user may not get Secrets in monitoring; "
                                "audit as a platform admin, or grant get on secrets in monitoring")
    assert len(kube.requests) == 1  # the rest are not tried


def test_an_api_server_that_does_not_answer_is_cannot_check(kube: RecordedKube) -> None:
    kube.unreachable()
    checks = audit()
    assert [c.status for c in checks] == ["cannot-check"] * 3
    assert "does not answer: MaxRetryError" in checks[0].detail


def test_a_stack_without_receivers_has_nothing_to_check(kube: RecordedKube) -> None:
    assert audit("dev-aws") == []
    assert kube.requests == []


def test_the_context_is_the_cluster_s_current_one_first() -> None:
    cluster = KubeCluster("prod-train", (r"arn:aws:eks:us-east-1:\d{12}:cluster/prod-train",), "aws eks ...")
    a = {"name": "a", "context": {"cluster": "arn:aws:eks:us-east-1:123456789012:cluster/prod-train"}}
    b = {"name": "b", "context": {"cluster": "arn:aws:eks:us-east-1:210987654321:cluster/prod-train"}}
    other = {"name": "arn:aws:eks:us-east-1:123456789012:cluster/prod-train-2", "context": {"cluster": "x"}}
    assert pick_context([a, b, other], b, cluster, None) == "b"
    assert pick_context([a, b, other], other, cluster, None) == "a"
    eksctl = cloud_checks("aws").kube_cluster(spec_of("prod-aws"))
    assert eksctl.matches({"name": "admin@prod-train.us-east-1.eksctl.io",
                           "context": {"cluster": "prod-train.us-east-1.eksctl.io"}})
    assert not eksctl.matches({"name": "admin@prod-train.us-west-2.eksctl.io", "context": {"cluster": "y"}})


def test_cli_audit_reports_the_alert_secrets(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                             kube: RecordedKube) -> None:
    from blueprint.cli import main
    from blueprint.clouds.gcp import api as gcp_api
    from tests.acceptance.gcp_recorded import recorded

    monkeypatch.setattr(gcp_api, "gcp_session", lambda project: recorded("acme-ml-prod", deployed=True))
    assert main(["audit", "prod-gcp"]) == 0
    out = capsys.readouterr().out
    assert "PASS          alert-secrets" in out and out.endswith("audit: 11 pass, 0 fail, 0 cannot-check\n")
    kube.drop("monitoring", "alertmanager-smtp")
    assert main(["audit", "prod-gcp"]) == 1
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("FAIL")]
    assert line.split()[:3] == ["FAIL", "alert-secrets", "monitoring/alertmanager-smtp:password:"]
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert main(["audit", "prod-gcp"]) == 0  # the cloud's checks pass; the cluster's were skipped, and say so
    assert capsys.readouterr().out.endswith("audit: 8 pass, 0 fail, 1 cannot-check\n")
    assert main(["audit", "prod-gcp", "--strict"]) == 4
