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


# --- issue 34: the node check's facts, pairs over the fabric, the multi-node run kept -----------------------------

P5_MODEL = "NVIDIA H100 80GB HBM3"


def _fabric_log(busbw: float, hosts: list[str], *, complete: bool = True, wrong: int = 0) -> str:
    """An all_reduce_perf log across ``hosts`` (8 GPUs each, mpirun --tag-output), the shape of the reference log
    (header, device lines, rows, "Avg bus bandwidth"); the figures are made up for the tests."""
    devices = "".join(f"#  Rank {8 * h + g:2d} Group  0 Pid {1000 + g:6d} on {host} device  {g} [0x{g + 10:02x}] "
                      f"{P5_MODEL}\n" for h, host in enumerate(hosts) for g in range(8))
    body = ("# nccl-tests version 2.13.11 nccl-headers=22105 nccl-library=22105\n"
            "# Collective test starting: all_reduce_perf\n"
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20\n"
            f"{devices}"
            f"{hosts[0]}:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
            f"{hosts[0]}:1:1 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
            "busbw #wrong\n"
            "           8             2     float     sum      -1    60.10    0.00    0.00      0    60.20    0.00    "
            "0.00      0\n"
            f"  2147483648     536870912     float     sum      -1   9197.5  233.49  {busbw:.2f}  {wrong:5d}   "
            f"9195.2  233.54  {busbw:.2f}      0\n")
    tail = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 52.9753\n" if complete else ""
    return "".join(f"[1,0]<stdout>:{line}\n" for line in (body + tail).splitlines())


def _write_pairs(root: Path, pairs: dict[tuple[int, str, str], float], status: int = 0) -> Path:
    """<run>/pairs/<round>-<a>--<b>/ as the pair job uploads it: nccl.log and pair.json."""
    for (round_, a, b), busbw in pairs.items():
        where = root / "pairs" / f"{round_}-{a}--{b}"
        where.mkdir(parents=True)
        (where / "nccl.log").write_text(_fabric_log(busbw, [a, b]))
        (where / "pair.json").write_text(json.dumps({
            "round": round_, "nodes": [a, b], "node_group": "h100", "exit_status": status,
            "started": "2027-01-04T12:10:00Z", "finished": "2027-01-04T12:12:00Z"}))
    return root


def _bad_nic_pairs(root: Path) -> Path:
    """Four nodes, n3's NIC bad: both of n3's pairs are slow, the other two pass."""
    return _write_pairs(root, {(1, "n0", "n1"): 430.0, (1, "n2", "n3"): 120.0,
                               (2, "n1", "n2"): 428.0, (2, "n3", "n0"): 118.0})


def _node_check(root: Path, node: str, **fields: object) -> None:
    """Add the node check's facts (issue 34) to a node.json written by _write_run."""
    meta = root / node / "node.json"
    facts = json.loads(meta.read_text())
    facts.update({"gpu_count": 8, "gpu_model": P5_MODEL, "nccl_version": "2.21.5", "fabric_plugin": "aws-ofi-nccl "
                  "1.13.2", "dcgm": {"level": 2, "result": "pass", "seconds": 412.0, "failed": []},
                  "fabric": {"kind": "efa", "expected": 32, "present": 32, "up": 32,
                             "devices": [f"rdmap{i}s0" for i in range(32)]},
                  "checks": [{"name": "gpu-count", "passed": True, "detail": "8 of 8"}], "passed": True})
    facts.update(fields)
    meta.write_text(json.dumps(facts))


def _good_nodes(root: Path, names: list[str]) -> Path:
    run = _write_run(root, {n: (470.0, 30.0, "570.133.20", "2.21.5+cuda12.4") for n in names})
    for n in names:
        _node_check(run, n)
    return run


def _suspects(record: dict[str, object]) -> dict[str, str]:
    pairs = record["pairs"]
    assert isinstance(pairs, dict)
    return {s["node"]: s["verdict"] for s in pairs["suspects"]}


