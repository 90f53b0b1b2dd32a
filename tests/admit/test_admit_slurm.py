"""``blueprint admit`` on sbatch scripts: the Slurm examples run on prod-aws-slurm as account research, each limit
the stack sets refuses what Slurm would refuse (naming the stack key), the options are read as sbatch reads them,
and a Kubernetes job of a team whose GPUs are all Slurm's is told so. Graphs come from the cached offline runs."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.admit.sbatch import INFINITE, SbatchError, parse_sbatch, parse_time
from blueprint.cli import main
from blueprint.graph.engine import run_program
from tests.conftest import ROOT, offline_run, stack

SLURM = "prod-aws-slurm"
EXAMPLES = ROOT / "examples" / "slurm"
Report = dict[str, Any]



def changed_graph(tmp_path: Path, change: Callable[[dict[str, Any]], None],
                  drop: Callable[[dict[str, Any]], bool] = lambda r: False) -> Path:
    """prod-aws-slurm's graph with each resource passed through ``change`` (and those ``drop`` picks left out)."""
    doc = offline_run(SLURM).graph.to_dict()
    resources = [copy.deepcopy(r) for r in doc["resources"] if not drop(r)]
    for resource in resources:
        change(resource)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps({"stack": doc["stack"], "resources": resources}), encoding="utf-8")
    return path


def script(tmp_path: Path, *directives: str, name: str = "job.sbatch", body: str = "srun hostname\n") -> Path:
    """An sbatch script with these #SBATCH lines."""
    path = tmp_path / name
    path.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + body, encoding="utf-8")
    return path


