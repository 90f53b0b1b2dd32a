"""Resource options for anything that holds data: protected and retained where the spec says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.tags import merge_tags


def stateful_options(
    parent: pulumi.Resource,
    protect: bool,
    ignore_changes: Optional[Sequence[str]] = None,
    depends_on: Optional[Sequence[pulumi.Resource]] = None,
) -> pulumi.ResourceOptions:
    """Options for buckets, filesystems, KMS keys and clusters.

    ``protect`` makes ``pulumi up``/``destroy`` refuse to delete the resource; ``retain_on_delete``
    keeps the cloud object if the resource is ever removed from the program. ``ignore_changes`` lists
    name-like properties derived from the cluster name, so that renaming the cluster never replaces
    (and so deletes) the data. Logical names of stateful resources do not contain the cluster name,
    so a rename keeps their URNs.
    """
    return pulumi.ResourceOptions(
        parent=parent,
        protect=protect,
        retain_on_delete=protect,
        ignore_changes=list(ignore_changes) if ignore_changes else None,
        depends_on=list(depends_on) if depends_on else None,
    )


def rotating_kms_key(
    parent: pulumi.Resource,
    logical_name: str,
    alias: str,
    description: str,
    labels: Mapping[str, str],
    protect: bool,
) -> aws.kms.Key:
    """A customer-managed key that rotates yearly, with a 30-day deletion window and an alias.

    The key is stateful (data encrypted with it is lost with it), so it gets :func:`stateful_options`.
    """
    key = aws.kms.Key(
        logical_name,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=30,
        tags=merge_tags(labels, alias),
        opts=stateful_options(parent, protect),
    )
    aws.kms.Alias(f"{logical_name}-alias", name=f"alias/{alias}", target_key_id=key.key_id,
                  opts=pulumi.ResourceOptions(parent=parent))
    return key


def private_versioned_bucket(
    parent: pulumi.Resource,
    logical_name: str,
    *,
    bucket_prefix: str,
    tags: Mapping[str, str],
    protect: bool,
    encryption: Mapping[str, object],
    noncurrent_days: int,
    extra_rules: Sequence[Mapping[str, object]] = (),
) -> aws.s3.Bucket:
    """A bucket that holds data: owner-enforced, every public access blocked, versioned, encrypted by default,
    and a lifecycle that expires only *noncurrent* versions after ``noncurrent_days`` (a current object never
    expires) and aborts multipart uploads left for a week. The parts are named ``<logical_name>-ownership``,
    ``-public-access``, ``-versioning``, ``-sse`` and ``-lifecycle``; ``encryption`` is the one SSE rule;
    ``extra_rules`` are lifecycle rules for prefixes that hold records, not data (the acceptance gate's)."""
    child = pulumi.ResourceOptions(parent=parent)
    bucket = aws.s3.Bucket(
        logical_name,
        bucket_prefix=bucket_prefix,
        force_destroy=False,
        tags=dict(tags),
        opts=stateful_options(parent, protect, ignore_changes=["bucketPrefix"]),
    )
    aws.s3.BucketOwnershipControls(f"{logical_name}-ownership", bucket=bucket.id,
                                   rule={"object_ownership": "BucketOwnerEnforced"}, opts=child)
    aws.s3.BucketPublicAccessBlock(
        f"{logical_name}-public-access", bucket=bucket.id, block_public_acls=True, block_public_policy=True,
        ignore_public_acls=True, restrict_public_buckets=True, opts=child)
    versioning = aws.s3.BucketVersioning(
        f"{logical_name}-versioning", bucket=bucket.id, versioning_configuration={"status": "Enabled"},
        opts=stateful_options(parent, protect))
    aws.s3.BucketServerSideEncryptionConfiguration(f"{logical_name}-sse", bucket=bucket.id,
                                                   rules=[dict(encryption)], opts=child)
    aws.s3.BucketLifecycleConfiguration(
        f"{logical_name}-lifecycle",
        bucket=bucket.id,
        rules=[
            {"id": "expire-noncurrent-versions", "status": "Enabled", "filter": {},
             "noncurrent_version_expiration": {"noncurrent_days": noncurrent_days}},
            {"id": "abort-incomplete-multipart-uploads", "status": "Enabled", "filter": {},
             "abort_incomplete_multipart_upload": {"days_after_initiation": 7}},
            *(dict(r) for r in extra_rules),
        ],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[versioning]),
    )
    return bucket
