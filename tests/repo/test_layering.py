"""Imports only point down (DESIGN.md, "Layers"): spec -> catalog -> clouds and kubernetes -> cluster ->
program; `blueprint/` reads them all and nothing imports it; the Kubernetes layer names no cloud; no cloud
imports another; the policy pack stays standalone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLOUDS = ("aws", "gcp")


def imports_of(path: Path) -> set[str]:
    """Every module a file imports (absolute names; relative imports resolved against its package)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{alias.name}" for alias in node.names}
    return out


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", modules("components/kubernetes"), ids=lambda p: p.name)
def test_the_kubernetes_layer_imports_no_cloud(path: Path) -> None:
    bad = {m for m in imports_of(path) if m.startswith(("pulumi_aws", "pulumi_gcp"))
           or any(m.startswith(f"components.{cloud}") for cloud in CLOUDS)}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("cloud", CLOUDS)
def test_no_cloud_imports_another(cloud: str) -> None:
    others = [c for c in CLOUDS if c != cloud]
    for path in modules(f"components/{cloud}"):
        bad = {m for m in imports_of(path) for o in others
               if m.startswith((f"components.{o}", f"pulumi_{o}"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_lower_layers_never_import_upper_ones() -> None:
    below = {
        "components/spec": ("components.aws", "components.gcp", "components.kubernetes", "components.cluster",
                            "pulumi"),
        "components/catalog": ("components.spec", "components.aws", "components.gcp", "components.kubernetes",
                               "components.cluster"),
        "components/clock.py": ("components.",),
        "components/sizing": ("components.aws", "components.gcp", "components.kubernetes", "components.cluster",
                              "pulumi"),
    }
    for where, forbidden in below.items():
        target = ROOT / where
        for path in ([target] if target.is_file() else modules(where)):
            bad = {m for m in imports_of(path) if m.startswith(forbidden)}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_nothing_imports_the_tooling() -> None:
    for folder in ("components", "policies"):
        for path in modules(folder):
            bad = {m for m in imports_of(path) if m == "blueprint" or m.startswith("blueprint.")}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
    for path in modules("policies"):
        assert not {m for m in imports_of(path) if m.startswith("components")}, path


@pytest.mark.parametrize("where", ["components/cluster.py", "components/planes.py", "components/program.py"])
def test_the_wiring_picks_the_cloud_by_name(where: str) -> None:
    # cluster.py imports components.<spec.cloud> at run time; it names no cloud in its imports
    bad = {m for m in imports_of(ROOT / where) if m.startswith(("pulumi_aws", "pulumi_gcp"))
           or any(m.startswith(f"components.{cloud}") for cloud in CLOUDS)}
    assert not bad, f"{where} imports {sorted(bad)}"


def test_the_packs_namespace_lists_equal_the_catalogs() -> None:
    # The pack stays standalone, so it keeps copies; they must not drift from the program's one place.
    from gpu_policies import common, security

    from components.catalog.namespaces import privileged_namespaces, system_namespaces

    assert sorted(common.DEFAULT_SYSTEM_NAMESPACES) == sorted(system_namespaces())
    assert list(security.PRIVILEGED_NAMESPACES.default) == list(privileged_namespaces())


def test_the_renderer_leaves_the_cloud_planes_to_the_cloud_module() -> None:
    bad = {m for m in imports_of(ROOT / "blueprint" / "preview" / "render.py")
           if any(m.startswith(f"components.{cloud}") for cloud in CLOUDS)}
    assert not bad, f"blueprint/preview/render.py imports {sorted(bad)}"
