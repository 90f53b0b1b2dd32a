"""The policy pack on GKE stacks: prod-gcp and dev-gcp pass as shipped, each single mutation of a GCP resource is
rejected by exactly the policy that owns the rule (at its documented level), and the pack's GCP tables stay in step
with the machine catalog and pulumi_gcp."""

from __future__ import annotations

import copy
import dataclasses
import importlib
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blueprint.clouds.gcp.examples import GCP_BUDGET as BUDGET
from blueprint.clouds.gcp.examples import GCP_MUTATIONS as MUTATIONS
from blueprint.clouds.gcp.examples import GCP_PROVIDER as PROVIDER
from blueprint.clouds.gcp.examples import GCS_BUCKET as BUCKET
from blueprint.clouds.gcp.examples import GKE_CLUSTER as CLUSTER
from blueprint.clouds.gcp.examples import GKE_POOL as POOL
from blueprint.clouds.gcp.examples import _hierarchical_unversioned
from blueprint.graph.model import ResourceGraph
from blueprint.policy.runner import LevelConfig, Pack, PolicyReport, load_pack, normalize_config, run_policies
from components.catalog.gcp_machines import load_gcp_catalog
from tests.conftest import GCP_STACKS, offline_run
from tests.policy.test_policies import (
    ANY,
    CIDR,
    Expected,
    _set,
    assert_fields_hold,
    assert_names,
    edit,
)
from tests.policy.test_policy_properties import mutated_inputs


@cache
def pack() -> Pack:
    return load_pack()


def gcp_policy_names() -> list[str]:
    return sorted(p.name for p in pack().policies if p.name.startswith("gcp-"))


def level_of(policy: str) -> str:
    return str(next(p for p in pack().policies if p.name == policy).enforcement_level.value)


@cache
def baseline(stack_name: str) -> PolicyReport:
    return run_policies(offline_run(stack_name).graph)


def prod() -> ResourceGraph:
    return offline_run("prod-gcp").graph


def dev() -> ResourceGraph:
    return offline_run("dev-gcp").graph










