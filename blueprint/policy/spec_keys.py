"""From a policy finding to the stack-file key its fix changes (issue 36).

A finding names a resource and, mostly, a field of that resource's inputs (``scalingConfig.maxSize``); the resource
traces to the stack-file key it was built from (:func:`blueprint.graph.provenance.spec_path_of`, a node group's item
``gpu-cluster:spec.aws.nodeGroups[1]``). The rules say which key of the stack file sets such a field, so a finding
lands on the line a pull request changes (``maxSize: 80``), not on the item four lines above it: GitHub annotates a
pull request only on lines inside its diff.

A rule's key is absolute (``gpu-cluster:spec.deletionProtection``) or relative to the resource's own key (``.maxSize``
after ``gpu-cluster:spec.aws.nodeGroups[1]``); ``{1}``, ``{2}`` are the field pattern's groups and ``{name}`` a named
group of the message pattern. A cloud's resources have the cloud's rules (``SPEC_KEYS`` of
``blueprint/clouds/<cloud>/examples.py``); the rules here are of no cloud in particular. Only fields a stack-file key
sets are listed: a finding on a field the program always writes (IMDSv2, a bucket's encryption) stays on the
resource's own key, where a person would look for it. tests/policy/test_sarif_keys.py checks that every key is one the
stack-file schema has, and that a one-line change per policy family (or, for fabric and Slurm, a broken graph) is
reported on exactly its line; tests/policy/test_sarif_rules.py proves every rule with a real finding on its key's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blueprint import clouds
from blueprint.graph.model import ResourceGraph
from blueprint.graph.provenance import SPEC_KEY, spec_path_of
from blueprint.policy.cloud import cloud_examples
from blueprint.policy.runner import Violation

__all__ = ["ANY", "DELETION_PROTECTION", "ENVIRONMENT", "INDEX", "LABEL", "LABELS", "RULES", "SPEC_KEY", "KeyRule",
           "finding_key", "key_rule", "rules_for"]

ANY = ""  # a resource type that matches every one


@dataclass(frozen=True)
class KeyRule:
    """Findings of ``policies`` (empty: every policy) on a resource of ``type`` (``ANY``: every type) whose field
    fully matches ``field`` (None: any field, or none), whose text contains ``message`` and whose resource's own key
    fully matches ``under`` (empty: any key) are about ``key``."""

    key: str
    type: str = ANY
    field: str | None = None
    policies: tuple[str, ...] = ()
    message: str = ""
    under: str = ""


_NAMESPACE = "kubernetes:core/v1:Namespace"
_SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
INDEX = r"(\[\d+\])?"  # a list field's index, when the finding names one: ``publicAccessCidrs[0]``
# A billing tag or label as a finding names it: ``tags.owner`` (group 1) or ``tags["cost-center"]`` (group 2); a
# cloud's billing policies point it at the stack's labels with ``LABELS``.
# ``environment`` is not one of them: the program sets it from the stack's environment (ENVIRONMENT, below).
_LABELLED = r'(?:tags|labels|userLabels|nodeConfig\.resourceLabels|metadata\.labels)'
LABEL = _LABELLED + r'(?:\.(?!environment$)([A-Za-z_]\w*)|\["(?!environment")([^"]+)"\])'
LABELS = SPEC_KEY + ".labels.{1}{2}"
ENVIRONMENT = _LABELLED + r'(?:\.environment|\["environment"\])'
DELETION_PROTECTION = SPEC_KEY + ".deletionProtection"
_NAMESPACE_LABELS = ("kubernetes-namespaces-require-billing-labels",)
_TEAM = re.escape(SPEC_KEY) + r"\.teams\[\d+\]"  # a team's item: its namespace's labels are the team's

# The rules of no cloud in particular (a cloud's own come first: its examples module's SPEC_KEYS).
RULES: tuple[KeyRule, ...] = (
    # deletion protection of every stateful resource is one stack-wide key
    KeyRule(DELETION_PROTECTION, ANY, r"deletionProtection|forceDestroy|settings\.deletionProtectionEnabled"),
    KeyRule(DELETION_PROTECTION, "kubernetes:storage.k8s.io/v1:StorageClass", r"reclaimPolicy"),
    KeyRule(DELETION_PROTECTION, policies=("stateful-resources-protected-in-production",)),
    # alerts no receiver takes
    KeyRule(SPEC_KEY + ".platform.monitoring.alerts.defaultReceiver",
            policies=("alerts-minimum-telemetry", "alerts-reach-a-receiver"), message="receiver"),
    # quotas and goodput
    KeyRule(".quotas", "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", r"spec\.resourceGroups.*\.nominalQuota"),
    KeyRule(SPEC_KEY + ".workload.goodput.target", "kubernetes:core/v1:ConfigMap", r"data\.GOODPUT_MODELLED"),
    # Slurm: a partition's limits are the partition's keys (named on the finding's line of slurm.conf)
    KeyRule(".login.sourceCidrs{1}", _SLINKY + "LoginSet", r"spec\.service\.spec\.loadBalancerSourceRanges" + INDEX),
    KeyRule(".accounting.enabled", _SLINKY + "Controller", r"spec\.accountingRef(\..*)?"),
    KeyRule(".partitions[{name}]", _SLINKY + "Controller", r"spec\.extraConf",
            message=r"^Partition (?P<name>[a-z][a-z0-9-]*) must limit"),
    # billing: a team namespace's cost center and team are the team's (its costCenter, its name); the environment
    # label is the stack's environment; every other billing label is the stack's
    KeyRule(".costCenter", _NAMESPACE, r'metadata\.labels\["cost-center"\]', policies=_NAMESPACE_LABELS, under=_TEAM),
    KeyRule(".name", _NAMESPACE, r"metadata\.labels\.team", policies=_NAMESPACE_LABELS, under=_TEAM),
    KeyRule(SPEC_KEY + ".environment", ANY, ENVIRONMENT),
    KeyRule(LABELS, ANY, LABEL, policies=_NAMESPACE_LABELS),
    KeyRule(SPEC_KEY + ".labels", _SLINKY, r"spec\.template\.metadata\.labels",
            policies=("slurm-pods-carry-billing-labels",)),
)


def _requirement(message: str) -> str:
    """The finding's own text, without the policy description the analyzer puts first."""
    return message.split("\n", 1)[1] if "\n" in message else message


