"""``make bench``: how fast the offline engine, the policy pass and the preview are, and how they grow.

For prod-aws and for generated stacks with 10, 100 and 1,000 GPU node groups and teams, each command runs
in its own process (as a user runs it) and the wall time, CPU time and peak memory are read from the
operating system. The import floor is the time a process takes to import every module a preview loads and
exit: no preview can be faster. A 50,000-resource graph (copies of the 1,000-group graph) goes through
the policy pass, and Checkov runs on the same stack's manifests when it is installed.

    python -m blueprint.bench [--sizes 10,100,1000] [--out bench/] [--skip-large]
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
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "stacks"
BLUEPRINT = [sys.executable, "-m", "blueprint"]


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
        "name": f"team-{i:04d}", "costCenter": f"cc-{i:04d}",
        "roleArns": [f"arn:aws:iam::111122223333:role/team-{i:04d}"],
        "quotas": [{"nodeGroup": f"gpu-{i:04d}", "gpus": 16}],
        "budget": {"monthlyUsd": 50000, "notify": [f"team-{i:04d}@example.com"]},
    } for i in range(groups)]
    spec["workload"]["peakGpus"] = 16 * groups
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


def measure(case: str, command: str, argv: Sequence[str], resources: int = 0,
            env: dict[str, str] | None = None) -> Measure:
    """Run one command in a child process; read its wall time, CPU time and peak memory."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, cwd=ROOT)
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


def import_floor(modules: Sequence[str]) -> Measure:
    """A process that imports every given module and leaves with ``os._exit``: the preview's floor."""
    # Some loaded modules cannot be imported by name (extension-internal ones): they are skipped.
    code = (f"import importlib, os\nfor m in {list(modules)!r}:\n    try:\n        importlib.import_module(m)\n"
            "    except Exception:\n        pass\nos._exit(0)\n")
    return measure("floor", "import", [sys.executable, "-c", code])


