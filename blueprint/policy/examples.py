"""How each policy of the pack is broken on a shipped production graph: the mutations the tests prove every policy
rejects (tests/test_policies.py, tests/test_policies_gcp.py), shipped so that ``blueprint policy --explain`` can show
a real violation in the pack's own words instead of a description of one.

``AWS_MUTATIONS`` break the prod-aws graph (name -> (mutation, policy)); ``GCP_MUTATIONS`` a GKE stack's (name ->
(stack, mutation, policy)). A mutation takes a graph and returns a changed copy; nothing here touches a cloud.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.runner import Pack, run_policies

# --- AWS: prod-aws ---------------------------------------------------------------------------------------------

Change = Callable[[dict[str, Any]], None]


RELEASE = "kubernetes:helm.sh/v3:Release"


def edit(graph: ResourceGraph, type_: str, name_suffix: str, change: Change | None = None, *,
         remove: bool = False, protect: bool | None = None) -> ResourceGraph:
    """A copy of the graph with one resource changed, unprotected or removed."""
    found = False
    out: list[GraphResource] = []
    for r in graph.resources:
        if r.type == type_ and r.name.endswith(name_suffix):
            found = True
            if remove:
                continue
            inputs = copy.deepcopy(r.inputs)
            if change is not None:
                change(inputs)
            r = dataclasses.replace(r, inputs=inputs, protect=r.protect if protect is None else protect)
        out.append(r)
    assert found, (type_, name_suffix)
    return ResourceGraph(graph.stack, out)


def add(graph: ResourceGraph, resource: GraphResource) -> ResourceGraph:
    return ResourceGraph(graph.stack, [*graph.resources, resource])


def _set(path: list[str | int], value: Any) -> Change:
    def change(inputs: dict[str, Any]) -> None:
        cur: Any = inputs
        for step in path[:-1]:
            cur = cur[step]
        cur[path[-1]] = value
    return change


def _delete(path: list[str | int]) -> Change:
    def change(inputs: dict[str, Any]) -> None:
        cur: Any = inputs
        for step in path[:-1]:
            cur = cur[step]
        del cur[path[-1]]
    return change


def _without_default_tag(key: str) -> Callable[[ResourceGraph], ResourceGraph]:
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        def drop(inputs: dict[str, Any]) -> None:
            tags = json.loads(inputs["defaultTags"])
            del tags["tags"][key]
            inputs["defaultTags"] = json.dumps(tags)
        return edit(graph, "pulumi:providers:aws", "aws", drop)
    return mutate


def _release_values(name: str, path: list[str | int], value: Any) -> Callable[[ResourceGraph], ResourceGraph]:
    return lambda g: edit(g, RELEASE, name, _set(["values", *path], value))


def _ssh_rule(graph: ResourceGraph) -> ResourceGraph:
    base = next(r for r in graph.resources if r.name.endswith("efa-ingress-self"))
    return add(graph, dataclasses.replace(
        base, urn=base.urn.replace("efa-ingress-self", "ssh-from-anywhere"), name="network-ssh-from-anywhere",
        inputs={**base.inputs, "ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": "0.0.0.0/0",
                "referencedSecurityGroupId": None}))


def _privileged_pod(graph: ResourceGraph) -> ResourceGraph:
    ns = next(r for r in graph.resources if r.type == "kubernetes:core/v1:Namespace" and r.name.endswith("research"))
    return add(graph, GraphResource(
        urn=ns.urn.replace("Namespace::tenancy-ns-research", "Pod::debug"), type="kubernetes:core/v1:Pod",
        name="debug", parent=ns.parent, provider=ns.provider,
        inputs={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug", "namespace": "research"},
                "spec": {"containers": [{"name": "shell", "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                                         "securityContext": {"privileged": True}}]}}))


def _gcp_bucket(graph: ResourceGraph) -> ResourceGraph:
    stack = next(r for r in graph.resources if r.type == "pulumi:pulumi:Stack")
    provider = GraphResource(
        urn=stack.urn.replace("pulumi:pulumi:Stack::", "pulumi:providers:gcp::").rsplit("::", 1)[0] + "::gcp",
        type="pulumi:providers:gcp", name="gcp", parent=stack.urn,
        inputs={"project": "ml-prod", "defaultLabels": json.dumps({"team": "ml-platform", "environment": "prod"})})
    bucket = GraphResource(
        urn=stack.urn.rsplit("::", 2)[0] + "::gcp:storage/bucket:Bucket::datasets", type="gcp:storage/bucket:Bucket",
        name="datasets", parent=stack.urn, provider=f"{provider.urn}::id",
        inputs={"name": "datasets", "location": "US", "labels": {"owner": "data"}})
    return add(add(graph, provider), bucket)


def _split_zones(graph: ResourceGraph) -> ResourceGraph:
    graph = edit(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng", _set(["capacityType", ], "ON_DEMAND"))
    ng = next(r for r in graph.resources if r.name == "nodegroup-h100-ng")
    other = next(r for r in graph.resources if r.name == "network-subnet-system-b")
    graph = ResourceGraph(graph.stack, [dataclasses.replace(r, dependencies=[*r.dependencies, other.urn])
                                        if r.urn == ng.urn else r for r in graph.resources])
    return edit(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt",
                _delete(["capacityReservationSpecification"]))


def _no_placement_on_demand(graph: ResourceGraph) -> ResourceGraph:
    graph = edit(graph, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng", _set(["capacityType"], "ON_DEMAND"))
    return edit(graph, "aws:ec2/launchTemplate:LaunchTemplate", "nodegroup-h100-lt",
                _delete(["capacityReservationSpecification"]))


def _opt_in_block(graph: ResourceGraph) -> ResourceGraph:
    """The system group's opt-in tag copied onto the Capacity Block group's Auto Scaling group."""
    tag = next(r for r in graph.resources if r.name == "nodegroup-system-asg-autoscale")
    ng = next(r for r in graph.resources if r.name == "nodegroup-h100-ng")
    return add(graph, dataclasses.replace(
        tag, urn=tag.urn.replace("nodegroup-system-asg-autoscale", "nodegroup-h100-asg-autoscale"),
        name="nodegroup-h100-asg-autoscale", parent=ng.parent, dependencies=[ng.urn],
        inputs={**tag.inputs, "autoscalingGroupName": "eks-prod-train-h100"}))


def _k8s(kind: str) -> str:
    return {"LocalQueue": "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
            "ResourceQuota": "kubernetes:core/v1:ResourceQuota",
            "NetworkPolicy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            "ConfigMap": "kubernetes:core/v1:ConfigMap",
            "Namespace": "kubernetes:core/v1:Namespace"}[kind]


LT = "aws:ec2/launchTemplate:LaunchTemplate"


EKS_CLUSTER = "aws:eks/cluster:Cluster"


def _drop_spend_alert(team: str) -> Change:
    """Remove one team's TeamSpendOverBudget alert from the PrometheusRule."""
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if not (r.get("alert") == "TeamSpendOverBudget"
                                                                and r.get("labels", {}).get("team") == team)]
    return change


