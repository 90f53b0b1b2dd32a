"""The pack's CEL runner evaluates a policy variable that reads only the namespace and other variables once per value
of what it reads, and one that reads nothing once per process (issue 37): the team-gid policy's list of every other
team's group was evaluated again for each probe of each namespace, so the admission guard grew with the square of
the teams (1.4 s of CPU per namespace at 1,000 teams, 0.14 s at 100)."""

from __future__ import annotations

from typing import Any

from gpu_policies import cel

# A policy like the team-gid one: a constant list variable, and a validation that reads it and the request.
GROUPS = "[" + ", ".join(str(20000 + i) for i in range(1000)) + "]"
SPEC: dict[str, Any] = {
    "variables": [{"name": "others", "expression": GROUPS},
                  {"name": "gid", "expression": "int(namespaceObject.metadata.labels[\"gid\"])"}],
    "validations": [{"expression": "!(object.spec.group in variables.others) || object.spec.group == variables.gid"}],
}
NAMESPACE = {"metadata": {"name": "a", "labels": {"gid": "20001"}}}


def _pod(group: int) -> dict[str, Any]:
    return {"spec": {"group": group}}


def test_a_constant_variable_is_evaluated_once_and_the_verdicts_are_unchanged() -> None:
    cel._constant.cache_clear()
    verdicts = [cel.refuses(SPEC, _pod(g), {"operation": "CREATE"}, NAMESPACE) for g in (20001, 20005, 7, 20999)]
    # Another team's group is refused, the namespace's own and a group of no team are not.
    assert verdicts == [False, True, False, True]
    info = cel._constant.cache_info()
    assert (info.misses, info.hits) == (1, 3)  # the list literal once, not once per request


def test_a_variable_that_reads_the_request_is_evaluated_for_each_request() -> None:
    # The gid variable reads namespaceObject: two namespaces, two verdicts.
    other = {"metadata": {"name": "b", "labels": {"gid": "20005"}}}
    assert cel.refuses(SPEC, _pod(20005), {"operation": "CREATE"}, NAMESPACE)
    assert not cel.refuses(SPEC, _pod(20005), {"operation": "CREATE"}, other)
    assert cel.REQUEST_NAMES.search(SPEC["variables"][1]["expression"])
    assert not cel.REQUEST_NAMES.search(SPEC["variables"][0]["expression"])


def test_a_variable_of_the_namespace_is_evaluated_once_per_namespace(monkeypatch: Any) -> None:
    # As the team-gid policy writes it: every team's group but the namespace's own.
    spec = {"variables": [{"name": "gid", "expression": "int(namespaceObject.metadata.labels[\"gid\"])"},
                          {"name": "others", "expression": GROUPS + ".filter(g, g != variables.gid)"}],
            "validations": [{"expression": "!(object.spec.group in variables.others)"}]}
    evaluated: list[str] = []
    real = cel._value

    def counted(expression: str, activation: dict[str, Any]) -> Any:
        evaluated.append(expression)
        return real(expression, activation)

    monkeypatch.setattr(cel, "_value", counted)
    other = {"metadata": {"name": "b", "labels": {"gid": "20005"}}}
    verdicts = [cel.refuses(spec, _pod(g), {"operation": "CREATE"}, ns)
                for ns in (NAMESPACE, other) for g in (20001, 20005, 7)]
    assert verdicts == [False, True, False, True, False, False]
    assert sum(e.startswith(GROUPS) for e in evaluated) == 2  # once per namespace, not once per request


def test_the_admission_guard_judges_each_policy_probe_and_namespace_once(monkeypatch: Any) -> None:
    # A policy bound twice, or a probe two guards send, met the same namespace again: a quarter of prod-gcp's CEL
    # evaluations were such repeats. The guard's verdict is unchanged (the policy tests hold it); here, no repeats.
    import json

    from gpu_policies import guards

    from blueprint.policy.runner import run_policies
    from tests.conftest import offline_run

    seen: list[str] = []
    real = guards.refuses

    def counted(spec: Any, obj: Any, request: Any, namespace: Any) -> bool:
        seen.append(json.dumps([sorted(map(str, spec.items())), obj, request, namespace], sort_keys=True, default=str))
        return real(spec, obj, request, namespace)

    monkeypatch.setattr(guards, "refuses", counted)
    report = run_policies(offline_run("prod-gcp").graph)
    assert not [v for v in report.violations if v.policy == "kubernetes-team-admission-policies"]
    assert len(seen) > 50  # the guard did probe
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} repeated evaluations"
