"""IAM and KMS policy documents as typed data (never string templates), built by pure functions.

Each function returns a :class:`PolicyDocument`; :func:`to_json` serialises it for a resource input.
Kept free of Pulumi so the exact grants are tested directly (``tests/program/test_deployability.py``,
``tests/program/test_telemetry.py``).
"""

from __future__ import annotations

import json
from typing import Literal, NotRequired, TypedDict

ConditionBlock = dict[str, dict[str, str | list[str]]]


class Statement(TypedDict):
    """One statement of an IAM or KMS key policy."""

    Sid: str
    Effect: Literal["Allow", "Deny"]
    Action: list[str]
    Resource: NotRequired[str | list[str]]
    Principal: NotRequired[dict[str, str | list[str]] | Literal["*"]]
    Condition: NotRequired[ConditionBlock]


class PolicyDocument(TypedDict):
    """An IAM policy document (identity, trust, resource or key policy)."""

    Version: Literal["2012-10-17"]
    Statement: list[Statement]


def document(*statements: Statement) -> PolicyDocument:
    """A policy document of the given statements."""
    return {"Version": "2012-10-17", "Statement": list(statements)}


def to_json(doc: PolicyDocument) -> str:
    """The document as the JSON string resource inputs take (stable key order)."""
    return json.dumps(doc, sort_keys=True)


def service_trust(service: str) -> PolicyDocument:
    """Trust policy letting one AWS service principal assume a role."""
    return document({"Sid": "AssumeByService", "Effect": "Allow", "Principal": {"Service": service},
                     "Action": ["sts:AssumeRole"]})


def cni_ipv6_policy() -> PolicyDocument:
    """What the VPC CNI needs on an IPv6 cluster; AWS publishes it as a policy to create, not a managed one (EKS user
    guide, "Create an IAM policy for clusters that use the IPv6 family", AmazonEKS_CNI_IPv6_Policy)."""
    return document(
        {"Sid": "AssignIpv6", "Effect": "Allow",
         "Action": ["ec2:AssignIpv6Addresses", "ec2:DescribeInstances", "ec2:DescribeTags",
                    "ec2:DescribeNetworkInterfaces", "ec2:DescribeInstanceTypes"], "Resource": "*"},
        {"Sid": "TagInterfaces", "Effect": "Allow", "Action": ["ec2:CreateTags"],
         "Resource": ["arn:aws:ec2:*:*:network-interface/*"]})


# EKS Pod Identity: the agent on each node assumes the role for the pod with the pods.eks.amazonaws.com
# principal and tags the session (EKS user guide, "Create an IAM role with a trust policy for EKS Pod
# Identity": actions sts:AssumeRole and sts:TagSession).
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def pod_identity_trust(cluster_arn: str, namespace: str, service_account: str) -> PolicyDocument:
    """Trust policy of a role bound to one Kubernetes service account of one cluster through EKS Pod Identity.

    Pod Identity adds session tags naming the cluster, namespace and service account of the pod it serves; the EKS
    user guide ("Create IAM role with trust policy required by EKS Pod Identity", Setting Conditions) restricts a
    role with ``aws:RequestTag`` conditions on them, so an association made for another cluster or service account
    (by someone who may create associations) cannot take the role."""
    return document({"Sid": "AssumeByEksPodIdentity", "Effect": "Allow",
                     "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                     "Action": ["sts:AssumeRole", "sts:TagSession"],
                     "Condition": {"StringEquals": {"aws:RequestTag/eks-cluster-arn": cluster_arn,
                                                    "aws:RequestTag/kubernetes-namespace": namespace,
                                                    "aws:RequestTag/kubernetes-service-account": service_account}}})


def fsx_csi_static_policy() -> PolicyDocument:
    """What the FSx CSI controller needs when every volume is statically provisioned: describing filesystems.

    Its controller calls the FSx API only to create, delete or resize volumes it provisions, and to describe one
    when validating capabilities (kubernetes-sigs/aws-fsx-csi-driver v1.9.0 pkg/driver/controller.go); the node
    plugin mounts without AWS calls. The driver's install guide grants AmazonFSxFullAccess, which could delete the
    protected filesystem; the platform's volumes are static and Retain, so describe is all it keeps."""
    return document({"Sid": "DescribeFileSystems", "Effect": "Allow", "Action": ["fsx:DescribeFileSystems"],
                     "Resource": "*"})


