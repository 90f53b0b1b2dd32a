"""The served model on each production stack: its Deployment, Service, disruption budget and account in the team's
namespace, valid as Kubernetes reads them, admitted through the team's queue on the model's group, and the cloud
identity that reads exactly its weights' prefix, which the replicas wait for."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.cli import main
from blueprint.graph.model import GraphResource, ResourceGraph
from components.spec.inference import ServedModelSpec
from tests.conftest import kubernetes_version, offline_run, stack
from tests.k8s_checks import validate_builtin

STACKS = ["prod-aws", "prod-gcp"]


def served(name: str) -> ServedModelSpec:
    spec = stack(name).spec
    assert spec.inference is not None
    return spec.inference.models[0]


def one(graph: ResourceGraph, type_: str, name: str) -> GraphResource:
    [found] = [r for r in graph.of_type(type_) if r.name == name]
    return found


def objects(name: str) -> dict[str, dict[str, Any]]:
    graph = offline_run(name).graph
    model = served(name).name
    return {kind: one(graph, type_, f"serving-{model}-{suffix}").inputs for kind, type_, suffix in (
        ("Deployment", "kubernetes:apps/v1:Deployment", "deployment"),
        ("Service", "kubernetes:core/v1:Service", "service"),
        ("PodDisruptionBudget", "kubernetes:policy/v1:PodDisruptionBudget", "pdb"),
        ("ServiceAccount", "kubernetes:core/v1:ServiceAccount", "account"))}


@pytest.mark.parametrize("name", STACKS)
def test_the_serving_objects_are_valid_kubernetes(name: str) -> None:
    for manifest in objects(name).values():
        validate_builtin(dict(manifest), kubernetes_version(name))


@pytest.mark.parametrize("name", STACKS)
def test_the_deployment_is_the_teams_pinned_to_its_group_and_loads_from_the_bucket(name: str) -> None:
    model = served(name)
    team = next(t for t in stack(name).spec.teams if t.name == model.team)
    deployment = objects(name)["Deployment"]
    labels = deployment["metadata"]["labels"]
    assert deployment["metadata"]["namespace"] == model.team
    assert labels["kueue.x-k8s.io/queue-name"] == "default"
    assert labels["team"] == model.team and labels["cost-center"] == team.cost_center
    # Autoscaled (replicas.min < max): the HPA KEDA makes owns the count (tests/inference/test_autoscaling.py).
    assert "replicas" not in deployment["spec"] and model.replicas.min < model.replicas.max
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "production"
    pod = template["spec"]
    assert "priorityClassName" not in pod  # the team-priority policy refuses one
    assert pod["nodeSelector"] == {"gpu-cluster/node-group": model.node_group}
    assert pod["securityContext"]["supplementalGroups"] == [team.posix_gid]
    assert pod["serviceAccountName"] == f"serve-{model.name}"
    [engine] = pod["containers"]
    assert engine["image"] == model.engine.image
    assert engine["resources"]["limits"]["nvidia.com/gpu"] == model.gpus_per_replica
    env = {e["name"]: e["value"] for e in engine["env"]}
    scheme = "s3" if stack(name).spec.cloud == "aws" else "gs"
    assert env["MODEL_URI"] == f"{scheme}://$(WEIGHTS_BUCKET)/{model.weights.prefix}"
    # The checkpoint bucket: GCS by its name, S3 by the prefix its generated name starts with.
    bucket = next(r for r in offline_run(name).graph.resources
                  if r.type in ("aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket")
                  and r.name == "storage-checkpoints")
    assert env["WEIGHTS_BUCKET"].startswith(bucket.inputs.get("name") or bucket.inputs["bucketPrefix"])
    # The streamer's host buffer is capped (its default is the whole model, up to 40 GB) and fits the pod's memory.
    from components.sizing.inference import STREAMER_BUFFER_BYTES, host_memory_floor_gib

    assert env["RUNAI_STREAMER_MEMORY_LIMIT"] == str(STREAMER_BUFFER_BYTES)
    memory = engine["resources"]["limits"]["memory"]
    assert memory == engine["resources"]["requests"]["memory"]
    assert int(memory.removesuffix("Gi")) >= host_memory_floor_gib(model.gpus_per_replica)
    args = engine["args"]
    assert args[0] == "$(MODEL_URI)"
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    assert args[args.index("--max-model-len") + 1] == str(model.context_tokens)
    assert args[args.index("--tensor-parallel-size") + 1] == str(model.tensor_parallel)
    # vLLM answers /health only once the weights are loaded: the startup probe is the weights-loaded signal.
    assert engine["startupProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert engine["startupProbe"]["failureThreshold"] * engine["startupProbe"]["periodSeconds"] >= 600


@pytest.mark.parametrize("name", STACKS)
def test_the_endpoint_is_private(name: str) -> None:
    service = objects(name)["Service"]
    assert service["spec"]["type"] == "ClusterIP"
    assert objects(name)["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize("name", STACKS)
def test_the_replicas_wait_for_their_identity(name: str) -> None:
    graph = offline_run(name).graph
    model = served(name)
    deployment = one(graph, "kubernetes:apps/v1:Deployment", f"serving-{model.name}-deployment")
    wanted = ("aws:eks/podIdentityAssociation:PodIdentityAssociation" if stack(name).spec.cloud == "aws"
              else "gcp:storage/managedFolderIamMember:ManagedFolderIamMember")
    grants = [r.urn for r in graph.of_type(wanted) if r.name == f"serving-access-{model.name}"
              + ("-pod-identity" if stack(name).spec.cloud == "aws" else "-read")]
    assert grants and set(grants) <= set(deployment.dependencies)


def test_the_aws_identity_reads_exactly_the_weights_prefix() -> None:
    graph = offline_run("prod-aws").graph
    model = served("prod-aws")
    association = one(graph, "aws:eks/podIdentityAssociation:PodIdentityAssociation",
                      f"serving-access-{model.name}-pod-identity").inputs
    assert (association["namespace"], association["serviceAccount"]) == (model.team, f"serve-{model.name}")
    policy = json.loads(one(graph, "aws:iam/rolePolicy:RolePolicy", f"serving-access-{model.name}-policy")
                        .inputs["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert actions == {"s3:ListBucket", "s3:GetObject", "kms:Decrypt"}  # read only: no put, no delete
    reads = next(s for s in policy["Statement"] if s["Action"] == ["s3:GetObject"])
    assert reads["Resource"].endswith(f":::{reads['Resource'].split(':::')[1].split('/')[0]}/"
                                      f"{model.weights.prefix}*")
    lists = next(s for s in policy["Statement"] if s["Action"] == ["s3:ListBucket"])
    assert lists["Condition"]["StringLike"]["s3:prefix"] == [model.weights.prefix, f"{model.weights.prefix}*"]
    role = one(graph, "aws:iam/role:Role", f"serving-access-{model.name}-role").inputs
    assert len(role["name"]) <= 64


def test_the_gcp_identity_reads_exactly_the_weights_prefix() -> None:
    graph = offline_run("prod-gcp").graph
    model = served("prod-gcp")
    folder = one(graph, "gcp:storage/managedFolder:ManagedFolder", "serving-access-models.llama-3.1-8b-instruct-folder")
    assert folder.inputs["name"] == model.weights.prefix
    assert folder.protect  # prod: the folder's grants are not dropped by a rename
    grant = one(graph, "gcp:storage/managedFolderIamMember:ManagedFolderIamMember",
                f"serving-access-{model.name}-read").inputs
    assert grant["role"] == "roles/storage.objectViewer"
    assert grant["member"].endswith(f"/subject/ns/{model.team}/sa/serve-{model.name}")


@pytest.mark.parametrize("name", STACKS)
def test_admit_admits_the_replicas_through_the_teams_queue_on_its_group(
        name: str, graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the cluster's admission would make of the Deployment the stack creates (blueprint admit)."""
    model = served(name)
    workload = tmp_path / "deployment.yaml"
    workload.write_text(yaml.safe_dump(objects(name)["Deployment"]))
    assert main(["admit", str(graph_files(name)), str(workload), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [result] = report["workloads"]
    assert result["admitted"], result
    text = json.dumps(result)
    assert f"flavor {model.node_group}" in text or f'"{model.node_group}"' in text
