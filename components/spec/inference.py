"""Private inference: the models the stack serves, each from weights under the stack's bucket to a latency objective.

One entry per served model: its shape (what sizes its GPU memory and KV cache), where its weights come from and how
fast they are read, the serving engine, its parallel sizes, the node group and team it runs for, its replicas, and
the objectives it is judged against. The rules (``rules/inference.py``) refuse at load what could never serve: a model
that does not fit its GPUs with one full-context sequence, parallel sizes that leave a node's GPUs idle, a model wider
than a node, a concurrency objective beyond what the replicas hold. ``blueprint sizing`` turns the same inputs into
the KV cache per token, the concurrency per replica, the cold-start time and the cost per million tokens
(``components/sizing/inference.py``).
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, StrictFloat, StrictInt

from components.spec.base import _Model, unit

# An object-key prefix in the stack's bucket: relative, ends in "/", no empty or dot segment (checked by the rules).
_PREFIX = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,511}/$"
# An image pinned by digest (the registry policy and admission refuse tags that move).
_IMAGE_DIGEST = r"^[a-z0-9][a-z0-9.-]*(:[0-9]+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}$"
Dtype = Literal["bf16", "fp16", "fp8", "int8", "int4"]


class ModelShapeSpec(_Model):
    """What sizes the model in GPU memory: its parameters and the attention shape its KV cache follows. Read them
    from the model's config.json (num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim or
    hidden_size / num_attention_heads)."""

    parameters_billions: StrictFloat = Field(gt=0, le=100_000, description="Parameters, billions.",
                                             json_schema_extra=unit("billion parameters"))
    layers: StrictInt = Field(ge=1, le=1000, description="Transformer layers (num_hidden_layers).",
                              json_schema_extra=unit("layers"))
    attention_heads: StrictInt = Field(ge=1, le=4096, description="Query heads (num_attention_heads).",
                                       json_schema_extra=unit("heads"))
    kv_heads: StrictInt = Field(ge=1, le=4096, description="Key/value heads (num_key_value_heads; equal to "
                                "attentionHeads without grouped-query attention).", json_schema_extra=unit("heads"))
    head_dim: StrictInt = Field(ge=1, le=4096, description="Size of one head (head_dim).",
                                json_schema_extra=unit("elements"))
    source: str = Field(min_length=1, max_length=256,
                        description="Where these figures were read (the model card or config.json, with date).")


class WeightsSpec(_Model):
    """Where the weights live and how they reach the GPUs."""

    prefix: str = Field(pattern=_PREFIX, description="The weights' prefix in the stack's bucket, e.g. "
                        "models/llama-3.1-8b-instruct/ (safetensors, config.json and the tokenizer, as the engine "
                        "reads a model directory). The serving identity may read this prefix and nothing else.")
    dtype: Dtype = Field(description="The weights' data type as stored and loaded (bf16, fp16, fp8, int8, int4).")
    read_mbps: Optional[StrictFloat] = Field(
        default=None, gt=0, le=1_000_000, alias="readMBps",
        description="Measured MB/s (10^6 bytes) at which one replica reads its weights from the bucket into GPU "
        "memory (the engine's streaming loader's log, or a fio/gcloud/aws read of the prefix from a GPU node). "
        "Sets the cold-start and failover time; without it they are not computed.",
        json_schema_extra=unit("MB/s"))
    read_source: Optional[str] = Field(default=None, min_length=1, max_length=256,
                                       description="Where readMBps was measured (run, date).")


class EngineSpec(_Model):
    """The serving engine: vLLM's OpenAI-compatible server. Another engine plugs in by a new value here and its
    container arguments, probes and metric names in components/kubernetes/objects (docs/inference.md)."""

    name: Literal["vllm"] = Field(default="vllm", description="The engine (vLLM).")
    image: str = Field(pattern=_IMAGE_DIGEST, description="The engine's image by digest (e.g. vllm/vllm-openai "
                       "mirrored into an allowed registry).")
    version: str = Field(pattern=r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?([-.+][A-Za-z0-9.]+)?$", max_length=32,
                         description="The engine's release the image holds (recorded beside acceptance results).")
    gpu_memory_utilization: StrictFloat = Field(
        default=0.9, gt=0, le=0.98,
        description="Share of each GPU's memory the engine may take for weights, activations and KV cache (vLLM "
        "--gpu-memory-utilization; its default 0.9).", json_schema_extra=unit("fraction (0-1)"))
    kv_cache_dtype: Literal["bf16", "fp16", "fp8"] = Field(
        default="bf16", description="The KV cache's data type (vLLM --kv-cache-dtype: auto keeps the model's "
        "activation type, bf16 for most models; fp8 halves it).")
    start_seconds: Optional[StrictFloat] = Field(
        default=None, ge=0, le=7200,
        description="Measured seconds from container start to ready, weights excluded (CUDA graphs, warm-up); added "
        "to the weights' read time in the cold start. Default: not counted, and sizing says so.",
        json_schema_extra=unit("seconds"))


class ReplicasSpec(_Model):
    """How many copies of the model serve: the floor that always runs and the ceiling the autoscaler may reach."""

    min: StrictInt = Field(ge=1, le=1000, description="Replicas that always run (production: two or more, so a "
                           "node's loss leaves one serving).", json_schema_extra=unit("replicas"))
    max: StrictInt = Field(ge=1, le=1000, description="Most replicas.", json_schema_extra=unit("replicas"))


class AutoscalingSpec(_Model):
    """How the replicas follow demand between ``replicas.min`` and ``replicas.max`` (KEDA on the engine's own queue and
    batch: components/kubernetes/objects/autoscaling.py). Only a model with min < max is autoscaled."""

    requests_per_replica: Optional[StrictInt] = Field(
        default=None, ge=1, le=100_000,
        description="Requests in flight (running and waiting) one replica is given before another is added. Default: "
        "the sequences of contextTokens one replica's KV cache holds (`blueprint sizing`), so no replica is asked "
        "for more than its cache is sure to hold; raise it from a measured run (`blueprint inference check`) whose "
        "shorter requests met the objectives at a higher concurrency per replica.",
        json_schema_extra=unit("requests"))


class ObjectivesSpec(_Model):
    """The latency objectives at a stated concurrency, as the acceptance run measures them through the gateway."""

    percentile: Literal[50, 90, 95, 99] = Field(default=95, description="The percentile the objectives hold at.",
                                                json_schema_extra=unit("percentile"))
    ttft_ms: StrictFloat = Field(gt=0, le=600_000, alias="ttftMs", description="Time to first token, ms.",
                                 json_schema_extra=unit("ms"))
    tpot_ms: StrictFloat = Field(gt=0, le=60_000, alias="tpotMs", description="Time per output token, ms.",
                                 json_schema_extra=unit("ms"))
    concurrency: StrictInt = Field(ge=1, le=1_000_000, description="Requests in flight through the gateway at which "
                                   "the objectives hold.", json_schema_extra=unit("requests"))
    failover_seconds: Optional[StrictFloat] = Field(
        default=None, gt=0, le=86_400,
        description="Longest a lost replica may take to serve again (its cold start); sizing warns beyond it.",
        json_schema_extra=unit("seconds"))
    peak_output_tokens_per_second: Optional[StrictFloat] = Field(
        default=None, gt=0, description="Generated tokens per second the model must serve at its peak; with "
        "throughput it sets the replicas the peak needs.", json_schema_extra=unit("tokens/s"))
    # The request shape is the project's default for a chat-like request, not a measured traffic mix: state yours.
    prompt_tokens: StrictInt = Field(
        default=1024, ge=1, alias="promptTokens", description="Prompt length of the requests the objectives are "
        "stated for (the acceptance run sends synthetic prompts of this mean length).",
        json_schema_extra=unit("tokens"))
    output_tokens: StrictInt = Field(
        default=256, ge=1, alias="outputTokens", description="Tokens generated per request at which the objectives "
        "hold (the acceptance run asks for this many).", json_schema_extra=unit("tokens"))


class ThroughputSpec(_Model):
    """What one replica generates, measured (an inference-perf run) or from a sourced benchmark, never assumed."""

    output_tokens_per_second: StrictFloat = Field(
        gt=0, description="Generated tokens per second one replica sustains within the objectives.",
        json_schema_extra=unit("tokens/s per replica"))
    source: str = Field(min_length=1, max_length=256, description="The run or publication, with date.")


class BaselineSpec(_Model):
    """The model API the served model is compared with first (the seed's first comparison)."""

    usd_per_million_tokens: StrictFloat = Field(gt=0, le=10_000, description="The API's price per million output "
                                                "tokens.", json_schema_extra=unit("USD per million tokens"))
    source: str = Field(min_length=1, max_length=256, description="The price page and the date read.")


class ServedModelSpec(_Model):
    """One served model: shape, weights, engine, parallelism, where it runs, for whom, and what it must meet."""

    # At most 30: the AWS role <cluster>-<model>-serve stays under IAM's 64 characters (components/aws/serving.py).
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,28}[a-z0-9]$",
                      description="The model's name on the cluster (its Deployment, Service, service account "
                      "serve-<name> and vLLM's served model name), 2-30 characters [a-z0-9-].")
    team: str = Field(description="The team that owns it (a team of the stack): its namespace, quota, identity and "
                      "billing labels.")
    node_group: str = Field(description="The GPU node group (GKE: node pool) it runs on.")
    model: ModelShapeSpec = Field(description="The model's shape.")
    weights: WeightsSpec = Field(description="Its weights.")
    engine: EngineSpec = Field(description="The serving engine.")
    context_tokens: StrictInt = Field(ge=128, le=10_000_000, description="Longest sequence served, prompt and "
                                      "output (vLLM --max-model-len).", json_schema_extra=unit("tokens"))
    tensor_parallel: StrictInt = Field(default=1, ge=1, le=64, description="GPUs one replica's layers are split "
                                       "across (vLLM --tensor-parallel-size).", json_schema_extra=unit("GPUs"))
    pipeline_parallel: StrictInt = Field(default=1, ge=1, le=64, description="Stages one replica's layers are "
                                         "split into (vLLM --pipeline-parallel-size).",
                                         json_schema_extra=unit("stages"))
    replicas: ReplicasSpec = Field(description="Replicas.")
    autoscaling: AutoscalingSpec = Field(default_factory=AutoscalingSpec,
                                         description="How replicas follow demand (when replicas.min < max).")
    objectives: ObjectivesSpec = Field(description="Latency objectives.")
    throughput: Optional[ThroughputSpec] = Field(
        default=None, description="One replica's measured generation rate: sets the replicas for the peak and the "
        "cost per million tokens. Default: not known, and sizing says so.")
    baseline: Optional[BaselineSpec] = Field(default=None, description="The model API to beat.")

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica takes: tensor x pipeline parallel."""
        return self.tensor_parallel * self.pipeline_parallel


class BenchmarkSpec(_Model):
    """The acceptance run of a served model: inference-perf (kubernetes-sigs) from a client pod of the owning team to
    the model's replicas, at the objectives' concurrency and request shape (``blueprint inference benchmark``)."""

    image: str = Field(pattern=_IMAGE_DIGEST, description="inference-perf's image by digest (quay.io/inference-perf/"
                       "inference-perf, mirrored into an allowed registry).")
    version: str = Field(default="v0.6.1", pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$",
                         description="The inference-perf release the image holds (its config and report format).")
    requests_per_client: StrictInt = Field(
        default=10, ge=1, le=1000, alias="requestsPerClient", description="Requests each of the concurrency's "
        "clients sends (inference-perf concurrent load: num_requests = concurrency x this).",
        json_schema_extra=unit("requests"))


class GatewaySpec(_Model):
    """The private gateway in front of the served models: a Gateway API Gateway of the cloud's class (GKE's internal
    Application Load Balancer, agentgateway on EKS) and, per model, an InferencePool whose endpoint picker
    (llm-d-router) sends each request to the replica with the shortest queue and the most free KV cache
    (docs/inference.md)."""

    picker_image: str = Field(
        pattern=_IMAGE_DIGEST, description="The endpoint picker's image by digest (ghcr.io/llm-d/"
        "llm-d-router-endpoint-picker at pickerVersion, mirrored into an allowed registry).")
    picker_version: str = Field(
        default="v0.10.0", pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$",
        description="The llm-d-router release the image holds (its flags and EndpointPickerConfig).")


class InferenceSpec(_Model):
    """The models the stack serves privately."""

    models: list[ServedModelSpec] = Field(min_length=1, max_length=50, description="Served models.")
    benchmark: Optional[BenchmarkSpec] = Field(
        default=None, description="The acceptance run's tool (blueprint inference benchmark). Default: none, and "
        "`blueprint inference benchmark` says what to set.")
    gateway: Optional[GatewaySpec] = Field(
        default=None, description="The private gateway with queue- and KV-cache-aware routing. Default: none, and each "
        "model is reached through its Service, balanced without regard to the replicas' load.")
