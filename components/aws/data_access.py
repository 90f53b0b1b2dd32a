"""Who may read and write checkpoints: one IAM role per team, bound to a Kubernetes service account in
the team's namespace through EKS Pod Identity, and a read-only platform role.

Pod Identity is the one way AWS access is granted inside the cluster (the CSI drivers use it too): no
node-role grants (every pod on a node would inherit them) and no OIDC provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import (
    acceptance_record_policy,
    pod_identity_trust,
    storage_check_policy,
    team_checkpoint_policy,
    to_json,
)
from components.kubernetes.objects.storage_check import STORAGE_CHECK_SERVICE_ACCOUNT, STORAGE_RECORDS_PREFIX
from components.tags import merge_tags

# The service account every team namespace gets for checkpoint access. There is no platform-wide reader: a role
# that reads every team's checkpoints had no consumer, and an unused identity with that reach is only a risk.
CHECKPOINT_SERVICE_ACCOUNT = "checkpoints"
# The acceptance gate's per-node pods: they write their records under acceptance/ of the bucket and nothing else
# (components/kubernetes/objects/acceptance.py, RECORDER_SERVICE_ACCOUNT and RECORDS_PREFIX).
RECORDER_NAMESPACE = "gpu-acceptance"
RECORDER_SERVICE_ACCOUNT = "nccl-recorder"
RECORDS_PREFIX = "acceptance"
NODE_CHECK_NAMESPACE = "gpu-node-check"  # objects/node_check.py NODE_CHECK_NAMESPACE and SERVICE_ACCOUNT
NODE_CHECK_SERVICE_ACCOUNT = "node-check"


@dataclass(frozen=True, kw_only=True)
class DataAccessArgs:
    """Inputs of :class:`AwsDataAccess`."""

    eks_cluster_name: pulumi.Input[str]
    eks_cluster_arn: pulumi.Input[str]
    physical_prefix: str
    region: str
    bucket_arn: pulumi.Input[str]
    data_key_arn: Optional[pulumi.Input[str]]
    teams: Sequence[str]
    labels: Mapping[str, str]
    acceptance_records: bool = False  # the acceptance gate writes per-node records: its recorder role
    storage_check_bucket: bool = False  # the storage check measures the bucket: its role (acceptance/storage/)


class AwsDataAccess(pulumi.ComponentResource):
    """Per-team checkpoint roles (``<team>/`` prefix, read and write) and, with the acceptance gate, the recorder's
    role (``acceptance/`` prefix, write only) and, where the storage check measures the bucket, its role
    (``acceptance/storage/`` prefix: write, read, delete).

    Attributes:
        team_role_arns: the IAM role of each team's ``checkpoints`` service account.
        recorder: the recorder's Pod Identity association (the acceptance jobs wait for it), or None.
        node_check_recorder: the node checks' association (their DaemonSets wait for it), or None.
        storage_check: the storage check's association (its Job waits for it), or None.
    """

    team_role_arns: dict[str, pulumi.Output[str]]
    recorder: Optional[aws.eks.PodIdentityAssociation]
    node_check_recorder: Optional[aws.eks.PodIdentityAssociation]
    storage_check: Optional[aws.eks.PodIdentityAssociation]

    def __init__(self, name: str, args: DataAccessArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:AwsDataAccess", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        associations: dict[str, aws.eks.PodIdentityAssociation] = {}

        def bind(key: str, physical: str, namespace: str, policy: pulumi.Output[str],
                 account: str = CHECKPOINT_SERVICE_ACCOUNT) -> pulumi.Output[str]:
            role = aws.iam.Role(
                f"{name}-{key}-role",
                name=physical,
                assume_role_policy=pulumi.Output.from_input(args.eks_cluster_arn).apply(
                    lambda arn: to_json(pod_identity_trust(arn, namespace, account))),
                tags=merge_tags(args.labels, physical),
                opts=child,
            )
            aws.iam.RolePolicy(f"{name}-{key}-policy", role=role.id, policy=policy, opts=child)
            associations[key] = aws.eks.PodIdentityAssociation(
                f"{name}-{key}-pod-identity",
                cluster_name=args.eks_cluster_name,
                namespace=namespace,
                service_account=account,
                role_arn=role.arn,
                tags=merge_tags(args.labels, f"{physical}-pod-identity"),
                opts=child,
            )
            arn: pulumi.Output[str] = role.arn
            return arn

        def team_policy(team: str) -> pulumi.Output[str]:
            return pulumi.Output.all(args.bucket_arn, args.data_key_arn or "").apply(
                lambda a: to_json(team_checkpoint_policy(str(a[0]), str(a[1]) or None, team, args.region)))

        self.team_role_arns = {}
        for team in args.teams:
            policy = team_policy(team)
            self.team_role_arns[team] = bind(
                f"team-{team}", f"{args.physical_prefix}-{team}-ckpt", team, policy)
        self.recorder = None
        self.node_check_recorder = None
        if args.acceptance_records:
            records = pulumi.Output.all(args.bucket_arn, args.data_key_arn or "").apply(
                lambda a: to_json(acceptance_record_policy(str(a[0]), str(a[1]) or None, RECORDS_PREFIX,
                                                           args.region)))
            bind("acceptance-recorder", f"{args.physical_prefix}-nccl-recorder", RECORDER_NAMESPACE, records,
                 RECORDER_SERVICE_ACCOUNT)
            self.recorder = associations["acceptance-recorder"]
            # Each GPU node's check uploads its record the same way, from its own namespace and account
            # (components/kubernetes/objects/node_check.py): a role of its own with the same write-only policy.
            bind("node-check-recorder", f"{args.physical_prefix}-node-records", NODE_CHECK_NAMESPACE, records,
                 NODE_CHECK_SERVICE_ACCOUNT)
            self.node_check_recorder = associations["node-check-recorder"]
        self.storage_check = None
        if args.storage_check_bucket:
            # The storage check's pods stream a checkpoint to acceptance/storage/, read it back and delete it
            # (components/kubernetes/objects/storage_check.py): a role of their own, that prefix only.
            check = pulumi.Output.all(args.bucket_arn, args.data_key_arn or "").apply(
                lambda a: to_json(storage_check_policy(str(a[0]), str(a[1]) or None, STORAGE_RECORDS_PREFIX,
                                                       args.region)))
            bind("storage-check", f"{args.physical_prefix}-storage-check", RECORDER_NAMESPACE, check,
                 STORAGE_CHECK_SERVICE_ACCOUNT)
            self.storage_check = associations["storage-check"]
        self.register_outputs({"teamRoleArns": self.team_role_arns})
