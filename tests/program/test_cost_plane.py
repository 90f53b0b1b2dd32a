"""The cost plane in the program (issue 12): a budget per team, cost allocation tags, the CUR 2.0 export."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blueprint.graph.model import GraphResource, ResourceGraph
from components.aws.cost import CUR2_COLUMNS, SPLIT_COLUMNS
from components.aws.iam import cost_export_bucket_policy
from components.spec import SpecError, parse_spec
from tests.conftest import offline_run, run_spec

FILE = "stacks/Pulumi.prod-aws.yaml"
P = f"{FILE}: gpu-cluster:spec"



def errors(spec: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-east-1")
    return str(info.value).splitlines()


def named(graph: ResourceGraph, type_: str, name: str) -> GraphResource:
    (found,) = [r for r in graph.of_type(type_) if r.name == name]
    return found


def test_a_team_budget_exists_only_where_something_is_billed_under_the_team_tag() -> None:
    """prod-aws's teams share the GPU nodes (billed under the stack's tags): no AWS Budget could see their share, so
    none is made; byo-aws dedicates its a100 group to finetune (nodeGroups[].team), whose instances carry the team's
    tags, and its budget filters on them (issue 21: budgets that can never alert)."""
    prod = offline_run("prod-aws").graph
    assert sorted(b.inputs["name"] for b in prod.of_type("aws:budgets/budget:Budget")) == ["prod-train-cluster"]
    graph = offline_run("byo-aws").graph
    budgets = {b.inputs["name"]: b.inputs for b in graph.of_type("aws:budgets/budget:Budget")}
    assert sorted(budgets) == ["byo-train-cluster", "byo-train-finetune"]
    team = budgets["byo-train-finetune"]
    assert team["budgetType"] == "COST" and team["timeUnit"] == "MONTHLY"
    assert team["limitAmount"] == "60000.00" and team["limitUnit"] == "USD"
    assert team["costFilters"] == [{"name": "TagKeyValue", "values": ["user:team$finetune"]}]
    alerts = [(n["notificationType"], n["threshold"], n["thresholdType"], n["comparisonOperator"])
              for n in team["notifications"]]
    assert alerts == [("ACTUAL", 80.0, "PERCENTAGE", "GREATER_THAN"), ("ACTUAL", 100.0, "PERCENTAGE", "GREATER_THAN"),
                      ("FORECASTED", 100.0, "PERCENTAGE", "GREATER_THAN")]
    for n in team["notifications"]:
        assert n["subscriberEmailAddresses"] == ["finetune-leads@example.com", "finops@example.com"]
    lt = named(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-a100-lt")
    instance_tags = next(t["tags"] for t in lt.inputs["tagSpecifications"] if t["resourceType"] == "instance")
    assert (instance_tags["team"], instance_tags["cost-center"]) == ("finetune", "cc-4500")


def test_teams_on_shared_nodes_are_watched_in_the_cluster() -> None:
    """Each prod-aws team's monthly budget is an alert on what its running pods' GPUs cost over the last 30 days
    (Prometheus keeps 30), at the prices the cost preview uses (the h100 group's Capacity Block rate over its 8 GPUs),
    against the budget prorated to the window."""
    from blueprint.cost.prices import prices_for

    graph = offline_run("prod-aws").graph
    (rule,) = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    rules = [r for g in rule.inputs["spec"]["groups"] for r in g["rules"]]
    spend = {r["labels"]["team"]: r for r in rules if r.get("alert") == "TeamSpendOverBudget"}
    assert sorted(spend) == ["applied", "pretraining", "research"]
    allowance = 115000 * 30 * 24 / 730
    assert spend["research"]["expr"] == (
        'sum_over_time(gpu_cluster:gpu_cost_usd_per_hour:sum_by_namespace{namespace="research"}[30d]) / 60 > '
        f"{allowance:.2f}")
    assert spend["research"]["labels"]["severity"] == "warning"
    block = prices_for("aws")["ec2_capacity_block.p5.48xlarge"]
    assert spend["research"]["annotations"]["prices"] == (
        f"h100: ec2_capacity_block.p5.48xlarge ${block.usd:g}/hour (stale, as of {block.as_of}) / 8 GPU units")
    (by_group,) = [r for r in rules if r.get("record") == "gpu_cluster:gpu_unit_hour_usd:by_node_group"]
    l40s = prices_for("aws")["ec2_on_demand.g6e.xlarge"]  # the served model's group, on demand, 1 GPU
    assert by_group["expr"] == (f'label_replace(vector({block.usd / 8:.6g}), "label_gpu_cluster_node_group", '
                                f'"h100", "", "") or label_replace(vector({l40s.usd:.6g}), '
                                '"label_gpu_cluster_node_group", "l40s", "", "")')
    (cost,) = [r for r in rules if r.get("record") == "gpu_cluster:gpu_cost_usd_per_hour:sum_by_namespace"]
    assert 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}' in cost["expr"]
    assert 'kube_pod_status_phase{phase="Running"}' in cost["expr"]
    (budgets,) = [g for g in rule.inputs["spec"]["groups"] if g["name"] == "gpu-cluster.budgets"]
    assert budgets["interval"] == "5m"
    (recording,) = [g for g in rule.inputs["spec"]["groups"] if g["name"] == "gpu-cluster.recording"]
    assert recording["interval"] == "1m"  # the alert's "/ 60" turns one-minute samples of a rate into dollars
    opencost = next(r.inputs for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "opencost")
    assert opencost["values"]["opencost"]["metrics"]["serviceMonitor"]["honorLabels"] is True


def test_a_team_using_its_quota_through_a_capacity_block_stays_inside_its_budget() -> None:
    """The review's fault: a rate projected over 730 hours fired for every team that used its quota during the
    two-week block the budgets were sized for. Summed over the window, a team at its nominal GPUs for the whole block
    stays below its allowance, and one using twice its share does not."""
    import re

    from components.aws.capacity_block import BlockWindow  # noqa: F401 (the block's window is in the spec)
    from tests.conftest import stack

    spec = stack("prod-aws").spec
    group = next(g for g in spec.aws_spec().node_groups if g.capacity.type == "capacity-block")
    hours = (group.capacity.end - group.capacity.start).total_seconds() / 3600
    graph = offline_run("prod-aws").graph
    (rule,) = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    rules = [r for g in rule.inputs["spec"]["groups"] for r in g["rules"]]
    (by_group,) = [r for r in rules if r.get("record") == "gpu_cluster:gpu_unit_hour_usd:by_node_group"]
    unit_price = float(re.search(r"vector\(([0-9.]+)\)", by_group["expr"]).group(1))
    for team in spec.teams:
        (alert,) = [r for r in rules if r.get("alert") == "TeamSpendOverBudget" and r["labels"]["team"] == team.name]
        allowance = float(alert["expr"].rsplit("> ", 1)[1])
        gpus = sum(q.gpus for q in team.quotas if q.node_group == group.name)
        assert gpus * unit_price * hours < allowance, team.name
        assert 2 * gpus * unit_price * hours > allowance, team.name


def test_the_cluster_budget_sees_the_shared_nodes_through_their_cluster_tag() -> None:
    """Budgets read Cost Explorer, where the shared GPU nodes are billed under the cluster's tags: the cluster
    budget (default limit: the sum of the team budgets) filters on that tag, which the nodes carry."""
    graph = offline_run("prod-aws").graph
    (cluster,) = [b.inputs for b in graph.of_type("aws:budgets/budget:Budget") if b.name == "cost-budget-cluster"]
    assert cluster["limitAmount"] == f"{115000 + 85000 + 30000:.2f}"
    assert cluster["costFilters"] == [{"name": "TagKeyValue", "values": ["user:cluster$prod-train"]}]
    assert {a for n in cluster["notifications"] for a in n["subscriberEmailAddresses"]} == {
        "ml-platform-oncall@example.com", "finops@example.com"}
    lt = named(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt")
    instance_tags = next(t["tags"] for t in lt.inputs["tagSpecifications"] if t["resourceType"] == "instance")
    assert instance_tags["cluster"] == "prod-train"
    for budget in graph.of_type("aws:budgets/budget:Budget"):
        assert budget.ignore_changes == ["name"]  # a rename keeps the budget and its history


def test_an_explicit_cluster_budget_wins(prod_spec: dict[str, Any]) -> None:
    prod_spec["billing"]["clusterMonthlyUsd"] = 250000
    graph = run_spec(prod_spec).graph
    (cluster,) = [b.inputs for b in graph.of_type("aws:budgets/budget:Budget") if b.name == "cost-budget-cluster"]
    assert cluster["limitAmount"] == "250000.00"


def test_the_cur2_export_splits_eks_cost_into_a_bucket_only_the_export_service_writes() -> None:
    graph = offline_run("prod-aws").graph
    (export,) = graph.of_type("aws:bcmdata/export:Export")
    ex = export.inputs["export"]
    assert ex["name"] == "prod-train-cur2"
    (query,) = ex["dataQueries"]
    assert query["queryStatement"].startswith("SELECT ") and query["queryStatement"].endswith(
        " FROM COST_AND_USAGE_REPORT")
    columns = set(query["queryStatement"][len("SELECT "):-len(" FROM COST_AND_USAGE_REPORT")].split(", "))
    assert len(SPLIT_COLUMNS) == 11 and columns >= set(SPLIT_COLUMNS)
    assert {"resource_tags", "line_item_unblended_cost", "line_item_resource_id"} <= columns
    table = query["tableConfigurations"]["COST_AND_USAGE_REPORT"]
    assert table["INCLUDE_SPLIT_COST_ALLOCATION_DATA"] == "TRUE" and table["TIME_GRANULARITY"] == "HOURLY"
    # "For the Cost and Usage Report, BILLING_VIEW_ARN must also be set" (pulumi_aws.bcmdata docstring).
    assert table["BILLING_VIEW_ARN"] == "arn:aws:billing::123456789012:billingview/primary"
    assert set(table) == {"BILLING_VIEW_ARN", "TIME_GRANULARITY", "INCLUDE_RESOURCES",
                          "INCLUDE_SPLIT_COST_ALLOCATION_DATA", "INCLUDE_MANUAL_DISCOUNT_COMPATIBILITY",
                          "INCLUDE_CAPACITY_RESERVATION_DATA"}
    assert table["INCLUDE_RESOURCES"] == table["INCLUDE_CAPACITY_RESERVATION_DATA"] == "TRUE"
    assert sorted(export.ignore_changes) == ["export.destinationConfigurations[0].s3Destinations[0].s3Prefix",
                                             "export.name"]
    (dest,) = ex["destinationConfigurations"][0]["s3Destinations"]
    bucket = named(graph, "aws:s3/bucket:Bucket", "cost-exports")
    assert dest["s3Region"] == "us-east-1" and dest["s3Prefix"] == "cur2/prod-train"
    assert dest["s3OutputConfigurations"] == [{"compression": "PARQUET", "format": "PARQUET", "outputType": "CUSTOM",
                                               "overwrite": "OVERWRITE_REPORT"}]
    assert ex["refreshCadences"] == [{"frequency": "SYNCHRONOUS"}]
    # The export is created after the policy that lets it write (Data Exports checks at creation).
    policy = named(graph, "aws:s3/bucketPolicy:BucketPolicy", "cost-exports-policy")
    assert policy.urn in export.dependencies
    # Finance data: protected, retained, versioned, private, encrypted, current versions never expire.
    assert bucket.protect and bucket.retain_on_delete and bucket.ignore_changes == ["bucketPrefix"]
    assert named(graph, "aws:s3/bucketVersioning:BucketVersioning", "cost-exports-versioning").inputs[
        "versioningConfiguration"] == {"status": "Enabled"}
    pab = named(graph, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "cost-exports-public-access").inputs
    assert all(pab[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                        "restrictPublicBuckets"))
    rules = named(graph, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                  "cost-exports-lifecycle").inputs["rules"]
    assert all("expiration" not in r for r in rules)
    assert rules[0]["noncurrentVersionExpiration"] == {"noncurrentDays": 30}


def test_without_split_data_the_query_selects_no_split_column(prod_spec: dict[str, Any]) -> None:
    """A column added by a table configuration is refused when that configuration is FALSE."""
    prod_spec["billing"]["costExport"]["splitCostAllocation"] = False
    (export,) = run_spec(prod_spec).graph.of_type("aws:bcmdata/export:Export")
    (query,) = export.inputs["export"]["dataQueries"]
    assert query["tableConfigurations"]["COST_AND_USAGE_REPORT"]["INCLUDE_SPLIT_COST_ALLOCATION_DATA"] == "FALSE"
    assert "split_line_item_" not in query["queryStatement"]
    assert set(CUR2_COLUMNS) <= set(query["queryStatement"][len("SELECT "):-len(" FROM COST_AND_USAGE_REPORT")]
                                    .split(", "))


def test_export_bucket_policy_grants_only_this_accounts_exports_and_requires_tls() -> None:
    doc = cost_export_bucket_policy("aws", "111122223333", "arn:aws:s3:::b")
    allow, deny = doc["Statement"]
    assert allow["Principal"] == {"Service": ["billingreports.amazonaws.com", "bcm-data-exports.amazonaws.com"]}
    assert allow["Action"] == ["s3:PutObject", "s3:GetBucketPolicy"]
    assert allow["Resource"] == ["arn:aws:s3:::b", "arn:aws:s3:::b/*"]
    assert allow["Condition"] == {
        "StringLike": {"aws:SourceArn": ["arn:aws:cur:us-east-1:111122223333:definition/*",
                                         "arn:aws:bcm-data-exports:us-east-1:111122223333:export/*"]},
        "StringEquals": {"aws:SourceAccount": "111122223333"}}
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_billing_objects_go_through_us_east_1_with_the_same_identity_and_tags() -> None:
    """dev-aws is in us-west-2: budgets and the export use a second provider in us-east-1, where the Data
    Exports API is; everything else stays on the stack's provider."""
    graph = offline_run("dev-aws").graph
    providers = {p.name: p for p in graph.of_type("pulumi:providers:aws")}
    assert set(providers) == {"aws", "aws-billing"}
    main, billing = providers["aws"], providers["aws-billing"]
    assert main.inputs["region"] == "us-west-2" and billing.inputs["region"] == "us-east-1"
    for key in ("assumeRoles", "defaultTags"):
        assert billing.inputs[key] == main.inputs[key]
    for type_ in ("aws:budgets/budget:Budget", "aws:bcmdata/export:Export"):
        assert {r.provider_urn for r in graph.of_type(type_)} == {billing.urn}, type_
    assert named(graph, "aws:s3/bucket:Bucket", "cost-exports").provider_urn == main.urn
    (export,) = graph.of_type("aws:bcmdata/export:Export")
    assert export.inputs["export"]["destinationConfigurations"][0]["s3Destinations"][0]["s3Region"] == "us-west-2"
    assert export.inputs["export"]["dataQueries"][0]["tableConfigurations"]["COST_AND_USAGE_REPORT"][
        "TIME_GRANULARITY"] == "DAILY"


def test_allocation_tags_are_activated_only_when_this_account_is_the_payer(prod_spec: dict[str, Any]) -> None:
    graph = offline_run("prod-aws").graph
    assert graph.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag") == []
    prod_spec["billing"]["allocationTags"] = "activate"
    graph = run_spec(prod_spec).graph
    tags = graph.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag")
    assert sorted(t.inputs["tagKey"] for t in tags) == ["cluster", "cost-center", "environment", "owner", "team"]
    assert {t.inputs["status"] for t in tags} == {"Active"}
    # Deleting an activation deactivates the key for the whole payer account: a destroy leaves it active.
    assert all(t.retain_on_delete for t in tags)


def test_the_export_can_be_turned_off(prod_spec: dict[str, Any]) -> None:
    prod_spec["billing"]["costExport"] = {"enabled": False}
    run = run_spec(prod_spec)
    assert run.graph.of_type("aws:bcmdata/export:Export") == []
    assert [b.name for b in run.graph.of_type("aws:s3/bucket:Bucket")] == ["storage-checkpoints"]
    assert "costExportBucket" not in run.outputs


def test_preview_lists_the_cost_plane_and_what_the_payer_account_must_do() -> None:
    import contextlib
    import io

    from blueprint.cli import main
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["preview", "prod-aws"]) == 0
    text = buf.getvalue()
    assert "== cost plane (budgets, allocation tags, usage export) (9 resources)" in text
    assert ("teams on shared nodes: research $115,000/month, pretraining $85,000/month, applied $30,000/month; no AWS "
            "Budget for them") in text
    assert ("team GPU spend watched in the cluster (TeamSpendOverBudget: GPU hours of running pods over the last 30 "
            "days, at this preview's prices): applied, pretraining, research") in text
    from blueprint.cost.prices import prices_for
    block = prices_for("aws")["ec2_capacity_block.p5.48xlarge"]
    assert f"prices: h100: ec2_capacity_block.p5.48xlarge ${block.usd:g}/hour (stale, as of {block.as_of})" in text
    assert ("the cluster budget cannot see the Capacity Block of h100 (cr-0a1b2c3d4e5f60718): its fee is charged "
            "once, when the block is bought outside this stack, and carries no tag") in text
    assert ("outside this stack (the payer account): activate the cost allocation tags cluster, cost-center, "
            "environment, owner, team, and enable split cost allocation data for Amazon EKS") in text


