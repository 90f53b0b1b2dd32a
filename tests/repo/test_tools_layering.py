"""The tools' house (blueprint/): one package per command family, one folder per cloud, no circles, no giant module.

- No import cycle inside ``blueprint/``, counting imports made inside functions (only those under ``if
  TYPE_CHECKING:`` are left out: they never run). A family's neutral code reaches a cloud's module through the
  registry (``clouds.part(cloud, "<family>")``), never by importing it: the cloud folders are a layer above the
  families, importing their interfaces and the neutral modules below them.
- What a cloud's tools do is in ``blueprint/clouds/<cloud>/``: no module outside it names the cloud's resource types
  or provider, imports its program modules, its Pulumi provider or its SDKs, or imports the folder itself; a cloud's
  folder imports no other cloud's.
- Every cloud folder has a module of each family, and declares (for mypy) that each meets the family's interface.
- No module of ``blueprint/`` is longer than 600 lines; the CLI's modules stay a few hundred.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from blueprint import clouds

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "blueprint"
CLOUD_SDKS = ("boto3", "botocore", "google.cloud", "google.auth", "google.api_core", "googleapiclient")
# Interfaces each cloud module meets: family -> (module declaring it, protocol name).
INTERFACES = {
    "graph": ("blueprint.graph.cloud", "CloudGraph"),
    "pricing": ("blueprint.cost.cloud", "CloudPricing"),
    "checks": ("blueprint.acceptance.cloud", "CloudChecks"),
    "admit": ("blueprint.admit.cloud", "CloudAdmit"),
    "preview": ("blueprint.preview.cloud", "CloudPreview"),
    "report": ("blueprint.report.cloud", "CloudReport"),
    "examples": ("blueprint.policy.cloud", "CloudExamples"),
    "changes": ("blueprint.changes.cloud", "CloudChanges"),
    "deployer": ("blueprint.deployer.cloud", "CloudDeployer"),
}
# The one module outside blueprint/clouds that names a cloud, and why: the benchmark builds its scale cases from
# prod-aws's stack file (a measurement of that stack, not a tool a new cloud needs).
NAMES_A_CLOUD = {"blueprint/bench.py"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def tool_modules() -> list[Path]:
    return sorted(TOOLS.rglob("*.py"))


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out |= {id(n) for child in node.body for n in ast.walk(child)}
    return out


def imports(path: Path) -> set[str]:
    """Every module a file imports when it runs (at module level or inside functions), relative imports resolved;
    ``from a import b`` counts ``a`` and, when ``a.b`` is a module, ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    name = module_name(path) if path.is_relative_to(ROOT) else path.stem
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
    return out


def dynamic_parts(path: Path) -> set[str]:
    """The cloud modules a file imports through the registry: ``clouds.part(x, "<family>")`` with a literal family."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "part"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "clouds"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant)):
            out |= {f"blueprint.clouds.{cloud}.{node.args[1].value}" for cloud in clouds.names()}
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the blueprint modules it imports, and the packages it enters to reach them (importing a.b.c from
    outside a runs a/__init__ and a/b/__init__ first; from inside a.b, a.b is already running)."""
    known = {module_name(p): p for p in tool_modules()}
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = {m for m in imports(path) if m in known}
        own = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets |= {package for t in set(targets) for i in range(2, t.count(".") + 1)
                    if not (own + ".").startswith((package := ".".join(t.split(".")[:i])) + ".")}
        graph[name] = (targets - {name}) & set(known)
    return graph


def cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Each cycle found by a depth-first walk (one per back edge)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> Iterator[list[str]]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                yield [*stack[stack.index(nxt):], nxt]
            elif nxt not in state:
                yield from visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            yield from visit(node)


def test_no_import_cycle_inside_the_tools() -> None:
    found = list(cycles(import_graph()))
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    # The check above is only worth something if a cycle is seen, and a lazy import (inside a function) counts.
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def load():\n    from blueprint.graph.eventlog import read_event_log\n", encoding="utf-8")
    assert "blueprint.graph.eventlog" in imports(lazy)
    graph = import_graph()
    graph["blueprint.graph.model"] = graph["blueprint.graph.model"] | {"blueprint.graph.eventlog"}
    assert any("blueprint.graph.eventlog" in c for c in cycles(graph))


