"""The cost plane's inputs: each team's budget and the stack's cost export and allocation tags."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt

from components.spec.base import _Model, unit

# A plain address check (local@domain.tld); AWS Budgets verifies nothing more at create time.
_EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
# AWS Budgets: "A budget can have up to five notifications, and each notification can have one SNS subscriber
# and up to 10 email subscribers" (the Budgets API model's CreateBudget documentation, as shipped in botocore;
# CloudFormation AWS::Budgets::Budget says the same).
MAX_BUDGET_NOTIFICATIONS = 5
MAX_BUDGET_EMAIL_SUBSCRIBERS = 10


class BudgetSpec(_Model):
    """A team's monthly AWS Budget: an amount, the alert thresholds and who gets the alerts."""

    monthly_usd: StrictInt | StrictFloat = Field(
        alias="monthlyUsd", gt=0, le=100_000_000, description="The team's monthly budget in USD.",
        json_schema_extra=unit("USD per month"),
    )
    alert_at_percent: list[StrictInt] = Field(
        default_factory=lambda: [80, 100], min_length=1, max_length=MAX_BUDGET_NOTIFICATIONS - 1,
        description="Actual-spend alerts, in percent of the budget (one forecast alert at 100 % is added).",
        json_schema_extra=unit("percent of the budget"),
    )
    notify: list[str] = Field(
        min_length=1, max_length=MAX_BUDGET_EMAIL_SUBSCRIBERS,
        description="The team owner's addresses, alerted at each threshold (billing.notify is added).",
    )


class CostExportSpec(_Model):
    """The CUR 2.0 data export that gives finance cost per team, cost center and pod."""

    enabled: StrictBool = Field(default=True, description="Create the export and its bucket.")
    time_granularity: Literal["HOURLY", "DAILY", "MONTHLY"] = Field(
        default="HOURLY", description="Line-item granularity of the export (CUR 2.0 TIME_GRANULARITY)."
    )
    split_cost_allocation: StrictBool = Field(
        default=True, description="Include EKS split cost allocation data (pod-level cost by namespace); it must "
        "also be enabled in the payer account's Billing preferences.",
    )
    retention_days: StrictInt = Field(
        default=30, ge=1, le=3650, description="Days an overwritten export version is kept.",
        json_schema_extra=unit("days"),
    )


class BillingSpec(_Model):
    """Where the stack's cost goes: budget recipients, cost allocation tags and the usage export."""

    notify: list[str] = Field(
        min_length=1, max_length=MAX_BUDGET_EMAIL_SUBSCRIBERS,
        description="Platform and finance addresses: alerted by the cluster's budget and added to every team's.",
    )
    cluster_monthly_usd: StrictInt | StrictFloat | None = Field(
        default=None, alias="clusterMonthlyUsd", gt=0, le=1_000_000_000,
        description="The whole cluster's monthly budget (default: the sum of the team budgets).",
        json_schema_extra=unit("USD per month"),
    )
    allocation_tags: Literal["activate", "payer-managed"] = Field(
        default="payer-managed",
        description="'activate' creates the billing tags' cost allocation tag activation (only a payer account "
        "may); 'payer-managed' leaves it to the organisation's management account and lists the keys.",
    )
    cost_export: CostExportSpec = Field(default_factory=CostExportSpec, description="The CUR 2.0 data export.")


def email_problem(address: str) -> str | None:
    """Why ``address`` is not an email address AWS Budgets would take, or None."""
    if len(address) > 254 or not _EMAIL_RE.fullmatch(address):
        return f"'{address}' is not an email address (name@domain.tld)"
    return None
