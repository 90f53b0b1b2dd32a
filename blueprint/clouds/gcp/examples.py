"""Google Cloud in the policy family: how each policy is broken on prod-gcp, dev-gcp and dev-gcp-slurm, for
``blueprint policy --explain`` and the tests that prove each policy rejects its mutation."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from blueprint.graph.model import ResourceGraph
from blueprint.policy.mutations import (
    RELEASE,
    Mutation,
    drop_alerts,
    drop_spend_alert,
    edit,
    k8s_type,
    release_values,
    remove_all,
)
from blueprint.policy.mutations import delete_path as _delete
from blueprint.policy.mutations import set_path as _set
from blueprint.policy.spec_keys import DELETION_PROTECTION, INDEX, LABEL, LABELS, SPEC_KEY, KeyRule

GKE_CLUSTER = "gcp:container/cluster:Cluster"


GKE_POOL = "gcp:container/nodePool:NodePool"


GCS_BUCKET = "gcp:storage/bucket:Bucket"


GCP_BUDGET = "gcp:billing/budget:Budget"


GCP_PROVIDER = "pulumi:providers:gcp"


def _without_default_label(key: str) -> Mutation:
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        def drop(inputs: dict[str, Any]) -> None:
            labels = json.loads(inputs["defaultLabels"])
            del labels[key]
            inputs["defaultLabels"] = json.dumps(labels)
        return edit(graph, GCP_PROVIDER, "gcp", drop)
    return mutate


def _ignore_nothing(type_: str) -> Mutation:
    return lambda g: ResourceGraph(g.stack, [dataclasses.replace(r, ignore_changes=[]) if r.type == type_ else r
                                             for r in g.resources])


def _hierarchical_unversioned(days: int) -> Mutation:
    def change(inputs: dict[str, Any]) -> None:
        inputs["versioning"] = {"enabled": False}
        inputs["hierarchicalNamespace"] = {"enabled": True}
        inputs["softDeletePolicy"] = {"retentionDurationSeconds": days * 86400}
    return lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", change)


def _loosen_ttft_alert(inputs: dict[str, Any]) -> None:
    """The served model's TTFT alert fires only above 60 s, far past its objective."""
    for group in inputs["spec"]["groups"]:
        for rule in group["rules"]:
            if rule.get("labels", {}).get("objective") == "ttft":
                rule["expr"] = rule["expr"].rsplit(">", 1)[0] + "> 60"


# (stack, mutation, the policy that must reject it)


