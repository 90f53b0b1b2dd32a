"""The NCCL acceptance gate in the program (issue 14): MPIJobs valid against the MPIJob CRD, admitted by their
queue's rules, suspended until run, with every GPU and EFA device of each node."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from components.kubernetes.objects import kueue_manager_config
from tests.conftest import offline_run, raw_stack_config, run_spec
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
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"  # no ssh to a worker still starting
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


# --- GKE (issue 23): the same gate over GPUDirect-TCPXO and -RDMA -------------------------------------------------


def _gke_worker(job: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    return template


def _gke_rank_command(job: dict[str, Any]) -> list[str]:
    args: list[str] = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    return args[args.index("bash"):]


def test_prod_gcp_holds_a_tcpxo_allreduce_job_valid_against_its_crd() -> None:
    """The TCPXO job: the pod's eight GPU networks named as the stack's Network objects, the pinned RxDM sidecar with
    the GPU devices the NRI injector gives it, and each rank sourcing the node's NCCL plugin profile."""
    graph = offline_run("prod-gcp").graph
    found = jobs(graph)
    assert sorted(found) == ["nccl-allreduce-h100", "nccl-nvlink-h100"]
    for job in found.values():
        validate_crd_object(job)
        assert job["spec"]["runPolicy"]["suspend"] is True
    job = found["nccl-allreduce-h100"]
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 16
    template = _gke_worker(job)
    notes = template["metadata"]["annotations"]
    networks = sorted(r.inputs["metadata"]["name"] for r in graph.of_type("kubernetes:networking.gke.io/v1:Network"))
    attached = yaml.safe_load(notes["networking.gke.io/interfaces"])
    assert attached[0] == {"interfaceName": "eth0", "network": "default"}
    assert [a["network"] for a in attached[1:]] == [f"vpc{i}" for i in range(1, 9)] and sorted(
        a["network"] for a in attached[1:]) == networks
    devices = [d["path"] for d in yaml.safe_load(notes["devices.gke.io/container.tcpxo-daemon"])]
    assert devices[:8] == [f"/dev/nvidia{i}" for i in range(8)] and "/dev/dmabuf_import_helper" in devices
    assert notes["kueue.x-k8s.io/podset-preferred-topology"] == "cloud.google.com/gce-topology-block"
    spec = template["spec"]
    (sidecar,) = spec["initContainers"]
    assert sidecar["name"] == "tcpxo-daemon" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
    (worker,) = spec["containers"]
    limits = worker["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 8 and "hugepages-2Mi" not in limits  # GKE nodes offer no hugepages
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    assert mounts["/usr/local/nvidia/lib64"]["readOnly"] is True and "/dev/aperture_devices" in mounts
    rank = _gke_rank_command(job)
    assert "source /usr/local/nvidia/lib64/nccl-env-profile.sh" in rank[2]
    assert rank[3:5] == ["/opt/nccl-tests/build/all_reduce_perf", "-b"]
    args = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    forwarded = args.index("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY")
    assert args[forwarded - 1] == "-x"  # every rank gets it
    assert args[args.index("btl_tcp_if_include") + 1] == "eth0"  # MPI's own traffic stays off the GPU NICs


def test_the_gke_acceptance_pods_pass_the_gpudirect_admission_policy_and_a_greedy_one_does_not() -> None:
    """The acceptance namespace is at Pod Security privileged for the sidecar, so the per-container policy binds it:
    its worker is admitted, and the benchmark container asking for the sidecar's privileges is refused."""
    from tests.test_job_path import _cel

    graph = offline_run("prod-gcp").graph
    (ns,) = [r.inputs for r in graph.of_type("kubernetes:core/v1:Namespace")
             if r.inputs["metadata"]["name"] == "gpu-acceptance"]
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    bindings = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")}
    selector = bindings["gpu-cluster-gpudirect-pod-limits"]["matchResources"]["namespaceSelector"]["matchLabels"]
    assert all(labels.get(k) == v for k, v in selector.items())
    (policy,) = [r.inputs for r in graph.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
                 if r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-pod-limits"]
    for job in jobs(graph).values():
        template = _gke_worker(job)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}
        assert _cel(policy, pod, "gpu-acceptance") == []
    greedy = copy.deepcopy(pod)
    greedy["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["NET_ADMIN"]}}
    greedy["spec"]["containers"][0]["volumeMounts"].append({"name": "sys", "mountPath": "/host-sys"})
    refused = _cel(policy, greedy, "gpu-acceptance")
    assert any("only the GPUDirect sidecar" in m for m in refused), refused
    assert any("NET_ADMIN, NET_BIND_SERVICE only in the GPUDirect sidecar" in m for m in refused), refused


def test_an_a3_ultra_pool_gets_the_rdma_job() -> None:
    """A3 Ultra: no sidecar; eth1 on the second gVNIC, eth2..eth9 on rdma-0..rdma-7; the gIB profile in each rank;
    the driver and gIB directories read-only."""
    spec = dict(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"] = copy.deepcopy(spec["gcp"])
    spec["gcp"]["nodePools"][1].update(machineType="a3-ultragpu-8g", capacity={"type": "spot"}, placement="auto")
    job = jobs(run_spec(spec, "prod-gcp").graph)["nccl-allreduce-h100"]
    validate_crd_object(job)
    template = _gke_worker(job)
    attached = yaml.safe_load(template["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert [(a["interfaceName"], a["network"]) for a in attached[1:3]] == [("eth1", "gvnic-1"), ("eth2", "rdma-0")]
    assert attached[-1] == {"interfaceName": "eth9", "network": "rdma-7"}
    assert "initContainers" not in template["spec"]
    assert "devices.gke.io/container.tcpxo-daemon" not in template["metadata"]["annotations"]
    mounts = {m["mountPath"]: m for m in template["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["/usr/local/gib"]["readOnly"] is True and mounts["/usr/local/nvidia"]["readOnly"] is True
    assert "source /usr/local/gib/scripts/set_nccl_env.sh" in _gke_rank_command(job)[2]


def test_a_gke_stack_without_acceptance_has_no_jobs_and_tests_dir_is_honoured() -> None:
    spec = dict(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["acceptance"] = {"enabled": False}
    assert run_spec(spec, "prod-gcp").graph.of_type(MPIJOB) == []
    spec["acceptance"] = {**raw_stack_config("prod-gcp")["gpu-cluster:spec"]["acceptance"],
                          "testsDir": "/third_party/nccl-tests/build"}
    job = jobs(run_spec(spec, "prod-gcp").graph)["nccl-allreduce-h100"]
    assert _gke_rank_command(job)[3] == "/third_party/nccl-tests/build/all_reduce_perf"
