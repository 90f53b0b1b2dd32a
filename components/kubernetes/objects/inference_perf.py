"""A served model's acceptance run: inference-perf (kubernetes-sigs/inference-perf, pinned by digest and release) from a
client pod of the owning team to the model's replicas, at its objectives' concurrency and request shape, printing a
record that ``blueprint inference check`` judges against the objectives.

Not part of ``pulumi up``: the team's namespace is managed by Kueue (``manageJobsWithoutQueueName``), which admits any
Job there as soon as it exists, so a Job in the stack would benchmark the model at every apply. ``blueprint inference
benchmark <stack>`` writes the ConfigMap and the Job; the team submits them when it wants a run (examples/workloads
holds each production stack's).

How it runs (inference-perf v0.6.1: docs/config.md, inference_perf/config/loadgen/config.py ``ConcurrentLoadStage``,
inference_perf/config/common.py ``Distribution``, its Dockerfile's ``python inference_perf/main.py --config_file``):

- load ``concurrent``: ``concurrency_level`` = the objectives' concurrency, ``num_requests`` = that times
  ``requestsPerClient``; api ``completion`` with streaming (time to first token and per output token are measured per
  request); prompts of ``promptTokens`` (data ``random``, a fixed length) and ``outputTokens`` generated each
  (``ignore_eos``); a report of the summary only, with the objectives' percentile among its percentiles;
- the tokenizer inference-perf counts tokens with is the model's own, copied by an init container from the weights'
  prefix with the engine's image and the same read-only identity the replicas use (service account serve-<model>),
  through the Run:ai streamer's ``pull_files`` (the call vLLM makes for a model's config and tokenizer,
  vllm/transformers_utils/runai_utils.py ``ObjectStorageModel.pull_files``), the weights themselves left out;
- the target is the real path of a client's request: the gateway's route (``http://<gateway>/<team>/<model>``, through
  the proxy and the model's endpoint picker: the team's allow-inference-gateway-egress NetworkPolicy) where the stack
  has one, else the model's ClusterIP Service (the team's own namespace: its allow-same-namespace NetworkPolicy);
- the record: the summary report, the stack, model, engine release and image, group, instance type and GPU, the load
  and the start and end times, printed between two marker lines in the pod's log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from components.kubernetes.objects.common import Manifest, meta
from components.kubernetes.objects.gateway import route_path
from components.kubernetes.objects.serving import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SERVING_PORT,
    ServedModel,
    serving_account_name,
)
from components.spec.inference import BenchmarkSpec, ServedModelSpec

RECORD_BEGIN = "=== gpu-cluster inference record ==="
RECORD_END = "=== end of gpu-cluster inference record ==="
RECORD_KIND = "gpu-cluster/inference-record"
REPORTS_DIR = "/reports"
CONFIG_DIR = "/config"
TOKENIZER_DIR = "/tokenizer"
BENCHMARK_PRIORITY = "standard"  # objects/common.py PRIORITY_CLASSES: a benchmark preempts no training
WORKERS = 2  # inference-perf load workers (processes); the pod requests as many cores
# What the init container leaves out of the weights' prefix: the tensors (vLLM's own ignore list for a model pulled
# from object storage).
WEIGHT_PATTERNS = ["*.safetensors", "*.bin", "*.pt", "*.pth", "*.tensors"]


def benchmark_name(model: str) -> str:
    """The ConfigMap and the Job of a model's acceptance run."""
    return f"inference-perf-{model}"


def weights_config_name(model: str) -> str:
    """The ConfigMap of the model's weights' URI and the cloud's variables for reading it (created with the model:
    objects/serving.py), the run's tokenizer copy's environment."""
    return f"{model}-weights"


def service_url(spec: ServedModelSpec) -> str:
    """The model's in-cluster endpoint."""
    return f"http://{spec.name}.{spec.team}.svc:{SERVING_PORT}"


def client_url(spec: ServedModelSpec, gateway_host: str | None) -> str:
    """Where a client of the model sends its requests: the gateway's route (``http://<gateway>/<team>/<model>``)
    where the stack has one, else the model's Service."""
    if gateway_host is None:
        return service_url(spec)
    return f"http://{gateway_host}{route_path(spec.team, spec.name)}"


