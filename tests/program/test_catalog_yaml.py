"""The catalogs load at C speed (libyaml's loader where PyYAML has it, the pure-Python one otherwise, with the same
data), a price file's duplicate key is still refused, and each catalog file is read once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.catalog import prices, yaml_files
from components.catalog.prices import PriceCatalogError

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "components" / "catalog"
CATALOG_FILES = sorted(CATALOG.glob("*.yaml"))
DUPLICATE = ("ec2_on_demand:\n"
             "  p5.48xlarge: {usd: 55.04, unit: hour, region: us-east-1, status: stale, source: a, as_of: '2026'}\n"
             "  p5.48xlarge: {usd: 1.0, unit: hour, region: us-east-1, status: stale, source: b, as_of: '2026'}\n")


def test_the_c_loader_reads_the_catalogs_when_pyyaml_has_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML was built without libyaml here")
    used: list[type[Any]] = []
    real = yaml.load

    def spy(stream: Any, Loader: type[Any]) -> Any:  # noqa: N803 (PyYAML's name)
        used.append(Loader)
        return real(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "load", spy)
    path = tmp_path / "facts.yaml"
    path.write_text("a: 1\n", encoding="utf-8")
    assert yaml_files.load_file(path) == {"a": 1}
    assert yaml_files.load_file(path, unique_keys=True) == {"a": 1}
    assert used == [yaml.CSafeLoader, yaml_files.unique_key_loader()]
    assert issubclass(used[1], yaml.CSafeLoader)


def test_without_the_c_loader_the_python_one_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    assert yaml_files.safe_loader() is yaml.SafeLoader
    assert issubclass(yaml_files.unique_key_loader(), yaml.SafeLoader)
    path = tmp_path / "prices_aws.yaml"
    path.write_text(prices.AWS_PRICES_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(prices, "AWS_PRICES_FILE", path)
    monkeypatch.setattr(prices, "AWS_REFRESHED_FILE", tmp_path / "none.yaml")
    assert prices.load_prices("aws")["ec2_on_demand.p5.48xlarge"].usd == 55.04


@pytest.mark.parametrize("path", CATALOG_FILES, ids=[p.name for p in CATALOG_FILES])
def test_both_loaders_give_the_same_data(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    python = yaml.load(text, Loader=yaml.SafeLoader)
    assert yaml_files.parse(text) == python
    if path.name.startswith("prices_"):
        assert yaml_files.parse(text, unique_keys=True) == python


@pytest.mark.parametrize("c_loader", [True, False], ids=["c", "python"])
def test_a_price_file_with_a_key_given_twice_is_refused(c_loader: bool, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if not c_loader:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    elif not yaml.__with_libyaml__:
        pytest.skip("PyYAML was built without libyaml here")
    path = tmp_path / "prices_aws.yaml"
    path.write_text(DUPLICATE, encoding="utf-8")
    monkeypatch.setattr(prices, "AWS_PRICES_FILE", path)
    with pytest.raises(PriceCatalogError) as err:
        prices.load_prices("aws")
    assert str(err.value).startswith("components/catalog/prices_aws.yaml: (file): is not valid YAML: duplicate key "
                                     "'p5.48xlarge'")
    assert "line 3, column 3" in str(err.value) and str(err.value).endswith("[rule: yaml-syntax]")


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "facts.yaml"
    path.write_text("a: 1\n", encoding="utf-8")
    assert yaml_files.load_file(path) == {"a": 1}
    assert yaml_files.load_file(path) == {"a": 1}
    assert yaml_files.PARSES[str(path.resolve())] == 1
    path.write_text("a: 22\n", encoding="utf-8")
    assert yaml_files.load_file(path) == {"a": 22}


SHIPPED_PARSED = yaml_files.shipped_yaml()


def test_the_large_catalogs_ship_their_json() -> None:
    # The reason for the JSON: the big catalogs. A threshold or glob change that drops them would go unnoticed.
    assert {"aws_instances.yaml", "gcp_machines.yaml", "prices_aws.yaml"} <= {p.name for p in SHIPPED_PARSED}


@pytest.mark.parametrize("path", SHIPPED_PARSED, ids=[p.name for p in SHIPPED_PARSED])
def test_each_shipped_json_is_current_and_holds_its_yamls_data(path: Path) -> None:
    # A catalog edited without `make catalogs` fails here (the loader would still read its YAML: slower, not wrong).
    target = yaml_files.parsed_path(path)
    try:
        expected = yaml_files.parsed_document(path)
    except ValueError:  # no JSON form (a non-string key): there must be no JSON at all
        assert not target.exists(), f"{target.name} exists for a catalog JSON cannot hold"
        return
    assert target.is_file(), f"{target.name} is missing: run make catalogs"
    assert target.read_text(encoding="utf-8") == expected, f"{target.name} is stale: run make catalogs"
    text = path.read_text(encoding="utf-8")
    assert json.loads(target.read_text(encoding="utf-8"))["data"] == yaml.load(text, Loader=yaml.SafeLoader)


def _catalog_copy(tmp_path: Path) -> Path:
    path = tmp_path / "prices_aws.yaml"
    path.write_bytes(prices.AWS_PRICES_FILE.read_bytes())
    yaml_files.parsed_path(path).write_bytes(yaml_files.parsed_path(prices.AWS_PRICES_FILE).read_bytes())
    return path


def test_the_loader_reads_a_current_json_without_parsing_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _catalog_copy(tmp_path)

    def no_yaml(*_: Any, **__: Any) -> Any:
        raise AssertionError("the YAML was parsed although its JSON is current")

    monkeypatch.setattr(yaml_files, "parse", no_yaml)
    data = yaml_files.load_file(path, unique_keys=True)
    assert data["ec2_on_demand"]["p5.48xlarge"]["usd"] == 55.04
    assert yaml_files.YAML_PARSES[str(path.resolve())] == 0


def test_an_edited_catalog_is_read_from_its_yaml_not_its_stale_json(tmp_path: Path) -> None:
    path = _catalog_copy(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "usd: 55.04" in text
    path.write_text(text.replace("usd: 55.04", "usd: 60.5", 1), encoding="utf-8")
    data = yaml_files.load_file(path, unique_keys=True)
    assert data["ec2_on_demand"]["p5.48xlarge"]["usd"] == 60.5
    assert yaml_files.YAML_PARSES[str(path.resolve())] == 1


@pytest.mark.parametrize("damage", ["not json", '{"format": 1, "sha256": "0", "data": {}}', "[]"])
def test_a_damaged_json_falls_back_to_the_yaml(damage: str, tmp_path: Path) -> None:
    path = _catalog_copy(tmp_path)
    yaml_files.parsed_path(path).write_text(damage, encoding="utf-8")
    assert yaml_files.load_file(path)["ec2_on_demand"]["p5.48xlarge"]["usd"] == 55.04


def test_a_catalog_json_cannot_hold_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tiers.yaml"
    path.write_text("tiers:\n  1000: a\n", encoding="utf-8")
    with pytest.raises(ValueError, match="key 1000 is not a string"):
        yaml_files.parsed_document(path)
    path.write_text("when: 2026-12-02\n", encoding="utf-8")
    with pytest.raises(ValueError, match="a date has no JSON form"):
        yaml_files.parsed_document(path)


def test_the_shipped_price_files_keep_the_stack_files_rules() -> None:
    # The cost tooling reads the shipped files with the program's loader (once per process); they still pass the
    # strict rules a price file given as text gets, with the same prices.
    from blueprint.cost.prices import parse_prices

    for path in (prices.AWS_PRICES_FILE, prices.GCP_PRICES_FILE):
        shown = f"components/catalog/{path.name}"
        strict = parse_prices(path.read_text(encoding="utf-8"), shown)
        assert strict == prices.price_entries(yaml_files.load_file(path, unique_keys=True), shown)


# A preview of each cloud's production stack, then the readers on its graph, in one process; every open() of a
# catalog file is counted (whatever reads it, with whichever loader).
_COUNT_OPENS = """
import collections, contextlib, io, json, os, sys
catalog = sys.argv[1]
opened = collections.Counter()
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(catalog) and args[0].endswith(".yaml"):
        opened[os.path.basename(args[0])] += 1
sys.addaudithook(hook)
from blueprint.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for stack in ("prod-aws", "prod-gcp"):
        main(["preview", stack])
        main(["graph", stack, "-o", os.path.join(sys.argv[2], stack + ".json")])
        main(["cost", os.path.join(sys.argv[2], stack + ".json")])
print(json.dumps(opened))
"""


def test_each_catalog_file_is_read_once_per_process(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _COUNT_OPENS, str(CATALOG) + "/", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=600)
    opened: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"aws_instances.yaml", "prices_aws.yaml", "gcp_machines.yaml", "prices_gcp.yaml",
            "gke_manifests.yaml"} <= set(opened)
    assert {name: n for name, n in opened.items() if n > 1} == {}
