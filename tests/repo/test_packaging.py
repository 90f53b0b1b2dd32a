"""A non-editable install (`pip install .`) carries the whole program: the wheel's `blueprint` builds the
platform from a project folder that has only `stacks/`, with no source tree beside it."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

from tests.conftest import SHIPPED_STACKS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "components", "blueprint", "policies")


def _copy_sources(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv", "*.egg-info")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


def test_every_package_folder_is_shipped() -> None:
    """A package folder added under components/ or blueprint/ and not listed in pyproject.toml would be missing
    from the wheel (components.gcp was: an installed `blueprint preview prod-gcp` failed to import it)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for top in ("components", "blueprint")
               for init in (ROOT / top).rglob("__init__.py") if "__pycache__" not in init.parts}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == {"gpu_policies"}


def test_every_data_file_is_shipped() -> None:
    """A data file the program reads (a catalog, a replacements table, a CRD) must match its package's
    package-data globs, or the wheel lacks it (blueprint/clouds/<cloud>/replacements.yaml would have been)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs: dict[str, list[str]] = setuptools["package-data"]
    missing = []
    for top in ("components", "blueprint"):
        for path in (ROOT / top).rglob("*"):
            if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            package_dir = next(p for p in path.parents if (p / "__init__.py").is_file())
            package = ".".join(package_dir.relative_to(ROOT).parts)
            relative = path.relative_to(package_dir).as_posix()
            if not any(fnmatch.fnmatch(relative, g) for g in globs.get(package, [])):
                missing.append(f"{package}: {relative}")
    assert missing == [], "add these to [tool.setuptools.package-data] in pyproject.toml"


def test_wheel_install_runs_the_preview_of_every_shipped_stack(tmp_path: Path) -> None:
    src, dist, venv, project = tmp_path / "src", tmp_path / "dist", tmp_path / "venv", tmp_path / "project"
    src.mkdir()
    _copy_sources(src)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps", "--no-build-isolation",
                            "-w", str(dist), str(src)], check=True, capture_output=True, text=True)
    # The first `make setup` printed 175 lines of "Package would be ignored" for the CRD data folders.
    assert "would be ignored" not in build.stdout + build.stderr
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "blueprint/schemas/crds/kueue/SOURCE.md" in names
    for module in ("components/kubernetes/platform.py", "components/program.py", "gpu_policies/pack.py",
                   "components/spec/rules/node_groups.py", "components/gcp/gke.py",
                   "components/catalog/gcp_machines.yaml", "components/catalog/aws_instances.parsed.json",
                   "components/catalog/charts.yaml", "components/catalog/aws_regions.yaml",
                   "blueprint/schema/stack_file.py", "blueprint/schemas/stack-file.schema.json",
                   "blueprint/clouds/aws/replacements.yaml", "blueprint/clouds/gcp/replacements.yaml"):
        assert module in names, module

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, capture_output=True)
    # The project's dependencies (pulumi, pydantic, ...) come from this venv, after the wheel's own files.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project.mkdir()
    shutil.copytree(ROOT / "stacks", project / "stacks")
    env = {"PATH": "/usr/bin:/bin", "GPU_CLUSTER_NOW": "2026-11-29T00:00:00Z", "HOME": str(tmp_path)}
    where = subprocess.run([str(python), "-c", "import components, gpu_policies; print(components.__file__); "
                            "print(gpu_policies.__file__)"], cwd=project, env=env, check=True,
                           capture_output=True, text=True).stdout
    assert str(ROOT) not in where and where.count(site) == 2, where
    assert len(SHIPPED_STACKS) == 7
    for name in SHIPPED_STACKS:
        out = subprocess.run([str(venv / "bin" / "blueprint"), "preview", name], cwd=project, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{name}: {out.stderr[-3000:]}"
        assert ("GPU stack: GKE's own" if "-gcp" in name else "GPU stack: gpu-operator v26.7.0") in out.stdout, \
            name
        assert "policy verdict: PASS" in out.stdout, name
        if name == "prod-aws":
            assert "queues: kueue 0.19.2; cohort prod-train-gpus" in out.stdout
    # Day two reads the replacements tables (package data of blueprint.clouds.<cloud>).
    for name in ("prod-aws", "prod-gcp"):
        graph = tmp_path / f"{name}.json"
        subprocess.run([str(venv / "bin" / "blueprint"), "graph", name, "-o", str(graph)], cwd=project, env=env,
                       check=True, capture_output=True, timeout=300)
        out = subprocess.run([str(venv / "bin" / "blueprint"), "preview", name, "--previous", str(graph)],
                             cwd=project, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and "no node group rolls, nothing is replaced or removed" in out.stdout, \
            out.stderr[-3000:]