AWS_MUTATIONS: dict[str, tuple[Callable[[ResourceGraph], ResourceGraph], str]] = {
    "remove a billing tag from a resource and the provider defaults": (
        lambda g: _without_default_tag("cost-center")(edit(g, "aws:ec2/vpc:Vpc", "network-vpc",
                                                            _delete(["tags", "cost-center"]))),
        "aws-resources-require-billing-tags"),
    "remove the owner of the GPU node group": (
        lambda g: _without_default_tag("owner")(edit(g, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng",
                                                      _delete(["tags", "owner"]))),
        "aws-eks-gpu-nodegroup-require-owner"),
    "drop a team's in-cluster spend alert": (
        lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1:PrometheusRule", "monitoring-rules",
                       _drop_spend_alert("research")),
        "aws-every-team-has-a-budget"),
    "point the cluster's budget at a tag nothing billed carries": (
        lambda g: edit(g, "aws:budgets/budget:Budget", "cost-budget-cluster",
                       _set(["costFilters"], [{"name": "TagKeyValue", "values": ["user:team$research"]}])),
        "budgets-see-spend"),
    "model a goodput below the target": (
        lambda g: edit(g, _k8s("ConfigMap"), "configmap-research-checkpoint-policy",
                       _set(["data", "GOODPUT_MODELLED"], "0.9000")),
        "checkpoint-storage-reaches-goodput-target"),
    "remove the cluster's budget": (
        lambda g: edit(g, "aws:budgets/budget:Budget", "cost-budget-cluster", remove=True),
        "aws-cluster-has-a-budget"),
    "remove a team namespace's cost-center label": (
        lambda g: edit(g, _k8s("Namespace"), "tenancy-ns-research", _delete(["metadata", "labels", "cost-center"])),
        "kubernetes-namespaces-require-billing-labels"),
    "route every alert to a receiver that notifies no one": (
        lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig", "monitoring-alert-routing",
                       _set(["spec", "route"], {"receiver": "none"})),
        "alerts-reach-a-receiver"),
    "drop the alert routing": (
        lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig", "monitoring-alert-routing",
                       remove=True),
        "alerts-reach-a-receiver"),
    "drop the DCGM exporter": (
        _release_values("gpu-operator", ["dcgmExporter", "enabled"], False), "gpu-telemetry-requires-dcgm-exporter"),
    "remove the Prometheus stack": (
        lambda g: edit(g, RELEASE, "kube-prometheus-stack", remove=True), "prometheus-scrapes-gpu-metrics"),
    "turn off the DCGM ServiceMonitor": (
        _release_values("gpu-operator", ["dcgmExporter", "serviceMonitor", "enabled"], False),
        "prometheus-scrapes-gpu-metrics"),
    "turn off Kueue metrics": (
        _release_values("kueue", ["enablePrometheus"], False), "kueue-requires-metrics"),
    "stop auditing the control plane": (
        lambda g: edit(g, EKS_CLUSTER, "control-plane-eks", _set(["enabledClusterLogTypes"], ["api", "scheduler"])),
        "aws-eks-control-plane-logging"),
    "remove OpenCost": (
        lambda g: edit(g, RELEASE, "opencost", remove=True), "cost-attribution-installed"),
    "delete a team's LocalQueue": (
        lambda g: edit(g, _k8s("LocalQueue"), "localqueue-applied-default", remove=True),
        "team-namespaces-require-queue-and-quotas"),
    "delete a team's ResourceQuota": (
        lambda g: edit(g, _k8s("ResourceQuota"), "resourcequota-research-gpu-quota", remove=True),
        "team-namespaces-require-queue-and-quotas"),
    "set every nominal GPU quota to zero": (
        lambda g: [g := edit(g, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", f"clusterqueue-{t}",
                             _set(["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"], "0"))
                   for t in ("research", "pretraining", "applied")][-1],
        "kueue-cluster-queue-requires-gpu-quota"),
    "let the GPU node group scale to 100 nodes": (
        lambda g: edit(g, "aws:eks/nodeGroup:NodeGroup", "nodegroup-h100-ng", _set(["scalingConfig", "maxSize"], 100)),
        "aws-eks-gpu-nodegroup-max-size-cap"),
    "open the endpoint to 0.0.0.0/0": (
        lambda g: edit(g, EKS_CLUSTER, "control-plane-eks", lambda i: i["vpcConfig"].update(
            endpointPublicAccess=True, publicAccessCidrs=["0.0.0.0/0"])),
        "aws-eks-endpoint-not-open-to-internet"),
    "stop encrypting secrets": (
        lambda g: edit(g, EKS_CLUSTER, "control-plane-eks", _delete(["encryptionConfig"])),
        "aws-eks-secrets-encrypted-with-kms"),
    "allow IMDSv1": (
        lambda g: edit(g, LT, "nodegroup-h100-lt", _set(["metadataOptions", "httpTokens"], "optional")),
        "aws-ec2-launch-template-requires-imdsv2"),
    "raise the IMDS hop limit to 3": (
        lambda g: edit(g, LT, "nodegroup-system-lt", _set(["metadataOptions", "httpPutResponseHopLimit"], 3)),
        "aws-ec2-launch-template-requires-imdsv2"),
    "open SSH to the world": (_ssh_rule, "aws-no-ssh-from-anywhere"),
    "give a node group SSH remote access": (
        lambda g: edit(g, "aws:eks/nodeGroup:NodeGroup", "nodegroup-system-ng",
                       _set(["remoteAccess"], {"ec2SshKey": "ops"})),
        "aws-no-ssh-from-anywhere"),
    "leave the root volume unencrypted": (
        lambda g: edit(g, LT, "nodegroup-h100-lt", _set(["blockDeviceMappings", 0, "ebs", "encrypted"], "false")),
        "aws-encryption-at-rest"),
    "drop the filesystem's KMS key": (
        lambda g: edit(g, "aws:fsx/lustreFileSystem:LustreFileSystem", "storage-lustre", _delete(["kmsKeyId"])),
        "aws-encryption-at-rest"),
    "remove the bucket's default encryption": (
        lambda g: edit(g, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                       "checkpoints-sse", remove=True),
        "aws-s3-bucket-encrypted"),
    "allow public bucket policies": (
        lambda g: edit(g, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "checkpoints-public-access",
                       _set(["blockPublicPolicy"], False)),
        "aws-s3-bucket-public-access-blocked"),
    "remove a team's default-deny policy": (
        lambda g: edit(g, _k8s("NetworkPolicy"), "networkpolicy-pretraining-default-deny", remove=True),
        "kubernetes-team-namespaces-default-deny"),
    "make a team namespace privileged": (
        lambda g: edit(g, _k8s("Namespace"), "tenancy-ns-applied",
                       _set(["metadata", "labels", "pod-security.kubernetes.io/enforce"], "privileged")),
        "kubernetes-privileged-pods-only-in-system-namespaces"),
    "run a privileged pod in a team namespace": (
        _privileged_pod, "kubernetes-privileged-pods-only-in-system-namespaces"),
    "drop an EFA interface": (
        lambda g: edit(g, LT, "nodegroup-h100-lt", lambda i: i["networkInterfaces"].pop()),
        "aws-efa-node-groups-wire-all-interfaces"),
    "force a placement group onto the capacity block": (
        lambda g: edit(g, LT, "nodegroup-h100-lt", _set(["placement"], {"groupName": "prod-train-h100"})),
        "aws-no-placement-group-on-reserved-capacity"),
    "opt the Capacity Block group in to the Cluster Autoscaler": (
        _opt_in_block, "aws-autoscaler-off-reserved-capacity"),
    "run a multi-node EFA group on demand without a placement group": (
        _no_placement_on_demand, "aws-efa-node-groups-single-az-and-placed"),
    "spread a multi-node EFA group over two zones": (_split_zones, "aws-efa-node-groups-single-az-and-placed"),
    "remove the EFA security group's self ingress": (
        lambda g: edit(g, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "efa-ingress-self",
                       remove=True),
        "aws-efa-security-group-allows-self"),
    "add a GCP bucket without its cost-center label": (_gcp_bucket, "gcp-resources-require-billing-labels"),
    "turn off bucket versioning": (
        lambda g: edit(g, "aws:s3/bucketVersioning:BucketVersioning", "checkpoints-versioning",
                       _set(["versioningConfiguration", "status"], "Suspended")),
        "aws-s3-checkpoint-bucket-versioned"),
    "expire current checkpoint versions": (
        lambda g: edit(g, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "checkpoints-lifecycle",
                       lambda i: i["rules"][0].update(expiration={"days": 30})),
        "aws-s3-lifecycle-keeps-current-versions"),
    "unprotect the checkpoint bucket in prod": (
        lambda g: edit(g, "aws:s3/bucket:Bucket", "storage-checkpoints", protect=False),
        "stateful-resources-protected-in-production"),
    "let a cluster rename replace the checkpoint bucket in prod": (
        lambda g: ResourceGraph(g.stack, [dataclasses.replace(r, ignore_changes=[])
                                          if r.type == "aws:s3/bucket:Bucket" else r for r in g.resources]),
        "stateful-names-ignore-changes"),
    "let the Prometheus volume be deleted with its claim in prod": (
        lambda g: edit(g, "kubernetes:storage.k8s.io/v1:StorageClass", "monitoring-storageclass",
                       _set(["reclaimPolicy"], "Delete")),
        "prometheus-metrics-retained-in-production"),
    "unprotect the monitoring namespace in prod": (
        lambda g: edit(g, _k8s("Namespace"), "ns-monitoring", protect=False),
        "prometheus-metrics-retained-in-production"),
    "turn off the cluster's deletion protection in prod": (
        lambda g: edit(g, EKS_CLUSTER, "control-plane-eks", _set(["deletionProtection"], False)),
        "stateful-resources-protected-in-production"),
    # issue 27: fabric, storage and logs in production
    "drop the EFA node exporter": (
        lambda g: edit(g, RELEASE, "efa-node-exporter", remove=True), "aws-fabric-metrics-in-production"),
    "stop scraping the EFA node exporter": (
        _release_values("efa-node-exporter", ["prometheus", "monitor", "enabled"], False),
        "aws-fabric-metrics-in-production"),
    "remove the storage metrics exporter": (
        lambda g: edit(g, RELEASE, "cloudwatch-exporter", remove=True), "aws-storage-metrics-in-production"),
    "turn off the checkpoint bucket's request metrics": (
        lambda g: edit(g, "aws:s3/bucketMetric:BucketMetric", "checkpoints-request-metrics", remove=True),
        "aws-storage-metrics-in-production"),
    "stop shipping container logs": (
        lambda g: edit(g, RELEASE, "aws-for-fluent-bit", remove=True), "aws-container-logs-in-production"),
    "leave the container log group unencrypted": (
        lambda g: edit(g, "aws:cloudwatch/logGroup:LogGroup", "telemetry-containers-logs", _delete(["kmsKeyId"])),
        "aws-container-logs-in-production"),
}


