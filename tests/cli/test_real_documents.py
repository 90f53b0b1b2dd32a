"""Real Pulumi documents (issue 35): a ``pulumi stack export`` holding secrets is read with the secrets as secrets
(redacted, never printed) and the policies and the cost still run; an empty document is judged as an empty graph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from tests.conftest import offline_run

CIPHERTEXT = "v1:TOPSECRET-ciphertext-AAAA"


def _export(graph_json: str, secret_types: tuple[str, ...]) -> dict[str, Any]:
    """A stack export (checkpoint version 3) of a graph, the inputs of resources of ``secret_types`` holding a
    secret as `pulumi stack export` writes one (sig.Secret with its ciphertext)."""
    resources = []
    for r in json.loads(graph_json)["resources"]:
        state = {"urn": r["urn"], "type": r["type"], "inputs": dict(r.get("inputs") or {}),
                 "dependencies": r.get("dependencies") or []}
        if r.get("parent"):
            state["parent"] = r["parent"]
        if r["type"] in secret_types:
            state["inputs"]["stringData"] = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                                             "ciphertext": CIPHERTEXT}
        resources.append(state)
    return {"version": 3, "deployment": {"manifest": {}, "resources": resources}}


def test_a_stack_export_with_secrets_is_judged_and_priced_without_showing_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_export(offline_run("dev-aws").graph.to_json(),
                                         ("kubernetes:core/v1:Secret", "aws:iam/role:Role"))))
    for argv in (["policy", str(export), "--format", "json"], ["cost", str(export)]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1) and "internal error" not in err, (argv, err)
        assert CIPHERTEXT not in out + err
    assert main(["policy", str(export)]) == 0
    capsys.readouterr()


def test_an_empty_document_is_an_empty_graph_whatever_its_form(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    codes = []
    for name, doc in (("graph.json", {"resources": []}), ("preview.json", {"steps": []}),
                      ("export.json", {"version": 3, "deployment": {"resources": []}})):
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        codes.append(main(["policy", str(path)]))
        capsys.readouterr()
    assert codes == [1, 1, 1]  # the stack-level policies fail an empty graph in any form
