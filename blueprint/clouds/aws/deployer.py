"""AWS in the deployer family: the IAM policy the deployer role (the aws provider's assumeRole) needs for exactly the
stack's graph, from ``deployer_permissions.yaml``.

Statements are grouped by service. A resource is named where the graph can say which: iam:PassRole on the roles the
graph hands a service (with iam:PassedToService where the table names the service), the stack's own roles for the IAM
role actions, the stack's buckets (their names or name prefixes) for the S3 actions, FSx's S3-access service-linked
role for the data repository link, and service-linked roles by iam:AWSServiceName. Everything else is Resource "*":
the ids (vpc-..., fs-..., key ids, node group names with their uuids) exist only after create."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from blueprint.changes.cloud import inputs_at
from blueprint.clouds.aws.graph import OFFLINE_ACCOUNT
from blueprint.deployer.cloud import DeployerPolicy
from blueprint.deployer.table import Table, Used, load_table, needing, no_cloud_table
from blueprint.graph.model import ResourceGraph

TABLE = Path(__file__).with_name("deployer_permissions.yaml")
EXTRA_KEYS = ("pass_role", "service_linked_role", "scope")
PROVIDER = "pulumi:providers:aws"
ROLE = "aws:iam/role:Role"
BUCKET = "aws:s3/bucket:Bucket"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
POLICY_VERSION = "2012-10-17"
# A customer managed policy holds at most 6,144 characters, white space aside (IAM User Guide, "IAM and AWS STS
# quotas"); past it the policy is split over several, each under it.
MANAGED_POLICY_CHARS = 6144
FSX_S3_ROLE = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
_ARN_ACCOUNT = re.compile(r"^arn:([^:]+):iam::(\d{12}):")


@cache
def table() -> Table:
    """This folder's deployer_permissions.yaml."""
    return load_table(TABLE, EXTRA_KEYS)


class _Where:
    """The partition, account and deployer role of the stack, from the aws provider's inputs."""

    def __init__(self, graph: ResourceGraph) -> None:
        provider = next(iter(graph.of_type(PROVIDER)), None)
        inputs = provider.inputs if provider is not None else {}
        assume = inputs.get("assumeRoles") or inputs.get("assumeRole") or []
        if isinstance(assume, str):
            try:
                assume = json.loads(assume)
            except json.JSONDecodeError:
                assume = []
        roles = assume if isinstance(assume, list) else [assume]
        self.principal = next((str(r["roleArn"]) for r in roles if isinstance(r, dict) and r.get("roleArn")), "")
        match = _ARN_ACCOUNT.match(self.principal)
        region = str(inputs.get("region") or "")
        self.partition = match.group(1) if match else (
            "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws")
        self.account = match.group(2) if match else "*"

    def role(self, name_or_pattern: str) -> str:
        return f"arn:{self.partition}:iam::{self.account}:{name_or_pattern}"

    def passed(self, arn: str) -> str:
        """A role ARN from the graph, in the deployer's account when the offline engine made it up."""
        match = _ARN_ACCOUNT.match(arn)
        if match and match.group(2) == OFFLINE_ACCOUNT:
            return f"arn:{self.partition}:iam::{self.account}:" + arn[match.end():]
        return arn


def _named(graph: ResourceGraph, type_: str, key: str, prefix_key: str, arn: Callable[[str], str]) -> list[str]:
    """ARNs of the graph's resources of a type by their name, or their name prefix with ``*``."""
    out = []
    for res in graph.of_type(type_):
        name, prefix = res.inputs.get(key), res.inputs.get(prefix_key)
        out.append(arn(name) if isinstance(name, str) and name else arn(f"{prefix}*") if isinstance(prefix, str)
                   and prefix else arn("*"))
    return sorted(set(out))


def _scopes(graph: ResourceGraph, where: _Where) -> dict[str, list[str]]:
    return {
        "roles": _named(graph, ROLE, "name", "namePrefix", lambda n: where.role(f"role/{n}")),
        "buckets": _named(graph, BUCKET, "bucket", "bucketPrefix", lambda n: f"arn:{where.partition}:s3:::{n}"),
        "fsx-s3-role": [where.role(FSX_S3_ROLE)],
    }


SCOPE_SIDS = {"roles": "StackRoles", "buckets": "StackBuckets", "fsx-s3-role": "FsxS3LinkRole"}


