"""``blueprint audit``'s ``alert-secrets`` check: every Secret key the stack's AlertmanagerConfigs reference exists in
the cluster and is not empty.

The AlertmanagerConfigs are built from the spec by the program's own function
(:func:`components.kubernetes.objects.alertmanager_configs`), so the audit asks for exactly what ``pulumi up``
deploys. A missing Secret or key makes the Prometheus operator reject each object that reads it (prometheus-operator
v0.88.1 pkg/alertmanager/operator.go ``checkReceivers`` -> ``store.GetSecretKey``), which silences those receivers
with nothing but a Kubernetes event to say so; an empty value is refused the same way or sent as an empty credential.
Each finding names the receivers it silences, what they receive, and the ``kubectl`` that fixes it.

The cluster is read through :mod:`blueprint.acceptance.kube`; when it cannot be (no kubeconfig, no context for the
cluster, credentials or RBAC refused, no answer), the check is cannot-check, skipped with the reason: not a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from blueprint.acceptance.checks import Check
from blueprint.acceptance.kube import ClusterAccessError, SecretReader
from components.kubernetes.objects import (
    RECEIVES_ANNOTATION,
    SecretRef,
    alertmanager_configs,
    budget_addresses,
    secret_refs,
)
from components.spec import ClusterSpec

CHECK = "alert-secrets"
# What the value of each notifier's credential is, for the fix's placeholder.
VALUE = {"slackConfigs": "<Slack incoming-webhook URL>", "pagerdutyConfigs": "<PagerDuty Events v2 routing key>",
         "emailConfigs": "<SMTP password>", "webhookConfigs": "<webhook URL>"}


@dataclass
class _Needed:
    """One Secret key and the receivers (with what they receive) and objects that read it."""

    ref: SecretRef
    receivers: dict[str, str] = field(default_factory=dict)
    configs: list[str] = field(default_factory=list)


def needed_secrets(spec: ClusterSpec) -> list[_Needed]:
    """The Secret keys the stack's AlertmanagerConfigs read, each with its readers, in a stable order."""
    alerts = spec.platform.monitoring.alerts
    configs = alertmanager_configs(alerts, budget_addresses(spec.teams, spec.billing.notify))
    out: dict[tuple[str, str, str], _Needed] = {}
    for config in configs:
        receives = str((config["metadata"].get("annotations") or {}).get(RECEIVES_ANNOTATION, ""))
        for ref in secret_refs(config):
            need = out.setdefault((ref.namespace, ref.secret, ref.key), _Needed(ref))
            need.receivers[ref.receiver] = receives
            if config["metadata"]["name"] not in need.configs:
                need.configs.append(config["metadata"]["name"])
    return [out[k] for k in sorted(out)]


def _silenced(need: _Needed) -> str:
    receivers = "; ".join(f"{name} ({what})" for name, what in need.receivers.items())
    return (f"the operator rejects AlertmanagerConfig {', '.join(need.configs)}, so these receivers get nothing: "
            f"{receivers}")


def _check(need: _Needed, keys: dict[str, bool] | None) -> Check:
    ref = need.ref
    subject = f"{ref.namespace}/{ref.secret}:{ref.key}"
    value = VALUE.get(ref.notifier, "<value>")
    if keys is None:
        return Check(CHECK, subject, "fail", f"Secret {ref.secret} does not exist in {ref.namespace}: "
                     f"{_silenced(need)}. Fix: kubectl -n {ref.namespace} create secret generic {ref.secret} "
                     f"--from-literal={ref.key}='{value}'")
    if ref.key not in keys:
        return Check(CHECK, subject, "fail", f"Secret {ref.secret} has no key {ref.key} (its keys: "
                     f"{', '.join(sorted(keys)) or 'none'}): {_silenced(need)}. Fix: kubectl -n {ref.namespace} "
                     f"patch secret {ref.secret} --type merge -p '{{\"stringData\":{{\"{ref.key}\":\"{value}\"}}}}'")
    if keys[ref.key]:
        return Check(CHECK, subject, "fail", f"key {ref.key} of Secret {ref.secret} is empty: {_silenced(need)}. "
                     f"Fix: kubectl -n {ref.namespace} patch secret {ref.secret} --type merge -p "
                     f"'{{\"stringData\":{{\"{ref.key}\":\"{value}\"}}}}'")
    return Check(CHECK, subject, "pass", f"present, read by {', '.join(need.receivers)}")


def alert_secret_checks(spec: ClusterSpec, reader: Callable[[], SecretReader]) -> list[Check]:
    """One check per Secret key the stack's alert routing reads; ``reader()`` opens the cluster (it may raise
    :class:`ClusterAccessError`). After the first access error the rest are cannot-check for the same reason."""
    needed = needed_secrets(spec)
    if not needed:
        return []
    try:
        read = reader()
    except ClusterAccessError as err:
        namespaces = ", ".join(sorted({n.ref.namespace for n in needed}))
        return [Check(CHECK, namespaces, "cannot-check", f"skipped, the cluster was not read: {err} ({len(needed)} "
                      "Secret key(s) of the alert receivers unchecked)")]
    out: list[Check] = []
    cache: dict[tuple[str, str], dict[str, bool] | None] = {}
    problem: str | None = None
    for need in needed:
        subject = f"{need.ref.namespace}/{need.ref.secret}:{need.ref.key}"
        if problem is not None:
            out.append(Check(CHECK, subject, "cannot-check", f"skipped: {problem}"))
            continue
        where = (need.ref.namespace, need.ref.secret)
        try:
            if where not in cache:
                cache[where] = read(*where)
        except ClusterAccessError as err:
            problem = str(err)
            out.append(Check(CHECK, subject, "cannot-check", f"skipped: {problem}"))
            continue
        out.append(_check(need, cache[where]))
    return out