def _via_s3(region: str) -> ConditionBlock:
    return {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}


def team_checkpoint_policy(bucket_arn: str, key_arn: str | None, prefix: str, region: str) -> PolicyDocument:
    """Read and write one team's prefix of the checkpoint bucket (``<team>/``), and nothing else.

    Listing is limited to the prefix with the ``s3:prefix`` condition; object actions are limited by
    resource ARN. The data key may be used only through S3 (SSE-KMS), not directly.
    """
    top = prefix.rstrip("/") + "/"
    statements: list[Statement] = [
        {"Sid": "ListTeamPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [top, f"{top}*"]}}},
        {"Sid": "ReadWriteTeamObjects", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject",
                    "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
         "Resource": f"{bucket_arn}/{top}*"},
    ]
    if key_arn:  # an existing bucket without a known key is SSE-S3: no key to grant
        statements.append({"Sid": "UseDataKeyThroughS3", "Effect": "Allow",
                           "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": key_arn,
                           "Condition": _via_s3(region)})
    return document(*statements)


def weights_read_policy(bucket_arn: str, key_arn: str | None, prefix: str, region: str) -> PolicyDocument:
    """Read one served model's weights (``<prefix>`` of the bucket), and nothing else: list that prefix (the streamer
    and vLLM list it for the safetensors, config.json and the tokenizer), get its objects, decrypt through S3 only. No
    write, no delete, no other prefix."""
    top = prefix.rstrip("/") + "/"
    statements: list[Statement] = [
        {"Sid": "ListWeightsPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [top, f"{top}*"]}}},
        {"Sid": "ReadWeights", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": f"{bucket_arn}/{top}*"},
    ]
    if key_arn:
        statements.append({"Sid": "DecryptThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt"],
                           "Resource": key_arn, "Condition": _via_s3(region)})
    return document(*statements)


def acceptance_record_policy(bucket_arn: str, key_arn: str | None, prefix: str, region: str) -> PolicyDocument:
    """Write the acceptance gate's records under ``<prefix>/`` of the checkpoint bucket, and nothing else: no read, no
    list, no delete, no other prefix (the per-node pods upload with ``aws s3 cp``, one PutObject per small file). The
    data key only to encrypt through S3 (SSE-KMS)."""
    top = prefix.rstrip("/") + "/"
    statements: list[Statement] = [
        {"Sid": "WriteAcceptanceRecords", "Effect": "Allow", "Action": ["s3:PutObject"],
         "Resource": f"{bucket_arn}/{top}*"},
    ]
    if key_arn:
        statements.append({"Sid": "EncryptThroughS3", "Effect": "Allow", "Action": ["kms:GenerateDataKey"],
                           "Resource": key_arn, "Condition": _via_s3(region)})
    return document(*statements)


# What the storage check's streams call (the AWS CLI's s3transfer): a stream over the multipart threshold is
# CreateMultipartUpload, UploadPart and CompleteMultipartUpload, all authorised by s3:PutObject, and
# AbortMultipartUpload (s3:AbortMultipartUpload) when it fails; a download is HeadObject and ranged GetObject, both
# s3:GetObject; ``aws s3 rm`` is DeleteObject; ``aws s3 ls`` is ListObjectsV2, s3:ListBucket (S3 user guide,
# "Multipart upload API and permissions"; Service Authorization Reference, Amazon S3 actions). ListParts
# (s3:ListMultipartUploadParts) is never called by ``aws s3 cp``, so it is not granted.
STORAGE_CHECK_OBJECT_ACTIONS = ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload")


def storage_check_policy(bucket_arn: str, key_arn: str | None, prefix: str, region: str) -> PolicyDocument:
    """Write, read back and delete the storage check's checkpoint under ``<prefix>/`` of the checkpoint bucket, and
    list that prefix (its barriers; a missing object is then a 404, not a 403), nothing else. The data key only
    through S3: GenerateDataKey to write, Decrypt to read and to complete a multipart upload of an SSE-KMS object
    (S3 user guide, "Using server-side encryption with AWS KMS keys": multipart uploads need kms:Decrypt and
    kms:GenerateDataKey). The bucket's key policy leaves its use to the account's IAM policies
    (:func:`data_key_policy`, EnableIamPolicies), so this grant is enough. No s3:DeleteObjectVersion: on the
    versioned bucket a deleted share stays as a noncurrent version until the bucket's retention removes it."""
    top = prefix.rstrip("/") + "/"
    statements: list[Statement] = [
        {"Sid": "ListStorageCheckPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": [top, f"{top}*"]}}},
        {"Sid": "ReadWriteStorageCheckObjects", "Effect": "Allow", "Action": list(STORAGE_CHECK_OBJECT_ACTIONS),
         "Resource": f"{bucket_arn}/{top}*"},
    ]
    if key_arn:
        statements.append({"Sid": "UseDataKeyThroughS3", "Effect": "Allow",
                           "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": key_arn,
                           "Condition": _via_s3(region)})
    return document(*statements)


