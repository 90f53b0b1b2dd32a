"""``make bench``: how fast the offline engine, the policy pass, the cost and admission readers and the preview are,
each as a paired ratio against its floor, and how they grow.

Every figure is a pair of commands run alternately in their own processes (as a user runs them): the command (A)
and its floor (B), ``--pairs`` times (A B, then B A, then A B, ...: neither always runs on a warmer machine). Each
pair gives one CPU ratio A/B (user + system seconds, from the operating system); the figure is the median of those
ratios, with their min and max. CPU time, not wall time: on a shared machine another process's load lengthens the
wall time of both but the CPU time of neither. The floors:

- **third-party import floor** (per stack): a process that imports, by name, every module a preview of the stack
  had loaded when it finished, except the project's own (``blueprint``, ``components``, ``gpu_policies``,
  ``policies``): the Pulumi SDK and providers, PyYAML, gRPC, protobuf and the standard-library modules loaded; then
  ``os._exit(0)``, as the CLI leaves. No preview of that stack can cost less.
- **bare SDK import**: a process running ``import pulumi`` (the Pulumi Python SDK alone: no provider package, no
  policy SDK), then ``os._exit(0)``. What the readers of a saved graph (``cost``, ``policy``, ``admit``) are held to.

The targets (issue 37): prod-aws and prod-gcp preview <= 1.2x their third-party import floor; ``cost``, ``policy``
and ``admit`` on the saved prod-aws graph <= 1.5x a bare SDK import, and ``admit`` on the stack name (after one
run the same day) as well; at 1,000 node groups ``graph`` under 800 MiB and ``policy`` under 1,200 MiB peak, both
linear in resources. Generated stacks of 10, 100 and 1,000 GPU node groups and teams measure growth; a
50,000-resource graph (copies of the largest) goes through the policy pass; Checkov runs on the prod-aws manifests
when it is installed. The machine's load average is read at the start and the end.

    python -m blueprint.bench [--sizes 10,100,1000] [--pairs 5] [--size-pairs 1] [--out bench/] [--skip-large]
    python -m blueprint.bench compare bench/base.json bench/latest.json

The figures are printed as one table and written as JSON (``bench/latest.json`` and a dated copy), so
two commits can be compared (``make bench-compare``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "stacks"
BLUEPRINT = [sys.executable, "-m", "blueprint"]
# The project's own top-level packages: what the third-party import floor leaves out.
PROJECT_PACKAGES = ("blueprint", "components", "gpu_policies", "policies")
# The workload `admit` walks: the multi-node training JobSet of the first-job guide (docs/first-job.md), admitted on
# prod-aws.
ADMIT_WORKLOAD = ROOT / "examples" / "workloads" / "prod-aws" / "train-multinode.yaml"
BARE_SDK = "bare-sdk"
BARE_SDK_DEFINITION = ("bare SDK import: a process running `import pulumi` (the Pulumi Python SDK alone: no provider "
                       "package, no policy SDK), then os._exit(0)")
# The targets (issue 37). Ratios are medians of per-pair CPU ratios; memory is the median peak.
PREVIEW_RATIO = 1.2
READER_RATIO = 1.5
GRAPH_PEAK_MIB = 800
POLICY_PEAK_MIB = 1200
# Linear: the CPU and memory each added resource costs from 100 to 1,000 groups over what it cost from 10 to 100
# (the import constant cancels out of both); the tolerance the bench has held growth to since issue 9.
LINEAR_GROWTH = 1.2


def third_party_key(stack: str) -> str:
    """The floor key of a stack's third-party import floor."""
    return f"third-party:{stack}"


def third_party_definition(stack: str) -> str:
    """What the third-party import floor of ``stack`` is, as printed next to its ratios."""
    return (f"third-party import floor ({stack}): a process importing every module a preview of {stack} loads except "
            f"the project's own ({', '.join(PROJECT_PACKAGES)}), then os._exit(0)")


