"""Rules of inference.models: each served model runs on a GPU group of the stack for a team with quota there, its
parallel sizes fit the node and the engine, it fits its GPUs with one full-context sequence, and its replicas can hold
the concurrency its objectives are stated at."""

from __future__ import annotations

from components.sizing.inference import (
    GIB,
    PICKER_CPU,
    PICKER_MEMORY_GIB,
    host_memory_floor_gib,
    model_memory,
    replica_shape,
    replicas_for_peak,
)
from components.spec.decisions import (
    cloud_node_groups,
    gpu_units_per_gpu,
    instance_catalog,
    picker_quota,
    slurm_node_groups,
)
from components.spec.errors import _Collector
from components.spec.inference import ServedModelSpec
from components.spec.model import ClusterSpec

WHERE = ".inference.models"


def _check_inference(spec: ClusterSpec, out: _Collector) -> None:
    """Every served model against its group, team and GPUs."""
    if spec.inference is None:
        return
    seen: set[str] = set()
    for i, model in enumerate(spec.inference.models):
        where = f"{WHERE}[{i}]"
        if model.name in seen:
            out.add(f"{where}.name", "unique-names", f"'{model.name}' is served twice")
        seen.add(model.name)
        _check_model(spec, model, where, out)
    bench, gateway = spec.inference.benchmark, spec.inference.gateway
    images = [*([(".inference.benchmark.image", "the benchmark's", bench.image)] if bench else []),
              *([(".inference.gateway.pickerImage", "the endpoint picker's", gateway.picker_image)] if gateway else [])]
    for key, whose, image in images:
        if not any(image.startswith(p) for p in spec.platform.allowed_registries):
            out.add(key, "inference-image-registry",
                    f"{whose} image is not under platform.allowedRegistries "
                    f"({', '.join(spec.platform.allowed_registries)}): the registry admission policy would refuse its "
                    "pods; mirror it into an allowed registry")
    if gateway is not None:
        _check_picker_quota(spec, out)


def _check_picker_quota(spec: ClusterSpec, out: _Collector) -> None:
    """Each model's endpoint picker runs in its team's namespace on the team's CPU quota (objects/gateway.py): without
    room there Kueue would admit it to a GPU flavor, on a GPU node, or not at all."""
    assert spec.inference is not None
    teams = {t.name: t for t in spec.teams}
    per_team: dict[str, list[int]] = {}
    for i, model in enumerate(spec.inference.models):
        per_team.setdefault(model.team, []).append(i)
    for name, models in per_team.items():
        team = teams.get(name)
        if team is None:
            continue  # inference-team says it
        quota = picker_quota(team)
        cpu, memory = (quota.cpu, quota.memory_gib) if quota is not None else (0, 0)
        need_cpu, need_memory = len(models) * PICKER_CPU, len(models) * PICKER_MEMORY_GIB
        if cpu < need_cpu or memory < need_memory:
            where = f"CPU quota on {quota.node_group}" if quota is not None else "CPU quota"
            out.add(f"{WHERE}[{models[0]}].team", "inference-picker-quota",
                    f"team '{name}' has {cpu} cores and {memory} GiB of {where} (teams[].cpuQuotas, the largest: "
                    f"the pickers run there); its {len(models)} served model(s) behind the gateway need {need_cpu} "
                    f"cores and {need_memory} GiB for their endpoint pickers ({PICKER_CPU} cores, {PICKER_MEMORY_GIB} "
                    "GiB each): give the team a CPU quota that holds them")


