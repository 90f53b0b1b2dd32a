"""``blueprint admit``: every shipped example runs on its stack, the acceptance jobs wait only for their held queue,
and each step of the walk refuses what the cluster would refuse, with the rule and a message that says how to fix
it. Graphs come from the cached offline runs, written once per stack as graph files."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.cli import main
from components.spec import TeamSpec
from tests.conftest import ROOT, SHIPPED_STACKS, offline_run
from tests.conftest import stack as stack_file

EXAMPLES = ROOT / "examples" / "workloads"
GPU = "nvidia.com/gpu"
Manifest = dict[str, Any]


def _all_gpus_on_slurm(name: str) -> bool:
    """Every team quota is on a node group Slurm runs: Kueue has no GPU to give a Kubernetes job."""
    spec = stack_file(name).spec
    slurm = spec.scheduler.slurm
    return slurm is not None and all(q.node_group in slurm.node_groups for t in spec.teams for q in t.quotas)


# Stacks whose GPUs are all Slurm's have sbatch examples (examples/slurm/, tests/admit/test_admit_slurm.py) instead.
KUEUE_STACKS = [s for s in SHIPPED_STACKS if not _all_gpus_on_slurm(s)]



def graph_without(stack: str, tmp_path: Path, drop: Callable[[dict[str, Any]], bool],
                  change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """A copy of the stack's graph without the resources ``drop`` picks (and changed by ``change``)."""
    doc = offline_run(stack).graph.to_dict()
    doc = {"stack": doc["stack"], "resources": [copy.deepcopy(r) for r in doc["resources"] if not drop(r)]}
    if change is not None:
        for resource in doc["resources"]:
            change(resource)
    path = tmp_path / f"{stack}-changed.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def admit(graph: Path, tmp_path: Path, *manifests: Manifest, capsys: pytest.CaptureFixture[str]) -> \
        tuple[int, dict[str, Any]]:
    """Admit the manifests (one file) against the graph; (exit status, JSON report)."""
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump_all(list(manifests), sort_keys=False), encoding="utf-8")
    code = main(["admit", str(graph), str(path), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def reasons(report: dict[str, Any], rule: str) -> list[dict[str, str]]:
    return [r for w in report["workloads"] for r in w["reasons"] if r["rule"] == rule]


def team_gid(namespace: str) -> int:
    """The team's POSIX group on the stacks these tests use (no gid in their team specs: the default, a hash)."""
    return TeamSpec.model_validate({"name": namespace, "costCenter": "cc-0000"}).posix_gid


def job(namespace: str = "research", gpus: int = 8, pods: int = 1, **pod_spec: Any) -> Manifest:
    """A team Job asking for ``gpus`` GPUs in each of ``pods`` pods, through the namespace's default queue, with the
    team's group in its pods (the gpu-cluster-team-gid policy refuses them without it)."""
    container: Manifest = {"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                           "resources": {"limits": {GPU: gpus}}}
    spec: Manifest = {"restartPolicy": "Never", "containers": [container],
                      "securityContext": {"supplementalGroups": [team_gid(namespace)]}, **pod_spec}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "probe", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"parallelism": pods, "completions": pods, "template": {"spec": spec}}}


# --- the examples -----------------------------------------------------------------------------------------------


def test_every_shipped_stack_has_its_examples() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == sorted(KUEUE_STACKS)
    if KUEUE_STACKS != SHIPPED_STACKS:
        assert sorted((ROOT / "examples" / "slurm").glob("*.sbatch"))
    for stack in KUEUE_STACKS:
        prod = stack in ("prod-aws", "prod-gcp")
        assert sorted(p.name for p in (EXAMPLES / stack).glob("*.yaml")) == [
            "finetune-single-node.yaml", *(["inference-benchmark.yaml", "inference-client.yaml"] if prod else []),
            "train-multinode.yaml",
            *(["trainjob-finetune.yaml"] if prod else [])], stack
    assert (EXAMPLES / "README.md").is_file()


@pytest.mark.parametrize("stack", KUEUE_STACKS)
def test_every_example_is_admitted_on_its_stack(stack: str, graph_files: Callable[[str], Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in (EXAMPLES / stack).glob("*.yaml"))
    code = main(["admit", str(graph_files(stack)), *files])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.endswith(f"{len(files)} of {len(files)} workloads admitted on {stack}\n")
    assert "FAIL" not in out


@pytest.mark.parametrize("stack", KUEUE_STACKS)
def test_the_multinode_example_uses_every_gpu_and_fabric_device_of_the_group_at_max_size(
        stack: str, graph_files: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The example is derived from the graph's facts: one pod per node of the GPU group at its max size, asking for
    every GPU unit a container may take and every EFA interface the device plugin advertises."""
    from blueprint.admit.cloud import node_groups
    from blueprint.admit.cluster import ClusterView
    from blueprint.clouds.aws.admit import EFA

    code = main(["admit", str(graph_files(stack)), str(EXAMPLES / stack / "train-multinode.yaml"), "--format", "json"])
    (workload,) = json.loads(capsys.readouterr().out)["workloads"]
    assert code == 0
    (placement,) = workload["placements"]
    (group,) = [g for g in node_groups(ClusterView(offline_run(stack).graph)) if g.name == placement["node_group"]]
    assert placement["nodes"] == placement["pods"] == group.max_nodes
    doc = yaml.safe_load((EXAMPLES / stack / "train-multinode.yaml").read_text())
    pod = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    limits = next(c for c in pod["containers"] if GPU in c["resources"]["limits"])["resources"]["limits"]
    per_container = 1 if group.sharing.fail_requests_greater_than_one else group.allocatable[GPU]
    assert limits[GPU] == per_container
    assert limits.get(EFA, 0) == group.allocatable.get(EFA, 0)


def test_the_acceptance_jobs_wait_only_for_their_held_queue(graph_files: Callable[[str], Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    jobs = [r.inputs for r in offline_run("prod-aws").graph.resources if r.type.endswith(":MPIJob") or (
        r.type.endswith(":Job") and r.inputs["metadata"].get("namespace") == "gpu-acceptance")]
    assert len(jobs) == 3  # the all_reduce over every node, the per-node run, the storage checkpoint check
    code, report = admit(graph_files("prod-aws"), tmp_path, *jobs, capsys=capsys)
    assert code == 1 and report["admitted"] is False
    for workload in report["workloads"]:
        (reason,) = workload["reasons"]
        assert reason["rule"] == "queue-held" and reason["object"] == "ClusterQueue/gpu-acceptance"
        assert "held (stopPolicy: Hold)" in reason["message"]
        assert ("kubectl patch clusterqueue gpu-acceptance --type merge -p '{\"spec\":{\"stopPolicy\":\"None\"}}'"
                in reason["message"])
        assert "Before you commit capacity" in reason["message"]
        assert workload["cluster_queue"] == "gpu-acceptance" and workload["flavor"] == "h100"
    allreduce = next(w for w in report["workloads"] if w["object"].endswith("nccl-allreduce-h100"))
    assert {p["pod_set"]: (p["pods"], p["nodes"]) for p in allreduce["placements"]} == {
        "launcher": (1, 1), "worker": (16, 16)}
    assert any("hugepages-2Mi: check allocatable on a p5.48xlarge node" in n for n in allreduce["notes"])
    per_node = next(w for w in report["workloads"] if w["object"].endswith("nccl-nodes-h100"))
    assert [(p["pods"], p["nodes"]) for p in per_node["placements"]] == [(16, 16)]  # one pod on every node


# --- each step refuses what the cluster refuses --------------------------------------------------------------------


def test_schema_refuses_an_unknown_field(graph_files: Callable[[str], Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = job()
    bad["spec"]["template"]["spec"]["containers"][0]["gpus"] = 8
    code, report = admit(graph_files("prod-aws"), tmp_path, bad, capsys=capsys)
    (reason,) = reasons(report, "schema")
    assert code == 1 and reason["object"] == "Job/research/probe"
    assert "spec.template.spec.containers[0]: Additional properties are not allowed ('gpus' was unexpected)" in \
        reason["message"] and "Kubernetes 1.35" in reason["message"]


def test_schema_refuses_a_custom_object_against_its_crd(graph_files: Callable[[str], Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((EXAMPLES / "prod-aws" / "train-multinode.yaml").read_text())
    doc["spec"]["replicatedJobs"][0]["replica"] = 2  # a typo of replicas
    code, report = admit(graph_files("prod-aws"), tmp_path, doc, capsys=capsys)
    (reason,) = reasons(report, "schema")
    assert code == 1 and reason["object"] == "JobSet/pretraining/train-multinode"
    assert "spec.replicatedJobs[0]: Additional properties are not allowed ('replica' was unexpected)" in \
        reason["message"]


def test_a_kind_whose_controller_is_not_installed_never_runs(graph_files: Callable[[str], Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((EXAMPLES / "prod-aws" / "train-multinode.yaml").read_text())
    graph = graph_without("prod-aws", tmp_path, lambda r: r["type"] == "kubernetes:helm.sh/v3:Release"
                          and r["inputs"].get("name") in ("jobset", "kubeflow-trainer"))
    code, report = admit(graph, tmp_path, doc, capsys=capsys)
    (reason,) = reasons(report, "controller-installed")
    assert code == 1 and "JobSet needs the JobSet controller, which the cluster does not install" in reason["message"]
    assert reason["object"] == "JobSet/pretraining/train-multinode"


def test_a_missing_namespace(graph_files: Callable[[str], Path], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-aws"), tmp_path, job(namespace="vision"), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "namespace-exists" and reason["object"] == "Namespace/vision"
    assert "set metadata.namespace to a team namespace (applied, pretraining, research)" in reason["message"]
    assert report["workloads"][0]["steps"]["kueue"] == "skip"


def test_a_privileged_container_is_refused_by_pod_security_and_the_policy(
        graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = job()
    bad["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    code, report = admit(graph_files("prod-aws"), tmp_path, bad, capsys=capsys)
    (psa,) = reasons(report, "pod-security")
    assert code == 1 and psa["object"] == "Namespace/research"
    assert "Pod Security 'baseline'" in psa["message"] and "container train is privileged" in psa["message"]
    (policy,) = reasons(report, "admission-policy")
    assert policy["object"] == "ValidatingAdmissionPolicy/gpu-cluster-no-privileged-pods"
    assert "privileged containers run only in kube-system, gpu-operator, monitoring" in policy["message"]


def test_an_image_from_a_registry_the_stack_does_not_allow(graph_files: Callable[[str], Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = job()
    bad["spec"]["template"]["spec"]["containers"][0]["image"] = "docker.io/library/python:3.12"
    code, report = admit(graph_files("prod-aws"), tmp_path, bad, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "admission-policy"
    assert reason["object"] == "ValidatingAdmissionPolicy/gpu-cluster-allowed-registries"
    assert "containers images must come from an allowed registry: nvcr.io/nvidia/" in reason["message"]


def test_gke_team_pods_mount_only_their_directory_of_the_shared_filesystem(
        graph_files: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((EXAMPLES / "prod-gcp" / "finetune-single-node.yaml").read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = "research"
    code, report = admit(graph_files("prod-gcp"), tmp_path, doc, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["object"] == "ValidatingAdmissionPolicy/gpu-cluster-shared-fs-subpath"


def test_a_request_above_the_namespace_default_limit(graph_files: Callable[[str], Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A memory request with no limit gets the LimitRange's default limit, and a request above it is refused."""
    bad = job()
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"memory": "3000Gi"}
    code, report = admit(graph_files("prod-aws"), tmp_path, bad, capsys=capsys)
    (reason,) = reasons(report, "limit-range")
    assert code == 1 and "container train requests 3000Gi memory, above its limit 2Ti" in reason["message"]


def test_over_the_team_quota(graph_files: Callable[[str], Path], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """research has 64 GPUs nominal and may borrow 32: 13 nodes of 8 is more than its queue can ever hold."""
    code, report = admit(graph_files("prod-aws"), tmp_path, job(pods=13), capsys=capsys)
    (quota,) = reasons(report, "quota")
    assert code == 1 and quota["object"] == "ClusterQueue/research"
    assert ("104 nvidia.com/gpu needed, at most 96 (nominal 64 + 32 borrowed from cohort prod-train-gpus "
            "(borrowingLimit 32, the others lend 32))") in quota["message"]
    assert "raise the team's quota" in quota["message"]
    (namespace_quota,) = reasons(report, "resource-quota")
    assert "ResourceQuota/research/gpu-quota allows 96 (requests.nvidia.com/gpu)" in namespace_quota["message"]
    assert report["workloads"][0]["steps"]["scheduling"] == "skip"
    # Kueue holds the Job suspended, so no pod is created and the namespace's ResourceQuota is never reached:
    # Kueue is what blocks it first.
    assert report["workloads"][0]["reasons"][0]["rule"] == "quota"
    assert list(report["workloads"][0]["steps"])[2] == "kueue"


def test_a_queue_that_does_not_exist(graph_files: Callable[[str], Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = job()
    bad["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "urgent"
    code, report = admit(graph_files("prod-aws"), tmp_path, bad, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "queue-exists" and reason["object"] == "LocalQueue/research/urgent"
    assert "namespace research has no LocalQueue 'urgent' (its LocalQueues: default)" in reason["message"]


def test_nine_gpus_do_not_fit_an_eight_gpu_node(graph_files: Callable[[str], Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-aws"), tmp_path, job(gpus=9), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "larger-than-any-node" and reason["object"] == "NodeGroup/h100"
    assert ("asks 9 nvidia.com/gpu per pod, more than any node of the cluster has: the biggest, a p5.48xlarge node of "
            "h100, has 8 allocatable") in reason["message"]


def test_time_sliced_gpus_give_a_container_one_unit(graph_files: Callable[[str], Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("dev-aws"), tmp_path, job(gpus=2), capsys=capsys)
    (reason,) = reasons(report, "node-capacity")
    assert code == 1 and "refuses more than 1 per container (failRequestsGreaterThanOne" in reason["message"]


def test_a_pod_outside_kueue_must_tolerate_the_gpu_taint(graph_files: Callable[[str], Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """gpu-acceptance is not a namespace Kueue manages pods in: no flavor adds the toleration."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "gpu-acceptance"},
           "spec": {"nodeSelector": {"gpu-cluster/node-group": "h100"},
                    "containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubuntu24.04",
                                    "resources": {"limits": {GPU: 8}}}]}}
    code, report = admit(graph_files("prod-aws"), tmp_path, pod, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "toleration" and reason["object"] == "NodeGroup/h100"
    assert "its nodes carry taint nvidia.com/gpu=true:NoSchedule" in reason["message"]
    assert report["workloads"][0]["cluster_queue"] is None
    pod["spec"]["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    code, report = admit(graph_files("prod-aws"), tmp_path, pod, capsys=capsys)
    assert code == 0, report


def test_more_pods_than_the_group_has_nodes(graph_files: Callable[[str], Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """17 pods that each need most of a node's CPUs: within research's queue, but the group stops at 16 nodes."""
    wide = job(gpus=1, pods=17)
    wide["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "120"}
    code, report = admit(graph_files("prod-aws"), tmp_path, wide, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "node-count"
    assert "need 17 p5.48xlarge nodes of h100; its max size is 16" in reason["message"]


def test_an_autoscaled_group_counts_at_its_maximum(graph_files: Callable[[str], Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """dev-aws's l4 group is at 0 nodes (desiredSize 0), and the Cluster Autoscaler grows it to 2: a 1-GPU job is
    admitted and placed on one l4 node. Without the opt-in tag on its Auto Scaling group (or without the
    autoscaler) nothing grows it, and the same job needs a node the group never has."""
    code, report = admit(graph_files("dev-aws"), tmp_path, job(gpus=1), capsys=capsys)
    (workload,) = report["workloads"]
    assert code == 0 and workload["flavor"] == "l4"
    assert workload["placements"] == [{"pod_set": "main", "node_group": "l4", "nodes": 1, "pods": 1}]
    assert ("NodeGroup/l4: the Cluster Autoscaler grows it from 0 to at most 2 nodes for pending pods (min 0): "
            "counted at 2") in workload["notes"]
    for drop in (lambda r: r["name"] == "nodegroup-l4-asg-autoscale", lambda r: r["name"] == "cluster-autoscaler"):
        code, report = admit(graph_without("dev-aws", tmp_path, drop), tmp_path, job(gpus=1), capsys=capsys)
        (reason,) = reasons(report, "node-count")
        assert code == 1 and reason["object"] == "NodeGroup/l4"
        assert reason["message"] == ("pod sets main (1 pods) need 1 g6.xlarge nodes of l4; its desired size (nothing "
                                     "grows it) is 0: run fewer or smaller pods, or raise the group's desiredSize in "
                                     "the stack")


def test_a_claim_that_does_not_exist(graph_files: Callable[[str], Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = job(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}])
    code, report = admit(graph_files("prod-aws"), tmp_path, bad, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "volume-claim"
    assert reason["object"] == "PersistentVolumeClaim/research/datasets"
    assert "which is not in namespace research (its claims: " in reason["message"]
    assert "shared-fs" in reason["message"]  # the claim to use instead


def test_a_config_map_that_does_not_exist(graph_files: Callable[[str], Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = job(gpus=1)
    bad["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "checkpoint-policy"}}]
    code, report = admit(graph_files("dev-aws"), tmp_path, bad, capsys=capsys)  # dev-aws has no goodput model
    (reason,) = reasons(report, "config-map")
    assert code == 1 and reason["object"] == "ConfigMap/research/checkpoint-policy"
    bad["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["optional"] = True
    assert admit(graph_files("dev-aws"), tmp_path, bad, capsys=capsys)[0] == 0


def test_a_service_account_that_does_not_exist(graph_files: Callable[[str], Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-aws"), tmp_path, job(serviceAccountName="trainer"), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "service-account"
    assert "its accounts: default, checkpoints" in reason["message"]


def test_checkpoints_need_the_pod_identity_association(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = graph_without("prod-aws", tmp_path, lambda r: r["type"].endswith(":PodIdentityAssociation")
                          and r["inputs"].get("namespace") == "research")
    code, report = admit(graph, tmp_path, job(serviceAccountName="checkpoints"), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "bucket-access"
    assert "no EKS Pod Identity association for service account research/checkpoints" in reason["message"]


def _with_data(namespace: str, read_only: bool) -> Manifest:
    """The prod-gcp single-node example in ``namespace``, also mounting the team's claim of the data bucket
    (gcp.storage.buckets), with the annotation GKE injects the GCS FUSE sidecar on."""
    doc = yaml.safe_load((EXAMPLES / "prod-gcp" / "finetune-single-node.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    pod = doc["spec"]["template"]
    pod["spec"]["securityContext"]["supplementalGroups"] = [team_gid(namespace)]
    pod["metadata"]["annotations"] = {"gke-gcsfuse/volumes": "true"}
    container = pod["spec"]["containers"][0]
    container["volumeMounts"][0]["subPath"] = namespace
    container["volumeMounts"].append({"name": "data", "mountPath": "/data", "readOnly": read_only})
    pod["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "data",
                                                                             "readOnly": read_only}})
    return doc


def test_a_team_job_mounts_the_data_bucket_its_access_names(graph_files: Callable[[str], Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """research reads the data bucket (a read-only claim), pretraining writes it; a namespace without access has no
    claim, and admit says so."""
    for namespace, read_only in (("research", True), ("pretraining", False)):
        code, report = admit(graph_files("prod-gcp"), tmp_path, _with_data(namespace, read_only), capsys=capsys)
        assert code == 0, report
    spec_graph = offline_run("prod-gcp").graph.to_dict()
    spec_graph["resources"] = [r for r in spec_graph["resources"] if not (
        r["type"] == "kubernetes:core/v1:PersistentVolumeClaim"
        and r["inputs"]["metadata"] == {**r["inputs"]["metadata"], "namespace": "applied", "name": "data"})]
    path = tmp_path / "no-applied-data.json"
    path.write_text(json.dumps(spec_graph), encoding="utf-8")
    code, report = admit(path, tmp_path, _with_data("applied", True), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "volume-claim" and reason["object"] == "PersistentVolumeClaim/applied/data"


def test_a_write_grant_on_another_bucket_is_not_one_on_the_checkpoint_bucket(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pretraining may write the data bucket (gcp.storage.buckets); without its managed-folder grant it still cannot
    write checkpoints, and admit must not take the data bucket's grant for it."""
    graph = graph_without("prod-gcp", tmp_path, lambda r: r["type"].endswith(":ManagedFolderIamMember")
                          and r["inputs"]["member"].endswith("/ns/pretraining/sa/checkpoints"))
    code, report = admit(graph, tmp_path, job("pretraining", serviceAccountName="checkpoints"), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "bucket-access"
    assert reason["message"] == (
        "the Workload Identity principal .../ns/pretraining/sa/checkpoints has roles/storage.bucketViewer on the "
        "checkpoint bucket acme-ml-prod-prod-train-gke-checkpoints, no write role: checkpoints cannot be written; "
        "grant roles/storage.objectUser on the team's managed folder")
    code, report = admit(offline_run_graph("prod-gcp", tmp_path), tmp_path,
                         job("pretraining", serviceAccountName="checkpoints"), capsys=capsys)
    assert code == 0, report
    assert "pretraining/checkpoints writes managed folder pretraining/ as roles/storage.objectUser" in \
        report["workloads"][0]["notes"]


def offline_run_graph(stack: str, tmp_path: Path) -> Path:
    return graph_without(stack, tmp_path, lambda r: False)


def test_without_the_https_egress_policy_the_bucket_is_out_of_reach(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    graph = graph_without("prod-aws", tmp_path, lambda r: r["type"].endswith(":NetworkPolicy")
                          and r["inputs"]["metadata"] == {"name": "allow-https-egress", "namespace": "research"})
    code, report = admit(graph, tmp_path, job(serviceAccountName="checkpoints"), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "egress-blocked"
    assert "cannot reach the bucket endpoint (HTTPS 443 on public addresses)" in reason["message"]
    assert reason["object"] == "NetworkPolicy/research/default-deny"


def test_lustre_is_reached_from_the_node_not_through_pod_policies(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The kernel client mounts FSx on the host network: what it needs is the security group rule for LNet."""
    doc = yaml.safe_load((EXAMPLES / "prod-aws" / "finetune-single-node.yaml").read_text())
    graph = graph_without("prod-aws", tmp_path, lambda r: r["type"].startswith("aws:vpc/securityGroupIngressRule")
                          and r["inputs"].get("fromPort") == 988)
    code, report = admit(graph, tmp_path, doc, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "filesystem-unreachable"
    assert reason["object"].startswith("PersistentVolume/shared-fs-applied-") and "opens TCP 988" in reason["message"]


def test_a_trainjob_needs_its_runtime(graph_files: Callable[[str], Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "probe", "namespace": "research",
                             "labels": {"kueue.x-k8s.io/queue-name": "default"}},
                "spec": {"runtimeRef": {"name": "torch-distributed"},
                         "trainer": {"numNodes": 2, "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                     "resourcesPerNode": {"limits": {GPU: 8}}},
                         # The team's group reaches a TrainJob's pods only through a runtime patch.
                         "runtimePatches": [{"manager": "ml.example.com/team", "trainingRuntimeSpec": {"template": {
                             "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                                 "securityContext": {"supplementalGroups": [team_gid("research")]}}}}}}]}}}}]}}

    def runtimes(values: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
        def change(resource: dict[str, Any]) -> None:
            if resource["type"] == "kubernetes:helm.sh/v3:Release" and resource["inputs"].get("name") == \
                    "kubeflow-trainer":
                resource["inputs"]["values"]["runtimes"] = values
        return change

    code, report = admit(graph_files("prod-aws"), tmp_path, trainjob, capsys=capsys)  # as shipped
    assert code == 0, report
    assert report["workloads"][0]["placements"] == [{"pod_set": "node", "node_group": "h100", "nodes": 2, "pods": 2}]

    def no_runtime(resource: dict[str, Any]) -> bool:
        return resource["type"].endswith("TrainingRuntime")

    graph = graph_without("prod-aws", tmp_path, no_runtime, runtimes({"defaultEnabled": False}))
    code, report = admit(graph, tmp_path, trainjob, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "runtime-missing"
    assert "ClusterTrainingRuntime 'torch-distributed' is not in the cluster" in reason["message"]
    # A runtime the Trainer chart creates is not an object of the graph: its values say it exists.
    graph = graph_without("prod-aws", tmp_path, no_runtime, runtimes({"torchDistributed": {"enabled": True}}))
    code, report = admit(graph, tmp_path, trainjob, capsys=capsys)
    assert code == 0, report
    assert report["workloads"][0]["placements"] == [{"pod_set": "node", "node_group": "h100", "nodes": 2, "pods": 2}]
    del trainjob["spec"]["trainer"]["image"]  # the chart runtime's image is Docker Hub's, which the stack refuses
    code, report = admit(graph, tmp_path, trainjob, capsys=capsys)
    assert [r["rule"] for r in report["workloads"][0]["reasons"]] == ["admission-policy"]


# --- output and input -------------------------------------------------------------------------------------------


def test_the_json_report(graph_files: Callable[[str], Path], tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    example = yaml.safe_load((EXAMPLES / "prod-aws" / "finetune-single-node.yaml").read_text())
    code, report = admit(graph_files("prod-aws"), tmp_path, example, job(gpus=9), capsys=capsys)
    assert code == 1 and set(report) == {"stack", "admitted", "workloads"} and report["admitted"] is False
    good, bad = report["workloads"]
    assert set(good) == {"object", "source", "admitted", "namespace", "cluster_queue", "flavor", "placements",
                         "reasons", "steps", "notes"}
    assert good["object"] == "Job/applied/finetune-single-node" and good["admitted"] is True
    assert good["namespace"] == "applied" and good["cluster_queue"] == "applied" and good["flavor"] == "h100"
    assert good["placements"] == [{"pod_set": "main", "node_group": "h100", "nodes": 1, "pods": 1}]
    assert good["reasons"] == [] and set(good["steps"].values()) == {"ok"}
    # A Job waits suspended for Kueue before any pod exists: Kueue comes before the pods' checks.
    assert list(good["steps"]) == ["schema", "namespace", "kueue", "pod-security", "admission-policy", "limits",
                                   "scheduling", "volumes", "identity", "network"]
    assert good["source"].endswith("workload.yaml#1") and bad["source"].endswith("workload.yaml#2")
    assert bad["admitted"] is False and set(bad["reasons"][0]) == {"object", "rule", "message"}


def test_the_text_report_names_the_first_blocking_step(graph_files: Callable[[str], Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job(gpus=9)), encoding="utf-8")
    assert main(["admit", str(graph_files("prod-aws")), str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Job/research/probe  ({path})"
    assert "  ok   namespace  research" in lines and "  ok   kueue  queue research, flavor h100" in lines
    assert any(line.startswith("  FAIL scheduling: NodeGroup/h100: pod set main asks 9") for line in lines)
    assert "  => NOT ADMITTED: first blocked at scheduling by NodeGroup/h100 [larger-than-any-node]" in lines
    assert lines[-1] == "0 of 1 workload admitted on prod-aws"


@pytest.mark.parametrize(("text", "message"), [
    ("kind: Job\nmetadata: {name: x}\n", "not a Kubernetes object: apiVersion missing"),
    ("- 1\n- 2\n", "not a Kubernetes object (a mapping with apiVersion, kind and metadata.name)"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\n", "duplicate key 'name'"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", "not valid YAML"),
    ("# nothing\n", "no Kubernetes object in the file"),
])
def test_input_that_is_not_kubernetes_objects_exits_2(text: str, message: str, graph_files: Callable[[str], Path],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["admit", str(graph_files("prod-aws")), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}") and message in err


def test_an_unknown_stack_or_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = str(EXAMPLES / "prod-aws" / "finetune-single-node.yaml")
    assert main(["admit", "no-such-stack", example]) == 2
    assert "no-such-stack" in capsys.readouterr().err
    assert main(["admit", "prod-aws", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml: cannot be read" in capsys.readouterr().err


def test_the_namespace_quota_leaves_room_for_the_gcs_fuse_sidecar(graph_files: Callable[[str], Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Kueue admits a pod that uses the queue's whole CPU quota; GKE then adds its GCS FUSE sidecar (250m, 256Mi),
    which the ResourceQuota counts and Kueue does not: the quota has room for one sidecar per node the queue reaches,
    so the pod is not refused after admission (it was, before the headroom)."""
    doc = yaml.safe_load((EXAMPLES / "dev-gcp" / "finetune-single-node.yaml").read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"
    code, report = admit(graph_files("dev-gcp"), tmp_path, doc, capsys=capsys)
    assert code == 0 and report["workloads"][0]["reasons"] == [], report
    assert report["workloads"][0]["steps"]["kueue"] == "ok"
    over = yaml.safe_load((EXAMPLES / "dev-gcp" / "finetune-single-node.yaml").read_text())
    over["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "6"
    code, report = admit(graph_files("dev-gcp"), tmp_path, over, capsys=capsys)
    assert code == 1 and {r["rule"] for r in report["workloads"][0]["reasons"]} & {"quota", "resource-quota"}


# --- issue 21 review: what admit missed --------------------------------------------------------------------------


def _trainjob(namespace: str, patch_spec: Manifest, manager: str = "ml.example.com/team") -> Manifest:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "probe", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 1, "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                 "resourcesPerNode": {"limits": {GPU: 8}}},
                     "runtimePatches": [{"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {
                         "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                             "spec": patch_spec}}}}]}}}}]}}


SHARED_FS_PATCH: Manifest = {
    "serviceAccountName": "checkpoints",
    "securityContext": {"supplementalGroups": [team_gid("applied")]},
    "containers": [{"name": "node", "volumeMounts": [{"name": "shared-fs", "mountPath": "/checkpoints"}]}],
    "volumes": [{"name": "shared-fs", "persistentVolumeClaim": {"claimName": "shared-fs"}}]}


def test_a_trainjob_s_runtime_patches_reach_its_pods(graph_files: Callable[[str], Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """runtimePatches are the only way a TrainJob adds volumes and a service account: on GKE a patch that mounts
    shared-fs without subPath is refused by the subPath policy, as the cluster would refuse every pod."""
    code, report = admit(graph_files("prod-gcp"), tmp_path, _trainjob("applied", SHARED_FS_PATCH), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["object"] == "ValidatingAdmissionPolicy/gpu-cluster-shared-fs-subpath"
    patched = copy.deepcopy(SHARED_FS_PATCH)
    patched["containers"][0]["volumeMounts"][0]["subPath"] = "applied"
    code, report = admit(graph_files("prod-gcp"), tmp_path, _trainjob("applied", patched), capsys=capsys)
    assert code == 0, report
    (workload,) = report["workloads"]
    assert any("applied/checkpoints writes managed folder applied/" in n for n in workload["notes"])


@pytest.mark.parametrize(("manager", "patch", "says"), [
    ("not-a-domain", SHARED_FS_PATCH, "must be a domain-prefixed path"),

    ("ml.example.com/x", {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]},
     "no env for the node container"),
])
def test_runtime_patches_the_trainer_webhook_refuses(manager: str, patch: Manifest, says: str,
                                                     graph_files: Callable[[str], Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-aws"), tmp_path, _trainjob("applied", patch, manager), capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "runtime-patch" and says in reason["message"]


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp"])
def test_a_non_root_job_needs_the_team_group_to_write_its_directory(stack: str, graph_files: Callable[[str], Path],
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The team directory is 2770 root:<gid>: uid 1000 without the team's group fails at its first checkpoint."""
    from tests.conftest import stack as load_stack

    gid = next(t for t in load_stack(stack).spec.teams if t.name == "applied").posix_gid
    doc = yaml.safe_load((EXAMPLES / stack / "trainjob-finetune.yaml").read_text())
    patched = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    context = patched["template"]["spec"]["template"]["spec"]["securityContext"]
    assert context["supplementalGroups"] == [gid]  # the example carries the group the stack gives the team
    code, report = admit(graph_files(stack), tmp_path, doc, capsys=capsys)
    assert code == 0, report
    del context["supplementalGroups"]
    code, report = admit(graph_files(stack), tmp_path, doc, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason["rule"] == "admission-policy"
    assert reason["object"] == "ValidatingAdmissionPolicy/gpu-cluster-team-gid"
    assert f"(root:{gid}, mode 2770): add {gid} to spec.securityContext.supplementalGroups" in reason["message"]
    context["fsGroup"] = gid  # fsGroup is a supplementary group of every container too
    code, report = admit(graph_files(stack), tmp_path, doc, capsys=capsys)
    assert code == 0, report


@pytest.mark.parametrize(("mount", "says"), [
    ({"subPath": "applied/../research"}, "must not contain '..'"),
    ({"subPath": "/applied"}, "must be a relative path"),
    ({"subPath": "applied", "subPathExpr": "$(NS)"}, "mutually exclusive"),
    ({"name": "nothing"}, "is not a volume of the pod"),
])
def test_mounts_the_api_server_refuses(mount: Manifest, says: str, graph_files: Callable[[str], Path],
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((EXAMPLES / "prod-gcp" / "finetune-single-node.yaml").read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0].update(mount)
    code, report = admit(graph_files("prod-gcp"), tmp_path, doc, capsys=capsys)
    first = report["workloads"][0]["reasons"][0]
    assert code == 1 and first["rule"] == "pod-validation" and says in first["message"]


def test_runtime_patches_merge_like_the_trainer(graph_files: Callable[[str], Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Patches are strategic merge patches, applied in order: a second patch that only marks the mount read-only
    keeps the first one's subPath; a patch that adds a container is merged in (the webhook checks names after the
    merge), and its pods are then refused for what they lack."""
    first = copy.deepcopy(SHARED_FS_PATCH)
    first["containers"][0]["volumeMounts"][0]["subPath"] = "applied"
    job = _trainjob("applied", first)
    job["spec"]["runtimePatches"].append({"manager": "ml.example.com/second", "trainingRuntimeSpec": {"template": {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "node", "volumeMounts": [{"mountPath": "/checkpoints", "name": "shared-fs",
                                               "readOnly": True}]}]}}}}}]}}}})
    code, report = admit(graph_files("prod-gcp"), tmp_path, job, capsys=capsys)
    assert code == 0, report
    added = _trainjob("applied", {"containers": [{"name": "sidecar"}]})
    code, report = admit(graph_files("prod-gcp"), tmp_path, added, capsys=capsys)
    reasons = report["workloads"][0]["reasons"]
    assert code == 1 and reasons[0]["rule"] == "pod-validation"
    assert "spec.containers[1].image: required (container 'sidecar')" in reasons[0]["message"]
    assert "the Jobs or pods its controller creates" in reasons[0]["message"]
