"""Sizing: the storage keeps the GPUs busy enough, by the stack's own goodput model."""

from __future__ import annotations

from typing import Any

from pulumi_policy import Severity, StackValidationArgs

from gpu_policies.common import Reporter, get, k8s_name, k8s_namespace, of_type, path, seen, stack_policy

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CHECKPOINT_POLICY_LABEL = "gpu-cluster/checkpoint-policy"  # components/kubernetes/objects.py


def _number(value: Any) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None


def _storage_goodput(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    # The program writes the model's figures into a checkpoint-policy ConfigMap per team namespace; they are
    # the same in each, so the first one that misses the target is reported.
    for cm in of_type(args.resources, CONFIG_MAP):
        if get(cm.props, "metadata", "labels", CHECKPOINT_POLICY_LABEL) != "true":
            continue
        data = cm.props.get("data") or {}
        modelled, target = _number(get(data, "GOODPUT_MODELLED")), _number(get(data, "GOODPUT_TARGET"))
        if modelled is None or target is None or modelled >= target:
            continue
        fix = get(data, "STORAGE_REACHING_TARGET") or "no filesystem size or tier the stack may build"
        report(f"Checkpoint storage is too slow for the goodput target: {get(data, 'CHECKPOINT_PATH')} gives "
               f"{modelled:.1%} against {target:.1%} ({k8s_namespace(cm.props)}/{k8s_name(cm.props)}); "
               f"what reaches it: {fix}.", cm.urn, field=path("data", "GOODPUT_MODELLED"),
               value=seen(data, "GOODPUT_MODELLED"))
        return


storage_goodput = stack_policy(
    "checkpoint-storage-reaches-goodput-target", "sizing",
    "The checkpoint path's storage reaches the stack's goodput target, by its own goodput model.",
    "Use the storage the violation names (blueprint sizing lists each tier with its price), write checkpoints "
    "through the nodes' NVMe (checkpointPath tiered), or lower workload.goodput.target.",
    Severity.MEDIUM, _storage_goodput,
)

POLICIES = [storage_goodput]
