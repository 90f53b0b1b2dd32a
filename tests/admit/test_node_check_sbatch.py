"""examples/slurm/node-check.sbatch, the Slurm form of the node check: admitted on prod-aws-slurm over every node,
its expectations the node check's own for that group, its pairing (round_pairs, run_round) and per-node step run for
real with a fake srun, nvidia-smi and all_reduce_perf, writing the records the Kubernetes check writes."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from components.catalog.acceptance import load_per_node, load_thresholds
from tests.conftest import ROOT, offline_run

SCRIPT = ROOT / "examples" / "slurm" / "node-check.sbatch"
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def _exe(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _bash(command: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([BASH or "bash", "-c", f"source {SCRIPT}; {command}"], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _default(name: str) -> str:
    match = re.search(rf"^{name}=\$\{{{name}:?-(.*)\}}$", SCRIPT.read_text(encoding="utf-8"), re.M)
    assert match, name
    return match.group(1)


def test_it_is_admitted_over_every_node_of_the_partition() -> None:
    from blueprint.cli import main
    assert main(["admit", "prod-aws-slurm", str(SCRIPT)]) == 0


def test_its_expectations_are_the_node_checks_for_prod_aws_slurm() -> None:
    """The group's health check in the graph is built from node_check.node_checks of the pool: its header names the
    same GPUs, model word and fabric; the NVLink floor is the catalog's per-node figure at the gate's fraction."""
    graph = offline_run("prod-aws-slurm").graph
    (health,) = [r.inputs["data"]["gpu-health.sh"] for r in graph.of_type("kubernetes:core/v1:ConfigMap")
                 if r.inputs["metadata"]["name"] == "slurm-health-h100"]
    expected = (f"node group {_default('NODE_GROUP')} ({_default('INSTANCE_TYPE')}): {_default('GPUS')} x "
                f"{_default('GPU_MODEL')} GPUs, {_default('FABRIC_DEVICES')} {_default('FABRIC_KIND')} fabric devices")
    assert expected in health
    figure = load_per_node()[_default("INSTANCE_TYPE")].expected_busbw_gbps
    assert figure is not None and float(_default("EXPECTED_BUSBW")) == figure
    assert float(_default("PASS_FRACTION")) == load_thresholds()[0]


@pytest.mark.parametrize(("nodes", "round1", "round2"), [
    ("a", [], []),
    ("a b", ["a b"], []),  # round 2 would measure the same pair
    ("a b c", ["a b", "c a"], ["b c"]),
    ("a b c d", ["a b", "c d"], ["b c", "d a"]),
    ("a b c d e", ["a b", "c d", "e a"], ["b c", "d e"]),
    ("a b c d e f", ["a b", "c d", "e f"], ["b c", "d e", "f a"]),
])
def test_the_pairs_of_each_round(nodes: str, round1: list[str], round2: list[str]) -> None:
    assert _bash(f"round_pairs 1 {nodes}").splitlines() == round1
    assert _bash(f"round_pairs 2 {nodes}").splitlines() == round2


def test_a_round_runs_each_pair_as_a_two_node_step_and_records_it(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "srun.calls"
    # a pair of gpu-3 fails; every step says what it ran
    _exe(bin_dir / "srun", f"""echo "$*" >> {calls}
echo "# out-of-place in-place"
case "$*" in *gpu-3*) exit 3;; esac""")
    out = tmp_path / "run"
    _bash(f"IMAGE=img MOUNTS=/shared:/shared run_round {out} 2 gpu-0 gpu-1 gpu-2 gpu-3",
          {"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    made = sorted(p.name for p in (out / "pairs").iterdir())
    assert made == ["2-gpu-1--gpu-2", "2-gpu-3--gpu-0"]
    record = json.loads((out / "pairs" / "2-gpu-3--gpu-0" / "pair.json").read_text(encoding="utf-8"))
    assert record["round"] == 2 and record["nodes"] == ["gpu-3", "gpu-0"] and record["node_group"] == "h100"
    assert record["exit_status"] == 3 and set(record) == {"round", "nodes", "node_group", "exit_status", "started",
                                                          "finished"}
    ok = json.loads((out / "pairs" / "2-gpu-1--gpu-2" / "pair.json").read_text(encoding="utf-8"))
    assert ok["exit_status"] == 0
    assert (out / "pairs" / "2-gpu-1--gpu-2" / "nccl.log").read_text(encoding="utf-8").startswith("# out-of-place")
    for line in calls.read_text(encoding="utf-8").splitlines():
        assert line.startswith("--nodes=2 -w gpu-") and "--ntasks-per-node=8 --gpus-per-node=8 --mpi=pmix" in line
        assert line.endswith("all_reduce_perf -b 8 -e 16G -f 2 -g 1")


def test_the_per_node_step_writes_the_node_check_record(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    names = "\\n".join(["NVIDIA H100 80GB HBM3"] * 8)
    _exe(bin_dir / "nvidia-smi", f"""case "$*" in
  *query-gpu=name*) printf '{names}\\n';;
  *driver_version*) echo 570.133.20;;
  *) echo "| NVIDIA-SMI 570.133.20   Driver Version: 570.133.20   CUDA Version: 12.8 |";;
esac""")
    row = "  17179869184  4294967296  float  sum  -1  80000  214.7  470.5  0  80000  214.7  469.0  0"
    tests = tmp_path / "tests"
    tests.mkdir()
    _exe(tests / "all_reduce_perf", f"""echo "NCCL INFO NCCL version 2.27.3+cuda12.9"
echo "{row}" """)
    for i in range(32):
        port = tmp_path / "sys" / "class" / "infiniband" / f"rdmap{i}s0" / "ports" / "1"
        port.mkdir(parents=True)
        port.joinpath("state").write_text("4: ACTIVE\n", encoding="utf-8")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SYSFS_ROOT": str(tmp_path / "sys"),
           "DIR": str(tmp_path / "run"), "SLURMD_NODENAME": "gpu-0", "SLURM_JOB_ID": "42", "TESTS_DIR": str(tests)}
    _bash('export NODE_GROUP INSTANCE_TYPE GPUS GPU_MODEL FABRIC_KIND FABRIC_DEVICES EXPECTED_BUSBW PASS_FRACTION '
          'SWEEP; bash -c "$NODE_STEP"', env)
    record = json.loads((tmp_path / "run" / "gpu-0" / "node.json").read_text(encoding="utf-8"))
    assert record["passed"] is True and record["exit_status"] == 0 and record["node"] == "gpu-0"
    assert record["busbw_gbps"] == 470.5 and record["gpu_count"] == 8 and record["cuda"] == "12.8"
    assert record["fabric"]["up"] == 32 and record["dcgm"]["result"] == "not-run"
    assert [c["name"] for c in record["checks"]] == ["gpu-count", "gpu-model", "fabric-devices", "nvlink-busbw"]
