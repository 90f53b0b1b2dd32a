"""From a policy finding to the stack-file key its fix changes (issue 36).

A finding names a resource and, mostly, a field of that resource's inputs (``scalingConfig.maxSize``); the resource
traces to the stack-file key it was built from (:func:`blueprint.graph.provenance.spec_path_of`, a node group's item
``gpu-cluster:spec.aws.nodeGroups[1]``). The tables below say which key of the stack file sets such a field, so a
finding lands on the line a pull request changes (``maxSize: 80``), not on the item four lines above it: GitHub
annotates a pull request only on lines inside its diff.

A key template is absolute (``gpu-cluster:spec.deletionProtection``) or relative to the resource's own key
(``.maxSize`` after ``gpu-cluster:spec.aws.nodeGroups[1]``); ``{1}``, ``{2}`` are the field pattern's groups and
``{cloud}`` the stack's cloud (``aws`` or ``gcp``). Only fields a stack-file key sets are listed: a finding on a field
the program always writes (IMDSv2, a bucket's encryption) stays on the resource's own key, where a person would look
for it. tests/policy/test_sarif_keys.py checks that every key is one the stack-file schema has, and that a one-line
change per policy family (or, for fabric and Slurm, a broken graph) is reported on exactly its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blueprint.graph.model import ResourceGraph
from blueprint.graph.provenance import SPEC_KEY, spec_path_of
from blueprint.policy.runner import Violation

ANY = ""  # a resource type that matches every one


@dataclass(frozen=True)
class KeyRule:
    """Findings of ``policies`` (empty: every policy) on a resource of ``type`` (``ANY``: every type) whose field
    fully matches ``field`` (None: any field, or none) and whose text contains ``message`` are about ``key``."""

    key: str
    type: str = ANY
    field: str | None = None
    policies: tuple[str, ...] = ()
    message: str = ""


_EKS = "aws:eks/cluster:Cluster"
_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
_GKE = "gcp:container/cluster:Cluster"
_NODE_POOL = "gcp:container/nodePool:NodePool"
_GCS = "gcp:storage/bucket:Bucket"
_NAMESPACE = "kubernetes:core/v1:Namespace"
_SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
_INDEX = r"(\[\d+\])?"
_BILLING_TAGS = ("aws-resources-require-billing-tags", "gcp-resources-require-billing-labels",
                 "kubernetes-namespaces-require-billing-labels", "aws-eks-gpu-nodegroup-require-owner")
# A billing tag or label as a finding names it: ``tags.owner`` (group 1) or ``tags["cost-center"]`` (group 2).
_LABEL = r'(?:tags|labels|userLabels|nodeConfig\.resourceLabels|metadata\.labels)(?:\.([A-Za-z_]\w*)|\["([^"]+)"\])'

RULES: tuple[KeyRule, ...] = (
    # node groups and pools: their own item's keys
    KeyRule(".{1}", _NODE_GROUP, r"scalingConfig\.(maxSize|minSize|desiredSize)"),
    KeyRule(".ssh", _NODE_GROUP, r"remoteAccess(\..*)?"),
    KeyRule(".efaInterfaces", _LAUNCH_TEMPLATE, r"networkInterfaces(\[\d+\])?"),
    KeyRule(".placement", _LAUNCH_TEMPLATE, r"placement\.groupName"),
    KeyRule(".placement", _NODE_POOL, r"placementPolicy\.type"),
    # the control plane
    KeyRule(".publicAccessCidrs{1}", _EKS, r"vpcConfig\.publicAccessCidrs" + _INDEX),
    KeyRule(".endpointAccess", _EKS, r"vpcConfig\.endpointPublicAccess"),
    KeyRule(".secretsEncryption", _EKS, r"encryptionConfig(\..*)?"),
    KeyRule(".logTypes", _EKS, r"enabledClusterLogTypes(\[\d+\])?"),
    KeyRule(".authorizedNetworks{1}", _GKE, r"masterAuthorizedNetworksConfig\.cidrBlocks" + _INDEX + r"(\.cidrBlock)?"),
    KeyRule(".databaseEncryption", _GKE, r"databaseEncryption(\..*)?"),
    KeyRule(".logComponents", _GKE, r"loggingConfig\.enableComponents(\[\d+\])?"),
    KeyRule(".rbacSecurityGroup", _GKE, r"authenticatorGroupsConfig(\..*)?"),
    # deletion protection of every stateful resource is one stack-wide key
    KeyRule(SPEC_KEY + ".deletionProtection", ANY,
            r"deletionProtection|forceDestroy|settings\.deletionProtectionEnabled"),
    KeyRule(SPEC_KEY + ".deletionProtection", "kubernetes:storage.k8s.io/v1:StorageClass", r"reclaimPolicy"),
    KeyRule(SPEC_KEY + ".deletionProtection",
            policies=("stateful-resources-protected-in-production", "gcp-stateful-resources-protected-in-production")),
    # storage
    KeyRule(".checkpointBucket.softDeleteDays", _GCS, r"softDeletePolicy\.retentionDurationSeconds"),
    KeyRule(".database.backupRetentionDays", "aws:rds/instance:Instance", r"backupRetentionPeriod"),
    # telemetry
    KeyRule(".containerLogs.retentionDays", "aws:cloudwatch/logGroup:LogGroup", r"retentionInDays"),
    KeyRule(SPEC_KEY + ".aws.telemetry.storageMetrics", policies=("aws-storage-metrics-in-production",)),
    KeyRule(SPEC_KEY + ".gcp.telemetry.storageMetrics", policies=("gcp-storage-metrics-in-production",)),
    KeyRule(SPEC_KEY + ".aws.telemetry.containerLogs.enabled", _EKS, policies=("aws-container-logs-in-production",)),
    KeyRule(SPEC_KEY + ".aws.telemetry.efaExporterImage", policies=("aws-fabric-metrics-in-production",)),
    # the seed's minimum alerts a stack turned off: the telemetry they read; alerts no receiver takes
    KeyRule(SPEC_KEY + ".{cloud}.telemetry.storageMetrics", policies=("alerts-minimum-telemetry",),
            message="must alert on storage"),
    KeyRule(SPEC_KEY + ".aws.telemetry.efaExporterImage", policies=("alerts-minimum-telemetry",),
            message="must alert on fabric"),
    KeyRule(SPEC_KEY + ".platform.monitoring.alerts.defaultReceiver",
            policies=("alerts-minimum-telemetry", "alerts-reach-a-receiver"), message="receiver"),
    # quotas, budgets and goodput
    KeyRule(".quotas", "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", r"spec\.resourceGroups.*\.nominalQuota"),
    KeyRule(".budget", _NAMESPACE, policies=("aws-every-team-has-a-budget", "gcp-every-team-has-a-budget")),
    KeyRule(SPEC_KEY + ".billing", policies=("aws-cluster-has-a-budget", "gcp-cluster-has-a-budget")),
    KeyRule(SPEC_KEY + ".workload.goodput.target", "kubernetes:core/v1:ConfigMap", r"data\.GOODPUT_MODELLED"),
    # Slurm: a partition's limits are the partition's keys (named on the finding's line of slurm.conf)
    KeyRule(".login.sourceCidrs{1}", _SLINKY + "LoginSet", r"spec\.service\.spec\.loadBalancerSourceRanges" + _INDEX),
    KeyRule(".accounting.enabled", _SLINKY + "Controller", r"spec\.accountingRef(\..*)?"),
    KeyRule(".partitions[{name}]", _SLINKY + "Controller", r"spec\.extraConf",
            message=r"^Partition (?P<name>[a-z][a-z0-9-]*) must limit"),
    # billing: a team namespace's cost center is the team's; every other billing tag or label is the stack's
    KeyRule(".costCenter", _NAMESPACE, r'metadata\.labels\["cost-center"\]', policies=_BILLING_TAGS),
    KeyRule(SPEC_KEY + ".labels.{1}{2}", ANY, _LABEL, policies=_BILLING_TAGS),
    KeyRule(SPEC_KEY + ".labels", _SLINKY, r"spec\.template\.metadata\.labels",
            policies=("slurm-pods-carry-billing-labels",)),
)


def _requirement(message: str) -> str:
    """The finding's own text, without the policy description the analyzer puts first."""
    return message.split("\n", 1)[1] if "\n" in message else message


def _cloud(graph: ResourceGraph) -> str:
    return "gcp" if any(r.type.startswith("gcp:") for r in graph.resources) else "aws"


def _groups(rule: KeyRule, v: Violation) -> dict[str, str] | None:
    """The template's values when ``rule`` covers ``v`` (numbered from the field, named from the message)."""
    if rule.policies and v.policy not in rule.policies:
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


def finding_key(graph: ResourceGraph, v: Violation) -> str:
    """The stack-file key path ``v``'s fix changes: the key setting its field, or the one its policy is about; the
    resource's own key (its node group, team, plane) when no stack-file key sets what the finding names."""
    base = spec_path_of(graph, graph.get(v.urn) if v.urn else None)
    for rule in RULES:
        groups = _groups(rule, v)
        if groups is not None:
            key = _fill(rule.key, {**groups, "cloud": _cloud(graph)})
            if key.startswith(SPEC_KEY):
                return key
            return base + key if base != SPEC_KEY else base  # relative to a resource's key, and none traced
    return base
