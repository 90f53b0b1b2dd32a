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
# object, oldObject, request, params, namespaceObject, variables, authorizer): an expression that names none of them
# has the same value for every request.
REQUEST_NAMES = re.compile(r"\b(?:object|oldObject|request|params|namespaceObject|variables|authorizer)\b")


@cache
def _constant(expression: str) -> Any:
    """The value of an expression that reads nothing of the request (a list literal of every other team's group,
    say), evaluated once: evaluating a 1,000-element literal again for each probe of each namespace made the
    admission guard grow with the square of the teams (issue 37). Not cached when it raises (ValueError)."""
    return _value(expression, {})


def _variable(expression: str, activation: dict[str, Any]) -> Any:
    """A variable's value: once per process when the expression names nothing of the request (a word of a string
    literal counts as a name: such an expression is merely not cached), else for this request."""
    return _value(expression, activation) if REQUEST_NAMES.search(expression) else _constant(expression)


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
                                                                                  activation)
        activation["variables"] = celtypes.MapType(variables)
        return any(not bool(_value(str(v.get("expression")), activation)) for v in spec.get("validations") or [])
    except ValueError:
        return True
