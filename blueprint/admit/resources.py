"""What a pod asks for, after the API server and the namespace's LimitRanges fill in what it leaves out, and what
the namespace's ResourceQuotas let the workload's pods ask for together.

Defaulting, in the API server's order: a container that sets a limit but no request gets the limit as its request
(API defaulting); the LimitRange admission plugin then sets ``default`` limits and ``defaultRequest`` requests on the
containers that set none (a LimitRange item with ``default`` but no ``defaultRequest`` uses ``default`` for both;
with ``max`` but no ``default``, ``max``). A request above its limit, or outside an item's min/max, is refused.

A pod's requests are what the scheduler and quotas count: the sum of its containers plus restartable (sidecar) init
containers, or the largest ordinary init container when that is more (Kubernetes "Resource Management for Pods and
Containers", init containers and sidecars).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from blueprint.admit.cluster import K8sObject, as_list, as_mapping
from blueprint.admit.quantity import QuantityError, parse_quantity, show

Amounts = dict[str, Fraction]
# Resources a ResourceQuota names bare, meaning their requests (ResourceQuota docs, "Compute Resource Quota").
_BARE_REQUESTS = ("cpu", "memory", "ephemeral-storage")


@dataclass
class PodResources:
    """A pod's effective requests and limits, and what LimitRanges refuse in it."""

    requests: Amounts = field(default_factory=dict)
    limits: Amounts = field(default_factory=dict)
    unset_requests: set[str] = field(default_factory=set)  # compute resources some container leaves unrequested
    unset_limits: set[str] = field(default_factory=set)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (LimitRange ref or "", message)
    defaulted: list[str] = field(default_factory=list)


def _amounts(raw: Any, where: str, problems: list[tuple[str, str]]) -> Amounts:
    out: Amounts = {}
    for name, value in as_mapping(raw).items():
        try:
            amount = parse_quantity(value)
        except QuantityError as err:
            problems.append(("", f"{where}.{name}: {err}"))
            continue
        if amount < 0:  # the API server: "must be greater than or equal to 0" (ValidateResourceQuantityValue)
            problems.append(("", f"{where}.{name}: {value!r} is negative: must be greater than or equal to 0"))
            continue
        out[str(name)] = amount
    return out


def _item_defaults(item: dict[str, Any]) -> tuple[Amounts, Amounts]:
    """A LimitRange item's (default limits, default requests), with the API server's own defaulting of the item."""
    sink: list[tuple[str, str]] = []
    default = _amounts(item.get("default"), "", sink)
    maximum = _amounts(item.get("max"), "", sink)
    for name, value in maximum.items():
        default.setdefault(name, value)
    request = _amounts(item.get("defaultRequest"), "", sink)
    for name, value in default.items():
        request.setdefault(name, value)
    return default, request


def _add(total: Amounts, amounts: Amounts, factor: int = 1) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, Fraction(0)) + value * factor


def _max_into(total: Amounts, amounts: Amounts) -> None:
    for name, value in amounts.items():
        total[name] = max(total.get(name, Fraction(0)), value)


