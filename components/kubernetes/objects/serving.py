"""A served model's objects in its team's namespace: the engine's Deployment (vLLM, streaming the weights from the
stack's bucket), its ClusterIP Service, its PodDisruptionBudget and the service account its cloud identity is bound to.

Admission: the Deployment carries the team's LocalQueue (Kueue admits each replica's pod against the team's quota on
the model's node group; its pod template's nodeSelector names that group, so Kueue assigns that flavor and no other,
Kueue "Pod integration" and flavor assignment by node affinity) and the ``production`` WorkloadPriorityClass, so a
replica preempts the team's lower-priority training in its queue, never another team's. No PriorityClass (the team
priority policy refuses one). The pods carry the team's group (the team-gid policy) and pull from an allowed registry
(the spec's rule ``inference-image-registry``).

Private: the Service is ClusterIP (no load balancer, nothing outside the cluster), reached from the team's own
namespace (its allow-same-namespace NetworkPolicy) and scraped from monitoring.

Weights: vLLM's Run:ai Model Streamer (``--load-format runai_streamer``) reads ``s3://`` and ``gs://`` prefixes
directly (vLLM docs, "Loading models with Run:ai Model Streamer"; vllm/transformers_utils/runai_utils.py
SUPPORTED_SCHEMES), with the default credential chain (boto3: EKS Pod Identity's container credentials; GCS: the
metadata server, GKE Workload Identity): no FUSE mount, no copy on the node's disk, the tensors streamed concurrently
through a bounded host buffer (components/sizing/inference.py ``STREAMER_BUFFER_BYTES``) into GPU memory.
config.json and the tokenizer sit under the same prefix (vLLM pulls ``*.json`` and the tokenizer from it into a local
cache). Only safetensors are streamed.

Probes: vLLM opens its HTTP server, and so ``/health``, only once the weights are loaded (the Gateway API Inference
Extension's vLLM manifest, config/manifests/vllm/gpu-deployment.yaml at v1.5.0: "vLLM does not start the OpenAI server
(and hence make /health available) until models are loaded"), so the startup probe is the weights-loaded signal; it
allows twice the computed cold start, at least ten minutes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.kubernetes.objects.common import NODE_GROUP_LABEL, Manifest, meta
from components.sizing.inference import STREAMER_BUFFER_BYTES, shm_gib
from components.spec.inference import ServedModelSpec

SERVING_PORT = 8000  # vLLM's default (vllm serve --port)
HEALTH_PATH = "/health"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SERVING_PRIORITY = "production"  # objects/common.py PRIORITY_CLASSES: "Production training and serving"
MODEL_LABEL = "gpu-cluster/served-model"
# How long a replica may wait for a node, past its startup probe's allowance: the node autoscaler may first add it, and
# the Cluster Autoscaler gives a node up to 15 minutes to register (--max-node-provision-time, as objects/kueue.py
# PODS_READY_TIMEOUT_SCALE_UP counts it). Pulumi's wait for the rollout and the ServedModelDown alert count it.
NODE_PROVISION_S = 900
# The startup probe's period, and the least it allows a replica to load (a model whose cold start is not known).
STARTUP_PERIOD_S = 10
MIN_STARTUP_S = 600
# What an activation-dtype of the KV cache is as vLLM's --dtype takes it (fp8 is --kv-cache-dtype fp8 instead).
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class ServedModel:
    """One served model as the cluster runs it: its spec, and what the cloud and the node group decide."""

    spec: ServedModelSpec
    gid: int  # the team's POSIX group (the team-gid admission policy)
    bucket: Any  # the stack's bucket name (a str or an Output)
    scheme: str  # s3 or gs
    cpu: int  # cores the replica requests
    memory_gib: int  # memory it requests (and is limited to)
    cold_start_s: float | None  # from components/sizing/inference.py (None: not known)
    env: tuple[tuple[str, str], ...] = ()  # the cloud's (AWS_REGION for the S3 client)
    ready: tuple[Any, ...] = field(default=())  # the cloud identity's binding the pods wait for
    # Requests in flight per replica the autoscaler aims at (objects/autoscaling.py): the spec's, else the sequences
    # of the full context one replica's KV cache holds.
    requests_per_replica: int = 1
    # Behind the stack's gateway (inference.gateway): its InferencePool, endpoint picker and route
    # (objects/gateway.py).
    routed: bool = False
    # The node group of the team's CPU quota its endpoint picker runs on (components/spec/decisions.py picker_quota).
    picker_group: str | None = None

    @property
    def autoscaled(self) -> bool:
        """Whether KEDA scales it (replicas.min < replicas.max); otherwise the Deployment holds replicas.min."""
        return self.spec.replicas.min < self.spec.replicas.max

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def namespace(self) -> str:
        return self.spec.team

    @property
    def service_account(self) -> str:
        return serving_account_name(self.spec.name)


def serving_account_name(model: str) -> str:
    """The service account a model's replicas run as (bound to the read-only identity on its weights' prefix)."""
    return f"serve-{model}"


def startup_failure_threshold(cold_start_s: float | None) -> int:
    """Startup probe failures allowed: twice the cold start, at least :data:`MIN_STARTUP_S`, in probe periods."""
    budget = max(MIN_STARTUP_S, 2 * cold_start_s) if cold_start_s is not None else MIN_STARTUP_S
    return math.ceil(budget / STARTUP_PERIOD_S)


def startup_allowance_s(cold_start_s: float | None) -> int:
    """Seconds the startup probe lets a replica load before it is restarted."""
    return startup_failure_threshold(cold_start_s) * STARTUP_PERIOD_S


# From admission to the container's start: the image pull and the new node's GPU stack (as Kueue's base pods-ready
# timeout counts them, objects/kueue.py PODS_READY_TIMEOUT).
IMAGE_AND_STACK_S = 600


def serving_ready_allowance_s(model: ServedModel) -> int:
    """The longest a replica may take from Kueue's admission to ready: a node's boot (a replica past the floor, or on a
    replaced node), the image and the GPU stack, then its startup probe's allowance."""
    return NODE_PROVISION_S + IMAGE_AND_STACK_S + startup_allowance_s(model.cold_start_s)


