"""Issue 37, part 5: the bench's arithmetic on made-up measures (no timing here: the bench measures, tests check how
it reads its measures): paired runs alternate, each figure is the median of per-pair CPU ratios with their range,
targets hold or not at their bounds, growth is read per added resource, and older runs still compare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from blueprint import bench
from blueprint.bench import Measure, growth, run_pairs, summarize, targets


def _m(cpu: float, command: str = "preview", peak: float = 100.0, wall: float | None = None) -> Measure:
    return Measure("case", command, wall if wall is not None else cpu, cpu, peak, 0, 0)


def test_a_figure_is_the_median_of_its_per_pair_cpu_ratios() -> None:
    pairs = [(_m(2.0, wall=9.0), _m(1.0, "floor")), (_m(3.0, wall=1.0), _m(2.0, "floor")),
             (_m(2.2, wall=2.0), _m(1.0, "floor"))]
    fig = summarize("prod-aws", "preview", "third-party:prod-aws", 0, pairs)
    # ratios 2.0, 1.5 and 2.2: their median, not the ratio of the CPU medians (2.2 / 1.0) nor their mean (1.9)
    assert fig["cpu_ratio"] == {"median": 2.0, "min": 1.5, "max": 2.2}
    assert fig["median"] == {"wall_s": 2.0, "cpu_s": 2.2, "peak_mib": 100.0}
    assert fig["floor_median"]["cpu_s"] == 1.0
    assert len(fig["pairs"]) == 3 and fig["pairs"][1]["a"]["cpu_s"] == 3.0 and fig["pairs"][1]["b"]["cpu_s"] == 2.0


def test_the_command_and_its_floor_run_alternately_and_pair_up() -> None:
    order: list[str] = []
    cpu = iter([5.0, 1.0, 2.0, 4.0, 6.0, 3.0])  # A B, then B A, then A B

    def fake(case: str, command: str, argv: Sequence[str], resources: int = 0,
             env: dict[str, str] | None = None) -> Measure:
        order.append(command)
        return Measure(case, command, 0.0, next(cpu), 0.0, resources, 0)

    fig = run_pairs("prod-aws graph", "cost", ["a"], "bare-sdk", ["b"], 3, 210, run=fake)
    assert order == ["cost", "bare-sdk", "bare-sdk", "cost", "cost", "bare-sdk"]
    # each pair's A over its own B: 5/1, 4/2, 6/3
    assert [p["a"]["cpu_s"] / p["b"]["cpu_s"] for p in fig["pairs"]] == [5.0, 2.0, 2.0]
    assert fig["cpu_ratio"]["median"] == 2.0 and fig["resources"] == 210


def _fig(case: str, command: str, ratio: float, resources: int = 0, cpu: float = 1.0,
         peak: float = 100.0) -> dict[str, Any]:
    return summarize(case, command, "floor", resources, [(Measure(case, command, cpu, cpu * ratio, peak, resources, 0),
                                                          Measure("floor", "floor", cpu, cpu, 50.0, 0, 0))])


def _doc(figures: list[dict[str, Any]]) -> dict[str, Any]:
    return {"when": "2026-12-02T00:00:00Z", "machine": {"cpus": 2, "python": "3.11", "platform": "test"},
            "load": {"start": [0.5, 0.4, 0.3], "end": [1.5, 1.0, 0.5]}, "pairs": 1, "size_pairs": 1,
            "floors": {"floor": "a made-up floor"}, "figures": figures, "single": [], "rows": bench.rows_of(figures)}


def test_each_target_holds_at_its_bound_and_not_past_it() -> None:
    doc = _doc([_fig("prod-aws", "preview", 1.2), _fig("prod-gcp", "preview", 1.21),
                _fig("prod-aws graph", "policy", 1.5), _fig("prod-aws graph", "admit", 1.4),
                _fig("prod-aws", "admit", 1.6),
                _fig("1000 groups", "graph", 3, 27143, peak=799), _fig("1000 groups", "policy", 3, 27143, peak=1200)])
    found = {t.name: t for t in targets(doc)}
    assert found["prod-aws preview <= 1.2x its third-party import floor"].met is True
    assert found["prod-gcp preview <= 1.2x its third-party import floor"].met is False
    assert found["cost on a saved graph <= 1.5x a bare SDK import"].met is None  # not run
    assert found["policy on a saved graph <= 1.5x a bare SDK import"].met is True
    assert found["admit on a saved graph <= 1.5x a bare SDK import"].met is True
    assert found["admit on a stack name, after its first run of the day, <= 1.5x a bare SDK import"].met is False
    assert found["graph of 1,000 node groups under 800 MiB peak"].met is True
    assert found["policy of 1,000 node groups under 1,200 MiB peak"].met is False
    assert found["prod-gcp preview <= 1.2x its third-party import floor"].figure.startswith("1.21x (min 1.21, max 1.21")


def test_growth_is_read_per_added_resource_so_the_import_constant_cancels() -> None:
    # CPU: 100 s of imports, then 0.04 s a resource: linear, though CPU per resource falls from 0.24 to 0.044.
    assert growth([(500, 120.0), (2800, 212.0), (27000, 1180.0)]) == pytest.approx(1.0)
    # Memory: 0.026 MiB per added resource from 10 to 100 groups, 0.039 from 100 to 1,000: faster than linear,
    # though memory per resource falls (0.36 -> 0.086 -> 0.044 MiB): the per-resource figure would hide it.
    assert growth([(500, 180.0), (2800, 240.0), (27000, 1177.0)]) == pytest.approx((937 / 24200) / (60 / 2300))
    assert growth([(500, 180.0), (2800, 180.0), (27000, 900.0)]) is None  # nothing grew between the small sizes


def test_linearity_needs_three_sizes_and_holds_within_its_tolerance() -> None:
    figures = [_fig("10 groups", "graph", 1, 500, cpu=120.0, peak=180), _fig("100 groups", "graph", 1, 2800, cpu=212.0,
                                                                           peak=240),
               _fig("1000 groups", "graph", 1, 27000, cpu=1180.0, peak=1177),
               _fig("100 groups", "policy", 1, 2800, cpu=5.0), _fig("1000 groups", "policy", 1, 27000, cpu=50.0)]
    found = {t.name.split(" ")[0]: t for t in targets(_doc(figures)) if "linear" in t.name}
    assert found["graph"].met is False and "CPU 1.00x, memory 1.48x" in found["graph"].figure
    assert found["policy"].met is None and "three sizes" in found["policy"].figure


def test_the_printout_names_each_floor_the_load_and_the_verdicts() -> None:
    text = bench.render(_doc([_fig("prod-aws", "preview", 1.3)]))
    assert "load average (1, 5, 15 min): 0.5, 0.4, 0.3 at the start, 1.5, 1.0, 0.5 at the end" in text
    assert "  floor: a made-up floor" in text
    assert "[NOT MET] prod-aws preview <= 1.2x its third-party import floor: 1.30x" in text
    assert "[not measured] cost on a saved graph" in text
    assert "1.30x (1.30-1.30)" in text


def test_compare_reads_runs_before_and_after_the_pairs() -> None:
    old = {"rows": [{"case": "prod-aws", "command": "preview", "wall_s": 2.0, "cpu_s": 2.0, "peak_mib": 200.0,
                     "resources": 0, "exit_code": 0, "cpu_ms_per_resource": 0.0}]}
    base, new = _doc([_fig("prod-aws", "preview", 1.6, cpu=1.25)]), _doc([_fig("prod-aws", "preview", 1.2,
                                                                               cpu=1.25)])
    line = next(x for x in bench.compare(old, new).splitlines() if x.startswith("prod-aws"))
    assert line.split()[2:] == ["0.62x", "0.75x", "0.50x", "-"]  # 1.25 / 2.0 wall, 1.5 / 2.0 CPU, 100 / 200 MiB
    line = next(x for x in bench.compare(base, new).splitlines() if x.startswith("prod-aws"))
    assert line.split()[-1] == "0.75x"  # 1.2 / 1.6 of the floor
    assert bench.render(old).splitlines()[2].startswith("prod-aws")  # an old run still prints
