"""The graph cache (blueprint/graph/cache.py): a reader given a stack name runs the program once, then reads the graph
from the cache; every part of the key that changes, a Capacity Block changing phase, a corrupt or foreign entry,
``--no-cache`` and ``BLUEPRINT_NO_CACHE`` make it run again. The cache lives in the test's tmp folder (the suite turns
it off everywhere else: tests/conftest.py)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import blueprint.graph.engine as engine
from blueprint.cli import main
from blueprint.graph import cache
from blueprint.graph.model import ResourceGraph
from tests.conftest import ROOT, TEST_NOW

WORKLOAD = str(ROOT / "examples" / "workloads" / "prod-aws" / "train-multinode.yaml")


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cache on, in tmp_path/cache; the stacks the program ran for, in order."""
    monkeypatch.delenv(cache.NO_CACHE_ENV, raising=False)
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    ran: list[str] = []
    real = engine.run_program

    def counted(stack: str, *args: Any, **kwargs: Any) -> Any:
        ran.append(stack)
        return real(stack, *args, **kwargs)

    monkeypatch.setattr(engine, "run_program", counted)
    return ran


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def _entries(tmp_path: Path) -> list[Path]:
    """The graph entries, named by their key (not admit's derived CRD schemas, ``derived-*.json``, nor the source
    digests' memo, kept in the same folder)."""
    return sorted(p for p in (tmp_path / "cache").glob("*.json")
                  if len(p.stem) == 64 and set(p.stem) <= set("0123456789abcdef"))


