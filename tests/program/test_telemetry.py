"""The telemetry the seed asks for (issue 27): the fabric's, the storage's and the jobs' signals reach Prometheus, logs
reach KMS-encrypted CloudWatch groups with the spec's retention, identities are least-privilege, alerts use what is
scraped, the dashboard's PromQL is the runbook's, and bad input is refused by its rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.graph.model import GraphResource, ResourceGraph
from components.kubernetes.objects import IDLE_ON_NETWORK_EXPR, IDLE_ON_STORAGE_EXPR, LOST_GPU_HOURS_EXPR
from components.sizing.goodput import plan_checkpoints
from components.sizing.plan import allowed_write_seconds, goodput_model
from components.spec import SpecError, parse_spec
from tests.conftest import ROOT, offline_run, raw_stack_config, run_spec, stack

RELEASE = "kubernetes:helm.sh/v3:Release"
FILE = "stacks/Pulumi.prod-aws.yaml"
P = f"{FILE}: gpu-cluster:spec"
DIGEST = "sha256:5e1f0d3c2b4a69788f7e6d5c4b3a2918f0e1d2c3b4a5968778695a4b3c2d1e0f"  # prod-aws's example image


def release(graph: ResourceGraph, name: str) -> GraphResource:
    (found,) = [r for r in graph.of_type(RELEASE) if r.inputs["name"] == name]
    return found


def rules(graph: ResourceGraph) -> dict[str, dict[str, Any]]:
    (rule,) = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    return {r.get("alert") or r["record"]: r for g in rule.inputs["spec"]["groups"] for r in g["rules"]}


def role_policy(graph: ResourceGraph, suffix: str) -> list[dict[str, Any]]:
    (policy,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith(suffix)]
    statements: list[dict[str, Any]] = json.loads(policy.inputs["policy"])["Statement"]
    return statements


def errors(spec: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-east-1")
    return str(info.value).splitlines()


# --- fabric ---------------------------------------------------------------------------------------------------------

def test_the_efa_exporter_runs_on_the_efa_groups_and_is_scraped_with_the_node_name() -> None:
    graph = offline_run("prod-aws").graph
    efa = release(graph, "efa-node-exporter").inputs
    assert (efa["chart"], efa["version"], efa["namespace"]) == ("prometheus-node-exporter", "4.56.1", "monitoring")
    values = efa["values"]
    assert values["image"] == {"registry": "111122223333.dkr.ecr.us-east-1.amazonaws.com",
                               "repository": "efa-node-exporter", "digest": DIGEST,
                               "pullPolicy": "IfNotPresent"}
    assert values["extraArgs"] == ["--collector.disable-defaults", "--collector.amazonefa"]
    assert values["service"]["port"] == 9102  # the cluster's node-exporter holds 9100 on the host network
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpu-cluster/node-group", "operator": "In", "values": ["h100"]}]}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    monitor = values["prometheus"]["monitor"]
    assert monitor["enabled"] is True and monitor["relabelings"][0]["targetLabel"] == "node"
    # The EFA alerts read the exporter's counters by node, and the missing-exporter alert counts the group's nodes.
    alerts = rules(graph)
    assert "node_amazonefa_retrans_pkts" in alerts["EfaRetransmitsHigh"]["expr"]
    assert "impaired_remote_conn_events" in alerts["EfaImpairedConnections"]["expr"]
    assert 'label_gpu_cluster_node_group=~"h100"' in alerts["FabricMetricsMissing"]["expr"]
    assert alerts["EfaRetransmitTimeouts"]["annotations"]["runbook_url"].endswith("#efa-nic-errors")


def test_no_exporter_without_an_image_and_the_preview_warns(prod_spec: dict[str, Any]) -> None:
    del prod_spec["aws"]["telemetry"]
    graph = run_spec(prod_spec, "prod-aws").graph
    assert not [r for r in graph.of_type(RELEASE) if r.inputs["name"] == "efa-node-exporter"]
    assert not {"EfaRetransmitsHigh", "FabricMetricsMissing"} & set(rules(graph))


def test_gke_says_what_it_cannot_see_and_has_no_fabric_alert() -> None:
    graph = offline_run("prod-gcp").graph
    (rule,) = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    unseen = rule.inputs["metadata"]["annotations"]["gpu-cluster/not-visible"]
    assert "GKE documents no metric of the GPU NICs" in unseen
    assert not [a for a in rules(graph) if a.startswith("Efa")]
    from blueprint.preview.render import render_preview

    text = render_preview(graph, stack("prod-gcp").spec, "stacks/Pulumi.prod-gcp.yaml")
    assert "not visible: GPUDirect fabric" in text


# --- storage --------------------------------------------------------------------------------------------------------

def test_storage_metrics_are_read_only_and_found_by_the_cluster_tag() -> None:
    graph = offline_run("prod-aws").graph
    yace = release(graph, "cloudwatch-exporter").inputs
    assert yace["chart"] == "prometheus-yet-another-cloudwatch-exporter" and yace["version"] == "0.47.0"
    assert yace["values"]["serviceMonitor"]["enabled"] is True
    config = yaml.safe_load(yace["values"]["config"])
    jobs = {j["type"]: j for j in config["discovery"]["jobs"]}
    assert set(jobs) == {"AWS/FSx", "AWS/S3"}
    assert jobs["AWS/FSx"]["searchTags"] == [{"key": "cluster", "value": "^prod-train$"}]
    assert {m["name"] for m in jobs["AWS/FSx"]["metrics"]} >= {"DataWriteBytes", "FreeDataStorageCapacity"}
    (statement,) = role_policy(graph, "telemetry-cloudwatch-exporter-policy")
    assert sorted(statement["Action"]) == ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics",
                                           "cloudwatch:ListMetrics", "tag:GetResources"]
    (association,) = [r for r in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if r.inputs["serviceAccount"] == "cloudwatch-exporter"]
    assert association.inputs["namespace"] == "monitoring"
    (release_resource,) = [r for r in graph.of_type(RELEASE) if r.inputs["name"] == "cloudwatch-exporter"]
    assert association.urn in release_resource.dependencies  # no pod before its credentials
    (metrics,) = graph.of_type("aws:s3/bucketMetric:BucketMetric")
    assert metrics.inputs["name"] == "EntireBucket" and "filter" not in metrics.inputs


def test_the_storage_alerts_use_the_filesystems_provisioned_figures() -> None:
    alerts = rules(offline_run("prod-aws").graph)
    # 9,600 GiB x 500 MB/s per TiB = 4.6875 GB/s; the alert fires above 90 % of it.
    assert alerts["FilesystemThroughputNearLimit"]["expr"].endswith("/ 60 > 4218750000")
    assert alerts["FilesystemCapacityLow"]["expr"].endswith(f"< {0.1 * 9600 * 2**30:.0f}")
    assert "aws_s3_5xx_errors_sum" in alerts["CheckpointBucketErrors"]["expr"]


def test_an_existing_filesystem_is_read_by_id_and_an_existing_bucket_is_left_alone() -> None:
    graph = offline_run("byo-aws").graph
    config = yaml.safe_load(release(graph, "cloudwatch-exporter").inputs["values"]["config"])
    (static,) = config["static"]
    fs_id = stack("byo-aws").spec.aws_spec().storage.filesystem.existing.file_system_id  # type: ignore[union-attr]
    assert static["dimensions"] == [{"name": "FileSystemId", "value": fs_id}]
    assert "discovery" not in config  # no request metrics on a bucket the stack does not own
    assert graph.of_type("aws:s3/bucketMetric:BucketMetric") == []


def test_gke_reads_managed_lustre_and_the_bucket_through_workload_identity() -> None:
    graph = offline_run("prod-gcp").graph
    exporter = release(graph, "stackdriver-exporter").inputs
    metrics = exporter["values"]["stackdriver"]["metrics"]
    assert metrics["typePrefixes"] == "lustre.googleapis.com/,storage.googleapis.com/api/request_count"
    assert metrics["aggregateDeltas"] is True and exporter["values"]["serviceMonitor"]["enabled"] is True
    bucket = stack("prod-gcp").spec.gcp_spec().project
    assert metrics["filters"][0].startswith("storage.googleapis.com/api/request_count:resource.labels.bucket_name=")
    assert bucket in metrics["filters"][0]
    (member,) = [r.inputs for r in graph.of_type("gcp:projects/iAMMember:IAMMember")
                 if r.inputs["role"] == "roles/monitoring.viewer"]
    assert str(member["member"]).endswith("/subject/ns/monitoring/sa/stackdriver-exporter")
    assert "StorageMetricsMissing" in rules(graph) and "CheckpointBucketErrors" in rules(graph)


# --- logs -----------------------------------------------------------------------------------------------------------

def test_container_and_node_logs_go_to_kms_encrypted_groups_with_the_control_planes_retention() -> None:
    graph = offline_run("prod-aws").graph
    groups = {r.inputs["name"]: r for r in graph.of_type("aws:cloudwatch/logGroup:LogGroup")}
    for name in ("/aws/eks/prod-train/containers", "/aws/eks/prod-train/nodes"):
        group = groups[name]
        assert group.inputs["retentionInDays"] == 365 and group.inputs["kmsKeyId"] and group.protect
    shipper = release(graph, "aws-for-fluent-bit").inputs
    assert shipper["namespace"] == "logging" and shipper["version"] == "0.2.0"
    values = shipper["values"]
    assert values["cloudWatchLogs"]["logGroupName"] == "/aws/eks/prod-train/containers"
    assert values["cloudWatchLogs"]["autoCreateGroup"] is False
    assert "Systemd_Filter _SYSTEMD_UNIT=kubelet.service" in values["additionalInputs"]
    assert "log_group_name /aws/eks/prod-train/nodes" in values["additionalOutputs"]
    assert values["tolerations"] == [{"operator": "Exists"}]  # every node, GPU nodes included
    (statement,) = role_policy(graph, "telemetry-fluent-bit-policy")
    assert statement["Action"] == ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
    arns = statement["Resource"]  # each group and its streams, nothing else
    assert len(arns) == 4 and arns[1] == f"{arns[0]}:*" and arns[3] == f"{arns[2]}:*"
    (key_policy,) = graph.of_type("aws:kms/keyPolicy:KeyPolicy")[-1:]
    logs = json.loads(key_policy.inputs["policy"])["Statement"][1]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"].endswith(
        ":log-group:/aws/eks/prod-train/*")


def test_log_retention_comes_from_the_spec_and_logs_can_be_turned_off(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["telemetry"]["containerLogs"] = {"retentionDays": 90}
    graph = run_spec(prod_spec, "prod-aws").graph
    assert {r.inputs["retentionInDays"] for r in graph.of_type("aws:cloudwatch/logGroup:LogGroup")
            if "containers" in r.inputs["name"] or "nodes" in r.inputs["name"]} == {90}
    prod_spec["aws"]["telemetry"]["containerLogs"] = {"retentionDays": 91}
    assert errors(prod_spec)[0].startswith(f"{P}.aws.telemetry.containerLogs.retentionDays: ")
    prod_spec["aws"]["telemetry"]["containerLogs"] = {"enabled": False}
    graph = run_spec(prod_spec, "prod-aws").graph
    assert not [r for r in graph.of_type(RELEASE) if r.inputs["name"] == "aws-for-fluent-bit"]
    assert not {"LogsNotShipped", "LogShipperUnavailable"} & set(rules(graph))


# --- checkpoints ----------------------------------------------------------------------------------------------------

def test_the_allowed_checkpoint_write_keeps_the_goodput_target() -> None:
    model = goodput_model(stack("prod-aws").spec)
    allowed = allowed_write_seconds(model)
    plan = model.plan
    assert allowed > plan.delta_s
    reached = plan_checkpoints(allowed, plan.restart_s, plan.mtbf_s, lag_s=plan.lag_s).goodput
    assert model.target is not None and abs(reached - model.target) < 1e-6
    assert plan_checkpoints(allowed * 1.05, plan.restart_s, plan.mtbf_s, lag_s=plan.lag_s).goodput < model.target


def test_jobs_learn_how_to_push_their_checkpoint_duration_and_the_alert_uses_the_models_figure() -> None:
    graph = offline_run("prod-aws").graph
    (policy,) = [r.inputs["data"] for r in graph.of_type("kubernetes:core/v1:ConfigMap")
                 if r.inputs["metadata"]["name"] == "checkpoint-policy" and r.inputs["metadata"]["namespace"] ==
                 "research"]
    assert policy["CHECKPOINT_METRIC"] == "gpu_cluster_checkpoint_duration_seconds"
    assert policy["CHECKPOINT_PUSHGATEWAY_URL"] == "http://pushgateway-research.monitoring.svc.cluster.local:9091"
    assert policy["CHECKPOINT_PUSH_PATH"] == "/metrics/job/<job name>"
    assert float(policy["CHECKPOINT_WRITE_ALLOWED_SECONDS"]) > float(policy["CHECKPOINT_WRITE_SECONDS"])
    alert = rules(graph)["CheckpointTooSlow"]
    assert f"> {policy['CHECKPOINT_WRITE_ALLOWED_SECONDS']} and on (namespace, exported_job)" in alert["expr"]
    assert "{{ $labels.exported_job }} in {{ $labels.namespace }}" in alert["annotations"]["summary"]


# Prometheus' label handling at scrape time, to ask what a pushed series becomes: target labels after relabeling
# (a replace rule without source labels writes its replacement; prometheus model/relabel/relabel.go), then each
# target label set on the sample, a conflicting pushed label kept as exported_<name> unless honor_labels keeps the
# pushed value (scrape/scrape.go mutateSampleLabels; docs/configuration/configuration.md, honor_labels). The target
# labels of a ServiceMonitor endpoint: namespace, service, pod, container, endpoint, job (the Service's name) and
# instance (prometheus-operator v0.88.1 pkg/prometheus/promcfg.go generateServiceMonitorConfig).
def scraped(pushed: dict[str, str], service_monitor: dict[str, Any], service: str) -> dict[str, str]:
    target = {"namespace": "monitoring", "service": service, "pod": f"{service}-7d9f8-abcde",
              "container": "pushgateway", "endpoint": "http", "job": service, "instance": "10.40.70.12:9091"}
    for rule in service_monitor.get("relabelings") or []:
        assert rule["action"] == "replace" and not rule.get("sourceLabels")
        target[rule["targetLabel"]] = rule["replacement"]
    out = dict(pushed)
    for name, value in target.items():
        if out.get(name):
            if service_monitor["honorLabels"]:
                continue
            out[f"exported_{name}"] = out[name]
        out[name] = value
    return out


def test_a_team_cannot_write_another_team_s_checkpoint_series() -> None:
    """Each team pushes to its own Pushgateway, which no other namespace can reach, and whatever namespace a push
    claims, the series carry the gateway's team: a team cannot overwrite or fake another team's checkpoint
    durations, nor make CheckpointTooSlow fire for (or hide it from) another team."""
    from blueprint.admit.cluster import ClusterView
    from blueprint.admit.network import Peer, allowed
    spec = stack("prod-aws").spec
    graph = offline_run("prod-aws").graph
    view = ClusterView(graph)
    teams = [t.name for t in spec.teams]
    fences = {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy") if r.inputs["metadata"]["namespace"] == "monitoring"}
    for team in teams:
        values = release(graph, f"pushgateway-{team}").inputs["values"]
        assert values["fullnameOverride"] == f"pushgateway-{team}"
        monitor = values["serviceMonitor"]
        assert monitor["honorLabels"] is False
        assert fences[f"pushgateway-{team}"]["spec"]["policyTypes"] == ["Ingress"]  # schema: test_platform.py
        gateway = {"app.kubernetes.io/name": "prometheus-pushgateway",
                   "app.kubernetes.io/instance": f"pushgateway-{team}"}
        for other in teams:
            peer = Peer(f"a pod of {other}", port=9091, namespace=other,
                        namespace_labels={"kubernetes.io/metadata.name": other}, pod_labels={"job-name": "train"})
            assert allowed(view, "monitoring", gateway, peer, "Ingress")[0] == (other == team), (team, other)
        prometheus = Peer("Prometheus", port=9091, namespace="monitoring",
                          namespace_labels={"kubernetes.io/metadata.name": "monitoring"},
                          pod_labels={"app.kubernetes.io/name": "prometheus", "prometheus": "kube-prometheus-stack"})
        assert allowed(view, "monitoring", gateway, prometheus, "Ingress")[0]
        grafana = Peer("Grafana", port=9091, namespace="monitoring",
                       namespace_labels={"kubernetes.io/metadata.name": "monitoring"},
                       pod_labels={"app.kubernetes.io/name": "grafana"})
        assert not allowed(view, "monitoring", gateway, grafana, "Ingress")[0]
        # A forged push: another team's namespace in the grouping key. The series stays the pusher's.
        forged = scraped({"__name__": "gpu_cluster_checkpoint_duration_seconds", "job": "train-7b",
                          "namespace": "research" if team != "research" else "applied", "instance": ""},
                         monitor, f"pushgateway-{team}")
        assert forged["namespace"] == team and forged["exported_job"] == "train-7b", forged
        assert forged["exported_namespace"] != team
    # The rules read the pusher's namespace and the pushed job: exactly the labels a team cannot forge or lose.
    expr = rules(graph)["CheckpointTooSlow"]["expr"]
    assert re.findall(r"by \(([^)]*)\)", expr) == ["namespace, exported_job"] * 2
    assert re.findall(r"on \(([^)]*)\)", expr) == ["namespace, exported_job"]
    recorded = rules(graph)["gpu_cluster:checkpoint_duration_seconds:max_by_namespace"]["expr"]
    assert "on (namespace, exported_job)" in recorded
    # The old way, one shared gateway with honorLabels, let the push decide the namespace.
    assert scraped({"job": "train-7b", "namespace": "research"}, {"honorLabels": True}, "pushgateway")[
        "namespace"] == "research"


def test_no_checkpoint_metric_without_a_goodput_model() -> None:
    graph = offline_run("dev-aws").graph  # no workload.goodput
    assert not [r for r in graph.of_type(RELEASE) if str(r.inputs["name"]).startswith("pushgateway")]
    assert "CheckpointTooSlow" not in rules(graph)


# --- jobs -----------------------------------------------------------------------------------------------------------

def test_kube_state_metrics_reads_kueue_workloads() -> None:
    values = release(offline_run("prod-aws").graph, "kube-prometheus-stack").inputs["values"]
    ksm = values["kube-state-metrics"]
    (resource,) = ksm["customResourceState"]["config"]["spec"]["resources"]
    assert resource["groupVersionKind"] == {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "Workload"}
    names = {m["name"] for m in resource["metrics"]}
    assert names == {"info", "created", "condition", "condition_time", "requeues", "evictions", "gpus"}
    assert {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]} in ksm["rbac"][
        "extraRules"]
    # The paths exist in the Workload CRD the platform installs (Kueue v0.19.2).
    crd = yaml.safe_load((ROOT / "blueprint/schemas/crds/kueue/kueue.x-k8s.io_workloads.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    schema = version["schema"]["openAPIV3Schema"]
    for metric in resource["metrics"]:
        path = metric["each"].get("gauge", {}).get("path") or []
        if path[:1] == ["metadata"]:
            continue  # object metadata, not in the CRD's schema
        node = schema
        for step in path:
            node = node["properties"][step] if "properties" in node else node["items"]["properties"][step]
        assert node, metric["name"]


def test_the_dashboard_answers_the_two_questions_with_the_runbooks_promql() -> None:
    graph = offline_run("prod-aws").graph
    (cm,) = [r.inputs for r in graph.of_type("kubernetes:core/v1:ConfigMap")
             if r.inputs["metadata"]["name"] == "gpu-cluster-jobs-dashboard"]
    dashboard = json.loads(cm["data"]["gpu-cluster-jobs.json"])
    panels = {p["title"]: p["targets"][0]["expr"] for p in dashboard["panels"] if p["type"] != "row"}
    assert panels["GPU-hours lost to failures this week, by reason"] == LOST_GPU_HOURS_EXPR
    assert panels["GPUs idle while their job waited on storage"] == IDLE_ON_STORAGE_EXPR
    assert panels["GPUs idle while their job waited on the network"] == IDLE_ON_NETWORK_EXPR
    runbook = (ROOT / "docs/runbooks.md").read_text()
    section = runbook.split("## job-telemetry", 1)[1].split("\n## ", 1)[0]
    for expr in (LOST_GPU_HOURS_EXPR, IDLE_ON_STORAGE_EXPR, IDLE_ON_NETWORK_EXPR):
        assert f"```promql\n{expr}\n```" in section
    import promql_parser

    for panel in dashboard["panels"]:
        if panel["type"] != "row":  # the serving view's heading (tests/inference/test_serving_telemetry.py)
            promql_parser.parse(panel["targets"][0]["expr"])
    recorded = set(rules(graph))
    for name in ("gpu_cluster:workload_queue_seconds", "gpu_cluster:workload_runtime_seconds",
                 "gpu_cluster:workload_admissions:increase1h_by_cluster_queue",
                 "gpu_cluster:workload_evictions:sum_by_namespace_reason",
                 "gpu_cluster:workload_requeues:sum_by_namespace",
                 "gpu_cluster:container_exits:sum_by_namespace_reason"):
        assert name in recorded
    # Every recording rule a panel reads exists.
    for expr in panels.values():
        for used in re.findall(r"gpu_cluster:[a-z0-9_:]+", expr):
            assert used in recorded, used


# --- rules ----------------------------------------------------------------------------------------------------------

def test_the_efa_exporter_image_must_be_pinned(prod_spec: dict[str, Any]) -> None:
    prod_spec["aws"]["telemetry"]["efaExporterImage"] = "111122223333.dkr.ecr.us-east-1.amazonaws.com/efa:latest"
    assert errors(prod_spec) == [
        f"{P}.aws.telemetry.efaExporterImage: '111122223333.dkr.ecr.us-east-1.amazonaws.com/efa:latest' is not "
        "pinned: give the EFA node exporter image you built as <repository>@sha256:<64 hex> (no published image has a "
        "digest anyone here verified) [rule: efa-exporter-image-digest]"]


def test_a_run_without_a_published_figure_needs_the_stacks() -> None:
    spec = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    del spec["acceptance"]["expected"]
    gcp_file = "stacks/Pulumi.prod-gcp.yaml"
    with pytest.raises(SpecError) as info:
        parse_spec(spec, gcp_file)
    assert str(info.value).splitlines() == [
        f"{gcp_file}: gpu-cluster:spec.acceptance.expected: node group h100 (a3-megagpu-8g): components/catalog/"
        "acceptance.yaml publishes no all_reduce figure for the per-node run (1 node); give the bus bandwidth the gate "
        "expects with its source: {nodeGroup: h100, nodes: 1, busbwGbps: <GB/s>, source: <your baseline or a published "
        "page>} [rule: acceptance-expected-figure]",
        f"{gcp_file}: gpu-cluster:spec.acceptance.expected: node group h100 (a3-megagpu-8g): components/catalog/"
        "acceptance.yaml publishes no all_reduce figure for the all_reduce over 16 nodes; give the bus bandwidth the "
        "gate expects with its source: {nodeGroup: h100, nodes: 16, busbwGbps: <GB/s>, source: <your baseline or a "
        "published page>} [rule: acceptance-expected-figure]"]


def test_a_multi_node_figure_stands_for_larger_runs_only() -> None:
    spec = raw_stack_config("prod-gcp")["gpu-cluster:spec"]
    spec["acceptance"]["expected"][1]["nodes"] = 17  # a 17-node figure does not stand for the 16-node run
    with pytest.raises(SpecError, match=r"the all_reduce over 16 nodes; .* \[rule: acceptance-expected-figure\]"):
        parse_spec(spec, "stacks/Pulumi.prod-gcp.yaml")
    spec["acceptance"]["expected"][1]["nodes"] = 2
    parse_spec(spec, "stacks/Pulumi.prod-gcp.yaml")


def test_an_expected_figure_must_name_a_node_group(prod_spec: dict[str, Any]) -> None:
    prod_spec["acceptance"]["expected"] = [{"nodeGroup": "h200", "nodes": 1, "busbwGbps": 460.0, "source": "ours"}]
    assert errors(prod_spec) == [
        f"{P}.acceptance.expected[0]: no node group is named h200: the figure would stand for no acceptance run (node "
        "groups: system, h100, cpu, l40s) [rule: acceptance-expected-run]"]


def test_no_team_may_own_the_records_prefix(prod_spec: dict[str, Any]) -> None:
    prod_spec["teams"][2]["name"] = "acceptance"
    assert f"{P}.teams[acceptance].name: team 'acceptance' would own the bucket prefix acceptance/, where the " \
           "acceptance gate writes its records through an identity of its own; rename the team [rule: " \
           "acceptance-records-prefix]" in errors(prod_spec)


def test_the_recorder_image_must_be_pinned(prod_spec: dict[str, Any]) -> None:
    prod_spec["acceptance"]["recorderImage"] = "public.ecr.aws/aws-cli/aws-cli:latest"
    assert errors(prod_spec) == [
        f"{P}.acceptance.recorderImage: 'public.ecr.aws/aws-cli/aws-cli:latest' is not pinned: give the recorder "
        "image as <repository>@sha256:<64 hex> [rule: acceptance-image-digest]"]


def test_every_new_rule_is_documented_in_the_spec_reference() -> None:
    reference = (ROOT / "docs/spec-reference.md").read_text()
    for key in ("efaExporterImage", "storageMetrics", "containerLogs", "retentionDays", "checkpointMetrics",
                "recordRetentionDays", "recorderImage", "busbwGbps"):
        assert key in reference, key
    assert Path(ROOT / "blueprint/schemas/stack-file.schema.json").read_text().count("efaExporterImage") >= 1