# --- GCP: prod-gcp and dev-gcp -----------------------------------------------------------------------------------

Mutation = Callable[[ResourceGraph], ResourceGraph]


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


# (stack, mutation, the policy that must reject it)
GCP_MUTATIONS: dict[str, tuple[str, Mutation, str]] = {
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
                                   _drop_spend_alert("research")),
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
        "kubernetes-privileged-pods-only-in-system-namespaces"),
    "claim the GPUDirect exception without the admission policy that bounds it": (
        "prod-gcp", lambda g: edit(g, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                                   "gpudirect-pod-limits", remove=True),
        "kubernetes-gpudirect-namespaces-bounded"),
    "let the GPUDirect admission policy judge only new pods": (
        "prod-gcp", lambda g: edit(g, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                                   "gpudirect-pod-limits", _set(["spec", "matchConstraints", "resourceRules", 0,
                                                                 "operations"], ["CREATE"])),
        "kubernetes-gpudirect-namespaces-bounded"),
    "let the GPUDirect admission policy only warn": (
        "prod-gcp", lambda g: edit(g, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                                   "gpudirect-pod-limits", _set(["spec", "validationActions"], ["Warn"])),
        "kubernetes-gpudirect-namespaces-bounded"),
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
        "prod-gcp", _release_values("stackdriver-exporter", ["stackdriver", "metrics", "typePrefixes"],
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
}




