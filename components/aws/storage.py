"""The storage plane on AWS: the checkpoint bucket and the FSx for Lustre filesystem linked to it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import data_key_policy, deny_insecure_transport, to_json
from components.aws.stateful import private_versioned_bucket, rotating_kms_key, stateful_options
from components.spec import StorageSpec
from components.tags import merge_tags

LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
RECORDS_PREFIX = "acceptance"  # where the acceptance gate's per-node records go (components/aws/data_access.py)
S3_EVENTS = ["NEW", "CHANGED", "DELETED"]


class AwsStorage(pulumi.ComponentResource):
    """Checkpoints kept off the critical path.

    The bucket is versioned and KMS-encrypted with a rotating key, blocks every form of public access,
    refuses plain HTTP, and expires only *noncurrent* versions after the retention (a current
    checkpoint never expires). The Lustre filesystem sits in the GPU subnet, is encrypted with the same
    key, and is linked to the bucket so checkpoints written at filesystem speed are exported to S3.

    The data key's policy lets the FSx data repository link use it through S3 (the bucket is SSE-KMS with
    Bucket Keys), and the filesystem's clients (the cluster security group) accept LNet from it, so
    checkpoints really flow: node -> Lustre -> automatic export -> bucket.

    Attributes:
        bucket_name, bucket_arn: the checkpoint bucket.
        data_key_arn: the key that encrypts it (team roles use it through S3).
        filesystem_dns_name, filesystem_mount_name: what a Lustre client mounts (None without FSx).
        filesystem_id: the FSx filesystem's id (the CSI driver's volume handle), None without FSx.
        filesystem_link: the data repository association linking the filesystem's path to the bucket, or None.
    """

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    data_key_arn: Optional[pulumi.Output[str]]
    filesystem_dns_name: Optional[pulumi.Output[str]]
    filesystem_mount_name: Optional[pulumi.Output[str]]
    filesystem_id: Optional[pulumi.Output[str]]
    filesystem_link: Optional[pulumi.Resource]

    def __init__(
        self,
        name: str,
        *,
        spec: StorageSpec,
        physical_prefix: str,
        vpc_id: pulumi.Input[str],
        gpu_subnet_id: pulumi.Input[str],
        client_security_group_id: pulumi.Input[str],
        labels: Mapping[str, str],
        protect: bool,
        region: str,
        request_metrics: bool = False,
        record_retention_days: Optional[int] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:storage:AwsStorage", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)

        bucket_spec = spec.checkpoint_bucket
        fs_spec = spec.filesystem
        new_persistent_fs = fs_spec is not None and fs_spec.existing is None and \
            fs_spec.deployment_type.startswith("PERSISTENT")
        key: Optional[aws.kms.Key] = None
        if bucket_spec.existing_name is None or new_persistent_fs:
            key = rotating_kms_key(
                self, f"{name}-data-key", f"{physical_prefix}-data",
                f"{physical_prefix}: checkpoints and shared filesystem", labels, protect,
            )
        if bucket_spec.existing_name is not None:
            # An existing bucket: used by name; its encryption, versioning and policy stay its owner's.
            self.bucket_name = pulumi.Output.from_input(bucket_spec.existing_name)
            self.bucket_arn = pulumi.Output.from_input(f"arn:aws:s3:::{bucket_spec.existing_name}")
            self.data_key_arn = pulumi.Output.from_input(bucket_spec.existing_kms_key_arn) \
                if bucket_spec.existing_kms_key_arn else None
        else:
            assert key is not None
            bucket = private_versioned_bucket(
                self, f"{name}-checkpoints",
                bucket_prefix=f"{physical_prefix}-ckpt-",
                tags=merge_tags(labels, f"{physical_prefix}-checkpoints", **{"data-class": "checkpoints"}),
                protect=protect,
                encryption={"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms",
                                                                        "kms_master_key_id": key.arn},
                            "bucket_key_enabled": True},
                noncurrent_days=spec.checkpoint_bucket.noncurrent_version_retention_days,
                # The acceptance gate's records expire after their retention; checkpoints never do.
                extra_rules=[{"id": "expire-acceptance-records", "status": "Enabled",
                              "filter": {"prefix": f"{RECORDS_PREFIX}/"},
                              "expiration": {"days": record_retention_days}}] if record_retention_days else (),
            )
            if request_metrics:
                # S3 request metrics for the whole bucket (S3 user guide, "Creating a CloudWatch metrics configuration
                # for all the objects in your bucket": id EntireBucket, no filter): requests, 4xx/5xx, latencies and
                # bytes per minute in AWS/S3, billed as custom metrics (about 16 of them).
                aws.s3.BucketMetric(f"{name}-checkpoints-request-metrics", bucket=bucket.id, name="EntireBucket",
                                    opts=child)
            aws.s3.BucketPolicy(
                f"{name}-checkpoints-policy",
                bucket=bucket.id,
                policy=bucket.arn.apply(lambda arn: to_json(deny_insecure_transport(arn))),
                opts=child,
            )
            self.bucket_name = bucket.bucket
            self.bucket_arn = bucket.arn
            self.data_key_arn = key.arn
        self.filesystem_dns_name = None
        self.filesystem_mount_name = None
        self.filesystem_id = None
        self.filesystem_link = None
        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))

        def key_policy(file_system_id: Optional[pulumi.Output[str]]) -> Optional[aws.kms.KeyPolicy]:
            # The key's whole policy, managed apart from the key because the FSx statement names the
            # filesystem, which is encrypted with this key and so created after it.
            if key is None:
                return None
            doc = pulumi.Output.all(partition.partition, identity.account_id, self.bucket_arn,
                                    file_system_id if file_system_id is not None else "").apply(
                lambda a: to_json(data_key_policy(str(a[0]), str(a[1]), region, str(a[2]), str(a[3]) or None)))
            return aws.kms.KeyPolicy(f"{name}-data-key-policy", key_id=key.key_id, policy=doc, opts=child)

        def lnet(key: str, direction: str, group: pulumi.Input[str], peer: pulumi.Input[str], low: int, high: int,
                 description: str) -> pulumi.Resource:
            """One TCP rule of the Lustre port range between two security groups."""
            rule = aws.vpc.SecurityGroupIngressRule if direction == "in" else aws.vpc.SecurityGroupEgressRule
            resource: pulumi.Resource = rule(
                f"{name}-lustre-{key}-{low}",
                security_group_id=group,
                referenced_security_group_id=peer,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre {low}-{high} {description}",
                tags=merge_tags(labels, f"{physical_prefix}-lustre-{key}-{low}"),
                opts=child,
            )
            return resource

        if fs_spec is not None and fs_spec.existing is not None:
            # An existing filesystem: the nodes and it exchange LNet on both security groups; its link
            # to a bucket, if any, is its owner's.
            existing = fs_spec.existing
            between = f"between the nodes and {existing.file_system_id}"
            for low, high in LUSTRE_PORTS:
                lnet("clients-in", "in", client_security_group_id, existing.security_group_id, low, high, between)
                lnet("in-clients", "in", existing.security_group_id, client_security_group_id, low, high, between)
                # Lustre servers also open connections to their clients: allowed out of the filesystem's group
                # even where its owner removed the default allow-all egress.
                lnet("out-clients", "out", existing.security_group_id, client_security_group_id, low, high,
                     f"from {existing.file_system_id} to the nodes")
            self.filesystem_dns_name = pulumi.Output.from_input(existing.dns_name)
            self.filesystem_mount_name = pulumi.Output.from_input(existing.mount_name)
            self.filesystem_id = pulumi.Output.from_input(existing.file_system_id)
            key_policy(None)
        elif fs_spec is not None:
            sg = aws.ec2.SecurityGroup(
                f"{name}-lustre-sg",
                vpc_id=vpc_id,
                description="FSx for Lustre: LNet (988, 1018-1023) from the filesystem and its clients",
                revoke_rules_on_delete=True,
                tags=merge_tags(labels, f"{physical_prefix}-lustre"),
                opts=child,
            )
            lnet_rules: list[pulumi.Resource] = []
            for low, high in LUSTRE_PORTS:
                # The clients' side (FSx "Limiting access with security groups"): nodes accept LNet
                # from the filesystem's group; their group already lets all traffic out.
                lnet("clients-in", "in", client_security_group_id, sg.id, low, high, "from the FSx filesystem")
                for peer_name, peer in (("self", sg.id), ("clients", client_security_group_id)):
                    lnet_rules.append(lnet(f"in-{peer_name}", "in", sg.id, peer, low, high, f"from {peer_name}"))
                    lnet_rules.append(lnet(f"out-{peer_name}", "out", sg.id, peer, low, high, f"to {peer_name}"))

            persistent = fs_spec.deployment_type.startswith("PERSISTENT")
            fs = aws.fsx.LustreFileSystem(
                f"{name}-lustre",
                deployment_type=fs_spec.deployment_type,
                storage_capacity=fs_spec.capacity_gib,
                storage_type="SSD",
                per_unit_storage_throughput=fs_spec.per_unit_storage_throughput,
                subnet_ids=gpu_subnet_id,  # a single subnet (string) in pulumi-aws v7
                security_group_ids=[sg.id],
                # Persistent types encrypt with our key; scratch types always use an AWS-managed key.
                kms_key_id=key.arn if persistent and key is not None else None,
                file_system_type_version="2.15",
                data_compression_type="LZ4",
                metadata_configuration={"mode": "AUTOMATIC"} if fs_spec.deployment_type == "PERSISTENT_2" else None,
                log_configuration={"level": "WARN_ERROR"},
                copy_tags_to_backups=True if persistent else None,
                tags=merge_tags(labels, f"{physical_prefix}-lustre", **{"data-class": "checkpoints"}),
                # FSx checks at creation that the group lets LNet (988, 1018-1023) flow within itself, so the
                # rules come first (FSx for Lustre guide, "Cannot create a file system ... port 988").
                opts=stateful_options(self, protect, depends_on=lnet_rules),
            )
            policy = key_policy(fs.id if fs_spec.link_checkpoint_bucket else None)
            if fs_spec.link_checkpoint_bucket:
                # A data repository association on every deployment type the spec allows (FSx API
                # reference: "supported on all FSx for Lustre 2.12 and 2.15 file systems, excluding
                # scratch_1"), so dev exports checkpoints like prod. It waits for the key policy that
                # lets FSx's S3 role use the bucket's key; without it automatic export fails.
                self.filesystem_link = aws.fsx.DataRepositoryAssociation(
                    f"{name}-lustre-checkpoints-link",
                    file_system_id=fs.id,
                    file_system_path=fs_spec.mount_path,
                    data_repository_path=self.bucket_name.apply(lambda b: f"s3://{b}"),
                    batch_import_meta_data_on_create=True,
                    delete_data_in_filesystem=False,
                    s3={
                        "auto_export_policy": {"events": S3_EVENTS},
                        "auto_import_policy": {"events": S3_EVENTS},
                    },
                    tags=merge_tags(labels, f"{physical_prefix}-lustre-checkpoints-link"),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[policy] if policy is not None else None),
                )
            self.filesystem_dns_name = fs.dns_name
            self.filesystem_mount_name = fs.mount_name
            self.filesystem_id = fs.id
        else:
            key_policy(None)

        self.register_outputs({"bucketName": self.bucket_name})
