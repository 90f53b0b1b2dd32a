"""Alert routing: one AlertmanagerConfig per receiver, so that a receiver whose Secret is missing loses its own
alerts and nobody else's.

Why one per receiver. The Prometheus operator checks each selected AlertmanagerConfig on its own and, when any
Secret key it references cannot be read, rejects that whole object (a warning event and log line, "skipping
alertmanagerconfig") while the other objects still make Alertmanager's configuration: prometheus-operator v0.88.1
(commit 6ff3de59) pkg/alertmanager/operator.go, ``selectAlertmanagerConfigs`` (calls
``checkAlertmanagerConfigResource`` per object and ``continue``s past a rejected one), ``checkReceivers`` ->
``checkPagerDutyConfigs`` / ``checkSlackConfigs`` / ``checkEmailConfigs`` / ``checkWebhookConfigs`` ->
``store.GetSecretKey``, which fails on a missing Secret or key. With every receiver in one object, a missing SMTP
password silenced the pager as well; here it silences the mail receivers that read it.

How the objects combine (same version, pkg/alertmanager/amcfg.go ``AddAlertmanagerConfigs``, ``convertRoute``,
``makeNamespacedString``, ``continueToNextRoute``): each object's route becomes a child of Alertmanager's root
route, ahead of the chart's own routes, with ``continue: true`` forced on it, so an alert is offered to every
object in turn; receiver names are prefixed ``<namespace>/<object>/``, so each object has its own silent ``none``.
Inside an object, Alertmanager's routing tree applies (Alertmanager v0.30.1, the chart's, dispatch/route.go
``Route.Match``: the first matching child without ``continue`` takes the alert; a route none of whose children
match takes it itself). So each object's top route matches everything and sends what its children do not take to
``none``, except the default receiver's, whose top route is the catch-all.

What each receiver gets:

- a route's receiver: the alerts its routes match (severity, team as namespace or ClusterQueue), once each;
- the default receiver: every critical alert (also when a route sends it elsewhere: a pager whose Secret is missing
  does not silence critical alerts), and what no other route takes; a route's non-critical alerts are not copied to
  it (the team's channel has them; the default channel would only be noise), which is why ``blueprint audit``
  reads every Secret these objects name;
- ``budget-<team>`` (teams[].budget.notify, mailed through the first email receiver's server and credential): that
  team's TeamSpendOverBudget, once a day, and no other receiver gets it;
- kube-prometheus-stack's Watchdog and InfoInhibitor reach nobody here (the chart's own route sends them to its null
  receiver).

A receiver no route or default names gets no object (its Secret is not needed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from components.kubernetes.objects.common import MONITORING_NAMESPACE, Manifest, meta
from components.spec.platform import AlertReceiverSpec, AlertRouteSpec, AlertsSpec

ALERTING_LABEL = "gpu-cluster/alerting"  # the chart's Alertmanager selects AlertmanagerConfigs by it
ALERTING_CONFIG = "gpu-cluster-alerts"  # each object is gpu-cluster-alerts-<receiver>
RECEIVER_LABEL = "gpu-cluster/receiver"
RECEIVES_ANNOTATION = "gpu-cluster/receives"  # what the receiver gets, in words (the preview and audit say it)
SILENT_RECEIVER = "none"
BUDGET_ALERT = "TeamSpendOverBudget"
PLUMBING = "Watchdog|InfoInhibitor"
CRITICAL = "critical"
Matcher = dict[str, str]  # one AlertmanagerConfig matcher: name, matchType, value


def alert_config_name(receiver: str) -> str:
    """The AlertmanagerConfig of one receiver."""
    return f"{ALERTING_CONFIG}-{receiver}"


def _matcher(name: str, value: str, match_type: str = "=") -> Matcher:
    return {"name": name, "matchType": match_type, "value": value}


def _receiver(r: AlertReceiverSpec) -> Manifest:
    """An AlertmanagerConfig receiver (monitoring.coreos.com/v1alpha1) whose credential is a Secret key reference."""
    ref = {"name": r.secret, "key": r.key}
    if r.type == "slack":
        return {"name": r.name, "slackConfigs": [{"apiURL": ref, "sendResolved": True,
                                                  **({"channel": r.channel} if r.channel else {})}]}
    if r.type == "pagerduty":
        return {"name": r.name, "pagerdutyConfigs": [{"routingKey": ref, "sendResolved": True}]}
    if r.type == "email":
        return {"name": r.name, "emailConfigs": [{"to": ", ".join(r.to), "from": r.sender, "smarthost": r.smarthost,
                                                  **({"authUsername": r.username} if r.username else {}),
                                                  "authPassword": ref, "sendResolved": True}]}
    return {"name": r.name, "webhookConfigs": [{"urlSecret": ref, "sendResolved": True}]}


def route_matchers(route: AlertRouteSpec) -> list[list[Matcher]]:
    """The matcher lists of one route of the spec, any of which sends an alert to its receiver: its severities, and
    per team the alert's namespace, or its ClusterQueue when it carries no namespace (both are the team's name), so
    that an alert with both labels matches once."""
    severity = [_matcher("severity", "|".join(route.severity), "=~")] if route.severity else []
    if not route.teams:
        return [severity]
    out = []
    for team in route.teams:
        out.append([*severity, _matcher("namespace", team)])
        out.append([*severity, _matcher("namespace", ""), _matcher("cluster_queue", team)])
    return out


def budget_receivers(alerts: AlertsSpec, budget_notify: Mapping[str, Sequence[str]] | None
                     ) -> list[tuple[str, AlertReceiverSpec]]:
    """(team, receiver) of each team whose budget addresses get its spend alert: the first email receiver, renamed
    budget-<team> and addressed to them. Without an email receiver there is none (the preview warns:
    components/spec/notes.py budget_notes)."""
    mail = next((r for r in alerts.receivers if r.type == "email"), None)
    if mail is None:
        return []
    return [(team, mail.model_copy(update={"name": f"budget-{team}", "to": list(dict.fromkeys(to))}))
            for team, to in sorted((budget_notify or {}).items()) if to]


def budget_addresses(teams: Sequence[Any], platform_notify: Sequence[str]) -> dict[str, list[str]]:
    """Each budgeted team's addresses (``teams[].budget.notify``) and the platform's (``billing.notify``): the people a
    cloud budget of the team would mail."""
    return {t.name: [*t.budget.notify, *platform_notify] for t in teams if t.budget is not None}


def _describe(routes: Sequence[AlertRouteSpec], default: bool) -> str:
    parts = []
    for route in routes:
        what = f"{' and '.join(route.severity)} alerts" if route.severity else "every alert"
        parts.append(f"{what} of team{'s' if len(route.teams) > 1 else ''} {', '.join(route.teams)}" if route.teams
                     else what)
    if default:
        parts.append("every critical alert and what no other route takes (default)")
    return "; ".join(parts)


def _config(receiver: Manifest, children: list[Manifest], root: str, receives: str) -> Manifest:
    name = str(receiver["name"])
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1", "kind": "AlertmanagerConfig",
        "metadata": {**meta(alert_config_name(name), MONITORING_NAMESPACE,
                            {ALERTING_LABEL: "true", RECEIVER_LABEL: name}),
                     "annotations": {RECEIVES_ANNOTATION: receives}},
        "spec": {"route": {"receiver": root, "groupBy": ["alertname", "cluster_queue", "namespace"],
                           "groupWait": "30s", "groupInterval": "5m", "repeatInterval": "4h", "routes": children},
                 "receivers": [receiver, {"name": SILENT_RECEIVER}]},  # none: no notifier, sends nothing
    }


def _to(receiver: str, matchers: list[Matcher], **extra: str) -> Manifest:
    return {"receiver": receiver, "continue": False, **extra, "matchers": matchers}


def alertmanager_configs(alerts: AlertsSpec, budget_notify: Mapping[str, Sequence[str]] | None = None
                         ) -> list[Manifest]:
    """The stack's alert routing: one AlertmanagerConfig per receiver in the monitoring namespace (see the module's
    docstring for what each receiver gets and why), selected by the chart's Alertmanager through ALERTING_LABEL."""
    budgets = budget_receivers(alerts, budget_notify)
    budget_matchers = {team: [_matcher("alertname", BUDGET_ALERT), _matcher("team", team)] for team, _ in budgets}
    # Stopped in every object: the chart's plumbing, and each spend alert that its budget receiver takes.
    stops = [_to(SILENT_RECEIVER, [_matcher("alertname", PLUMBING, "=~")]),
             *(_to(SILENT_RECEIVER, m) for m in budget_matchers.values())]
    routed = [(route.receiver, m) for route in alerts.routes for m in route_matchers(route)]
    configs = []
    for r in alerts.receivers:
        own = [route for route in alerts.routes if route.receiver == r.name]
        default = r.name == alerts.default_receiver
        if not own and not default:
            continue
        children = list(stops)
        if default:
            children.append(_to(r.name, [_matcher("severity", CRITICAL)]))
        children += [_to(r.name, m) for name, m in routed if name == r.name]
        if default:  # what another receiver's route takes is its own (critical alerts came here first)
            children += [_to(SILENT_RECEIVER, m) for name, m in routed if name != r.name]
        configs.append(_config(_receiver(r), children, r.name if default else SILENT_RECEIVER,
                               _describe(own, default)))
    for team, mail in budgets:
        children = [stops[0], _to(mail.name, budget_matchers[team], repeatInterval="24h")]
        configs.append(_config(_receiver(mail), children, SILENT_RECEIVER, f"{BUDGET_ALERT} of team {team}, once "
                               f"a day, to {', '.join(mail.to)}"))
    return configs


