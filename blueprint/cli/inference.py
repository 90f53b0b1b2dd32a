"""``blueprint inference benchmark|check``: a served model's acceptance run: the inference-perf ConfigMap and Job a
team submits to measure its model at the objectives, and the verdict on the record that run prints."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from blueprint.cli.common import EXIT_OK, EXIT_POLICY, STACK_HELP, CommandError, output_option, write
from blueprint.files.input import UnreadableInputError, read_input_text
from blueprint.files.output import check_output_file

if TYPE_CHECKING:
    from blueprint.graph.stackfile import StackFile
    from components.spec.inference import ServedModelSpec

MAX_RECORD_BYTES = 16 * 1024 * 1024  # a pod's log with the record; the summary report is some 20 KB


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    inference = sub.add_parser("inference", parents=[common], help="a served model's acceptance run: the "
                               "inference-perf Job, and its record against the objectives")
    inference.set_defaults(handler=run)
    inference_sub = inference.add_subparsers(dest="inference_command", required=True)
    bench = inference_sub.add_parser("benchmark", parents=[common], help="the inference-perf ConfigMap and Job that "
                                     "measure a served model at its objectives (kubectl apply -f, then kubectl logs "
                                     "the Job into a record)")
    bench.add_argument("stack", help=STACK_HELP)
    bench.add_argument("--model", help="the served model (default: the stack's only one)")
    output_option(bench, "the manifests")
    check = inference_sub.add_parser("check", parents=[common], help="a run's record (or the Job's log) against "
                                     "the model's objectives; exit 1 when one is missed")
    check.add_argument("record", type=Path, help="the record: the Job's log (kubectl logs), or its JSON")
    check.add_argument("--stack", required=True, help=STACK_HELP)
    check.add_argument("--model", help="the served model (default: the record's)")
    check.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    output_option(check)


def _model(stack: StackFile, name: str | None) -> ServedModelSpec:
    models = stack.spec.inference.models if stack.spec.inference is not None else []
    if not models:
        raise CommandError(f"{stack.display_path}: inference.models: the stack serves no model")
    if name is None:
        if len(models) > 1:
            raise CommandError(f"{stack.display_path}: inference.models: the stack serves "
                               f"{', '.join(m.name for m in models)}: name one with --model")
        return models[0]
    for model in models:
        if model.name == name:
            return model
    raise CommandError(f"{stack.display_path}: inference.models: no model '{name}' (served: "
                       f"{', '.join(m.name for m in models)})")


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (the config, the record's facts and script read as files), no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def render_manifests(objects: Any) -> str:
    """Kubernetes objects as a multi-document YAML file."""
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, width=120)


def run(args: argparse.Namespace) -> int:
    """Exit 0, 1 (an objective missed), 2 (not a record, no such model, no benchmark image)."""
    from blueprint.graph.stackfile import load_stack

    if args.output is not None:
        check_output_file(args.output)
    stack = load_stack(args.stack)
    if args.inference_command == "benchmark":
        return _benchmark(args, stack)
    from blueprint.acceptance.inference import check_record, render_markdown, render_table
    from components.kubernetes.objects.inference_perf import read_record

    try:
        text = read_input_text(args.record, MAX_RECORD_BYTES)
    except UnreadableInputError as err:
        raise CommandError(str(err)) from None
    try:
        record = read_record(text)
    except ValueError as err:
        raise CommandError(f"{args.record}: {err}") from None
    recorded = str(record.get("model") or "") or None
    if args.model is not None and recorded is not None and args.model != recorded:
        raise CommandError(f"{args.record}: the record is of model {recorded}, not {args.model}")
    model = _model(stack, args.model or recorded)
    gateway = stack.spec.inference is not None and stack.spec.inference.gateway is not None
    verdict = check_record(record, model, stack.name, gateway)
    if args.format == "json":
        out = json.dumps(verdict.to_dict(), indent=2, sort_keys=True) + "\n"
    elif args.format == "markdown":
        out = render_markdown(verdict)
    else:
        out = render_table(verdict, record)
    write(out, args.output)
    return EXIT_OK if verdict.passed else EXIT_POLICY


def _benchmark(args: argparse.Namespace, stack: StackFile) -> int:
    from components.cluster import gateway_host
    from components.kubernetes.objects.inference_perf import benchmark_objects, record_facts
    from components.kubernetes.objects.tenancy import team_labels
    from components.kubernetes.serving import served_models
    from components.spec.decisions import served_group

    spec = stack.spec
    model = _model(stack, args.model)
    bench = spec.inference.benchmark if spec.inference is not None else None
    if bench is None:
        raise CommandError(f"{stack.display_path}: inference.benchmark: not set: name inference-perf's image by "
                           "digest (quay.io/inference-perf/inference-perf mirrored into an allowed registry) "
                           "[rule: inference-benchmark-image]")
    # The weights' URI and the cloud's variables come from the model's ConfigMap in the cluster (objects/serving.py).
    (served,) = [m for m in served_models(spec, bucket="", scheme="") if m.name == model.name]
    group, facts = served_group(spec, model)
    team = next(t for t in spec.teams if t.name == model.team)
    host = gateway_host(spec)
    record = record_facts(stack.name, model, bench, group.instance_type, str(facts.gpu_model or "unknown"), host)
    objects = benchmark_objects(served, bench, record, team_labels(team, spec.labels), host)
    header = (f"# The acceptance run of {model.name} on {stack.name} (blueprint inference benchmark {stack.name}):\n"
              f"# inference-perf {bench.version} at {model.objectives.concurrency} requests in flight, "
              f"{model.objectives.prompt_tokens} prompt and {model.objectives.output_tokens} output tokens each.\n"
              f"# Run it: kubectl apply -f <this file>; kubectl -n {model.team} wait --for=condition=complete "
              f"--timeout=2h job/inference-perf-{model.name}\n"
              f"# Record it: kubectl -n {model.team} logs job/inference-perf-{model.name} -c inference-perf > "
              "run.log\n"
              f"# Judge it: blueprint inference check run.log --stack {stack.name}\n"
              f"# Run again: kubectl -n {model.team} delete job inference-perf-{model.name}, then apply.\n")
    write(header + render_manifests(objects), args.output)
    return EXIT_OK