# What yet-another-cloudwatch-exporter needs for discovery and static jobs (YACE v0.67.0 README, "the bare minimum
# permissions required to run Static and Discovery Jobs"); none of these actions supports a resource narrower than *
# (Service Authorization Reference: CloudWatch GetMetricData, GetMetricStatistics, ListMetrics; Resource Groups
# Tagging GetResources). They are reads.
CLOUDWATCH_READ_ACTIONS = ("tag:GetResources", "cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics",
                           "cloudwatch:ListMetrics")


def cloudwatch_read_policy() -> PolicyDocument:
    """Read CloudWatch metrics and find the stack's tagged resources (the storage metrics exporter)."""
    return document({"Sid": "ReadMetrics", "Effect": "Allow", "Action": list(CLOUDWATCH_READ_ACTIONS),
                     "Resource": "*"})


# Fluent Bit's cloudwatch_logs output with auto_create_group off: it describes and creates streams and puts events
# (fluent-bit docs, "Amazon CloudWatch": permissions CreateLogStream, DescribeLogStreams, PutLogEvents; CreateLogGroup
# and PutRetentionPolicy only for auto_create_group and log_retention_days, both off here).
LOG_SHIPPING_ACTIONS = ("logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents")


def log_shipping_policy(group_arns: list[str]) -> PolicyDocument:
    """Ship to the listed log groups only: each group and its streams (``<arn>:*``, the ARN Pulumi reports has no
    ``:*``)."""
    resources = [a for arn in group_arns for a in (arn, f"{arn}:*")]
    return document({"Sid": "ShipToTheStackLogGroups", "Effect": "Allow", "Action": list(LOG_SHIPPING_ACTIONS),
                     "Resource": resources})


def logs_key_policy(partition: str, account: str, region: str, group_prefix: str) -> PolicyDocument:
    """Key policy of the key that encrypts the stack's container and node log groups: the account's IAM policies decide
    who uses it, and CloudWatch Logs in this region may use it for log groups under ``group_prefix`` only (CloudWatch
    Logs user guide, "Encrypt log data in CloudWatch Logs using AWS KMS": principal logs.<region>.amazonaws.com,
    Encrypt*, Decrypt*, ReEncrypt*, GenerateDataKey*, Describe*, condition ArnLike
    kms:EncryptionContext:aws:logs:arn)."""
    return document(
        {"Sid": "EnableIamPolicies", "Effect": "Allow", "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
         "Action": ["kms:*"], "Resource": "*"},
        {"Sid": "CloudWatchLogsOfThisStack", "Effect": "Allow",
         "Principal": {"Service": f"logs.{region}.amazonaws.com"},
         "Action": ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
         "Resource": "*",
         "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn":
                                   f"arn:{partition}:logs:{region}:{account}:log-group:{group_prefix}*"}}},
    )


def deny_insecure_transport(bucket_arn: str) -> PolicyDocument:
    """Bucket policy refusing every request that does not use TLS."""
    return document({"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": ["s3:*"],
                     "Resource": [bucket_arn, f"{bucket_arn}/*"],
                     "Condition": {"Bool": {"aws:SecureTransport": "false"}}})


def fsx_s3_access_role_arn(partition: str, account: str, file_system_id: str) -> str:
    """The service-linked role FSx for Lustre creates to reach a linked S3 bucket, for one file system."""
    return (f"arn:{partition}:iam::{account}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
            f"AWSServiceRoleForFSxS3Access_{file_system_id}")


