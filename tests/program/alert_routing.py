"""A model of how Alertmanager routes an alert through the AlertmanagerConfigs the prometheus-operator selects, so the
tests can ask "who gets this alert" of the objects the program builds.

Modelled on, and to be read beside:

- prometheus-operator v0.88.1 pkg/alertmanager/operator.go ``selectAlertmanagerConfigs`` (the namespace selector,
  then the label selector; an object whose Secret cannot be read is rejected whole: ``rejected`` below);
- the same version's pkg/alertmanager/amcfg.go ``AddAlertmanagerConfigs`` (objects sorted by namespace/name, each
  route a child of the root, ahead of the base configuration's routes), ``getEnforcer`` (None adds nothing,
  OnNamespace a ``namespace=<object's namespace>`` matcher on each object's top route, and
  OnNamespaceExceptForAlertmanagerNamespace the same except for objects in the Alertmanager's namespace),
  ``continueToNextRoute`` (``continue: true`` on each top route) and ``makeNamespacedString`` (receivers prefixed
  ``<namespace>/<object>/``);
- Alertmanager v0.30.1 dispatch/route.go ``Route.Match`` (children in order, stop at a match without continue, the
  route itself when no child matches) and pkg/labels (``=``, ``!=``, ``=~``, ``!~``; a missing label is ``""``;
  regular expressions anchored);
- kube-prometheus-stack 81.4.3 values.yaml alertmanager.config.route (root receiver ``null``, Watchdog to ``null``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NOTIFIERS = ("slackConfigs", "pagerdutyConfigs", "emailConfigs", "webhookConfigs")


def selected(configs: Iterable[Mapping[str, Any]], am_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The AlertmanagerConfigs the Alertmanager selects: its namespace selector (matchLabels on the namespace's
    ``kubernetes.io/metadata.name``; absent: its own namespace, monitoring; ``{}``: every namespace) and its label
    selector (matchLabels)."""
    ns_selector = am_spec.get("alertmanagerConfigNamespaceSelector")
    labels = (am_spec.get("alertmanagerConfigSelector") or {}).get("matchLabels") or {}
    out = []
    for c in configs:
        namespace = c["metadata"]["namespace"]
        if ns_selector is None:
            ns_ok = namespace == "monitoring"
        else:
            wanted = ns_selector.get("matchLabels") or {}
            ns_ok = all({"kubernetes.io/metadata.name": namespace}.get(k) == v for k, v in wanted.items())
        if ns_ok and all((c["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items()):
            out.append(c)
    return out


def _convert(route: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    receiver = route.get("receiver") or ""
    return {"receiver": f"{prefix}/{receiver}" if receiver else "", "continue": bool(route.get("continue")),
            "matchers": list(route.get("matchers") or []),
            "routes": [_convert(r, prefix) for r in route.get("routes") or []]}


def alertmanager_root(configs: Sequence[Mapping[str, Any]], strategy: str,
                      am_namespace: str = "monitoring") -> dict[str, Any]:
    """The root route the operator writes for these (selected, not rejected) objects."""
    subroutes = []
    for c in sorted(configs, key=lambda c: f"{c['metadata']['namespace']}/{c['metadata']['name']}"):
        namespace, name = c["metadata"]["namespace"], c["metadata"]["name"]
        top = _convert(c["spec"]["route"], f"{namespace}/{name}")
        if strategy == "OnNamespace" or (strategy == "OnNamespaceExceptForAlertmanagerNamespace"
                                         and namespace != am_namespace):
            top["matchers"].append({"name": "namespace", "matchType": "=", "value": namespace})
        top["continue"] = True
        subroutes.append(top)
    return {"receiver": "null", "continue": False, "matchers": [], "routes": [
        *subroutes,
        {"receiver": "null", "continue": False, "routes": [],
         "matchers": [{"name": "alertname", "matchType": "=", "value": "Watchdog"}]}]}


def _matches(matchers: Sequence[Mapping[str, str]], labels: Mapping[str, str]) -> bool:
    for m in matchers:
        value, kind = labels.get(m["name"], ""), m["matchType"]
        equal = value == m["value"] if kind in ("=", "!=") else re.fullmatch(m["value"], value) is not None
        if equal != (kind in ("=", "=~")):
            return False
    return True


def _match(route: Mapping[str, Any], labels: Mapping[str, str], inherited: str) -> list[str]:
    """Alertmanager's Route.Match: the receivers of the routes the alert ends in."""
    if not _matches(route["matchers"], labels):
        return []
    receiver = route["receiver"] or inherited
    found: list[str] = []
    for child in route["routes"]:
        got = _match(child, labels, receiver)
        found += got
        if got and not child["continue"]:
            break
    return found or [receiver]


def notified(configs: Sequence[Mapping[str, Any]], labels: Mapping[str, str], strategy: str,
             rejected: Iterable[str] = ()) -> list[str]:
    """The receivers that notify someone for an alert with these labels, one entry per notification (a receiver
    reached by two routes appears twice), without the objects named in ``rejected`` (the operator skipped them)."""
    kept = [c for c in configs if c["metadata"]["name"] not in set(rejected)]
    notifying = {f"{c['metadata']['namespace']}/{c['metadata']['name']}/{r['name']}": r["name"]
                 for c in kept for r in c["spec"]["receivers"] if any(r.get(k) for k in NOTIFIERS)}
    ends = _match(alertmanager_root(kept, strategy), labels, "null")
    return [notifying[e] for e in ends if e in notifying]