@dataclass(frozen=True)
class Measure:
    """One command's run: wall and CPU seconds, peak resident memory, resources handled."""

    case: str
    command: str
    wall_s: float
    cpu_s: float
    peak_mib: float
    resources: int
    exit_code: int

    @property
    def cpu_ms_per_resource(self) -> float:
        """CPU milliseconds per resource of the graph (0 when unknown)."""
        return 1000 * self.cpu_s / self.resources if self.resources else 0.0


def generated_spec(groups: int) -> dict[str, Any]:
    """The prod-aws spec with ``groups`` GPU node groups (p5.48xlarge, on demand, 2 nodes each, placed) and
    as many teams, each with a quota on its own group. It passes every spec rule."""
    doc = yaml.safe_load((STACKS / "Pulumi.prod-aws.yaml").read_text())
    spec: dict[str, Any] = copy.deepcopy(doc["config"]["gpu-cluster:spec"])
    spec["name"] = "bench"
    system = spec["aws"]["nodeGroups"][0]
    spec["aws"]["nodeGroups"] = [system] + [{
        "name": f"gpu-{i:04d}", "instanceType": "p5.48xlarge", "minSize": 0, "desiredSize": 0, "maxSize": 2,
        "labels": {"workload": "training"},
    } for i in range(groups)]
    spec["teams"] = [{
        "name": f"team-{i:04d}", "costCenter": f"cc-{i:04d}", "gid": 20000 + i,
        "roleArns": [f"arn:aws:iam::111122223333:role/team-{i:04d}"],
        "quotas": [{"nodeGroup": f"gpu-{i:04d}", "gpus": 16}],
        "budget": {"monthlyUsd": 50000, "notify": [f"team-{i:04d}@example.com"]},
    } for i in range(groups)]
    spec["workload"]["peakGpus"] = 16 * groups
    # The shipped served model runs on prod-aws's l40s group for its team applied, neither of which is generated: the
    # bench measures the training platform at scale, as it did before stacks served models.
    spec.pop("inference", None)
    # The shipped routes name prod-aws's teams; the generated teams' alerts go by severity only.
    alerts = spec["platform"]["monitoring"]["alerts"]
    alerts["routes"] = [r for r in alerts["routes"] if not r.get("teams")]
    return spec


def write_generated(groups: int, directory: Path) -> Path:
    """Write the generated stack file; return its path."""
    doc = yaml.safe_load((STACKS / "Pulumi.prod-aws.yaml").read_text())
    doc["config"]["gpu-cluster:spec"] = generated_spec(groups)
    path = directory / f"Pulumi.bench-{groups}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measured command: this process's, with ``env`` over it and without
    ``PYTHONDONTWRITEBYTECODE``, so that the project's bytecode is written once and read after (as on a user's machine,
    where Python writes it by default) instead of every run compiling every module of the project."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**base, **(env or {})}


def measure(case: str, command: str, argv: Sequence[str], resources: int = 0,
            env: dict[str, str] | None = None) -> Measure:
    """Run one command in a child process; read its wall time, CPU time and peak memory."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=child_env(env), cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{command} on {case} exited {code}: {stderr[-2000:]}")
    return Measure(case, command, round(wall, 3), round(usage.ru_utime + usage.ru_stime, 3),
                   round(usage.ru_maxrss / 1024, 1), resources, code)


def import_floor_argv(modules: Sequence[str]) -> list[str]:
    """A process that imports every given module and leaves with ``os._exit``."""
    # Some loaded modules cannot be imported by name (extension-internal ones): they are skipped.
    code = (f"import importlib, os\nfor m in {list(modules)!r}:\n    try:\n        importlib.import_module(m)\n"
            "    except Exception:\n        pass\nos._exit(0)\n")
    return [sys.executable, "-c", code]


BARE_SDK_ARGV = [sys.executable, "-c", "import os\nimport pulumi  # noqa: F401\nos._exit(0)\n"]


def third_party(modules: Sequence[str]) -> list[str]:
    """The modules that are not the project's own (nor ``__main__``)."""
    return [m for m in modules if m.split(".", 1)[0] not in PROJECT_PACKAGES and not m.startswith("__")]


