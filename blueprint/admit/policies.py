"""ValidatingAdmissionPolicies of the graph, evaluated on a workload and its pods with cel-python.

For each ValidatingAdmissionPolicyBinding, its policy applies to an object when the policy's ``matchConstraints``
and the binding's ``matchResources`` both match: resource rules (API group, version, plural resource, the CREATE
operation), minus exclude rules, the namespace selector against the namespace's labels, the object selector
against the object's labels; then every ``matchCondition`` must be true. Its ``variables`` are evaluated in order
and its ``validations`` must all be true (Kubernetes docs, "Validating Admission Policy"). The CEL variables are
``object``, ``oldObject`` (null on create), ``request`` (operation, namespace, name, kind, resource),
``namespaceObject``, ``params`` and ``variables``. A binding whose actions include ``Deny`` refuses; ``Warn`` is a
note. An expression that fails to evaluate follows the policy's ``failurePolicy`` (Fail refuses).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from blueprint.admit.cluster import ClusterView, K8sObject, as_list, as_mapping, as_str_map, matches_selector

VAP = "ValidatingAdmissionPolicy"
VAP_BINDING = "ValidatingAdmissionPolicyBinding"


@dataclass
class PolicyOutcome:
    """Refusals (policy ref, message) and warnings of the policies that apply to one object."""

    denied: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    applied: set[str] = field(default_factory=set)


@cache
def _env() -> celpy.Environment:
    from blueprint.files import cel_parser

    cel_parser.warm()  # the analysed CEL grammar from its file: 0.02 s instead of 0.19 s per process
    return celpy.Environment()


@cache
def _program(expression: str) -> celpy.Runner:
    env = _env()
    return env.program(env.compile(expression))


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """The value of a CEL expression; raises ValueError when it cannot be compiled or evaluated."""
    try:
        result = _program(expression).evaluate(activation)
    except (CELParseError, CELEvalError) as err:
        raise ValueError(_cel_error(err)) from None
    except Exception as err:  # cel-python raises plain Python errors on some type mismatches
        raise ValueError(f"{type(err).__name__}: {str(err)[:200]}") from None
    if isinstance(result, CELEvalError):
        raise ValueError(_cel_error(result))
    return result


def _cel_error(err: Exception) -> str:
    """The first line of a cel-python error (its args carry the message, then the Python exception)."""
    text = str(err.args[0]) if err.args else str(err)
    return text.splitlines()[0][:200] if text else type(err).__name__


def _plural(kind: str) -> str:
    lower = kind.lower()
    return lower + ("es" if lower.endswith(("s", "x", "ch")) else "s")


def _rule_matches(rule: dict[str, Any], group: str, version: str, resource: str) -> bool:
    def listed(key: str, value: str) -> bool:
        values = [str(v) for v in as_list(rule.get(key))]
        return "*" in values or value in values

    return (listed("apiGroups", group) and listed("apiVersions", version) and listed("resources", resource)
            and listed("operations", "CREATE"))


def _matches(constraints: dict[str, Any], obj: dict[str, Any], ns_labels: dict[str, str] | None,
             require_rules: bool) -> bool:
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    group, _, version = api_version.rpartition("/")
    resource = _plural(kind)
    rules = [r for r in as_list(constraints.get("resourceRules")) if isinstance(r, dict)]
    if (rules or require_rules) and not any(_rule_matches(r, group, version, resource) for r in rules):
        return False
    if any(_rule_matches(r, group, version, resource) for r in as_list(constraints.get("excludeResourceRules"))
           if isinstance(r, dict)):
        return False
    if ns_labels is not None and not matches_selector(as_mapping(constraints.get("namespaceSelector")), ns_labels):
        return False
    labels = as_str_map(as_mapping(obj.get("metadata")).get("labels"))
    return matches_selector(as_mapping(constraints.get("objectSelector")), labels)


def _activation(obj: dict[str, Any], namespace: str, ns_object: dict[str, Any] | None,
                params: dict[str, Any] | None) -> dict[str, Any]:
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    group, _, version = api_version.rpartition("/")
    name = str(as_mapping(obj.get("metadata")).get("name", ""))
    request = {"operation": "CREATE", "namespace": namespace, "name": name, "dryRun": False,
               "kind": {"group": group, "version": version, "kind": kind},
               "resource": {"group": group, "version": version, "resource": _plural(kind)},
               "userInfo": {"username": "", "groups": []}, "options": {}}
    return {"object": json_to_cel(obj), "oldObject": json_to_cel(None),
            "request": json_to_cel(request), "namespaceObject": json_to_cel(ns_object),
            "params": json_to_cel(params)}


def _params(view: ClusterView, policy: K8sObject, binding: K8sObject, namespace: str) -> tuple[Any, str | None]:
    """The binding's parameter object; (None, problem) when the policy needs one the graph lacks."""
    param_kind = as_mapping(policy.spec.get("paramKind"))
    if not param_kind:
        return None, None
    ref = as_mapping(binding.spec.get("paramRef"))
    name = ref.get("name")
    found = view.get(str(param_kind.get("kind")), str(name), ref.get("namespace") or None) if name else None
    if found is None and name:
        found = view.get(str(param_kind.get("kind")), str(name), namespace)
    if found is not None:
        return found.manifest, None
    if ref.get("parameterNotFoundAction") == "Allow":
        return None, None
    return None, f"its parameter {param_kind.get('kind')} {name or '(by selector)'} is not in the graph"