def data_key_policy(partition: str, account: str, region: str, bucket_arn: str,
                    fsx_file_system_id: str | None) -> PolicyDocument:
    """Key policy of the data key that encrypts the checkpoint bucket (and the persistent filesystem).

    The first statement is the default key policy (the account's IAM policies decide who uses the key;
    without it the key would lock out its own administrators). The second lets the FSx data repository
    link read and export objects of the SSE-KMS bucket: FSx for Lustre user guide, "Working with
    server-side encrypted Amazon S3 buckets" — the ``AWSServiceRoleForFSxS3Access_<fs-id>`` role needs
    Encrypt, Decrypt, ReEncrypt*, GenerateDataKey* and DescribeKey through S3. The encryption context is the
    bucket's ARN for objects written with an S3 Bucket Key (the bucket's default) and the object's ARN for
    objects written without one (a PUT with ``x-amz-server-side-encryption-bucket-key-enabled: false``, or
    written before the bucket key was enabled): S3 user guide, "Reducing the cost of SSE-KMS with Amazon S3
    Bucket Keys" (changes to the encryption context). Both forms are listed, or such objects would not load.
    """
    statements: list[Statement] = [
        {"Sid": "EnableIamPolicies", "Effect": "Allow", "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
         "Action": ["kms:*"], "Resource": "*"},
    ]
    if fsx_file_system_id is not None:
        # The role is named by condition, not as the principal: FSx creates it when the data repository
        # association is created, after this policy, and KMS refuses a policy whose principal does not
        # exist yet. aws:PrincipalArn is the role's ARN for its sessions; kms:CallerAccount keeps it in the
        # account (the FSx guide's account-wide variant uses Principal "*" the same way).
        via: dict[str, str | list[str]] = {"kms:ViaService": f"s3.{region}.amazonaws.com",
                                           "kms:CallerAccount": account}
        role: dict[str, str | list[str]] = {
            "aws:PrincipalArn": fsx_s3_access_role_arn(partition, account, fsx_file_system_id)}
        statements.append({
            "Sid": "FsxLustreS3DataRepository", "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"],
            "Resource": "*",
            "Condition": {"StringEquals": via, "ArnEquals": role,
                          "StringLike": {"kms:EncryptionContext:aws:s3:arn": [bucket_arn, f"{bucket_arn}/*"]}},
        })
        # DescribeKey carries no encryption context, so under the statement above it would never be allowed.
        statements.append({
            "Sid": "FsxLustreS3DataRepositoryDescribeKey", "Effect": "Allow", "Principal": {"AWS": "*"},
            "Action": ["kms:DescribeKey"], "Resource": "*",
            "Condition": {"StringEquals": via, "ArnEquals": role},
        })
    return document(*statements)


# AWS Data Exports (CUR 2.0) write to the bucket as these two service principals, and only from
# us-east-1, where the Data Exports API lives (AWS Data Exports guide, "Setting up an Amazon S3 bucket for
# data exports"; the same grant in terraform-provider-aws' bcmdataexports acceptance tests).
DATA_EXPORT_PRINCIPALS = ["billingreports.amazonaws.com", "bcm-data-exports.amazonaws.com"]
DATA_EXPORT_REGION = "us-east-1"


def cost_export_bucket_policy(partition: str, account: str, bucket_arn: str) -> PolicyDocument:
    """The export bucket's policy: the Data Exports service may write (for this account's exports only), and
    nothing reaches the bucket without TLS."""
    return document(
        {"Sid": "DataExportsWrite", "Effect": "Allow", "Principal": {"Service": list(DATA_EXPORT_PRINCIPALS)},
         "Action": ["s3:PutObject", "s3:GetBucketPolicy"], "Resource": [bucket_arn, f"{bucket_arn}/*"],
         "Condition": {
             "StringLike": {"aws:SourceArn": [
                 f"arn:{partition}:cur:{DATA_EXPORT_REGION}:{account}:definition/*",
                 f"arn:{partition}:bcm-data-exports:{DATA_EXPORT_REGION}:{account}:export/*",
             ]},
             "StringEquals": {"aws:SourceAccount": account},
         }},
        *deny_insecure_transport(bucket_arn)["Statement"],
    )
