"""Buckets published to everyone (issue 35): an S3 canned ACL or ACL grant to the AllUsers or AuthenticatedUsers
group, a Cloud Storage IAM grant to allUsers or allAuthenticatedUsers, each reported by the security policy that owns
public access, on the resource and field that grant it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.runner import run_policies
from tests.conftest import offline_run

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def _with(stack: str, type_: str, inputs: dict[str, Any], like: str) -> tuple[ResourceGraph, GraphResource]:
    """The stack's graph with one more resource of ``type_``, beside (same parent and provider) one of type ``like``."""
    graph = offline_run(stack).graph
    base = next(r for r in graph.resources if r.type == like)
    added = dataclasses.replace(base, urn=f"{base.urn.rsplit('::', 2)[0]}::{type_}::exposed", type=type_,
                                name="exposed", inputs=inputs, dependencies=[base.urn])
    return ResourceGraph(graph.stack, [*graph.resources, added]), added


S3 = [
    ("aws:s3/bucketAcl:BucketAcl", {"bucket": "b", "acl": "public-read"}, "acl", "public-read"),
    ("aws:s3/bucketAclV2:BucketAclV2", {"bucket": "b", "acl": "public-read-write"}, "acl", "public-read-write"),
    ("aws:s3/bucketAclV2:BucketAclV2", {"bucket": "b", "accessControlPolicy": {
        "owner": {"id": "o"}, "grants": [{"permission": "READ", "grantee": {"type": "Group", "uri": ALL_USERS}}]}},
     "accessControlPolicy.grants[0].grantee.uri", ALL_USERS),
    ("aws:s3/bucketV2:BucketV2", {"bucket": "b", "acl": "authenticated-read"}, "acl", "authenticated-read"),
    ("aws:s3/bucket:Bucket", {"bucket": "b", "grants": [{"type": "Group", "uri": ALL_USERS,
                                                         "permissions": ["READ"]}]}, "grants[0].uri", ALL_USERS),
]


@pytest.mark.parametrize(("type_", "inputs", "field", "value"), S3,
                         ids=[f"{t.split(':')[-1]}-{f}" for t, _, f, _ in S3])
def test_public_s3_acls_are_public_access(type_: str, inputs: dict[str, Any], field: str, value: str) -> None:
    graph, added = _with("prod-aws", type_, inputs, "aws:s3/bucket:Bucket")
    hits = [v for v in run_policies(graph).violations if v.policy == "aws-s3-bucket-public-access-blocked"
            and "through an ACL" in v.message]  # an added Bucket also lacks its public access block
    assert [(v.urn, v.field, v.value) for v in hits] == [(added.urn, field, value)]
    assert hits[0].message.endswith(f"exposed must not publish its bucket through an ACL: {value} grants every AWS "
                                    "user or account (keep the bucket private, owner-enforced object ownership; "
                                    "share through IAM).")


def test_private_acls_pass() -> None:
    graph, _ = _with("prod-aws", "aws:s3/bucketAclV2:BucketAclV2", {"bucket": "b", "acl": "private"},
                     "aws:s3/bucket:Bucket")
    assert not [v for v in run_policies(graph).violations if v.policy == "aws-s3-bucket-public-access-blocked"]


POLICY_DATA = json.dumps({"bindings": [{"role": "roles/storage.objectViewer", "members": ["allAuthenticatedUsers"]}]})
GCS = [
    ("gcp:storage/bucketIAMMember:BucketIAMMember", {"member": "allUsers"}, "member", "allUsers"),
    ("gcp:storage/bucketIAMBinding:BucketIAMBinding", {"members": ["group:ml@example.com", "allAuthenticatedUsers"]},
     "members[1]", "allAuthenticatedUsers"),
    ("gcp:storage/bucketIAMPolicy:BucketIAMPolicy", {"policyData": POLICY_DATA}, "policyData", POLICY_DATA),
    ("gcp:storage/managedFolderIamMember:ManagedFolderIamMember", {"member": "allUsers"}, "member", "allUsers"),
]


@pytest.mark.parametrize(("type_", "inputs", "field", "value"), GCS, ids=[t.split(":")[-1] for t, _, _, _ in GCS])
def test_gcs_grants_to_everyone_are_refused(type_: str, inputs: dict[str, Any], field: str, value: str) -> None:
    graph, added = _with("prod-gcp", type_, {"bucket": "b", "role": "roles/storage.objectViewer", **inputs},
                         "gcp:storage/bucket:Bucket")
    report = run_policies(graph)
    hits = [v for v in report.violations if v.policy == "gcp-storage-bucket-public-access-prevented"]
    assert [(v.urn, v.field, v.value, v.enforcement) for v in hits] == [(added.urn, field, value, "mandatory")]
    assert not report.passed
    assert hits[0].message.endswith("exposed must not grant roles/storage.objectViewer on a bucket to allUsers or "
                                    "allAuthenticatedUsers: that publishes its objects to the internet (grant the "
                                    "team's service accounts or groups instead).")


def test_gcs_grants_to_named_principals_pass() -> None:
    graph, _ = _with("prod-gcp", "gcp:storage/bucketIAMMember:BucketIAMMember",
                     {"bucket": "b", "role": "roles/storage.objectViewer", "member": "group:ml@example.com"},
                     "gcp:storage/bucket:Bucket")
    assert run_policies(graph).passed


def test_every_type_the_exposure_checks_name_is_a_type_the_sdks_register() -> None:
    """A misspelt type token never matches a resource (managedFolderIAMMember for the SDK's managedFolderIamMember
    made the check blind): every token is read back from the installed pulumi_aws and pulumi_gcp sources."""
    import importlib.util
    from pathlib import Path

    from gpu_policies.exposure import GCS_IAM_TYPES, S3_ACL_TYPES

    for token in (*S3_ACL_TYPES, *GCS_IAM_TYPES):
        package = "pulumi_aws" if token.startswith("aws:") else "pulumi_gcp"
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.origin is not None
        module = token.split(":")[1].split("/")[0]
        sources = Path(spec.origin).parent / module
        assert any(f"'{token}'" in path.read_text() for path in sources.glob("*.py")), token