def test_every_team_needs_a_budget(prod_spec: dict[str, Any]) -> None:
    del prod_spec["teams"][1]["budget"]
    assert errors(prod_spec) == [
        f"{P}.teams[pretraining].budget: team 'pretraining' has no budget; every team needs one (monthlyUsd and "
        "notify) so that its spend is watched [rule: team-budget-required]"]


def test_someone_is_alerted_for_the_whole_cluster(prod_spec: dict[str, Any]) -> None:
    del prod_spec["billing"]["notify"]
    assert errors(prod_spec) == [f"{P}.billing.notify: required key is missing [rule: schema-required-key]"]


def test_budget_inputs_aws_would_refuse(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["budget"] = {"monthlyUsd": 100, "alertAtPercent": [80, 80, 0],
                                       "notify": ["lead-at-example.com"]}
    prod_spec["billing"]["notify"] = ["finops@example"]
    assert errors(prod_spec) == [
        f"{P}.teams[research].budget.notify[0]: 'lead-at-example.com' is not an email address (name@domain.tld) "
        "[rule: budget-email]",
        f"{P}.teams[research].budget.alertAtPercent[2]: 0 is not a threshold AWS Budgets alerts on here (1 to 1000 "
        "percent) [rule: budget-threshold-range]",
        f"{P}.teams[research].budget.alertAtPercent: a threshold is listed twice [rule: unique-names]",
        f"{P}.billing.notify[0]: 'finops@example' is not an email address (name@domain.tld) [rule: budget-email]",
    ]


def test_a_budget_alerts_at_most_ten_addresses(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["budget"]["notify"] = [f"lead{i}@example.com" for i in range(9)]
    msgs = errors(prod_spec)
    assert msgs == [f"{P}.teams[research].budget.notify: team 'research''s budget would alert 11 addresses (its notify "
                    "and billing.notify); AWS Budgets takes at most 10 email subscribers per notification "
                    "[rule: budget-subscribers]"]


def test_a_budget_has_at_most_five_notifications(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][0]["budget"]["alertAtPercent"] = [50, 60, 70, 80, 90]
    (msg,) = errors(prod_spec)
    assert msg.startswith(f"{P}.teams[research].budget.alertAtPercent: ")
    assert "at most 4" in msg


def test_outputs_name_the_export_bucket() -> None:
    outputs = offline_run("prod-aws").outputs
    assert "costExportBucket" in outputs
    assert json.dumps(outputs["costExportBucket"])


def test_the_export_bucket_is_not_described_as_a_checkpoint_bucket(capsys: pytest.CaptureFixture[str]) -> None:
    """The storage plane's summary reads its own bucket's versioning and lifecycle, not the export bucket's."""
    from blueprint.cli import main

    assert main(["preview", "dev-aws"]) == 0
    out = capsys.readouterr().out
    assert ("checkpoint bucket dev-gpu-ckpt-*: versioned, SSE-KMS, public access blocked, noncurrent versions expire "
            "after 7 days") in out
    assert "checkpoint bucket dev-gpu-cost-" not in out