def serving_labels(model: ServedModel, billing: Mapping[str, str]) -> dict[str, str]:
    """Billing labels (the team's), the model's name and the engine."""
    return {**billing, "app.kubernetes.io/name": model.spec.engine.name, "app.kubernetes.io/instance": model.name,
            MODEL_LABEL: model.name}


def selector(model: ServedModel) -> dict[str, str]:
    return {MODEL_LABEL: model.name}


def engine_args(spec: ServedModelSpec) -> list[str]:
    """vLLM's ``vllm serve`` arguments (vLLM docs, "vllm serve" engine arguments)."""
    args = ["$(MODEL_URI)", "--served-model-name", spec.name, "--port", str(SERVING_PORT),
            "--load-format", "runai_streamer",
            "--tensor-parallel-size", str(spec.tensor_parallel),
            "--pipeline-parallel-size", str(spec.pipeline_parallel),
            "--max-model-len", str(spec.context_tokens),
            "--gpu-memory-utilization", f"{spec.engine.gpu_memory_utilization:g}"]
    if spec.engine.kv_cache_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    else:
        args += ["--dtype", VLLM_DTYPE[spec.engine.kv_cache_dtype]]
    return args


def serving_deployment(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """The engine's Deployment: one GPU set per replica, pinned to its node group; ``replicas.min`` replicas, or, when
    autoscaled, no replica count at all: the HPA KEDA makes owns it (Kubernetes, "Horizontal Pod Autoscaling",
    migrating Deployments to autoscaling: a count in the applied object would reset the HPA's at every apply, and
    under server-side apply conflict with its field manager)."""
    spec = model.spec
    labels = serving_labels(model, billing)
    # Kueue reads the queue and the WorkloadPriorityClass from each pod's labels (its pod integration, which manages
    # a Deployment's pods one Workload each) as from the Deployment's.
    pod_labels = {**labels, QUEUE_LABEL: "default", PRIORITY_LABEL: SERVING_PRIORITY}
    gpus = spec.gpus_per_replica
    memory = f"{model.memory_gib}Gi"
    probe = {"httpGet": {"path": HEALTH_PATH, "port": SERVING_PORT}}
    env = [{"name": "WEIGHTS_BUCKET", "value": model.bucket},
           # Kubernetes expands $(WEIGHTS_BUCKET) in a later variable and $(MODEL_URI) in the arguments.
           {"name": "MODEL_URI", "value": f"{model.scheme}://$(WEIGHTS_BUCKET)/{spec.weights.prefix}"},
           # Nothing is fetched from the Hugging Face Hub (the tokenizer comes from the prefix), and no usage report
           # leaves the cluster (vLLM docs, "Usage Stats Collection": VLLM_NO_USAGE_STATS).
           {"name": "HF_HUB_OFFLINE", "value": "1"},
           {"name": "RUNAI_STREAMER_MEMORY_LIMIT", "value": str(STREAMER_BUFFER_BYTES)},
           {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
           *({"name": k, "value": v} for k, v in model.env)]
    container: Manifest = {
        "name": "engine",
        "image": spec.engine.image,
        "command": ["vllm", "serve"],
        "args": engine_args(spec),
        "env": env,
        "ports": [{"name": "http", "containerPort": SERVING_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": str(model.cpu), "memory": memory, "nvidia.com/gpu": gpus},
                      "limits": {"memory": memory, "nvidia.com/gpu": gpus}},
        "startupProbe": {**probe, "periodSeconds": STARTUP_PERIOD_S,
                         "failureThreshold": startup_failure_threshold(model.cold_start_s)},
        # Not so tight that a replica under load flaps: an unready admitted pod holds Kueue's admissions
        # (waitForPodsReady.blockAdmission, docs/inference.md).
        "readinessProbe": {**probe, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
        "livenessProbe": {**probe, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod: Manifest = {
        "serviceAccountName": model.service_account,
        "nodeSelector": {NODE_GROUP_LABEL: spec.node_group},
        "securityContext": {"supplementalGroups": [model.gid]},
        # Replicas on different nodes where there is room, so one node's loss takes one replica.
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                       "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {
                                           "matchLabels": selector(model)}}],
        # vLLM drains its in-flight requests on SIGTERM; the default 30 s cuts long generations.
        "terminationGracePeriodSeconds": 120,
        "containers": [container],
        # Tensor-parallel workers exchange through shared memory; memory-backed, counted in the pod's memory.
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib(gpus)}Gi"}}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": meta(model.name, model.namespace, labels={**labels, QUEUE_LABEL: "default",
                                                                PRIORITY_LABEL: SERVING_PRIORITY}),
        "spec": {
            **({} if model.autoscaled else {"replicas": spec.replicas.min}),
            "selector": {"matchLabels": selector(model)},
            # No surge: a new replica would need GPUs beyond the team's floor; one replica at a time is replaced.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": pod_labels}, "spec": pod},
        },
    }


def serving_service(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """The in-cluster endpoint (ClusterIP: nothing outside the cluster reaches it)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": meta(model.name, model.namespace, labels=serving_labels(model, billing)),
            "spec": {"type": "ClusterIP", "selector": selector(model),
                     "ports": [{"name": "http", "port": SERVING_PORT, "targetPort": "http", "protocol": "TCP"}]}}


def serving_disruption_budget(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """At most one replica drained at a time (node upgrades, scale-down)."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": meta(model.name, model.namespace, labels=serving_labels(model, billing)),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(model)}}}


