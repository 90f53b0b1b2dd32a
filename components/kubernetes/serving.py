"""The served models on the cluster: one component per ``inference.models`` entry, holding its account, Deployment,
Service and PodDisruptionBudget (components/kubernetes/objects/serving.py) and its engine's scrape
(objects/serving_telemetry.py), each after its team's namespace, Kueue (whose webhook gates the Deployment's pods),
the cloud identity that reads its weights and, for the scrape, Prometheus's CRDs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components import provenance
from components.catalog.charts import load_charts
from components.kubernetes import objects as obj
from components.kubernetes.apply import apply, object_name, release
from components.kubernetes.inputs import PlatformInputs
from components.kubernetes.namespaces import system_namespace
from components.kubernetes.objects.autoscaling import KEDA_NAMESPACE, KEDA_RELEASE, keda_values, scaled_object
from components.kubernetes.objects.gateway import (
    GATEWAY_NAMESPACE,
    ServingGateway,
    gateway_network_policies,
    gateway_object,
    http_route,
    inference_pool,
    picker_objects,
)
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
from components.spec.decisions import picker_quota, served_group
from components.spec.inference import GatewaySpec


class ServedModelComponent(pulumi.ComponentResource):
    """One served model's objects in its team's namespace."""

    def __init__(self, name: str, model: ServedModel, billing: Mapping[str, str], after: list[pulumi.Resource],
                 prometheus: pulumi.Resource, nodes: Sequence[pulumi.Resource] = (),
                 autoscaler: pulumi.Resource | None = None, routing: Routing | None = None,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
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
        if routing is not None:
            self._route(name, model, billing, after, routing)
        self.register_outputs({})

    def _route(self, name: str, model: ServedModel, billing: Mapping[str, str], after: list[pulumi.Resource],
               routing: Routing) -> None:
        """The model behind the gateway: its endpoint picker, its InferencePool (after the CRD), the cloud's objects on
        the pool (GKE: health check, backend timeout) and its HTTPRoute (after the Gateway)."""
        with_crds = pulumi.ResourceOptions(parent=self, depends_on=[*after, *routing.component.crds])
        pool = apply(f"{name}-pool", inference_pool(model, billing), with_crds)
        # After its pool: the picker watches it from its start, and without the pool's CRD it restarts in a loop.
        after_pool = pulumi.ResourceOptions(parent=self, depends_on=[*after, pool])
        for m in picker_objects(model, routing.spec, billing):
            apply(f"{name}-picker-{str(m['kind']).lower()}", m, after_pool)
        cloud = routing.gateway.pool_objects(model.name, model.namespace, billing) if routing.gateway.pool_objects \
            else ()
        for m in cloud:
            apply(object_name(name, m), m, pulumi.ResourceOptions(parent=self, depends_on=[*after, pool]))
        apply(f"{name}-route", http_route(model, routing.gateway, billing),
              pulumi.ResourceOptions(parent=self, depends_on=[*after, pool, routing.component.gateway]))


class InferenceGateway(pulumi.ComponentResource):
    """The served models' private Gateway (objects/gateway.py) in its own namespace, with what the cloud's class needs
    first: the Gateway API and InferencePool CRDs where the cluster has none (EKS), the gateway controller's charts
    (EKS: agentgateway), the class's parameters, the cloud's address and network (GKE: proxy-only subnet, firewall).

    Attributes:
        crds: what a route or a pool waits for (the CRDs' manifests, the controller's releases).
        gateway: the Gateway (the routes attach to it).
    """

    def __init__(self, name: str, inputs: PlatformInputs, gateway: ServingGateway,
                 namespaces: Mapping[str, pulumi.Resource], opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:InferenceGateway", name, provenance.props(), opts)
        # Kept when the gateway is removed (retain_on_delete reaches the CRDs, the ConfigFiles' children): deleting a
        # CRD deletes every object of its kind in the cluster, the teams' own routes and pools with the stack's.
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        crds: list[pulumi.Resource] = [k8s.yaml.v2.ConfigFile(f"{name}-{file_name}", file=source, opts=keep)
                                       for file_name, source in gateway.crd_manifests]
        charts = load_charts()
        after: list[pulumi.Resource] = list(crds)
        controller_ns = {r.namespace for r in gateway.releases}
        controllers = {ns: system_namespace(self, ns, inputs) for ns in sorted(controller_ns)}
        for r in gateway.releases:  # in order: a controller's CRD chart, then the controller
            after.append(release(r.release, charts[r.chart], r.namespace, r.values,
                                 pulumi.ResourceOptions(parent=self, depends_on=[controllers[r.namespace], *after,
                                                                                 *r.ready],
                                                        retain_on_delete=r.keep or None)))
        # What a pool and its cloud objects wait for: the CRDs and controller, and the cloud's side (GKE: the cluster
        # with its Gateway API on, which installs the CRDs; the network).
        self.crds = [*after, *gateway.ready]
        ns = system_namespace(self, GATEWAY_NAMESPACE, inputs)
        waits: list[pulumi.Resource] = [ns, *self.crds]
        if gateway.parameters is not None:
            waits.append(apply(f"{name}-parameters", gateway.parameters,
                               pulumi.ResourceOptions(parent=self, depends_on=list(waits))))
        self.gateway = apply(f"{name}-gateway", gateway_object(gateway, inputs.labels),
                             pulumi.ResourceOptions(parent=self, depends_on=waits))
        # Each team namespace's paths: every team may call the gateway; a serving team's replicas and pickers admit it.
        serving = {m.namespace for m in inputs.serving}
        for team in inputs.teams:
            for m in gateway_network_policies(team.name, gateway, team.name in serving):
                apply(object_name(name, m), m, pulumi.ResourceOptions(parent=self, depends_on=[namespaces[team.name]]))
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


@dataclass(frozen=True)
class Routing:
    """What a served model's route needs: the gateway's spec, the cloud's gateway and its component."""

    spec: GatewaySpec
    gateway: ServingGateway
    component: InferenceGateway


def build_serving(inputs: PlatformInputs, kueue: pulumi.Resource, namespaces: Mapping[str, pulumi.Resource],
                  prometheus: pulumi.Resource, opts: pulumi.ResourceOptions) -> None:
    """A component per served model, traced to its ``inference.models`` entry; KEDA first when one is autoscaled, and
    the gateway (with each team namespace's paths to it) when the stack has one."""
    teams = {t.name: t for t in inputs.teams}
    routing = None
    gateway_spec = inputs.gateway_spec
    if inputs.serving_gateway is not None and gateway_spec is not None:
        with from_spec(spec_path("inference", "gateway")):
            component = InferenceGateway("inference-gateway", inputs, inputs.serving_gateway, namespaces, opts=opts)
        routing = Routing(gateway_spec, inputs.serving_gateway, component)
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
                                 autoscaler, routing, opts=opts)


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
                               ready=(ready or {}).get(model.name, ()), requests_per_replica=per_replica,
                               routed=spec.inference.gateway is not None,
                               picker_group=quota.node_group if (quota := picker_quota(teams[model.team])) else None))
    return tuple(out)

