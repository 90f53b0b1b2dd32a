"""MkDocs hooks (``hooks:`` in mkdocs.yml) for the documentation site that ``make docs`` builds from ``docs/``.

The pages are written to read well on GitHub too, where a link to a file outside ``docs/`` is relative
(``../policies/README.md``). MkDocs cannot link out of its ``docs_dir``, so the repository files the pages link to
are published as pages of their own (:data:`PUBLISHED`) and such links are pointed at them; any other link out of
``docs/`` stops the build, so ``--strict`` still means no broken link.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
# repository file -> the page it is published as
PUBLISHED = {
    "policies/README.md": "policies.md",
    "examples/workloads/README.md": "workloads.md",
}
_OUT_OF_DOCS = re.compile(r"\]\(\.\./([^)#\s]+)(#[^)\s]*)?\)")


def on_files(files: Files, config: Any) -> Files:
    """Add the published repository files as pages."""
    for source, page in PUBLISHED.items():
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point links out of ``docs/`` at the published pages; refuse any other."""
    def swap(match: re.Match[str]) -> str:
        target = match.group(1)
        if target not in PUBLISHED:
            raise PluginError(f"{page.file.src_uri} links to ../{target}, outside docs/ and not published: link a "
                              "page of docs/ or add the file to PUBLISHED in tools/mkdocs_hooks.py")
        return f"]({PUBLISHED[target]}{match.group(2) or ''})"

    return _OUT_OF_DOCS.sub(swap, markdown)
