"""AWS in the policy family: how each policy is broken on prod-aws (and Slurm's on prod-aws-slurm), for ``blueprint
policy --explain`` and the tests that prove each policy rejects its mutation."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.policy.mutations import (
    RELEASE,
    Mutation,
    add,
    drop_alerts,
    drop_spend_alert,
    edit,
    k8s_type,
    release_values,
    remove_all,
)
from blueprint.policy.mutations import delete_path as _delete
from blueprint.policy.mutations import set_path as _set
from blueprint.policy.spec_keys import INDEX, LABEL, LABELS, SPEC_KEY, KeyRule

ALERTMANAGER_CONFIG = "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig"


def _without_default_tag(key: str) -> Callable[[ResourceGraph], ResourceGraph]:
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        def drop(inputs: dict[str, Any]) -> None:
            tags = json.loads(inputs["defaultTags"])
            del tags["tags"][key]
            inputs["defaultTags"] = json.dumps(tags)
        return edit(graph, "pulumi:providers:aws", "aws", drop)
    return mutate


def _every_alert_config(change: Callable[[dict[str, Any]], None] | None,
                        remove: bool = False) -> Callable[[ResourceGraph], ResourceGraph]:
    """The same change to each AlertmanagerConfig (one per receiver): breaking one leaves the others routing."""
    def mutate(graph: ResourceGraph) -> ResourceGraph:
        for config in graph.of_type(ALERTMANAGER_CONFIG):
            graph = edit(graph, ALERTMANAGER_CONFIG, config.name, change, remove=remove)
        return graph
    return mutate


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


LT = "aws:ec2/launchTemplate:LaunchTemplate"


EKS_CLUSTER = "aws:eks/cluster:Cluster"




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
                       drop_spend_alert("research")),
        "aws-every-team-has-a-budget"),
    "point the cluster's budget at a tag nothing billed carries": (
        lambda g: edit(g, "aws:budgets/budget:Budget", "cost-budget-cluster",
                       _set(["costFilters"], [{"name": "TagKeyValue", "values": ["user:team$research"]}])),
        "budgets-see-spend"),
    "model a goodput below the target": (
        lambda g: edit(g, k8s_type("ConfigMap"), "configmap-research-checkpoint-policy",
                       _set(["data", "GOODPUT_MODELLED"], "0.9000")),
        "checkpoint-storage-reaches-goodput-target"),
    "remove the cluster's budget": (
        lambda g: edit(g, "aws:budgets/budget:Budget", "cost-budget-cluster", remove=True),
        "aws-cluster-has-a-budget"),
    "remove a team namespace's cost-center label": (
        lambda g: edit(g, k8s_type("Namespace"), "tenancy-ns-research", _delete(["metadata", "labels", "cost-center"])),
        "kubernetes-namespaces-require-billing-labels"),
    "route every alert to a receiver that notifies no one": (
        _every_alert_config(_set(["spec", "route"], {"receiver": "none"})), "alerts-reach-a-receiver"),
    "drop the alert routing": (_every_alert_config(None, remove=True), "alerts-reach-a-receiver"),
    "drop the DCGM exporter": (
        release_values("gpu-operator", ["dcgmExporter", "enabled"], False), "gpu-telemetry-requires-dcgm-exporter"),
    "remove the Prometheus stack": (
        lambda g: edit(g, RELEASE, "kube-prometheus-stack", remove=True), "prometheus-scrapes-gpu-metrics"),
    "turn off the DCGM ServiceMonitor": (
        release_values("gpu-operator", ["dcgmExporter", "serviceMonitor", "enabled"], False),
        "prometheus-scrapes-gpu-metrics"),
    "turn off Kueue metrics": (
        release_values("kueue", ["enablePrometheus"], False), "kueue-requires-metrics"),
    "stop auditing the control plane": (
        lambda g: edit(g, EKS_CLUSTER, "control-plane-eks", _set(["enabledClusterLogTypes"], ["api", "scheduler"])),
        "aws-eks-control-plane-logging"),
    "remove OpenCost": (
        lambda g: edit(g, RELEASE, "opencost", remove=True), "cost-attribution-installed"),
    "delete a team's LocalQueue": (
        lambda g: edit(g, k8s_type("LocalQueue"), "localqueue-applied-default", remove=True),
        "team-namespaces-require-queue-and-quotas"),
    "delete a team's ResourceQuota": (
        lambda g: edit(g, k8s_type("ResourceQuota"), "resourcequota-research-gpu-quota", remove=True),
        "team-namespaces-require-queue-and-quotas"),
    "set every nominal GPU quota to zero": (  # flavors[1]: h100, after the teams' CPU flavor (GPU quota 0 already);
        # applied's flavors[2]: l40s, its served model's group
        lambda g: edit([g := edit(g, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", f"clusterqueue-{t}",
                                  _set(["spec", "resourceGroups", 0, "flavors", 1, "resources", 0, "nominalQuota"],
                                       "0"))
                        for t in ("research", "pretraining", "applied")][-1],
                       "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "clusterqueue-applied",
                       _set(["spec", "resourceGroups", 0, "flavors", 2, "resources", 0, "nominalQuota"], "0")),
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
    "raise the IMDS hop limit to 2": (
        lambda g: edit(g, LT, "nodegroup-system-lt", _set(["metadataOptions", "httpPutResponseHopLimit"], 2)),
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
        lambda g: edit(g, k8s_type("NetworkPolicy"), "networkpolicy-pretraining-default-deny", remove=True),
        "kubernetes-team-namespaces-isolated"),
    "make a team namespace privileged": (
        lambda g: edit(g, k8s_type("Namespace"), "tenancy-ns-applied",
                       _set(["metadata", "labels", "pod-security.kubernetes.io/enforce"], "privileged")),
        "kubernetes-team-namespaces-pod-security"),
    "run a privileged pod in a team namespace": (
        _privileged_pod, "kubernetes-privileged-pods-only-in-system-namespaces"),
    "put the served model on an internet-facing load balancer": (
        lambda g: edit(g, "kubernetes:core/v1:Service", "serving-llama-3-1-8b-instruct-service",
                       _set(["spec", "type"], "LoadBalancer")), "inference-endpoint-private"),
    "put the inference gateway's proxy on an internet-facing load balancer": (
        lambda g: edit(g, "kubernetes:agentgateway.dev/v1alpha1:AgentgatewayParameters", "inference-gateway-parameters",
                       _set(["spec", "service", "spec", "type"], "LoadBalancer")), "inference-endpoint-private"),
    "serve the models through an external gateway class": (
        lambda g: edit(g, "kubernetes:gateway.networking.k8s.io/v1:Gateway", "inference-gateway-gateway",
                       _set(["spec", "gatewayClassName"], "gke-l7-regional-external-managed")),
        "inference-endpoint-private"),
    "drop the served model's latency alerts": (
        lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1:PrometheusRule", "monitoring-rules",
                       lambda i: i["spec"].update(groups=[x for x in i["spec"]["groups"]
                                                          if x["name"] != "gpu-cluster.serving"])),
        "inference-objective-alerted"),
    "promise a failover faster than the served model loads": (
        lambda g: edit(g, "kubernetes:apps/v1:Deployment", "serving-llama-3-1-8b-instruct-deployment",
                       lambda i: i["metadata"]["annotations"].update({
                           "gpu-cluster/objective-failover-seconds": "60", "gpu-cluster/cold-start-seconds": "600"})),
        "inference-failover-within-objective"),
    "stop scraping the served model": (
        lambda g: edit(g, "kubernetes:monitoring.coreos.com/v1:PodMonitor", "serving-llama-3-1-8b-instruct-metrics",
                       remove=True), "inference-objective-alerted"),
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
        lambda g: edit(g, k8s_type("Namespace"), "ns-monitoring", protect=False),
        "prometheus-metrics-retained-in-production"),
    "turn off the cluster's deletion protection in prod": (
        lambda g: edit(g, EKS_CLUSTER, "control-plane-eks", _set(["deletionProtection"], False)),
        "stateful-resources-protected-in-production"),
    # issue 27: fabric, storage and logs in production
    "drop the EFA node exporter": (
        lambda g: edit(g, RELEASE, "efa-node-exporter", remove=True), "aws-fabric-metrics-in-production"),
    "stop scraping the EFA node exporter": (
        release_values("efa-node-exporter", ["prometheus", "monitor", "enabled"], False),
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
    # issue 33: the guards, mandatory in production
    "unbind every admission policy": (
        remove_all(k8s_type("ValidatingAdmissionPolicyBinding")), "kubernetes-team-admission-policies"),
    "open the monitoring namespace's egress": (
        lambda g: edit(g, k8s_type("NetworkPolicy"), "egress-monitoring-default-deny-egress", remove=True),
        "kubernetes-platform-namespaces-deny-egress"),
    "drop the GPU XID alert": (
        lambda g: edit(g, k8s_type("PrometheusRule"), "monitoring-rules",
                       drop_alerts("DCGM_FI_DEV_XID_ERRORS")),
        "alerts-minimum-telemetry"),
}




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
    "run the Slurm login pods privileged": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "LoginSet", "slurm-loginset-slurm-login",
                                         _set(["spec", "login", "securityContext", "privileged"], True)),
        "slurm-login-unprivileged"),
    "give the Slurm login pods SYS_ADMIN": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "LoginSet", "slurm-loginset-slurm-login",
                                         _set(["spec", "login", "securityContext", "capabilities", "add"],
                                              ["SYS_CHROOT", "SYS_ADMIN"])),
        "slurm-login-unprivileged"),
    "drop the billing labels from the Slurm NodeSet's pods": (
        "prod-aws-slurm", lambda g: edit(g, SLINKY + "NodeSet", "slurm-nodeset-slurm-h100",
                                         _delete(["spec", "template", "metadata", "labels", "cost-center"])),
        "slurm-pods-carry-billing-labels"),
}




# Every mutation as (stack, mutation, policy), for --explain.
MUTATIONS: dict[str, tuple[str, Mutation, str]] = {
    **{how: ("prod-aws", mutate, policy) for how, (mutate, policy) in AWS_MUTATIONS.items()}, **SLURM_MUTATIONS}


_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
_AWS_SPEC = SPEC_KEY + ".aws"

# The stack-file key each AWS finding is about (blueprint.policy.spec_keys): relative keys are under the resource's own
# (a node group's item, the control plane, the telemetry section).
SPEC_KEYS: tuple[KeyRule, ...] = (
    KeyRule(".{1}", _NODE_GROUP, r"scalingConfig\.(maxSize|minSize|desiredSize)"),
    # SSH the node group's ssh key opens (a rule per source CIDR); the program never writes remoteAccess, so a
    # finding on it stays on the node group's own key
    KeyRule(".ssh.sourceCidrs", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", r"cidrIpv4",
            policies=("aws-no-ssh-from-anywhere",), under=re.escape(_AWS_SPEC) + r"\.nodeGroups\[\d+\]"),
    KeyRule(".efaInterfaces", LT, r"networkInterfaces(\[\d+\])?"),
    KeyRule(".placement", LT, r"placement\.groupName"),
    KeyRule(".publicAccessCidrs{1}", EKS_CLUSTER, r"vpcConfig\.publicAccessCidrs" + INDEX),
    KeyRule(".secretsEncryption", EKS_CLUSTER, r"encryptionConfig(\..*)?"),
    KeyRule(".logTypes", EKS_CLUSTER, r"enabledClusterLogTypes(\[\d+\])?"),
    KeyRule(".database.backupRetentionDays", "aws:rds/instance:Instance", r"backupRetentionPeriod"),
    KeyRule(".containerLogs.retentionDays", "aws:cloudwatch/logGroup:LogGroup", r"retentionInDays"),
    KeyRule(_AWS_SPEC + ".telemetry.storageMetrics", policies=("aws-storage-metrics-in-production",)),
    KeyRule(_AWS_SPEC + ".telemetry.containerLogs.enabled", EKS_CLUSTER,
            policies=("aws-container-logs-in-production",)),
    KeyRule(_AWS_SPEC + ".telemetry.efaExporterImage", policies=("aws-fabric-metrics-in-production",)),
    # the seed's minimum alerts on storage and the fabric go with the metrics they read
    KeyRule(_AWS_SPEC + ".telemetry.storageMetrics", policies=("alerts-minimum-telemetry",),
            message="must alert on storage"),
    KeyRule(_AWS_SPEC + ".telemetry.efaExporterImage", policies=("alerts-minimum-telemetry",),
            message="must alert on fabric"),
    KeyRule(".budget", "kubernetes:core/v1:Namespace", policies=("aws-every-team-has-a-budget",)),
    KeyRule(SPEC_KEY + ".billing", policies=("aws-cluster-has-a-budget",)),
    KeyRule(LABELS, field=LABEL,
            policies=("aws-resources-require-billing-tags", "aws-eks-gpu-nodegroup-require-owner")),
)
