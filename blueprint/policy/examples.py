"""How each policy of the pack is broken on a shipped graph: the mutations the tests prove every policy rejects
(tests/policy/test_policies.py, tests/policy/test_policies_gcp.py, tests/program/test_slurm.py), shipped so that
``blueprint policy --explain`` can show a real violation in the pack's own words instead of a description of one. Each
cloud's examples module lists its mutations as name -> (stack, mutation, policy); here is the lookup ``--explain``
makes."""

from __future__ import annotations

import json

from blueprint import clouds
from blueprint.policy.cloud import cloud_examples
from blueprint.policy.runner import Pack, run_policies


def example_violation(policy: str, pack: Pack) -> tuple[str, str, str, str] | None:
    """(stack, how it was broken, the resource, the message with its field and fix) of the first mutation that
    breaks ``policy``, the pack run on it; None when no mutation is recorded for it."""
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack
    # A cloud's policy (named <cloud>-...) is shown on that cloud's stack first, not a resource grafted onto another
    # cloud's; the others in the clouds' order.
    order = sorted(clouds.names(), key=lambda cloud: not policy.startswith(f"{cloud}-"))
    found = next(((how, stack, mutate) for cloud in order
                  for how, (stack, mutate, name) in cloud_examples(cloud).MUTATIONS.items() if name == policy), None)
    if found is None:
        return None
    how, stack_name, mutate = found
    stack = load_stack(stack_name)
    graph = mutate(run_program(stack.name, stack.config, stack.region).graph)
    hits = [v for v in run_policies(graph, None, pack).violations if v.policy == policy]
    if not hits:
        return None
    v = hits[0]
    text = v.message
    if v.field:
        text += f"\nfield: {v.field}" + (f" = {json.dumps(v.value)}" if v.value is not None else " (not set)")
    return stack_name, how, v.urn.rsplit("::", 1)[-1] if v.urn else "(stack)", text + f"\nfix: {v.fix}"