# --- Slurm: prod-aws-slurm ------------------------------------------------------------------------------------

SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"


def _partition_unlimited(inputs: dict[str, Any]) -> None:
    conf = inputs["spec"]["extraConf"]
    inputs["spec"]["extraConf"] = conf.replace("MaxTime=3-00:00:00", "MaxTime=INFINITE")


SLURM_MUTATIONS: dict[str, tuple[str, Mutation, str]] = {
    "run the prod Slurm controller without accounting": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "Controller", "slurm-controller-slurm-slurm",
                                         _delete(["spec", "accountingRef"])), "slurm-accounting-in-production"),
    "leave the Slurm accounting database unprotected": (
        "prod-aws-slurm", lambda g: edit(g, "aws:rds/instance:Instance", "slurm-accounting-instance",
                                         _set(["deletionProtection"], False), protect=False),
        "slurm-accounting-in-production"),
    "give a partition no time limit": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "Controller", "slurm-controller-slurm-slurm",
                                         _partition_unlimited), "slurm-partitions-have-limits"),
    "open the Slurm login to every address": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "LoginSet", "slurm-loginset-slurm-login",
                                         _set(["spec", "service", "spec", "loadBalancerSourceRanges"], ["0.0.0.0/0"])),
        "slurm-login-not-open-to-the-internet"),
    "drop the billing labels from the Slurm NodeSet's pods": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "NodeSet", "slurm-nodeset-slurm-h100",
                                         _delete(["spec", "template", "metadata", "labels", "cost-center"])),
        "slurm-pods-carry-billing-labels"),
}


