"""``blueprint nccl parse|check`` on the reference log and on logs written here for each format seen in the wild
(the figures in these synthetic logs are made up for the tests; only the reference log is a real run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blueprint.acceptance.nccl import NcclLogError, parse_nccl
from blueprint.cli import main

# SOURCE.md beside it
REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "all_reduce_p5x2_mpirun.log"

NEW_FORMAT = """\
# nccl-tests version 2.13.11 nccl-headers=22105 nccl-library=22105
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on node-a device  0 [0x53] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4243 on node-a device  1 [0x64] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   5151 on node-b device  0 [0x53] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   5152 on node-b device  1 [0x64] NVIDIA H100 80GB HBM3
node-a:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a:4242:4300 [0] NCCL INFO NET/OFI Selected Provider is efa
[node-a:04242] pmix_mca_base_component_repository_open: unable to open mca_pmix_ext2x
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    30.10    0.00    0.00      0    29.90    0.00    0.00      0
  1073741824     268435456     float     sum      -1   6000.0  178.96  268.44      0   5990.0  179.26  268.89      0
 17179869184    4294967296     float     sum      -1  90000.0  190.89  286.33      0  89900.0  191.10  286.65      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 184.4
#
# Collective test concluded: all_reduce_perf
"""

OLD_FORMAT = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    42.11    0.00    0.00  0e+00    41.95    0.00    0.00  0e+00
   134217728      33554432   float     sum   1520.0   88.30  154.53  0e+00   1518.0   88.42  154.73  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 77.3
"""


def _prefix(text: str, how: str) -> str:
    lines = text.splitlines()
    if how == "mpirun":
        return "\n".join(f"[1,0]<stdout>:{line}" for line in lines) + "\n"
    return "\n".join(f"{i % 16:>2}: {line}" for i, line in enumerate(lines)) + "\n"


def test_the_reference_log() -> None:
    """A real run on 2 x p5.48xlarge through mpirun --tag-output, with an elided row ('...')."""
    run = parse_nccl(REFERENCE.read_text())
    doc = run.to_dict()
    assert doc["max_busbw_gbps"] == 437.89 and doc["avg_busbw_gbps"] == 52.9753
    assert doc["collective"] == "all_reduce" and doc["collective_inferred"] is True
    assert doc["ok"] is True and doc["wrong"] == 0 and len(doc["rows"]) == 7  # and the "..." line skipped
    assert doc["rows"][-1] == {"size": 2147483648, "count": 536870912, "type": "float", "redop": "sum", "root": -1,
                               "out_of_place": {"time_us": 9197.5, "algbw": 233.49, "busbw": 437.79, "wrong": 0},
                               "in_place": {"time_us": 9195.2, "algbw": 233.54, "busbw": 437.89, "wrong": 0}}


@pytest.mark.parametrize("how", ["plain", "mpirun", "srun"])
def test_the_new_format_with_its_header_devices_and_noise(how: str) -> None:
    text = NEW_FORMAT if how == "plain" else _prefix(NEW_FORMAT, how)
    run = parse_nccl(text)
    assert (run.collective, run.collective_inferred, run.concluded) == ("all_reduce", False, True)
    assert run.tests_version == "2.13.11" and run.nccl_version == "2.21.5+cuda12.4"
    assert run.ranks == 4 and run.gpus_per_rank == 1 and run.table_format == "new"
    assert run.devices[2] == {"rank": 2, "host": "node-b", "device": 0, "bus_id": "0x53",
                              "gpu": "NVIDIA H100 80GB HBM3"}
    assert run.max_busbw == 286.65 and run.avg_busbw == 184.4 and run.ok


def test_the_old_format_without_root_and_with_an_error_column() -> None:
    run = parse_nccl(OLD_FORMAT)
    assert run.table_format == "old" and run.rows[1].root is None
    assert run.wrong is None and run.rows[1].out_of_place["max_error"] == 0.0  # a deviation, not a count
    assert run.wrong_summary == "no count in the old table (out of bounds: 0 OK)"
    assert run.gpus_per_rank == 8 and run.max_busbw == 154.73 and run.ok
    assert run.collective == "all_reduce" and run.collective_inferred


