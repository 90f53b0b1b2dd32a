"""A served model's sizing: weights and KV cache in GPU memory, the concurrency one replica holds, the cold start, the
replicas a peak needs, and what a million generated tokens cost. Pure (the spec and the catalog), so the load-time
rules, ``blueprint sizing`` and the program share one arithmetic.

Units: bytes; GB = 10^9 bytes: the catalog's GPU memory (as NVIDIA and the clouds market it, e.g. L4 24, L40S 48) is
read as GB, which is what EC2's GpuInfo reports for them (L4 22,888 MiB = 24.0e9 bytes, L40S 45,776 MiB = 48.0e9)
and below what an H100 80GB reports (81,559 MiB): a conservative reading for every GPU of the catalog; MB = 10^6 bytes
(readMBps); GiB = 2^30 bytes in messages.

KV cache per token (NVIDIA, "Mastering LLM Techniques: Inference Optimization", developer.nvidia.com/blog, 2023-11-17:
"Size of KV cache per token in bytes = 2 * (num_layers) * (num_heads * dim_head) * precision_in_bytes", with the
key/value heads under grouped-query attention): ``2 x layers x kv_heads x head_dim x bytes``. Tensor parallelism
splits the key/value heads across GPUs and replicates them when there are fewer heads than GPUs (vLLM
vllm/config/model.py ``get_num_kv_heads``: ``max(1, total_num_kv_heads // tensor_parallel_size)`` per GPU), so a
replica holds ``tp x max(1, kv_heads // tp)`` heads; pipeline stages split the layers and add nothing. Models with
multi-head latent attention (DeepSeek's MLA) keep one latent per token instead, which this shape does not describe.

Memory: the engine takes ``gpuMemoryUtilization`` of each GPU for weights, activations and the KV cache (vLLM
``--gpu-memory-utilization``). What is left after the weights is an upper bound of the KV cache: vLLM profiles the
activations' peak at start and takes it from there too (not modelled here, so the concurrency is a ceiling). vLLM
refuses to start when one sequence of ``--max-model-len`` does not fit its KV cache, which is the load-time rule; its
"Maximum concurrency for N tokens per request" log line is the concurrency here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.spec.inference import ServedModelSpec

GIB = 2**30
GB = 1e9
MB = 1e6
# The Run:ai streamer reads into a host buffer of min(RUNAI_STREAMER_MEMORY_LIMIT, the files' size): 40 GB by default
# when not distributed (run-ai/runai-model-streamer docs/src/env-vars.md), which for a one-GPU replica means the
# whole model in host memory. Capped here; it must hold the largest tensor (Llama 3 70B's embedding: 128,256 x 8,192 x
# 2 bytes = 2.1 GB), so a model with a larger one needs more (not modelled).
STREAMER_BUFFER_BYTES = 4_000_000_000
# The engine's own processes on the host (API server, engine core, the CUDA and torch runtime): an allowance, not a
# measured figure; the replica's memory is three quarters of its GPUs' share of the node, at least this plus the
# buffer and /dev/shm.
ENGINE_HOST_GIB = 8
# Bytes per element of each data type (int4: two weights a byte; quantization scales are not counted).
DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}

# What one model's endpoint picker (llm-d-router, objects/gateway.py) requests, on its team's CPU quota. The chart's
# default (llm-d-router v0.10.0 routerlib values.yaml: 8 cores, 8 GiB, 16 GiB limit; the Inference Extension's v1.5.0
# chart: 4 cores, 8 GiB) is sized for large pools and high request rates; a pool of a few replicas is routed from far
# less, and the limit leaves it room to grow. A measured figure replaces these (docs/inference.md).
PICKER_CPU = 2
PICKER_MEMORY_GIB = 4
PICKER_MEMORY_LIMIT_GIB = 8


def shm_gib(gpus: int) -> int:
    """The replica's memory-backed /dev/shm (tensor-parallel workers exchange through it): an allowance of 2 GiB per
    GPU, counted in the pod's memory."""
    return 2 * gpus


def host_memory_floor_gib(gpus: int) -> int:
    """The least host memory a replica needs: the streamer's buffer, the engine's own processes and /dev/shm."""
    return math.ceil(STREAMER_BUFFER_BYTES / GIB) + ENGINE_HOST_GIB + shm_gib(gpus)


