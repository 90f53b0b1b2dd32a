"""The readers of a saved graph (``admit``, ``cost``, ``report``, ``policy`` on ``graph.json``) import only what they
read: never the Pulumi program nor a cloud SDK; ``admit`` and ``cost`` not the spec's models or the Pulumi SDK either.
Each command runs in a fresh interpreter, which then lists the modules it loaded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import offline_run

ROOT = Path(__file__).resolve().parents[2]
# The cloud SDKs and the program: every module of components/aws and components/gcp but the light ones the readers
# use (the packages themselves, names, figures), the cloud-neutral program and the platform's builders.
SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_kubernetes")
LIGHT = {"components.aws", "components.aws.names", "components.aws.figures",
         "components.gcp", "components.gcp.names", "components.gcp.figures"}
PROGRAM = ("components.aws.", "components.gcp.", "components.program", "components.cluster",
           "components.kubernetes.platform", "components.kubernetes.objects")
# What admit and cost need none of: the Pulumi SDK, the analyzer's policy SDK, the spec's models.
EXTRA = ("pulumi", "pulumi_policy", "components.spec", "pydantic")

_RUN = """
import contextlib, io, json, sys
from blueprint.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded(*argv: str) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", _RUN, *argv], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=300)
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    return int(doc["code"]), list(doc["modules"])


def _heavy(modules: list[str], extra: bool) -> list[str]:
    def matches(name: str, prefixes: tuple[str, ...]) -> bool:
        return any(name == p.rstrip(".") or name.startswith(p.rstrip(".") + ".") for p in prefixes)

    return [m for m in modules if m not in LIGHT and (matches(m, SDKS) or matches(m, PROGRAM)
                                                       or (extra and matches(m, EXTRA)))]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("graphs")
    out = {}
    for stack in ("prod-aws", "prod-gcp"):
        out[stack] = folder / f"{stack}.json"
        out[stack].write_text(offline_run(stack).graph.to_json(), encoding="utf-8")
    return out


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_admit_on_a_saved_graph_loads_neither_the_program_nor_an_sdk(stack: str, graphs: dict[str, Path]) -> None:
    workload = ROOT / "examples" / "workloads" / stack / "train-multinode.yaml"
    code, modules = _loaded("admit", str(graphs[stack]), str(workload))
    assert code == 0
    assert _heavy(modules, extra=True) == []


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_cost_on_a_saved_graph_loads_neither_the_program_nor_an_sdk(stack: str, graphs: dict[str, Path]) -> None:
    code, modules = _loaded("cost", str(graphs[stack]), "--usage", str(ROOT / "stacks" / "prod-aws.usage.yaml"))
    assert code == 0
    assert _heavy(modules, extra=True) == []


def test_report_on_a_saved_graph_loads_neither_the_program_nor_a_cloud_sdk(graphs: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    code, modules = _loaded("report", str(graphs["prod-aws"]), "-o", str(tmp_path / "report.html"))
    assert code == 0
    # The policy verdict still runs through the pack's analyzer (pulumi, pulumi_policy), and the goodput section
    # through the sizing model (the spec's models): only the program and the cloud SDKs are held out.
    assert _heavy(modules, extra=False) == []


def test_policy_on_a_saved_graph_loads_neither_the_program_nor_a_cloud_sdk(graphs: dict[str, Path]) -> None:
    code, modules = _loaded("policy", str(graphs["prod-gcp"]), "--format", "json")
    assert code in (0, 1)
    assert _heavy(modules, extra=False) == []
