"""The per-node check's shell, run for real against fake nvidia-smi, dcgmi, nv-hostengine and all_reduce_perf and a
fake sysfs: the node.json it writes, and the verdict file the readiness reporter reads."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from components.kubernetes.objects.node_check import (
    NodeCheck,
    dcgm_script,
    health_script,
    nvlink_script,
    verdict_script,
)

CHECK = NodeCheck(pool="h100", instance_type="p5.48xlarge", gpus=8, gpu_model="H100", fabric_kind="efa",
                  fabric_devices=4, expected_busbw=460.0, pass_fraction=0.9)

ROW = "  {size:>10}  {count:>10}  float  sum  -1  {t:>8}  {a:>7}  {b:>7}  0  {t:>8}  {a:>7}  {b:>7}  0"


def _exe(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _fakes(tmp: Path, *, gpus: int = 8, model: str = "NVIDIA H100 80GB HBM3", dcgm_fail: str | None = None,
           busbw: float = 470.0, efa_up: int = 4, busy_once: bool = False) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    names = "\n".join([model] * gpus)
    busy = tmp / "busy"
    if busy_once:
        busy.write_text("1", encoding="utf-8")
    _exe(bin_dir / "nvidia-smi", f"""case "$*" in
  *query-compute-apps*) [ -f {busy} ] && {{ rm {busy}; echo 1234; }}; exit 0;;
  *query-gpu=name*) printf '%s\\n' "{names}";;
  *driver_version*) echo 570.133.20;;
  *) echo "| NVIDIA-SMI 570.133.20   Driver Version: 570.133.20   CUDA Version: 12.8 |";;
esac""")
    _exe(bin_dir / "nv-hostengine", "exit 0")
    _exe(bin_dir / "sleep", "exit 0")
    result = ('{"name": "memory", "results": [{"status": "Fail"}]}' if dcgm_fail else
              '{"name": "memory", "results": [{"status": "Pass"}]}')
    _exe(bin_dir / "dcgmi", f"echo '{{\"DCGM Diagnostic\": {{\"test_categories\": [{{\"tests\": [{result}]}}]}}}}'"
                            f"; exit {1 if dcgm_fail else 0}")
    rows = "\n".join(ROW.format(size=2 ** k, count=2 ** k // 4, t=10.0, a=busbw / 2, b=busbw if k == 34 else 1.0)
                     for k in (3, 20, 34))
    tests = tmp / "tests"
    tests.mkdir()
    _exe(tests / "all_reduce_perf", f"""echo "# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703"
