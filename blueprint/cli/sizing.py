"""``blueprint sizing <stack>``: the goodput model (checkpoint and restore times, the optimal interval, goodput,
GPU-hours lost, the GPU capacity the work needs), what its losses cost, and the storage that reaches the target."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from blueprint.cli.common import EXIT_OK, EXIT_POLICY, STACK_HELP, CommandError, output_option, usage_for, write
from blueprint.files.output import check_output_file

if TYPE_CHECKING:
    from components.sizing import GoodputModel
    from components.spec import ClusterSpec


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("sizing", parents=[common], help="the goodput model of a stack: checkpoint and restore "
                            "times, optimal interval, goodput, GPU-hours lost, required GPU capacity, storage; "
                            "and each served model's KV cache, concurrency, cold start, replicas and cost per "
                            "million tokens")
    parser.add_argument("stack", help=STACK_HELP)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--measured", metavar="RECORD", default=None,
                        help="a storage check's record (storage.json, storage-bucket.json) or a run's directory "
                        "downloaded from acceptance/storage/<run>/: its write and restore times against the model "
                        "and the restore target, and the goodput they give, judged on the storage the model's "
                        "restore reads; exit 1 when a target is missed (docs/sizing.md)")
    output_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from blueprint.cost.engine import price_graph
    from blueprint.cost.prices import prices_for
    from blueprint.graph.engine import run_program
    from blueprint.graph.stackfile import load_stack
    from blueprint.sizing.inference import inference_document, served_sizing, serving_resources, with_served
    from blueprint.sizing.report import gpu_compute_usd, price_options, render_sizing, sizing_document
    from components.sizing import SizingError, goodput_model

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    serving = stack.spec.inference is not None
    model: GoodputModel | None = None
    try:
        model = goodput_model(stack.spec)
    except SizingError as err:
        # A stack that only serves has no checkpoints to model: its served models are still sized.
        if not serving or args.measured is not None or stack.spec.workload.goodput is not None:
            raise CommandError(f"{stack.display_path}: {err}") from None
    if args.measured is not None and model is not None:
        return _measured(args, stack.name, stack.spec, model)
    program = run_program(stack.name, stack.config, stack.region)
    usage, notes = usage_for(None, args.stack, (program.graph,))
    report = price_graph(program.graph, usage=usage, usage_notes=notes)
    sized = served_sizing(stack.spec, report)
    training_gpus = gpu_compute_usd(report, serving_resources(stack.spec))
    if args.format == "json":
        doc: dict[str, Any] = {}
        if model is not None:
            doc = sizing_document(model, training_gpus, price_options(model, prices_for(stack.spec.cloud)))
        if serving:
            doc["inference"] = inference_document(sized)
        text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    else:
        text = ""
        if model is not None:
            text = render_sizing(model, training_gpus, price_options(model, prices_for(stack.spec.cloud)), stack.name)
        text = with_served(text, stack.spec, report)
    write(text, args.output)
    return EXIT_OK


def _measured(args: argparse.Namespace, name: str, spec: ClusterSpec, model: GoodputModel) -> int:
    """``--measured``: the storage check's records against the model; no graph is built (nothing is priced)."""
    from blueprint.sizing.measured import (
        RecordError,
        compare,
        judged_target,
        load_records,
        render_measured,
        render_measured_json,
    )
    from components.sizing.measured import restore_target

    try:
        by_target = load_records(Path(args.measured))
    except RecordError as err:
        raise CommandError(str(err)) from None
    restore = restore_target(spec)
    judged = judged_target(model, set(by_target))
    measured = compare(model, by_target[judged], restore)
    others = tuple(compare(model, by_target[t], restore) for t in sorted(by_target) if t != judged)
    write(render_measured_json(measured, others) if args.format == "json"
          else render_measured(measured, name, others), args.output)
    return EXIT_OK if measured.passed else EXIT_POLICY
