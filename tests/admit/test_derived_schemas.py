"""The CRD schemas admit checks against are derived once per machine and content (blueprint.files.derived), and the
ones read back are the ones derived."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from blueprint.admit import schema
from blueprint.files import derived

GROUPS = sorted({p.name.split("_", 1)[0] for p in schema.CRD_ROOT.glob("*/*_*.yaml")})  # <group>_<plural>.yaml


@pytest.fixture
def cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "cache"
    monkeypatch.delenv("BLUEPRINT_NO_CACHE", raising=False)
    monkeypatch.setenv("BLUEPRINT_CACHE_DIR", str(folder))
    schema._group_schemas.cache_clear()
    yield folder
    schema._group_schemas.cache_clear()


def test_derived_once_then_read_back(cache_on: Path, tmp_path: Path) -> None:
    source = tmp_path / "a.yaml"
    source.write_text("x: 1\n", encoding="utf-8")
    calls: list[int] = []

    def derive() -> dict[str, int]:
        calls.append(1)
        return {"x": len(calls)}

    assert derived.cached_json("t", [source], derive) == {"x": 1}
    assert derived.cached_json("t", [source], derive) == {"x": 1}
    assert len(calls) == 1
    source.write_text("x: 2\n", encoding="utf-8")  # other bytes: another key, derived again
    assert derived.cached_json("t", [source], derive) == {"x": 2}
    assert len(list(cache_on.glob("derived-t-*.json"))) == 2
    for path in cache_on.glob("derived-t-*.json"):
        path.write_text("{damaged", encoding="utf-8")
    assert derived.cached_json("t", [source], derive) == {"x": 3}  # a damaged entry is derived again
    assert derived.cached_json("t", [source], derive) == {"x": 3}


def test_nothing_is_written_with_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLUEPRINT_NO_CACHE", "1")
    monkeypatch.setenv("BLUEPRINT_CACHE_DIR", str(tmp_path / "cache"))
    assert derived.cached_json("t", [], lambda: [1]) == [1]
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("group", GROUPS)
def test_the_schemas_read_from_the_cache_are_the_derived_ones(group: str, cache_on: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    paths = sorted(schema.CRD_ROOT.glob(f"*/{group}_*.yaml"))
    fresh = {(v, k): s for v, k, s in schema._derive_group_schemas(group, paths)}
    assert fresh, group
    assert schema._group_schemas(group) == fresh  # derived and written
    schema._group_schemas.cache_clear()
    (entry,) = cache_on.glob(f"derived-crd-schemas*-{group}-*.json")
    assert len(json.loads(entry.read_text(encoding="utf-8"))["data"]) == len(fresh)

    def no_derivation(*_: object) -> None:
        raise AssertionError("derived again although the entry is current")

    monkeypatch.setattr(schema, "_derive_group_schemas", no_derivation)
    assert schema._group_schemas(group) == fresh  # read back from the entry


@pytest.mark.parametrize("entry", ["{}", "[]", '{"label": "other", "key": "0", "data": []}'])
def test_an_entry_of_the_wrong_shape_is_derived_again(entry: str, cache_on: Path) -> None:
    group = "jobset.x-k8s.io"
    fresh = schema._group_schemas(group)
    schema._group_schemas.cache_clear()
    (path,) = cache_on.glob(f"derived-crd-schemas*-{group}-*.json")
    path.write_text(entry, encoding="utf-8")
    assert schema._group_schemas(group) == fresh


def test_a_change_to_the_derivation_is_another_key(tmp_path: Path) -> None:
    crd = sorted(schema.CRD_ROOT.glob("*/jobset.x-k8s.io_*.yaml"))
    code = tmp_path / "schema.py"
    code.write_bytes(Path(schema.__file__).read_bytes())
    before = derived.derived_key("l", [*crd, code])
    code.write_bytes(code.read_bytes() + b"# changed\n")
    assert derived.derived_key("l", [*crd, code]) != before


def test_a_group_without_a_crd_keeps_nothing(cache_on: Path) -> None:
    assert schema._group_schemas("example.com") == {}
    assert not list(cache_on.glob("derived-*"))
