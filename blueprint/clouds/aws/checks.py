"""AWS in the acceptance family: a boto3 session on the usual credentials, then ``blueprint preflight``
(:mod:`blueprint.clouds.aws.preflight`) and ``blueprint audit`` (:mod:`blueprint.clouds.aws.audit`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from blueprint.acceptance.checks import AccountAccessError, Check
from blueprint.acceptance.kube import KubeCluster
from blueprint.clouds.aws import audit as _audit
from blueprint.clouds.aws import preflight as _preflight
from blueprint.graph.stackfile import StackFile
from components.spec import ClusterSpec


def session(stack: StackFile) -> Callable[[str], Any]:
    """A boto3 client factory for the stack's region, after checking that credentials exist; every way the account
    cannot be reached at all (no, partial or refused credentials, an unknown profile, a malformed endpoint) is an
    :class:`AccountAccessError`, exit 2."""
    import boto3
    import botocore.exceptions

    try:
        boto = boto3.Session()
        credentials = boto.get_credentials()
    except botocore.exceptions.BotoCoreError as err:
        raise AccountAccessError(_preflight.account_access_problem(err) or str(err)) from None
    if credentials is None:
        raise AccountAccessError(_preflight.account_access_problem(botocore.exceptions.NoCredentialsError()) or "")

    def client(name: str) -> Any:
        try:
            return boto.client(name, region_name=stack.region)
        except ValueError as err:  # botocore: "Invalid endpoint: <url>" (AWS_ENDPOINT_URL and friends)
            raise AccountAccessError(f"{err}: check AWS_ENDPOINT_URL and the endpoint settings of the profile") \
                from None
        except botocore.exceptions.BotoCoreError as err:
            raise AccountAccessError(_preflight.account_access_problem(err) or str(err)) from None
    return client


def preflight(spec: ClusterSpec, session: Any) -> list[Check]:
    """The account before ``pulumi up`` (read through the module, so tests can stand in for the run)."""
    return _preflight.run_preflight(spec, session)


def audit(spec: ClusterSpec, session: Any) -> list[Check]:
    """The deployed account after ``pulumi up``."""
    return _audit.run_audit(spec, session)


def kube_cluster(spec: ClusterSpec) -> KubeCluster:
    """The EKS cluster in a kubeconfig: ``aws eks update-kubeconfig`` names the cluster entry and the context by the
    cluster's ARN (AWS CLI reference, eks update-kubeconfig: ``--alias`` "Alias for the cluster context name.
    Defaults to match cluster ARN."); eksctl names them ``<cluster>.<region>.eksctl.io`` and
    ``<identity>@<cluster>.<region>.eksctl.io``."""
    name, region = re.escape(spec.name), re.escape(spec.aws_spec().region)
    return KubeCluster(spec.name, (rf"arn:aws[a-z-]*:eks:{region}:\d{{12}}:cluster/{name}",
                                   rf"(.+@)?{name}\.{region}\.eksctl\.io"),
                       f"aws eks update-kubeconfig --region {spec.aws_spec().region} --name {spec.name}")
