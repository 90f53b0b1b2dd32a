"""A node pool's own service account (cluster-toolkit's A3 Mega / A3 Ultra blueprints give each pool one with a role
list): created with its roles as real serviceaccount.Account and projects.IAMMember resources, or an existing one; bad
role names and half-given accounts refused at load with their key path; pools without one keep the stack's account."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.spec import SpecError, parse_spec
from tests.conftest import raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-gcp.yaml"
P = f"{FILE}: gpu-cluster:spec"
ACCOUNT = "gcp:serviceaccount/account:Account"
MEMBER = "gcp:projects/iAMMember:IAMMember"
POOL = "gcp:container/nodePool:NodePool"
# cluster-toolkit examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml node_pool_service_account project_roles (@10470803),
# with the roles/ prefix its service-account module adds
TOOLKIT_ROLES = ["roles/logging.logWriter", "roles/monitoring.metricWriter", "roles/monitoring.viewer",
                 "roles/stackdriver.resourceMetadata.writer", "roles/storage.objectViewer",
                 "roles/artifactregistry.reader"]


@pytest.fixture
def spec() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])


def h100(spec: dict[str, Any]) -> dict[str, Any]:
    pool: dict[str, Any] = spec["gcp"]["nodePools"][1]
    return pool


def errors(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-central1")
    return str(info.value).splitlines()


def test_a_pool_runs_as_the_account_the_stack_creates_with_its_roles(spec: dict[str, Any]) -> None:
    h100(spec)["serviceAccount"] = {"accountId": "gke-np-sa", "roles": TOOLKIT_ROLES}
    graph = run_spec(spec, "prod-gcp").graph
    (account,) = [r for r in graph.of_type(ACCOUNT) if r.inputs["accountId"] == "gke-np-sa"]
    assert account.inputs["project"] == "acme-ml-prod"
    email = "gke-np-sa@acme-ml-prod.iam.gserviceaccount.com"
    granted = sorted(r.inputs["role"] for r in graph.of_type(MEMBER) if r.inputs["member"] == f"serviceAccount:{email}")
    assert granted == sorted(TOOLKIT_ROLES)
    pools = {r.inputs["name"]: r for r in graph.of_type(POOL)}
    assert pools["h100"].inputs["nodeConfig"]["serviceAccount"] == email
    # the other pool keeps the stack's node account, as before
    assert pools["system"].inputs["nodeConfig"]["serviceAccount"] == \
        "prod-train-gke-nodes@acme-ml-prod.iam.gserviceaccount.com"
    # the pool's nodes wait for their roles
    grants = {r.urn for r in graph.of_type(MEMBER) if r.inputs["member"] == f"serviceAccount:{email}"}
    assert grants <= set(pools["h100"].dependencies)


def test_a_pool_runs_as_an_existing_account_and_nothing_is_granted(spec: dict[str, Any]) -> None:
    existing = "gpu-nodes@acme-ml-prod.iam.gserviceaccount.com"
    h100(spec)["serviceAccount"] = {"existing": existing}
    graph = run_spec(spec, "prod-gcp").graph
    pools = {r.inputs["name"]: r for r in graph.of_type(POOL)}
    assert pools["h100"].inputs["nodeConfig"]["serviceAccount"] == existing
    assert [r.inputs["accountId"] for r in graph.of_type(ACCOUNT)] == ["prod-train-gke-nodes"]
    assert not [r for r in graph.of_type(MEMBER) if r.inputs["member"] == f"serviceAccount:{existing}"]


def test_two_pools_share_one_account(spec: dict[str, Any]) -> None:
    for pool in spec["gcp"]["nodePools"]:
        pool["serviceAccount"] = {"accountId": "gke-np-sa", "roles": ["roles/container.defaultNodeServiceAccount"]}
    graph = run_spec(spec, "prod-gcp").graph
    assert sorted(r.inputs["accountId"] for r in graph.of_type(ACCOUNT)) == ["gke-np-sa", "prod-train-gke-nodes"]
    assert len([r for r in graph.of_type(MEMBER) if "gke-np-sa@" in r.inputs["member"]]) == 1


def test_a_role_without_its_prefix_is_refused_with_the_fix(spec: dict[str, Any]) -> None:
    h100(spec)["serviceAccount"] = {"accountId": "gke-np-sa", "roles": ["roles/logging.logWriter",
                                                                        "logging.logWriter", "roles/"]}
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].serviceAccount.roles[1]: 'logging.logWriter' is not an IAM role name: "
        "roles/<service>.<role> (e.g. roles/logging.logWriter), projects/<project>/roles/<id> or "
        "organizations/<number>/roles/<id> (did you mean roles/logging.logWriter? cluster-toolkit's project_roles "
        "leave the prefix out) [rule: iam-role-name]",
        f"{P}.gcp.nodePools[h100].serviceAccount.roles[2]: 'roles/' is not an IAM role name: roles/<service>.<role> "
        "(e.g. roles/logging.logWriter), projects/<project>/roles/<id> or organizations/<number>/roles/<id> "
        "[rule: iam-role-name]"]


def test_custom_roles_are_role_names(spec: dict[str, Any]) -> None:
    h100(spec)["serviceAccount"] = {"accountId": "gke-np-sa", "roles": [
        "projects/acme-ml-prod/roles/gpuNodeWriter", "organizations/123456789/roles/nodeReader"]}
    parse_spec(spec, FILE, provider_region="us-central1")


def test_a_basic_or_repeated_role_is_refused(spec: dict[str, Any]) -> None:
    h100(spec)["serviceAccount"] = {"accountId": "gke-np-sa", "roles": ["roles/editor", "roles/monitoring.viewer",
                                                                        "roles/monitoring.viewer"]}
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].serviceAccount.roles[0]: roles/editor is a basic role (nearly every permission in "
        "the project); grant the node account the predefined roles it needs, e.g. "
        "roles/container.defaultNodeServiceAccount [rule: node-account-least-privilege]",
        f"{P}.gcp.nodePools[h100].serviceAccount.roles[2]: roles/monitoring.viewer is listed twice "
        "[rule: iam-role-name]"]


def test_exactly_one_of_account_id_and_existing(spec: dict[str, Any]) -> None:
    h100(spec)["serviceAccount"] = {"roles": ["roles/logging.logWriter"]}
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].serviceAccount: give exactly one of accountId (a service account the stack "
        "creates, with roles) and existing (the email of one that exists) [rule: node-service-account]"]
    h100(spec)["serviceAccount"] = {"existing": "gpu-nodes@acme-ml-prod.iam.gserviceaccount.com",
                                    "roles": ["roles/logging.logWriter"]}
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].serviceAccount.roles: roles are granted only to an account the stack creates "
        "(accountId); an existing account keeps the roles its owner gave it [rule: node-service-account]"]


def test_an_account_is_defined_once(spec: dict[str, Any]) -> None:
    spec["gcp"]["nodePools"][0]["serviceAccount"] = {"accountId": "gke-np-sa", "roles": ["roles/monitoring.viewer"]}
    h100(spec)["serviceAccount"] = {"accountId": "gke-np-sa", "roles": ["roles/logging.logWriter"]}
    assert errors(spec) == [
        f"{P}.gcp.nodePools[h100].serviceAccount.roles: another pool creates gke-np-sa with other roles "
        "(roles/monitoring.viewer); pools that share an account list the same roles [rule: node-service-account]"]
    h100(spec)["serviceAccount"] = {"accountId": "prod-train-gke-nodes"}
    assert errors(spec)[0] == (
        f"{P}.gcp.nodePools[h100].serviceAccount.accountId: 'prod-train-gke-nodes' is the stack's own node account; "
        "name another account, or leave serviceAccount out to use it [rule: node-service-account]")


def test_an_account_id_iam_refuses_is_refused_by_the_schema(spec: dict[str, Any]) -> None:
    h100(spec)["serviceAccount"] = {"accountId": "Np"}
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.nodePools[h100].serviceAccount.accountId: ")



def test_a_created_account_without_the_roles_a_node_needs_is_warned_about(spec: dict[str, Any]) -> None:
    """No error (the roles are the user's), but a warning: without GKE's node role (or the legacy log and metric
    writers cluster-toolkit grants) the nodes' logs and metrics are dropped, and without Artifact Registry reader the
    nodes cannot pull the platform's images from the project's registry."""
    from datetime import UTC, datetime

    from components.spec import parse_spec
    from components.spec.notes import spec_notes

    def notes(roles: list[str]) -> list[str]:
        h100(spec)["serviceAccount"] = {"accountId": "gke-np-sa", "roles": roles}
        parsed = parse_spec(spec, "stacks/Pulumi.prod-gcp.yaml")
        return [n for n in spec_notes(parsed, datetime(2026, 12, 2, tzinfo=UTC)) if ".serviceAccount.roles" in n]

    assert notes(TOOLKIT_ROLES) == []
    assert notes(["roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader"]) == []
    (only_logs,) = notes(["roles/logging.logWriter"])
    assert only_logs.startswith(
        "warning: gpu-cluster:spec.gcp.nodePools[h100].serviceAccount.roles: pool 'h100' runs as gke-np-sa without "
        "roles/container.defaultNodeServiceAccount and roles/artifactregistry.reader: a node account needs")
    (no_reader,) = notes(["roles/container.defaultNodeServiceAccount"])
    assert "without roles/artifactregistry.reader:" in no_reader
