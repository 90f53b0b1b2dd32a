"""The cost plane on AWS: budgets that can see spend, the billing tags as cost allocation tags, a CUR 2.0 export.

The seed's chain "finance -> labels -> usage export -> cost per job / team / model": the billing labels are on
every resource (provider ``default_tags``), the cluster has an AWS Budget on its ``cluster`` tag and each team
one on its ``team`` tag, with alerts to the platform, finance and the team's owner, and the Cost and Usage
Report 2.0 lands in a protected bucket with EKS split cost allocation data, which carries the pod's namespace
(the team) on the cost of the shared GPU nodes.

What Budgets can see: they read Cost Explorer data, where a shared node is billed under the cluster's tags,
so the cluster budget sees the GPU nodes and a team's budget sees only what is billed under the team's own tag.
Split cost allocation data (a team's share of the shared nodes) is in the CUR, not in Cost Explorer
(AWS Data Exports guide, "Understanding split cost allocation data").

So a team gets an AWS Budget only where something is billed under its tag: a node group dedicated to it
(``nodeGroups[].team``). A team on shared nodes is watched in the cluster (its OpenCost spend against its monthly
budget: the TeamSpendOverBudget alert, routed to the team) and billed by namespace in the CUR. A Capacity Block's
fee is charged when the block is bought, outside the stack and untagged: no tag budget sees it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_aws as aws

from components import provenance
from components.aws.iam import DATA_EXPORT_REGION, cost_export_bucket_policy, to_json
from components.aws.stateful import private_versioned_bucket
from components.spec import BillingSpec, TeamSpec
from components.tags import merge_tags

# The CUR 2.0 columns the export keeps: who, what, when, how much, the tags, and the 11 split cost
# allocation columns (AWS Data Exports table dictionary, COST_AND_USAGE_REPORT; the same names in the
# CUDOS / Cloud Intelligence Dashboards default query).
# A column "added by" a table configuration is only valid with that configuration TRUE (the table dictionary);
# the export always sets INCLUDE_RESOURCES and INCLUDE_CAPACITY_RESERVATION_DATA, and the split columns follow
# the spec.
CUR2_COLUMNS: tuple[str, ...] = (
    "bill_billing_period_start_date", "bill_payer_account_id", "identity_line_item_id", "identity_time_interval",
    "line_item_line_item_type", "line_item_usage_account_id", "line_item_product_code", "line_item_usage_type",
    "line_item_operation", "line_item_resource_id", "line_item_availability_zone", "line_item_usage_start_date",
    "line_item_usage_end_date", "line_item_usage_amount", "line_item_unblended_cost",
    "line_item_net_unblended_cost", "pricing_public_on_demand_cost", "pricing_term", "product_instance_type",
    "product_region_code", "capacity_reservation_capacity_reservation_arn", "resource_tags", "cost_category",
)
SPLIT_COLUMNS: tuple[str, ...] = (
    "split_line_item_actual_usage", "split_line_item_net_split_cost", "split_line_item_net_unused_cost",
    "split_line_item_parent_resource_id", "split_line_item_public_on_demand_split_cost",
    "split_line_item_public_on_demand_unused_cost", "split_line_item_reserved_usage", "split_line_item_split_cost",
    "split_line_item_split_usage", "split_line_item_split_usage_ratio", "split_line_item_unused_cost",
)
FORECAST_ALERT_PERCENT = 100
CLUSTER_ALERT_PERCENTS = (80, 100)


def budget_filter_values(team: str) -> list[str]:
    """The Budgets ``TagKeyValue`` filter of a team: its ``team`` cost allocation tag
    (Budgets API CostFilters, ``user:<key>$<value>``)."""
    return [f"user:team${team}"]


def budget_notifications(percents: Sequence[int], recipients: Sequence[str]) -> list[dict[str, object]]:
    """One actual-spend alert per threshold and one forecast alert at 100 %, all to the same recipients."""
    out: list[dict[str, object]] = [
        {"comparison_operator": "GREATER_THAN", "notification_type": "ACTUAL", "threshold": float(p),
         "threshold_type": "PERCENTAGE", "subscriber_email_addresses": list(recipients)}
        for p in sorted(percents)
    ]
    out.append({"comparison_operator": "GREATER_THAN", "notification_type": "FORECASTED",
                "threshold": float(FORECAST_ALERT_PERCENT), "threshold_type": "PERCENTAGE",
                "subscriber_email_addresses": list(recipients)})
    return out


def export_query(split_cost_allocation: bool) -> str:
    """The export's SQL over the CUR 2.0 table: the split columns only when the table includes them."""
    columns = (*CUR2_COLUMNS, *SPLIT_COLUMNS) if split_cost_allocation else CUR2_COLUMNS
    return f"SELECT {', '.join(columns)} FROM COST_AND_USAGE_REPORT"


