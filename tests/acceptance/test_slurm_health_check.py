"""The Slurm health check (slurm.conf HealthCheckProgram), run for real against fake nvidia-smi, dcgmi and scontrol and
a fake sysfs: it drains the node with the reason when a GPU, the fabric or DCGM health is bad, says what it skipped,
stays quiet on a healthy node, and resumes only a node it drained itself."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from components.kubernetes.objects.node_check import NodeCheck
from components.kubernetes.objects.slurm import health_check_script

CHECK = NodeCheck(pool="h100", instance_type="p5.48xlarge", gpus=8, gpu_model="H100", fabric_kind="efa",
                  fabric_devices=4, expected_busbw=None, pass_fraction=0.9)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _exe(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run(tmp: Path, *, gpus: int = 8, model: str = "NVIDIA H100 80GB HBM3", efa_up: int = 4,
         dcgm: str | None = "Overall Health : Healthy", show: str = "State=IDLE Reason=(null)",
         smi: bool = True) -> tuple[int, str, list[str]]:
    """Run the script; (exit code, its output, the scontrol calls it made)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    calls = tmp / "scontrol.calls"
    names = "\n".join([model] * gpus)
    if smi:
        _exe(bin_dir / "nvidia-smi", f"printf '%s\\n' \"{names}\"")
    if dcgm is not None:
        _exe(bin_dir / "dcgmi", f"echo '{dcgm}'")
    _exe(bin_dir / "scontrol", f"""printf '%s\\n' "$*" >> {calls}
[ "$1" = show ] && echo "NodeName=gpu-7 Arch=x86_64 {show}"
exit 0""")
    for i in range(CHECK.fabric_devices):
        port = tmp / "sys" / "class" / "infiniband" / f"rdmap{i}s0" / "ports" / "1"
        port.mkdir(parents=True)
        port.joinpath("state").write_text("4: ACTIVE\n" if i < efa_up else "1: DOWN\n", encoding="utf-8")
    # Only the fakes and the basic tools: no nvidia-smi or dcgmi of the machine running the tests leaks in.
    tools = tmp / "tools"
    tools.mkdir()
    for tool in ("grep", "sort", "paste", "tr", "timeout", "hostname", "cat"):
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    env = {"PATH": f"{bin_dir}:{tools}", "SYSFS_ROOT": str(tmp / "sys"), "SLURMD_NODENAME": "gpu-7"}
    path = tmp / "gpu-health.sh"
    path.write_text(health_check_script(CHECK), encoding="utf-8")
    done = subprocess.run([shutil.which("bash") or "bash", str(path)], env=env, capture_output=True, text=True,
                          timeout=60)
    made = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
    return done.returncode, done.stdout + done.stderr, made


def test_a_healthy_node_is_left_alone(tmp_path: Path) -> None:
    code, out, calls = _run(tmp_path)
    assert code == 0, out
    assert calls == ["show node gpu-7"]  # asked whether it drained the node earlier, and it did not


@pytest.mark.parametrize(("fakes", "why"), [
    ({"efa_up": 3}, "efa: 3 of 4 up"),
    ({"gpus": 7}, "nvidia-smi lists 7 of 8 GPUs"),
    ({"model": "NVIDIA A100-SXM4-80GB"}, "GPU model 'NVIDIA A100-SXM4-80GB', expected H100"),
    ({"dcgm": "Overall Health : Failure"}, "dcgm: Failure"),
    ({"smi": False}, "nvidia-smi not found"),
])
def test_a_bad_node_is_drained_with_the_reason(tmp_path: Path, fakes: dict[str, object], why: str) -> None:
    code, _, calls = _run(tmp_path, **fakes)  # type: ignore[arg-type]
    assert code == 1
    (call,) = calls
    assert call.startswith("update nodename=gpu-7 state=drain reason=gpu-health: ")
    assert why in call, call


def test_what_is_wrong_is_all_in_one_reason(tmp_path: Path) -> None:
    code, _, calls = _run(tmp_path, gpus=7, efa_up=2)
    assert code == 1
    assert calls == ["update nodename=gpu-7 state=drain "
                     "reason=gpu-health: nvidia-smi lists 7 of 8 GPUs; efa: 2 of 4 up"]


def test_without_dcgm_the_check_says_it_skipped_it(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, dcgm=None)
    assert code == 0 and "DCGM skipped, no dcgmi" in out
    code, out, _ = _run(tmp_path / "x", dcgm="Error: unable to connect to host engine")
    assert code == 0 and "DCGM skipped, no answer" in out


def test_a_node_it_drained_is_resumed_once_healthy_and_no_other(tmp_path: Path) -> None:
    _, _, calls = _run(tmp_path, show="State=IDLE+DRAIN Reason=gpu-health: efa: 3 of 4 up [root@2026-12-01T10:00:00]")
    assert calls == ["show node gpu-7", "update nodename=gpu-7 state=resume"]
    _, _, calls = _run(tmp_path / "x", show="State=IDLE+DRAIN Reason=maintenance [admin@2026-12-01T10:00:00]")
    assert calls == ["show node gpu-7"]