def test_neutral_code_reaches_the_clouds_through_the_registry() -> None:
    # Each family's interface module asks the registry for its cloud modules; that is how every cloud is found.
    for family, (module, _) in INTERFACES.items():
        path = ROOT / (module.replace(".", "/") + ".py")
        assert {f"blueprint.clouds.{c}.{family}" for c in clouds.names()} <= dynamic_parts(path), module


def _docstring_ids(tree: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def cloud_names_in(path: Path) -> set[str]:
    """The string constants of a module (docstrings aside) that name a cloud: its name, one of its resource type
    tokens, its provider."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstring_ids(tree)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
            if any(text == c or text.startswith((f"{c}:", f"pulumi:providers:{c}")) for c in clouds.names()):
                out.add(text)
    return out


@pytest.mark.parametrize("path", [p for p in tool_modules() if "clouds" not in p.relative_to(TOOLS).parts],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_cloud_folders_know_a_cloud(path: Path) -> None:
    where = path.relative_to(ROOT).as_posix()
    if where in NAMES_A_CLOUD:
        return
    named = cloud_names_in(path)
    assert not named, f"{where} names a cloud ({sorted(named)[:5]}): move it to blueprint/clouds/<cloud>/"
    bad = {m for m in imports(path) for c in clouds.names()
           if m.startswith((f"blueprint.clouds.{c}", f"components.{c}", f"pulumi_{c}")) or m.startswith(CLOUD_SDKS)}
    assert not bad, f"{where} imports {sorted(bad)}: only blueprint/clouds/<cloud>/ may"


def test_the_rule_sees_a_cloud_named_outside_its_folder(tmp_path: Path) -> None:
    leak = tmp_path / "leak.py"
    leak.write_text('"""Docstrings may say aws:eks/cluster:Cluster."""\nEKS = "aws:eks/cluster:Cluster"\n'
                    'def f(cloud: str) -> bool:\n    return cloud == "gcp"\n', encoding="utf-8")
    assert cloud_names_in(leak) == {"aws:eks/cluster:Cluster", "gcp"}


@pytest.mark.parametrize("cloud", clouds.names())
def test_a_cloud_folder_imports_no_other_cloud(cloud: str) -> None:
    others = [c for c in clouds.names() if c != cloud]
    for path in sorted((TOOLS / "clouds" / cloud).rglob("*.py")):
        bad = {m for m in imports(path) for o in others
               if m.startswith((f"blueprint.clouds.{o}", f"components.{o}", f"pulumi_{o}"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("cloud", clouds.names())
def test_every_cloud_folder_meets_every_family_interface(cloud: str) -> None:
    folder = TOOLS / "clouds" / cloud
    assert set(clouds.FAMILIES) == set(INTERFACES)
    declared = (folder / "__init__.py").read_text(encoding="utf-8")
    for family, (module, protocol) in INTERFACES.items():
        assert (folder / f"{family}.py").is_file(), f"blueprint/clouds/{cloud}/{family}.py is missing"
        # mypy checks the module against the protocol through this annotated assignment.
        assert f"_{family}: {protocol} = {family}" in declared, f"{cloud}/__init__.py does not declare {family}"
        assert f"from {module} import {protocol}" in declared
        part = clouds.part(cloud, family)
        members = _protocol_members(module, protocol)
        missing = sorted(m for m in members if not hasattr(part, m))
        assert not missing, f"blueprint/clouds/{cloud}/{family}.py lacks {missing}"


def _protocol_members(module: str, protocol: str) -> set[str]:
    import importlib

    cls = getattr(importlib.import_module(module), protocol)
    return {n for n in vars(cls) if not n.startswith("_")}


@pytest.mark.parametrize("path", tool_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_tools_module_is_over_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    limit = 300 if path.parent.name == "cli" else 600
    assert lines <= limit, f"{path.relative_to(ROOT)} has {lines} lines (at most {limit})"


def test_the_top_of_blueprint_holds_packages() -> None:
    top = sorted(p.name for p in TOOLS.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "bench.py"], top
