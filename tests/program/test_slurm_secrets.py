"""sssd.conf from the cloud's secret store (issue 38): External Secrets (pinned chart) writes the login pods' Secret
from AWS Secrets Manager or GCP Secret Manager, reading exactly that secret with its controller's cloud identity, so
nothing is created by hand after the first apply. Each object fits its CRD, each waits for what it needs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.aws.slurm_secrets import secret_arns, secret_read_policy
from components.spec import SpecError, parse_spec
from tests.conftest import offline_run, raw_stack_config, run_spec, stack
from tests.k8s_checks import validate_crd_object

ESO = "kubernetes:external-secrets.io/v1:"
SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
STACKS = ["prod-aws-slurm", "dev-gcp-slurm"]
G = "gpu-cluster:spec"


def manifest(r: Any) -> dict[str, Any]:
    api, kind = r.type.removeprefix("kubernetes:").rsplit(":", 1)
    return {"apiVersion": api, "kind": kind, **r.inputs}


def ancestors(graph: Any, resource: Any) -> set[str]:
    """Every resource ``resource`` waits for, directly or not (by URN)."""
    by_urn = {r.urn: r for r in graph.resources}
    seen: set[str] = set()
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn:
            continue
        seen.add(urn)
        todo += list(by_urn[urn].dependencies)
    return seen


@pytest.mark.parametrize("stack_name", STACKS)
def test_the_login_secret_comes_from_the_store_after_the_identity(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    login = stack(stack_name).spec.scheduler.slurm.login  # type: ignore[union-attr]
    assert login.sssd_conf_from is not None
    (store,) = graph.of_type(ESO + "SecretStore")
    (external,) = graph.of_type(ESO + "ExternalSecret")
    for r in (store, external):
        validate_crd_object(manifest(r))
    spec = external.inputs["spec"]
    assert spec["target"]["name"] == login.sssd_conf_secret and spec["target"]["deletionPolicy"] == "Retain"
    assert spec["data"] == [{"secretKey": "sssd.conf", "remoteRef": {"key": login.sssd_conf_from.key}}]
    provider = store.inputs["spec"]["provider"]
    assert "auth" not in json.dumps(provider)  # the controller's own Pod Identity / Workload Identity
    (release,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "external-secrets"]
    values = release.inputs["values"]
    assert values["scopedNamespace"] == "slurm" and values["scopedRBAC"] is True
    assert values["serviceAccount"]["name"] == "external-secrets"
    # the release waits for the identity its controller reads the store with; the objects for the release (its CRDs
    # and webhook); the login pods for the Secret's ExternalSecret
    identity = ("aws:eks/podIdentityAssociation:PodIdentityAssociation" if stack_name.endswith("aws-slurm")
                else "gcp:secretmanager/secretIamMember:SecretIamMember")
    (grant,) = [r for r in graph.of_type(identity) if "sssd-reader" in r.name]
    assert grant.urn in ancestors(graph, release)
    assert release.urn in ancestors(graph, store) and release.urn in ancestors(graph, external)
    (loginset,) = graph.of_type(SLINKY + "LoginSet")
    assert external.urn in ancestors(graph, loginset)
    # ... and pulumi up waits until the Secret is written (ESO's Ready), so the LoginSet meets it (issue 38 review)
    assert external.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"
    # only the login pods wait for it: a store not readable yet does not hold back slurmctld or slurmd
    for kind in ("Controller", "NodeSet", "Accounting"):
        for r in graph.of_type(SLINKY + kind):
            assert external.urn not in ancestors(graph, r) and release.urn not in ancestors(graph, r), (kind, r.name)
    # the Secret outlives the ExternalSecret (an Owner one would be garbage-collected with it)
    assert spec["target"]["creationPolicy"] == "CreateOrMerge"
    assert loginset.inputs["spec"]["sssdConfRef"] == {"name": login.sssd_conf_secret, "key": "sssd.conf"}


def test_on_aws_the_controller_reads_exactly_that_secret() -> None:
    graph = offline_run("prod-aws-slurm").graph
    (association,) = [r for r in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if "sssd-reader" in r.name]
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("external-secrets",
                                                                                        "external-secrets")
    (policy,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if "sssd-reader" in r.name]
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert statement["Action"] == ["secretsmanager:GetSecretValue"]
    assert statement["Resource"] == ["arn:aws:secretsmanager:us-east-1:123456789012:secret:prod-slurm/sssd-conf-??????"]


def test_a_customer_managed_key_is_used_only_through_secrets_manager() -> None:
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:ldap/sssd-AbCdEf"
    assert secret_arns(arn, "aws", "us-east-1", "x") == [arn, f"{arn}-??????"]
    doc = secret_read_policy([arn], "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
                             "us-east-1")
    decrypt = doc["Statement"][1]
    assert decrypt["Action"] == ["kms:Decrypt"]
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}}


def test_on_gcp_the_controller_may_access_only_that_secret() -> None:
    graph = offline_run("dev-gcp-slurm").graph
    (member,) = graph.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
    assert member.inputs["role"] == "roles/secretmanager.secretAccessor"
    assert member.inputs["secretId"] == "dev-slurm-sssd-conf"
    assert member.inputs["member"].endswith("/subject/ns/external-secrets/sa/external-secrets")
    (apis,) = [r for r in graph.resources if r.type == "gcp:projects/service:Service"
               and r.inputs.get("service") == "secretmanager.googleapis.com"]
    assert apis.urn in ancestors(graph, member)


def test_without_a_source_nothing_of_it_is_built() -> None:
    spec = raw_stack_config("prod-aws-slurm")[G]
    del spec["scheduler"]["slurm"]["login"]["sssdConfFrom"]
    graph = run_spec(spec, "prod-aws-slurm").graph
    assert not graph.of_type(ESO + "ExternalSecret")
    assert not [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "external-secrets"]
    assert not graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation") or all(
        r.inputs["namespace"] != "external-secrets"
        for r in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation"))


RULES = [
    ("prod-aws-slurm", {"key": "sssd conf"}, "key", "is neither a Secrets Manager secret name"),
    ("prod-aws-slurm", {"key": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sssd-AbCdEf"}, "key",
     "the secret is in eu-west-1, the stack in us-east-1"),
    ("prod-aws-slurm", {"key": "sssd", "kmsKeyArn": "arn:aws:kms:us-east-1:111122223333:alias/sssd"}, "kmsKeyArn",
     "is not a KMS key ARN"),
    ("dev-gcp-slurm", {"key": "projects/acme/secrets/sssd"}, "key", "is not a Secret Manager secret id"),
    ("dev-gcp-slurm", {"key": "sssd", "kmsKeyArn": "arn:aws:kms:us-east-1:111122223333:key/abc"}, "kmsKeyArn",
     "kmsKeyArn is AWS's"),
]


@pytest.mark.parametrize(("stack_name", "source", "field", "says"), RULES)
def test_a_source_the_store_cannot_hold_is_refused(stack_name: str, source: dict[str, str], field: str,
                                                   says: str) -> None:
    spec = raw_stack_config(stack_name)[G]
    spec["scheduler"]["slurm"]["login"]["sssdConfFrom"] = source
    with pytest.raises(SpecError) as info:
        parse_spec(spec, f"stacks/Pulumi.{stack_name}.yaml", provider_region="us-east-1" if "aws" in stack_name
                   else None)
    lines = [line for line in str(info.value).splitlines() if "slurm-sssd-source" in line]
    assert lines and f"{G}.scheduler.slurm.login.sssdConfFrom.{field}: " in lines[0] and says in lines[0], lines