def replica_shape(gpus: int, gpus_per_node: int, vcpu_per_node: int | None,
                  memory_gib_per_node: int | None) -> tuple[int, int]:
    """(cores, GiB) a replica requests: half of its GPUs' share of the node's vCPUs and three quarters of their share
    of its memory (at least 1 core; the memory at least :func:`host_memory_floor_gib`, which the spec's rule
    inference-host-memory checks the share against), leaving the rest to the node's agents and the kubelet's
    reservations (a replica fits its team's Kueue flavor, which gives each GPU its whole share,
    components/kubernetes/quotas.py)."""
    cpu = max(1, (vcpu_per_node or 0) * gpus // (2 * gpus_per_node))
    memory = (memory_gib_per_node or 0) * gpus * 3 // (4 * gpus_per_node)
    return cpu, memory


@dataclass(frozen=True)
class ModelMemory:
    """A replica's memory on its GPUs, bytes."""

    gpus: int
    weights_bytes: float  # the whole model
    engine_bytes: float  # what the engine may take on the replica's GPUs (gpuMemoryUtilization x their memory)
    kv_bytes_per_token: float  # over the replica's GPUs
    context_tokens: int

    @property
    def kv_room_bytes(self) -> float:
        """What the engine has left for the KV cache after the weights (activations not counted: an upper bound)."""
        return self.engine_bytes - self.weights_bytes

    @property
    def max_concurrency(self) -> int:
        """Sequences of the full context that fit the KV cache at once (0: not even one)."""
        room = self.kv_room_bytes
        return 0 if room <= 0 else int(room // (self.kv_bytes_per_token * self.context_tokens))

    @property
    def fits(self) -> bool:
        return self.max_concurrency >= 1


def kv_bytes_per_token(model: ServedModelSpec) -> float:
    """KV cache bytes one token takes over a replica's GPUs (module docstring)."""
    shape = model.model
    heads = model.tensor_parallel * max(1, shape.kv_heads // model.tensor_parallel)
    return 2 * shape.layers * heads * shape.head_dim * DTYPE_BYTES[model.engine.kv_cache_dtype]


def weights_bytes(model: ServedModelSpec) -> float:
    """The weights' size: parameters x bytes per parameter of their data type."""
    return model.model.parameters_billions * 1e9 * DTYPE_BYTES[model.weights.dtype]


def model_memory(model: ServedModelSpec, gpu_memory_gb: float) -> ModelMemory:
    """A replica's memory on GPUs of ``gpu_memory_gb`` each (the catalog's figure, read as GB)."""
    gpus = model.gpus_per_replica
    return ModelMemory(gpus=gpus, weights_bytes=weights_bytes(model),
                       engine_bytes=gpus * gpu_memory_gb * GB * model.engine.gpu_memory_utilization,
                       kv_bytes_per_token=kv_bytes_per_token(model), context_tokens=model.context_tokens)


@dataclass(frozen=True)
class ColdStart:
    """How long a new replica takes to serve, seconds (None: its read rate is not known)."""

    read_s: float | None  # the weights from the bucket into GPU memory
    engine_s: float | None  # the engine's own start, when measured
    note: str

    @property
    def seconds(self) -> float | None:
        return None if self.read_s is None else self.read_s + (self.engine_s or 0.0)


def cold_start(model: ServedModelSpec) -> ColdStart:
    """Weights read at the measured rate, plus the engine's measured start; a new node's boot is not counted."""
    read = model.weights.read_mbps
    engine = model.engine.start_seconds
    if read is None:
        return ColdStart(None, engine, "weights.readMBps not given: measure one replica's read of its weights")
    parts = [f"{weights_bytes(model) / 1e9:,.1f} GB at {read:,.0f} MB/s"]
    parts.append(f"engine start {engine:,.0f} s" if engine is not None
                 else "engine start not counted (engine.startSeconds)")
    parts.append("a new node's boot and image pull not counted")
    return ColdStart(weights_bytes(model) / (read * MB), engine, "; ".join(parts))


def node_group_resource_name(cloud: str, group: str) -> str:
    """The node group's provider resource as the program names it, where its instance-hours are priced: the
    component ``nodegroup-<name>`` (components/aws/cloud.py) and its ``-ng`` group (components/aws/compute.py), or
    ``nodepool-<name>`` (components/gcp/cloud.py) and its ``-pool`` (components/gcp/gke.py)."""
    return f"nodegroup-{group}-ng" if cloud == "aws" else f"nodepool-{group}-pool"


def replicas_for_peak(model: ServedModelSpec) -> int | None:
    """Replicas the peak's generated tokens per second need at one replica's measured rate (None: not known)."""
    peak = model.objectives.peak_output_tokens_per_second
    if peak is None or model.throughput is None:
        return None
    return max(1, math.ceil(peak / model.throughput.output_tokens_per_second))


def usd_per_million_tokens(model: ServedModelSpec, replicas: int, gpu_hour_usd: float) -> float | None:
    """What a million generated tokens cost with ``replicas`` running: their GPU-hours over the tokens they generate
    in that hour, each at its measured rate, or the peak's when the peak asks for less (the rest idles but is paid)."""
    if model.throughput is None:
        return None
    rate = replicas * model.throughput.output_tokens_per_second
    peak = model.objectives.peak_output_tokens_per_second
    served = min(rate, peak) if peak is not None else rate
    return replicas * model.gpus_per_replica * gpu_hour_usd / (served * 3600) * 1e6
