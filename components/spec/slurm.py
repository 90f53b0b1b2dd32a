"""Slurm beside (or instead of) Kueue: SchedMD's Slinky slurm-operator on the stack's Kubernetes.

A stack without ``scheduler.slurm`` is Kueue only. With it, the node groups it names run slurmd (one pod per node,
the node's every GPU and fabric device) and leave Kueue: Kueue cannot admit Slinky NodeSets and neither project
documents two schedulers sharing a node, so each GPU node group belongs to exactly one of them. A team's quota on a
Slurm node group becomes its Slurm account's GPU limit (GrpTRES gres/gpu) and fair share, so its share is the same
whichever scheduler it submits to, and counted once.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field, StrictBool, StrictInt, StringConstraints

from components.spec.base import _Model, unit

_SECRET_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"  # a Kubernetes object name (DNS subdomain)
# A POSIX user name as useradd accepts it by default (shadow-utils: [a-z_][a-z0-9_-]*[$]?, at most 32).
_UNIX_USER = r"^[a-z_][a-z0-9_-]{0,31}$"
# An OpenSSH public key line: type, base64 blob, optional comment (sshd(8) AUTHORIZED_KEYS FILE FORMAT, key types).
_PUBLIC_KEY = (r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
               r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n]*)?$")


class SlurmPartitionSpec(_Model):
    """A Slurm partition over node groups Slurm runs on, with the limits every partition must have."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,29}$", description="Partition name (sbatch --partition).")
    node_groups: list[str] = Field(min_length=1, description="Node groups (names in scheduler.slurm.nodeGroups).")
    teams: Optional[list[str]] = Field(
        default=None, description="Teams whose accounts may submit (AllowAccounts). Default: every team with a quota "
        "on one of the partition's node groups (a CPU-only partition must list them).")
    max_time_hours: StrictInt = Field(ge=1, le=8760, description="Longest a job may run (MaxTime), hours.",
                                      json_schema_extra=unit("hours"))
    default_time_minutes: StrictInt = Field(default=60, ge=1, le=525600,
                                            description="Time limit of a job that asks for none (DefaultTime).",
                                            json_schema_extra=unit("minutes"))
    max_nodes_per_job: Optional[StrictInt] = Field(
        default=None, ge=1, le=10000, description="Most nodes one job may take (MaxNodes). Default: the partition's "
        "nodes at their groups' maximum size.", json_schema_extra=unit("nodes"))
    default: StrictBool = Field(default=False, description="The partition a job without --partition goes to.")


class SssdConfFromSpec(_Model):
    """Where sssd.conf is kept in the cloud's secret store, synced into the login pods' Secret by External Secrets
    Operator (so nothing is created by hand in the cluster)."""

    key: str = Field(
        min_length=1, max_length=2048,
        description="AWS: the Secrets Manager secret's name or ARN, in the stack's region; GCP: the Secret Manager "
        "secret's id in the stack's project. Its value is the whole sssd.conf (the latest version is read).")
    kms_key_arn: Optional[str] = Field(
        default=None, alias="kmsKeyArn", max_length=2048,
        description="AWS: the customer-managed KMS key the secret is encrypted with, if any (its reader may then "
        "decrypt with it, through Secrets Manager only; the key's policy must let IAM policies grant it, or name "
        "the reader role). Default: the AWS managed key aws/secretsmanager.")