def _check_model(spec: ClusterSpec, model: ServedModelSpec, where: str, out: _Collector) -> None:
    teams = {t.name: t for t in spec.teams}
    team = teams.get(model.team)
    if team is None:
        out.add(f"{where}.team", "inference-team", f"'{model.team}' is not a team of the stack "
                f"({', '.join(teams) or 'none'}): a served model runs in its team's namespace, on its quota")
    if model.replicas.min > model.replicas.max:
        out.add(f"{where}.replicas.min", "inference-replicas",
                f"min ({model.replicas.min}) must be <= max ({model.replicas.max})")
    if spec.environment == "prod" and model.replicas.min < 2:
        out.add(f"{where}.replicas.min", "inference-replicas-prod",
                "production serves from at least 2 replicas, so a node's loss or an upgrade leaves one serving")
    prefix = model.weights.prefix
    if any(part in ("", ".", "..") for part in prefix[:-1].split("/")):
        out.add(f"{where}.weights.prefix", "inference-weights-prefix",
                f"'{prefix}' has an empty, '.' or '..' segment: give the weights' directory in the bucket")
    reserved = {f"{t.name}/" for t in spec.teams} | {"acceptance/"}
    if prefix in reserved or prefix.startswith("acceptance/"):
        owner = "the acceptance records" if prefix.startswith("acceptance/") else "a team's checkpoints"
        out.add(f"{where}.weights.prefix", "inference-weights-prefix",
                f"'{prefix}' is a prefix the stack already grants ({owner}): keep the weights "
                "in a directory of their own (models/<name>/, or one inside a team's prefix)")
    if not any(model.engine.image.startswith(p) for p in spec.platform.allowed_registries):
        out.add(f"{where}.engine.image", "inference-image-registry",
                "the engine's image is not under platform.allowedRegistries "
                f"({', '.join(spec.platform.allowed_registries)}): the registry admission policy "
                "would refuse every replica; mirror it into an allowed registry")
    objectives = model.objectives
    if objectives.prompt_tokens + objectives.output_tokens > model.context_tokens:
        out.add(f"{where}.objectives.outputTokens", "inference-request-shape",
                f"a request of {objectives.prompt_tokens} prompt and {objectives.output_tokens} output tokens is "
                f"longer than contextTokens ({model.context_tokens}): vLLM refuses it")
    if not spec.platform.allow_https_egress:
        out.add(f"{where}.weights", "inference-weights-egress",
                "the engine streams its weights from the bucket over HTTPS, which platform.allowHttpsEgress false "
                "forbids team pods")
    if (model.weights.read_mbps is None) != (model.weights.read_source is None):
        out.add(f"{where}.weights.readSource", "inference-figure-sourced",
                "readMBps and readSource go together: a measured figure names its run")
    needed = replicas_for_peak(model)
    if needed is not None and needed > model.replicas.max:
        out.add(f"{where}.replicas.max", "inference-replicas-cover-peak",
                f"the peak ({model.objectives.peak_output_tokens_per_second:,.0f} tokens/s) needs {needed} replicas "
                f"at {model.throughput.output_tokens_per_second:,.0f} tokens/s each (throughput), more than max "  # type: ignore[union-attr]
                f"{model.replicas.max}")
    shape = model.model
    tp = model.tensor_parallel
    if shape.attention_heads % tp:
        # vLLM ModelConfig.verify_with_parallel_config: "Total number of attention heads (...) must be divisible by
        # tensor parallel size (...)".
        out.add(f"{where}.tensorParallel", "inference-parallel-sizes",
                f"tensorParallel {tp} must divide the model's {shape.attention_heads} attention heads (vLLM refuses "
                "to start otherwise)")
    if (shape.kv_heads % tp if shape.kv_heads >= tp else tp % shape.kv_heads):
        # vLLM QKVParallelLinear: the key/value heads are split across the GPUs, or each replicated to a whole number
        # of them (divide(tp_size, total_num_kv_heads)).
        out.add(f"{where}.tensorParallel", "inference-parallel-sizes",
                f"tensorParallel {tp} and the model's {shape.kv_heads} key/value heads must divide one another")
    if shape.kv_heads > shape.attention_heads or shape.attention_heads % shape.kv_heads:
        out.add(f"{where}.model.kvHeads", "inference-model-shape",
                f"kvHeads ({shape.kv_heads}) must divide attentionHeads ({shape.attention_heads}): each key/value "
                "head serves a whole group of query heads")
    if (spec.aws if spec.cloud == "aws" else spec.gcp) is None:
        return  # the cloud's settings are missing: rule cloud-settings-required says so
    groups = {g.name: g for g in cloud_node_groups(spec)}
    group = groups.get(model.node_group)
    key = "nodeGroups" if spec.cloud == "aws" else "nodePools"
    if group is None:
        out.add(f"{where}.nodeGroup", "inference-node-group",
                f"'{model.node_group}' is not one of {spec.cloud}.{key} ({', '.join(groups) or 'none'})")
        return
    facts = instance_catalog(spec).get(group.instance_type)
    if facts is None:
        return  # the node group's own rule names the unknown type
    if not facts.gpu_count or not facts.gpu_memory_gib_each:
        out.add(f"{where}.nodeGroup", "inference-node-group",
                f"'{model.node_group}' ({group.instance_type}) has no GPUs of known memory to serve from")
        return
    if model.node_group in slurm_node_groups(spec):
        out.add(f"{where}.nodeGroup", "inference-node-group",
                f"'{model.node_group}' runs slurmd (scheduler.slurm.nodeGroups): a node group belongs to one "
                "scheduler, and serving is Kubernetes' (Kueue admits its pods)")
    if group.capacity.type in ("capacity-block", "flex-start"):
        out.add(f"{where}.nodeGroup", "inference-continuous-capacity",
                f"'{model.node_group}' runs on {group.capacity.type} capacity, which ends with its window and has no "
                "nodes outside it: serve from on-demand, spot (dev) or reserved capacity")
    gpus = facts.gpu_count
    width = model.gpus_per_replica
    if width > gpus:
        fabric = facts.efa_capable if spec.cloud == "aws" else facts.gpudirect != "none"  # type: ignore[union-attr]
        if not fabric:
            out.add(f"{where}.pipelineParallel", "inference-multi-node-fabric",
                    f"one replica takes {width} GPUs (tensor x pipeline parallel) and a {group.instance_type} node "
                    f"has {gpus}: a replica across nodes needs a node group with a GPU fabric (EFA, GPUDirect)")
        else:
            out.add(f"{where}.pipelineParallel", "inference-multi-node",
                    f"one replica takes {width} GPUs and a {group.instance_type} node has {gpus}: serving across "
                    "nodes (LeaderWorkerSet) is not built yet; keep tensorParallel x pipelineParallel <= "
                    f"{gpus}")
        return
    if gpus % width:
        out.add(f"{where}.tensorParallel", "inference-parallel-sizes",
                f"a replica's {width} GPUs (tensor x pipeline parallel) must divide the node's {gpus}, or "
                f"{gpus % width} of every {group.instance_type} node's GPUs stay idle")
    # Every model served from the group at its ceiling (a replica's GPUs divide the node's, so they pack).
    assert spec.inference is not None
    sharing = [m for m in spec.inference.models if m.node_group == model.node_group]
    wanted = sum(m.replicas.max * m.gpus_per_replica for m in sharing)
    if wanted > group.max_size * gpus:
        others = [m.name for m in sharing if m.name != model.name]
        out.add(f"{where}.replicas.max", "inference-group-capacity",
                f"{model.replicas.max} replica(s) of {width} GPU(s)"
                + (f", with {', '.join(others)} at their ceilings," if others else "")
                + f" need {wanted} GPUs and '{model.node_group}' has {group.max_size * gpus} at most ({group.max_size} "
                f"x {group.instance_type}, maxSize): the replicas past them would never be scheduled; raise the "
                "group's maxSize or lower replicas.max")
    _, share = replica_shape(width, gpus, facts.vcpu.value, facts.memory_gib.value)  # what the pod will request
    if share < host_memory_floor_gib(width):
        out.add(f"{where}.nodeGroup", "inference-host-memory",
                f"a replica gets {share} GiB of a {group.instance_type} node's memory (three quarters of its GPUs' "
                f"share) and needs at least {host_memory_floor_gib(width)} GiB (the weights streamer's buffer, the "
                "engine's processes, /dev/shm): choose a node with more memory per GPU")
    memory = model_memory(model, facts.gpu_memory_gib_each)
    if not memory.fits:
        out.add(f"{where}.contextTokens", "inference-model-fits",
                f"{model.name} does not fit {width} x {facts.gpu_memory_gib_each} GB at gpuMemoryUtilization "
                f"{model.engine.gpu_memory_utilization:g}: weights {memory.weights_bytes / GIB:,.1f} GiB and one "
                f"sequence of {model.context_tokens:,} tokens' KV cache "
                f"{memory.kv_bytes_per_token * model.context_tokens / GIB:,.1f} GiB against "
                f"{memory.engine_bytes / GIB:,.1f} GiB (vLLM refuses to start): raise the parallel sizes, lower "
                "contextTokens, or quantize")
        return
    ceiling = model.replicas.max * memory.max_concurrency
    if model.objectives.concurrency > ceiling:
        out.add(f"{where}.objectives.concurrency", "inference-concurrency-fits",
                f"{model.objectives.concurrency} requests in flight need more KV cache than {model.replicas.max} "
                f"replica(s) hold at {model.context_tokens:,} tokens each ({memory.max_concurrency} per replica, "
                f"{ceiling} in all): the rest would queue and miss the latency objectives; raise replicas.max or "
                "lower the concurrency")
    if team is not None:
        quota = sum(q.gpus for q in team.quotas if q.node_group == model.node_group)
        floor = model.replicas.min * width * gpu_units_per_gpu(spec.platform.gpu_sharing)
        if quota < floor:
            # Kueue admits each serving pod against the team's ClusterQueue (the deployment integration): what the
            # floor needs must be the team's own, not borrowed capacity another team may reclaim.
            out.add(f"{where}.replicas.min", "inference-quota",
                    f"{model.replicas.min} replica(s) x {width} GPUs need {floor} GPUs of team '{model.team}''s "
                    f"nominal quota on '{model.node_group}' (it has {quota}): Kueue admits every serving pod "
                    "against it")