GCP_MUTATIONS: dict[str, tuple[str, Mutation, str]] = {
    # inference: a NodePort opens the model on every node's address
    "open the served model on a node port": (
        "prod-gcp", lambda g: edit(g, "kubernetes:core/v1:Service", "serving-llama-3-1-8b-instruct-service",
                                   _set(["spec", "type"], "NodePort")), "inference-endpoint-private"),
    "alert on the served model's time to first token only past a minute": (
        "prod-gcp", lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1:PrometheusRule", "monitoring-rules",
                                   _loosen_ttft_alert), "inference-objective-alerted"),
    # billing
    "drop cost-center from the GPU pool's resourceLabels (defaultLabels do not reach them)": (
        "prod-gcp", lambda g: edit(g, GKE_POOL, "nodepool-h100-pool", _delete(["nodeConfig", "resourceLabels",
                                                                            "cost-center"])),
        "gcp-resources-require-billing-labels"),
    "drop owner from the bucket's labels and the provider's defaultLabels": (
        "prod-gcp", lambda g: _without_default_label("owner")(edit(g, GCS_BUCKET, "storage-checkpoints",
                                                                   _delete(["labels", "owner"]))),
        "gcp-resources-require-billing-labels"),
    "drop team from a notification channel's userLabels": (
        "prod-gcp", lambda g: edit(g, "gcp:monitoring/notificationChannel:NotificationChannel", "cost-email-0",
                                   _delete(["userLabels", "team"])),
        "gcp-resources-require-billing-labels"),
    "drop a team's in-cluster spend alert": (
        "prod-gcp", lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1:PrometheusRule", "monitoring-rules",
                                   drop_spend_alert("research")),
        "gcp-every-team-has-a-budget"),
    "remove the cluster's budget": (
        "prod-gcp", lambda g: edit(g, GCP_BUDGET, "cost-cluster", remove=True), "gcp-cluster-has-a-budget"),
    "alert nobody about the cluster's budget": (
        "prod-gcp", lambda g: edit(g, GCP_BUDGET, "cost-cluster", _set(["allUpdatesRule"], {
            "monitoringNotificationChannels": [], "disableDefaultIamRecipients": True})),
        "gcp-cluster-has-a-budget"),
    # security
    "give the cluster's nodes public IPs": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke",
                                   _set(["privateClusterConfig", "enablePrivateNodes"], False)),
        "gcp-gke-private-nodes"),
    "give a node pool public IPs": (
        "prod-gcp", lambda g: edit(g, GKE_POOL, "nodepool-system-pool", _set(["networkConfig", "enablePrivateNodes"],
                                                                         False)),
        "gcp-gke-private-nodes"),
    "authorize 0.0.0.0/0 on the public endpoint": (
        "dev-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(
            ["masterAuthorizedNetworksConfig", "cidrBlocks", 0, "cidrBlock"], "0.0.0.0/0")),
        "gcp-gke-endpoint-not-open-to-internet"),
    "authorize 0.0.0.0/0 even on the private endpoint": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(
            ["masterAuthorizedNetworksConfig", "cidrBlocks"], [{"cidrBlock": "0.0.0.0/0", "displayName": "all"}])),
        "gcp-gke-endpoint-not-open-to-internet"),
    "keep a GPUDirect tenant namespace privileged without saying why": (
        "prod-gcp", lambda g: edit(g, "kubernetes:core/v1:Namespace", "tenancy-ns-research", _delete(
            ["metadata", "labels", "gpu-cluster/pod-security-reason"])),
        "kubernetes-team-namespaces-pod-security"),
    "claim the GPUDirect exception without the admission policy that bounds it": (
        "prod-gcp", lambda g: edit(g, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                                   "gpudirect-pod-limits", remove=True),
        "kubernetes-team-admission-policies"),
    "let the GPUDirect admission policy judge only new pods": (
        "prod-gcp", lambda g: edit(g, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                                   "gpudirect-pod-limits", _set(["spec", "matchConstraints", "resourceRules", 0,
                                                                 "operations"], ["CREATE"])),
        "kubernetes-team-admission-policies"),
    "let the GPUDirect admission policy only warn": (
        "prod-gcp", lambda g: edit(g, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                                   "gpudirect-pod-limits", _set(["spec", "validationActions"], ["Warn"])),
        "kubernetes-team-admission-policies"),
    "drop the authorized networks of a public endpoint": (
        "dev-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _delete(["masterAuthorizedNetworksConfig"])),
        "gcp-gke-endpoint-not-open-to-internet"),
    "open the public endpoint to every Google Cloud IP": (
        "dev-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(
            ["masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled"], True)),
        "gcp-gke-endpoint-not-open-to-internet"),
    "stop encrypting prod secrets with KMS": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(["databaseEncryption", "state"],
                                                                          "DECRYPTED")),
        "gcp-cmek-in-production"),
    "drop the prod bucket's KMS key": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", _delete(["encryption"])),
        "gcp-cmek-in-production"),
    "drop the prod GPU pool's boot disk key": (
        "prod-gcp", lambda g: edit(g, GKE_POOL, "nodepool-h100-pool", _delete(["nodeConfig", "bootDiskKmsKey"])),
        "gcp-cmek-in-production"),
    "stop encrypting dev secrets with KMS": (
        "dev-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _delete(["databaseEncryption", "keyName"])),
        "gcp-cmek-outside-production"),
    "drop the dev bucket's KMS key": (
        "dev-gcp", lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", _delete(["encryption"])),
        "gcp-cmek-outside-production"),
    "drop the prod data bucket's KMS key (gcp.storage.buckets)": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-bucket-data", _delete(["encryption"])),
        "gcp-cmek-in-production"),
    "turn off Workload Identity": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _delete(["workloadIdentityConfig"])),
        "gcp-gke-workload-identity"),
    "expose the node's metadata server to pods": (
        "prod-gcp", lambda g: edit(g, GKE_POOL, "nodepool-h100-pool", _set(
            ["nodeConfig", "workloadMetadataConfig", "mode"], "GCE_METADATA")),
        "gcp-gke-workload-identity"),
    "turn off shielded nodes": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(["enableShieldedNodes"], False)),
        "gcp-gke-shielded-nodes"),
    "turn off a pool's integrity monitoring": (
        "dev-gcp", lambda g: edit(g, GKE_POOL, "nodepool-l4-pool", _set(
            ["nodeConfig", "shieldedInstanceConfig", "enableIntegrityMonitoring"], False)),
        "gcp-gke-shielded-nodes"),
    "let the bucket inherit public access": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", _set(["publicAccessPrevention"], "inherited")),
        "gcp-storage-bucket-public-access-prevented"),
    "allow object ACLs on the bucket": (
        "dev-gcp", lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", _set(["uniformBucketLevelAccess"], False)),
        "gcp-storage-bucket-public-access-prevented"),
    "let the data bucket inherit public access": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-bucket-data", _set(["publicAccessPrevention"], "inherited")),
        "gcp-storage-bucket-public-access-prevented"),
    # data safety
    "turn off versioning of a flat bucket": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", _set(["versioning", "enabled"], False)),
        "gcp-storage-bucket-recoverable"),
    "keep a hierarchical bucket's soft delete below 7 days": (
        "prod-gcp", _hierarchical_unversioned(6), "gcp-storage-bucket-recoverable"),
    "unprotect the Lustre instance in prod": (
        "prod-gcp", lambda g: edit(g, "gcp:lustre/instance:Instance", "storage-lustre", protect=False),
        "gcp-stateful-resources-protected-in-production"),
    "unprotect a KMS key in prod": (
        "prod-gcp", lambda g: edit(g, "gcp:kms/cryptoKey:CryptoKey", "keys-data", protect=False),
        "gcp-stateful-resources-protected-in-production"),
    "unprotect the key ring in prod": (
        "prod-gcp", lambda g: edit(g, "gcp:kms/keyRing:KeyRing", "keys-ring", protect=False),
        "gcp-stateful-resources-protected-in-production"),
    "turn off the cluster's deletion protection in prod": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(["deletionProtection"], False)),
        "gcp-stateful-resources-protected-in-production"),
    "force-destroy the prod bucket": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-checkpoints", _set(["forceDestroy"], True)),
        "gcp-stateful-resources-protected-in-production"),
    "unprotect the prod data bucket": (
        "prod-gcp", lambda g: edit(g, GCS_BUCKET, "storage-bucket-data", protect=False),
        "gcp-stateful-resources-protected-in-production"),
    "let a cluster rename replace the prod bucket": (
        "prod-gcp", _ignore_nothing(GCS_BUCKET), "stateful-names-ignore-changes"),
    # telemetry
    "stop logging workloads": (
        "dev-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(["loggingConfig", "enableComponents"],
                                                                         ["SYSTEM_COMPONENTS", "APISERVER"])),
        "gcp-gke-logging"),
    "stop logging the prod API server": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(["loggingConfig", "enableComponents"],
                                                                          ["SYSTEM_COMPONENTS", "WORKLOADS"])),
        "gcp-gke-logging"),
    "remove the storage metrics exporter": (
        "prod-gcp", lambda g: edit(g, RELEASE, "stackdriver-exporter", remove=True),
        "gcp-storage-metrics-in-production"),
    "stop reading Managed Lustre's metrics": (
        "prod-gcp", release_values("stackdriver-exporter", ["stackdriver", "metrics", "typePrefixes"],
                                    "storage.googleapis.com/api/request_count"),
        "gcp-storage-metrics-in-production"),
    "drop DCGM metrics with GKE-managed drivers": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", lambda i: i["monitoringConfig"][
            "enableComponents"].remove("DCGM")),
        "gcp-gke-gpu-monitoring"),
    "turn off Google Groups for RBAC": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _delete(["authenticatorGroupsConfig"])),
        "gcp-teams-reach-the-cluster"),
    "take away the research group's way to the cluster": (
        "prod-gcp", lambda g: edit(g, "gcp:projects/iAMMember:IAMMember", "identities-team-research", remove=True),
        "gcp-teams-reach-the-cluster"),
    "stop scraping GKE's DCGM exporter into Prometheus": (
        "prod-gcp", lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1:PodMonitor", "cloud-dcgm", remove=True),
        "prometheus-scrapes-gpu-metrics"),
    "turn off Managed Prometheus with GKE-managed drivers": (
        "dev-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(
            ["monitoringConfig", "managedPrometheus", "enabled"], False)),
        "gcp-gke-gpu-monitoring"),
    # fabric
    "drop a GPU network of the a3-megagpu-8g pool": (
        "prod-gcp", lambda g: edit(g, GKE_POOL, "nodepool-h100-pool",
                                   lambda i: i["networkConfig"]["additionalNodeNetworkConfigs"].pop()),
        "gcp-gpudirect-node-pools-wire-all-networks"),
    "turn off multi-networking": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _delete(["enableMultiNetworking"])),
        "gcp-gpudirect-node-pools-wire-all-networks"),
    "run GPUDirect on the legacy datapath": (
        "prod-gcp", lambda g: edit(g, GKE_CLUSTER, "control-plane-gke", _set(["datapathProvider"], "LEGACY_DATAPATH")),
        "gcp-gpudirect-node-pools-wire-all-networks"),
    "add a compact placement to the reservation pool": (
        "prod-gcp", lambda g: edit(g, GKE_POOL, "nodepool-h100-pool", _set(["placementPolicy"], {"type": "COMPACT"})),
        "gcp-no-compact-placement-on-reservation"),
    # issue 33: the guards outside production (advisory there; tests/policy/test_guards.py covers production)
    "dev: unbind every admission policy": (
        "dev-gcp", remove_all(k8s_type("ValidatingAdmissionPolicyBinding")),
        "kubernetes-team-admission-policies-outside-production"),
    "dev: make a team namespace privileged": (
        "dev-gcp", lambda g: edit(g, k8s_type("Namespace"), "tenancy-ns-research",
                                  _set(["metadata", "labels", "pod-security.kubernetes.io/enforce"], "privileged")),
        "kubernetes-team-namespaces-pod-security-outside-production"),
    "dev: remove a team's default-deny policy": (
        "dev-gcp", lambda g: edit(g, k8s_type("NetworkPolicy"), "networkpolicy-research-default-deny", remove=True),
        "kubernetes-team-namespaces-isolated-outside-production"),
    "dev: open the monitoring namespace's egress": (
        "dev-gcp", lambda g: edit(g, k8s_type("NetworkPolicy"), "egress-monitoring-default-deny-egress", remove=True),
        "kubernetes-platform-namespaces-deny-egress-outside-production"),
    "dev: drop the GPU XID alert": (
        "dev-gcp", lambda g: edit(g, k8s_type("PrometheusRule"), "monitoring-rules",
                                  drop_alerts("DCGM_FI_DEV_XID_ERRORS")),
        "alerts-minimum-telemetry-outside-production"),
}





