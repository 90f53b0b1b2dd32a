"""blueprint deployer-policy: the deployer's least privilege for exactly a stack's graph.

Every resource type and invoke of every shipped and example stack is in a table (and every table entry is used by
one), the AWS policy carries the EKS, node group and FSx actions with iam:PassRole limited to the stack's roles, the
JSON is an IAM policy's shape, the GCP role holds the container and compute permissions its graph needs (and not
actAs or the budgets'), and a type or invoke missing from a table exits 2 naming it and the file."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.clouds.aws import deployer as aws_deployer
from blueprint.clouds.gcp import deployer as gcp_deployer
from blueprint.deployer.cloud import DeployerPolicy, cloud_deployer
from blueprint.deployer.render import as_json, render_text
from blueprint.deployer.table import DeployerTableError, TypeEntry, load_table, no_cloud_table, used_entries
from blueprint.graph.model import GraphResource
from tests.conftest import ROOT, SHIPPED_STACKS, offline_run, stack

EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "stacks").glob("Pulumi.*.yaml"))
ALL_STACKS = SHIPPED_STACKS + EXAMPLES
AWS_ACTION = re.compile(r"^[a-z0-9-]+:[A-Z][A-Za-z0-9]+$")
GCP_PERMISSION = re.compile(r"^[a-z]+\.[A-Za-z]+\.[A-Za-z]+$")


def policy_of(name: str) -> DeployerPolicy:
    run = offline_run(name)
    cloud = cloud_deployer(stack(name).spec.cloud)
    return cloud.deployer_policy(run.graph, used_entries(run.graph, run.invokes, cloud.table()))


@pytest.mark.parametrize("name", ALL_STACKS)
def test_every_type_and_invoke_of_the_stack_is_in_a_table(name: str) -> None:
    run = offline_run(name)
    cloud = stack(name).spec.cloud
    used = used_entries(run.graph, run.invokes, cloud_deployer(cloud).table())
    types = {r.type for r in run.graph.resources if not r.is_component}
    assert {u.token for u in used if not u.invoke} == types
    assert {u.token for u in used if u.invoke} == set(run.invokes)
    assert run.invokes, "the program makes invokes on both clouds (caller identity, project): the engine records them"
    # Each type of the cloud needs permissions or says why not; every other type is in the neutral table.
    for use in used:
        assert use.entry.none or use.entry.permissions(use.resources), use.token


def test_every_table_entry_is_used_by_a_shipped_or_example_stack() -> None:
    # A table names exactly what the program creates: an entry no graph has is stale, unless it says which spec
    # option makes the program create it.
    tokens: set[str] = set()
    for name in ALL_STACKS:
        run = offline_run(name)
        tokens |= {r.type for r in run.graph.resources} | set(run.invokes)
    for table in (aws_deployer.table(), gcp_deployer.table(), no_cloud_table()):
        optional = {t for t, e in table.types.items() if e.only_when}
        stale = sorted((set(table.types) | set(table.invokes)) - tokens - optional)
        assert not stale, f"{table.shown} has entries no stack uses: {stale}"


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_every_permission_is_well_formed_and_its_service_has_a_source(cloud: str) -> None:
    table = cloud_deployer(cloud).table()
    assert table.checked == "2026-12-02" and table.reference.startswith("https://")
    pattern = AWS_ACTION if cloud == "aws" else GCP_PERMISSION
    for entry in [*table.types.values(), *table.invokes.values()]:
        names = {p for ps in entry.operations.values() for p in ps} | {p for _, _, ps in entry.when for p in ps}
        for name in names:
            assert pattern.match(name), f"{entry.token}: {name}"
            service = name.split(":" if cloud == "aws" else ".")[0]
            assert table.services.get(service, "").startswith("https://"), f"{entry.token}: {service} has no SOURCE"


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = document["Statement"]
    return statements


def _actions(document: dict[str, Any]) -> set[str]:
    return {a for s in _statements(document) for a in s["Action"]}


def test_prod_aws_grants_the_cluster_node_groups_and_fsx() -> None:
    document = policy_of("prod-aws").document
    actions = _actions(document)
    assert {"eks:CreateCluster", "eks:DescribeCluster", "eks:UpdateClusterVersion", "eks:DeleteCluster",
            "eks:TagResource", "eks:CreateNodegroup", "eks:DescribeNodegroup", "eks:UpdateNodegroupVersion",
            "eks:DeleteNodegroup", "fsx:CreateFileSystem", "fsx:DescribeFileSystems", "fsx:DeleteFileSystem",
            "fsx:CreateDataRepositoryAssociation", "ec2:DescribeAvailabilityZones"} <= actions
    # Exactly the graph: prod-aws has no accounting database; prod-aws-slurm does.
    assert not any(a.startswith("rds:") for a in actions)
    assert "rds:CreateDBInstance" in _actions(policy_of("prod-aws-slurm").document)
    # No wildcard action, no Deny.
    assert all("*" not in a for a in actions)
    assert {s["Effect"] for s in _statements(document)} == {"Allow"}


def test_prod_aws_passes_only_the_stack_roles() -> None:
    statements = _statements(policy_of("prod-aws").document)
    passing = [s for s in statements if "iam:PassRole" in s["Action"]]
    assert passing and all(s["Action"] == ["iam:PassRole"] for s in passing)
    arns = {arn for s in passing for arn in s["Resource"]}
    # The deployer's account (the provider's assumeRole), never the offline engine's, never a wildcard.
    assert all(re.fullmatch(r"arn:aws:iam::111122223333:role/prod-train-[a-z0-9-]+", arn) for arn in arns), arns
    to_eks = next(s for s in passing if s["Sid"] == "PassRoleToEks")
    assert to_eks["Condition"] == {"StringEquals": {"iam:PassedToService": "eks.amazonaws.com"}}
    assert "arn:aws:iam::111122223333:role/prod-train-eks-cluster" in to_eks["Resource"]
    node_role = "arn:aws:iam::111122223333:role/prod-train-eks-node"
    assert any(node_role in s["Resource"] for s in passing)
    # The role and bucket actions are limited to the stack's own roles and buckets.
    roles = next(s for s in statements if s["Sid"] == "IamStackRoles")
    assert "iam:CreateRole" in roles["Action"] and node_role in roles["Resource"]
    buckets = next(s for s in statements if s["Sid"] == "S3StackBuckets")
    assert "s3:CreateBucket" in buckets["Action"] and "arn:aws:s3:::prod-train-cost-*" in buckets["Resource"]
    linked = next(s for s in statements if s["Sid"] == "ServiceLinkedRoles")
    assert set(linked["Condition"]["StringEquals"]["iam:AWSServiceName"]) >= {
        "eks.amazonaws.com", "eks-nodegroup.amazonaws.com", "fsx.amazonaws.com"}


@pytest.mark.parametrize("name", [s for s in ALL_STACKS if "aws" in s])
def test_the_aws_json_is_an_iam_policy(name: str) -> None:
    out = json.loads(json.dumps(as_json(policy_of(name))))
    document = out["policy"]
    assert set(document) == {"Version", "Statement"} and document["Version"] == "2012-10-17"
    sids = [s["Sid"] for s in document["Statement"]]
    assert len(sids) == len(set(sids)) and all(re.fullmatch(r"[A-Za-z0-9]+", sid) for sid in sids)
    for statement in document["Statement"]:
        assert set(statement) <= {"Sid", "Effect", "Action", "Resource", "Condition"}
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == sorted(set(statement["Action"])) and all(
            AWS_ACTION.match(a) for a in statement["Action"])
        resource = statement["Resource"]
        assert resource == "*" or (isinstance(resource, list) and all(r.startswith("arn:aws:") for r in resource))
    # Split into customer managed policies within their 6,144 characters, statements unchanged and in order.
    parts = out.get("managedPolicies", [document])
    assert all(len(json.dumps(p, separators=(",", ":"))) <= aws_deployer.MANAGED_POLICY_CHARS for p in parts)
    assert [s for p in parts for s in p["Statement"]] == document["Statement"]
    assert out["tables"][0] == {"file": "blueprint/clouds/aws/deployer_permissions.yaml", "checked": "2026-12-02",
                                "reference": aws_deployer.table().reference}


def test_prod_gcp_role_holds_the_container_and_compute_permissions() -> None:
    policy = policy_of("prod-gcp")
    role = policy.document
    assert role["stage"] == "GA" and len(role["title"]) <= 100 and len(role["description"]) <= 256
    permissions = set(role["includedPermissions"])
    assert role["includedPermissions"] == sorted(permissions)
    assert {"container.clusters.create", "container.clusters.get", "container.clusters.update",
            "container.clusters.delete", "container.operations.get", "container.clusters.connect",
            "compute.networks.create", "compute.subnetworks.create", "compute.firewalls.create",
            "compute.networks.updatePolicy", "compute.routers.create", "compute.globalOperations.get",
            "lustre.instances.create", "resourcemanager.projects.get", "serviceusage.services.use"} <= permissions
    # What a project role must not hold: actAs project-wide, the billing account's permissions.
    assert "iam.serviceAccounts.actAs" not in permissions
    assert not any(p.startswith("billing.") for p in permissions)
    act_as = [g for g in policy.grants if g.get("role") == "roles/iam.serviceAccountUser"]
    assert [g["resource"] for g in act_as] == [
        "projects/acme-ml-prod/serviceAccounts/prod-train-gke-nodes@acme-ml-prod.iam.gserviceaccount.com"]
    assert any(g["resource"] == "billingAccounts/01A2B3-C4D5E6-F7A8B9" and "billing.budgets.create" in g["permissions"]
               for g in policy.grants)
    assert policy.principal == "pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com"


def test_the_gcp_role_is_exactly_the_graph() -> None:
    dev = set(policy_of("dev-gcp").document["includedPermissions"])
    # dev-gcp has no Lustre, no Cloud SQL, no private services access and a private-only DNS endpoint.
    assert not any(p.startswith(("lustre.", "cloudsql.", "servicenetworking.")) for p in dev)
    assert "container.clusters.connect" not in dev and "container.clusters.create" in dev
    slurm = set(policy_of("dev-gcp-slurm").document["includedPermissions"])
    assert {"cloudsql.instances.create", "cloudsql.users.create", "servicenetworking.services.addPeering"} <= slurm
    for name in ("dev-gcp", "dev-gcp-slurm", "prod-gcp"):
        assert all(GCP_PERMISSION.match(p) for p in policy_of(name).document["includedPermissions"])


def test_a_when_rule_adds_permissions_only_for_that_input() -> None:
    entry = gcp_deployer.table().types["gcp:storage/bucket:Bucket"]

    def bucket(force: bool) -> GraphResource:
        return GraphResource(urn="urn:b", type=entry.token, name="b", inputs={"forceDestroy": force})

    assert "storage.objects.delete" not in entry.permissions([bucket(False)])
    assert "storage.objects.delete" in entry.permissions([bucket(True)])


def test_the_text_names_the_stack_the_counts_and_the_sources() -> None:
    text = render_text(policy_of("prod-aws"))
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header[0] == "# deployer IAM policy for stack prod-aws (aws)"
    assert re.match(r"# \d+ resource types and invokes in the graph: \d+ need \d+ permissions of \d+ services",
                    header[1])
    assert any("blueprint/clouds/aws/deployer_permissions.yaml (checked 2026-12-02" in line for line in header)
    assert any("not covered: Kubernetes objects" in line for line in header)
    assert json.loads(text[text.index("\n{") + 1:])["Version"] == "2012-10-17"


def test_the_command_writes_json_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "deployer.json"
    assert main(["deployer-policy", "dev-gcp", "--format", "json", "-o", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["cloud"] == "gcp" and data["stack"] == "dev-gcp" and "role" in data and "policy" not in data
    assert capsys.readouterr().out == ""


def test_a_type_missing_from_the_table_exits_2(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    table = aws_deployer.table()
    types = {k: v for k, v in table.types.items() if k != "aws:fsx/lustreFileSystem:LustreFileSystem"}
    invokes = {k: v for k, v in table.invokes.items() if k != "aws:index/getAvailabilityZones:getAvailabilityZones"}
    monkeypatch.setattr(aws_deployer, "table", lambda: dataclasses.replace(table, types=types, invokes=invokes))
    assert main(["deployer-policy", "prod-aws"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert ("error: resource type aws:fsx/lustreFileSystem:LustreFileSystem is in the graph of stack prod-aws but not "
            "in blueprint/clouds/aws/deployer_permissions.yaml") in captured.err
    assert ("invoke aws:index/getAvailabilityZones:getAvailabilityZones is made by stack prod-aws but not in "
            "blueprint/clouds/aws/deployer_permissions.yaml (invokes)") in captured.err


@pytest.mark.parametrize(("entry", "message"), [
    ("{none: why, create: [a:B]}", "both permissions and none"),
    ("{create: a:B}", "a list of permission names"),
    ("{create: [a:B], pass_role: {inputs: [roleArn]}}", "unknown key 'pass_role'"),
    ("{}", "no permissions and no none"),
    ("{when: {forceDestroy: [a:B]}}", "is not <input path>=<JSON value>"),
])
def test_a_bad_table_entry_is_refused_with_the_file_and_key(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "deployer_permissions.yaml"
    path.write_text(f"meta: {{checked: '2026-12-02'}}\ntypes:\n  aws:x/y:Z: {entry}\n", encoding="utf-8")
    with pytest.raises(DeployerTableError) as err:
        load_table(path)
    assert str(err.value).startswith(f"{path}: types.aws:x/y:Z") and message in str(err.value)


def test_an_entry_needs_its_operations_permissions() -> None:
    entry = TypeEntry(token="t", operations={"create": ("a:B",), "read": ("a:C",)})
    assert entry.permissions() == {"a:B", "a:C"}
