"""Rules of scheduler.slurm: node groups it owns, partitions with limits, login reach, accounting in production."""

from __future__ import annotations

import ipaddress
import re

from components.spec.databases import cloud_sql_tier_problem, rds_class_problem
from components.spec.decisions import (
    cloud_node_groups,
    covers_everything,
    instance_catalog,
    slurm_cpu_groups,
    slurm_partition_teams,
    team_cpu_groups,
)
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec
from components.spec.rules.cidrs import valid_cidrs

WHERE = ".scheduler.slurm"
# Slinky's Controller webhook: clusterName at most 40 characters (slurm-operator v1.2.1
# internal/webhook/controller_webhook.go); the cluster name is at most 24, so it always fits.
PRIVATE_V4 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"))


def _check_slurm(spec: ClusterSpec, out: _Collector) -> None:
    """Slurm's node groups are groups of the stack (GPU groups, or CPU groups no team's Kueue quota holds, with a
    system group left), each partition has limits and teams that exist, the login
    load balancer is reachable only from private networks, production keeps accounting."""
    slurm = spec.scheduler.slurm
    if slurm is None:
        return
    catalog = instance_catalog(spec)
    groups = {g.name: g for g in cloud_node_groups(spec)}
    key = "nodeGroups" if spec.cloud == "aws" else "nodePools"
    owned: set[str] = set()
    team_cpu = team_cpu_groups(spec)
    cpu = slurm_cpu_groups(spec)
    cpu_groups = [n for n, g in groups.items() if (f := catalog.get(g.instance_type)) is not None and not f.gpu_count]
    if cpu and cpu_groups and all(n in cpu or n in team_cpu for n in cpu_groups):
        out.add(f"{WHERE}.nodeGroups", "system-node-group",
                f"every node group without GPUs is Slurm's or carries team CPU quota ({', '.join(sorted(cpu_groups))}):"
                " keep one for system pods (slurmctld, slurmdbd, the login pods, Kueue, Prometheus), so jobs cannot "
                "starve the platform")
    for i, name in enumerate(slurm.node_groups):
        group = groups.get(name)
        if group is None:
            out.add(f"{WHERE}.nodeGroups[{i}]", "slurm-node-group",
                    f"'{name}' is not one of {spec.cloud}.{key} ({', '.join(groups) or 'none'})")
            continue
        facts = catalog.get(group.instance_type if spec.cloud == "aws" else group.machine_type)  # type: ignore[union-attr]
        if facts is not None and not facts.gpu_count and name in team_cpu:
            # one scheduler per group: Kueue's CPU flavor would admit pods onto nodes slurmd allocates
            out.add(f"{WHERE}.nodeGroups[{i}]", "slurm-node-group",
                    f"'{name}' carries teams' CPU quota (teams[].cpuQuotas: Kueue's CPU flavor), so it cannot also be "
                    "Slurm's: a node group belongs to one scheduler; give Slurm its own CPU group")
        if name in owned:
            out.add(f"{WHERE}.nodeGroups[{i}]", "unique-names", f"'{name}' is listed twice")
        owned.add(name)
        gpudirect = str(getattr(facts, "gpudirect", "none"))
        if spec.cloud == "gcp" and gpudirect not in ("none", "TCPXO", "RDMA"):
            # TCPXO (A3 Mega) and RDMA (A3 Ultra, A4) pools run slurmd in the acceptance pods' fabric shape
            # (objects/slurm_fabric.py); TCPX (A3 High) has no such shape here (gpudirect_pod_fabric)
            out.add(f"{WHERE}.nodeGroups[{i}]", "slurm-gpudirect",
                    f"'{name}' is a GPUDirect-{gpudirect} pool: slurmd pods there would need the pool's GPU networks, "
                    "its receive-datapath sidecar and its NCCL plugin's environment, which this blueprint builds for "
                    "TCPXO (A3 Mega) and RDMA (A3 Ultra, A4) pools only; use one of those, or keep this pool on Kueue")
    teams = {t.name: t for t in spec.teams}
    names: set[str] = set()
    defaults = 0
    for i, part in enumerate(slurm.partitions):
        where = f"{WHERE}.partitions[{i}]"
        if part.name in names:
            out.add(f"{where}.name", "unique-names", f"partition '{part.name}' is defined twice")
        names.add(part.name)
        defaults += part.default
        if part.default_time_minutes > part.max_time_hours * 60:
            # slurm.conf(5): a job given DefaultTime runs past MaxTime, so Slurm leaves it pending for ever
            # (PartitionTimeLimit) or, with EnforcePartLimits, refuses it
            out.add(f"{where}.defaultTimeMinutes", "slurm-partition-time",
                    f"{part.default_time_minutes} minutes is longer than maxTimeHours ({part.max_time_hours} h = "
                    f"{part.max_time_hours * 60} minutes): a job that asks for no time limit would never run")
        for j, g in enumerate(part.node_groups):
            if g not in owned:
                out.add(f"{where}.nodeGroups[{j}]", "slurm-partition-groups",
                        f"'{g}' is not in scheduler.slurm.nodeGroups ({', '.join(slurm.node_groups)}): a partition "
                        "holds only nodes Slurm runs on")
        mixed = sorted(g for g in part.node_groups if g in cpu), sorted(g for g in part.node_groups
                                                                        if g in owned and g not in cpu)
        if mixed[0] and mixed[1]:
            # slurm.conf(5): DefMemPerCPU and DefMemPerGPU are mutually exclusive; a partition gets one memory default
            out.add(f"{where}.nodeGroups", "slurm-partition-groups",
                    f"partition '{part.name}' mixes CPU groups ({', '.join(mixed[0])}) and GPU groups "
                    f"({', '.join(mixed[1])}): its memory default is per GPU or per CPU (slurm.conf(5): DefMemPerGPU "
                    "and DefMemPerCPU are mutually exclusive); make a CPU-only partition for the CPU groups")
        for j, listed in enumerate(part.teams or []):
            if listed not in teams:
                out.add(f"{where}.teams[{j}]", "slurm-partition-teams",
                        f"'{listed}' is not a team of the stack ({', '.join(teams) or 'none'})")
        if part.teams is None and not slurm_partition_teams(spec.teams, part):
            fix = ("list the teams whose accounts may submit (a CPU-only partition has no GPU quota to infer them "
                   "from)" if all(g in cpu for g in part.node_groups) else
                   "give a team a quota there or list the partition's teams")
            out.add(f"{where}.teams", "slurm-partition-teams",
                    f"no team has a quota on {', '.join(part.node_groups)}, so no account may submit to partition "
                    f"'{part.name}': {fix}")
        if part.max_nodes_per_job is not None:
            nodes = sum(groups[g].max_size for g in part.node_groups if g in groups)
            if nodes and part.max_nodes_per_job > nodes:
                out.add(f"{where}.maxNodesPerJob", "slurm-partition-limits",
                        f"{part.max_nodes_per_job} nodes per job, and partition '{part.name}' has at most {nodes}")
    if defaults > 1:
        out.add(f"{WHERE}.partitions", "slurm-partition-default", f"{defaults} partitions say default: at most one")
    for team_name, users in slurm.users.items():
        team = teams.get(team_name)
        if team is not None and users and team.gid is None:
            out.add(f".teams[{spec.teams.index(team)}].gid", "slurm-team-gid",
                    f"team '{team_name}' has Slurm users ({', '.join(users)}): set gid to the group id your directory "
                    "gives its members (as sssd resolves it), so their jobs can write the team's directory on "
                    f"/shared (root:gid, mode 2770); the default {team.posix_gid} is a hash no directory knows")
        if team_name not in teams:
            out.add(f"{WHERE}.users", "slurm-users-team",
                    f"'{team_name}' is not a team of the stack ({', '.join(teams) or 'none'})")
        seen: set[str] = set()
        for user in users:
            if user in seen:
                out.add(f"{WHERE}.users", "unique-names", f"user '{user}' is listed twice for team '{team_name}'")
            seen.add(user)
    for ti, team in enumerate(spec.teams):
        for j, q in enumerate(team.quotas):
            if q.node_group in owned and (q.borrowing_limit_gpus is not None or q.lending_limit_gpus is not None):
                out.add(f".teams[{ti}].quotas[{j}]", "slurm-quota-kueue-only",
                        f"borrowing and lending limits are Kueue's; '{q.node_group}' is a Slurm node group, where the "
                        "team's gpus are its account's GPU limit (GrpTRES gres/gpu) and fair share")
    parsed = valid_cidrs(slurm.login.source_cidrs, f"{WHERE}.login.sourceCidrs", out)
    nets = [net for _, net in parsed]
    for j, net in parsed:
        if net.version == 4 and not any(net.subnet_of(p) for p in PRIVATE_V4):  # type: ignore[arg-type]
            out.add(f"{WHERE}.login.sourceCidrs[{j}]", "slurm-login-private",
                    f"'{slurm.login.source_cidrs[j]}' is not a private network (RFC 1918 or 100.64.0.0/10): the "
                    "login load balancer is internal, reached from your VPN or peered networks")
    if covers_everything(nets):
        out.add(f"{WHERE}.login.sourceCidrs", "slurm-login-private",
                f"sourceCidrs ({', '.join(slurm.login.source_cidrs)}) open SSH to every address: list your VPN or "
                "bastion networks")
    if spec.environment == "prod" and not slurm.accounting.enabled:
        out.add(f"{WHERE}.accounting.enabled", "slurm-accounting-prod",
                "a prod stack keeps Slurm accounting: job history, accounts, fair share and GPU limits live in it")
    _check_sssd_source(spec, out)
    db = slurm.accounting.database
    if spec.cloud == "aws" and db.tier is not None:
        out.add(f"{WHERE}.accounting.database.tier", "slurm-database-cloud", "tier is Cloud SQL's; on AWS set "
                "instanceClass")
    if spec.cloud == "gcp" and db.instance_class is not None:
        out.add(f"{WHERE}.accounting.database.instanceClass", "slurm-database-cloud", "instanceClass is RDS's; on "
                "GCP set tier")
    problem = (rds_class_problem(db.instance_class) if spec.cloud == "aws" and db.instance_class is not None
               else cloud_sql_tier_problem(db.tier) if spec.cloud == "gcp" and db.tier is not None else None)
    if problem is not None:
        key = "instanceClass" if spec.cloud == "aws" else "tier"
        out.add(f"{WHERE}.accounting.database.{key}", "slurm-database-shape", problem)