def example_violation(policy: str, pack: Pack) -> tuple[str, str, str, str] | None:
    """(stack, how it was broken, the resource, the message with its field and fix) of the first mutation that
    breaks ``policy``, the pack run on it; None when no mutation is recorded for it."""
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack

    aws = [(how, "prod-aws", mutate) for how, (mutate, name) in AWS_MUTATIONS.items() if name == policy]
    gcp = [(how, stack, mutate) for how, (stack, mutate, name) in (GCP_MUTATIONS | SLURM_MUTATIONS).items()
           if name == policy]
    # A GCP policy's example is a GKE stack's, not a GCP resource grafted onto the AWS one.
    found = next(iter(gcp + aws if policy.startswith("gcp-") else aws + gcp), None)
    if found is None:
        return None
    how, stack_name, mutate = found
    stack = load_stack(stack_name)
    graph = mutate(run_program(stack.name, stack.config, stack.region).graph)
    hits = [v for v in run_policies(graph, None, pack).violations if v.policy == policy]
    if not hits:
        return None
    v = hits[0]
    text = v.message
    if v.field:
        text += f"\nfield: {v.field}" + (f" = {json.dumps(v.value)}" if v.value is not None else " (not set)")
    return stack_name, how, v.urn.rsplit("::", 1)[-1] if v.urn else "(stack)", text + f"\nfix: {v.fix}"