MUTATIONS = GCP_MUTATIONS  # (stack, mutation, policy), for --explain


_GKE = "gcp:container/cluster:Cluster"
_GCP_SPEC = SPEC_KEY + ".gcp"

# The stack-file key each GCP finding is about (blueprint.policy.spec_keys): relative keys are under the resource's own
# (a node pool's item, the cluster, the storage section).
SPEC_KEYS: tuple[KeyRule, ...] = (
    KeyRule(".placement", "gcp:container/nodePool:NodePool", r"placementPolicy\.type"),
    KeyRule(".authorizedNetworks{1}", _GKE, r"masterAuthorizedNetworksConfig\.cidrBlocks" + INDEX + r"(\.cidrBlock)?"),
    KeyRule(".databaseEncryption", _GKE, r"databaseEncryption(\..*)?"),
    KeyRule(".logComponents", _GKE, r"loggingConfig\.enableComponents(\[\d+\])?"),
    KeyRule(".rbacSecurityGroup", _GKE, r"authenticatorGroupsConfig(\..*)?"),
    KeyRule(".checkpointBucket.softDeleteDays", "gcp:storage/bucket:Bucket",
            r"softDeletePolicy\.retentionDurationSeconds"),
    KeyRule(DELETION_PROTECTION, policies=("gcp-stateful-resources-protected-in-production",)),
    KeyRule(_GCP_SPEC + ".telemetry.storageMetrics", policies=("gcp-storage-metrics-in-production",)),
    KeyRule(_GCP_SPEC + ".telemetry.storageMetrics", policies=("alerts-minimum-telemetry",),
            message="must alert on storage"),
    KeyRule(".budget", "kubernetes:core/v1:Namespace", policies=("gcp-every-team-has-a-budget",)),
    KeyRule(SPEC_KEY + ".billing", policies=("gcp-cluster-has-a-budget",)),
    KeyRule(LABELS, field=LABEL, policies=("gcp-resources-require-billing-labels",)),
)
