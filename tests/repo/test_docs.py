"""The documentation site (`make docs`, issue 26): MkDocs builds docs/ offline with --strict, every page of the nav
exists and is built, a broken link, a missing anchor or a link out of docs/ fails the build, the first page shows the
report's picture, and the README's map points at pages that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, check=False, timeout=300)


def _pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _pages(value)]
    return []


def test_the_site_builds_strictly_with_every_page_of_the_nav(tmp_path: Path) -> None:
    built = _build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = _pages(config["nav"])
    assert len(pages) == len(set(pages))
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from mkdocs_hooks import PUBLISHED
    finally:
        sys.path.remove(str(ROOT / "tools"))
    for page in pages:
        assert (ROOT / "docs" / page).is_file() or page in PUBLISHED.values(), page
        assert (tmp_path / "site" / page.replace(".md", ".html")).is_file(), page
    written = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert written <= set(pages), f"pages left out of the nav: {written - set(pages)}"
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'src="img/report-prod-aws.png"' in index
    assert (tmp_path / "site" / "img" / "report-prod-aws.png").is_file()


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for name in ("docs", "tools", "policies", "examples"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_a_broken_link_an_unknown_anchor_or_a_link_out_of_docs_fails_the_build(tmp_path: Path) -> None:
    cases = {
        "[gone](no-such-page.md)": "not found among documentation files",
        "[gone](runbooks.md#no-such-alert)": "does not contain an anchor '#no-such-alert'",
        "[gone](../components/program.py)": "outside docs/ and not published",
    }
    for i, (link, message) in enumerate(cases.items()):
        root = _copy(tmp_path / str(i))
        with (root / "docs" / "index.md").open("a", encoding="utf-8") as fh:
            fh.write(f"\n{link}\n")
        built = _build(root, root / "site")
        assert built.returncode != 0, link
        assert message in built.stderr, built.stderr


def test_the_readme_map_points_at_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert links
    for link in links:
        assert (ROOT / link).is_file(), link


# The rules blueprint admit gained in issues 35 and 36, which docs/cli.md must list.
ADMIT_RULES = ("count-validation", "larger-than-any-node", "gpudirect-sidecar", "priority-class-exists",
               "priority-class-quota", "runtime-class-exists", "scheduler-name", "resource-claim", "dra-not-set-up",
               "resources", "gateway-installed", "pool-selects-pods", "pool-target-port", "pool-picker",
               "route-parent", "route-not-allowed", "route-backend")


def test_cli_md_lists_the_rules_admit_names_and_no_other() -> None:
    """docs/cli.md's table of admit's rules lists the new ones, and every name in it is a rule admit's code gives (a
    quoted string in blueprint/admit or a cloud's admit module)."""
    text = (ROOT / "docs" / "cli.md").read_text()
    table = text.split("#### `blueprint admit`: the rules it names", 1)[1].split("\n####", 1)[0]
    listed = {name for row in table.splitlines() if row.startswith("| ") and not row.startswith("| step")
              for name in re.findall(r"`([a-z][a-z0-9-]*)`", row.split(" | ", 1)[1])}
    code = "".join(p.read_text() for p in [*sorted((ROOT / "blueprint" / "admit").glob("*.py")),
                                             *sorted((ROOT / "blueprint" / "clouds").glob("*/admit.py"))])
    assert set(ADMIT_RULES) <= listed
    assert not {name for name in listed if f'"{name}"' not in code}