def serving_weights_config(model: ServedModel, billing: Mapping[str, str]) -> Manifest:
    """The weights' URI and the cloud's environment for reading it (AWS_REGION on EKS), for what else of the team reads
    the model's files with its identity (the acceptance run's tokenizer copy, objects/inference_perf.py, takes them
    as its environment): the bucket is known only once the stack has created it."""
    from components.kubernetes.objects.inference_perf import weights_config_name

    uri = f"{model.scheme}://{{}}/{model.spec.weights.prefix}"
    bucket = model.bucket
    value = bucket.apply(uri.format) if hasattr(bucket, "apply") else uri.format(bucket)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta(weights_config_name(model.name), model.namespace, labels=serving_labels(model, billing)),
            "data": {"WEIGHTS_URI": value, **dict(model.env)}}


def serving_objects(model: ServedModel, billing: Mapping[str, str]) -> Sequence[Manifest]:
    """Every object of one served model, the account first (what ``blueprint manifests`` and the tests read); its
    scrape is objects/serving_telemetry.py's."""
    from components.kubernetes.objects.tenancy import service_account

    account = service_account(model.service_account, model.namespace, billing,
                              f"read {model.scheme}://<bucket>/{model.spec.weights.prefix} (the weights of "
                              f"{model.name}) and nothing else")
    return [account, serving_deployment(model, billing), serving_service(model, billing),
            serving_disruption_budget(model, billing), serving_weights_config(model, billing)]