ENFORCE = 'metadata.labels["pod-security.kubernetes.io/enforce"]'
REASON = 'metadata.labels["gpu-cluster/pod-security-reason"]'
# What each mutation's violation names (see tests/policy/test_policies.py FIELDS): (field, value seen; None for a
# missing field), or None where no field applies.
FIELDS: dict[str, Expected] = {
    "open the served model on a node port": ("spec.type", "NodePort"),
    "alert on the served model's time to first token only past a minute": None,
    "remove the storage metrics exporter": None,
    "stop reading Managed Lustre's metrics": ("values.stackdriver.metrics.typePrefixes",
                                              "storage.googleapis.com/api/request_count"),
    "drop cost-center from the GPU pool's resourceLabels (defaultLabels do not reach them)": (
        'nodeConfig.resourceLabels["cost-center"]', None),
    "drop owner from the bucket's labels and the provider's defaultLabels": ("labels.owner", None),
    "drop team from a notification channel's userLabels": ("userLabels.team", None),
    "drop a team's in-cluster spend alert": None,
    "remove the cluster's budget": None,
    "alert nobody about the cluster's budget": (  # on the budget that filters on the cluster but alerts nobody
        "allUpdatesRule", {"monitoringNotificationChannels": [], "disableDefaultIamRecipients": True}),
    "give the cluster's nodes public IPs": ("privateClusterConfig.enablePrivateNodes", False),
    "give a node pool public IPs": ("networkConfig.enablePrivateNodes", False),
    "authorize 0.0.0.0/0 on the public endpoint": ("masterAuthorizedNetworksConfig.cidrBlocks[0].cidrBlock", CIDR),
    "authorize 0.0.0.0/0 even on the private endpoint": (
        "masterAuthorizedNetworksConfig.cidrBlocks[0].cidrBlock", CIDR),
    # The enforce label is what violates; the mutation removed the exception that let it through.
    "keep a GPUDirect tenant namespace privileged without saying why": (ENFORCE, "privileged"),
    "claim the GPUDirect exception without the admission policy that bounds it": None,
    "let the GPUDirect admission policy judge only new pods": None,
    "let the GPUDirect admission policy only warn": None,
    "drop the authorized networks of a public endpoint": ("masterAuthorizedNetworksConfig.cidrBlocks", None),
    "dev: unbind every admission policy": None,
    "dev: make a team namespace privileged": (ENFORCE, "privileged"),
    "dev: remove a team's default-deny policy": None,
    "dev: open the monitoring namespace's egress": None,
    "dev: drop the GPU XID alert": None,
    "open the public endpoint to every Google Cloud IP": (
        "masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled", True),
    "stop encrypting prod secrets with KMS": ("databaseEncryption.state", "DECRYPTED"),
    "drop the prod bucket's KMS key": ("encryption.defaultKmsKeyName", None),
    "drop the prod GPU pool's boot disk key": ("nodeConfig.bootDiskKmsKey", None),
    "stop encrypting dev secrets with KMS": ("databaseEncryption.keyName", None),
    "drop the dev bucket's KMS key": ("encryption.defaultKmsKeyName", None),
    "drop the prod data bucket's KMS key (gcp.storage.buckets)": ("encryption.defaultKmsKeyName", None),
    "turn off Workload Identity": ("workloadIdentityConfig.workloadPool", None),
    "expose the node's metadata server to pods": ("nodeConfig.workloadMetadataConfig.mode", "GCE_METADATA"),
    "turn off shielded nodes": ("enableShieldedNodes", False),
    "turn off a pool's integrity monitoring": ("nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", False),
    "let the bucket inherit public access": ("publicAccessPrevention", "inherited"),
    "allow object ACLs on the bucket": ("uniformBucketLevelAccess", False),
    "let the data bucket inherit public access": ("publicAccessPrevention", "inherited"),
    "turn off versioning of a flat bucket": ("versioning.enabled", False),
    "keep a hierarchical bucket's soft delete below 7 days": ("softDeletePolicy.retentionDurationSeconds", 6 * 86400),
    "unprotect the Lustre instance in prod": None,
    "unprotect a KMS key in prod": None,
    "unprotect the key ring in prod": None,
    "turn off the cluster's deletion protection in prod": ("deletionProtection", False),
    "force-destroy the prod bucket": ("forceDestroy", True),
    "unprotect the prod data bucket": None,  # protect is a resource option, not an input
    "let a cluster rename replace the prod bucket": ("name", ANY),
    "stop logging workloads": ("loggingConfig.enableComponents", ["SYSTEM_COMPONENTS", "APISERVER"]),
    "stop logging the prod API server": ("loggingConfig.enableComponents", ["SYSTEM_COMPONENTS", "WORKLOADS"]),
    "drop DCGM metrics with GKE-managed drivers": ("monitoringConfig.enableComponents", ANY),
    "stop scraping GKE's DCGM exporter into Prometheus": None,  # a whole object is missing
    "turn off Google Groups for RBAC": ("authenticatorGroupsConfig.securityGroup", None),
    "take away the research group's way to the cluster": None,  # the grant is missing, not an input of it
    "turn off Managed Prometheus with GKE-managed drivers": ("monitoringConfig.managedPrometheus.enabled", False),
    "drop a GPU network of the a3-megagpu-8g pool": ("networkConfig.additionalNodeNetworkConfigs[7]", None),
    "turn off multi-networking": ("enableMultiNetworking", None),
    "run GPUDirect on the legacy datapath": ("datapathProvider", "LEGACY_DATAPATH"),
    "add a compact placement to the reservation pool": ("placementPolicy.type", "COMPACT"),
}


@pytest.mark.parametrize("stack_name", GCP_STACKS)
def test_gcp_stacks_pass_every_policy(stack_name: str) -> None:
    report = baseline(stack_name)
    assert report.violations == [], [(v.policy, v.message) for v in report.violations]
    assert report.passed


