"""The NCCL acceptance gate in the program (issue 14): MPIJobs valid against the MPIJob CRD, admitted by their
queue's rules, suspended until run, with every GPU and EFA device of each node."""

from __future__ import annotations

from typing import Any

import yaml

from components.kubernetes.objects import kueue_manager_config
from tests.conftest import offline_run, run_spec
from tests.k8s_checks import cluster_queue_cel, validate_crd_object

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def jobs(graph: Any) -> dict[str, dict[str, Any]]:
    return {j.inputs["metadata"]["name"]: j.inputs for j in graph.of_type(MPIJOB)}


def _quantity(text: Any) -> float:
    s = str(text)
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20)):
        if s.endswith(suffix):
            return float(s[:-len(suffix)]) * factor
    return float(s)


def test_the_mpijobs_are_valid_against_the_crd() -> None:
    found = jobs(offline_run("prod-aws").graph)
    assert sorted(found) == ["nccl-allreduce-h100", "nccl-nvlink-h100"]
    for job in found.values():
        validate_crd_object(job)


def test_the_allreduce_job_spans_every_node_with_every_device_and_waits_to_be_run() -> None:
    job = jobs(offline_run("prod-aws").graph)["nccl-allreduce-h100"]
    spec = job["spec"]
    assert spec["runPolicy"]["suspend"] is True and spec["runPolicy"]["backoffLimit"] == 5
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "OnFailure"  # a worker still pulling: retried
    assert spec["slotsPerWorker"] == 8 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 16
    assert job["metadata"]["namespace"] == "gpu-acceptance"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = worker["containers"]
    assert container["image"].startswith("111122223333.dkr.ecr.us-east-1.amazonaws.com/nccl-tests@sha256:")
    limits = container["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 8 and limits["vpc.amazonaws.com/efa"] == 32
    assert limits["hugepages-2Mi"] == "5120Mi" and container["resources"]["requests"] == limits
    assert limits["memory"] == "256Gi"  # room for the memory-backed /dev/shm (64Gi), which counts against it
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG": "INFO"}
    assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert worker["volumes"][0]["emptyDir"]["medium"] == "Memory"
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    args = launcher["args"]
    assert launcher["command"] == ["mpirun"]
    assert args[args.index("-np") + 1] == "128" and args[args.index("-N") + 1] == "8"  # one rank per GPU
    assert args[-9:] == ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "1"]
    for name in env:
        assert ["-x", name] == args[args.index(name) - 1:args.index(name) + 1]  # passed to every rank


def test_the_nvlink_variant_is_one_node_without_the_fabric() -> None:
    job = jobs(offline_run("prod-aws").graph)["nccl-nvlink-h100"]
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 1
    container = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert "vpc.amazonaws.com/efa" not in container["resources"]["limits"]
    assert {e["name"] for e in container["env"]} == {"NCCL_DEBUG"}


def test_kueue_admits_it_by_its_queues_rules() -> None:
    """Its LocalQueue leads to a ClusterQueue whose quota covers what the job asks for (hugepages are excluded
    from quotas by Kueue's configuration, as for every team's EFA job)."""
    graph = offline_run("prod-aws").graph
    job = jobs(graph)["nccl-allreduce-h100"]
    (lq,) = [q.inputs for q in graph.of_type(KUEUE + "LocalQueue") if q.inputs["metadata"]["namespace"] ==
             "gpu-acceptance"]
    (cq,) = [q.inputs for q in graph.of_type(KUEUE + "ClusterQueue") if q.inputs["metadata"]["name"] ==
             lq["spec"]["clusterQueue"]]
    assert "cohortName" not in cq["spec"] and cluster_queue_cel(cq) == []
    # Kueue unsuspends what it admits: the queue is held, so pulumi up never starts a benchmark.
    assert cq["spec"]["stopPolicy"] == "Hold"
    group = cq["spec"]["resourceGroups"][0]
    quota = {r["name"]: _quantity(r["nominalQuota"]) for r in group["flavors"][0]["resources"]}
    asked: dict[str, float] = {}
    for role in ("Launcher", "Worker"):
        replica = job["spec"]["mpiReplicaSpecs"][role]
        for name, value in replica["template"]["spec"]["containers"][0]["resources"]["requests"].items():
            asked[name] = asked.get(name, 0.0) + replica["replicas"] * _quantity(value)
    excluded = yaml.safe_load(kueue_manager_config())["resources"]["excludeResourcePrefixes"]
    for name, amount in asked.items():
        if any(name.startswith(p) for p in excluded):
            continue
        assert name in group["coveredResources"], name
        assert amount <= quota[name], (name, amount, quota[name])
    assert group["flavors"][0]["name"] == job["metadata"]["labels"]["gpu-cluster/node-group"]


def test_the_operator_is_pinned_and_off_by_default(dev_spec: dict[str, Any]) -> None:
    graph = offline_run("prod-aws").graph
    (operator,) = graph.of_type("kubernetes:yaml/v2:ConfigFile")
    assert operator.inputs["file"] == ("https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.0/deploy/"
                                       "v2beta1/mpi-operator.yaml")
    for job in graph.of_type(MPIJOB):
        assert operator.urn in job.dependencies  # the CRD exists before the jobs
    assert run_spec(dev_spec).graph.of_type(MPIJOB) == []  # opt-in: dev-aws leaves it off
