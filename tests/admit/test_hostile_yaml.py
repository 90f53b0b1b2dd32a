"""``blueprint admit`` on YAML no API server would receive (issue 35): each is refused, exit 2, naming the file, the
line and what is wrong; none is an internal error."""

from __future__ import annotations

from collections.abc import Callable
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


# --- numbers the API server refuses that no schema says (negative counts and amounts) and digits that are not ASCII --

EXAMPLES = Path("examples/workloads/prod-aws")


def _admit_json(graph: Path, path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, str]]]:
    import json

    code = main(["admit", str(graph), str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert "internal error" not in err, err
    (workload,) = json.loads(out)["workloads"]
    reasons: list[dict[str, str]] = workload["reasons"]
    return code, reasons


@pytest.mark.parametrize(("example", "old", "new", "rule", "message"), [
    ("finetune-single-node.yaml", "  backoffLimit: 2\n", "  backoffLimit: 2\n  parallelism: -1\n", "count-validation",
     "spec.parallelism: -1 is negative: a count must be greater than or equal to 0"),
    ("finetune-single-node.yaml", "  backoffLimit: 2\n", "  backoffLimit: 2\n  completions: -3\n", "count-validation",
     "spec.completions: -3 is negative"),
    ("finetune-single-node.yaml", "  backoffLimit: 2\n", "  backoffLimit: -2\n", "count-validation",
     "spec.backoffLimit: -2 is negative"),
    ("train-multinode.yaml", "replicas: 1", "replicas: -1", "count-validation",
     "spec.replicatedJobs[0].replicas: -1 is negative"),
    ("train-multinode.yaml", "parallelism: 16", "parallelism: -16", "count-validation",
     "spec.replicatedJobs[0].template.spec.parallelism: -16 is negative"),
    ("finetune-single-node.yaml", 'cpu: "160"', 'cpu: "-160"', "resources",
     "resources.requests.cpu: '-160' is negative: must be greater than or equal to 0"),
    ("finetune-single-node.yaml", 'cpu: "160"', "cpu: -1", "resources", "resources.requests.cpu: -1 is negative"),
    ("finetune-single-node.yaml", "memory: 1600Gi\n            limits", "memory: -1600Gi\n            limits",
     "resources", "resources.requests.memory: '-1600Gi' is negative"),
    ("finetune-single-node.yaml", "nvidia.com/gpu: 8", "nvidia.com/gpu: -8", "resources",
     "resources.limits.nvidia.com/gpu: -8 is negative"),
    ("finetune-single-node.yaml", 'cpu: "160"', 'cpu: "\uff11\uff16\uff10"', "resources",
     "resources.requests.cpu: '\uff11\uff16\uff10' is not a quantity"),
    ("finetune-single-node.yaml", "nvidia.com/gpu: 8", 'nvidia.com/gpu: "\u0668"', "resources",
     "resources.limits.nvidia.com/gpu: '\u0668' is not a quantity"),
    ("finetune-single-node.yaml", "memory: 1600Gi\n            limits", "memory: ²Gi\n            limits",
     "resources", "resources.requests.memory: '²Gi' is not a quantity"),
])
def test_negative_counts_and_amounts_are_not_admitted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], graph_files: Callable[[str], Path], example: str,
        old: str, new: str, rule: str, message: str) -> None:
    text = (EXAMPLES / example).read_text()
    assert old in text
    path = tmp_path / example
    path.write_text(text.replace(old, new, 1))
    code, reasons = _admit_json(graph_files("prod-aws"), path, capsys)
    assert code == 1 and any(r["rule"] == rule and message in r["message"] for r in reasons), reasons


@pytest.mark.parametrize("directive", [
    "--nodes=\u00b2", "--nodes=\uff12", "--nodes=\u0663", "-N \uff13", "--gpus-per-node=\u0668", "--gres=gpu:\uff18",
    "--ntasks=\uff13", "--cpus-per-task=\u00b2", "--time=\uff11\uff10", "--time=1:\u06630:00", "--nodes=-1"])
def test_sbatch_numbers_are_ascii_digits(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         graph_files: Callable[[str], Path], directive: str) -> None:
    """Slurm reads numbers with strtol: "\uff12" or "\u0663" is not 2 or 3 to it, as it would be to Python's int()."""
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH --account=research\n#SBATCH --partition=train\n"
                    f"#SBATCH {directive}\nsrun hostname\n", encoding="utf-8")
    code = main(["admit", str(graph_files("prod-aws-slurm")), str(path)])
    err = capsys.readouterr().err
    option = directive.split("=")[0].split()[0].replace("-N", "--nodes")
    assert code == 2 and err.startswith(f"error: {path}:4: {option}="), err
    assert "not a count (digits 0-9" in err or "not a Slurm time" in err or "not a node count" in err, err