def test_validation_off_shows_na() -> None:
    first = NEW_FORMAT.replace("      0    29.90", "    N/A    29.90").replace("0.00      0\n", "0.00    N/A\n")
    run = parse_nccl(first)
    assert run.rows[0].wrong is None and run.wrong == 0  # the other rows were validated
    only_na = parse_nccl(NEW_FORMAT.replace("      0 ", "    N/A ").replace("      0\n", "    N/A\n"))
    assert only_na.wrong is None and only_na.ok


def test_lines_whose_hash_was_stripped() -> None:
    stripped = "\n".join(line.lstrip("#") for line in NEW_FORMAT.splitlines())
    run = parse_nccl(stripped)
    assert run.avg_busbw == 184.4 and run.out_of_bounds == 0 and run.max_busbw == 286.65 and run.ranks == 4


def test_a_truncated_run_is_not_ok() -> None:
    cut = NEW_FORMAT.split("# Out of bounds")[0]
    run = parse_nccl(cut)
    assert not run.complete and not run.ok and run.max_busbw == 286.65


def test_wrong_values_fail() -> None:
    bad = NEW_FORMAT.replace("268.44      0", "268.44      3").replace("0 OK", "3 FAILED")
    run = parse_nccl(bad)
    assert run.wrong == 3 and run.oob_status == "FAILED" and not run.ok


@pytest.mark.parametrize("text", ["", "hello\nworld\n", "# Avg bus bandwidth : 3\n", "\x00\x01binary"])
def test_not_a_log_is_a_clear_error(text: str) -> None:
    with pytest.raises(NcclLogError):
        parse_nccl(text)


