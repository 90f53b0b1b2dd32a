"""Slurm on GKE: dev-gcp-slurm's Cloud SQL accounting database (private IP only, CMEK, backups), its wiring into
slurmdbd, NodeSets on their pools, Kueue without Slurm's pool, an internal login load balancer; a prod variant of
prod-gcp with a Slurm pool (regional, protected, passes the pack) and the pack's refusals on it."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from blueprint.clouds.gcp.graph import new_resource
from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.mutations import delete_path as _delete
from blueprint.policy.mutations import edit
from blueprint.policy.mutations import set_path as _set
from blueprint.policy.runner import run_policies
from components.gcp.cloud import GKE_NODEPOOL_LABEL, STORAGE_CLASS_NAME, required_services
from components.gcp.slurm_db import DEFAULT_TIER, edition, maintenance_window
from components.kubernetes.objects import DB_SECRET, JOB_MAPPING_DIR, SLURM_NAMESPACE
from components.spec import SpecError, parse_spec
from components.spec.databases import cloud_sql_tier_problem
from tests.conftest import offline_run, raw_stack_config, run_spec, stack

STACK = "dev-gcp-slurm"
SQL = "gcp:sql/databaseInstance:DatabaseInstance"
SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
SLURM_POOL = "slurm-l4"


def dev() -> ResourceGraph:
    return offline_run(STACK).graph


def one(graph: ResourceGraph, type_: str, name: str | None = None) -> GraphResource:
    (res,) = [r for r in graph.of_type(type_) if name is None or r.name == name]
    return res


def by_name(graph: ResourceGraph, type_: str, suffix: str) -> GraphResource:
    (res,) = [r for r in graph.of_type(type_) if r.name.endswith(suffix)]
    return res


def prod_slurm_spec() -> dict[str, Any]:
    """prod-gcp with a Slurm pool of two a2-highgpu-8g (no GPUDirect), research's account on it, 14 days of backups."""
    spec = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    spec["gcp"]["nodePools"].append({"name": "slurm-a100", "machineType": "a2-highgpu-8g", "minSize": 2,
                                     "desiredSize": 2, "maxSize": 2})
    spec["teams"][0]["quotas"].append({"nodeGroup": "slurm-a100", "gpus": 16})
    spec["teams"][0]["gid"] = 5001  # its members' group in the directory (rule slurm-team-gid)
    spec["scheduler"] = {"slurm": {
        "nodeGroups": ["slurm-a100"],
        "partitions": [{"name": "train", "nodeGroups": ["slurm-a100"], "maxTimeHours": 24, "default": True}],
        "users": {"research": ["ana"]},
        "login": {"sourceCidrs": ["10.200.0.0/16"], "sssdConfSecret": "slurm-sssd"},
        "accounting": {"database": {"backupRetentionDays": 14}}}}
    return spec


@cache
def prod() -> ResourceGraph:
    return run_spec(prod_slurm_spec(), "prod-gcp-slurm").graph


# --- the Cloud SQL instance --------------------------------------------------------------------------------------


def test_the_accounting_database_is_mysql_84_on_a_private_ip_of_the_stacks_peering_only() -> None:
    graph = dev()
    db = one(graph, SQL).inputs
    assert db["databaseVersion"] == "MYSQL_8_4" and db["name"] == "dev-slurm-gke-slurm-db"
    ip = db["settings"]["ipConfiguration"]
    vpc = one(graph, "gcp:compute/network:Network")
    psa = one(graph, "gcp:compute/globalAddress:GlobalAddress")
    assert ip["ipv4Enabled"] is False and "authorizedNetworks" not in ip
    assert ip["privateNetwork"] == f"projects/acme-ml-dev/global/networks/{vpc.inputs['name']}"
    assert ip["allocatedIpRange"] == psa.inputs["name"] and psa.inputs["purpose"] == "VPC_PEERING"
    assert ip["enablePrivatePathForGoogleCloudServices"] is False
    # created after the peering it takes its address from (one peering, shared with Managed Lustre)
    connection = one(graph, "gcp:servicenetworking/connection:Connection")
    assert connection.urn in one(graph, SQL).dependencies
    assert len(graph.of_type("gcp:servicenetworking/connection:Connection")) == 1
    assert {"sqladmin.googleapis.com", "servicenetworking.googleapis.com"} <= {
        r.inputs["service"] for r in graph.of_type("gcp:projects/service:Service")}