def test_the_second_admit_of_the_day_reads_the_cache(runs: list[str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    first = _run(capsys, "admit", "prod-aws", WORKLOAD)
    second = _run(capsys, "admit", "prod-aws", WORKLOAD)
    assert runs == ["prod-aws"] and first == second and first[0] == 0
    assert len(_entries(tmp_path)) == 1
    # The cost and the policy verdict of the cached graph are those of a fresh run.
    for argv in (["cost", "prod-aws"], ["policy", "prod-aws", "--format", "json"]):
        assert _run(capsys, *argv) == _run(capsys, *argv, "--no-cache")
    assert runs == ["prod-aws"] * 3  # the two --no-cache runs, nothing else


def test_another_usage_file_is_applied_to_the_cached_graph(runs: list[str], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    usage = tmp_path / "usage.yaml"
    usage.write_text((ROOT / "stacks" / "prod-aws.usage.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    shipped = _run(capsys, "cost", "prod-aws", "--format", "json", "--usage", str(usage))
    usage.write_text("{}\n", encoding="utf-8")
    empty = _run(capsys, "cost", "prod-aws", "--format", "json", "--usage", str(usage))
    assert runs == ["prod-aws"] and shipped != empty  # the graph does not depend on it; the price does


def test_a_changed_stack_file_runs_the_program_again(runs: list[str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.prod-aws.yaml"
    shutil.copy(ROOT / "stacks" / "Pulumi.prod-aws.yaml", stack)
    _run(capsys, "admit", str(stack), WORKLOAD)
    _run(capsys, "admit", str(stack), WORKLOAD)
    stack.write_text(stack.read_text(encoding="utf-8") + "# one more line\n", encoding="utf-8")
    _run(capsys, "admit", str(stack), WORKLOAD)
    assert runs == ["prod-aws", "prod-aws"] and len(_entries(tmp_path)) == 2


def test_the_next_day_and_a_capacity_block_changing_phase_run_it_again(
        runs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # prod-aws's block starts at 2027-01-04T11:30Z: 10:00 and 11:00 are the same phase, 12:00 another.
    for now, ran in (("2027-01-04T10:00:00Z", 1), ("2027-01-04T11:00:00Z", 1), ("2027-01-04T12:00:00Z", 2),
                     ("2027-01-04T13:00:00Z", 2), ("2027-01-05T13:00:00Z", 3)):
        monkeypatch.setenv("GPU_CLUSTER_NOW", now)
        _run(capsys, "admit", "prod-aws", WORKLOAD)
        assert len(runs) == ran, now


def test_a_corrupt_or_foreign_entry_is_computed_again(runs: list[str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    expected = _run(capsys, "admit", "prod-aws", WORKLOAD)
    (entry,) = _entries(tmp_path)
    good = entry.read_bytes()
    for broken in (b"", good[: len(good) // 2], b"[]", good.replace(b'"format": 1', b'"format": 2')):
        entry.write_bytes(broken)
        assert _run(capsys, "admit", "prod-aws", WORKLOAD) == expected
        assert entry.read_bytes() == good  # written again, whole
    assert len(runs) == 5
    # An entry holding another key's graph (copied over this one) is never served.
    other = good.replace(entry.stem.encode(), b"0" * 64)
    entry.write_bytes(other)
    assert _run(capsys, "admit", "prod-aws", WORKLOAD) == expected and len(runs) == 6
    assert _run(capsys, "admit", "prod-aws", WORKLOAD) == expected and len(runs) == 6  # rewritten whole


def test_no_cache_and_the_environment_turn_it_off(runs: list[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, "admit", "prod-aws", WORKLOAD, "--no-cache")
    _run(capsys, "admit", "prod-aws", WORKLOAD, "--no-cache")
    assert len(runs) == 2 and _entries(tmp_path) == []
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    _run(capsys, "admit", "prod-aws", WORKLOAD)
    _run(capsys, "admit", "prod-aws", WORKLOAD)
    assert len(runs) == 4 and _entries(tmp_path) == []


def _tree(root: Path) -> None:
    for rel, text in (("__main__.py", "main()\n"), ("Pulumi.yaml", "name: x\n"), ("components/a.py", "A = 1\n"),
                      ("components/catalog/c.yaml", "a: 1\n"), ("blueprint/graph/engine.py", "E = 1\n"),
                      ("blueprint/schemas/crds/x.yaml", "kind: CRD\n"), ("components/__pycache__/a.pyc", "x")):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_key_covers_the_source_the_versions_and_nothing_else(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    now = datetime.fromisoformat(TEST_NOW)

    def key() -> str:
        return cache.graph_key("s", b"spec", now, tmp_path)

    base = key()
    assert key() == base and cache.graph_key("t", b"spec", now, tmp_path) != base
    assert cache.graph_key("s", b"spec2", now, tmp_path) != base
    assert cache.graph_key("s", b"spec", now + timedelta(hours=5), tmp_path) == base  # same day
    assert cache.graph_key("s", b"spec", now + timedelta(days=1), tmp_path) != base
    for rel in ("components/a.py", "components/catalog/c.yaml", "blueprint/graph/engine.py", "__main__.py",
                "Pulumi.yaml"):
        path = tmp_path / rel
        text = path.read_text(encoding="utf-8")
        path.write_text(text + " ", encoding="utf-8")
        assert key() != base, rel
        path.write_text(text, encoding="utf-8")
    (tmp_path / "components" / "new.json").write_text("{}", encoding="utf-8")
    assert key() != base
    (tmp_path / "components" / "new.json").unlink()
    (tmp_path / "blueprint/schemas/crds/x.yaml").write_text("kind: other\n", encoding="utf-8")
    (tmp_path / "components/__pycache__/a.pyc").write_text("y", encoding="utf-8")
    assert key() == base  # what the program does not read
    monkeypatch.setattr(cache, "_versions", lambda: ["3.99", "pulumi_aws=0.0.1"])
    assert key() != base


def test_the_second_key_stats_the_source_instead_of_reading_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The memo of each file's digest, keyed by its stat: the second call reads no source file, and a file changed
    # since (same size, another time) is read again and changes the key.
    root, memo = tmp_path / "root", tmp_path / "memo.json"
    _tree(root)
    monkeypatch.setattr(cache, "MEMO_SETTLE_NS", 0)  # the files were written just now
    now = datetime.fromisoformat(TEST_NOW)
    plain = cache.graph_key("s", b"spec", now, root)
    assert cache.graph_key("s", b"spec", now, root, memo) == plain and memo.is_file()
    real = cache._file_digest

    def refuse(path: Path) -> str:
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(cache, "_file_digest", refuse)
    assert cache.graph_key("s", b"spec", now, root, memo) == plain
    edited = root / "components" / "a.py"
    edited.write_text("A = 2\n", encoding="utf-8")  # the same size
    read: list[Path] = []
    def count(path: Path) -> str:
        read.append(path)
        return real(path)

    monkeypatch.setattr(cache, "_file_digest", count)
    changed = cache.graph_key("s", b"spec", now, root, memo)
    assert changed != plain and read == [edited] and changed == cache.graph_key("s", b"spec", now, root)


def test_a_file_changed_just_now_is_not_memoized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two writes within the filesystem's time granularity could leave the same stat: a digest is kept only for a file
    # whose last change is older than the settle time (two seconds).
    root, memo = tmp_path / "root", tmp_path / "memo.json"
    _tree(root)
    now = datetime.fromisoformat(TEST_NOW)
    with monkeypatch.context() as patch:
        patch.setattr(cache, "MEMO_SETTLE_NS", 0)
        cache.graph_key("s", b"spec", now, root, memo)
    (root / "components" / "a.py").write_text("A = 3\n", encoding="utf-8")
    cache.graph_key("s", b"spec", now, root, memo)
    import json

    files = json.loads(memo.read_text(encoding="utf-8"))["files"]
    assert "components/a.py" not in files and "components/catalog/c.yaml" in files


def test_a_block_boundary_between_two_calls_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    then = datetime(2027, 1, 4, 8, tzinfo=UTC)
    computed: list[int] = []

    def compute() -> tuple[ResourceGraph, list[datetime]]:
        computed.append(1)
        return ResourceGraph("s", []), [then + timedelta(hours=1)]

    assert not cache.cached_graph("s", b"x", then, compute).hit
    assert cache.cached_graph("s", b"x", then + timedelta(minutes=30), compute).hit
    assert not cache.cached_graph("s", b"x", then + timedelta(hours=2), compute).hit
    assert len(computed) == 2


def test_a_folder_others_may_write_or_own_is_not_used(runs: list[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # An entry is trusted as the program's output (and lark loads the CEL grammar file with pickle): a folder anyone
    # else may write is not used, and the command runs the program as with --no-cache.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(shared))
    first = _run(capsys, "admit", "prod-aws", WORKLOAD)
    assert _run(capsys, "admit", "prod-aws", WORKLOAD) == first
    assert runs == ["prod-aws", "prod-aws"] and not list(shared.iterdir())
    assert cache.usable(tmp_path / "made") and (tmp_path / "made").stat().st_mode & 0o777 == 0o700
    monkeypatch.setattr(cache.os, "getuid", lambda: 12345)  # a folder another user owns
    assert not cache.usable(tmp_path / "made")


def test_the_first_call_of_the_day_prints_what_the_next_ones_print(runs: list[str], tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A stack with findings: the first call (the program's graph) and the next (the graph read back) list the same
    # violations in the same order, with the same values.
    stack = tmp_path / "Pulumi.dev-aws.yaml"
    text = (ROOT / "stacks" / "Pulumi.dev-aws.yaml").read_text(encoding="utf-8")
    stack.write_text(text, encoding="utf-8")
    cold = _run(capsys, "policy", str(stack), "--format", "json")
    warm = _run(capsys, "policy", str(stack), "--format", "json")
    assert runs == ["dev-aws"] and cold == warm and '"violations"' in cold[1]


def test_the_pulumi_environment_is_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pulumi.Config reads PULUMI_CONFIG for keys a stack file lacks, pulumi-kubernetes's Provider PULUMI_K8S_*.
    now = datetime(2026, 11, 29, tzinfo=UTC)
    for name in [n for n in cache.os.environ if n.startswith(cache.KEY_ENV_PREFIXES)]:
        monkeypatch.delenv(name)
    base = cache.graph_key("s", b"x", now)
    monkeypatch.setenv("PULUMI_K8S_DELETE_UNREACHABLE", "true")
    assert cache.graph_key("s", b"x", now) != base
    monkeypatch.delenv("PULUMI_K8S_DELETE_UNREACHABLE")
    monkeypatch.setenv("GPU_CLUSTER_NOW", "2026-11-29T18:00:00Z")  # the clock is in the key as its day only
    assert cache.graph_key("s", b"x", now) == base
    monkeypatch.setenv("HOME_UNRELATED", "1")
    assert cache.graph_key("s", b"x", now) == base