def _camel(text: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", text) if part)


def deployer_policy(graph: ResourceGraph, used: Sequence[Used]) -> DeployerPolicy:
    """The IAM policy document for the deployer role, with the types that need nothing and why."""
    where = _Where(graph)
    scopes = _scopes(graph, where)
    grouped: dict[tuple[str, str], set[str]] = {}  # (Sid, resources as JSON) -> actions
    passed: dict[str, set[str]] = {}  # the service a role is passed to ("" when not named) -> role ARNs
    linked: set[str] = set()
    permissions: dict[str, list[str]] = {}
    uses, none = needing(used)
    for use in uses:
        entry = use.entry
        actions = entry.permissions(use.resources)
        scope = entry.extra.get("scope") or {}
        for action in actions:
            service = action.partition(":")[0]
            key = (_camel(service) + SCOPE_SIDS[scope[service]], json.dumps(scopes[scope[service]])) \
                if service in scope else (_camel(service), json.dumps("*"))
            grouped.setdefault(key, set()).add(action)
        pass_role = entry.extra.get("pass_role")
        if pass_role:
            arns = {where.passed(arn) for res in use.resources for key in pass_role["inputs"]
                    for arn in _values(inputs_at(res.inputs, key))}
            if arns:
                passed.setdefault(str(pass_role.get("service") or ""), set()).update(arns)
                actions.add("iam:PassRole")
        if entry.extra.get("service_linked_role"):
            linked.add(str(entry.extra["service_linked_role"]))
            actions.add("iam:CreateServiceLinkedRole")
        permissions[use.token] = sorted(actions)
    statements: list[dict[str, Any]] = [
        {"Sid": sid, "Effect": "Allow", "Action": sorted(actions), "Resource": json.loads(resources)}
        for (sid, resources), actions in sorted(grouped.items())]
    for service, arns in sorted(passed.items()):
        statement: dict[str, Any] = {"Sid": "PassRoleTo" + _camel(service.split(".")[0]) if service else "PassRole",
                                     "Effect": "Allow", "Action": ["iam:PassRole"], "Resource": sorted(arns)}
        if service:
            statement["Condition"] = {"StringEquals": {"iam:PassedToService": service}}
        statements.append(statement)
    if linked:
        statements.append({"Sid": "ServiceLinkedRoles", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
                           "Resource": [where.role("role/aws-service-role/*")],
                           "Condition": {"StringEquals": {"iam:AWSServiceName": sorted(linked)}}})
    document = {"Version": POLICY_VERSION, "Statement": statements}
    parts = managed_policies(document)
    notes = (f"{_chars(document):,} characters without white space, over the {MANAGED_POLICY_CHARS:,} one customer "
             f"managed policy holds: in JSON, managedPolicies splits it into {len(parts)} (or attach the whole as an "
             "inline policy: 10,240 characters per role)",) if len(parts) > 1 else ()
    return DeployerPolicy(
        cloud="aws", stack=graph.stack, key="policy", document=document, principal=where.principal,
        attach=("aws iam create-policy --policy-name <name> --policy-document file://policy.json, then "
                f"aws iam attach-role-policy --role-name {where.principal.rpartition('/')[2] or '<deployer role>'} "
                "--policy-arn <its ARN>"),
        grants=(), permissions=permissions, none=none, not_covered=_not_covered(graph, where),
        tables=(table(), no_cloud_table()), notes=notes, parts=tuple(parts))


def _chars(document: dict[str, Any]) -> int:
    return len(json.dumps(document, separators=(",", ":")))


def managed_policies(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The document as few customer managed policies as hold its statements, in order, each within the limit."""
    parts: list[dict[str, Any]] = []
    for statement in document["Statement"]:
        if parts and _chars({**parts[-1], "Statement": [*parts[-1]["Statement"], statement]}) <= MANAGED_POLICY_CHARS:
            parts[-1]["Statement"].append(statement)
        else:
            parts.append({"Version": document["Version"], "Statement": [statement]})
    return parts


def _values(value: Any) -> list[str]:
    if isinstance(value, list):
        return [v for item in value for v in _values(item)]
    return [value] if isinstance(value, str) and value.startswith("arn:") else []


def _not_covered(graph: ResourceGraph, where: _Where) -> tuple[str, ...]:
    deployer_entry = any(res.inputs.get("principalArn") == where.principal for res in graph.of_type(ACCESS_ENTRY))
    kubernetes = ("Kubernetes objects (namespaces, RBAC, Helm releases, CRDs): authorised by the cluster, not IAM; "
                  + ("the graph gives the deployer role an EKS access entry with AmazonEKSClusterAdminPolicy"
                     if deployer_entry else "give the deployer role an EKS access entry with cluster-admin rights"))
    return (
        kubernetes,
        "the Pulumi state backend (an S3 bucket or Pulumi Cloud): its own access, outside this stack",
        "sts:AssumeRole into the deployer role: the CI runner's permission, allowed by the role's trust policy",
    )