# AWS Secrets Manager: a secret's name "can contain ASCII letters, numbers, and the following characters: /_+=.@-",
# up to 512 (API reference CreateSecret, Name); its ARN arn:<partition>:secretsmanager:<region>:<account>:secret:<name>
# (with the six random characters AWS appends). A KMS key's ARN arn:<partition>:kms:<region>:<account>:key/<id> (an
# alias is not what IAM's Resource names). GCP Secret Manager: a secret id of up to 255 letters, numerals, hyphens and
# underscores (Secret Manager "Create a secret").
SM_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
SM_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:([a-z0-9-]+):[0-9]{12}:key/[A-Za-z0-9-]+$")
GCP_SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")


def _check_sssd_source(spec: ClusterSpec, out: _Collector) -> None:
    """sssdConfFrom names a secret the cloud's store can hold, in the stack's region; a KMS key only on AWS."""
    slurm = spec.scheduler.slurm
    source = slurm.login.sssd_conf_from if slurm is not None else None
    if source is None:
        return
    where = f"{WHERE}.login.sssdConfFrom"
    if spec.cloud == "aws":
        region = spec.aws_spec().region
        arn = SM_ARN.match(source.key)
        if arn is None and (source.key.startswith("arn:") or not SM_NAME.match(source.key)):
            out.add(f"{where}.key", "slurm-sssd-source",
                    f"'{source.key}' is neither a Secrets Manager secret name (letters, digits and /_+=.@-, at most "
                    "512) nor its ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>)")
        elif arn is not None and arn.group(1) != region:
            out.add(f"{where}.key", "slurm-sssd-source",
                    f"the secret is in {arn.group(1)}, the stack in {region}: External Secrets reads the stack's "
                    "region's Secrets Manager")
        if source.kms_key_arn is not None:
            key = KMS_KEY_ARN.match(source.kms_key_arn)
            if key is None:
                out.add(f"{where}.kmsKeyArn", "slurm-sssd-source",
                        f"'{source.kms_key_arn}' is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>; "
                        "not an alias)")
            elif key.group(1) != region:
                out.add(f"{where}.kmsKeyArn", "slurm-sssd-source",
                        f"the key is in {key.group(1)}, the stack and its secret in {region}")
        return
    if not GCP_SECRET_ID.match(source.key):
        out.add(f"{where}.key", "slurm-sssd-source",
                f"'{source.key}' is not a Secret Manager secret id (letters, digits, - and _, at most 255) in project "
                f"{spec.gcp_spec().project}")
    if source.kms_key_arn is not None:
        out.add(f"{where}.kmsKeyArn", "slurm-sssd-source",
                "kmsKeyArn is AWS's; Secret Manager decrypts a CMEK secret for its reader without a grant of its own")
