"""Slurm's accounting database on GCP: Cloud SQL for MySQL 8.4, private IP only, CMEK, backed up, protected in prod.

Slurm's accounting guide (SchedMD slurm-26-05-1-1 doc/html/accounting.shtml, read 2026-12-01) asks for InnoDB,
``innodb_lock_wait_timeout`` 900 s, a buffer pool of at least 4 GiB, a redo log a quarter of it and
``max_allowed_packet`` of at least 16M; slurmdbd logs "Database settings not recommended values" below half of these
(accounting_storage_mysql.c). Only the lock wait is set here as a database flag: Cloud SQL accepts
``innodb_lock_wait_timeout`` as a flag (``gcloud sql instances patch --database-flags=innodb_lock_wait_timeout=...``,
OneUptime "How to Fix Cloud SQL MySQL InnoDB Lock Wait Timeout Exceeded Errors", 2026-02-17, checked against Cloud SQL
"Configure database flags"; Google's flag table itself was not read). Cloud SQL sizes the buffer pool from the
machine type (the default tier has 16 GiB), and MySQL 8's ``max_allowed_packet`` default is 64M; neither is set.

The instance has no public address: its private IP is in the stack's private services access range, peered with the
stack's VPC (Cloud SQL "Private IP": "You can use private services access to connect to Cloud SQL instances from
Compute Engine or Google Kubernetes Engine instances"; the same peering Managed Lustre uses, components/gcp/network.py).
VPC firewall rules do not apply to the instance; only the VPC and its peers reach it, and the slurm user's password
authenticates slurmdbd. The slurm namespace is not a tenant namespace, so no NetworkPolicy of the platform limits
slurmdbd's egress to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Optional

import pulumi
import pulumi_gcp as gcp
import pulumi_random as random

from components import provenance
from components.gcp.security import ENCRYPTER
from components.spec.slurm import SlurmDatabaseSpec

# Cloud SQL's MySQL 8.4 (pulumi_gcp sql.DatabaseInstance database_version: MYSQL_5_6 ... MYSQL_8_0, MYSQL_8_4); a major
# version: Cloud SQL applies minor versions in the maintenance window.
DATABASE_VERSION = "MYSQL_8_4"
# 4 vCPU, 16 GiB, as RDS's db.r7g.large has: Cloud SQL allows at most 6.5 GiB per vCPU, so 2 vCPU stop at 13 GiB
# (components/spec/databases.py). Changing the tier restarts the instance in place; it replaces nothing.
DEFAULT_TIER = "db-custom-4-16384"
PORT = 3306
DATABASE = "slurm_acct_db"
USERNAME = "slurm"
FLAGS = {"innodb_lock_wait_timeout": "900"}  # Slurm's accounting guide: "Set this to 900 seconds"
# Cloud SQL keeps transaction logs (point-in-time recovery) 1 to 7 days on Enterprise edition MySQL (pulumi_gcp
# settings.backup_configuration.transaction_log_retention_days).
MAX_TRANSACTION_LOG_DAYS = 7
# Cloud SQL's service agent (Google Cloud "Service agents": service-<number>@gcp-sa-cloud-sql.iam.gserviceaccount.com,
# role Cloud SQL Service Agent granted on the project) encrypts the instance with the key (Cloud SQL "Use
# customer-managed encryption keys": create the service account with `gcloud beta services identity create
# --service=sqladmin.googleapis.com`, then grant it Cloud KMS CryptoKey Encrypter/Decrypter on the key).
SQL_SERVICE = "sqladmin.googleapis.com"
SQL_AGENT_ROLE = "roles/cloudsql.serviceAgent"


def edition(tier: str) -> str:
    """Cloud SQL's edition for a tier: db-perf-optimized-N-* are Enterprise Plus only, custom and n1 tiers Enterprise
    only (pulumi_gcp settings.edition and settings.tier)."""
    return "ENTERPRISE_PLUS" if tier.startswith("db-perf-optimized-") else "ENTERPRISE"


def maintenance_window(start: datetime | None) -> gcp.sql.DatabaseInstanceSettingsMaintenanceWindowArgs | None:
    """Cloud SQL's weekly window at the GKE window's weekday and hour (day 1-7 from Monday, hour 0-23 UTC), so the
    accounting database restarts when the cluster may too; None without one."""
    if start is None:
        return None
    return gcp.sql.DatabaseInstanceSettingsMaintenanceWindowArgs(day=start.isoweekday(), hour=start.hour,
                                                                update_track="stable")


class SlurmAccountingDb(pulumi.ComponentResource):
    """Cloud SQL for MySQL for slurmdbd, on a private IP of the stack's VPC only.

    Attributes:
        host: the instance's private IP (slurmdbd's StorageHost).
        password: the slurm user's password (a secret), which the platform writes into the slurm-db Secret.
    """

    host: pulumi.Output[str]
    password: pulumi.Output[str]

    def __init__(self, name: str, *, spec: SlurmDatabaseSpec, project: str, region: str, zone: str,
                 physical_prefix: str, network_id: pulumi.Input[str], psa_range: pulumi.Input[str],
                 psa_connection: pulumi.Resource, data_key: pulumi.Input[str], labels: Mapping[str, str],
                 protect: bool, production: bool, maintenance_start: datetime | None = None,
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:SlurmAccountingDb", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        # The agent appears some time after the API is enabled; asking for it creates it now, and an agent created
        # this way may miss its role (Google Cloud "Service agents"): grant it, idempotently (as GcpKeys does GKE's).
        agent = gcp.projects.ServiceIdentity(f"{name}-agent", project=project, service=SQL_SERVICE, opts=child)
        role = gcp.projects.IAMMember(f"{name}-agent-role", project=project, role=SQL_AGENT_ROLE,
                                      member=agent.member, opts=pulumi.ResourceOptions(parent=self))
        grant = gcp.kms.CryptoKeyIAMMember(f"{name}-agent-key", crypto_key_id=data_key, role=ENCRYPTER,
                                           member=agent.member, opts=pulumi.ResourceOptions(parent=self))
        tier = spec.tier or DEFAULT_TIER
        days = spec.backup_retention_days
        # Protected and retained in prod, as the stack's buckets and filesystem; the name is derived once.
        keep = pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect)
        instance = gcp.sql.DatabaseInstance(
            f"{name}-instance",
            name=f"{physical_prefix}-slurm-db",
            project=project,
            region=region,  # the key ring's region: Cloud SQL's key must be in the instance's region
            database_version=DATABASE_VERSION,
            encryption_key_name=data_key,
            # Pulumi refuses to delete it (pulumi_gcp deletion_protection, default true) in prod; in dev a destroy may.
            deletion_protection=protect,
            settings=gcp.sql.DatabaseInstanceSettingsArgs(
                tier=tier,
                edition=edition(tier),
                # A standby in another zone of the region in prod (high availability needs backups and binary
                # logging on MySQL: pulumi_gcp settings.availability_type).
                availability_type="REGIONAL" if production else "ZONAL",
                location_preference=gcp.sql.DatabaseInstanceSettingsLocationPreferenceArgs(zone=zone),
                disk_type="PD_SSD",
                disk_size=spec.storage_gib,
                disk_autoresize=True,
                disk_autoresize_limit=spec.storage_gib * 4,
                # The API flag: no surface (console, gcloud, API) deletes the instance while it is on.
                deletion_protection_enabled=protect,
                retain_backups_on_delete=protect,
                ip_configuration=gcp.sql.DatabaseInstanceSettingsIpConfigurationArgs(
                    ipv4_enabled=False,
                    private_network=network_id,
                    allocated_ip_range=psa_range,
                    enable_private_path_for_google_cloud_services=False,
                    # Unencrypted connections stay allowed, as on RDS (require_secure_transport off): slurmdbd's
                    # MySQL client negotiates TLS when the server offers it (ssl-mode PREFERRED), and refusing plain
                    # connections would need Cloud SQL's CA mounted into slurmdbd (StorageParameters=SSL_CA=...).
                    ssl_mode="ALLOW_UNENCRYPTED_AND_ENCRYPTED",
                ),
                backup_configuration=gcp.sql.DatabaseInstanceSettingsBackupConfigurationArgs(
                    enabled=True,
                    binary_log_enabled=True,  # point-in-time recovery on MySQL
                    # One automated backup a day: the spec's days are that many backups (retention_unit COUNT).
                    backup_retention_settings=gcp.sql.DatabaseInstanceSettingsBackupConfigurationBackupRetentionSettingsArgs(
                        retained_backups=days, retention_unit="COUNT"),
                    transaction_log_retention_days=min(days, MAX_TRANSACTION_LOG_DAYS),
                ),
                database_flags=[gcp.sql.DatabaseInstanceSettingsDatabaseFlagArgs(name=k, value=v)
                                for k, v in FLAGS.items()],
                maintenance_window=maintenance_window(maintenance_start),
                user_labels=dict(labels),
            ),
            opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(
                depends_on=[psa_connection, grant, role, *after], ignore_changes=["name"])),
        )
        database = gcp.sql.Database(f"{name}-database", name=DATABASE, instance=instance.name, project=project,
                                    charset="utf8mb4", opts=keep)
        password = random.RandomPassword(f"{name}-password", length=40, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        # From any host ('%', MySQL's default for a user without a host): the instance has no public address, so only
        # the VPC and its peers reach it.
        gcp.sql.User(f"{name}-user", name=USERNAME, instance=instance.name, project=project, password=password.result,
                     type="BUILT_IN", opts=pulumi.ResourceOptions(parent=self, depends_on=[database]))
        self.host = instance.private_ip_address
        self.password = pulumi.Output.secret(password.result)
        self.register_outputs({"host": self.host})
