"""Slurm (Slinky): accounting kept in production, partitions with limits, login not on the internet, billed pods."""

from __future__ import annotations

import ipaddress
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs

from gpu_policies.common import (
    Reporter,
    get,
    k8s_name,
    of_type,
    path,
    seen,
    stack_policy,
)

BILLING_KEYS = ("team", "cost-center", "owner", "environment")
SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
CONTROLLER, ACCOUNTING, NODESET, LOGINSET, RESTAPI = (SLINKY + k for k in (
    "Controller", "Accounting", "NodeSet", "LoginSet", "RestApi"))
DATABASES = ("aws:rds/instance:Instance", "gcp:sql/databaseInstance:DatabaseInstance")
# Where the login Service is made internal: the EKS service controller's and the AWS Load Balancer Controller's
# annotations, and GKE's (Kubernetes cloud-provider-aws service annotations; GKE "LoadBalancer Service parameters").
INTERNAL = {"service.beta.kubernetes.io/aws-load-balancer-internal": "true",
            "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal",
            "networking.gke.io/load-balancer-type": "Internal"}


def _accounting(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for ctl in of_type(args.resources, CONTROLLER):
        if get(ctl.props, "metadata", "labels", "environment") != "prod":
            continue
        if not get(ctl.props, "spec", "accountingRef", "name") or not of_type(args.resources, ACCOUNTING):
            report(f"Slurm controller {k8s_name(ctl.props)} runs in prod without accounting (spec.accountingRef and an "
                   "Accounting): job history, accounts, fair share and GPU limits would not exist.", ctl.urn,
                   field="spec.accountingRef", value=seen(ctl.props, "spec", "accountingRef"))
            continue
        dbs = of_type(args.resources, *DATABASES)
        if not dbs:
            report("Slurm accounting in prod needs the stack's managed database (RDS or Cloud SQL).", ctl.urn)
        for db in dbs:
            protected = db.props.get("deletionProtection") is True or \
                get(db.props, "settings", "deletionProtectionEnabled") is True
            if not protected or not db.opts.protect:
                report(f"The Slurm accounting database {db.name} must have deletion protection and protect: true "
                       "in prod.", db.urn, field="deletionProtection", value=seen(db.props, "deletionProtection"))
            backups = db.props.get("backupRetentionPeriod") or get(
                db.props, "settings", "backupConfiguration", "enabled")
            if not backups:
                report(f"The Slurm accounting database {db.name} must keep automated backups in prod.", db.urn,
                       field="backupRetentionPeriod", value=seen(db.props, "backupRetentionPeriod"))


accounting_in_production = stack_policy(
    "slurm-accounting-in-production", "data-safety",
    "A production Slurm cluster keeps accounting on a protected, backed-up managed database.",
    "Keep scheduler.slurm.accounting.enabled (required in prod) and deletionProtection: true.",
    Severity.HIGH, _accounting, enforcement=EnforcementLevel.MANDATORY,  # it judges prod controllers only
)


def _partition_fields(line: str) -> dict[str, str]:
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def _partitions(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for ctl in of_type(args.resources, CONTROLLER):
        conf = str(get(ctl.props, "spec", "extraConf", default="") or "")
        lines = [ln for ln in conf.splitlines() if ln.strip().startswith("PartitionName=")]
        for ns in of_type(args.resources, NODESET):
            if get(ns.props, "spec", "partition", "enabled"):
                lines.append(f"PartitionName={k8s_name(ns.props)} {get(ns.props, 'spec', 'partition', 'config')}")
        if not lines:
            report(f"Slurm controller {k8s_name(ctl.props)} defines no partition with limits.", ctl.urn,
                   field="spec.extraConf", value=seen(ctl.props, "spec", "extraConf"))
        for line in lines:
            fields = _partition_fields(line)
            missing = [k for k in ("MaxTime", "MaxNodes", "AllowAccounts")
                       if fields.get(k, "").upper() in ("", "INFINITE", "UNLIMITED", "ALL")]
            if missing:
                report(f"Partition {fields.get('PartitionName')} must limit {', '.join(missing)} (no job runs "
                       "forever, takes every node, or is charged to an account outside the partition's teams).",
                       ctl.urn, field="spec.extraConf", value=line)


partitions_limited = stack_policy(
    "slurm-partitions-have-limits", "quotas",
    "Every Slurm partition has a time limit, a node limit and the accounts allowed on it.",
    "Set maxTimeHours (and maxNodesPerJob, teams) on each scheduler.slurm.partitions entry.",
    Severity.HIGH, _partitions,
)


def _login(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for login in of_type(args.resources, LOGINSET):
        service = get(login.props, "spec", "service", default={}) or {}
        annotations = get(service, "metadata", "annotations", default={}) or {}
        if get(service, "spec", "type") == "LoadBalancer" and \
                not any(annotations.get(k) == v for k, v in INTERNAL.items()):
            report(f"Login service of {k8s_name(login.props)} is a load balancer on the internet: make it internal.",
                   login.urn, field="spec.service.metadata.annotations",
                   value=seen(login.props, "spec", "service", "metadata", "annotations"))
        ranges = get(service, "spec", "loadBalancerSourceRanges", default=[]) or []
        if not ranges:
            report(f"Login service of {k8s_name(login.props)} accepts SSH from every address: list the source ranges.",
                   login.urn, field="spec.service.spec.loadBalancerSourceRanges",
                   value=seen(login.props, "spec", "service", "spec", "loadBalancerSourceRanges"))
        for i, cidr in enumerate(ranges):
            try:
                net = ipaddress.ip_network(str(cidr), strict=False)
            except ValueError:
                continue
            if net.prefixlen == 0:
                report(f"Login service of {k8s_name(login.props)} accepts SSH from {cidr}.", login.urn,
                       field=path("spec", "service", "spec", "loadBalancerSourceRanges", i), value=cidr)


login_not_open = stack_policy(
    "slurm-login-not-open-to-the-internet", "security",
    "Slurm login nodes sit behind an internal load balancer that lists its source networks.",
    "Set scheduler.slurm.login.sourceCidrs to your VPN or bastion networks (private ranges only).",
    Severity.HIGH, _login,
)


# What sshd needs beyond a container's defaults (privilege separation chroots); anything else added is a privilege
# every user who logs in sits next to.
LOGIN_CAPABILITIES = {"SYS_CHROOT"}


def _login_privilege(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for login in of_type(args.resources, LOGINSET):
        context = get(login.props, "spec", "login", "securityContext", default={}) or {}
        added = sorted(str(c) for c in (get(context, "capabilities", "add", default=[]) or [])
                       if str(c).upper().removeprefix("CAP_") not in LOGIN_CAPABILITIES)
        if added:
            report(f"Login pods of {k8s_name(login.props)} add capabilities {', '.join(added)}: sshd needs only "
                   "SYS_CHROOT, and every user who can SSH in runs beside them.", login.urn,
                   field="spec.login.securityContext.capabilities.add", value=added)
        if context.get("privileged") is True:
            report(f"Login pods of {k8s_name(login.props)} run privileged: every user who can SSH in would hold the "
                   "node beside slurmctld, slurmdbd and the platform. Only running enroot on the login pod needs it "
                   "(slurm-operator docs/usage/pyxis.md); srun --container-image runs containers on the compute nodes.",
                   login.urn, field="spec.login.securityContext.privileged", value=True)


login_unprivileged = stack_policy(
    "slurm-login-unprivileged", "security",
    "Slurm login pods, which every directory user can SSH into, do not run privileged.",
    "Keep the program's LoginSet (unprivileged, SYS_CHROOT only); run containers through srun on compute nodes.",
    Severity.HIGH, _login_privilege,
)


def _billing(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for res in of_type(args.resources, CONTROLLER, ACCOUNTING, NODESET, LOGINSET, RESTAPI):
        labels = get(res.props, "spec", "template", "metadata", "labels", default={}) or {}
        missing = [k for k in BILLING_KEYS if not labels.get(k)]
        if missing:
            report(f"{res.resource_type.removeprefix(SLINKY)} {k8s_name(res.props)}'s pods must carry the billing "
                   f"labels ({', '.join(missing)} missing), so OpenCost and the CUR split charge them.", res.urn,
                   field="spec.template.metadata.labels",
                   value=seen(res.props, "spec", "template", "metadata", "labels"))


pods_billed = stack_policy(
    "slurm-pods-carry-billing-labels", "billing",
    "Every Slurm pod (controller, accounting, REST API, NodeSets, login) carries the billing labels.",
    "Keep the billing labels in the stack spec; the program puts them on every Slinky pod template.",
    Severity.HIGH, _billing,
)

POLICIES = [accounting_in_production, partitions_limited, login_not_open, login_unprivileged, pods_billed]