def test_the_accounting_database_is_backed_up_sized_and_flagged_from_the_spec() -> None:
    db = one(dev(), SQL).inputs
    settings = db["settings"]
    assert settings["tier"] == "db-custom-2-13312" and settings["edition"] == "ENTERPRISE"
    assert settings["availabilityType"] == "ZONAL" and settings["locationPreference"] == {"zone": "us-central1-a"}
    assert settings["diskSize"] == 20 and settings["diskAutoresize"] is True and settings["diskAutoresizeLimit"] == 80
    backups = settings["backupConfiguration"]
    assert backups["enabled"] is True and backups["binaryLogEnabled"] is True
    assert backups["backupRetentionSettings"] == {"retainedBackups": 7, "retentionUnit": "COUNT"}
    assert backups["transactionLogRetentionDays"] == 7
    assert settings["databaseFlags"] == [{"name": "innodb_lock_wait_timeout", "value": "900"}]
    # the GKE window's weekday and hour: 2026-12-05 03:00 UTC is a Saturday
    assert settings["maintenanceWindow"] == {"day": 6, "hour": 3, "updateTrack": "stable"}
    assert settings["userLabels"]["cost-center"] == "cc-4100" and settings["userLabels"]["environment"] == "dev"


def test_the_accounting_database_is_encrypted_with_the_stacks_data_key_granted_to_cloud_sqls_agent() -> None:
    graph = dev()
    instance = one(graph, SQL)
    key = by_name(graph, "gcp:kms/cryptoKey:CryptoKey", "keys-data")
    assert instance.inputs["encryptionKeyName"] == (
        "projects/acme-ml-dev/locations/us-central1/keyRings/dev-slurm-gke-keys/cryptoKeys/dev-slurm-gke-data")
    assert key.inputs["name"] == "dev-slurm-gke-data"
    agent = by_name(graph, "gcp:projects/serviceIdentity:ServiceIdentity", "slurm-accounting-agent")
    assert agent.inputs["service"] == "sqladmin.googleapis.com"
    grant = by_name(graph, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "slurm-accounting-agent-key")
    assert grant.inputs["role"] == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
    assert grant.inputs["cryptoKeyId"] == instance.inputs["encryptionKeyName"]
    assert grant.inputs["member"].endswith("@gcp-sa-cloud-sql.iam.gserviceaccount.com")
    role = by_name(graph, "gcp:projects/iAMMember:IAMMember", "slurm-accounting-agent-role")
    assert role.inputs["role"] == "roles/cloudsql.serviceAgent" and role.inputs["member"] == grant.inputs["member"]
    assert {grant.urn, role.urn} <= set(instance.dependencies)  # the key is usable before the instance is created


def test_dev_lets_the_database_go_and_prod_protects_it_everywhere() -> None:
    dev_db = one(dev(), SQL)
    assert dev_db.inputs["deletionProtection"] is False and not dev_db.protect
    assert dev_db.inputs["settings"]["deletionProtectionEnabled"] is False
    db = one(prod(), SQL)
    settings = db.inputs["settings"]
    assert db.inputs["deletionProtection"] is True and settings["deletionProtectionEnabled"] is True
    assert db.protect and db.retain_on_delete and db.ignore_changes == ["name"]
    assert settings["availabilityType"] == "REGIONAL" and settings["retainBackupsOnDelete"] is True
    # 14 backups kept, transaction logs at Cloud SQL's most for Enterprise MySQL (7 days)
    assert settings["backupConfiguration"]["backupRetentionSettings"]["retainedBackups"] == 14
    assert settings["backupConfiguration"]["transactionLogRetentionDays"] == 7
    assert one(prod(), "gcp:sql/database:Database").protect


def test_the_prod_variant_passes_the_pack() -> None:
    report = run_policies(prod())
    assert report.violations == [], [(v.policy, v.message) for v in report.violations]


def test_database_name_user_and_password() -> None:
    graph = dev()
    database = one(graph, "gcp:sql/database:Database").inputs
    user = one(graph, "gcp:sql/user:User").inputs
    assert database["name"] == "slurm_acct_db" and database["instance"] == "dev-slurm-gke-slurm-db"
    assert user["name"] == "slurm" and user["type"] == "BUILT_IN" and user["password"] == "[secret]"
    assert one(graph, "random:index/randomPassword:RandomPassword", "slurm-accounting-password").inputs["length"] == 40


def test_without_accounting_there_is_no_database_nor_its_api() -> None:
    spec = raw_stack_config(STACK)["gpu-cluster:spec"]
    spec["scheduler"]["slurm"]["accounting"] = {"enabled": False}
    del spec["gcp"]["storage"]["filesystem"]  # nothing else needs private services access
    graph = run_spec(spec, STACK).graph
    assert not graph.of_type(SQL) and not graph.of_type(SLINKY + "Accounting")
    assert not graph.of_type("gcp:servicenetworking/connection:Connection")
    assert "sqladmin.googleapis.com" not in required_services(parse_spec(spec, STACK))
    assert "sqladmin.googleapis.com" in required_services(stack(STACK).spec)