def preview_modules(stack: str, env: dict[str, str] | None = None) -> list[str]:
    """The modules a preview of ``stack`` has loaded when it finishes (read in a child process)."""
    code = ("import sys, json\nfrom blueprint.cli import main\nimport contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['preview', {stack!r}])\n"
            "print(json.dumps(sorted(m for m in sys.modules if not m.startswith('__'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env=child_env(env))
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return [m for m in modules if m not in ("__main__",)]


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3)


def summarize(case: str, command: str, floor: str, resources: int,
              pairs: Sequence[tuple[Measure, Measure]]) -> dict[str, Any]:
    """One figure from its pairs (A: the command, B: its floor): the median, min and max of the per-pair CPU ratios
    A/B, and the medians of each side's wall, CPU and peak memory."""
    ratios = [a.cpu_s / b.cpu_s for a, b in pairs if b.cpu_s > 0]
    return {
        "case": case, "command": command, "floor": floor, "resources": resources,
        "cpu_ratio": ({"median": _median(ratios), "min": round(min(ratios), 3), "max": round(max(ratios), 3)}
                      if ratios else None),
        "median": {k: _median([getattr(a, k) for a, _ in pairs]) for k in ("wall_s", "cpu_s", "peak_mib")},
        "floor_median": {k: _median([getattr(b, k) for _, b in pairs]) for k in ("wall_s", "cpu_s", "peak_mib")},
        "exit_codes": sorted({a.exit_code for a, _ in pairs}),
        "pairs": [{"a": asdict(a), "b": asdict(b)} for a, b in pairs],
    }


def run_pairs(case: str, command: str, argv: Sequence[str], floor: str, floor_argv: Sequence[str], pairs: int,
              resources: int = 0, env: dict[str, str] | None = None,
              run: Callable[..., Measure] = measure) -> dict[str, Any]:
    """``pairs`` runs of the command (A) and of its floor (B), alternately (A B, B A, A B, ...), summarized."""
    out: list[tuple[Measure, Measure]] = []
    for i in range(pairs):
        def a() -> Measure:
            return run(case, command, argv, resources, env=env)

        def b() -> Measure:
            return run("floor", floor, floor_argv, env=env)
        if i % 2 == 0:
            first = a()
            out.append((first, b()))
        else:
            second = b()
            out.append((a(), second))
    return summarize(case, command, floor, resources, out)


def replicate(graph_path: Path, copies: int, out: Path) -> int:
    """Write a graph of ``copies`` renamed copies of a graph (distinct stacks in one document)."""
    doc = json.loads(graph_path.read_text())
    stack = doc["stack"]
    text = json.dumps(doc["resources"])
    resources: list[Any] = []
    for k in range(copies):
        resources += json.loads(text.replace(f"urn:pulumi:{stack}::", f"urn:pulumi:{stack}-{k}::"))
    out.write_text(json.dumps({"stack": f"{stack}-x{copies}", "resources": resources}))
    return len(resources)


def _count(graph_path: Path) -> int:
    return len(json.loads(graph_path.read_text())["resources"])


def load() -> list[float]:
    """The machine's load average over 1, 5 and 15 minutes."""
    return [round(x, 2) for x in os.getloadavg()]


