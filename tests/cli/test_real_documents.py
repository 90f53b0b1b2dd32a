"""Real Pulumi documents (issue 35): a ``pulumi stack export`` holding secrets is read with the secrets as secrets
(redacted, never printed) and the policies and the cost still run; an empty document is judged as an empty graph."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from tests.conftest import offline_run

CIPHERTEXT = "v1:TOPSECRET-ciphertext-AAAA"


def _export(graph_json: str, secret_types: tuple[str, ...]) -> dict[str, Any]:
    """A stack export (checkpoint version 3) of a graph, the inputs of resources of ``secret_types`` holding a
    secret as `pulumi stack export` writes one (sig.Secret with its ciphertext)."""
    resources = []
    for r in json.loads(graph_json)["resources"]:
        state = {"urn": r["urn"], "type": r["type"], "inputs": dict(r.get("inputs") or {}),
                 "dependencies": r.get("dependencies") or []}
        if r.get("parent"):
            state["parent"] = r["parent"]
        if r["type"] in secret_types:
            state["inputs"]["stringData"] = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                                             "ciphertext": CIPHERTEXT}
        resources.append(state)
    return {"version": 3, "deployment": {"manifest": {}, "resources": resources}}


def test_a_stack_export_with_secrets_is_judged_and_priced_without_showing_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_export(offline_run("dev-aws").graph.to_json(),
                                         ("kubernetes:core/v1:Secret", "aws:iam/role:Role"))))
    for argv in (["policy", str(export), "--format", "json"], ["cost", str(export)]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1) and "internal error" not in err, (argv, err)
        assert CIPHERTEXT not in out + err
    assert main(["policy", str(export)]) == 0
    capsys.readouterr()


def test_an_empty_document_is_an_empty_graph_whatever_its_form(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    codes = []
    for name, doc in (("graph.json", {"resources": []}), ("preview.json", {"steps": []}),
                      ("export.json", {"version": 3, "deployment": {"resources": []}})):
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        codes.append(main(["policy", str(path)]))
        capsys.readouterr()
    assert codes == [1, 1, 1]  # the stack-level policies fail an empty graph in any form


# --- what no cloud would hold: refused at load, naming the place, the resource and the rule -------------------------


def _doc(name: str) -> dict[str, Any]:
    return json.loads(offline_run(name).graph.to_json())  # type: ignore[no-any-return]


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "graph.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_urn_twice_is_refused_in_every_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc("dev-aws")
    twice = next(i for i, r in enumerate(doc["resources"]) if r["type"] == "aws:eks/nodeGroup:NodeGroup")
    urn = doc["resources"][twice]["urn"]
    doc["resources"].append(dict(doc["resources"][twice], inputs={}))  # a second node group hiding the first
    last = len(doc["resources"]) - 1
    export = {"version": 3, "deployment": {"resources": [{"urn": r["urn"], "type": r["type"], "inputs": r["inputs"]}
                                                         for r in doc["resources"]]}}
    preview = {"steps": [{"op": "create", "urn": r["urn"], "newState": {"urn": r["urn"], "type": r["type"],
                                                                       "inputs": r["inputs"]}}
                         for r in doc["resources"]]}
    rule = (f"{urn} is also the URN of {{first}}; a stack holds one resource per URN (the engine refuses a "
            "duplicate), so one of the two would be silently hidden [rule: graph-urn-unique]")
    for name, form, where, first in (("g.json", doc, f"resources[{last}]", f"resources[{twice}]"),
                                     ("e.json", export, f"deployment.resources[{last}]",
                                      f"deployment.resources[{twice}]"),
                                     ("p.json", preview, f"steps[{last}]", f"steps[{twice}]")):
        path = _write(tmp_path, form, name)
        for command in ("policy", "cost"):
            assert main([command, str(path)]) == 2, (name, command)
            assert capsys.readouterr().err == f"error: {path}: {where}.urn: {rule.format(first=first)}\n"


def test_a_replacement_and_a_copy_pending_deletion_are_one_resource(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc("dev-aws")
    states = [{"urn": r["urn"], "type": r["type"], "inputs": r["inputs"]} for r in doc["resources"]]
    pending = dict(states[-1], delete=True)  # an interrupted replacement's old copy
    path = _write(tmp_path, {"version": 3, "deployment": {"resources": [*states, pending]}}, "e.json")
    assert main(["cost", str(path)]) == 0
    steps = [{"op": "same", "urn": s["urn"], "newState": s} for s in states[:-1]]
    steps += [{"op": "create-replacement", "urn": states[-1]["urn"], "newState": states[-1]},
              {"op": "replace", "urn": states[-1]["urn"], "newState": states[-1]},
              {"op": "delete-replaced", "urn": states[-1]["urn"], "oldState": states[-1]}]
    path = _write(tmp_path, {"steps": steps}, "p.json")
    assert main(["cost", str(path)]) == 0
    capsys.readouterr()


FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
FSX_SOURCE = "(FSx API reference, CreateFileSystem; components/catalog/fsx.yaml)"
NOT_ACCEPTED = [
    ("prod-aws", FSX, {"perUnitStorageThroughput": 300}, "perUnitStorageThroughput",
     "300 is not a throughput FSx for Lustre offers (one of 125, 250, 500, 1000 MB/s per TiB for PERSISTENT_2 SSD) "
     f"{FSX_SOURCE} [rule: fsx-throughput-tier-valid]"),
    ("dev-aws", FSX, {"perUnitStorageThroughput": 200}, "perUnitStorageThroughput",
     "200 is not a throughput FSx for Lustre offers (none for SCRATCH_2 SSD: remove it) "
     f"{FSX_SOURCE} [rule: fsx-throughput-tier-valid]"),
    ("prod-aws", FSX, {"storageCapacity": 3600}, "storageCapacity",
     "3600 is not a capacity FSx for Lustre offers (1,200, 2,400 or a multiple of 2,400 GiB for PERSISTENT_2 SSD) "
     f"{FSX_SOURCE} [rule: fsx-capacity-valid]"),
    ("prod-aws", FSX, {"deploymentType": "PERSISTENT_3"}, "deploymentType",
     '"PERSISTENT_3" is not a deployment type of FSx for Lustre (one of SCRATCH_1, SCRATCH_2, PERSISTENT_1, '
     f"PERSISTENT_2) {FSX_SOURCE} [rule: fsx-deployment-type-valid]"),
    ("prod-aws", FSX, {"storageType": "HDD"}, "storageType",
     f'"HDD" is not a storage type of FSx for Lustre PERSISTENT_2 (SSD, INTELLIGENT_TIERING) {FSX_SOURCE} '
     "[rule: fsx-storage-type-valid]"),
    ("prod-aws", "aws:eks/nodeGroup:NodeGroup", {"capacityType": "RESERVED"}, "capacityType",
     '"RESERVED" is not a capacity type of EKS node groups (one of ON_DEMAND, SPOT, CAPACITY_BLOCK; EKS API '
     "reference, CreateNodegroup) [rule: eks-capacity-type-valid]"),
    ("prod-aws", "aws:budgets/budget:Budget", {"limitAmount": "-230000.00"}, "limitAmount",
     '"-230000.00" is not a budget limit AWS Budgets takes (a decimal string of digits and at most one point: no '
     "sign, exponent, NaN or Infinity; AWS Budgets API reference, Spend) [rule: budget-amount-valid]"),
    ("prod-aws", "aws:budgets/budget:Budget", {"limitAmount": "Infinity"}, "limitAmount",
     '"Infinity" is not a budget limit AWS Budgets takes (a decimal string of digits and at most one point: no '
     "sign, exponent, NaN or Infinity; AWS Budgets API reference, Spend) [rule: budget-amount-valid]"),
    ("prod-gcp", "gcp:billing/budget:Budget",
     {"amount": {"specifiedAmount": {"currencyCode": "USD", "units": "-1150000", "nanos": 0}}},
     "amount.specifiedAmount.units", "a budget of -1150000 units and 0 nanos is below zero: every threshold is "
     "crossed from the first cent, so it limits nothing; give the amount the budget allows "
     "[rule: budget-amount-valid]"),
    ("prod-gcp", "gcp:billing/budget:Budget",
     {"amount": {"specifiedAmount": {"currencyCode": "USD", "units": "NaN", "nanos": 0}}},
     "amount.specifiedAmount.units", '"NaN" is not a whole number of currency units as a decimal string '
     "(google.type.Money, pulumi_gcp billing.Budget amount.specifiedAmount) [rule: budget-amount-valid]"),
    ("prod-aws", "aws:kms/key:Key", {"deletionWindowInDays": 3}, "deletionWindowInDays",
     "3 is not a deletion window AWS KMS takes (whole days from 7 to 30; KMS API reference, ScheduleKeyDeletion) "
     "[rule: kms-deletion-window-valid]"),
    ("prod-aws", "aws:kms/key:Key", {"deletionWindowInDays": 365}, "deletionWindowInDays",
     "365 is not a deletion window AWS KMS takes (whole days from 7 to 30; KMS API reference, ScheduleKeyDeletion) "
     "[rule: kms-deletion-window-valid]"),
    ("prod-aws", "aws:cloudwatch/logGroup:LogGroup", {"retentionInDays": 42}, "retentionInDays",
     "42 is not a retention CloudWatch Logs takes (one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, "
     "731, 1096, 1827, 2192, 2557, 2922, 3288, 3653 days, or 0 for never; CloudWatch Logs API reference, "
     "PutRetentionPolicy) [rule: log-retention-valid]"),
    ("prod-aws", "aws:eks/cluster:Cluster", {"version": "1.99"}, "version",
     '"1.99" is not a Kubernetes version of Amazon EKS (the catalog components/catalog/eks_versions.yaml has 1.28, '
     "1.29, 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36, 1.37, from the EKS user guide's release calendar; a version "
     "released since belongs there first) [rule: eks-version-known]"),
]


@pytest.mark.parametrize(("stack", "type_", "change", "field", "message"), NOT_ACCEPTED,
                         ids=[f"{c[3]}={json.dumps(c[2])[:40]}" for c in NOT_ACCEPTED])
def test_values_the_cloud_refuses_are_refused_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str], stack: str,
                                                      type_: str, change: dict[str, Any], field: str,
                                                      message: str) -> None:
    doc = _doc(stack)
    index, res = next((i, r) for i, r in enumerate(doc["resources"]) if r["type"] == type_)
    res["inputs"].update(change)
    path = _write(tmp_path, doc)
    assert main(["policy", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: resources[{index}].inputs.{field} of {res['urn']}: {message}\n"
    export = {"version": 3, "deployment": {"resources": [{"urn": r["urn"], "type": r["type"], "inputs": r["inputs"]}
                                                         for r in doc["resources"]]}}
    path = _write(tmp_path, export, "export.json")
    assert main(["cost", str(path)]) == 2
    assert f"deployment.resources[{index}].inputs.{field} of {res['urn']}: {message}" in capsys.readouterr().err


@pytest.mark.parametrize(("type_", "change"), [
    (FSX, {"deploymentType": "PERSISTENT_1", "perUnitStorageThroughput": 200, "storageCapacity": 4800}),
    (FSX, {"deploymentType": "PERSISTENT_1", "storageType": "HDD", "perUnitStorageThroughput": 12,
           "storageCapacity": 12000}),
    (FSX, {"deploymentType": "SCRATCH_1", "storageCapacity": 7200, "perUnitStorageThroughput": None}),
    ("aws:cloudwatch/logGroup:LogGroup", {"retentionInDays": 3653}),
    ("aws:kms/key:Key", {"deletionWindowInDays": 7}),
    ("aws:budgets/budget:Budget", {"limitAmount": ".5"}),
])
def test_values_the_cloud_offers_load(tmp_path: Path, capsys: pytest.CaptureFixture[str], type_: str,
                                      change: dict[str, Any]) -> None:
    doc = _doc("prod-aws")
    next(r for r in doc["resources"] if r["type"] == type_)["inputs"].update(change)
    assert main(["cost", str(_write(tmp_path, doc))]) == 0
    capsys.readouterr()