class SecretRef(NamedTuple):
    """One Secret key an AlertmanagerConfig's receiver reads: where, and for which receiver and notifier (the
    receiver field: slackConfigs, pagerdutyConfigs, emailConfigs, webhookConfigs, ...)."""

    namespace: str
    secret: str
    key: str
    receiver: str
    notifier: str


def _selectors(value: Any) -> Iterator[tuple[str, str]]:
    """Every SecretKeySelector (a mapping of name and key, optionally ``optional``) under ``value``."""
    if isinstance(value, Mapping):
        if {"name", "key"} <= set(value) <= {"name", "key", "optional"} and all(
                isinstance(value[k], str) for k in ("name", "key")):
            yield str(value["name"]), str(value["key"])
            return
        for item in value.values():
            yield from _selectors(item)
    elif isinstance(value, list):
        for item in value:
            yield from _selectors(item)


def secret_refs(config: Mapping[str, Any]) -> list[SecretRef]:
    """Every Secret key an AlertmanagerConfig's receivers read; the operator reads each in the object's own namespace
    (the CRD: "The secret needs to be in the same namespace as the AlertmanagerConfig object")."""
    namespace = str((config.get("metadata") or {}).get("namespace", ""))
    out = []
    for receiver in (config.get("spec") or {}).get("receivers") or []:
        for notifier, value in receiver.items():
            if notifier != "name":
                out += [SecretRef(namespace, name, key, str(receiver.get("name")), notifier)
                        for name, key in _selectors(value)]
    return out