def preview_modules(stack: str) -> list[str]:
    """The modules a preview of ``stack`` has loaded when it finishes (read in a child process)."""
    code = ("import sys, json\nfrom blueprint.cli import main\nimport contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['preview', {stack!r}])\n"
            "print(json.dumps(sorted(m for m in sys.modules if not m.startswith('__'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return [m for m in modules if m not in ("__main__",)]


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


def checkov(manifests: Path) -> Measure | None:
    """Checkov's Kubernetes scan of the same manifests, when Checkov is installed (not a dependency)."""
    exe = shutil.which("checkov")
    if exe is None:
        return None
    return measure("manifests", "checkov", [exe, "-d", str(manifests), "--framework", "kubernetes", "--quiet",
                                            "--compact", "--skip-download"])


def run_bench(sizes: Sequence[int], out_dir: Path, skip_large: bool) -> dict[str, Any]:
    """Every measurement; returns the JSON document (also written under ``out_dir``)."""
    work = Path(tempfile.mkdtemp(prefix="blueprint-bench-"))
    env = {"GPU_CLUSTER_NOW": "2026-11-29T00:00:00Z"}
    rows: list[Measure] = []
    cases: list[tuple[str, str]] = [("prod-aws", str(STACKS / "Pulumi.prod-aws.yaml"))]
    cases += [(f"{n} groups", str(write_generated(n, work))) for n in sizes]
    for case, stack in cases:
        graph = work / f"{case.replace(' ', '-')}.json"
        row = measure(case, "graph", [*BLUEPRINT, "graph", stack, "-o", str(graph)], env=env)
        count = _count(graph)
        rows.append(Measure(**{**asdict(row), "resources": count}))
        rows.append(measure(case, "policy", [*BLUEPRINT, "policy", str(graph), "--format", "json",
                                             "-o", str(work / "report.json")], count, env=env))
        rows.append(measure(case, "cost", [*BLUEPRINT, "cost", str(graph), "--format", "json",
                                           "-o", str(work / "cost.json")], count, env=env))
        rows.append(measure(case, "preview", [*BLUEPRINT, "preview", stack], count, env=env))
        print(f"  {case}: {count} resources measured", file=sys.stderr)
    floor = import_floor(preview_modules("prod-aws"))
    rows.append(floor)
    biggest = work / f"{max(sizes)}-groups.json" if sizes else None
    if biggest is not None and biggest.exists() and not skip_large:
        copies = max(1, -(-50_000 // _count(biggest)))
        large = work / "large.json"
        n = replicate(biggest, copies, large)
        rows.append(measure(f"{n} resources", "policy", [*BLUEPRINT, "policy", str(large), "--format", "json",
                                                          "-o", str(work / "report.json")], n, env=env))
    manifests = work / "manifests"
    subprocess.run([*BLUEPRINT, "manifests", "prod-aws", "-o", str(manifests)], cwd=ROOT, env={**os.environ, **env},
                   check=True, capture_output=True)
    ck = checkov(manifests)
    if ck is not None:
        rows.append(ck)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {
        "when": when,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "checkov": "ran" if ck is not None else "not installed",
        "rows": [{**asdict(r), "cpu_ms_per_resource": round(r.cpu_ms_per_resource, 3)} for r in rows],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2) + "\n"
    (out_dir / "latest.json").write_text(text)
    (out_dir / f"bench-{when.replace(':', '')}.json").write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return doc


def _find(doc: dict[str, Any], case: str, command: str) -> dict[str, Any] | None:
    return next((r for r in doc["rows"] if r["case"] == case and r["command"] == command), None)


def targets(doc: dict[str, Any]) -> list[str]:
    """The issue's targets, each with its figure and whether it holds."""
    out = []
    floor = _find(doc, "floor", "import")
    preview = _find(doc, "prod-aws", "preview")
    if floor and preview:
        ratio = preview["wall_s"] / floor["wall_s"]
        out.append(f"preview prod-aws {preview['wall_s']:.2f} s wall (< 3 s: {preview['wall_s'] < 3}); "
                   f"{ratio:.2f}x the import floor of {floor['wall_s']:.2f} s (<= 2x: {ratio <= 2})")
    for command in ("graph", "policy", "cost"):
        small, big = _find(doc, "100 groups", command), _find(doc, "1000 groups", command)
        if small and big and small["cpu_ms_per_resource"]:
            growth = big["cpu_ms_per_resource"] / small["cpu_ms_per_resource"]
            out.append(f"{command}: {big['cpu_ms_per_resource']:.2f} ms/resource at 1,000 groups vs "
                       f"{small['cpu_ms_per_resource']:.2f} at 100: {growth:.2f}x (<= 1.2x: {growth <= 1.2})")
    graph1k, policy1k = _find(doc, "1000 groups", "graph"), _find(doc, "1000 groups", "policy")
    if graph1k:
        out.append(f"graph of 1,000 groups: {graph1k['wall_s']:.1f} s (< 60: {graph1k['wall_s'] < 60}), "
                   f"{graph1k['peak_mib']:.0f} MiB (< 800: {graph1k['peak_mib'] < 800})")
    if policy1k:
        out.append(f"policy of 1,000 groups: {policy1k['wall_s']:.1f} s (< 30: {policy1k['wall_s'] < 30})")
    large = next((r for r in doc["rows"] if r["case"].endswith(" resources") and r["command"] == "policy"), None)
    if large:
        out.append(f"policy of {large['resources']:,} resources: {large['wall_s']:.1f} s "
                   f"(< 90: {large['wall_s'] < 90})")
    ck, policy = _find(doc, "manifests", "checkov"), _find(doc, "prod-aws", "policy")
    if ck and policy:
        speed = ck["wall_s"] / policy["wall_s"]
        out.append(f"policy vs Checkov on prod-aws: {speed:.1f}x faster (>= 8x: {speed >= 8})")
    elif policy:
        out.append("Checkov is not installed: the policy-vs-Checkov comparison was not run")
    return out


def render(doc: dict[str, Any]) -> str:
    """The table and the targets, as printed."""
    head = f"{'case':<22} {'command':<8} {'resources':>9} {'wall s':>8} {'cpu s':>8} {'ms cpu/res':>10} {'peak MiB':>9}"
    lines = [f"machine: {doc['machine']['cpus']} CPUs, Python {doc['machine']['python']}, {doc['machine']['platform']}",
             head, "-" * len(head)]
    for r in doc["rows"]:
        per = f"{r['cpu_ms_per_resource']:.2f}" if r["resources"] else "-"
        lines.append(f"{r['case']:<22} {r['command']:<8} {r['resources'] or '-':>9} {r['wall_s']:>8.2f} "
                     f"{r['cpu_s']:>8.2f} {per:>10} {r['peak_mib']:>9.0f}")
    lines += ["", "targets:", *(f"  {t}" for t in targets(doc))]
    return "\n".join(lines) + "\n"


def compare(base: dict[str, Any], new: dict[str, Any]) -> str:
    """New over base, row by row (below 1 is faster or smaller)."""
    lines = [f"{'case':<22} {'command':<8} {'wall':>7} {'cpu':>7} {'memory':>7}"]
    for r in new["rows"]:
        b = _find(base, r["case"], r["command"])
        if b is None:
            continue
        def ratio(key: str, row: dict[str, Any] = r, old: dict[str, Any] = b) -> str:
            return f"{row[key] / old[key]:.2f}x" if old[key] else "-"
        lines.append(f"{r['case']:<22} {r['command']:<8} {ratio('wall_s'):>7} {ratio('cpu_s'):>7} "
                     f"{ratio('peak_mib'):>7}")
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
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    parser.add_argument("--skip-large", action="store_true", help="skip the 50,000-resource policy run")
    opts = parser.parse_args(args)
    sizes = [int(s) for s in opts.sizes.split(",") if s]
    doc = run_bench(sizes, opts.out, opts.skip_large)
    sys.stdout.write(render(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