def test_edition_and_maintenance_follow_the_tier_and_the_gke_window() -> None:
    assert edition("db-custom-4-16384") == edition("db-n1-standard-4") == "ENTERPRISE"
    assert edition("db-perf-optimized-N-4") == "ENTERPRISE_PLUS"
    assert maintenance_window(None) is None


# --- slurmdbd on it ------------------------------------------------------------------------------------------------


def test_slurmdbd_reaches_the_instances_private_ip_with_the_password_in_its_secret() -> None:
    graph = dev()
    instance = one(graph, SQL)
    accounting = one(graph, SLINKY + "Accounting")
    storage = accounting.inputs["spec"]["storageConfig"]
    # the host is the instance's privateIpAddress output (as the offline provider answers it), nothing else
    _, state = new_resource(SQL, instance.name, dict(instance.inputs), "us-central1")
    assert storage["host"] == state["privateIpAddress"]
    assert instance.urn in accounting.dependencies
    assert storage["port"] == 3306 and storage["database"] == "slurm_acct_db" and storage["username"] == "slurm"
    assert storage["passwordKeyRef"] == {"name": DB_SECRET, "key": "password"}
    secret = by_name(graph, "kubernetes:core/v1:Secret", f"slurm-{DB_SECRET}").inputs
    assert secret["metadata"]["namespace"] == SLURM_NAMESPACE and secret["stringData"] == "[secret]"
    controller = one(graph, SLINKY + "Controller").inputs["spec"]
    assert controller["accountingRef"] == {"name": "slurm"}
    assert "AccountingStorageTRES=gres/gpu" in controller["extraConf"]


# --- Slurm's pool and Kueue's --------------------------------------------------------------------------------------


