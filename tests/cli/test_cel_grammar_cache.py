"""cel-python's analysed grammar is kept in the cache folder, so `blueprint admit` and the policy pass do not rebuild
it in every process (issue 37), and the parser read back is the one cel-python builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# In a fresh interpreter: the admission policies' CEL evaluated the way admit evaluates it, then what was loaded.
PROBE = """
import json, sys
from blueprint.admit import policies
from celpy.adapter import json_to_cel
from celpy.celparser import CELParser
env = policies._env()
program = env.program(env.compile("object.spec.containers.all(c, !has(c.securityContext) || c.name != 'x') && true"))
result = program.evaluate({"object": json_to_cel({"spec": {"containers": [{"name": "y"}]}})})
print(json.dumps({"result": bool(result), "built": CELParser.CEL_PARSER is not None}))
"""


def _run(cache: Path, off: bool = False) -> dict[str, bool]:
    env = {k: v for k, v in os.environ.items() if k != "BLUEPRINT_NO_CACHE"}
    env["BLUEPRINT_CACHE_DIR"] = str(cache)
    if off:
        env["BLUEPRINT_NO_CACHE"] = "1"
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    value: dict[str, bool] = json.loads(out.stdout)
    return value


def test_admit_keeps_the_grammar_in_the_cache_folder_and_reads_it_back(tmp_path: Path) -> None:
    assert _run(tmp_path) == {"result": True, "built": True}
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 1 and files[0].startswith("cel-grammar-lark") and files[0].endswith(".lark"), files
    made = (tmp_path / files[0]).stat().st_mtime_ns
    # The second process reads the file (lark checks it was made from the same grammar and options) and does not
    # write it again; its parser gives the same result.
    assert _run(tmp_path) == {"result": True, "built": True}
    assert (tmp_path / files[0]).stat().st_mtime_ns == made
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".cel-grammar-")]  # no temporary file left


def test_a_damaged_grammar_file_is_rebuilt_not_fatal(tmp_path: Path) -> None:
    _run(tmp_path)
    (grammar,) = tmp_path.iterdir()
    grammar.write_bytes(b"not a lark cache\n")
    assert _run(tmp_path) == {"result": True, "built": True}


@pytest.mark.parametrize("off", [True])
def test_no_cache_writes_nothing(tmp_path: Path, off: bool) -> None:
    assert _run(tmp_path / "c", off=off) == {"result": True, "built": True}
    assert not (tmp_path / "c").exists()