def test_the_gcp_stacks_are_the_ones_checked() -> None:
    assert set(GCP_STACKS) >= {"prod-gcp", "dev-gcp"}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_gcp_mutation_is_rejected_by_exactly_its_policy(mutation: str) -> None:
    stack_name, mutate, expected = MUTATIONS[mutation]
    graph = mutate(offline_run(stack_name).graph)
    report = run_policies(graph)
    assert {v.policy for v in report.violations} == {expected}, [(v.policy, v.message) for v in report.violations]
    level = level_of(expected)
    assert all(v.enforcement == level for v in report.violations)
    assert report.passed is (level != "mandatory")
    for v in report.violations:  # the message names the resource and states the requirement
        assert v.urn and v.type, v
        assert " must " in v.message, v.message
    assert_fields_hold(graph, report.violations)
    assert_names(report.violations, FIELDS[mutation])


def test_every_gcp_mutation_says_which_field_it_breaks() -> None:
    assert set(FIELDS) == set(MUTATIONS)


def test_every_gcp_policy_has_a_mutation_it_rejects() -> None:
    covered = {policy for _, _, policy in MUTATIONS.values()}
    assert set(gcp_policy_names()) <= covered, sorted(set(gcp_policy_names()) - covered)


def test_gcp_policy_levels() -> None:
    # mandatory unless a policy is explicitly advisory: CMEK outside production only advises
    levels = {name: level_of(name) for name in gcp_policy_names()}
    assert {n for n, lvl in levels.items() if lvl == "advisory"} == {"gcp-cmek-outside-production"}
    assert set(levels.values()) == {"mandatory", "advisory"}


def test_a_hierarchical_bucket_with_a_week_of_soft_delete_needs_no_versioning() -> None:
    assert run_policies(_hierarchical_unversioned(7)(prod())).violations == []


def test_dev_logs_need_no_api_server_and_dev_cmek_only_advises() -> None:
    graph = edit(dev(), CLUSTER, "control-plane-gke", _set(["loggingConfig", "enableComponents"],
                                                            ["SYSTEM_COMPONENTS", "WORKLOADS"]))
    assert run_policies(graph).violations == []
    report = run_policies(MUTATIONS["stop encrypting dev secrets with KMS"][1](dev()))
    assert report.passed and [v.enforcement for v in report.violations] == ["advisory"]


def test_dev_unprotected_is_fine_and_prod_pool_labels_do_not_come_from_defaults() -> None:
    unprotected = ResourceGraph(dev().stack, [dataclasses.replace(r, protect=False) for r in dev().resources])
    assert run_policies(unprotected).violations == []
    report = run_policies(MUTATIONS["drop cost-center from the GPU pool's resourceLabels (defaultLabels do not "
                                    "reach them)"][1](prod()))
    (violation,) = report.violations
    assert violation.urn.endswith("::nodepool-h100-pool") and violation.enforcement == "mandatory"
    assert violation.message.endswith("must carry the billing labels team, cost-center, environment, owner in "
                                      "nodeConfig.resourceLabels (the provider's defaultLabels do not reach it); "
                                      "missing: cost-center.")


def test_stacks_without_budgets_skip_the_budget_policies() -> None:
    # dev-gcp names no gcp.billingAccount, so the program creates no budget and enables no budget API
    assert not [r for r in dev().resources if r.type == BUDGET]
    skipped = {name for name, _ in baseline("dev-gcp").not_applicable}
    assert {"gcp-every-team-has-a-budget", "gcp-cluster-has-a-budget"} <= skipped
    # prod-gcp has a billing account: with every budget gone the cluster's is still required
    graph = edit(prod(), BUDGET, "cost-cluster", remove=True)
    report = run_policies(graph)
    assert {v.policy for v in report.violations} == {"gcp-cluster-has-a-budget"} and not report.passed