def test_a_bad_nic_fails_both_of_its_pairs_and_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """n3 passes its NVLink-only run; its two pairs over EFA fail and name it; its partners are cleared by their
    other pairs."""
    run = _bad_nic_pairs(_good_nodes(tmp_path / "r", ["n0", "n1", "n2", "n3"]))
    assert main(["nccl", "nodes", str(run), "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["outliers"] == []  # the per-node (NVLink) run cannot see it
    assert _suspects(record) == {"n3": "bad"}
    pairs = record["pairs"]
    assert pairs["judged_against"] == "expected" and pairs["expected_busbw_gbps"] == 437.89
    assert {p["name"]: p["verdict"] for p in pairs["pairs"]} == {
        "1-n0--n1": "pass", "1-n2--n3": "fail", "2-n1--n2": "pass", "2-n3--n0": "fail"}
    assert pairs["inconclusive"] == [] and pairs["unpaired"] == []
    assert main(["nccl", "nodes", str(run)]) == 1
    table = capsys.readouterr().out
    assert "suspect nodes:\n  n3: bad:" in table
    assert "pairs: FAIL: 4 pair(s), 2 failed" in table


def test_pairs_alone_are_judged_against_their_median_without_a_figure(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = _bad_nic_pairs(tmp_path / "r")  # no per-node records, no instance type anywhere
    assert main(["nccl", "nodes", str(run), "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["nodes"] == [] and record["pairs"]["judged_against"] == "median"
    assert _suspects(record) == {"n3": "bad"}
    assert main(["nccl", "nodes", str(run)]) == 1
    assert "the pairs' median: no expected multi-node figure" in capsys.readouterr().out
    # The figure given judges them all: 430 is below 90 % of 500.
    assert main(["nccl", "nodes", str(run), "--expected-pair-busbw", "500", "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["pairs"]["judged_against"] == "expected"
    assert set(_suspects(record).values()) == {"bad"} and len(_suspects(record)) == 4
    # Good pairs pass.
    good = _write_pairs(tmp_path / "g", {(1, "n0", "n1"): 430.0, (1, "n2", "n3"): 431.0,
                                         (2, "n1", "n2"): 428.0, (2, "n3", "n0"): 429.0})
    assert main(["nccl", "nodes", str(good), "--instance-type", "p5.48xlarge"]) == 0
    assert main(["nccl", "nodes", str(good), "--expected-pair-busbw", "nan"]) == 2


def test_a_pair_that_fails_with_partners_that_pass_elsewhere_is_inconclusive(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_pairs(tmp_path / "r", {(1, "n0", "n1"): 200.0, (1, "n2", "n3"): 430.0,
                                        (2, "n1", "n2"): 428.0, (2, "n3", "n0"): 429.0})
    assert main(["nccl", "nodes", str(run), "--instance-type", "p5.48xlarge", "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert _suspects(record) == {}
    assert record["pairs"]["inconclusive"] == [["n0", "n1"]]
    assert {p["name"]: p["verdict"] for p in record["pairs"]["pairs"]}["1-n0--n1"] == "inconclusive: rerun"


def test_a_pair_that_exited_non_zero_or_was_cut_short_fails(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = _bad_nic_pairs(tmp_path / "r")
    where = run / "pairs" / "1-n2--n3"
    (where / "nccl.log").write_text(_fabric_log(430.0, ["n2", "n3"], complete=False))
    other = run / "pairs" / "2-n3--n0"
    (other / "nccl.log").write_text(_fabric_log(430.0, ["n3", "n0"], wrong=3))
    facts = json.loads((other / "pair.json").read_text())
    (other / "pair.json").write_text(json.dumps({**facts, "exit_status": 1}))
    assert main(["nccl", "nodes", str(run), "--instance-type", "p5.48xlarge", "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    problems = {p["name"]: p["problems"] for p in record["pairs"]["pairs"]}
    assert problems["1-n2--n3"] == ["the run was cut short (no 'Avg bus bandwidth' line)"]
    assert problems["2-n3--n0"] == ["all_reduce_perf exited 1", "3 wrong value(s)"]
    assert _suspects(record) == {"n3": "bad"}


def test_isolation_names_the_node_only_a_second_pairing_can_confirm() -> None:
    from blueprint.acceptance.fabric import isolate

    def verdicts(pairs: list[tuple[tuple[str, ...], bool]]) -> dict[str, str]:
        return {s["node"]: s["verdict"] for s in isolate(pairs)[0]}
    # Odd count: n4 met only n0 (its round-1 pair) and failed; n0 passed with n1: n4 is suspect, unconfirmed.
    assert verdicts([(("n0", "n1"), True), (("n2", "n3"), True), (("n4", "n0"), False), (("n1", "n2"), True),
                     (("n3", "n0"), True)]) == {"n4": "suspect, unconfirmed"}
    # Two nodes that only met each other: either could be at fault.
    assert verdicts([(("n0", "n1"), False), (("n1", "n0"), False)]) == {"n0": "suspect, unconfirmed",
                                                                        "n1": "suspect, unconfirmed"}
    # Two bad neighbours: each failed with both its partners.
    assert verdicts([(("n0", "n1"), True), (("n2", "n3"), False), (("n1", "n2"), False),
                     (("n3", "n0"), False)]) == {"n2": "bad", "n3": "bad"}
    # A node whose only partner is bad is not cleared.
    assert verdicts([(("n0", "n1"), False), (("n0", "n2"), False), (("n2", "n3"), True)]) == {
        "n0": "bad", "n1": "suspect, unconfirmed"}
    # All pass: nobody.
    assert isolate([(("n0", "n1"), True), (("n1", "n0"), True)]) == ([], [])


@pytest.mark.parametrize(("node", "fields", "problem"), [
    ("n3", {"fabric": {"kind": "efa", "expected": 32, "present": 32, "up": 31, "devices": []}},
     "efa devices: 31 of 32 up (32 present)"),
    ("n1", {"dcgm": {"level": 2, "result": "fail", "seconds": 400.0, "failed": ["Memory", "PCIe"]}},
     "DCGM diagnostic (level 2): fail (Memory, PCIe)"),
    ("n1", {"dcgm": {"level": 2, "result": "error", "seconds": None, "failed": []}},
     "DCGM diagnostic (level 2): error"),
    ("n2", {"gpu_count": 7}, "nvidia-smi lists 7 GPU(s), the stack expects 8"),
    ("n0", {"checks": [{"name": "gpus-idle", "passed": False, "detail": "pid 4242 holds GPU 3"}]},
     "check gpus-idle failed: pid 4242 holds GPU 3"),
    ("n0", {"passed": False, "checks": []},
     "the node's own check failed (passed: false in node.json, no failed check named)"),
])
def test_the_node_check_fails_a_node_the_nvlink_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           node: str, fields: dict[str, object], problem: str) -> None:
    run = _good_nodes(tmp_path / "r", ["n0", "n1", "n2", "n3"])
    _node_check(run, node, **fields)
    assert main(["nccl", "nodes", str(run), "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["outliers"] == [node]
    assert {n["node"]: n["problems"] for n in record["nodes"]}[node] == [problem]
    assert main(["nccl", "nodes", str(run)]) == 1
    assert f"  - {problem}" in capsys.readouterr().out


def test_the_gpu_model_is_what_nvidia_smi_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _good_nodes(tmp_path / "r", ["n0", "n1"])
    assert main(["nccl", "nodes", str(run)]) == 0
    table = capsys.readouterr().out
    assert table.startswith(f"PASS: 2 node(s) of h100 (p5.48xlarge, {P5_MODEL}), median 470.00 GB/s")
    assert f"  8 x {P5_MODEL}, DCGM level 2 pass, efa 32/32 up (aws-ofi-nccl 1.13.2)" in table
    _node_check(run, "n1", gpu_model="NVIDIA H100 PCIe")
    assert main(["nccl", "nodes", str(run), "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["gpu_models"] == [P5_MODEL, "NVIDIA H100 PCIe"]
    assert main(["nccl", "nodes", str(run)]) == 0
    assert f"warning: the nodes report 2 GPU models (nvidia-smi): {P5_MODEL}, NVIDIA H100 PCIe" in (
        capsys.readouterr().out)


@pytest.mark.parametrize(("where", "content", "message"), [
    ("n0/node.json", {"node": "n0", "gpu_count": "8"}, "n0/node.json: gpu_count is \"8\", not a count of GPUs"),
    ("n0/node.json", {"node": "n0", "dcgm": {"result": "ok"}}, "n0/node.json: dcgm is {\"result\": \"ok\"}, not an "
     "object whose result is one of pass, fail, skipped, error"),
    ("n0/node.json", {"node": "n0", "fabric": {"kind": "efa", "expected": 32, "present": 32, "up": "31"}},
     "n0/node.json: fabric is"),
    ("n0/node.json", {"node": "n0", "checks": [{"name": "dcgm", "passed": "no"}]}, "n0/node.json: checks is"),
    ("pairs/1-n0--n1/pair.json", {"round": 1, "nodes": ["n0"]}, "pairs/1-n0--n1/pair.json: nodes is [\"n0\"], not "
     "two node names"),
    ("pairs/1-n0--n1/pair.json", [1, 2], "pairs/1-n0--n1/pair.json: not a JSON object"),
    ("multinode/nodes.json", {"nodes": "n0"}, "multinode/nodes.json: nodes is \"n0\", not a list of node names"),
])
def test_records_of_another_shape_are_named_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            where: str, content: object, message: str) -> None:
    run = _bad_nic_pairs(_write_run(tmp_path / "r", {"n0": (470.0, 30.0, "570.1", "2.21.5")}))
    (run / "multinode").mkdir()
    (run / "multinode" / "nccl.log").write_text(_fabric_log(430.0, ["n0", "n1"]))
    (run / where).write_text(json.dumps(content))
    assert main(["nccl", "nodes", str(run)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_pair_and_multinode_directories_are_not_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _bad_nic_pairs(_good_nodes(tmp_path / "r", ["n0", "n1", "n2", "n3", "n4"]))
    (run / "multinode").mkdir()
    (run / "multinode" / "nccl.log").write_text(_fabric_log(430.0, ["n0", "n1", "n2", "n3"]))
    assert main(["nccl", "nodes", str(run), "--format", "json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert [n["node"] for n in record["nodes"]] == ["n0", "n1", "n2", "n3", "n4"]
    assert record["pairs"]["unpaired"] == ["n4"]


def _write_multinode(root: Path, busbw: float, nodes: list[str], status: int = 0) -> Path:
    """<run>/multinode/ as the multi-node job uploads it: nccl.log and nodes.json."""
    where = root / "multinode"
    where.mkdir(parents=True)
    (where / "nccl.log").write_text(_fabric_log(busbw, nodes))
    (where / "nodes.json").write_text(json.dumps({
        "nodes": nodes, "workers": {f"nccl-h100-worker-{i}": n for i, n in enumerate(nodes)}, "node_group": "h100",
        "instance_type": "p5.48xlarge", "exit_status": status, "started": "2027-01-04T12:20:00Z",
        "finished": "2027-01-04T12:25:00Z"}))
    return root


def test_the_multinode_run_is_kept_and_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _write_multinode(_good_nodes(tmp_path / "a", ["n0", "n1", "n2"]), 436.0, ["n0", "n1", "n2"])
    after = _write_multinode(tmp_path / "b", 340.0, ["n0", "n1", "n3"])  # no per-node records: the log's model
    assert main(["nccl", "compare", str(before), str(after)]) == 1  # -22 %
    out = capsys.readouterr().out.splitlines()
    assert "peak bus bandwidth: 436.00 -> 340.00 GB/s (-22.0%)" in out
    assert "  gone: n2" in out and "  new: n3" in out
    assert "driver: 570.133.20 -> None" in out and "cuda: 12.8 -> None" in out
    assert not any(line.startswith("gpu_model") for line in out)  # nvidia-smi's and the log's names agree
    # A record made with `nccl record` from the same log compares with the directory.
    record_path = tmp_path / "a.json"
    nodes_json = tmp_path / "nodes.json"
    nodes_json.write_text(json.dumps({"items": [{"metadata": {"name": n}} for n in ("n0", "n1", "n2")]}))
    assert main(["nccl", "record", str(before / "multinode" / "nccl.log"), "--stack", "prod-aws", "--node-group",
                 "h100", "--nodes-json", str(nodes_json), "-o", str(record_path)]) == 0
    assert main(["nccl", "compare", str(record_path), str(before)]) == 0
    assert "peak bus bandwidth: 436.00 -> 436.00 GB/s (+0.0%)" in capsys.readouterr().out
    # nccl nodes shows it beside the nodes, judged against the multi-node figure.
    assert main(["nccl", "nodes", str(after), "--format", "json"]) == 1
    summary = json.loads(capsys.readouterr().out)["multinode"]
    assert summary["nodes"] == ["n0", "n1", "n3"] and summary["busbw_gbps"] == 340.0
    assert summary["problems"] == ["bus bandwidth 340.00 GB/s is below 394.10 GB/s (90% of the expected 437.89 GB/s)"]
    assert main(["nccl", "nodes", str(before)]) == 0
    assert "multinode: PASS: 3 node(s), peak 436.00 GB/s, required 394.10 GB/s" in capsys.readouterr().out
    # A directory without multinode/ is not a record.
    assert main(["nccl", "compare", str(before), str(tmp_path)]) == 2
    assert "a run directory without multinode/nccl.log" in capsys.readouterr().err