def test_nodesets_select_their_pool_by_its_gke_nodepool_label_with_no_fabric_or_job_mapping() -> None:
    graph = dev()
    (nodeset,) = [n for n in graph.of_type(SLINKY + "NodeSet") if n.inputs["metadata"]["name"] == SLURM_POOL]
    spec = nodeset.inputs["spec"]
    assert nodeset.inputs["metadata"]["name"] == SLURM_POOL
    assert spec["template"]["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: SLURM_POOL}
    pool = [r for r in graph.of_type("gcp:container/nodePool:NodePool") if r.inputs["name"] == SLURM_POOL]
    assert len(pool) == 1  # the label's value is the pool GKE creates
    # the node's 2 L4s, whole: a Slurm pool shares no GPU (GKE refuses a container more than one time-shared GPU),
    # and nothing else (no GPU networks on this pool)
    assert spec["slurmd"]["resources"]["limits"] == {"nvidia.com/gpu": 2}
    (slurm_pool,) = pool
    assert "gpuSharingConfig" not in slurm_pool.inputs["nodeConfig"]["guestAccelerators"][0]
    assert spec["extraConf"] == "Gres=gpu:2 Features=g2-standard-24"
    # GKE's managed DCGM exporter reads no job-mapping directory: no prolog writing one, no hostPath
    assert all(v.get("hostPath", {}).get("path") != JOB_MAPPING_DIR for v in spec["template"]["spec"]["volumes"])
    controller = one(graph, SLINKY + "Controller").inputs["spec"]
    assert "prologScriptRefs" not in controller and "epilogScriptRefs" not in controller
    assert controller["persistence"]["storageClassName"] == STORAGE_CLASS_NAME
    classes = [r.inputs for r in graph.of_type("kubernetes:storage.k8s.io/v1:StorageClass")]
    assert any(c["metadata"]["name"] == STORAGE_CLASS_NAME and "disk-encryption-kms-key" in c.get("parameters", {})
               for c in classes)
    # the shared filesystem is mounted where Slurm jobs write their output
    assert {"name": "shared", "mountPath": "/shared"} in spec["slurmd"]["volumeMounts"]


def test_kueue_has_no_flavor_for_slurms_pool() -> None:
    graph = dev()
    flavors = {r.inputs["metadata"]["name"] for r in graph.of_type(KUEUE + "ResourceFlavor")}
    assert "l4" in flavors and SLURM_POOL not in flavors
    for cq in graph.of_type(KUEUE + "ClusterQueue"):
        used = {f["name"] for g in cq.inputs["spec"].get("resourceGroups", []) for f in g["flavors"]}
        assert SLURM_POOL not in used, cq.name
    # the teams' Slurm quotas are their accounts' GPU limits
    accounts = next(r for r in graph.of_type("kubernetes:core/v1:ConfigMap")
                    if r.inputs["metadata"]["name"].startswith("slurm-accounts-")).inputs["data"]["accounts.cfg"]
    assert "Account - 'research'" in accounts and ":GrpTRES=gres/gpu=4" in accounts


def test_login_is_an_internal_load_balancer_for_the_listed_networks() -> None:
    service = one(dev(), SLINKY + "LoginSet").inputs["spec"]["service"]
    assert service["metadata"]["annotations"] == {"networking.gke.io/load-balancer-type": "Internal"}
    assert service["spec"] == {"type": "LoadBalancer", "loadBalancerSourceRanges": ["10.200.0.0/16"]}


# --- the pack on the Cloud SQL instance ----------------------------------------------------------------------------


@pytest.mark.parametrize(("mutation", "expected"), [
    # unprotected: the GCP stateful policy, and Slurm's (its database must be protected in prod)
    (lambda g: edit(g, SQL, "slurm-accounting-instance", protect=False),
     {"gcp-stateful-resources-protected-in-production", "slurm-accounting-in-production"}),
    (lambda g: edit(g, SQL, "slurm-accounting-instance", _set(["settings", "deletionProtectionEnabled"], False)),
     {"gcp-stateful-resources-protected-in-production"}),
    (lambda g: edit(g, SQL, "slurm-accounting-instance", _set(["deletionProtection"], False)),
     {"gcp-stateful-resources-protected-in-production"}),
    (lambda g: edit(g, SQL, "slurm-accounting-instance", _delete(["encryptionKeyName"])),
     {"gcp-cmek-in-production"}),
    (lambda g: edit(g, SQL, "slurm-accounting-instance", _delete(["settings", "userLabels", "owner"])),
     {"gcp-resources-require-billing-labels"}),
], ids=["unprotected", "api-deletion-protection-off", "pulumi-deletion-protection-off", "no-cmek", "no-owner-label"])
def test_the_pack_refuses_an_unsafe_prod_cloud_sql_instance(mutation: Any, expected: set[str]) -> None:
    report = run_policies(mutation(prod()))
    assert {v.policy for v in report.violations} == expected, [(v.policy, v.message) for v in report.violations]
    assert not report.passed
    assert all("Cloud SQL" in v.message or "slurm-accounting" in v.message or "owner" in v.message
               for v in report.violations)


def test_a_dev_instance_may_go_unprotected_and_only_hears_advice_without_cmek() -> None:
    unprotected = edit(dev(), SQL, "slurm-accounting-instance", protect=False)
    assert run_policies(unprotected).violations == []
    report = run_policies(edit(dev(), SQL, "slurm-accounting-instance", _delete(["encryptionKeyName"])))
    assert report.passed and [(v.policy, v.enforcement) for v in report.violations] == [
        ("gcp-cmek-outside-production", "advisory")]


@pytest.mark.parametrize(("tier", "problem"), [
    ("db-custom-2-13312", None), ("db-custom-1-3840", None), ("db-custom-96-638976", None),
    ("db-perf-optimized-N-8", None), ("db-n1-standard-4", None), ("db-n1-highmem-96", None),
    ("db-custom-2-16384", "2 vCPU take 3,840 to 13,312 MiB in multiples of 256"),  # 8 GiB per vCPU
    ("db-custom-3-12288", "1 or an even number of vCPUs up to 96, not 3"),
    ("db-custom-98-400000", "1 or an even number of vCPUs up to 96, not 98"),
    ("db-custom-4-3000", "4 vCPU take 3,840 to 26,624 MiB"),
    ("db-custom-4-16000", "not 16,000"),  # not a multiple of 256
    ("db-perf-optimized-N-6", "Enterprise Plus's N2 tiers have 2, 4, 8"),
    ("db-n1-highmem-1", "db-n1-highmem comes in 2, 4"),
    ("db-f2-huge", "is not a Cloud SQL for MySQL tier"),
])
def test_cloud_sql_tiers_are_the_shapes_cloud_sql_offers(tier: str, problem: str | None) -> None:
    found = cloud_sql_tier_problem(tier)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_the_default_tier_is_one_cloud_sql_accepts_and_a_wrong_one_is_refused_at_load() -> None:
    """The default had 8 GiB per vCPU (db-custom-2-16384), over Cloud SQL's 6.5: every apply would have failed."""
    assert cloud_sql_tier_problem(DEFAULT_TIER) is None
    assert one(prod(), SQL).inputs["settings"]["tier"] == DEFAULT_TIER == "db-custom-4-16384"
    spec = prod_slurm_spec()
    spec["scheduler"]["slurm"]["accounting"]["database"]["tier"] = "db-custom-2-16384"
    with pytest.raises(SpecError) as info:
        parse_spec(spec, "stacks/Pulumi.prod-gcp-slurm.yaml")
    assert ("gpu-cluster:spec.scheduler.slurm.accounting.database.tier: 'db-custom-2-16384': 2 vCPU take 3,840 to "
            "13,312 MiB in multiples of 256") in str(info.value)
    assert "[rule: slurm-database-shape]" in str(info.value)