def billing_view_arn(partition: str, account: str) -> str:
    """The account's primary billing view, which a CUR 2.0 table configuration must name (BILLING_VIEW_ARN)."""
    return f"arn:{partition}:billing::{account}:billingview/primary"


class AwsCostPlane(pulumi.ComponentResource):
    """Budgets, cost allocation tags and the usage export of one cluster.

    Budgets and the export are account-level Billing objects: they live in us-east-1 whatever the stack's
    region (the Data Exports API only answers there), so they go through ``billing_provider``. Tag
    activation is a payer-account action, and AWS refuses a key it has not yet seen in billing data (about
    24 hours after first use): with ``allocationTags: payer-managed`` the preview lists the keys instead.

    Attributes:
        export_bucket_name: where the CUR 2.0 files land (None when the export is off).
        budget_names: team -> budget name.
    """

    export_bucket_name: Optional[pulumi.Output[str]]
    budget_names: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        teams: Sequence[TeamSpec],
        billing: BillingSpec,
        labels: Mapping[str, str],
        tag_keys: Sequence[str],
        region: str,
        protect: bool,
        billing_provider: aws.Provider,
        billed_teams: Collection[str] = (),
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("gpu-cluster:cost:AwsCostPlane", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)

        self.budget_names = {}
        team_total = sum(float(t.budget.monthly_usd) for t in teams if t.budget is not None)
        cluster_limit = float(billing.cluster_monthly_usd) if billing.cluster_monthly_usd is not None else team_total
        if cluster_limit > 0:
            # The one budget that sees the shared GPU nodes: everything tagged cluster=<name> (provider default
            # tags and the nodes' launch template), to the platform and finance.
            self.budget_names["(cluster)"] = self._budget(
                f"{name}-budget-cluster", f"{cluster_name}-cluster", cluster_limit,
                [f"user:cluster${cluster_name}"], budget_notifications(CLUSTER_ALERT_PERCENTS, list(billing.notify)),
                merge_tags(labels, f"{cluster_name}-cluster"), billing_provider)
        for team in teams:
            if team.budget is None or team.name not in billed_teams:
                continue  # refused at load time (team-budget-required), or nothing billed under its tag
            recipients = list(dict.fromkeys([*team.budget.notify, *billing.notify]))
            self.budget_names[team.name] = self._budget(
                f"{name}-budget-{team.name}", f"{cluster_name}-{team.name}", float(team.budget.monthly_usd),
                budget_filter_values(team.name), budget_notifications(team.budget.alert_at_percent, recipients),
                merge_tags(labels, f"{cluster_name}-{team.name}", **{"budget-team": team.name}), billing_provider)

        if billing.allocation_tags == "activate":
            for key in tag_keys:
                # Deleting the resource deactivates the key for the whole payer account (every stack and
                # team using it): a destroy or a rename leaves it active.
                aws.costexplorer.CostAllocationTag(
                    f"{name}-allocation-tag-{key}", tag_key=key, status="Active",
                    opts=pulumi.ResourceOptions(parent=self, providers={"aws": billing_provider},
                                                retain_on_delete=True))

        self.export_bucket_name = None
        export_spec = billing.cost_export
        if export_spec.enabled:
            # SSE-S3: the export service writes with the bucket's default encryption and is not granted any
            # KMS key (the CUR buckets of AWS's CUDOS framework modules use AES256 for the same reason).
            # OVERWRITE_REPORT rewrites each month's files up to three times a day: old versions go after the
            # retention, the current month's files never expire.
            bucket = private_versioned_bucket(
                self, f"{name}-exports",
                bucket_prefix=f"{cluster_name}-cost-",
                tags=merge_tags(labels, f"{cluster_name}-cost-exports", **{"data-class": "billing"}),
                protect=protect,
                encryption={"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}},
                noncurrent_days=export_spec.retention_days,
            )
            identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
            partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
            policy = aws.s3.BucketPolicy(
                f"{name}-exports-policy",
                bucket=bucket.id,
                policy=pulumi.Output.all(partition.partition, identity.account_id, bucket.arn).apply(
                    lambda a: to_json(cost_export_bucket_policy(str(a[0]), str(a[1]), str(a[2])))),
                opts=child,
            )
            table = {
                "BILLING_VIEW_ARN": pulumi.Output.all(partition.partition, identity.account_id).apply(
                    lambda a: billing_view_arn(str(a[0]), str(a[1]))),
                "TIME_GRANULARITY": export_spec.time_granularity,
                "INCLUDE_RESOURCES": "TRUE",
                "INCLUDE_SPLIT_COST_ALLOCATION_DATA": "TRUE" if export_spec.split_cost_allocation else "FALSE",
                "INCLUDE_MANUAL_DISCOUNT_COMPATIBILITY": "FALSE",
                "INCLUDE_CAPACITY_RESERVATION_DATA": "TRUE",
            }
            aws.bcmdata.Export(
                f"{name}-cur2",
                export={
                    "name": f"{cluster_name}-cur2",
                    "description": f"CUR 2.0 of {cluster_name}: cost per team (namespace), cost center and pod",
                    "data_queries": [{"query_statement": export_query(export_spec.split_cost_allocation),
                                      "table_configurations": {"COST_AND_USAGE_REPORT": table}}],
                    "destination_configurations": [{"s3_destinations": [{
                        "s3_bucket": bucket.bucket,
                        "s3_prefix": f"cur2/{cluster_name}",
                        "s3_region": region,
                        "s3_output_configurations": [{"compression": "PARQUET", "format": "PARQUET",
                                                      "output_type": "CUSTOM", "overwrite": "OVERWRITE_REPORT"}],
                    }]}],
                    "refresh_cadences": [{"frequency": "SYNCHRONOUS"}],
                },
                tags=merge_tags(labels, f"{cluster_name}-cur2"),
                # The export checks at creation that it may write to the bucket. A rename keeps the export (and
                # where it writes): its name and prefix are fixed at creation.
                opts=pulumi.ResourceOptions(
                    parent=self, providers={"aws": billing_provider}, depends_on=[policy],
                    ignore_changes=["export.name", "export.destinationConfigurations[0].s3Destinations[0].s3Prefix"]),
            )
            self.export_bucket_name = bucket.bucket
        self.register_outputs({"budgets": self.budget_names})

    def _budget(self, logical_name: str, budget_name: str, limit_usd: float, tag_filter: list[str],
                notifications: list[dict[str, object]], tags: Mapping[str, str],
                billing_provider: aws.Provider) -> pulumi.Output[str]:
        """A monthly cost budget on a ``TagKeyValue`` filter; its name is kept on a cluster rename (with the
        budget's history)."""
        budget = aws.budgets.Budget(
            logical_name,
            name=budget_name,
            budget_type="COST",
            time_unit="MONTHLY",
            limit_amount=f"{limit_usd:.2f}",
            limit_unit="USD",
            cost_filters=[{"name": "TagKeyValue", "values": tag_filter}],
            notifications=notifications,
            tags=dict(tags),
            opts=pulumi.ResourceOptions(parent=self, providers={"aws": billing_provider}, ignore_changes=["name"]),
        )
        name: pulumi.Output[str] = budget.name
        return name


__all__ = ["DATA_EXPORT_REGION", "AwsCostPlane", "billing_view_arn", "budget_filter_values", "budget_notifications",
           "export_query"]