def test_cli_parse_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nccl", "parse", str(REFERENCE)]) == 0
    assert json.loads(capsys.readouterr().out)["max_busbw_gbps"] == 437.89
    assert main(["nccl", "check", str(REFERENCE), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] and doc["required_busbw_gbps"] == pytest.approx(437.89 * 0.9)
    slow = tmp_path / "slow.log"
    slow.write_text(NEW_FORMAT)  # 286.65 GB/s against p5's 437.89 x 0.9
    assert main(["nccl", "check", str(slow), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert "### NCCL acceptance: FAIL" in out and "peak bus bandwidth 286.65 GB/s is below 394.10 GB/s" in out
    assert main(["nccl", "check", str(slow), "--instance-type", "p4d.24xlarge", "--nodes", "2"]) == 2
    assert "no expected bus bandwidth for p4d.24xlarge" in capsys.readouterr().err
    assert main(["nccl", "check", str(slow), "--instance-type", "p4d.24xlarge", "--nodes", "2",
                 "--expected-busbw", "300"]) == 0
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\xff\xfe not a log")
    assert main(["nccl", "parse", str(junk)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {junk}: not an nccl-tests log: no nccl-tests result row")


NODES = {"apiVersion": "v1", "kind": "List", "items": [
    {"metadata": {"name": f"ip-10-40-0-{i}.ec2.internal", "labels": {
        "node.kubernetes.io/instance-type": "p5.48xlarge", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/cuda.driver-version.full": "570.133.20", "nvidia.com/cuda.runtime-version.full": "12.8"}},
     "spec": {"providerID": f"aws:///us-east-1d/i-0abc{i}"}} for i in (1, 2)]}


def test_node_facts_read_each_clouds_provider_id() -> None:
    from blueprint.acceptance.records import node_facts

    gke = {"items": [{"metadata": {"name": "gke-prod-a3-pool-1", "labels": {}},
                      "spec": {"providerID": "gce://ml-prod/us-central1-a/gke-prod-a3-pool-1"}},
                     {"metadata": {"name": "kind-worker", "labels": {}}, "spec": {"providerID": "kind://docker/x"}}]}
    facts = node_facts(gke)["nodes"]
    assert facts[0]["zone"] == "us-central1-a" and facts[0]["instance_id"] == "gke-prod-a3-pool-1"
    assert (facts[1]["zone"], facts[1]["instance_id"]) == ("docker", "x")
    assert node_facts(NODES)["nodes"][1]["instance_id"] == "i-0abc2"


def test_record_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(NODES))
    log = tmp_path / "run.log"
    log.write_text(NEW_FORMAT.replace("NET/OFI Selected Provider is efa",
                                      "NET/OFI Initializing aws-ofi-nccl 1.14.0"))
    before = tmp_path / "before.json"
    assert main(["nccl", "record", str(REFERENCE), "--stack", "prod-aws", "--node-group", "h100",
                 "--nodes-json", str(nodes), "--instance-type", "p5.48xlarge", "-o", str(before)]) == 0
    rec = json.loads(before.read_text())
    assert rec["nodes"][0] == {"name": "ip-10-40-0-1.ec2.internal", "instance_id": "i-0abc1", "zone": "us-east-1d",
                               "instance_type": "p5.48xlarge"}
    assert (rec["gpu_model"], rec["driver"], rec["cuda"]) == ("NVIDIA-H100-80GB-HBM3", "570.133.20", "12.8")
    assert rec["max_busbw_gbps"] == 437.89 and rec["verdict"]["passed"] is True and rec["verdict"]["nodes"] == 2
    after = tmp_path / "after.json"
    assert main(["nccl", "record", str(log), "--stack", "prod-aws", "--node-group", "h100",
                 "--nodes-json", str(nodes), "-o", str(after)]) == 0
    later = json.loads(after.read_text())
    assert later["aws_ofi_nccl_version"] == "1.14.0" and later["nccl_version"] == "2.21.5+cuda12.4"
    assert main(["nccl", "compare", str(before), str(after)]) == 1  # 437.89 -> 286.65 GB/s: a fall of 35 %
    out = capsys.readouterr().out
    assert "peak bus bandwidth: 437.89 -> 286.65 GB/s (-34.5%)" in out
    assert "nccl_version: None -> 2.21.5+cuda12.4" in out
    assert main(["nccl", "compare", str(before), str(before)]) == 0


def test_record_refuses_what_is_not_kubectl_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_text("[1, 2]")
    assert main(["nccl", "record", str(REFERENCE), "--stack", "s", "--node-group", "g",
                 "--nodes-json", str(nodes)]) == 2
    assert "not the output of `kubectl get nodes -o json`" in capsys.readouterr().err



def test_what_a_check_must_not_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong value hidden beside N/A, a FAILED summary, another collective, two tests in one log, and a
    single-node run judged against a multi-node figure."""
    half = parse_nccl(NEW_FORMAT.replace("268.44      0   5990.0  179.26  268.89      0",
                                         "268.44      2   5990.0  179.26  268.89    N/A"))
    assert half.wrong == 2 and not half.ok
    failed = parse_nccl(NEW_FORMAT.replace("# Avg bus bandwidth    : 184.4", "# Avg bus bandwidth    : 184.4 FAILED"))
    assert failed.avg_failed and not failed.ok
    gather = tmp_path / "gather.log"
    gather.write_text(NEW_FORMAT.replace("all_reduce_perf", "all_gather_perf"))
    assert main(["nccl", "check", str(gather), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--expected-busbw", "100"]) == 1
    assert "the thresholds are for all_reduce, and this log is all_gather" in capsys.readouterr().out
    with pytest.raises(NcclLogError, match="more than one test"):
        parse_nccl(NEW_FORMAT + NEW_FORMAT.replace("all_reduce_perf", "alltoall_perf"))
    one = tmp_path / "one.log"
    one.write_text(NEW_FORMAT)
    # A single-node run is judged against the per-node (NVLink) figure, never the 2-node fabric one (437.89 GB/s).
    assert main(["nccl", "check", str(one), "--instance-type", "p5.48xlarge", "--nodes", "1"]) == 1
    out = capsys.readouterr().out
    assert "required 414.00 (90% of 460.00)" in out and "437.89" not in out


# --- issue 20: a check never passes a log it did not really check -----------------------------------------------

ROW_1G = ("1073741824     268435456     float     sum      -1   6000.0  178.96  268.44      0   5990.0  179.26  "
          "268.89      0")


@pytest.mark.parametrize(("oop", "ip", "problem"), [
    ("5", "-5", "not a valid figure: size 1073741824: in-place #wrong is -5, not a count"),
    ("2.5", "0", "not a valid figure: size 1073741824: out-of-place #wrong is 2.5, not a count"),
    ("nan", "0", "not a valid figure: size 1073741824: out-of-place #wrong is nan, not a count"),
    ("inf", "0", "not a valid figure: size 1073741824: out-of-place #wrong is inf, not a count"),
    ("3", "0", "3 wrong value(s) in the result table (sizes 1073741824)"),
])
def test_wrong_counts_that_are_not_zero_or_not_counts_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           oop: str, ip: str, problem: str) -> None:
    row = ROW_1G.replace("268.44      0", f"268.44 {oop:>6}").replace("268.89      0", f"268.89 {ip:>6}")
    log = tmp_path / "run.log"
    log.write_text(NEW_FORMAT.replace(ROW_1G, row))
    run = parse_nccl(log.read_text())
    assert not run.ok
    assert main(["nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--expected-busbw", "200", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is False and problem in doc["problems"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_bandwidths_that_are_not_numbers_fail_and_parse_prints_json(tmp_path: Path, value: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.log"
    log.write_text(NEW_FORMAT.replace("286.65      0\n", f"{value}      0\n")
                   .replace("# Avg bus bandwidth    : 184.4", f"# Avg bus bandwidth    : {value}"))
    assert main(["nccl", "parse", str(log)]) == 0
    text = capsys.readouterr().out

    def not_json(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")
    doc = json.loads(text, parse_constant=not_json)
    assert doc["rows"][-1]["in_place"]["busbw"] is None and doc["avg_busbw_gbps"] is None and doc["ok"] is False
    assert doc["invalid_values"] == [f"size 17179869184: in-place busbw is {value}",
                                     f"the average bus bandwidth is {value}"]
    assert main(["nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--expected-busbw", "100"]) == 1
    assert f"not a valid figure: size 17179869184: in-place busbw is {value}" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_expected_busbw_must_be_a_finite_positive_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nccl", "check", str(REFERENCE), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--expected-busbw", value]) == 2
    assert capsys.readouterr().err == (f"error: --expected-busbw must be a finite positive number of GB/s, got "
                                       f"{float(value)}\n")


def _table(redop: str, root: int, size: int, count: int) -> str:
    """A nameless log of one row: the collective is read from the table's shape."""
    return OLD_FORMAT.split("#       size")[0] + (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
        "busbw #wrong\n"
        f"  {size:>10} {count:>13}     float  {redop:>6}  {root:>6}   6000.0  178.96  268.44      0   5990.0  179.26  "
        "268.89      0\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 184.4\n")


@pytest.mark.parametrize(("redop", "root", "count", "named", "candidates"), [
    ("sum", -1, 268435456, "all_reduce", []),
    ("sum", 0, 268435456, "reduce", []),
    ("sum", -1, 16777216, "reduce_scatter", []),
    ("none", 0, 268435456, "broadcast", []),
    ("none", -1, 268435456, "sendrecv", []),
    ("none", 0, 16777216, None, ["gather", "scatter"]),  # a scatter log was reported as broadcast
    ("none", -1, 16777216, None, ["all_gather", "alltoall"]),
])
def test_a_nameless_log_is_read_from_the_table_shape(redop: str, root: int, count: int, named: str | None,
                                                     candidates: list[str]) -> None:
    run = parse_nccl(_table(redop, root, 1073741824, count))
    assert (run.collective, run.collective_candidates, run.collective_inferred) == (named, candidates,
                                                                                   named is not None)


def test_the_scatter_example_of_awsome_distributed_training_is_not_broadcast(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md, its scatter_perf excerpt
    (srun -l prefixes, 16 ranks: 2147483648 B is 33554432 floats x 16)."""
    log = tmp_path / "scatter.log"
    log.write_text(
        "0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
        "busbw #wrong\n"
        "0:    536870912       8388608     float    none       0   6561.3   81.82   76.71      0   6508.3   82.49   "
        "77.33      0\n"
        "0:   2147483648      33554432     float    none       0    25421   84.48   79.20      0    25283   84.94   "
        "79.63      0\n")
    run = parse_nccl(log.read_text())
    assert run.collective is None and run.collective_candidates == ["gather", "scatter"]
    assert main(["nccl", "check", str(log), "--instance-type", "p5.48xlarge", "--nodes", "2",
                 "--expected-busbw", "50"]) == 1
    assert ("the thresholds are for all_reduce, and this log's collective is gather or scatter (the log does not "
            "name it and its table is not all_reduce's)") in capsys.readouterr().out


# --- issue 27: the per-node run of a group, its outliers and its history ------------------------------------------

def _node_log(busbw: float, latency_us: float, nccl: str = "2.21.5+cuda12.4") -> str:
    """A single-node all_reduce_perf log (-g 8) in nccl-tests' format, with the figures given (synthetic: the shape of
    NEW_FORMAT above, one process and eight GPUs)."""
    return (f"# nccl-tests version 2.13.11 nccl-headers=22105 nccl-library=22105\n"
            f"# nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20\n"
            f"node-a:1:1 [0] NCCL INFO NCCL version {nccl}\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
            "busbw #wrong\n"
            f"           8             2     float     sum      -1    {latency_us:.2f}    0.00    0.00      0    "
            f"{latency_us + 0.5:.2f}    0.00    0.00      0\n"
            f" 17179869184    4294967296     float     sum      -1  60000.0  286.33  {busbw:.2f}      0  60000.0  "
            f"286.33  {busbw:.2f}      0\n"
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 200.0\n")


def _write_run(root: Path, nodes: dict[str, tuple[float, float, str, str]], status: int = 0) -> Path:
    """acceptance/h100/<run>/<node>/ as the per-node job uploads it: nccl.log and node.json."""
    root.mkdir(parents=True)
    for node, (busbw, latency, driver, nccl) in nodes.items():
        (root / node).mkdir()
        (root / node / "nccl.log").write_text(_node_log(busbw, latency, nccl))
        (root / node / "node.json").write_text(json.dumps({
            "node": node, "pod": f"nccl-nodes-h100-{node}", "index": "0", "node_group": "h100",
            "instance_type": "p5.48xlarge", "gpus": 8, "driver": driver, "cuda": "12.8",
            "exit_status": status, "started": "2027-01-04T12:00:00Z", "finished": "2027-01-04T12:09:00Z"}))
    return root


def test_the_per_node_run_flags_outliers_against_the_median_and_the_expected_figure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_run(tmp_path / "20270104T1200Z", {
        "ip-10-40-0-1": (472.0, 30.0, "570.133.20", "2.21.5+cuda12.4"),
        "ip-10-40-0-2": (470.0, 31.0, "570.133.20", "2.21.5+cuda12.4"),
        "ip-10-40-0-3": (471.0, 29.5, "570.133.20", "2.21.5+cuda12.4"),
        "ip-10-40-0-4": (402.0, 30.5, "570.133.20", "2.21.5+cuda12.4"),  # slow NVLink: below the median and the gate
        "ip-10-40-0-5": (469.0, 61.0, "570.133.20", "2.21.5+cuda12.4"),  # a slow small-message path
    })
    out = tmp_path / "run.json"
    assert main(["nccl", "nodes", str(run), "--stack", "prod-aws", "--format", "json", "-o", str(out)]) == 1
    record = json.loads(out.read_text())
    assert record["kind"] == "per-node" and record["run"] == "20270104T1200Z" and record["node_group"] == "h100"
    assert record["expected_busbw_gbps"] == 460.0 and record["median_busbw_gbps"] == 470.0
    assert record["outliers"] == ["ip-10-40-0-4", "ip-10-40-0-5"]
    by_node = {n["node"]: n for n in record["nodes"]}
    assert by_node["ip-10-40-0-1"]["latency_us"] == 30.0 and by_node["ip-10-40-0-1"]["busbw_gbps"] == 472.0
    assert by_node["ip-10-40-0-4"]["problems"] == [
        "bus bandwidth 402.00 GB/s is below 95% of the group's median (470.00 GB/s)",
        "bus bandwidth 402.00 GB/s is below 414.00 GB/s (90% of the expected 460.00 GB/s)"]
    assert by_node["ip-10-40-0-5"]["problems"] == [
        "small-message time 61.00 us is above 1.5 x the group's median (30.50 us)"]
    assert main(["nccl", "nodes", str(run)]) == 1
    table = capsys.readouterr().out
    assert table.startswith("FAIL: 5 node(s) of h100 (p5.48xlarge), median 470.00 GB/s, expected 460.00 GB/s")
    assert "ip-10-40-0-4" in table and table.count("OUTLIER") == 2


def test_a_run_that_missed_nodes_fails_and_names_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The nodes without a record are the suspect ones: four good records of prod-aws's 16-node h100 group fail."""
    good = (470.0, 30.0, "570.133.20", "2.21.5+cuda12.4")
    run = _write_run(tmp_path / "r", {f"ip-10-40-0-{i}": good for i in range(1, 5)})
    assert main(["nccl", "nodes", str(run), "--stack", "prod-aws"]) == 1
    table = capsys.readouterr().out
    assert table.startswith("FAIL: 4 node(s) of h100")
    assert "missing: 12 of 16 node(s) left no record (indexes 1, 2, 3, 4, 5" in table
    assert main(["nccl", "nodes", str(run), "--expect-nodes", "4"]) == 0  # the run was meant for these four
    assert main(["nccl", "nodes", str(run)]) == 0  # nothing says how many were meant: the records alone
    assert main(["nccl", "nodes", str(run), "--expect-nodes", "0"]) == 2


def test_a_node_whose_benchmark_failed_or_has_no_figure_is_named(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_run(tmp_path / "r", {"n1": (470.0, 30.0, "570.1", "2.21.5"), "n2": (471.0, 30.0, "570.1", "2.21.5")},
                     status=1)
    (run / "n2" / "nccl.log").write_text("NCCL WARN NET/OFI no provider\n")
    assert main(["nccl", "nodes", str(run), "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    problems = {n["node"]: n["problems"] for n in record["nodes"]}
    assert problems["n1"] == ["all_reduce_perf exited 1"]
    assert problems["n2"][0].startswith("no result in its log: no nccl-tests result row")
    # A type without a per-node figure needs the stack's (acceptance.expected), as the spec rule says.
    (run / "n1" / "node.json").write_text(json.dumps({"node": "n1", "instance_type": "a3-megagpu-8g"}))
    (run / "n2" / "node.json").write_text(json.dumps({"node": "n2", "instance_type": "a3-megagpu-8g"}))
    assert main(["nccl", "nodes", str(run)]) == 2
    assert "no per-node bus bandwidth for a3-megagpu-8g" in capsys.readouterr().err
    assert main(["nccl", "nodes", str(tmp_path / "missing")]) == 2


def test_compare_names_the_nodes_and_versions_that_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _write_run(tmp_path / "a", {"n1": (470.0, 30.0, "570.133.20", "2.21.5"),
                                        "n2": (471.0, 30.0, "570.133.20", "2.21.5"),
                                        "n3": (469.0, 30.0, "570.133.20", "2.21.5")})
    second = _write_run(tmp_path / "b", {"n1": (470.0, 30.0, "580.65.06", "2.27.3"),  # driver and NCCL moved
                                         "n2": (470.5, 30.0, "570.133.20", "2.21.5"),
                                         "n4": (468.0, 30.0, "570.133.20", "2.21.5")})  # n3 replaced by n4
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["nccl", "nodes", str(first), "--format", "json", "-o", str(a)]) == 0
    assert main(["nccl", "nodes", str(second), "--format", "json", "-o", str(b)]) == 0
    assert main(["nccl", "compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "nodes gone: n3" in out and "nodes new: n4" in out
    assert "n1: driver 570.133.20 -> 580.65.06; NCCL 2.21.5 -> 2.27.3" in out
    assert not any(line.startswith("n2:") for line in out)
    assert "driver versions of the group: 570.133.20 -> 570.133.20, 580.65.06" in out
    # A node that became an outlier fails the comparison.
    third = _write_run(tmp_path / "c", {"n1": (470.0, 30.0, "580.65.06", "2.27.3"),
                                        "n2": (400.0, 30.0, "570.133.20", "2.21.5"),
                                        "n4": (468.0, 30.0, "570.133.20", "2.21.5")})
    c = tmp_path / "c.json"
    assert main(["nccl", "nodes", str(third), "--format", "json", "-o", str(c)]) == 1
    assert main(["nccl", "compare", str(b), str(c)]) == 1
    assert "n2: bus bandwidth 470.50 -> 400.00 GB/s (-15.0%); now an outlier" in capsys.readouterr().out
    # A per-node record is not compared with a multi-node one.
    multi = tmp_path / "multi.json"
    multi.write_text(json.dumps({"max_busbw_gbps": 400.0}))
    assert main(["nccl", "compare", str(a), str(multi)]) == 2
    assert "one is a per-node record and the other is not" in capsys.readouterr().err