def rules_for(graph: ResourceGraph) -> tuple[KeyRule, ...]:
    """The graph's cloud's rules (its examples module's ``SPEC_KEYS``), then those of no cloud in particular."""
    cloud = clouds.of_types(r.type for r in graph.resources)
    return (*(cloud_examples(cloud).SPEC_KEYS if cloud is not None else ()), *RULES)


def _groups(rule: KeyRule, v: Violation, own: str = SPEC_KEY) -> dict[str, str] | None:
    """The template's values when ``rule`` covers ``v`` on a resource whose own key is ``own`` (numbered from the
    field, named from the message)."""
    if rule.policies and v.policy not in rule.policies:
        return None
    if rule.under and re.fullmatch(rule.under, own) is None:
        return None
    if rule.type != ANY and not (v.type == rule.type or (rule.type.endswith(":") and v.type.startswith(rule.type))):
        return None
    groups: dict[str, str] = {}
    if rule.field is not None:
        match = re.fullmatch(rule.field, v.field or "")
        if match is None:
            return None
        groups.update({str(i): g or "" for i, g in enumerate(match.groups(), start=1)})
    if rule.message:
        found = re.search(rule.message, _requirement(v.message))
        if found is None:
            return None
        groups.update({k: g or "" for k, g in found.groupdict().items()})
    return groups


def _fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by its value ("" for a group that matched nothing)."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), ""), template)


def key_rule(graph: ResourceGraph, v: Violation) -> tuple[KeyRule, dict[str, str]] | None:
    """The first rule covering ``v`` (the cloud's before the others) and its template's values; None when none does."""
    own = spec_path_of(graph, graph.get(v.urn) if v.urn else None)
    for rule in rules_for(graph):
        groups = _groups(rule, v, own)
        if groups is not None:
            return rule, groups
    return None


def finding_key(graph: ResourceGraph, v: Violation) -> str:
    """The stack-file key path ``v``'s fix changes: the key setting its field, or the one its policy is about; the
    resource's own key (its node group, team, plane) when no stack-file key sets what the finding names."""
    base = spec_path_of(graph, graph.get(v.urn) if v.urn else None)
    found = key_rule(graph, v)
    if found is None:
        return base
    key = _fill(found[0].key, found[1])
    if key.startswith(SPEC_KEY):
        return key
    return base + key if base != SPEC_KEY else base  # relative to a resource's key, and none traced
