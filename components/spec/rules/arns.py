"""Every ARN an AWS stack names is of the stack's partition: a role, key or resource group of another partition
(aws-cn, aws-us-gov) cannot be used from this one, and EKS refuses an access entry for it at apply time."""

from __future__ import annotations

from collections.abc import Iterator

from components.spec.aws import AwsSpec
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec

# The partition of a region (AWS General Reference, "Amazon Resource Names (ARNs)": aws, aws-cn for the China
# regions, aws-us-gov for AWS GovCloud (US)); the region catalog holds commercial regions only, so today every stack
# is in aws, and the rule still names the right partition if a region of another one is added.
_PARTITIONS = (("cn-", "aws-cn"), ("us-gov-", "aws-us-gov"))


def partition_of(region: str) -> str:
    """The ARN partition of an AWS region."""
    return next((p for prefix, p in _PARTITIONS if region.startswith(prefix)), "aws")


def _arns(spec: ClusterSpec, aws: AwsSpec) -> Iterator[tuple[str, str]]:
    """(key path, ARN) of every ARN the stack names."""
    cp = aws.control_plane
    for i, arn in enumerate(cp.admin_role_arns):
        yield f".aws.controlPlane.adminRoleArns[{i}]", arn
    yield ".aws.controlPlane.deployer.roleArn", cp.deployer.role_arn
    for t, team in enumerate(spec.teams):
        for j, arn in enumerate(team.role_arns):
            yield f".teams[{t}].roleArns[{j}]", arn
    key = aws.storage.checkpoint_bucket.existing_kms_key_arn
    if key is not None:
        yield ".aws.storage.checkpointBucket.existingKmsKeyArn", key
    for g, group in enumerate(aws.node_groups):
        pool = group.capacity.reservation_resource_group_arn
        if pool is not None:
            yield f".aws.nodeGroups[{g}].capacity.reservationResourceGroupArn", pool


def _check_arn_partitions(spec: ClusterSpec, out: _Collector) -> None:
    aws = spec.aws
    if aws is None:
        return
    expected = partition_of(aws.region)
    for where, arn in _arns(spec, aws):
        parts = arn.split(":", 2)
        if len(parts) >= 2 and parts[0] == "arn" and parts[1] != expected:
            out.add(where, "arn-partition",
                    f"'{arn}' is in partition '{parts[1]}', but region {aws.region} is in '{expected}': an ARN is "
                    f"only usable in its own partition (arn:{expected}:...)")
