"""Billing: every cost-bearing object names who pays for it."""

from __future__ import annotations

import re
from typing import Any

from pulumi_policy import ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    GCP_LABEL_FIELDS,
    GKE_CLUSTER,
    NAMESPACE,
    REQUIRED_LIST,
    SYSTEM_NAMESPACES_KNOB,
    Knob,
    Reporter,
    as_dict,
    effective_tags,
    gcp_labelled,
    gcp_labels,
    get,
    is_gpu_node_group,
    k8s_name,
    k8s_namespace,
    missing_keys,
    of_type,
    path,
    resource_policy,
    seen,
    stack_policy,
    team_namespaces,
)

REQUIRED_TAGS = Knob("requiredTags", REQUIRED_LIST,
                     ["team", "cost-center", "environment", "owner"])
REQUIRED_LABELS = Knob("requiredLabels", REQUIRED_LIST,
                       ["team", "cost-center", "environment"])
# AWS resource types of this blueprint that accept tags (a test keeps the list in step with the program).
TAGGABLE = Knob("taggableTypes", REQUIRED_LIST, [
    "aws:bcmdata/export:Export",
    "aws:budgets/budget:Budget",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
    "aws:ec2/eip:Eip",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/placementGroup:PlacementGroup",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/vpc:Vpc",
    "aws:ec2/vpcEndpoint:VpcEndpoint",
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment",
    "aws:ebs/volume:Volume",
    "aws:eks/accessEntry:AccessEntry",
    "aws:eks/addon:Addon",
    "aws:eks/cluster:Cluster",
    "aws:eks/nodeGroup:NodeGroup",
    "aws:rds/instance:Instance",
    "aws:rds/parameterGroup:ParameterGroup",
    "aws:rds/subnetGroup:SubnetGroup",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
    "aws:iam/role:Role",
    "aws:kms/key:Key",
    "aws:route53/resolverEndpoint:ResolverEndpoint",
    "aws:s3/bucket:Bucket",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
])