def evaluate_policies(view: ClusterView, obj: dict[str, Any], namespace: str,
                      ns_labels: dict[str, str] | None) -> PolicyOutcome:
    """Run every bound ValidatingAdmissionPolicy that matches ``obj`` (created in ``namespace``)."""
    out = PolicyOutcome()
    ns_obj = view.get("Namespace", namespace)
    for binding in view.of_kind(VAP_BINDING):
        policy = view.get(VAP, str(binding.spec.get("policyName")))
        if policy is None:
            continue
        if not _matches(as_mapping(policy.spec.get("matchConstraints")), obj, ns_labels, True):
            continue
        if not _matches(as_mapping(binding.spec.get("matchResources")), obj, ns_labels, False):
            continue
        actions = [str(a) for a in as_list(binding.spec.get("validationActions"))] or ["Deny"]
        fail = policy.spec.get("failurePolicy", "Fail") != "Ignore"
        params, problem = _params(view, policy, binding, namespace)
        if problem is not None:
            if fail and "Deny" in actions:
                out.denied.append((policy.ref, problem))
            continue
        activation = _activation(obj, namespace, ns_obj.manifest if ns_obj else None, params)
        messages = _run(policy, activation, fail)
        if messages is None:
            continue
        out.applied.add(policy.ref)
        for message in messages:
            if "Deny" in actions:
                out.denied.append((policy.ref, message))
            if "Warn" in actions:
                out.warnings.append(f"{policy.ref} warns: {message}")
    return out


def _run(policy: K8sObject, activation: dict[str, Any], fail: bool) -> list[str] | None:
    """The messages of the validations the object breaks; None when a match condition excludes it."""
    spec = policy.spec
    for condition in as_list(spec.get("matchConditions")):
        expression = str(as_mapping(condition).get("expression", "true"))
        try:
            if not bool(_evaluate(expression, activation)):
                return None
        except ValueError as err:
            return [f"match condition {as_mapping(condition).get('name')} cannot be evaluated ({err})"] if fail \
                else None
    variables: dict[celtypes.StringType, Any] = {}
    for variable in as_list(spec.get("variables")):
        variable = as_mapping(variable)
        activation["variables"] = celtypes.MapType(variables)
        try:
            variables[celtypes.StringType(str(variable.get("name")))] = _evaluate(str(variable.get("expression")),
                                                                                  activation)
        except ValueError as err:
            return [f"variable {variable.get('name')} cannot be evaluated ({err})"] if fail else []
    activation["variables"] = celtypes.MapType(variables)
    broken = []
    for validation in as_list(spec.get("validations")):
        validation = as_mapping(validation)
        try:
            ok = bool(_evaluate(str(validation.get("expression")), activation))
        except ValueError as err:
            if fail:
                broken.append(f"{validation.get('expression')!s:.80} cannot be evaluated ({err})")
            continue
        if not ok:
            message = validation.get("message")
            if validation.get("messageExpression"):
                with contextlib.suppress(ValueError):
                    message = str(_evaluate(str(validation["messageExpression"]), activation))
            broken.append(str(message or f"failed expression: {validation.get('expression')}"))
    return broken
