"""GCP budgets: one for the cluster and one per team that has something billed under its label, on the stack's
billing account, filtered by label.

What a label-filtered budget sees (Cloud Billing "Create, edit, or delete budgets and budget alerts": a budget's
label filter takes one key and value): resources carrying that label. The shared GKE nodes carry the cluster's
labels, so the cluster budget is the one that sees the GPUs; a team's budget sees what is labelled with the team
(its own buckets, VMs or jobs elsewhere in the project); each team's share of the shared nodes is in the Cloud
Billing export by namespace, which GKE cost allocation (on in this cluster) adds. Alerts reach the addresses
through Cloud Monitoring email channels (at most 5 per budget, checked by the spec) and the billing account's
admins (default IAM recipients stay on).

A budget is created only when something the stack bills carries its label: the cluster's (every resource) and a
team's where a node pool is dedicated to it (``nodePools[].team``). A team on shared pools is watched in the cluster
(its OpenCost spend against its monthly budget, the TeamSpendOverBudget alert) and billed by namespace in the
export: GKE cost allocation data is "only" in the BigQuery detailed billing export (GKE "View detailed breakdown of
cluster costs", Limitations), which no budget filter reads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.spec import BillingSpec, TeamSpec


class GcpBudgets(pulumi.ComponentResource):
    """A budget per team (its ``monthlyUsd`` and thresholds) and one for the cluster, alerting by email."""

    def __init__(self, name: str, *, billing_account: str, project: str, project_number: pulumi.Output[str],
                 cluster_name: str, teams: Sequence[TeamSpec], billing: BillingSpec, labels: Mapping[str, str],
                 billed_teams: Collection[str] = (),
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:cost:GcpBudgets", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        channels: dict[str, gcp.monitoring.NotificationChannel] = {}

        def channel(address: str) -> pulumi.Output[str]:
            if address not in channels:
                channels[address] = gcp.monitoring.NotificationChannel(
                    f"{name}-email-{len(channels)}", project=project, type="email",
                    display_name=f"{cluster_name} budget: {address}", labels={"email_address": address},
                    user_labels=dict(labels), opts=child)
            return channels[address].name

        def budget(key: str, display: str, usd: float, percents: Sequence[int], label: tuple[str, str],
                   recipients: Sequence[str]) -> None:
            gcp.billing.Budget(
                f"{name}-{key}",
                billing_account=billing_account,
                display_name=display[:60],
                amount=gcp.billing.BudgetAmountArgs(specified_amount=gcp.billing.BudgetAmountSpecifiedAmountArgs(
                    currency_code="USD", units=str(int(usd)), nanos=round((usd - int(usd)) * 1e9))),
                budget_filter=gcp.billing.BudgetBudgetFilterArgs(
                    projects=[pulumi.Output.concat("projects/", project_number)],
                    labels={label[0]: label[1]},
                    calendar_period="MONTH",
                    credit_types_treatment="INCLUDE_ALL_CREDITS"),
                threshold_rules=[
                    *[gcp.billing.BudgetThresholdRuleArgs(threshold_percent=p / 100) for p in percents],
                    gcp.billing.BudgetThresholdRuleArgs(threshold_percent=1.0, spend_basis="FORECASTED_SPEND"),
                ],
                all_updates_rule=gcp.billing.BudgetAllUpdatesRuleArgs(
                    monitoring_notification_channels=[channel(a) for a in sorted(set(recipients))],
                    disable_default_iam_recipients=False),
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(ignore_changes=["displayName"])),
            )

        total = 0.0
        for team in teams:
            if team.budget is None:
                continue
            total += float(team.budget.monthly_usd)
            if team.name not in billed_teams:
                continue  # nothing is billed under its label: a budget here would watch $0
            budget(f"team-{team.name}", f"{cluster_name} team {team.name}", float(team.budget.monthly_usd),
                   team.budget.alert_at_percent, ("team", team.name), [*team.budget.notify, *billing.notify])
        cluster_usd = float(billing.cluster_monthly_usd) if billing.cluster_monthly_usd is not None else total
        if cluster_usd > 0:
            budget("cluster", f"{cluster_name} cluster", cluster_usd, [80, 100], ("cluster", cluster_name),
                   billing.notify)
        self.register_outputs({})
