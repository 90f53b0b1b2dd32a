"""What the README's picture says, as text, so CI can tell when the picture is stale (issue 36).

The picture (``docs/img/report-prod-aws.png``) is a headless Chromium screenshot of ``blueprint report prod-aws`` at the
tests' pinned clock; its pixels depend on the Chromium, font and Graphviz builds of the machine that took it, so CI
does not compare pixels. ``make screenshot`` writes beside it the page's visible text (every text node, the SVG
charts' and diagram's live text included, style and script left out): ``docs/img/report-prod-aws.txt``. ``make
docs-check`` (CI) builds the page again and compares its text with the committed one; any figure, name or caption the
picture shows that changed fails the check, and ``make screenshot`` (commit both files) fixes it.

Usage: ``python tools/report_picture.py write PAGE TEXT`` or ``python tools/report_picture.py check PAGE TEXT``.
"""

from __future__ import annotations

import difflib
import sys
from html.parser import HTMLParser
from pathlib import Path

_HIDDEN = {"style", "script", "title"}  # not drawn: the tab's title, SVG tooltips, CSS


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hidden = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self.hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN and self.hidden:
            self.hidden -= 1

    def handle_data(self, data: str) -> None:
        text = " ".join(data.split())
        if text and not self.hidden:
            self.parts.append(text)


def page_text(page: str) -> str:
    """The visible text of a report page, one text node a line."""
    parser = _Text()
    parser.feed(page)
    parser.close()
    return "\n".join(parser.parts) + "\n"


def drift(page: str, committed: str) -> list[str]:
    """The unified diff between the committed text and the page's (empty when the picture is current)."""
    return list(difflib.unified_diff(committed.splitlines(), page_text(page).splitlines(),
                                     "committed picture text", "report now", lineterm="", n=1))


def main(argv: list[str]) -> int:
    """``write PAGE TEXT`` writes the page's text; ``check PAGE TEXT`` exits 1 (with the diff) when it differs."""
    if len(argv) != 3 or argv[0] not in ("write", "check"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    page = Path(argv[1]).read_text(encoding="utf-8")
    text = Path(argv[2])
    if argv[0] == "write":
        text.write_text(page_text(page), encoding="utf-8")
        return 0
    changed = drift(page, text.read_text(encoding="utf-8") if text.is_file() else "")
    if changed:
        print("\n".join(changed[:80]), file=sys.stderr)
        print(f"{text}: the README's picture is stale (the report it shows has changed): run `make screenshot` and "
              "commit docs/img/", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