def test_a_team_budget_on_a_label_nothing_billed_carries_is_refused() -> None:
    """prod-gcp's teams share the pools (labelled with the stack's team): a team budget would watch $0."""
    graph = prod()
    cluster = next(r for r in graph.resources if r.type == BUDGET and r.name == "cost-cluster")
    graph = edit(graph, BUDGET, "cost-cluster", _set(["budgetFilter", "labels"], {"team": "research"}))
    report = run_policies(graph)
    hits = [v for v in report.violations if v.policy == "budgets-see-spend"]
    assert len(hits) == 1 and "filters on team=research, which no resource the stack bills carries" in hits[0].message
    assert cluster.inputs["budgetFilter"]["labels"] == {"cluster": "prod-train-gke"}


def test_kubernetes_policies_still_apply_on_gcp() -> None:
    graph = edit(prod(), "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", "localqueue-applied-default", remove=True)
    report = run_policies(graph)
    assert {v.policy for v in report.violations} == {"team-namespaces-require-queue-and-quotas"}
    graph = edit(prod(), "kubernetes:helm.sh/v3:Release", "opencost", remove=True)
    assert {v.policy for v in run_policies(graph).violations} == {"cost-attribution-installed"}


# --- the pack stays in step with the program and pulumi_gcp -------------------------------------


def test_pack_gpu_network_table_matches_the_catalog() -> None:
    from gpu_policies.fabric import GPU_NETWORKS

    catalog = {name: f.gpu_nic_count + (1 if f.gpudirect == "RDMA" else 0)
               for name, f in load_gcp_catalog().items() if f.gpu_nic_count}
    assert GPU_NETWORKS.default == catalog
    assert catalog["a3-highgpu-8g"] == 4 and catalog["a3-megagpu-8g"] == 8 and catalog["a4-highgpu-8g"] == 9


def _pulumi_gcp_class(type_: str) -> Any:
    _, module, name = type_.split(":")
    package = importlib.import_module(f"pulumi_gcp.{module.split('/')[0]}")
    return getattr(package, name)


def test_pack_label_table_covers_every_labelled_type_of_the_program() -> None:
    from gpu_policies.common import GCP_LABEL_FIELDS

    used = {r.type for s in GCP_STACKS for r in offline_run(s).graph.resources if r.type.startswith("gcp:")}
    labelled = {t for t in used if any(hasattr(_pulumi_gcp_class(t), attr)
                                       for attr in ("labels", "resource_labels", "user_labels"))}
    labelled.add(POOL)  # its labels are nodeConfig.resourceLabels
    assert labelled <= set(GCP_LABEL_FIELDS), sorted(labelled - set(GCP_LABEL_FIELDS))
    # defaultLabels merge exactly where pulumi_gcp has effective_labels
    for type_, (_, merged) in GCP_LABEL_FIELDS.items():
        assert merged is hasattr(_pulumi_gcp_class(type_), "effective_labels"), type_


# --- arbitrary inputs never crash a GCP policy ----------------------------------------------------


@cache
def only(policy: str) -> LevelConfig:
    levels = {p.name: "disabled" for p in pack().policies}
    levels[policy] = "advisory"
    return normalize_config(levels, pack().policies)


GCP_TYPES = (CLUSTER, POOL, BUCKET, BUDGET, "gcp:lustre/instance:Instance", "gcp:kms/cryptoKey:CryptoKey",
             "gcp:monitoring/notificationChannel:NotificationChannel", PROVIDER)


@pytest.mark.parametrize("policy", [*gcp_policy_names(), "stateful-names-ignore-changes"])
@given(data=st.data())
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_gcp_policy_never_crashes_on_arbitrary_inputs(policy: str, data: st.DataObject) -> None:
    graph = prod()
    type_ = data.draw(st.sampled_from(GCP_TYPES))
    target = data.draw(st.sampled_from([r for r in graph.resources if r.type == type_]))
    inputs = data.draw(mutated_inputs(copy.deepcopy(target.inputs)))
    protect = data.draw(st.booleans())
    changed = [dataclasses.replace(r, inputs=inputs, protect=protect) if r.urn == target.urn else r
               for r in graph.resources]
    mutated = ResourceGraph(graph.stack, changed)
    report = run_policies(mutated, only(policy), pack())
    assert {v.policy for v in report.violations} <= {policy}
    for v in report.violations:
        assert v.message and "Traceback" not in v.message
    assert_fields_hold(mutated, report.violations)


