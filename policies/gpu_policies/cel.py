"""Run a ValidatingAdmissionPolicy's CEL on one request, so a guard judges a policy by what it refuses.

Kubernetes evaluates a policy's ``variables`` in order (each may read the ones before it through ``variables``), then
every validation; a request is refused when a validation is false, and, with ``failurePolicy: Fail``, when an
expression cannot be evaluated (Kubernetes documentation, "Validating Admission Policy"). This is that evaluation on
cel-python (the pack's own requirement), for the probe requests of :mod:`gpu_policies.guards`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel


@cache
def _program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression))


def _value(expression: str, activation: dict[str, Any]) -> Any:
    """The expression's value; raises ValueError when it cannot be compiled or evaluated."""
    try:
        result = _program(expression).evaluate(activation)
    except Exception as err:  # cel-python raises its own errors and plain Python ones on type mismatches
        raise ValueError(str(err)[:200]) from None
    if isinstance(result, Exception):
        raise ValueError(str(result)[:200])
    return result


# The names a ValidatingAdmissionPolicy's CEL can read (Kubernetes documentation, "Validating Admission Policy":
# object, oldObject, request, params, namespaceObject, variables, authorizer). A word of a string literal counts as a
# name: such an expression is merely evaluated more often than it needs to be.
REQUEST_NAMES = re.compile(r"\b(?:object|oldObject|request|params|namespaceObject|variables|authorizer)\b")
PER_REQUEST = re.compile(r"\b(?:object|oldObject|request|params|authorizer)\b")
VARIABLE_NAMES = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")
_MEMO: dict[tuple[str, str], Any] = {}


@cache
def _constant(expression: str) -> Any:
    """The value of an expression that reads nothing of the request (a list literal of every team's group, say),
    evaluated once. Not cached when it raises (ValueError)."""
    return _value(expression, {})


def _variable(expression: str, activation: dict[str, Any], namespace: Mapping[str, Any]) -> Any:
    """A variable's value. The guards send each namespace's policies a few dozen probe requests: a variable that reads
    only the namespace and other variables (the team-gid policy's ``gid``, from the namespace's label) is evaluated
    once per value of what it reads, not once per request; one that reads nothing (its map of every team's group) once
    per process. Evaluated again per request, a 1,000-element literal made the admission guard grow with the square
    of the teams (1.4 s of CPU per namespace at 1,000 teams against 0.14 s at 100; issue 37)."""
    if not REQUEST_NAMES.search(expression):
        return _constant(expression)
    if PER_REQUEST.search(expression):
        return _value(expression, activation)
    reads = sorted(set(VARIABLE_NAMES.findall(expression)))
    known = activation.get("variables") or {}
    if any(celtypes.StringType(name) not in known for name in reads):
        return _value(expression, activation)  # an unknown variable: the evaluation's own error
    key = (expression, repr([(name, known[celtypes.StringType(name)]) for name in reads])
           + (repr(sorted(_flat(namespace))) if "namespaceObject" in expression else ""))
    if key not in _MEMO:
        if len(_MEMO) > 100_000:
            _MEMO.clear()
        _MEMO[key] = _value(expression, activation)
    return _MEMO[key]


def _flat(value: Any, path: str = "") -> list[tuple[str, str]]:
    """A mapping as (path, value) pairs, for a key."""
    if isinstance(value, Mapping):
        return [pair for k, v in value.items() for pair in _flat(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in _flat(v, f"{path}/{i}")]
    return [(path, repr(value))]


def refuses(spec: Mapping[str, Any], obj: Mapping[str, Any], request: Mapping[str, Any],
            namespace: Mapping[str, Any]) -> bool:
    """The policy (its ``spec``) refuses this request: a validation is false or cannot be evaluated (fail closed)."""
    activation: dict[str, Any] = {
        "object": json_to_cel(dict(obj)), "oldObject": json_to_cel(None), "request": json_to_cel(dict(request)),
        "namespaceObject": json_to_cel(dict(namespace)), "params": json_to_cel(None)}
    variables: dict[celtypes.StringType, Any] = {}
    try:
        for variable in spec.get("variables") or []:
            activation["variables"] = celtypes.MapType(variables)
            variables[celtypes.StringType(str(variable.get("name")))] = _variable(str(variable.get("expression")),
                                                                                  activation, namespace)
        activation["variables"] = celtypes.MapType(variables)
        return any(not bool(_value(str(v.get("expression")), activation)) for v in spec.get("validations") or [])
    except ValueError:
        return True
