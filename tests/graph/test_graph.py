"""The ResourceGraph readers: offline JSON, `pulumi preview --json` and `pulumi stack export`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blueprint.graph.load import load_graph
from blueprint.graph.model import SECRET, UNKNOWN, GraphFormatError, ResourceGraph

STACK = "urn:pulumi:prod-aws::gpu-cluster::pulumi:pulumi:Stack::gpu-cluster-prod-aws"
PROVIDER = "urn:pulumi:prod-aws::gpu-cluster::pulumi:providers:aws::aws"
COMPONENT = "urn:pulumi:prod-aws::gpu-cluster::gpu-cluster:storage:AwsStorage::storage"
BUCKET = "urn:pulumi:prod-aws::gpu-cluster::gpu-cluster:storage:AwsStorage$aws:s3/bucket:Bucket::storage-checkpoints"


def _state(urn: str, type_: str, **extra: object) -> dict[str, object]:
    return {"urn": urn, "type": type_, "custom": True, "inputs": {}, **extra}


PREVIEW = {
    "config": {"aws:region": "us-east-1"},
    "steps": [
        {"op": "same", "urn": STACK, "newState": _state(STACK, "pulumi:pulumi:Stack")},
        {"op": "create", "urn": PROVIDER, "newState": _state(
            PROVIDER, "pulumi:providers:aws", parent=STACK,
            inputs={"region": "us-east-1", "defaultTags": json.dumps({"tags": {"team": "a", "owner": "b"}})})},
        {"op": "create", "urn": COMPONENT, "newState": _state(COMPONENT, "gpu-cluster:storage:AwsStorage",
                                                               parent=STACK)},
        {"op": "update", "urn": BUCKET, "newState": _state(
            BUCKET, "aws:s3/bucket:Bucket", parent=COMPONENT, provider=f"{PROVIDER}::abc", protect=True,
            retainOnDelete=True, inputs={"bucketPrefix": UNKNOWN, "tags": {"owner": "c", "Name": "x"},
                                         "policy": SECRET},
            dependencies=[COMPONENT])},
        {"op": "delete", "urn": BUCKET + "-old", "oldState": _state(BUCKET + "-old", "aws:s3/bucket:Bucket")},
    ],
    "changeSummary": {"create": 3, "same": 1, "delete": 1},
}


def test_reads_pulumi_preview_json() -> None:
    graph = ResourceGraph.from_preview_json(PREVIEW)
    assert graph.stack == "prod-aws"
    assert [r.name for r in graph.resources] == ["gpu-cluster-prod-aws", "aws", "storage", "storage-checkpoints"]
    bucket = graph.get(BUCKET)
    assert bucket is not None and bucket.protect and bucket.retain_on_delete
    assert bucket.provider_urn == PROVIDER
    assert graph.plane_of(bucket) == "storage"
    # provider default tags merge under the resource's own tags
    assert graph.effective_inputs(bucket)["tags"] == {"team": "a", "owner": "c", "Name": "x"}


def test_reads_stack_export(tmp_path: Path) -> None:
    export = {"version": 3, "deployment": {"resources": [s["newState"] for s in PREVIEW["steps"][:4]]}}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    graph = load_graph(path)
    assert graph.stack == "prod-aws" and len(graph.resources) == 4


def test_round_trips_its_own_format(tmp_path: Path) -> None:
    graph = ResourceGraph.from_preview_json(PREVIEW)
    path = tmp_path / "graph.json"
    path.write_text(graph.to_json())
    again = load_graph(path)
    assert again.to_json() == graph.to_json()


@pytest.mark.parametrize("doc", [[], {"resources": "x"}, {"resources": [{"urn": "u"}]}])
def test_rejects_documents_of_another_shape(doc: object) -> None:
    with pytest.raises(GraphFormatError):
        ResourceGraph.from_dict(doc)