class SlurmLoginSpec(_Model):
    """The login nodes (a Slinky LoginSet): SSH on an internal load balancer, users from your directory."""

    replicas: StrictInt = Field(default=1, ge=1, le=10, description="Login pods.", json_schema_extra=unit("pods"))
    source_cidrs: list[str] = Field(
        min_length=1, max_length=20, description="Networks that may reach the login load balancer on port 22 (your "
        "VPN, bastion or office ranges; the load balancer is internal, never on the internet).")
    sssd_conf_secret: str = Field(
        pattern=_SECRET_NAME, description="A Secret in the slurm namespace holding sssd.conf (key sssd.conf): how "
        "login and compute pods resolve your users (LDAP or AD). Written from sssdConfFrom when given; otherwise "
        "created outside this stack, by reference.")
    sssd_conf_from: Optional[SssdConfFromSpec] = Field(
        default=None, alias="sssdConfFrom",
        description="sssd.conf from the cloud's secret store (AWS Secrets Manager, GCP Secret Manager): External "
        "Secrets Operator (pinned chart) writes it into sssdConfSecret and keeps it in sync. Default: none (the "
        "Secret is created by hand).")
    root_authorized_keys: list[Annotated[str, StringConstraints(pattern=_PUBLIC_KEY, max_length=16384)]] = Field(
        default_factory=list, max_length=50,
        description="Public SSH keys that may log in as root on the login pods (administrators: the acceptance run "
        "under Slurm's root account); public keys, so written here. Default: none.")
    password_login: StrictBool = Field(
        default=False, alias="passwordLogin",
        description="Also accept your directory's passwords over SSH (PAM through sssd). Default: SSH keys only, read "
        "from your directory by sssd (sss_ssh_authorizedkeys; sssd.conf must list the ssh service).")


class SlurmDatabaseSpec(_Model):
    """The accounting database: a managed MySQL the stack creates (RDS on AWS, Cloud SQL on GCP)."""

    instance_class: Optional[str] = Field(
        default=None, max_length=64,
        description="AWS: the RDS for MySQL instance class (db.<type>.<size>). Default db.r7g.large (16 GiB, so "
        "InnoDB's buffer pool is the 4 GiB or more Slurm's accounting guide asks for).")
    tier: Optional[str] = Field(
        default=None, max_length=64,
        description="GCP: the Cloud SQL machine tier (db-custom-<vCPU>-<MiB> with 0.9 to 6.5 GiB per vCPU, "
        "db-perf-optimized-N-<vCPU>, db-n1-standard|highmem-<vCPU>). Default db-custom-4-16384 (4 vCPU, 16 GiB).")
    storage_gib: StrictInt = Field(default=50, alias="storageGiB", ge=20, le=16384,
                                   description="Allocated storage (GiB, encrypted).", json_schema_extra=unit("GiB"))
    backup_retention_days: StrictInt = Field(default=7, ge=1, le=35, description="Automated backups kept (days).",
                                             json_schema_extra=unit("days"))


class SlurmAccountingSpec(_Model):
    """slurmdbd: job history, accounts, fair share and GPU limits. Required in production."""

    enabled: StrictBool = Field(default=True, description="Run slurmdbd on a managed database (prod: required).")
    database: SlurmDatabaseSpec = Field(default_factory=SlurmDatabaseSpec, description="The database.")


class SlurmSpec(_Model):
    """Slurm on the cluster (Slinky slurm-operator): which node groups it owns, partitions, login, accounting."""

    node_groups: list[str] = Field(
        min_length=1, description="Node groups (GKE: node pools) that run slurmd instead of Kueue workloads: GPU "
        "groups, and CPU groups for CPU-only partitions (tainted like a team CPU group; keep another group without "
        "GPUs for the system).")
    partitions: list[SlurmPartitionSpec] = Field(min_length=1, max_length=50, description="Partitions.")
    users: dict[str, list[Annotated[str, StringConstraints(pattern=_UNIX_USER)]]] = Field(
        default_factory=dict,
        description="Per team, the Unix user names (as your directory knows them) associated with its Slurm account; "
        "a user not listed cannot submit (AccountingStorageEnforce=associations).")
    login: SlurmLoginSpec = Field(description="Login nodes.")
    accounting: SlurmAccountingSpec = Field(default_factory=SlurmAccountingSpec, description="Accounting.")
    hugepages_2mi_gib: StrictInt = Field(
        default=0, alias="hugepages2MiGiB", ge=0, le=512,
        description="2 MiB hugepages each slurmd pod of a GPU group requests (GiB), for NCCL/libfabric buffers; the "
        "program reserves them at boot on those groups (not on CPU partitions' groups). Default none.",
        json_schema_extra=unit("GiB"))


class SchedulerSpec(_Model):
    """Which schedulers run on the cluster: Kueue always, Slurm beside it when configured."""

    slurm: Optional[SlurmSpec] = Field(default=None, description="Slurm (Slinky); absent: Kueue only.")