def run_bench(sizes: Sequence[int], out_dir: Path, skip_large: bool, pairs: int = 5,
              size_pairs: int = 1) -> dict[str, Any]:
    """Every measurement; returns the JSON document (also written under ``out_dir``)."""
    load_start = load()
    work = Path(tempfile.mkdtemp(prefix="blueprint-bench-"))
    # The graph cache (blueprint/graph/cache.py) in the bench's own folder: the first stack-name admit is cold.
    env = {"GPU_CLUSTER_NOW": "2026-11-29T00:00:00Z", "BLUEPRINT_CACHE_DIR": str(work / "graph-cache")}
    floors = {BARE_SDK: BARE_SDK_DEFINITION}
    floor_argv: dict[str, list[str]] = {BARE_SDK: BARE_SDK_ARGV}
    for stack in ("prod-aws", "prod-gcp"):
        floors[third_party_key(stack)] = third_party_definition(stack)
        floor_argv[third_party_key(stack)] = import_floor_argv(third_party(preview_modules(stack, env)))
    figures: list[dict[str, Any]] = []

    def pair(case: str, command: str, argv: Sequence[str], floor: str, n: int, resources: int = 0) -> None:
        figures.append(run_pairs(case, command, argv, floor, floor_argv[floor], n, resources, env))
        print(f"  {case} {command}: {figures[-1]['cpu_ratio']}", file=sys.stderr)

    # The shipped stacks: previews against their third-party floor, the readers on a saved graph against the SDK.
    graph = work / "prod-aws.json"
    subprocess.run([*BLUEPRINT, "graph", "prod-aws", "-o", str(graph)], cwd=ROOT, env=child_env(env),
                   check=True, capture_output=True)
    count = _count(graph)
    for stack in ("prod-aws", "prod-gcp"):
        pair(stack, "preview", [*BLUEPRINT, "preview", stack], third_party_key(stack), pairs)
    pair("prod-aws graph", "cost", [*BLUEPRINT, "cost", str(graph), "--format", "json", "-o",
                                    str(work / "cost.json")], BARE_SDK, pairs, count)
    pair("prod-aws graph", "policy", [*BLUEPRINT, "policy", str(graph), "--format", "json", "-o",
                                      str(work / "report.json")], BARE_SDK, pairs, count)
    pair("prod-aws graph", "admit", [*BLUEPRINT, "admit", str(graph), str(ADMIT_WORKLOAD)], BARE_SDK, pairs, count)
    # A stack name: the first admit of the day may run the program; the pairs are the runs after it.
    first = measure("prod-aws", "admit (first)", [*BLUEPRINT, "admit", "prod-aws", str(ADMIT_WORKLOAD)], env=env)
    pair("prod-aws", "admit", [*BLUEPRINT, "admit", "prod-aws", str(ADMIT_WORKLOAD)], BARE_SDK, pairs)
    # Growth: generated stacks; the program's commands against the third-party floor, the readers against the SDK.
    program_floor = third_party_key("prod-aws")
    for n in sizes:
        case = f"{n} groups"
        stack = str(write_generated(n, work))
        sized = work / f"{n}-groups.json"
        subprocess.run([*BLUEPRINT, "graph", stack, "-o", str(sized)], cwd=ROOT, env=child_env(env),
                       check=True, capture_output=True)
        resources = _count(sized)
        pair(case, "graph", [*BLUEPRINT, "graph", stack, "-o", str(sized)], program_floor, size_pairs, resources)
        pair(case, "policy", [*BLUEPRINT, "policy", str(sized), "--format", "json", "-o", str(work / "report.json")],
             BARE_SDK, size_pairs, resources)
        pair(case, "cost", [*BLUEPRINT, "cost", str(sized), "--format", "json", "-o", str(work / "cost.json")],
             BARE_SDK, size_pairs, resources)
        pair(case, "preview", [*BLUEPRINT, "preview", stack], program_floor, size_pairs, resources)
    biggest = work / f"{max(sizes)}-groups.json" if sizes else None
    if biggest is not None and biggest.exists() and not skip_large:
        copies = max(1, -(-50_000 // _count(biggest)))
        large = work / "large.json"
        n = replicate(biggest, copies, large)
        pair(f"{n} resources", "policy", [*BLUEPRINT, "policy", str(large), "--format", "json", "-o",
                                          str(work / "report.json")], BARE_SDK, size_pairs, n)
    checkov_ran = False
    exe = shutil.which("checkov")
    if exe is not None:  # not a dependency: the peer comparison runs where it is installed
        manifests = work / "manifests"
        subprocess.run([*BLUEPRINT, "manifests", "prod-aws", "-o", str(manifests)], cwd=ROOT,
                       env=child_env(env), check=True, capture_output=True)
        policy_key = "policy:prod-aws graph"
        floors[policy_key] = "our policy pass: blueprint policy on the saved prod-aws graph (Checkov is the peer)"
        floor_argv[policy_key] = [*BLUEPRINT, "policy", str(graph), "--format", "json", "-o", str(work / "r.json")]
        pair("prod-aws manifests", "checkov", [exe, "-d", str(manifests), "--framework", "kubernetes", "--quiet",
                                               "--compact", "--skip-download"], policy_key, pairs)
        checkov_ran = True
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {
        "when": when,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    # child_env drops PYTHONDONTWRITEBYTECODE: the measured runs read the bytecode written by the first
                    "writes_bytecode": "PYTHONDONTWRITEBYTECODE" not in child_env()},
        "load": {"start": load_start, "end": load()},
        "pairs": pairs, "size_pairs": size_pairs,
        "checkov": "ran" if checkov_ran else "not installed",
        "floors": floors,
        "figures": figures,
        "single": [asdict(first)],
        "rows": [*rows_of(figures), {**asdict(first), "cpu_ms_per_resource": 0.0}],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2) + "\n"
    (out_dir / "latest.json").write_text(text)
    (out_dir / f"bench-{when.replace(':', '')}.json").write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return doc


def rows_of(figures: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat rows (each figure's medians, then each floor's once) for ``compare``, as earlier runs wrote them."""
    rows: list[dict[str, Any]] = []
    floors: dict[str, dict[str, Any]] = {}
    for f in figures:
        m = f["median"]
        rows.append({"case": f["case"], "command": f["command"], **m, "resources": f["resources"],
                     "cpu_ms_per_resource": round(1000 * m["cpu_s"] / f["resources"], 3) if f["resources"] else 0.0})
        floors.setdefault(f["floor"], {"case": "floor", "command": f["floor"], **f["floor_median"], "resources": 0,
                                       "cpu_ms_per_resource": 0.0})
    return rows + list(floors.values())


def _figure(doc: dict[str, Any], case: str, command: str) -> dict[str, Any] | None:
    return next((f for f in doc.get("figures") or [] if f["case"] == case and f["command"] == command), None)


@dataclass(frozen=True)
class Target:
    """One promise of the issue, the figure read for it and whether it holds (None: not measured in this run)."""

    name: str
    figure: str
    met: bool | None

    def line(self) -> str:
        """As printed."""
        verdict = {True: "met", False: "NOT MET", None: "not measured"}[self.met]
        return f"[{verdict}] {self.name}: {self.figure}"


def _ratio_text(f: dict[str, Any]) -> str:
    r = f["cpu_ratio"]
    return (f"{r['median']:.2f}x (min {r['min']:.2f}, max {r['max']:.2f}; {len(f['pairs'])} pairs; "
            f"{f['median']['cpu_s']:.2f} s CPU against {f['floor_median']['cpu_s']:.2f} s)")


def _ratio_target(doc: dict[str, Any], name: str, case: str, command: str, bound: float) -> Target:
    f = _figure(doc, case, command)
    if f is None or f["cpu_ratio"] is None:
        return Target(name, "not run", None)
    return Target(name, _ratio_text(f), f["cpu_ratio"]["median"] <= bound)


def growth(points: Sequence[tuple[int, float]]) -> float | None:
    """How much more each added resource costs between the two larger sizes than between the two smaller:
    (v3 - v2) / (r3 - r2) over (v2 - v1) / (r2 - r1) for ``points`` (resources, value) of three sizes. A constant
    (the imports, the interpreter) cancels out; 1 is linear, more is faster than linear. None: not measurable."""
    (r1, v1), (r2, v2), (r3, v3) = sorted(points)
    if r2 <= r1 or r3 <= r2 or v2 <= v1:
        return None
    return ((v3 - v2) / (r3 - r2)) / ((v2 - v1) / (r2 - r1))


def targets(doc: dict[str, Any]) -> list[Target]:
    """The issue's targets, each with its figure and whether it holds."""
    out = [
        _ratio_target(doc, f"prod-aws preview <= {PREVIEW_RATIO}x its third-party import floor", "prod-aws",
                      "preview", PREVIEW_RATIO),
        _ratio_target(doc, f"prod-gcp preview <= {PREVIEW_RATIO}x its third-party import floor", "prod-gcp",
                      "preview", PREVIEW_RATIO),
        _ratio_target(doc, f"cost on a saved graph <= {READER_RATIO}x a bare SDK import", "prod-aws graph", "cost",
                      READER_RATIO),
        _ratio_target(doc, f"policy on a saved graph <= {READER_RATIO}x a bare SDK import", "prod-aws graph",
                      "policy", READER_RATIO),
        _ratio_target(doc, f"admit on a saved graph <= {READER_RATIO}x a bare SDK import", "prod-aws graph", "admit",
                      READER_RATIO),
        _ratio_target(doc, f"admit on a stack name, after its first run of the day, <= {READER_RATIO}x a bare SDK "
                      "import", "prod-aws", "admit", READER_RATIO),
    ]
    for command, bound in (("graph", GRAPH_PEAK_MIB), ("policy", POLICY_PEAK_MIB)):
        f = _figure(doc, "1000 groups", command)
        name = f"{command} of 1,000 node groups under {bound:,} MiB peak"
        out.append(Target(name, f"{f['median']['peak_mib']:,.0f} MiB ({f['resources']:,} resources)",
                          f["median"]["peak_mib"] < bound) if f else Target(name, "not run", None))
    sized = sorted((f for f in doc.get("figures") or [] if f["case"].endswith(" groups")),
                   key=lambda f: int(f["case"].split()[0]))
    for command in ("graph", "policy"):
        runs = [f for f in sized if f["command"] == command][-3:]
        name = f"{command} linear in resources (CPU and peak memory per added resource, {LINEAR_GROWTH}x at most)"
        if len(runs) < 3:
            out.append(Target(name, "needs three sizes (--sizes 10,100,1000)", None))
            continue
        cases = " -> ".join(f["case"].split()[0] for f in runs)
        cpu = growth([(f["resources"], f["median"]["cpu_s"]) for f in runs])
        mem = growth([(f["resources"], f["median"]["peak_mib"]) for f in runs])
        text = (f"sizes {cases} groups: CPU {'-' if cpu is None else f'{cpu:.2f}x'}, "
                f"memory {'-' if mem is None else f'{mem:.2f}x'}")
        met = None if cpu is None or mem is None else cpu <= LINEAR_GROWTH and mem <= LINEAR_GROWTH
        out.append(Target(name, text, met))
    return out


def render(doc: dict[str, Any]) -> str:
    """The table, the floors' definitions, the targets and the machine's load, as printed."""
    if "figures" not in doc:
        return _render_rows(doc)
    head = (f"{'case':<24} {'command':<8} {'against':<20} {'res':>6} {'CPU ratio (min-max)':>20} {'cpu s':>7} "
            f"{'floor':>6} {'wall s':>7} {'ms/res':>7} {'MiB':>6}")
    load_start, load_end = doc["load"]["start"], doc["load"]["end"]
    lines = [f"machine: {doc['machine']['cpus']} CPUs, Python {doc['machine']['python']}, "
             f"{doc['machine']['platform']}; {doc['when']}"
             + ("" if doc["machine"].get("writes_bytecode", True) else
                "; PYTHONDONTWRITEBYTECODE is set: each run compiles the project's modules"),
             f"load average (1, 5, 15 min): {', '.join(map(str, load_start))} at the start, "
             f"{', '.join(map(str, load_end))} at the end",
             f"each figure: {doc['pairs']} pairs (sizes: {doc['size_pairs']}) of the command (A) and its floor (B), "
             "alternately; CPU ratio = median of the per-pair A/B CPU seconds (min-max)",
             head, "-" * len(head)]
    for f in doc["figures"]:
        r = f["cpu_ratio"]
        ratio = f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})" if r else "-"
        m = f["median"]
        per = f"{1000 * m['cpu_s'] / f['resources']:.2f}" if f["resources"] else "-"
        lines.append(f"{f['case']:<24} {f['command']:<8} {f['floor']:<20} {f['resources'] or '-':>6} {ratio:>20} "
                     f"{m['cpu_s']:>7.2f} {f['floor_median']['cpu_s']:>6.2f} {m['wall_s']:>7.2f} {per:>7} "
                     f"{m['peak_mib']:>6.0f}")
    for s in doc.get("single") or []:
        lines.append(f"{s['case']:<24} {s['command']:<8} one run: {s['cpu_s']:.2f} s CPU, {s['wall_s']:.2f} s wall, "
                     f"{s['peak_mib']:.0f} MiB (the pairs' admit runs after it)")
    lines += ["", "floors:", *(f"  {key}: {text}" for key, text in doc["floors"].items())]
    lines += ["", "targets:", *(f"  {t.line()}" for t in targets(doc))]
    return "\n".join(lines) + "\n"