echo "NCCL INFO NCCL version 2.27.3+cuda12.9"
echo "NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.16.0"
cat <<'EOF'
{rows}
EOF
echo "# Avg bus bandwidth    : 100.0" """)
    sysfs = tmp / "sys" / "class" / "infiniband"
    for i in range(CHECK.fabric_devices):
        port = sysfs / f"rdmap{i}s0" / "ports" / "1"
        port.mkdir(parents=True)
        port.joinpath("state").write_text("4: ACTIVE\n" if i < efa_up else "1: DOWN\n", encoding="utf-8")
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORDS_DIR": str(tmp / "records"),
            "STATUS_DIR": str(tmp / "status"), "SYSFS_ROOT": str(tmp / "sys"), "NODE_NAME": "ip-10-0-0-1",
            "POD_NAME": "gpu-node-check-h100-x", "NODE_GROUP": "h100", "INSTANCE_TYPE": "p5.48xlarge",
            "TESTS": str(tests)}


def _run(tmp: Path, **fakes: object) -> tuple[dict[str, object], bool]:
    env = _fakes(tmp, **fakes)  # type: ignore[arg-type]
    for script, shell in ((dcgm_script(CHECK), "bash"), (nvlink_script(CHECK, env["TESTS"]), "bash"),
                          (verdict_script(CHECK, True), "sh")):
        done = subprocess.run([shell, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    record = json.loads((tmp / "records" / "node.json").read_text(encoding="utf-8"))
    return record, (tmp / "status" / "passed").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_good_node_passes_with_what_nvidia_smi_reports(tmp_path: Path) -> None:
    record, passed = _run(tmp_path)
    assert passed and record["passed"] is True
    assert record["gpu_model"] == "NVIDIA H100 80GB HBM3" and record["gpu_count"] == 8
    assert record["driver"] == "570.133.20" and record["cuda"] == "12.8"
    assert record["nccl_version"] == "2.27.3+cuda12.9" and record["fabric_plugin"] == "aws-ofi-nccl 1.16.0"
    assert record["busbw_gbps"] == 470.0
    assert record["fabric"] == {"kind": "efa", "expected": 4, "present": 4, "up": 4,
                                "devices": ["rdmap0s0", "rdmap1s0", "rdmap2s0", "rdmap3s0"]}
    assert record["dcgm"]["result"] == "pass" and record["dcgm"]["level"] == 2
    assert record["exit_status"] == 0  # the benchmark's status, as the per-node Job records it
    assert {c["name"] for c in record["checks"]} == {"gpu-count", "gpu-model", "dcgm", "fabric-devices",
                                                     "nvlink-busbw"}


@pytest.mark.parametrize(("fakes", "failed"), [
    ({"efa_up": 3}, "fabric-devices"),
    ({"gpus": 7}, "gpu-count"),
    ({"model": "NVIDIA A100-SXM4-80GB"}, "gpu-model"),
    ({"dcgm_fail": "memory"}, "dcgm"),
    ({"busbw": 300.0}, "nvlink-busbw"),
])
def test_a_bad_node_is_held_and_says_why(tmp_path: Path, fakes: dict[str, object], failed: str) -> None:
    record, passed = _run(tmp_path, **fakes)
    assert not passed and record["passed"] is False
    assert [c["name"] for c in record["checks"] if not c["passed"]] == [failed]
    if failed == "dcgm":
        assert record["dcgm"] == {"level": 2, "result": "fail", "seconds": record["dcgm"]["seconds"],
                                  "failed": ["memory"]}


def test_a_recheck_waits_for_the_gpus_to_be_idle(tmp_path: Path) -> None:
    env = _fakes(tmp_path, busy_once=True)
    done = subprocess.run(["bash", "-c", dcgm_script(CHECK)], env=env, capture_output=True, text=True, timeout=60)
    assert "GPUs in use: waiting" in done.stdout


def test_health_needs_the_passed_check_and_every_device(tmp_path: Path) -> None:
    """One round of the health loop (its sleep is faked to end the loop through a counter)."""
    env = _fakes(tmp_path, efa_up=3)
    bin_dir = Path(env["PATH"].split(":")[0])
    _exe(bin_dir / "sleep", '[ "$1" = 5 ] && exit 0; exit 99')  # the loop's sleep ends the test's round
    script = health_script(CHECK).replace("  sleep 60", "  sleep 60 || break")
    Path(env["STATUS_DIR"]).mkdir()
    Path(env["STATUS_DIR"], "passed").write_text("x", encoding="utf-8")
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert "fabric: 3 of 4 up" in done.stdout
    assert not Path(env["STATUS_DIR"], "healthy").exists()
    env2 = _fakes(tmp_path / "b")
    Path(env2["STATUS_DIR"]).mkdir(parents=True)
    Path(env2["STATUS_DIR"], "passed").write_text("x", encoding="utf-8")
    bin2 = Path(env2["PATH"].split(":")[0])
    _exe(bin2 / "sleep", '[ "$1" = 5 ] && exit 0; exit 99')
    subprocess.run(["bash", "-c", script], env=env2, capture_output=True, text=True, timeout=60)
    assert Path(env2["STATUS_DIR"], "healthy").exists()



def _fake_mpirun(bin_dir: Path, calls: Path, slow_node: str) -> None:
    """mpirun as the launcher meets it: the node-name lookup answers node-<i> for worker i; a pair or group run
    prints an nccl-tests table whose bus bandwidth is low when the slow node is among its hosts."""
    good = ROW.format(size=2 ** 30, count=2 ** 28, t=1.0, a=1.0, b=400.0)
    slow = ROW.format(size=2 ** 30, count=2 ** 28, t=1.0, a=1.0, b=40.0)
    lookup = "h=$(printf '%s' \"$*\" | sed 's/.*-H \\([^ :]*\\):1.*/\\1/'); h=${h#job-worker-}; echo node-${h%%.*}"
    _exe(bin_dir / "mpirun", f"""echo "$*" >> {calls}
case "$*" in
  *node-name*) {lookup};;
  *{slow_node.replace("node-", "job-worker-")}.*) echo "# nccl-tests version 2.17.1"; echo "{slow}"
    echo "# Avg bus bandwidth    : 40.0";;
  *) echo "# nccl-tests version 2.17.1"; echo "{good}"; echo "# Avg bus bandwidth    : 400.0";;