def pod_resources(pod: dict[str, Any], limit_ranges: list[K8sObject]) -> PodResources:
    """The pod's effective requests and limits under the namespace's LimitRanges."""
    out = PodResources()
    spec = as_mapping(pod.get("spec"))
    items = [(lr, as_mapping(item)) for lr in limit_ranges for item in as_list(lr.spec.get("limits"))
             if as_mapping(item).get("type", "Container") == "Container"]
    apps: Amounts = {}
    app_limits: Amounts = {}
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for key in ("initContainers", "containers"):
        for container in as_list(spec.get(key)):
            if not isinstance(container, dict):
                continue
            who = f"container {container.get('name')}"
            resources = as_mapping(container.get("resources"))
            requests = _amounts(resources.get("requests"), f"{who} resources.requests", out.problems)
            limits = _amounts(resources.get("limits"), f"{who} resources.limits", out.problems)
            for name, value in limits.items():
                requests.setdefault(name, value)  # API defaulting: the request is the limit
            limit_from: dict[str, str] = {}
            for lr, item in items:
                default, default_request = _item_defaults(item)
                for name, value in default.items():
                    if name not in limits:
                        limits[name] = value
                        limit_from[name] = lr.ref
                        out.defaulted.append(f"{who} limit {name} {show(name, value)} from {lr.ref}")
                for name, value in default_request.items():
                    if name not in requests:
                        requests[name] = value
                        out.defaulted.append(f"{who} request {name} {show(name, value)} from {lr.ref}")
                _check_item(lr, item, who, requests, limits, out)
            _check_not_overcommitted(who, requests, limits, out)  # validation runs after the LimitRanger's defaults
            for name, value in requests.items():
                if name in limits and value > limits[name] and not (is_hugepages(name) or is_extended(name)):
                    source = limit_from.get(name, "")
                    given = f" (the default limit of {source}, since the container sets none)" if source else ""
                    out.problems.append((source, f"{who} requests {show(name, value)} {name}, above its limit "
                                         f"{show(name, limits[name])}{given}: lower the request or set a limit"))
            out.unset_requests |= {r for r in ("cpu", "memory") if r not in requests}
            out.unset_limits |= {r for r in ("cpu", "memory") if r not in limits}
            if key == "containers":
                _add(apps, requests)
                _add(app_limits, limits)
            elif container.get("restartPolicy") == "Always":
                _add(sidecars, requests)
                _add(app_limits, limits)
            else:
                running = dict(sidecars)
                _add(running, requests)
                _max_into(init_peak, running)
    out.requests = dict(apps)
    _add(out.requests, sidecars)
    _max_into(out.requests, init_peak)
    out.limits = app_limits
    return out


def with_extra(res: PodResources, extra: Amounts) -> PodResources:
    """A copy of a pod's resources with more requests added (an injected container)."""
    if not extra:
        return res
    requests = dict(res.requests)
    _add(requests, extra)
    return PodResources(requests, dict(res.limits), set(res.unset_requests), set(res.unset_limits), [], [])


def is_hugepages(name: str) -> bool:
    """``hugepages-<size>``: pre-allocated huge pages of one page size."""
    return name.startswith("hugepages-")