def _aws_tags(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type not in cfg["taggableTypes"] and "tags" not in args.props:
        return
    if not args.resource_type.startswith("aws:"):
        return
    tags = effective_tags(args.props, args.provider.props if args.provider else None)
    missing = missing_keys(tags, cfg["requiredTags"])
    if missing:
        # The field is the resource's own tag (the first missing; the message lists them all): the value seen is
        # a blank one it carries, none when it carries none.
        report(f"{args.name} must carry the billing tags {', '.join(cfg['requiredTags'])} (directly or through "
               f"the provider's defaultTags); missing: {', '.join(missing)}.",
               field=path("tags", missing[0]), value=seen(args.props, "tags", missing[0]))


aws_billing_tags = resource_policy(
    "aws-resources-require-billing-tags", "billing",
    "Every taggable AWS resource carries the billing tags, counting the provider's default tags.",
    "Add the missing keys to the stack's labels (gpu-cluster:spec.labels), which feed the provider's "
    "defaultTags and every resource's tags.",
    Severity.HIGH, _aws_tags, [REQUIRED_TAGS, TAGGABLE],
)


GCP_REQUIRED_LABELS = Knob("requiredLabels", REQUIRED_LIST,
                           ["team", "cost-center", "environment", "owner"])


def _gcp_labels(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if not gcp_labelled(args.resource_type, args.props):
        return
    site, merged = GCP_LABEL_FIELDS.get(args.resource_type, (("labels",), True))
    labels = gcp_labels(args.resource_type, args.props, args.provider.props if args.provider else None)
    missing = missing_keys(labels, cfg["requiredLabels"])
    if missing:
        where = ".".join(site) + (" (directly or through the provider's defaultLabels)" if merged else
                                  " (the provider's defaultLabels do not reach it)")
        report(f"{args.name} must carry the billing labels {', '.join(cfg['requiredLabels'])} in {where}; "
               f"missing: {', '.join(missing)}.",
               field=path(*site, missing[0]), value=seen(args.props, *site, missing[0]))


gcp_billing_labels = resource_policy(
    "gcp-resources-require-billing-labels", "billing",
    "Every labelled GCP resource carries the billing labels, counting the provider's default labels where they apply.",
    "Add the missing keys to the stack's labels (gpu-cluster:spec.labels), which feed the provider's defaultLabels, "
    "the cluster's and node pools' resourceLabels and the notification channels' userLabels.",
    Severity.HIGH, _gcp_labels, [GCP_REQUIRED_LABELS],
)


def _namespace_labels(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != NAMESPACE:
        return
    labels = get(args.props, "metadata", "labels", default={}) or {}
    missing = missing_keys(labels, cfg["requiredLabels"])
    if missing:
        name = get(args.props, "metadata", "name", default=args.name)
        report(f"namespace {name} must carry the billing labels {', '.join(cfg['requiredLabels'])} so that "
               f"cost is attributed to a team; missing: {', '.join(missing)}.",
               field=path("metadata", "labels", missing[0]), value=seen(labels, missing[0]))


namespace_billing_labels = resource_policy(
    "kubernetes-namespaces-require-billing-labels", "billing",
    "Every namespace the stack creates carries the billing labels that cost attribution aggregates by.",
    "Give the team a costCenter in gpu-cluster:spec.teams; system namespaces take the stack's labels.",
    Severity.HIGH, _namespace_labels, [REQUIRED_LABELS],
)

OWNER_KEYS = Knob("ownerTags", REQUIRED_LIST, ["owner", "cost-center"])


def _node_group_owner(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/nodeGroup:NodeGroup" or not is_gpu_node_group(args.props):
        return
    tags = effective_tags(args.props, args.provider.props if args.provider else None)
    missing = missing_keys(tags, cfg["ownerTags"])
    if missing:
        report(f"GPU node group {args.props.get('nodeGroupName', args.name)} must name its "
               f"{' and '.join(cfg['ownerTags'])}; missing: {', '.join(missing)}.",
               field=path("tags", missing[0]), value=seen(args.props, "tags", missing[0]))


gpu_node_group_owner = resource_policy(
    "aws-eks-gpu-nodegroup-require-owner", "billing",
    "Every GPU node group names its owner and cost-center, the most expensive line of the bill.",
    "Set owner and cost-center in gpu-cluster:spec.labels.",
    Severity.HIGH, _node_group_owner, [OWNER_KEYS],
)

TEAM_TAG_KEY = Knob("teamTagKey", {"type": "string", "minLength": 1}, "team")
BUDGET = "aws:budgets/budget:Budget"


def _aws_alerts(budget: Any) -> bool:
    """An AWS Budget with a notification that has a subscriber."""
    return any(get(n, "subscriberEmailAddresses") or get(n, "subscriberSnsTopicArns")
               for n in budget.props.get("notifications") or [])


def _aws_tag_values(budget: Any, tag_key: str) -> set[str]:
    """The values of a budget's ``TagKeyValue`` filter on ``tag_key``."""
    prefix = f"user:{tag_key}$"
    return {str(v)[len(prefix):] for f in budget.props.get("costFilters") or [] if get(f, "name") == "TagKeyValue"
            for v in get(f, "values") or [] if str(v).startswith(prefix)}


def _budget_teams(budget: Any, tag_key: str) -> set[str]:
    """The teams a budget watches: the values of its ``TagKeyValue`` filter on the team tag, if it alerts."""
    return _aws_tag_values(budget, tag_key) if _aws_alerts(budget) else set()


def _report_unwatched(report: Reporter, message: str, owner: Any, silent: tuple[Any, str] | None) -> None:
    """A spend nothing watches: on the budget that filters on it but alerts nobody, at the field to edit
    (``silent``), else on the resource that has no budget, without a field (what it lacks is a whole budget)."""
    if silent is None:
        report(message, owner.urn)
    else:
        budget, field = silent
        report(message, budget.urn, field=field, value=seen(budget.props, field))


SPEND_ALERT = "TeamSpendOverBudget"
# What the stack bills (the resources whose cost allocation tags or labels a budget filter reads): node groups' and
# pools' instances, the cluster, filesystems, buckets, NAT, logs and keys. AWS instances carry their launch template's
# tag specifications, not the node group's tags.
AWS_BILLED = ("aws:ec2/launchTemplate:LaunchTemplate", "aws:eks/cluster:Cluster",
              "aws:fsx/lustreFileSystem:LustreFileSystem", "aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2",
              "aws:ec2/natGateway:NatGateway", "aws:cloudwatch/logGroup:LogGroup", "aws:kms/key:Key",
              "aws:rds/instance:Instance")
GCP_BILLED = ("gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster", "gcp:lustre/instance:Instance",
              "gcp:filestore/instance:Instance", "gcp:parallelstore/instance:Instance", "gcp:storage/bucket:Bucket",
              "gcp:kms/cryptoKey:CryptoKey")


def _spend_alerts(resources: Any) -> set[str]:
    """Namespaces whose spend the cluster watches: a TeamSpendOverBudget alert on the namespace (PrometheusRule)."""
    out: set[str] = set()
    for rule in of_type(resources, "kubernetes:monitoring.coreos.com/v1:PrometheusRule"):
        for group in get(rule.props, "spec", "groups") or []:
            for r in get(group, "rules") or []:
                if get(r, "alert") == SPEND_ALERT and get(r, "labels", "team"):
                    out.add(str(get(r, "labels", "team")))
    return out


_SLURM_BUDGET = re.compile(r"^Account - '([^']+)'.*:GrpTRESMins=gres/gpu=(\d+)", re.M)


def _slurm_budgets(resources: Any) -> set[str]:
    """Teams whose Slurm account carries a GPU-minutes budget (GrpTRESMins gres/gpu, reset monthly) in the accounts
    file the platform loads into slurmdbd: Slurm holds their jobs past it, which watches their Slurm spend."""
    out: set[str] = set()
    for cm in of_type(resources, "kubernetes:core/v1:ConfigMap"):
        if k8s_namespace(cm.props) != "slurm" or not k8s_name(cm.props).startswith("slurm-accounts"):
            continue
        text = str(get(cm.props, "data", "accounts.cfg", default="") or "")
        out |= {team for team, minutes in _SLURM_BUDGET.findall(text) if int(minutes) > 0}
    return out


def _aws_billed_tags(resources: Any) -> set[tuple[str, str]]:
    """Every (key, value) tag some billed AWS resource carries (with its provider's default tags; a launch
    template's instance tag specifications)."""
    out: set[tuple[str, str]] = set()
    for res in resources:
        if res.resource_type not in AWS_BILLED:
            continue
        provider = res.provider.props if res.provider else None
        tags = effective_tags(res.props, provider)
        if res.resource_type == "aws:ec2/launchTemplate:LaunchTemplate":
            tags = {}
            for spec in res.props.get("tagSpecifications") or []:
                if get(spec, "resourceType") == "instance":
                    tags.update(as_dict(get(spec, "tags")))
        out |= {(str(k), str(v)) for k, v in tags.items()}
    return out


def _team_budgets(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if not any(r.resource_type.startswith("aws:") for r in args.resources):
        return  # the AWS cost plane; a GCP stack's budgets are Cloud Billing budgets
    watched = _spend_alerts(args.resources) | _slurm_budgets(args.resources)
    for budget in of_type(args.resources, BUDGET):
        watched |= _budget_teams(budget, cfg["teamTagKey"])
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        name = k8s_name(ns.props)
        if name not in watched:
            silent = next(((b, "notifications") for b in of_type(args.resources, BUDGET)
                           if name in _aws_tag_values(b, cfg["teamTagKey"])), None)
            _report_unwatched(
                report, f"Team namespace {name} has no budget that sees its spend: a {SPEND_ALERT} alert on the "
                f"namespace (gpu-cluster:spec.teams[].budget), or an AWS Budget with a TagKeyValue filter "
                f"user:{cfg['teamTagKey']}${name} on resources billed under that tag, with an alert subscriber.",
                ns, silent)


def _budgets_see_spend(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    aws_tags = _aws_billed_tags(args.resources)
    for budget in of_type(args.resources, BUDGET):
        for i, f in enumerate(budget.props.get("costFilters") or []):
            if get(f, "name") != "TagKeyValue":
                continue
            for j, value in enumerate(get(f, "values") or []):
                key, _, tag = str(value).removeprefix("user:").partition("$")
                if (key, tag) not in aws_tags:
                    report(f"AWS Budget {budget.props.get('name', budget.name)} filters on {key}={tag}, which no "
                           "resource the stack bills carries: it watches $0. Dedicate a node group to the team "
                           "(nodeGroups[].team) or drop the budget; the team's spend is watched in the cluster.",
                           budget.urn, field=path("costFilters", i, "values", j), value=value)
    for budget in of_type(args.resources, GCP_BUDGET):
        labels = as_dict(get(budget.props, "budgetFilter", "labels"))
        billed = [r for r in args.resources if r.resource_type in GCP_BILLED]
        for key, value in labels.items():
            if not any(gcp_labels(r.resource_type, r.props, r.provider.props if r.provider else None).get(key)
                       == value for r in billed):
                report(f"Cloud Billing budget {budget.props.get('displayName', budget.name)} filters on "
                       f"{key}={value}, which no resource the stack bills carries: it watches $0. Dedicate a node "
                       "pool to the team (nodePools[].team) or drop the budget.", budget.urn,
                       field=path("budgetFilter", "labels", key), value=value)


budgets_see_spend = stack_policy(
    "budgets-see-spend", "billing",
    "Every budget filters on a tag or label that something the stack bills carries (a budget on nothing alerts never).",
    "Budget a team through a node group or pool dedicated to it (nodeGroups[].team, nodePools[].team); a team on "
    "shared nodes is watched by its in-cluster spend alert.",
    Severity.HIGH, _budgets_see_spend,
)


def _cluster_budget(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    clusters = of_type(args.resources, "aws:eks/cluster:Cluster")
    if not clusters:
        return
    prefix = f"user:{cfg['clusterTagKey']}$"
    budgets = of_type(args.resources, BUDGET)
    watched = {v for b in budgets if _aws_alerts(b) for v in _aws_tag_values(b, cfg["clusterTagKey"])}
    for cluster in clusters:
        name = str(cluster.props.get("name", cluster.name))
        if name not in watched:
            silent = next(((b, "notifications") for b in budgets if name in _aws_tag_values(b, cfg["clusterTagKey"])),
                          None)
            _report_unwatched(
                report, f"Cluster {name} has no budget on its shared spend: an AWS Budget with a TagKeyValue filter "
                f"{prefix}{name} and at least one alert subscriber (team budgets cannot see the shared nodes).",
                cluster, silent)


CLUSTER_TAG_KEY = Knob("clusterTagKey", {"type": "string", "minLength": 1}, "cluster")
cluster_budget = stack_policy(
    "aws-cluster-has-a-budget", "billing",
    "Every EKS cluster has an AWS Budget on its cluster tag that alerts someone: the only budget that sees shared "
    "GPU nodes.",
    "Set gpu-cluster:spec.billing.notify (and clusterMonthlyUsd, default the sum of the team budgets).",
    Severity.HIGH, _cluster_budget, [CLUSTER_TAG_KEY],
)

team_budgets = stack_policy(
    "aws-every-team-has-a-budget", "billing",
    "Every team (a team namespace) has a budget that sees its spend: its in-cluster spend alert, or an AWS Budget on "
    "its team tag that alerts someone.",
    "Give the team a budget (gpu-cluster:spec.teams[].budget with monthlyUsd and notify).",
    Severity.HIGH, _team_budgets, [TEAM_TAG_KEY, SYSTEM_NAMESPACES_KNOB],
)

GCP_BUDGET = "gcp:billing/budget:Budget"


def _gcp_alerts(budget: Any) -> bool:
    """A Cloud Billing budget that alerts someone: a threshold rule, and a channel, a Pub/Sub topic or the billing
    account's own recipients (on unless disableDefaultIamRecipients)."""
    if not budget.props.get("thresholdRules"):
        return False
    rule = budget.props.get("allUpdatesRule") or {}
    return bool(get(rule, "monitoringNotificationChannels") or get(rule, "pubsubTopic")
                or get(rule, "disableDefaultIamRecipients") is not True)


def _gcp_silent(args: StackValidationArgs, label_key: str, value: str) -> tuple[Any, str] | None:
    """The first Cloud Billing budget that filters on ``label_key: value`` but alerts nobody, with the field to
    edit: its thresholdRules when it has none, else its allUpdatesRule."""
    for b in of_type(args.resources, GCP_BUDGET):
        labels = as_dict(get(b.props, "budgetFilter", "labels"))
        if label_key in labels and str(labels[label_key]) == value and not _gcp_alerts(b):
            return b, "allUpdatesRule" if b.props.get("thresholdRules") else "thresholdRules"
    return None


def _gcp_watched(args: StackValidationArgs, label_key: str) -> set[str] | None:
    """The values of ``label_key`` that an alerting GCP budget filters on; None when the stack has no billing account
    (it enables neither the Cloud Billing Budget API nor any budget, so there is nothing to check)."""
    budgets = of_type(args.resources, GCP_BUDGET)
    budget_api = [s for s in of_type(args.resources, "gcp:projects/service:Service")
                  if s.props.get("service") == "billingbudgets.googleapis.com"]
    if not budgets and not budget_api:
        return None
    return {str(v) for b in budgets if _gcp_alerts(b)
            for k, v in (get(b.props, "budgetFilter", "labels") or {}).items() if k == label_key}


def _gcp_team_budgets(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if not of_type(args.resources, GKE_CLUSTER):
        return
    watched = _gcp_watched(args, cfg["teamLabelKey"])
    if watched is None:
        args.not_applicable("the stack has no Cloud Billing budget (no gcp.billingAccount in its spec)")
        return
    watched |= _spend_alerts(args.resources) | _slurm_budgets(args.resources)
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        name = k8s_name(ns.props)
        if name not in watched:
            _report_unwatched(
                report, f"Team namespace {name} must have a budget that sees its spend: a {SPEND_ALERT} alert on the "
                f"namespace, or a Cloud Billing budget with budgetFilter.labels {{{cfg['teamLabelKey']}: {name}}} "
                "on resources billed under that label, a threshold rule and someone it alerts.", ns,
                _gcp_silent(args, cfg["teamLabelKey"], name))


TEAM_LABEL_KEY = Knob("teamLabelKey", {"type": "string", "minLength": 1}, "team")
gcp_team_budgets = stack_policy(
    "gcp-every-team-has-a-budget", "billing",
    "When the stack has Cloud Billing budgets, every team (a team namespace) has a budget that sees its spend: its "
    "in-cluster spend alert, or a Cloud Billing budget on its team label that alerts someone.",
    "Give the team a budget (gpu-cluster:spec.teams[].budget with monthlyUsd and notify) and keep "
    "gpu-cluster:spec.gcp.billingAccount set.",
    Severity.HIGH, _gcp_team_budgets, [TEAM_LABEL_KEY, SYSTEM_NAMESPACES_KNOB],
)


def _gcp_cluster_budget(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    clusters = of_type(args.resources, GKE_CLUSTER)
    if not clusters:
        return
    watched = _gcp_watched(args, cfg["clusterLabelKey"])
    if watched is None:
        args.not_applicable("the stack has no Cloud Billing budget (no gcp.billingAccount in its spec)")
        return
    for cluster in clusters:
        name = str(cluster.props.get("name", cluster.name))
        if name not in watched:
            _report_unwatched(
                report, f"GKE cluster {name} must have a budget on its shared spend: a Cloud Billing budget with "
                f"budgetFilter.labels {{{cfg['clusterLabelKey']}: {name}}}, a threshold rule and someone it "
                "alerts (team budgets cannot see the shared nodes).", cluster,
                _gcp_silent(args, cfg["clusterLabelKey"], name))


CLUSTER_LABEL_KEY = Knob("clusterLabelKey", {"type": "string", "minLength": 1}, "cluster")
gcp_cluster_budget = stack_policy(
    "gcp-cluster-has-a-budget", "billing",
    "When the stack has Cloud Billing budgets, every GKE cluster has one on its cluster label that alerts someone.",
    "Set gpu-cluster:spec.billing.notify (and clusterMonthlyUsd, default the sum of the team budgets) and keep "
    "gpu-cluster:spec.gcp.billingAccount set.",
    Severity.HIGH, _gcp_cluster_budget, [CLUSTER_LABEL_KEY],
)

POLICIES = [aws_billing_tags, gcp_billing_labels, namespace_billing_labels, gpu_node_group_owner, team_budgets,
            cluster_budget, gcp_team_budgets, gcp_cluster_budget, budgets_see_spend]