esac""")


def test_the_launcher_runs_both_pairings_and_keeps_the_group_run_with_its_nodes(tmp_path: Path) -> None:
    """The MPIJob launcher's shell with a fake mpirun: every node meets two partners (round 1 neighbours, round 2
    shifted), each pair's log and pair.json name the Kubernetes nodes, the group run's nodes.json maps workers to
    nodes, and ``blueprint nccl nodes`` on what it wrote names the node with the bad NIC."""
    from blueprint.cli import main
    from components.kubernetes.objects.acceptance import launcher_script, pairings

    assert pairings(4) == [[(0, 1), (2, 3)], [(1, 2), (3, 0)]]
    assert pairings(3) == [[(0, 1), (2, 0)], [(1, 2)]]
    assert pairings(1) == []
    hosts = [f"job-worker-{i}.job.gpu-acceptance.svc" for i in range(4)]
    (tmp_path / "hostfile").write_text("".join(f"{h} slots=8\n" for h in hosts), encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    _fake_mpirun(bin_dir, calls, slow_node="node-3")
    script = launcher_script(["mpirun", "--allow-run-as-root"], ["all_reduce_perf", "-g", "1"], 8, 4)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "MPI_HOSTFILE": str(tmp_path / "hostfile"),
           "NODE_GROUP": "h100", "INSTANCE_TYPE": "p5.48xlarge"}
    records = tmp_path / "run"
    done = subprocess.run(["bash", "-c", script.replace("R=/records", f"R={records}")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pairs = sorted(p.name for p in (records / "pairs").iterdir())
    assert pairs == ["1-node-0--node-1", "1-node-2--node-3", "2-node-1--node-2", "2-node-3--node-0"]
    pair = json.loads((records / "pairs" / "2-node-3--node-0" / "pair.json").read_text(encoding="utf-8"))
    assert pair["round"] == 2 and pair["nodes"] == ["node-3", "node-0"] and pair["exit_status"] == 0
    group = json.loads((records / "multinode" / "nodes.json").read_text(encoding="utf-8"))
    assert group["nodes"] == ["node-0", "node-1", "node-2", "node-3"]
    assert group["workers"][hosts[2]] == "node-2" and group["instance_type"] == "p5.48xlarge"
    assert (records / "done").exists()
    lines = calls.read_text(encoding="utf-8").splitlines()
    assert len([c for c in lines if "-np 16 -N 8" in c]) == 4 and any("-np 32 -N 8" in c for c in lines)
    (records / "done").unlink()
    out = tmp_path / "verdict.json"
    assert main(["nccl", "nodes", str(records), "--format", "json", "-o", str(out)]) == 1
    verdict = json.loads(out.read_text(encoding="utf-8"))
    suspects = {x["node"]: x["verdict"] for x in verdict["pairs"]["suspects"]}
    assert suspects == {"node-3": "bad"}  # its two pairs failed; each partner passed with its other partner
    assert [p["passed"] for p in verdict["pairs"]["pairs"]].count(False) == 2
    assert verdict["multinode"]["nodes"] == group["nodes"]


def test_nccl_nodes_reads_what_the_node_check_writes_and_names_the_bad_node(tmp_path: Path) -> None:
    """Two nodes' checks as the DaemonSet writes them (node-check-<day>/<node>/), one with an EFA device down:
    ``blueprint nccl nodes`` fails the run and names that node, with nvidia-smi's model in the record."""
    from blueprint.cli import main

    run = tmp_path / "node-check-20261202"
    for node, efa_up in (("ip-10-0-0-1", 4), ("ip-10-0-0-2", 3)):
        work = tmp_path / node
        _run(work, efa_up=efa_up)
        target = run / node
        target.mkdir(parents=True)
        for name in ("nccl.log", "node.json"):
            text = (work / "records" / name).read_text(encoding="utf-8")
            target.joinpath(name).write_text(text.replace("ip-10-0-0-1", node), encoding="utf-8")
    out = tmp_path / "nodes.json"
    assert main(["nccl", "nodes", str(run), "--format", "json", "-o", str(out)]) == 1
    verdict = json.loads(out.read_text(encoding="utf-8"))
    failed = {n["node"]: n["problems"] for n in verdict["nodes"] if n["outlier"]}
    assert failed == {"ip-10-0-0-2": ["efa devices: 3 of 4 up (4 present)"]}
    assert verdict["gpu_models"] == ["NVIDIA H100 80GB HBM3"]


def test_a_check_without_nccl_is_read_on_its_checks(tmp_path: Path) -> None:
    """Where the check runs no NCCL (GKE GPUDirect pools), node.json alone: ``nccl nodes`` judges it on its checks."""
    from blueprint.cli import main

    run = tmp_path / "node-check-20261202"
    for node, efa_up in (("gke-a", 4), ("gke-b", 3)):
        work = tmp_path / node
        env = _fakes(work, efa_up=efa_up)
        for script, shell in ((dcgm_script(CHECK), "bash"), (verdict_script(CHECK, False), "sh")):
            done = subprocess.run([shell, "-c", script], env={**env, "NODE_NAME": node}, capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        record = json.loads((work / "records" / "node.json").read_text(encoding="utf-8"))
        assert record["exit_status"] is None and "nvlink-busbw" not in {c["name"] for c in record["checks"]}
        (run / node).mkdir(parents=True)
        (run / node / "node.json").write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "nodes.json"
    assert main(["nccl", "nodes", str(run), "--expected-busbw", "400", "--format", "json", "-o", str(out)]) == 1
    verdict = json.loads(out.read_text(encoding="utf-8"))
    assert {n["node"]: n["problems"] for n in verdict["nodes"]} == {
        "gke-a": [], "gke-b": ["efa devices: 3 of 4 up (4 present)"]}