def is_extended(name: str) -> bool:
    """An extended resource: a name with a domain outside ``kubernetes.io`` (``nvidia.com/gpu``,
    ``vpc.amazonaws.com/efa``)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _check_not_overcommitted(who: str, requests: Amounts, limits: Amounts, out: PodResources) -> None:
    """The API server's rules for resources that cannot be overcommitted, hugepages and extended resources
    (kubernetes pkg/apis/core/validation ``validateResourceRequirements``; ``IsOvercommitAllowed`` is false for
    them). Validation sees the container after defaulting (a limit copied into a missing request) and after the
    LimitRanger admission plugin's defaults, so these are checked last:

    - a request needs a limit ("Limit must be set for non overcommitable resources"), and equals it when both are
      given ("must be equal to <resource> limit");
    - extended resources are whole numbers ("must be an integer");
    - hugepages are a whole number of pages ("is not positive integer multiple of <page size>"), and a container
      asking for them also asks for cpu or memory ("HugePages require cpu or memory").
    """
    for name in sorted(set(requests) | set(limits)):
        if not (is_hugepages(name) or is_extended(name)):
            continue
        kind = "a hugepages resource" if is_hugepages(name) else "an extended resource"
        if name in requests and name not in limits:
            out.problems.append(("", f"{who} requests {show(name, requests[name])} {name} with no limit: {name} is "
                                 f"{kind}, which cannot be overcommitted, and the API server refuses a request "
                                 "without a limit (\"Limit must be set for non overcommitable resources\"); set "
                                 f"resources.limits.{name} (the request is copied from it)"))
        elif name in requests and requests[name] != limits[name]:
            out.problems.append(("", f"{who} requests {show(name, requests[name])} {name} but limits "
                                 f"{show(name, limits[name])}: {name} is {kind}, which cannot be overcommitted, so "
                                 f"its request must equal its limit (\"must be equal to {name} limit\"); set only the "
                                 "limit"))
        for what, amounts in (("limit", limits), ("request", requests)):
            amount = amounts.get(name)
            if amount is None or (what == "request" and limits.get(name) == amount):
                continue  # a request copied from its limit is the limit's problem
            if is_extended(name) and amount.denominator != 1:
                out.problems.append(("", f"{who} {what}s {show(name, amount)} {name}: extended resources are whole "
                                     "numbers (\"must be an integer\")"))
            page = _page_size(name)
            if page is not None and (amount / page).denominator != 1:
                out.problems.append(("", f"{who} {what}s {show(name, amount)} {name}: not a whole number of "
                                     f"{show(name, page)} pages (\"is not positive integer multiple of\" the page "
                                     "size)"))
    if any(is_hugepages(n) for n in (*requests, *limits)) and \
            not any(n in ("cpu", "memory") for n in (*requests, *limits)):
        out.problems.append(("", f"{who} asks for hugepages but neither cpu nor memory (\"HugePages require cpu or "
                             "memory\"): add a memory request and limit"))


def _page_size(name: str) -> Fraction | None:
    """The page size of a ``hugepages-<size>`` resource; None for other names or a size that is not a quantity."""
    if not is_hugepages(name):
        return None
    try:
        size = parse_quantity(name.removeprefix("hugepages-"))
    except QuantityError:
        return None
    return size if size > 0 else None


def _check_item(lr: K8sObject, item: dict[str, Any], who: str, requests: Amounts, limits: Amounts,
                out: PodResources) -> None:
    sink: list[tuple[str, str]] = []
    for name, low in _amounts(item.get("min"), "", sink).items():
        if requests.get(name, low) < low:
            out.problems.append((lr.ref, f"{who} requests {show(name, requests[name])} {name}, below the minimum "
                                 f"{show(name, low)} of {lr.ref}: raise the request"))
    for name, high in _amounts(item.get("max"), "", sink).items():
        if name in limits and limits[name] > high:
            out.problems.append((lr.ref, f"{who} limits {name} to {show(name, limits[name])}, above the maximum "
                                 f"{show(name, high)} of {lr.ref}: lower the limit"))
    for name, ratio in _amounts(item.get("maxLimitRequestRatio"), "", sink).items():
        if name in limits and requests.get(name) and limits[name] / requests[name] > ratio:
            out.problems.append((lr.ref, f"{who}: {name} limit/request ratio above {ratio} ({lr.ref}): bring the "
                                 "limit closer to the request"))


def quota_problems(quotas: list[K8sObject], pods: list[tuple[int, PodResources]],
                   notes: list[str], zero_hint: str = "") -> list[tuple[str, str]]:
    """What the namespace's ResourceQuotas refuse when all the workload's pods exist at once: (quota ref,
    message). ``pods`` is (count, resources) per pod set; ``zero_hint`` says why a quota of 0 is 0 (Slurm owns the
    team's GPUs)."""
    total_requests: Amounts = defaultdict(Fraction)
    total_limits: Amounts = defaultdict(Fraction)
    unset_requests: set[str] = set()
    unset_limits: set[str] = set()
    count = 0
    for n, res in pods:
        _add(total_requests, res.requests, n)
        _add(total_limits, res.limits, n)
        unset_requests |= res.unset_requests
        unset_limits |= res.unset_limits
        count += n
    problems = []
    for quota in quotas:
        if quota.spec.get("scopes") or quota.spec.get("scopeSelector"):
            notes.append(f"{quota.ref} has scopes: not evaluated")
            continue
        sink: list[tuple[str, str]] = []
        for key, hard in _amounts(quota.spec.get("hard"), "", sink).items():
            if key == "pods":
                used, what = Fraction(count), "pods"
            elif key.startswith("requests.") or key in _BARE_REQUESTS:
                resource = key.removeprefix("requests.")
                if resource in unset_requests:
                    problems.append((quota.ref, f"{quota.ref} tracks {key}: every container must request {resource} "
                                     "(set resources.requests, or give the namespace a LimitRange defaultRequest)"))
                    continue
                used, what = total_requests.get(resource, Fraction(0)), f"{resource} requested"
            elif key.startswith("limits."):
                resource = key.removeprefix("limits.")
                if resource in unset_limits:
                    problems.append((quota.ref, f"{quota.ref} tracks {key}: every container must set a {resource} "
                                     "limit"))
                    continue
                used, what = total_limits.get(resource, Fraction(0)), f"{resource} limits"
            else:
                continue
            if used > hard:
                resource = key.split(".", 1)[-1] if "." in key and key != "pods" else key
                fix = (f"it is the team's Kueue quota, none here{zero_hint}" if hard == 0 and zero_hint else
                       "lower the pods' requests or their number, or raise the team's quota in the stack")
                problems.append((quota.ref, f"the workload's pods need {show(resource, used)} {what} together; "
                                 f"{quota.ref} allows {show(resource, hard)} ({key}): {fix}"))
    return problems
