"""External Secrets' identity on EKS: a role that reads exactly the secret holding Slurm's sssd.conf
(``scheduler.slurm.login.sssdConfFrom``), bound to ESO's controller through EKS Pod Identity.

What it needs (external-secrets v2.9.0 providers/v1/aws/secretsmanager: reading one secret by key calls only
GetSecretValue; AWS Secrets Manager API reference, GetSecretValue "Required permissions": secretsmanager:GetSecretValue,
and kms:Decrypt when the secret is encrypted with a customer managed key): ESO's own docs grant more (DescribeSecret,
ListSecretVersionIds, GetResourcePolicy) for features not used here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import PolicyDocument, Statement, document, to_json
from components.aws.pod_identity import pod_identity_role
from components.kubernetes.objects.slurm_secrets import ESO_NAMESPACE, ESO_SERVICE_ACCOUNT


def secret_arns(key: str, partition: str, region: str, account: str) -> list[str]:
    """The IAM resources of the secret ``key`` names: its ARN as given and with the six characters Secrets Manager
    appends (a partial ARN), or, for a name, the secret of that name in the stack's account and region (IAM user guide,
    Secrets Manager resource ARNs: ``secret:<name>-??????``)."""
    if key.startswith("arn:"):
        return [key, f"{key}-??????"]
    return [f"arn:{partition}:secretsmanager:{region}:{account}:secret:{key}-??????"]


def secret_read_policy(arns: list[str], kms_key_arn: str | None, region: str) -> PolicyDocument:
    """Read the one secret's value; decrypt with its customer managed key only through Secrets Manager in the
    region (AWS KMS developer guide, kms:ViaService: ``secretsmanager.<region>.amazonaws.com``)."""
    statements: list[Statement] = [{"Sid": "ReadSssdConf", "Effect": "Allow",
                                    "Action": ["secretsmanager:GetSecretValue"], "Resource": arns}]
    if kms_key_arn is not None:
        statements.append({"Sid": "DecryptThroughSecretsManager", "Effect": "Allow", "Action": ["kms:Decrypt"],
                           "Resource": kms_key_arn,
                           "Condition": {"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}}})
    return document(*statements)


class AwsSecretReaderIdentity(pulumi.ComponentResource):
    """ESO's controller role (``external-secrets/external-secrets``), reading one secret.

    Attributes:
        association: the Pod Identity association (ESO's release waits for it: a pod started before it exists gets no
            credentials).
    """

    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, *, eks_cluster_name: pulumi.Input[str], eks_cluster_arn: pulumi.Input[str],
                 region: str, key: str, kms_key_arn: str | None, physical_prefix: str, labels: Mapping[str, str],
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:AwsSecretReaderIdentity", name, provenance.props(), opts)
        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
        self.association = pod_identity_role(
            self, name, physical=f"{physical_prefix}-external-secrets", eks_cluster_name=eks_cluster_name,
            eks_cluster_arn=eks_cluster_arn, namespace=ESO_NAMESPACE, service_account=ESO_SERVICE_ACCOUNT,
            policy=pulumi.Output.all(partition.partition, identity.account_id).apply(
                lambda a: to_json(secret_read_policy(secret_arns(key, str(a[0]), region, str(a[1])), kms_key_arn,
                                                     region))),
            labels=labels)
        self.register_outputs({})
