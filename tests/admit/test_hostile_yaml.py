"""``blueprint admit`` on YAML no API server would receive (issue 35): each is refused, exit 2, naming the file, the
line and what is wrong; none is an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprint.cli import main

HEAD = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: x\n  namespace: research\n"


@pytest.mark.parametrize(("body", "message"), [
    ('apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: "a\\0b"\n',
     "line 4, column 9: not valid YAML: a NUL character in a string"),
    (HEAD + "  labels: {1: two}\n", "line 6, column 12: not valid YAML: the key '1' is not a string"),
    (HEAD + "spec:\n  parallelism: .nan\n", "line 7, column 16: not valid YAML: '.nan' is not a finite number"),
    (HEAD + "spec:\n  parallelism: -.inf\n", "not a finite number"),
    (HEAD + "spec:\n  parallelism: " + "9" * 5000 + "\n",
     "line 7, column 16: not valid YAML: an integer of more than 40 digits"),
])
def test_yaml_no_api_server_would_receive_is_refused_with_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(body)
    code = main(["admit", "prod-aws", str(path)])
    _, err = capsys.readouterr()
    assert code == 2 and "internal error" not in err
    assert err.startswith(f"error: {path}: ") and message in err