def inference_perf_config(spec: ServedModelSpec, bench: BenchmarkSpec, gateway_host: str | None = None) -> Manifest:
    """inference-perf's configuration for one run against ``spec`` at its objectives."""
    o = spec.objectives

    def fixed(tokens: int) -> Manifest:
        return {"type": "fixed", "min": tokens, "max": tokens, "mean": tokens, "std_dev": 0}

    return {
        "api": {"type": "completion", "streaming": True},
        "server": {"type": "vllm", "model_name": spec.name, "base_url": client_url(spec, gateway_host),
                   "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": TOKENIZER_DIR},
        "data": {"type": "random", "input_distribution": fixed(o.prompt_tokens),
                 "output_distribution": fixed(o.output_tokens)},
        "load": {"type": "concurrent", "num_workers": WORKERS,
                 "worker_max_concurrency": max(1, -(-o.concurrency // WORKERS)),
                 "stages": [{"concurrency_level": o.concurrency,
                             "num_requests": o.concurrency * bench.requests_per_client}]},
        "report": {"request_lifecycle": {"summary": True, "per_stage": False, "per_request": False,
                                         "percentiles": sorted({50, 90, 95, 99, o.percentile})}},
        "storage": {"local_storage": {"path": REPORTS_DIR}},
    }


RECORD_SCRIPT = f"""import datetime, json, os
record = json.load(open("{CONFIG_DIR}/record.json"))
record["startedAt"] = os.environ["STARTED_AT"]
record["finishedAt"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
record["report"] = json.load(open("{REPORTS_DIR}/summary_lifecycle_metrics.json"))
print("{RECORD_BEGIN}")
print(json.dumps(record, sort_keys=True))
print("{RECORD_END}")
"""


def record_facts(stack: str, spec: ServedModelSpec, bench: BenchmarkSpec, instance_type: str, gpu: str,
                 gateway_host: str | None = None) -> Manifest:
    """What the record says beside the report: what was measured, on what, under which load."""
    o = spec.objectives
    return {"kind": RECORD_KIND, "version": 1, "stack": stack, "model": spec.name, "team": spec.team,
            "nodeGroup": spec.node_group, "instanceType": instance_type, "gpu": gpu,
            "replicas": spec.replicas.min,
            "engine": {"name": spec.engine.name, "version": spec.engine.version, "image": spec.engine.image},
            "tool": {"name": "inference-perf", "version": bench.version, "image": bench.image},
            "path": "service" if gateway_host is None else "gateway", "target": client_url(spec, gateway_host),
            "load": {"type": "concurrent", "concurrency": o.concurrency,
                     "requests": o.concurrency * bench.requests_per_client, "promptTokens": o.prompt_tokens,
                     "outputTokens": o.output_tokens},
            # The driver is the node's, which a client pod does not see: the group's NCCL records carry it.
            "driver": None}


def benchmark_objects(model: ServedModel, bench: BenchmarkSpec, facts: Mapping[str, Any],
                      billing: Mapping[str, str], gateway_host: str | None = None) -> Sequence[Manifest]:
    """The run's ConfigMap (inference-perf's config, the record's facts and script) and its Job, in the team's
    namespace, queued in its LocalQueue at the standard priority."""
    spec = model.spec
    name = benchmark_name(spec.name)
    labels = {**billing, "app.kubernetes.io/name": "inference-perf", "app.kubernetes.io/instance": spec.name}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, model.namespace, labels=labels),
              "data": {"config.yml": yaml.safe_dump(inference_perf_config(spec, bench, gateway_host),
                                                    sort_keys=False),
                       "record.json": json.dumps(dict(facts), indent=1, sort_keys=True) + "\n",
                       "record.py": RECORD_SCRIPT}}
    hardened = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"}}
    pull = (f"import os; from runai_model_streamer import pull_files; pull_files(os.environ['WEIGHTS_URI'], "
            f"'{TOKENIZER_DIR}', None, {WEIGHT_PATTERNS!r})")
    tokenizer = {"name": "tokenizer", "image": spec.engine.image, "command": ["python3", "-c", pull],
                 # WEIGHTS_URI and the cloud's variables (AWS_REGION), from the ConfigMap the stack creates.
                 "envFrom": [{"configMapRef": {"name": weights_config_name(spec.name)}}],
                 # The streamer's Python package imports torch: more than a small script's memory.
                 "resources": {"requests": {"cpu": "500m", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
                 "securityContext": dict(hardened),
                 "volumeMounts": [{"name": "tokenizer", "mountPath": TOKENIZER_DIR}]}
    run = (f"export STARTED_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ) && python inference_perf/main.py --config_file "
           f"{CONFIG_DIR}/config.yml && python {CONFIG_DIR}/record.py")
    client = {"name": "inference-perf", "image": bench.image, "command": ["sh", "-c", run],
              # The tokenizer is the copied one: nothing is fetched from the Hugging Face Hub.
              "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
              "resources": {"requests": {"cpu": str(WORKERS), "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
              "securityContext": dict(hardened),
              "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                               {"name": "tokenizer", "mountPath": TOKENIZER_DIR, "readOnly": True},
                               {"name": "reports", "mountPath": REPORTS_DIR}]}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": meta(name, model.namespace, labels={**labels, QUEUE_LABEL: "default",
                                                           PRIORITY_LABEL: BENCHMARK_PRIORITY}),
           "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
               "restartPolicy": "Never",
               # The replicas' read-only identity on the weights' prefix: the tokenizer's files, nothing else.
               "serviceAccountName": serving_account_name(spec.name),
               "securityContext": {"supplementalGroups": [model.gid]},
               "initContainers": [tokenizer], "containers": [client],
               "volumes": [{"name": "config", "configMap": {"name": name}},
                           {"name": "tokenizer", "emptyDir": {}}, {"name": "reports", "emptyDir": {}}]}}}}
    return [config, job]


def read_record(text: str) -> dict[str, Any]:
    """The record in ``text``: a record's JSON, or a pod's log with the record between its marker lines. Raises
    ValueError with what is wrong."""
    if RECORD_BEGIN in text:
        body = text.split(RECORD_BEGIN, 1)[1]
        if RECORD_END not in body:
            raise ValueError("the log has the record's first marker but not its last: the run was cut short")
        text = body.split(RECORD_END, 1)[0]
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a record (JSON, or a log with '{RECORD_BEGIN}'): {exc}") from None
    if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
        raise ValueError(f"not a record: its kind is not {RECORD_KIND}")
    if not isinstance(record.get("report"), dict):
        raise ValueError("the record has no inference-perf report")
    return record
