"""The report pages the tests read: each written once per run by the command itself (``blueprint report``), beside
the figures of the commands it must agree with (``blueprint cost --format json``, ``blueprint sizing``)."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from blueprint.cli import main

_OUT = Path(tempfile.mkdtemp(prefix="blueprint-report-test-"))
atexit.register(shutil.rmtree, _OUT, ignore_errors=True)


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``blueprint <argv>`` in this process: (exit status, standard output, standard error)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@cache
def report_page(target: str) -> Path:
    """``blueprint report <target> -o <file>``, written once; the path of the page."""
    path = _OUT / f"report-{Path(target).stem}.html"
    code, _, err = run_cli("report", target, "-o", str(path))
    assert code == 0, f"blueprint report {target} exited {code}: {err}"
    return path


@cache
def cost_json(target: str) -> dict[str, Any]:
    """``blueprint cost <target> --format json``."""
    code, out, err = run_cli("cost", target, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc
