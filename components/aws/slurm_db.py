"""Slurm's accounting database on AWS: Amazon RDS for MySQL 8.4, private, encrypted, backed up, protected in prod.

Slurm's accounting guide (SchedMD slurm-26-05-1-1 doc/html/accounting.shtml, read 2026-12-01): MySQL or MariaDB with
InnoDB, ``innodb_lock_wait_timeout`` 900 s, a buffer pool of at least 4 GiB, a redo log a quarter of it,
``max_allowed_packet`` at least 16M; slurmdbd logs "Database settings not recommended values" below half of these
(accounting_storage_mysql.c). RDS for MySQL 8.4 sizes ``innodb_buffer_pool_size`` (3/4 of memory) and
``innodb_redo_log_capacity`` from the instance (``innodb_dedicated_server``, RDS user guide "Configuring buffer pool
size and redo log capacity in MySQL 8.4"), so the default db.r7g.large (16 GiB) gives a 12 GiB pool; the parameter
group sets the lock wait (dynamic) and keeps ``max_allowed_packet`` at 64M (MySQL 8's default, stated).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from components import provenance
from components.aws.stateful import rotating_kms_key, stateful_options
from components.spec.slurm import SlurmDatabaseSpec

ENGINE = "mysql"
ENGINE_VERSION = "8.4"  # a major version: RDS picks its newest minor and applies minor upgrades in the window
PARAMETER_FAMILY = "mysql8.4"
DEFAULT_INSTANCE_CLASS = "db.r7g.large"
PORT = 3306
DATABASE = "slurm_acct_db"
USERNAME = "slurm"
# require_secure_transport stays OFF, RDS's default for MySQL 8.4 (RDS user guide, "Requiring SSL/TLS for all
# connections"): slurmdbd's MySQL client negotiates TLS when the server offers it (its default ssl-mode PREFERRED), and
# refusing plain connections would need the RDS CA bundle mounted into slurmdbd (StorageParameters=SSL_CA=...).
PARAMETERS = {"innodb_lock_wait_timeout": "900", "max_allowed_packet": "67108864"}


class SlurmAccountingDb(pulumi.ComponentResource):
    """RDS for MySQL for slurmdbd in the cluster's private subnets, reachable only from the cluster's nodes.

    Attributes:
        host: the instance's address (slurmdbd's StorageHost).
        password: the master password (a secret), which the platform writes into the slurm-db Secret.
    """

    host: pulumi.Output[str]
    password: pulumi.Output[str]

    def __init__(self, name: str, *, spec: SlurmDatabaseSpec, physical_prefix: str, vpc_id: pulumi.Input[str],
                 subnet_ids: Sequence[pulumi.Input[str]], client_security_group_id: pulumi.Input[str],
                 labels: Mapping[str, str], protect: bool, production: bool,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:SlurmAccountingDb", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        key = rotating_kms_key(self, f"{name}-key", f"{physical_prefix}-slurm-accounting",
                               f"{physical_prefix}: Slurm accounting database", labels, protect)
        subnets = aws.rds.SubnetGroup(
            f"{name}-subnets", name_prefix=f"{physical_prefix}-slurm-", subnet_ids=list(subnet_ids),
            description=f"{physical_prefix}: Slurm accounting database (private subnets)", tags=dict(labels),
            opts=child)
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg", name_prefix=f"{physical_prefix}-slurm-db-", vpc_id=vpc_id,
            description="Slurm accounting database: MySQL from the cluster's nodes only", tags=dict(labels),
            opts=child)
        # slurmdbd runs in a pod on the nodes: the cluster security group is on every node (EKS) and the source of
        # its traffic (VPC CNI, pods share the node's security groups unless security groups for pods are used).
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-mysql-from-nodes", security_group_id=sg.id, referenced_security_group_id=client_security_group_id,
            ip_protocol="tcp", from_port=PORT, to_port=PORT, description="slurmdbd (MySQL)", tags=dict(labels),
            opts=child)
        params = aws.rds.ParameterGroup(
            f"{name}-params", name_prefix=f"{physical_prefix}-slurm-", family=PARAMETER_FAMILY,
            description="Slurm accounting: InnoDB lock wait 900 s, max_allowed_packet 64M (SchedMD accounting guide)",
            parameters=[{"name": k, "value": v, "apply_method": "immediate"} for k, v in PARAMETERS.items()],
            tags=dict(labels), opts=child)
        password = random.RandomPassword(f"{name}-password", length=40, special=False, opts=child)
        instance = aws.rds.Instance(
            f"{name}-instance",
            identifier_prefix=f"{physical_prefix}-slurm-",
            engine=ENGINE, engine_version=ENGINE_VERSION, auto_minor_version_upgrade=True,
            instance_class=spec.instance_class or DEFAULT_INSTANCE_CLASS,
            allocated_storage=spec.storage_gib, max_allocated_storage=spec.storage_gib * 4, storage_type="gp3",
            storage_encrypted=True, kms_key_id=key.arn,
            db_name=DATABASE, username=USERNAME, password=password.result, port=PORT,
            db_subnet_group_name=subnets.name, vpc_security_group_ids=[sg.id], publicly_accessible=False,
            parameter_group_name=params.name,
            multi_az=production,  # a standby in another zone in prod: the job history survives a zone
            backup_retention_period=spec.backup_retention_days, copy_tags_to_snapshot=True,
            delete_automated_backups=False,
            deletion_protection=protect,
            skip_final_snapshot=not protect, final_snapshot_identifier=f"{physical_prefix}-slurm-final",
            enabled_cloudwatch_logs_exports=["error", "slowquery"],
            performance_insights_enabled=False,
            tags=dict(labels),
            opts=stateful_options(self, protect, ignore_changes=["identifierPrefix", "finalSnapshotIdentifier"]),
        )
        self.host = instance.address
        self.password = pulumi.Output.secret(password.result)
        self.register_outputs({"host": self.host})
