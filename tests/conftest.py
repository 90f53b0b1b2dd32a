"""Shared fixtures: the shipped stacks, their offline runs, and a mutable copy of a valid spec."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.graph.engine import ProgramRun, run_program
from blueprint.graph.stackfile import STACKS_DIR, StackFile, available_stacks, load_stack

ROOT = Path(__file__).resolve().parent.parent


class ReadOutsideRepositoryError(RuntimeError):
    """A test or the program opened a file beside the checkout (../shared, a sibling project): a user who clones
    the repository has nothing there. Not an OSError, so no reader turns it into an ordinary "cannot be read"."""


def _refuse_reads_beside_the_checkout() -> None:
    """Every open() of a path under the checkout's parent folder but outside the checkout fails, in every run.

    The venv, the standard library, temporary folders and the home folder lie elsewhere and stay readable. When
    the checkout sits at the filesystem's top level its parent is everything, and nothing is refused here
    (.ci/run still runs the suite in a clone with nothing beside it)."""
    parent = ROOT.parent
    if parent == Path(parent.anchor):
        return
    inside, beside = str(ROOT) + os.sep, str(parent) + os.sep

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not isinstance(args[0], str | bytes | os.PathLike):
            return
        path = os.path.abspath(os.fsdecode(args[0]))
        if path.startswith(beside) and not (path + os.sep).startswith(inside):
            raise ReadOutsideRepositoryError(f"{path}: tests and the program must not read outside the repository "
                                        f"({ROOT}); copy what a test needs into tests/fixtures with a SOURCE note")

    sys.addaudithook(hook)


_refuse_reads_beside_the_checkout()
# The program compares Capacity Block windows with the clock; pin it so graphs and goldens do not change
# as days pass (the shipped prod block, 2027-01-04 to 2027-01-18, is in the future at this moment).
TEST_NOW = "2026-11-29T00:00:00Z"
os.environ["GPU_CLUSTER_NOW"] = TEST_NOW
# The graph cache (blueprint/graph/cache.py) is off for the suite and the commands its tests start: every test sees a
# fresh run of the program, and nothing is written to the user's cache. tests/cli/test_graph_cache.py turns it on in a
# tmp folder.
os.environ["BLUEPRINT_NO_CACHE"] = "1"
# The policy pack is imported the way the Pulumi CLI runs it: from its own folder.
if str(ROOT / "policies") not in sys.path:
    sys.path.insert(0, str(ROOT / "policies"))
SHIPPED_STACKS = available_stacks()
# Stacks by cloud (the name says it: <env>-aws, <env>-gcp, or <env>-<cloud>-<variant> such as prod-aws-slurm; test_gcp
# checks the spec agrees).
AWS_STACKS = [s for s in SHIPPED_STACKS if "-aws" in s]
GCP_STACKS = [s for s in SHIPPED_STACKS if "-gcp" in s]
# GKE has no version in the spec (its release channel picks it); the objects are checked against the oldest minor
# the REGULAR channel may still run (GKE release schedule, read 2026-11-30: 1.33 until mid-2027).
GKE_SCHEMA_VERSION = "1.33"


def kubernetes_version(name: str) -> str:
    """The Kubernetes minor the stack's objects are validated against."""
    spec = stack(name).spec
    return spec.aws_spec().control_plane.kubernetes_version if spec.cloud == "aws" else GKE_SCHEMA_VERSION


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/*.json from the program")


@cache
def stack(name: str) -> StackFile:
    return load_stack(name)


@cache
def offline_run(name: str) -> ProgramRun:
    sf = stack(name)
    return run_program(sf.name, sf.config, sf.region)


def raw_stack_config(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{name}.yaml").read_text())
    return copy.deepcopy(doc["config"])


@pytest.fixture
def prod_spec() -> dict[str, Any]:
    """A fresh, mutable copy of the production spec (valid as shipped)."""
    return raw_stack_config("prod-aws")["gpu-cluster:spec"]


@pytest.fixture
def dev_spec() -> dict[str, Any]:
    """A fresh, mutable copy of the development spec (valid as shipped)."""
    return raw_stack_config("dev-aws")["gpu-cluster:spec"]


CatalogEdit = Callable[[Callable[[dict[str, Any]], None]], None]


@pytest.fixture
def edited_aws_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CatalogEdit]:
    """Edit a copy of the AWS instance catalog for one test: ``edit(change)`` calls ``change(instances)`` on the
    copy's ``instances`` mapping and makes the program read the copy (the shipped file is never touched).

    For figures the shipped catalog no longer lacks: a test of what the program does with an unknown or a secondary
    figure builds one here, instead of relying on today's gaps in the data."""
    from components.catalog import instances, yaml_files

    def edit(change: Callable[[dict[str, Any]], None]) -> None:
        data = yaml.safe_load(instances.CATALOG_FILE.read_text(encoding="utf-8"))
        change(data["instances"])
        copy_file = tmp_path / instances.CATALOG_FILE.name
        copy_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        monkeypatch.setattr(instances, "CATALOG_FILE", copy_file)
        instances.load_aws_catalog.cache_clear()
        # The parse-once cache keys a file by path, size and modification time: a second edit in the same tick at the
        # same size would be served the first one's parse.
        yaml_files._load.cache_clear()

    yield edit
    instances.load_aws_catalog.cache_clear()


def run_spec(spec: dict[str, Any], stack_name: str = "test", region: str | None = None) -> ProgramRun:
    """Run the program on an in-memory spec (validated first, as the CLI does)."""
    from components.spec import parse_spec

    parsed = parse_spec(spec, f"stacks/Pulumi.{stack_name}.yaml")
    if parsed.cloud == "gcp":
        gcp_region = region or parsed.gcp_spec().region
        return run_program(stack_name, {"gpu-cluster:spec": spec, "gcp:region": gcp_region}, gcp_region)
    config = {"gpu-cluster:spec": spec, "aws:region": region or parsed.aws_spec().region}
    return run_program(stack_name, config, parsed.aws_spec().region)


Mutator = Callable[[dict[str, Any]], None]


def json_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON-like value (for mutation strategies)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += json_paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += json_paths(v, (*prefix, i))
    return out


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A stack's graph as a JSON file (what `blueprint admit <graph.json>` reads), written once per module."""
    folder = tmp_path_factory.mktemp("graphs")
    written: dict[str, Path] = {}

    def get(stack: str) -> Path:
        if stack not in written:
            written[stack] = folder / f"{stack}.json"
            written[stack].write_text(offline_run(stack).graph.to_json(), encoding="utf-8")
        return written[stack]
    return get
