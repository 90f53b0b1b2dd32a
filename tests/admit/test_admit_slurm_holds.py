"""``blueprint admit`` on sbatch scripts reports what a job holds on each node (issue 38): GPUs, CPUs and memory, with
the partition's DefCpuPerGPU and DefMemPerGPU where the script asks none; a job that holds a whole node's memory for
part of its GPUs is named; one that asks more memory than a node has is refused; the memory options are read as
sbatch reads them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blueprint.admit.sbatch import SbatchError, parse_sbatch, parse_size_mib
from tests.admit.test_admit_slurm import SLURM, admit, changed_graph, reason, rules, script
from tests.conftest import ROOT


def holds(report: dict[str, Any]) -> dict[str, Any]:
    """The workload's ``holds`` (JSON) with its detail line as the text report prints it and the step's notes."""
    (workload,) = report["workloads"]
    held = dict(workload["holds"])
    gib = f"{held['memory_mib_per_node'] / 1024:,.1f} GiB of {held['node_memory_mib'] / 1024:,.1f} GiB"
    held["detail"] = (f"per {held['node_type']} node: {held['gpus_per_node']} of {held['node_gpus']} GPUs, "
                      f"{held['cpus_per_node']} of {held['node_cpus']} CPUs, {gib} memory ({held['memory_from']})")
    held["notes"] = [n for n in workload["notes"] if n.startswith(("the job holds", "--exclusive"))]
    return held


def test_a_one_gpu_job_without_mem_holds_one_gpus_share(graph_files: Callable[[str], Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files(SLURM), script(tmp_path, "-A research", "--gpus-per-node=1"), capsys=capsys)
    assert code == 0
    step = holds(report)
    assert step["detail"].startswith("per p5.48xlarge node: 1 of 8 GPUs, 22 of 192 CPUs, 249.4 GiB of 1,995.2 GiB")
    assert "DefMemPerGPU=255383 of partition train" in step["detail"]
    assert not step["notes"]


def test_without_the_default_a_one_gpu_job_is_named_for_the_whole_node(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # The graph as it was before DefMemPerGPU: a job without --mem holds all of the node's memory.
    def strip(resource: dict[str, Any]) -> None:
        spec = resource.get("inputs", {}).get("spec", {})
        if resource["type"].endswith(":Controller") and "extraConf" in spec:
            spec["extraConf"] = "\n".join(" ".join(t for t in line.split() if not t.startswith("DefMemPerGPU="))
                                          for line in spec["extraConf"].splitlines())

    code, report = admit(changed_graph(tmp_path, strip), script(tmp_path, "-A research", "--gpus-per-node=1"),
                         capsys=capsys)
    assert code == 0
    step = holds(report)
    assert "1,995.2 GiB of 1,995.2 GiB memory (no --mem and no DefMemPerGPU in slurm.conf)" in step["detail"]
    (note,) = step["notes"]
    assert "holds all of a p5.48xlarge node's memory for 1 of its 8 GPUs" in note
    assert "other 7 GPUs can go to no other job" in note


@pytest.mark.parametrize(("directives", "detail", "whole"), [
    (["--gpus-per-node=1", "--mem=0"], "1,995.2 GiB of 1,995.2 GiB memory (--mem=0)", True),
    (["--gpus-per-node=2", "--mem-per-gpu=100G"], "200.0 GiB of 1,995.2 GiB memory (2 GPUs x --mem-per-gpu=100G)",
     False),
    (["--gpus-per-node=1", "--cpus-per-gpu=192"], "1 of 8 GPUs, 192 of 192 CPUs", True),
    (["--gpus-per-node=8", "--mem-per-cpu=8G", "--ntasks-per-node=8", "--cpus-per-task=24"],
     "192 of 192 CPUs, 1,536.0 GiB of 1,995.2 GiB memory (192 CPUs x --mem-per-cpu=8G)", False),
])
def test_what_each_memory_and_cpu_option_holds(directives: list[str], detail: str, whole: bool,
                                               graph_files: Callable[[str], Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files(SLURM), script(tmp_path, "-A research", *directives), capsys=capsys)
    assert code == 0
    step = holds(report)
    assert detail in step["detail"]
    assert bool(step["notes"]) is whole and (not whole or "holds all of a p5.48xlarge node's" in step["notes"][0])


def test_exclusive_takes_every_gpu_and_cpu_but_only_the_memory_asked(graph_files: Callable[[str], Path],
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # sbatch(1) --exclusive: all CPUs and GRES of the node, "but is only allocated as much memory as it requested"
    code, report = admit(graph_files(SLURM), script(tmp_path, "-A research", "--gpus-per-node=8", "--exclusive"),
                         capsys=capsys)
    assert code == 0
    held = holds(report)
    assert held["memory_mib_per_node"] == 8 * 255383 and "DefMemPerGPU" in held["memory_from"]
    (note,) = held["notes"]
    assert "only 1,995.2 GiB of memory each" in note and "--mem=0" in note


def test_more_memory_than_a_node_has_is_refused(graph_files: Callable[[str], Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files(SLURM), script(tmp_path, "-A research", "--gpus-per-node=8", "--mem=3T"),
                         capsys=capsys)
    assert code == 1 and rules(report) == ["node-memory"]
    message = reason(report, "node-memory")["message"]
    assert "3,072.0 GiB of memory per node (--mem=3T)" in message and "offers 1,995.2 GiB" in message
    assert "Memory specification can not be satisfied" in message


@pytest.mark.parametrize(("text", "mib"), [("100", 100), ("1K", 1), ("2049k", 3), ("4M", 4), ("8G", 8192),
                                           ("8GB", 8192), ("1T", 1024 * 1024), ("0", 0)])
def test_memory_sizes_read_as_slurm_reads_them(text: str, mib: int) -> None:
    assert parse_size_mib(text, "--mem", "x:1") == mib


@pytest.mark.parametrize("text", ["100B", "1.5G", "G", "-1", "8 G", "8P"])
def test_memory_sizes_slurm_refuses(text: str) -> None:
    with pytest.raises(SbatchError, match="Invalid memory specification"):
        parse_size_mib(text, "--mem", "x:1")


@pytest.mark.parametrize("options", [["--mem=1G", "--mem-per-gpu=1G"], ["--mem-per-cpu=1G", "--mem-per-gpu=1G"],
                                     ["--cpus-per-task=2", "--cpus-per-gpu=4"]])
def test_options_that_exclude_each_other(options: list[str]) -> None:
    text = "#!/bin/bash\n" + "".join(f"#SBATCH {o}\n" for o in options) + "srun x\n"
    with pytest.raises(SbatchError, match="exclude each other"):
        parse_sbatch(text, "job.sbatch", "job.sbatch")


def test_the_two_node_example_runs_on_dev_gcp_slurm(graph_files: Callable[[str], Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 38's "done when" on GKE: a two-node GPU job (srun with PMIx and a container image) is admitted with what
    # it will hold; dev-gcp-slurm has two Slurm nodes for it.
    example = ROOT / "examples" / "slurm" / "dev-gcp-slurm" / "two-node.sbatch"
    text = example.read_text(encoding="utf-8")
    assert "srun --mpi=pmix --container-image=" in text
    code, report = admit(graph_files("dev-gcp-slurm"), example, capsys=capsys)
    assert code == 0, report
    (workload,) = report["workloads"]
    assert (workload["partition"], workload["account"]) == ("dev", "research")
    assert (workload["nodes"], workload["gpus"]) == (2, 4)
    held = holds(report)
    assert (held["gpus_per_node"], held["node_gpus"], held["memory_mib_per_node"]) == (2, 2, 64 * 1024)
    assert held["memory_from"] == "2 GPUs x --mem-per-gpu=32G" and not held["whole_node"]


def test_a_cpu_partition_is_told_in_cpu_terms(graph_files: Callable[[str], Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # issue 38 review: a CPU job over a node's memory was told to use --mem-per-gpu; a GPU job on a CPU partition to
    # "ask for at most 0 per node"
    path = script(tmp_path, "-A research", "-p prep", "-N 1", "--cpus-per-task=32", "--mem=200G")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 1 and rules(report) == ["node-memory"]
    assert "ask for less with --mem or --mem-per-cpu" in reason(report, "node-memory")["message"]
    path = script(tmp_path, "-A research", "-p prep", "-N 1", "--gpus-per-node=1", name="gpu.sbatch")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    message = reason(report, "node-gpus")["message"]
    assert code == 1 and "partition prep is CPU-only: submit GPU work to a GPU partition (train" in message
    assert "at most 0" not in message
