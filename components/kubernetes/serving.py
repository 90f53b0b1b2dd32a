"""The served models on the cluster: one component per ``inference.models`` entry, holding its account, Deployment,
Service and PodDisruptionBudget (components/kubernetes/objects/serving.py) and its engine's scrape
(objects/serving_telemetry.py), each after its team's namespace, Kueue (whose webhook gates the Deployment's pods),
the cloud identity that reads its weights and, for the scrape, Prometheus's CRDs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi

from components import provenance
from components.catalog.charts import load_charts
from components.kubernetes import objects as obj
from components.kubernetes.apply import apply, release
from components.kubernetes.inputs import PlatformInputs
from components.kubernetes.namespaces import system_namespace
from components.kubernetes.objects.autoscaling import KEDA_NAMESPACE, KEDA_RELEASE, keda_values, scaled_object
from components.kubernetes.objects.serving import (
    NODE_PROVISION_S,
    ServedModel,
    serving_objects,
    startup_allowance_s,
)
from components.kubernetes.objects.serving_telemetry import objective_annotations, pod_monitor
from components.provenance import from_spec, spec_path
from components.sizing.inference import cold_start, model_memory, replica_shape
from components.spec import ClusterSpec
from components.spec.decisions import served_group


class ServedModelComponent(pulumi.ComponentResource):
    """One served model's objects in its team's namespace."""

    def __init__(self, name: str, model: ServedModel, billing: Mapping[str, str], after: list[pulumi.Resource],
                 prometheus: pulumi.Resource, nodes: Sequence[pulumi.Resource] = (),
                 autoscaler: pulumi.Resource | None = None, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:compute:ServedModel", name, provenance.props(), opts)
        first = pulumi.ResourceOptions(parent=self, depends_on=after)
        account_manifest, deployment, service, budget, weights = serving_objects(model, billing)
        account = apply(f"{name}-account", account_manifest, first)
        # pulumi-kubernetes waits for the rollout (10 minutes by default): a new node's boot, then each replica's load
        # in turn (Kueue admits one at a time while an admitted one is not ready: waitForPodsReady.blockAdmission).
        wait = model.spec.replicas.min * startup_allowance_s(model.cold_start_s) + NODE_PROVISION_S
        # Its objectives, which the stack's alerts watch (the policy inference-objective-alerted checks they do).
        deployment["metadata"]["annotations"] = {"pulumi.com/timeoutSeconds": str(wait),
                                                 **objective_annotations(model)}
        # After the GPU nodes' group where the provider does not wait for it (GKE: inputs.gpu_node_dependencies).
        made = apply(f"{name}-deployment", deployment,
                     pulumi.ResourceOptions(parent=self, depends_on=[account, *after, *model.ready, *nodes]))
        if model.autoscaled:
            # After KEDA's CRDs and webhook, and after the Deployment it scales: the HPA KEDA makes needs its target's
            # scale subresource.
            assert autoscaler is not None, "an autoscaled model needs KEDA"
            apply(f"{name}-scaler", scaled_object(model, billing),
                  pulumi.ResourceOptions(parent=self, depends_on=[*after, autoscaler, made]))
        apply(f"{name}-service", service, first)
        apply(f"{name}-pdb", budget, first)
        apply(f"{name}-weights", weights, first)
        apply(f"{name}-metrics", pod_monitor(model, billing),
              pulumi.ResourceOptions(parent=self, depends_on=[*after, prometheus]))
        self.register_outputs({})


class ServingAutoscaler(pulumi.ComponentResource):
    """KEDA, which scales the autoscaled served models (objects/autoscaling.py), in a namespace of its own."""

    def __init__(self, name: str, inputs: PlatformInputs, prometheus: pulumi.Resource,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:ServingAutoscaler", name, provenance.props(), opts)
        ns = system_namespace(self, KEDA_NAMESPACE, inputs)
        # After Prometheus's CRDs (the operator's ServiceMonitor); the release waits for KEDA's webhook and metrics
        # server, so the ScaledObjects after it are validated and served.
        self.release = release(KEDA_RELEASE, load_charts()["keda"], KEDA_NAMESPACE, keda_values(),
                               pulumi.ResourceOptions(parent=self, depends_on=[ns, prometheus]))
        self.register_outputs({})


def build_serving(inputs: PlatformInputs, kueue: pulumi.Resource, namespaces: Mapping[str, pulumi.Resource],
                  prometheus: pulumi.Resource, opts: pulumi.ResourceOptions) -> None:
    """A component per served model, traced to its ``inference.models`` entry; KEDA first when one is autoscaled."""
    teams = {t.name: t for t in inputs.teams}
    autoscaler = None
    scaled = [i for i, m in enumerate(inputs.serving) if m.autoscaled]
    if scaled:
        with from_spec(spec_path("inference", "models", scaled[0], "replicas")):
            autoscaler = ServingAutoscaler("serving-autoscaler", inputs, prometheus, opts=opts).release
    for i, model in enumerate(inputs.serving):
        team = teams[model.namespace]
        with from_spec(spec_path("inference", "models", i)):
            ServedModelComponent(f"serving-{model.name}", model, obj.team_labels(team, inputs.labels),
                                 [kueue, namespaces[team.name]], prometheus, inputs.gpu_node_dependencies,
                                 autoscaler, opts=opts)


def served_models(spec: ClusterSpec, *, bucket: object, scheme: str, env: tuple[tuple[str, str], ...] = (),
                  ready: Mapping[str, tuple[pulumi.Resource, ...]] | None = None) -> tuple[ServedModel, ...]:
    """The stack's served models as the cluster runs them (a validated spec: each group exists, with GPUs)."""
    if spec.inference is None:
        return ()
    teams = {t.name: t for t in spec.teams}
    out = []
    for model in spec.inference.models:
        _, facts = served_group(spec, model)
        cpu, memory = replica_shape(model.gpus_per_replica, facts.gpu_count, facts.vcpu.value, facts.memory_gib.value)
        per_replica = model.autoscaling.requests_per_replica or max(
            1, model_memory(model, facts.gpu_memory_gib_each or 0).max_concurrency)
        out.append(ServedModel(spec=model, gid=teams[model.team].posix_gid, bucket=bucket, scheme=scheme, cpu=cpu,
                               memory_gib=memory, cold_start_s=cold_start(model).seconds, env=env,
                               ready=(ready or {}).get(model.name, ()), requests_per_replica=per_replica))
    return tuple(out)
