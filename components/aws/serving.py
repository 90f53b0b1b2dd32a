"""Each served model's read-only identity on its weights: an IAM role bound through EKS Pod Identity to the model's
service account (``serve-<model>`` in its team's namespace), allowed to list and read the weights' prefix of the
checkpoint bucket and decrypt through S3, nothing else (components/aws/iam.py ``weights_read_policy``).

The role's name is ``<cluster>-<model>-serve`` (at most 24 + 1 + 30 + 6 = 61 characters, under IAM's 64)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import to_json, weights_read_policy
from components.aws.pod_identity import pod_identity_role
from components.kubernetes.objects.serving import serving_account_name
from components.spec.inference import ServedModelSpec


def _policy_for(prefix: str, region: str) -> Callable[[list[Any]], str]:
    """The read policy of ``prefix``, once the bucket's and the key's ARNs are known."""
    return lambda arns: to_json(weights_read_policy(str(arns[0]), str(arns[1]) or None, prefix, region))


class AwsServingAccess(pulumi.ComponentResource):
    """Per served model, its weights reader.

    Attributes:
        ready: each model's Pod Identity association, by model name (its replicas wait for it: a pod started before
            the association exists gets no credentials).
    """

    ready: dict[str, tuple[pulumi.Resource, ...]]

    def __init__(self, name: str, *, models: Sequence[ServedModelSpec], eks_cluster_name: pulumi.Input[str],
                 eks_cluster_arn: pulumi.Input[str], physical_prefix: str, region: str,
                 bucket_arn: pulumi.Input[str], data_key_arn: Optional[pulumi.Input[str]],
                 labels: Mapping[str, str], opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:AwsServingAccess", name, provenance.props(), opts)
        self.ready = {}
        for model in models:
            policy = pulumi.Output.all(bucket_arn, data_key_arn or "").apply(
                _policy_for(model.weights.prefix, region))
            association: aws.eks.PodIdentityAssociation = pod_identity_role(
                self, f"{name}-{model.name}", physical=f"{physical_prefix}-{model.name}-serve",
                eks_cluster_name=eks_cluster_name, eks_cluster_arn=eks_cluster_arn, namespace=model.team,
                service_account=serving_account_name(model.name), policy=policy, labels=labels)
            self.ready[model.name] = (association,)
        self.register_outputs({})