def _render_rows(doc: dict[str, Any]) -> str:
    """A run written before issue 37 (single runs, no pairs): its rows as they were."""
    head = f"{'case':<22} {'command':<8} {'resources':>9} {'wall s':>8} {'cpu s':>8} {'ms cpu/res':>10} {'peak MiB':>9}"
    lines = [head, "-" * len(head)]
    for r in doc["rows"]:
        per = f"{r['cpu_ms_per_resource']:.2f}" if r["resources"] else "-"
        lines.append(f"{r['case']:<22} {r['command']:<8} {r['resources'] or '-':>9} {r['wall_s']:>8.2f} "
                     f"{r['cpu_s']:>8.2f} {per:>10} {r['peak_mib']:>9.0f}")
    return "\n".join(lines) + "\n"


def _find(doc: dict[str, Any], case: str, command: str) -> dict[str, Any] | None:
    return next((r for r in doc["rows"] if r["case"] == case and r["command"] == command), None)


def compare(base: dict[str, Any], new: dict[str, Any]) -> str:
    """New over base, row by row (below 1 is faster or smaller); where both runs paired a figure with its floor, the
    new median CPU ratio to the floor over the base's too (it does not move with the machine)."""
    lines = [f"{'case':<24} {'command':<14} {'wall':>7} {'cpu':>7} {'memory':>7} {'vs floor':>9}"]
    for r in new["rows"]:
        b = _find(base, r["case"], r["command"])
        if b is None:
            continue
        def ratio(key: str, row: dict[str, Any] = r, old: dict[str, Any] = b) -> str:
            return f"{row[key] / old[key]:.2f}x" if old[key] else "-"
        fn, fb = _figure(new, r["case"], r["command"]), _figure(base, r["case"], r["command"])
        floor = (f"{fn['cpu_ratio']['median'] / fb['cpu_ratio']['median']:.2f}x"
                 if fn and fb and fn["cpu_ratio"] and fb["cpu_ratio"] and fb["cpu_ratio"]["median"] else "-")
        lines.append(f"{r['case']:<24} {r['command']:<14} {ratio('wall_s'):>7} {ratio('cpu_s'):>7} "
                     f"{ratio('peak_mib'):>7} {floor:>9}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m blueprint.bench``."""
    args = list(argv if argv is not None else sys.argv[1:])
    if args[:1] == ["compare"]:
        if len(args) != 3:
            print("usage: python -m blueprint.bench compare BASE.json NEW.json", file=sys.stderr)
            return 2
        base, new = (json.loads(Path(p).read_text()) for p in args[1:])
        sys.stdout.write(compare(base, new))
        return 0
    parser = argparse.ArgumentParser(prog="python -m blueprint.bench")
    parser.add_argument("--sizes", default="10,100,1000", help="generated stack sizes (GPU node groups and teams)")
    parser.add_argument("--pairs", type=int, default=5, help="pairs (command, floor) per figure of the shipped stacks")
    parser.add_argument("--size-pairs", type=int, default=1, help="pairs per figure of the generated stacks")
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    parser.add_argument("--skip-large", action="store_true", help="skip the 50,000-resource policy run")
    opts = parser.parse_args(args)
    if opts.pairs < 1 or opts.size_pairs < 1:
        parser.error("--pairs and --size-pairs must be at least 1")
    sizes = [int(s) for s in opts.sizes.split(",") if s]
    doc = run_bench(sizes, opts.out, opts.skip_large, opts.pairs, opts.size_pairs)
    sys.stdout.write(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
