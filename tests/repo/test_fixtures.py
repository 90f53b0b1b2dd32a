"""The repository stands alone: its fixtures say where they come from, the schema checks find every CRD they
need, and nothing reads beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, ReadOutsideRepositoryError
from tests.k8s_checks import CRD_DIRS, CRD_ROOT, FIXTURES, crd_schemas


def test_every_fixture_folder_says_where_its_data_comes_from() -> None:
    folders = {p.parent for root in (FIXTURES, CRD_ROOT) for p in root.rglob("*")
               if p.is_file() and p.name not in ("SOURCE.md", "README.md", "__init__.py")}
    assert folders, "no fixtures found"
    for folder in folders:
        source = folder / "SOURCE.md"
        assert source.is_file(), f"{folder.relative_to(ROOT)} has no SOURCE.md"
        text = source.read_text(encoding="utf-8")
        assert "Source:" in text and ("Licence:" in text or "licence" in text.lower()), source


def test_the_schema_checks_know_every_custom_kind_the_project_uses_or_will() -> None:
    schemas = crd_schemas()
    for api, kind in (("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("kueue.x-k8s.io/v1beta2", "Topology"),
                      ("kubeflow.org/v2beta1", "MPIJob"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
                      ("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("slinky.slurm.net/v1beta1", "NodeSet"),
                      ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"),
                      ("monitoring.coreos.com/v1", "PrometheusRule"),
                      ("readiness.node.x-k8s.io/v1alpha1", "NodeReadinessRule"),
                      ("external-secrets.io/v1", "ExternalSecret"), ("external-secrets.io/v1", "SecretStore"),
                      ("keda.sh/v1alpha1", "ScaledObject")):
        assert (api, kind) in schemas, (api, kind)
    assert len(CRD_DIRS) == 13 and all(d.is_dir() for d in CRD_DIRS)


def test_a_missing_crd_fixture_fails_instead_of_skipping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.k8s_checks as checks

    monkeypatch.setattr(checks, "CRD_DIRS", (tmp_path / "absent",))
    checks.crd_schemas.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="no CRD fixture here"):
            checks.crd_schemas()
    finally:
        monkeypatch.undo()
        checks.crd_schemas.cache_clear()


def test_a_read_beside_the_checkout_fails() -> None:
    """The audit hook of tests/conftest.py: ../shared (or any sibling) cannot be read by a test or the program."""
    if ROOT.parent == Path(ROOT.parent.anchor):
        return  # a checkout at the top level has no "beside" (.ci/run's clone always has one)
    with pytest.raises(ReadOutsideRepositoryError, match="must not read outside the repository"):
        (ROOT.parent / "shared" / "reference" / "nccl" / "any.log").read_text()
    with pytest.raises(ReadOutsideRepositoryError):
        open(ROOT.parent / "sibling-project" / "x.yaml", encoding="utf-8")  # noqa: SIM115
    assert yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["name"] == "gpu-cluster"  # inside: fine
