"""A served model with replicas.min < max follows its demand: KEDA (pinned) scales its Deployment on the engine's
requests in flight against what one replica's KV cache holds, reading the stack's own Prometheus; the Deployment
leaves the count to the HPA; the node group grows under the node autoscaler; and what cannot grow is refused or
noted at load."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import promql_parser
import pytest

from blueprint.graph.model import GraphResource, ResourceGraph
from components.catalog.charts import load_charts
from components.kubernetes.objects.autoscaling import HPA_TOLERANCE, SCALE_DOWN_MAX_S
from components.kubernetes.objects.serving import NODE_PROVISION_S
from components.node_template import AUTOSCALE_TAG
from components.sizing.inference import cold_start, model_memory
from components.spec import SpecError, parse_spec
from components.spec.decisions import served_group
from components.spec.notes import spec_notes
from tests.conftest import offline_run, run_spec, stack
from tests.inference.specs import aws_serving_spec, gcp_serving_spec
from tests.inference.test_serving_objects import STACKS, served
from tests.k8s_checks import validate_crd_object

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
RELEASE = "kubernetes:helm.sh/v3:Release"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def _scaler(graph: ResourceGraph, model: str) -> GraphResource:
    (found,) = [r for r in graph.of_type(SCALED_OBJECT) if r.name == f"serving-{model}-scaler"]
    return found


def _deployment(graph: ResourceGraph, model: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in graph.of_type(DEPLOYMENT) if r.name == f"serving-{model}-deployment"]
    return found


@pytest.mark.parametrize("name", STACKS)
def test_keda_scales_the_deployment_between_its_floor_and_ceiling(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    scaler = _scaler(graph, model.name).inputs
    validate_crd_object(copy.deepcopy(scaler))
    spec = scaler["spec"]
    assert scaler["metadata"]["namespace"] == model.team
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": model.name}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (model.replicas.min, model.replicas.max) == (2, 4)
    # The Deployment states no count: the HPA owns it (an applied count would reset it at every pulumi up).
    assert "replicas" not in _deployment(graph, model.name)["spec"]


@pytest.mark.parametrize("name", STACKS)
def test_the_trigger_is_the_engines_requests_in_flight_against_one_replicas_kv_cache(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    (trigger,) = _scaler(graph, model.name).inputs["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    # Running (the batch) and waiting (the queue) of this model's replicas, summed: one series.
    parsed = promql_parser.parse(meta["query"])
    assert isinstance(parsed, promql_parser.AggregateExpr) and str(parsed.op) == "sum"
    assert 'vllm:num_requests_running|vllm:num_requests_waiting' in meta["query"]
    assert f'namespace="{model.team}"' in meta["query"] and f'served_model="{model.name}"' in meta["query"]
    # Per replica: the full-context sequences its KV cache holds, as sizing computes it (25 on one L40S for 8B bf16),
    # as a target the HPA's tolerance does not swallow: the first request past it is outside the tolerance.
    _, facts = served_group(stack(name).spec, model)
    capacity = model_memory(model, facts.gpu_memory_gib_each or 0).max_concurrency
    target = float(meta["threshold"])
    assert capacity / target > 1 + HPA_TOLERANCE - 0.01 and (capacity + 1) / target > 1 + HPA_TOLERANCE
    assert capacity / target <= 1 + HPA_TOLERANCE
    if name == "prod-aws":
        assert capacity == 25 and meta["threshold"] == "22.73"
    annotations = _scaler(graph, model.name).inputs["metadata"]["annotations"]
    assert annotations["gpu-cluster/requests-per-replica"] == str(capacity)


@pytest.mark.parametrize("name", STACKS)
def test_keda_reads_the_prometheus_that_scrapes_the_engine(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    address = _scaler(graph, model.name).inputs["spec"]["triggers"][0]["metadata"]["serverAddress"]
    (prometheus,) = [r.inputs for r in graph.of_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]
    # kube-prometheus-stack names its Prometheus Service <release>-prometheus, port 9090, in the release's namespace.
    assert address == f"http://{prometheus['name']}-prometheus.{prometheus['namespace']}.svc:9090"
    # The label the query selects on is the one the PodMonitor writes.
    (monitor,) = [r.inputs for r in graph.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
                  if r.name == f"serving-{model.name}-metrics"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["relabelings"][0]["targetLabel"] == "served_model"


@pytest.mark.parametrize("name", STACKS)
def test_keda_is_pinned_and_installed_before_the_scaled_object(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    (keda,) = [r for r in graph.of_type(RELEASE) if r.inputs["name"] == "keda"]
    pin = load_charts()["keda"]
    assert (keda.inputs["chart"], keda.inputs["version"], keda.inputs["namespace"]) == ("keda", pin.version, "keda")
    assert keda.inputs["repositoryOpts"]["repo"] == "https://kedacore.github.io/charts"
    # Its CRDs stay if the release goes (they would take every ScaledObject and HPA with them).
    assert keda.inputs["values"]["crds"]["additionalAnnotations"] == {"helm.sh/resource-policy": "keep"}
    scaler = _scaler(graph, model.name)
    deployment = next(r for r in graph.of_type(DEPLOYMENT) if r.name == f"serving-{model.name}-deployment")
    assert keda.urn in scaler.dependencies and deployment.urn in scaler.dependencies
    # keda is a platform namespace: default-deny egress with the platform's allows, not a team's.
    assert any(r.inputs["metadata"]["name"] == "default-deny-egress" and r.inputs["metadata"]["namespace"] == "keda"
               for r in graph.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy"))


def test_scaling_down_waits_as_long_as_a_replica_takes_to_serve_again() -> None:
    spec = gcp_serving_spec()
    run = run_spec(spec, "serve")
    parsed = parse_spec(spec, "stacks/Pulumi.serve.yaml")
    assert parsed.inference is not None
    model = parsed.inference.models[0]
    seconds = cold_start(model).seconds
    assert seconds is not None  # 400 MB/s and a 60 s start: known
    down = _scaler(run.graph, model.name).inputs["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"][
        "scaleDown"]
    assert down["stabilizationWindowSeconds"] == min(SCALE_DOWN_MAX_S, -(-(NODE_PROVISION_S + seconds) // 1))
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 60}]


def test_a_measured_concurrency_per_replica_replaces_the_kv_cache_default() -> None:
    spec = aws_serving_spec()
    spec["inference"]["models"][0]["autoscaling"] = {"requestsPerReplica": 48}
    run = run_spec(spec, "serve")
    (trigger,) = _scaler(run.graph, "llama-8b").inputs["spec"]["triggers"]
    assert trigger["metadata"]["threshold"] == "43.64"  # 48 / 1.1, rounded up


def test_a_fixed_model_keeps_its_count_and_no_autoscaler_is_installed() -> None:
    spec = aws_serving_spec()
    model = spec["inference"]["models"][0]
    model["replicas"] = {"min": 3, "max": 3}
    model["objectives"].update(concurrency=48)
    graph = run_spec(spec, "serve").graph
    assert not graph.of_type(SCALED_OBJECT)
    assert not [r for r in graph.of_type(RELEASE) if r.inputs["name"] == "keda"]
    assert _deployment(graph, "llama-8b")["spec"]["replicas"] == 3


def test_the_group_grows_under_the_node_autoscaler() -> None:
    aws = offline_run("prod-aws").graph
    model = served("prod-aws")
    # The Cluster Autoscaler discovers the groups tagged for it: the served model's group is one.
    tagged = {r.name for r in aws.of_type("aws:autoscaling/tag:Tag") if r.inputs["tag"]["key"] == AUTOSCALE_TAG}
    assert f"nodegroup-{model.node_group}-asg-autoscale" in tagged, tagged
    gcp = offline_run("prod-gcp").graph
    gmodel = served("prod-gcp")
    (pool,) = [r.inputs for r in gcp.of_type("gcp:container/nodePool:NodePool")
               if r.inputs["name"] == gmodel.node_group]
    assert pool["autoscaling"]["totalMaxNodeCount"] == gmodel.replicas.max
    assert pool["autoscaling"]["totalMinNodeCount"] == gmodel.replicas.min


def test_a_ceiling_past_the_teams_quota_is_noted() -> None:
    spec = gcp_serving_spec()
    next(t for t in spec["teams"] if t["name"] == "applied")["quotas"][-1].update(gpus=4)
    notes = [n for n in spec_notes(parse_spec(spec, "stacks/Pulumi.serve.yaml"), datetime(2026, 12, 3, tzinfo=UTC))
             if "Kueue admits the replicas past its quota" in n]
    assert len(notes) == 1 and notes[0].startswith("note: gpu-cluster:spec.inference.models[llama-8b].replicas.max:")
    assert "take 8 GPUs and team 'applied' has 4" in notes[0]


def test_the_preview_shows_the_replicas_gpus_and_money_at_each_end() -> None:
    from blueprint.preview.render import render_preview

    run = offline_run("prod-aws")
    text = render_preview(run.graph, stack("prod-aws").spec, "stacks/Pulumi.prod-aws.yaml", run.outputs)
    line = next(li for li in text.splitlines() if "scaled by KEDA" in li)
    assert "replicas: 2 to 4" in line and "more than 25 per replica adds one" in line


def test_kueue_gives_a_replica_its_boot_pull_and_load_before_evicting_it() -> None:
    import yaml

    from components.kubernetes.objects.serving import IMAGE_AND_STACK_S, STARTUP_PERIOD_S, startup_failure_threshold

    for name in STACKS:
        graph = offline_run(name).graph
        (kueue,) = [r.inputs for r in graph.of_type(RELEASE) if r.inputs["name"] == "kueue"]
        config = yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])
        timeout_s = int(config["waitForPodsReady"]["timeout"].rstrip("m")) * 60
        model = served(name)
        cold = cold_start(model).seconds
        # A replica past the floor: a node's boot, the image and the GPU stack, then its startup probe's allowance.
        assert timeout_s >= NODE_PROVISION_S + IMAGE_AND_STACK_S + startup_failure_threshold(cold) * STARTUP_PERIOD_S
        assert timeout_s == 35 * 60  # the shipped models' cold start is not measured: the probe allows 10 minutes


def test_two_models_on_one_group_are_sized_together() -> None:
    spec = gcp_serving_spec()
    second = copy.deepcopy(spec["inference"]["models"][0])
    second.update(name="llama-8b-b")
    second["weights"]["prefix"] = "models/llama-8b-b/"
    spec["inference"]["models"].append(second)
    try:
        parse_spec(spec, "stacks/Pulumi.serve.yaml")
        found: list[str] = []
    except SpecError as err:
        found = [f"{i.rule} {i.path}" for i in err.issues]
    # Each alone fits the 8 nodes (4 replicas of 2 GPUs each); both at their ceilings need 16 GPUs of the 16: fits.
    assert not [f for f in found if f.startswith("inference-group-capacity")], found
    second["replicas"]["max"] = 5
    with pytest.raises(SpecError) as err:
        parse_spec(spec, "stacks/Pulumi.serve.yaml")
    assert ("inference-group-capacity", "gpu-cluster:spec.inference.models[llama-8b-b].replicas.max") in [
        (i.rule, i.path) for i in err.value.issues]


def test_a_kubernetes_minor_keda_is_not_tested_on_is_noted() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)

    def noted(spec: dict[str, Any]) -> list[str]:
        return [n for n in spec_notes(parse_spec(spec, "stacks/Pulumi.serve.yaml", now=now), now) if "KEDA" in n]

    spec = aws_serving_spec()
    assert noted(spec) == []  # 1.35: tested
    spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.36"
    (note,) = noted(spec)
    assert note.startswith("note: gpu-cluster:spec.aws.controlPlane.kubernetesVersion: KEDA 2.20")
    assert "tested on Kubernetes 1.33 to 1.35" in note
    spec["inference"]["models"][0]["replicas"] = {"min": 4, "max": 4}  # nothing autoscaled: nothing to say
    assert noted(spec) == []


@pytest.mark.parametrize("name", STACKS)
def test_an_autoscaler_that_cannot_read_its_signal_is_alerted(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    (rule,) = [r.inputs for r in graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")]
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]
              if r.get("labels", {}).get("served_model") == model.name and "alert" in r}
    alert = alerts["ServedModelAutoscalerFailing"]
    promql_parser.parse(alert["expr"])
    # KEDA's own counter for this ScaledObject, its namespace label as scraped from namespace keda.
    assert f'keda_scaled_object_errors_total{{exported_namespace="{model.team}", scaledObject="{model.name}"}}' \
        in alert["expr"]
    assert alert["labels"]["namespace"] == model.team
    assert alert["annotations"]["runbook_url"].endswith("#served-model-saturated")
    # The chart's ServiceMonitor scrapes the operator (the values turn it on).
    (keda,) = [r.inputs for r in graph.of_type(RELEASE) if r.inputs["name"] == "keda"]
    assert keda["values"]["prometheus"]["operator"] == {"enabled": True, "serviceMonitor": {"enabled": True}}