def admit(graph: Path, *paths: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Report]:
    code = main(["admit", str(graph), *map(str, paths), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def rules(report: Report) -> list[str]:
    return [r["rule"] for w in report["workloads"] for r in w["reasons"]]


def reason(report: Report, rule: str) -> dict[str, str]:
    return next(r for w in report["workloads"] for r in w["reasons"] if r["rule"] == rule)


# --- the examples -------------------------------------------------------------------------------------------------


def test_the_slurm_examples_run_on_prod_aws_slurm_as_research(graph_files: Callable[[str], Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(EXAMPLES.glob("*.sbatch"))
    assert [p.name for p in files] == ["nccl-allreduce.sbatch", "node-check.sbatch", "prep.sbatch", "train.sbatch"]
    code = main(["admit", str(graph_files(SLURM)), *map(str, files)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAIL" not in out and out.endswith(f"4 of 4 workloads admitted on {SLURM}\n")
    code, report = admit(graph_files(SLURM), *files, capsys=capsys)
    nccl, check, prep, train = report["workloads"]
    # the CPU partition's job: no GPU, its memory from the partition's DefMemPerCPU
    assert (prep["partition"], prep["gpus"], prep["placements"][0]["node_group"]) == ("prep", 0, "prep")
    assert prep["holds"]["cpus_per_node"] == 32 and "DefMemPerCPU=" in prep["holds"]["memory_from"]
    assert nccl["account"] == "root" and train["account"] == "research"  # the acceptance run: every node, as root
    assert check["account"] == "root" and (check["nodes"], check["gpus"]) == (16, 128)  # every node proves itself
    for workload in (nccl, check, train):  # the GPU jobs
        assert workload["scheduler"] == "slurm"
        assert workload["partition"] == "train" and workload["namespace"] == "slurm"
        assert list(workload["steps"]) == ["script", "slurm", "partition", "account", "time", "nodes", "gpus",
                                           "holds", "containers", "runtime"]
    assert (nccl["nodes"], nccl["gpus"]) == (16, 128)  # every node of the Capacity Block
    assert nccl["placements"] == [{"pod_set": "job", "node_group": "h100", "nodes": 16, "pods": 128}]
    assert (train["nodes"], train["gpus"]) == (4, 32)


def test_the_examples_carry_the_acceptance_settings_and_requeue() -> None:
    nccl = (EXAMPLES / "nccl-allreduce.sbatch").read_text()
    for needed in ("--exclusive", "--ntasks-per-node=8", "--gpus-per-node=8", "srun --mpi=pmix", "--container-image",
                   "FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1", "NCCL_DEBUG=INFO",
                   "all_reduce_perf -b 8 -e 16G -f 2 -g 1", "/shared/${SLURM_JOB_ACCOUNT}/", "REPLACE"):
        assert needed in nccl, needed
    train = (EXAMPLES / "train.sbatch").read_text()
    for needed in ("--requeue", "--signal=B:USR1@300", "--account=research", "--partition=train", "torchrun",
                   "/shared/${SLURM_JOB_ACCOUNT}/checkpoints", "scontrol requeue", "trap on_usr1 USR1"):
        assert needed in train, needed
    slurm_spec = stack(SLURM).spec.scheduler.slurm
    assert slurm_spec is not None and "research" in slurm_spec.users


def test_a_text_report_names_the_steps_and_the_partition(graph_files: Callable[[str], Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "-A research", "-N 2", "--gpus-per-node=8")
    assert main(["admit", str(graph_files(SLURM)), str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"SlurmJob/job.sbatch  ({path})"
    assert "  ok   partition  train (the default partition: no --partition), NodeSets h100" in lines
    assert "  ok   time  01:00:00 of MaxTime 3-00:00:00" in lines
    assert any("no --time: partition train's DefaultTime 01:00:00 applies "
               "(scheduler.slurm.partitions[train].defaultTimeMinutes)" in line for line in lines)
    assert any(line.startswith("       note: priority: fair share") and "64 of 129 shares" in line for line in lines)
    assert any("GrpTRESMins" in line and "sshare" in line for line in lines)
    assert lines[-3] == ("  => ADMITTED to partition train as account research: 2 tasks on 2 h100 nodes, 16 GPUs "
                         "(when it starts is Slurm's: runtime)")


# --- each limit refuses what Slurm refuses, naming the stack key ---------------------------------------------------


@pytest.mark.parametrize(("directives", "rule", "says"), [
    (["-p gpu", "-A research"], "partition-exists",
     "partition gpu is not in slurm.conf (partitions: train, debug, prep): sbatch refuses the job at submission"),
    (["-A finance"], "account-exists", "account finance is not in slurmdbd"),
    (["-A research", "--time=3-00:00:01"], "partition-time",
     "over partition train's MaxTime 3-00:00:00: sbatch refuses it at submission (EnforcePartLimits=ALL)"),
    (["-A research", "-p debug", "-t 2:00:01"], "partition-time", "scheduler.slurm.partitions[debug].maxTimeHours"),
    (["-A research", "-t 0"], "partition-time", "no time limit (--time=0 or UNLIMITED)"),
    (["-A research", "-p debug", "-N 3"], "partition-nodes",
     "3 nodes is more than partition debug's MaxNodes 2: sbatch refuses it at submission (EnforcePartLimits=ALL)"),
    (["-A research", "--gpus-per-node=9"], "node-gpus",
     "9 GPUs per node; a p5.48xlarge (h100) has 8: no node of partition train can hold it"),
    (["-A applied", "-N 4", "--gpus-per-node=8"], "account-gpu-limit",
     "the job asks 32 GPUs; account applied may hold 16 at once (GrpTRES gres/gpu=16"),
    (["-A research", "-N 2", "--ntasks-per-node=100", "--cpus-per-task=2"], "node-cpus",
     "200 CPUs per node (100 tasks x 2 CPUs each); a p5.48xlarge (h100) has 192"),
    (["-A research", "--qos=high"], "qos-exists", "Invalid qos specification"),
])
def test_each_limit_refuses(directives: list[str], rule: str, says: str, graph_files: Callable[[str], Path],
                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files(SLURM), script(tmp_path, *directives), capsys=capsys)
    assert code == 1 and report["admitted"] is False
    assert rule in rules(report), rules(report)
    assert says in reason(report, rule)["message"]


@pytest.mark.parametrize(("rule", "key"), [
    ("partition-time", "scheduler.slurm.partitions[train].maxTimeHours"),
    ("partition-nodes", "scheduler.slurm.partitions[train].maxNodesPerJob"),
    ("partition-size", "aws.nodeGroups[h100].maxSize"),
    ("account-gpu-limit", "teams[research].quotas"),
])
def test_each_refusal_names_the_stack_key(rule: str, key: str, graph_files: Callable[[str], Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """17 nodes for 4 days: over MaxTime, MaxNodes, the group's 16 nodes and research's 64 GPUs at once."""
    path = script(tmp_path, "-A research", "-N 17", "--gpus-per-node=8", "-t 4-00")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 1
    assert key in reason(report, rule)["message"]


def test_an_account_the_partition_does_not_allow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A stack whose debug partition lists only pretraining: research is refused there, pointed at train."""
    sf = stack(SLURM)
    config = copy.deepcopy(sf.config)
    debug = next(p for p in config["gpu-cluster:spec"]["scheduler"]["slurm"]["partitions"] if p["name"] == "debug")
    debug["teams"] = ["pretraining"]
    graph = tmp_path / "debug-pretraining.json"
    graph.write_text(run_program(sf.name, config, sf.region).graph.to_json(), encoding="utf-8")
    code, report = admit(graph, script(tmp_path, "-A research", "-p debug"), capsys=capsys)
    assert code == 1 and rules(report) == ["partition-accounts"]
    message = reason(report, "partition-accounts")["message"]
    assert "partition debug allows accounts pretraining, root (AllowAccounts), not research" in message
    assert "scheduler.slurm.partitions[debug].teams" in message and "or submit to train" in message
    code, report = admit(graph, script(tmp_path, "-A pretraining", "-p debug"), capsys=capsys)
    assert code == 0


def test_a_job_over_the_account_s_monthly_gpu_minutes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def shrink(resource: dict[str, Any]) -> None:
        data = resource["inputs"].get("data")
        if isinstance(data, dict) and "accounts.cfg" in data:
            data["accounts.cfg"] = data["accounts.cfg"].replace("GrpTRESMins=gres/gpu=1329223",
                                                                "GrpTRESMins=gres/gpu=10000")
    graph = changed_graph(tmp_path, shrink)
    code, report = admit(graph, script(tmp_path, "-A research", "-N 2", "--gpus-per-node=8", "-t 10:00:00"),
                         capsys=capsys)
    assert code == 0  # 16 GPUs x 600 min = 9,600 GPU-minutes fit 10,000
    code, report = admit(graph, script(tmp_path, "-A research", "-N 2", "--gpus-per-node=8", "-t 11:00:00"),
                         capsys=capsys)
    assert code == 1 and rules(report) == ["account-budget"]
    message = reason(report, "account-budget")["message"]
    assert "16 GPUs x 660 min = 10,560 GPU-minutes, more than account research's whole monthly budget" in message
    assert "Reason=AssocGrpGRESMinutes" in message and "teams[research].budget.monthlyUsd" in message


def test_a_stack_without_slurm_refuses_sbatch(graph_files: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    code, report = admit(graph_files("prod-aws"), EXAMPLES / "train.sbatch", capsys=capsys)
    assert code == 1 and rules(report) == ["slurm-installed"]
    (workload,) = report["workloads"]
    assert workload["reasons"][0]["message"].startswith("this stack runs no Slurm (no scheduler.slurm in the stack")
    assert workload["steps"] == {"script": "ok", "slurm": "FAIL", "partition": "skip", "account": "skip",
                                 "time": "skip", "nodes": "skip", "gpus": "skip", "holds": "skip", "containers": "skip",
                                 "runtime": "skip"}


def test_slurmd_that_cannot_run_on_its_nodes_leaves_slurm_without_nodes(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Without the EFA device plugin the slurmd pods, which request every EFA device of a p5, never schedule."""
    graph = changed_graph(tmp_path, lambda r: None, drop=lambda r: r["name"] == "aws-efa-k8s-device-plugin")
    code, report = admit(graph, EXAMPLES / "nccl-allreduce.sbatch", capsys=capsys)
    assert code == 1 and rules(report) == ["slurmd-fits"]
    assert "requests 32 vpc.amazonaws.com/efa on each node" in reason(report, "slurmd-fits")["message"]


# --- the options, as sbatch reads them -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["15", "15:00", "0:15:00", "0-0:15", "0-00:15:00", "14:01"])
def test_slurm_time_formats(text: str) -> None:
    assert parse_time(text, "x") == 15  # seconds round up to the next minute


@pytest.mark.parametrize(("text", "minutes"), [("2-12", 3600), ("1-01:30", 1530), ("1:00:00", 60), ("90", 90),
                                               ("0", INFINITE), ("UNLIMITED", INFINITE), ("infinite", INFINITE),
                                               ("-1", INFINITE)])
def test_slurm_time_values(text: str, minutes: float) -> None:
    assert parse_time(text, "x") == minutes


@pytest.mark.parametrize("lines", [
    ["--partition=debug --account=research --nodes=2 --gpus-per-node=8 --time=30"],
    ["--partition debug", "--account research", "--nodes 2", "--gpus-per-node 8", "--time 30"],
    ["-p debug -A research -N 2 --gres=gpu:8 -t 30"],
    ["-pdebug -Aresearch -N2 -G 16 -t30  # a comment: -p train"],
    ["-p 'debug' -A \"research\" -N 2 --gpus=16 -t 0:30:00"],
])
def test_every_option_form(lines: list[str]) -> None:
    job = parse_sbatch("#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "srun true\n", "x", "j")
    assert (job.partitions, job.account, job.min_nodes, job.time_minutes) == (["debug"], "research", 2, 30)
    per_node = job.gpus_per_node.count if job.gpus_per_node else None
    assert per_node == 8 or (job.gpus is not None and job.gpus.count == 16)


def test_directives_after_the_first_command_are_comments(graph_files: Callable[[str], Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = script(tmp_path, "-A research", body="# still a comment\n\necho start\n#SBATCH -N 99\nsrun true\n")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 0 and report["workloads"][0]["nodes"] == 1
    assert any("#SBATCH on line 6 come after the first command: sbatch ignores them" in n
               for n in report["workloads"][0]["notes"])


def test_without_an_account_every_allowed_account_is_tried(graph_files: Callable[[str], Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files(SLURM), script(tmp_path, "-N 4", "--gpus-per-node=8"), capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["account"] == "pretraining"  # the first that fits 32 GPUs, by name
    assert any(n.startswith("as account applied it would not run: the job asks 32 GPUs") for n in workload["notes"])
    code, report = admit(graph_files(SLURM), script(tmp_path, "-N 9", "--gpus-per-node=8"), capsys=capsys)
    assert code == 1 and set(rules(report)) == {"account-gpu-limit"} and len(rules(report)) == 3


@pytest.mark.parametrize(("text", "says"), [
    ("#!/bin/bash\n#SBATCH -J 'unclosed\n", "unmatched '"),
    ("#!/bin/bash\n#SBATCH --time=3h\n", "--time=3h: not a Slurm time"),
    ("#!/bin/bash\n#SBATCH --gres=gpu:8 --gpus-per-node=8\n", "exclude each other"),
    ("#!/bin/bash\n#SBATCH --nodes=4-2\n", "not a node count"),
    ("#!/bin/bash\n#SBATCH -A\n", "-A needs a value"),
    ("#!/bin/bash\n#SBATCH train\n", "'train' is not an option"),
    ("#!/bin/bash\necho no directives\n", "a script without #SBATCH lines"),
])
def test_a_script_sbatch_would_refuse_exits_2(text: str, says: str, graph_files: Callable[[str], Path],
                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.sbatch"
    path.write_text(text, encoding="utf-8")
    assert main(["admit", str(graph_files(SLURM)), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}") and says in err, err


def test_a_parse_error_is_an_sbatch_error() -> None:
    with pytest.raises(SbatchError, match=r"^f:2: --time=soon"):
        parse_sbatch("#!/bin/sh\n#SBATCH --time=soon\n", "f", "f")


# --- Kubernetes jobs on a stack whose GPUs are Slurm's --------------------------------------------------------------


def test_a_team_job_is_told_its_gpus_are_slurm_s(graph_files: Callable[[str], Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text((ROOT / "examples/workloads/prod-aws/finetune-single-node.yaml").read_text(), encoding="utf-8")
    code, report = admit(graph_files(SLURM), path, capsys=capsys)
    assert code == 1
    (workload,) = report["workloads"]
    first = workload["reasons"][0]
    assert first["rule"] == "quota" and first["object"] == "ClusterQueue/applied"
    assert "has no flavor for them: Kueue has no quota for team applied on this stack" in first["message"]
    assert "the GPU node groups h100 are Slurm's (scheduler.slurm.nodeGroups)" in first["message"]
    assert "--account=applied; examples/slurm/" in first["message"]
    quota = [r["message"] for r in workload["reasons"] if r["rule"] == "resource-quota"]
    assert quota and all("it is the team's Kueue quota, none here; the GPU node groups h100 are Slurm's" in m
                         for m in quota)
    assert not any("raise the team's quota" in r["message"] for r in workload["reasons"])


def test_yaml_and_sbatch_in_one_call(graph_files: Callable[[str], Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    job = yaml.safe_load((ROOT / "examples/workloads/prod-aws/finetune-single-node.yaml").read_text())
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job), encoding="utf-8")
    code, report = admit(graph_files(SLURM), EXAMPLES / "train.sbatch", path, capsys=capsys)
    assert code == 1 and [w["admitted"] for w in report["workloads"]] == [True, False]
    assert "scheduler" not in report["workloads"][1]
