"""Grants that publish a bucket to everyone: S3 canned ACLs and ACL grants to the AllUsers or AuthenticatedUsers
groups, Cloud Storage IAM grants to allUsers or allAuthenticatedUsers. The security policies report them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpu_policies.common import as_dict, get

# S3 canned ACLs that grant the AllUsers or AuthenticatedUsers group (S3 user guide, "Access control list (ACL)
# overview", Canned ACL: https://docs.aws.amazon.com/AmazonS3/latest/userguide/acl-overview.html#canned-acl).
PUBLIC_CANNED_ACLS = ("public-read", "public-read-write", "authenticated-read")
# The grantee URIs of those groups (the same page, "Amazon S3 predefined groups").
PUBLIC_GROUPS = ("http://acs.amazonaws.com/groups/global/AllUsers",
                 "http://acs.amazonaws.com/groups/global/AuthenticatedUsers")
# Types that carry a bucket's ACL: the bucket itself (acl, grants; deprecated there) and its ACL resource.
S3_ACL_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2", "aws:s3/bucketAcl:BucketAcl",
                "aws:s3/bucketAclV2:BucketAclV2")
# Cloud Storage IAM principals for everyone (Cloud Storage, "Making data public"; IAM principal identifiers).
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
GCS_IAM_TYPES = ("gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding",
                 "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
                 "gcp:storage/managedFolderIamMember:ManagedFolderIamMember",
                 "gcp:storage/managedFolderIamBinding:ManagedFolderIamBinding",
                 "gcp:storage/managedFolderIamPolicy:ManagedFolderIamPolicy")


def public_s3_acl(resource_type: str, props: Mapping[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(field path, value) of each ACL setting of an S3 resource that grants everyone (or every AWS account)."""
    if resource_type not in S3_ACL_TYPES:
        return
    if str(props.get("acl")) in PUBLIC_CANNED_ACLS:
        yield ("acl",), props.get("acl")
    for i, grant in enumerate(props.get("grants") or []):  # Bucket/BucketV2 grants: {type: Group, uri}
        if isinstance(grant, Mapping) and str(grant.get("uri")) in PUBLIC_GROUPS:
            yield ("grants", i, "uri"), grant.get("uri")
    for i, grant in enumerate(get(props, "accessControlPolicy", "grants", default=[]) or []):
        uri = get(grant, "grantee", "uri")
        if str(uri) in PUBLIC_GROUPS:
            yield ("accessControlPolicy", "grants", i, "grantee", "uri"), uri


def public_gcs_members(resource_type: str, props: Mapping[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(field path, member) of each Cloud Storage IAM grant to allUsers or allAuthenticatedUsers."""
    if resource_type not in GCS_IAM_TYPES:
        return
    if str(props.get("member")) in PUBLIC_MEMBERS:
        yield ("member",), props.get("member")
    for i, member in enumerate(props.get("members") or []):
        if str(member) in PUBLIC_MEMBERS:
            yield ("members", i), member
    # An IAM policy resource holds its bindings as a JSON document (policyData); the field is the document.
    bindings = as_dict(props.get("policyData")).get("bindings") or []
    if any(str(m) in PUBLIC_MEMBERS for b in bindings if isinstance(b, Mapping) for m in b.get("members") or []):
        yield ("policyData",), props.get("policyData")