# --- program variants the policies must accept -----------------------------------------------------


def _prod_gcp_spec() -> dict[str, Any]:
    from tests.conftest import raw_stack_config

    return dict(raw_stack_config("prod-gcp")["gpu-cluster:spec"])


@pytest.mark.parametrize("variant", ["hierarchical-bucket", "a3-ultra-spot-compact", "operator-drivers"])
def test_policies_accept_program_variants(variant: str) -> None:
    from tests.conftest import run_spec

    spec = _prod_gcp_spec()
    pool = spec["gcp"]["nodePools"][1]
    if variant == "hierarchical-bucket":
        spec["gcp"]["storage"]["checkpointBucket"]["hierarchicalNamespace"] = True
    elif variant == "a3-ultra-spot-compact":
        pool.update(machineType="a3-ultragpu-8g", capacity={"type": "spot"}, placement="auto",
                    diskType="hyperdisk-balanced")
    else:
        for gpu_pool in (pool, next(p for p in spec["gcp"]["nodePools"] if p["name"] == "l4")):
            gpu_pool["gpuDriver"] = "operator"  # one owner of the drivers on every GPU pool
        # Ubuntu nodes cannot mount Managed Lustre (rule lustre-cos-only): the operator variant shares Filestore.
        spec["gcp"]["storage"] = {**spec["gcp"]["storage"], "filesystem": {
            "type": "filestore", "capacityGiB": 10240, "filestoreTier": "ZONAL", "mountPath": "/checkpoints"}}
    graph = run_spec(spec, "prod-gcp").graph
    assert run_policies(graph).violations == []
    pools = [r for r in graph.resources if r.type == POOL and r.inputs.get("name") == "h100"]
    if variant == "a3-ultra-spot-compact":  # the program wires 9 networks and places the pool compactly
        assert len(pools[0].inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 9
        assert pools[0].inputs["placementPolicy"] == {"type": "COMPACT"}


def _gpudirect_findings(change: Any) -> list[str]:
    from blueprint.policy.mutations import edit

    graph = edit(offline_run("prod-gcp").graph, change[0], "gpudirect-pod-limits", change[1])
    return [v.message for v in run_policies(graph).violations
            if v.policy == "kubernetes-team-admission-policies" and "GPUDirect" in v.message]


def test_the_gpudirect_bound_reads_selectors_and_defaults_as_kubernetes_does() -> None:
    """A binding selecting by matchExpressions and a policy leaving failurePolicy to its default (Fail) still bound
    the namespaces; a policy whose only checks are 'true' (whatever its messages say) does not."""
    vap = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
    binding = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"

    def by_expression(inputs: dict[str, Any]) -> None:
        inputs["spec"]["matchResources"]["namespaceSelector"] = {"matchExpressions": [{
            "key": "gpu-cluster/pod-security-reason", "operator": "In", "values": ["gpudirect-sidecars"]}]}

    def excluding(inputs: dict[str, Any]) -> None:
        inputs["spec"]["matchResources"]["namespaceSelector"] = {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["research"]}]}

    def hollow(inputs: dict[str, Any]) -> None:
        inputs["spec"]["validations"] = [{"expression": "true", "message": "hostPath capabilities.add"}]

    assert _gpudirect_findings((binding, by_expression)) == []
    assert _gpudirect_findings((vap, lambda i: i["spec"].pop("failurePolicy"))) == []
    assert [m.split("\n")[-1].split(" must ")[0] for m in _gpudirect_findings((binding, excluding))] == [
        "Namespace research"]
    assert len(_gpudirect_findings((vap, hollow))) == 4  # the three teams' namespaces and the acceptance one
