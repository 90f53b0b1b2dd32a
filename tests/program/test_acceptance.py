"""The NCCL acceptance gate in the program (issue 14): MPIJobs valid against the MPIJob CRD, admitted by their
queue's rules, suspended until run, with every GPU and EFA device of each node; and (issue 27) the per-node run, an
indexed Job with one pod on every node of a group, each uploading its record to the bucket through an identity that
may write only there."""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any

import yaml

from components.kubernetes.objects import kueue_manager_config
from tests.conftest import offline_run, raw_stack_config, run_spec
from tests.k8s_checks import cluster_queue_cel, validate_builtin, validate_crd_object

MPIJOB = "kubernetes:kubeflow.org/v2beta1:MPIJob"
JOB = "kubernetes:batch/v1:Job"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def jobs(graph: Any) -> dict[str, dict[str, Any]]:
    return {j.inputs["metadata"]["name"]: j.inputs for j in graph.of_type(MPIJOB)}


def _quantity(text: Any) -> float:
    s = str(text)
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20)):
        if s.endswith(suffix):
            return float(s[:-len(suffix)]) * factor
    return float(s)


def node_jobs(graph: Any) -> dict[str, dict[str, Any]]:
    return {j.inputs["metadata"]["name"]: j.inputs for j in graph.of_type(JOB)
            if j.inputs["metadata"].get("namespace") == "gpu-acceptance"
            and j.inputs["metadata"]["labels"].get("gpu-cluster/acceptance") == "nodes"}


def test_the_mpijobs_are_valid_against_the_crd() -> None:
    found = jobs(offline_run("prod-aws").graph)
    assert sorted(found) == ["nccl-allreduce-h100"]
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
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert env == {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "NCCL_DEBUG": "INFO"}
    # the worker names its node for the launcher's pair and group records
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in container["env"]
    assert container["command"][2] == 'echo "$NODE_NAME" > /tmp/node-name; exec /usr/sbin/sshd -De'
    assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert worker["volumes"][0]["emptyDir"]["medium"] == "Memory"
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    script = launcher["command"][2]
    bench = "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 16G -f 2 -g 1"
    # the pairs (two nodes, every GPU of each over EFA), both rounds, then every node; one rank per GPU
    assert script.count(f'-np 16 -N 8 -H "$a:8,$b:8" {bench}') == 1
    assert "pair 1 0 1 &" in script and "pair 2 15 0 &" in script
    assert f"-np $((N * 8)) -N 8 {bench} > $R/multinode/nccl.log" in script
    for name in env:
        assert f"-x {name} " in script  # passed to every rank


def test_the_per_node_run_puts_one_pod_on_every_node_and_waits_to_be_run() -> None:
    """An indexed Job of 16 pods, each on its own node (required anti-affinity and a hard spread by host), all_reduce
    over the node's 8 GPUs in one process without the fabric, suspended until its held queue admits it."""
    graph = offline_run("prod-aws").graph
    (job,) = node_jobs(graph).values()
    validate_builtin(job, "1.35")
    spec = job["spec"]
    assert job["metadata"]["name"] == "nccl-nodes-h100" and spec["suspend"] is True
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 16
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    pod = spec["template"]
    selector = {"matchLabels": pod["metadata"]["labels"]}
    (anti,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    (spread,) = pod["spec"]["topologySpreadConstraints"]
    assert spread["whenUnsatisfiable"] == "DoNotSchedule" and spread["labelSelector"] == selector
    (bench,) = pod["spec"]["initContainers"]
    limits = bench["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 8 and "vpc.amazonaws.com/efa" not in limits and "hugepages-2Mi" not in limits
    script = bench["command"][2]
    assert "timeout 1200 /opt/nccl-tests/build/all_reduce_perf -b 8 -e 16G -f 2 -g 8 > /records/nccl.log" in script
    assert '"driver": "%s", "cuda": "%s", "exit_status": %s' in script  # the node's versions in its record
    # Suspended behind a held queue: Pulumi must not wait for it to complete; a bad or missing node ends the run
    # (one attempt per index, a deadline) instead of rerunning its index on a node that passed.
    assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    assert spec["backoffLimitPerIndex"] == 0 and spec["activeDeadlineSeconds"] == 3600 and "backoffLimit" not in spec


def test_each_node_uploads_its_record_under_acceptance_through_its_own_identity() -> None:
    """The uploader writes <bucket>/acceptance/<group>/<run>/<node>/ as nccl-recorder, whose role may only PutObject
    there (and encrypt through S3); the jobs wait for its Pod Identity association; the records expire."""
    graph = offline_run("prod-aws").graph
    (job,) = node_jobs(graph).values()
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "nccl-recorder"
    (uploader,) = pod["containers"]
    assert uploader["image"].startswith("public.ecr.aws/aws-cli/aws-cli:") and "@sha256:" in uploader["image"]
    assert uploader["command"][2].endswith(
        'aws s3 cp --recursive --only-show-errors /records/ "s3://$RECORDS_BUCKET/acceptance/$NODE_GROUP/$RUN/'
        '$NODE_NAME/"')
    env = {e["name"]: e for e in uploader["env"]}
    assert env["RUN"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['gpu-cluster/acceptance-run']"
    (account,) = [r.inputs for r in graph.of_type("kubernetes:core/v1:ServiceAccount")
                  if r.inputs["metadata"]["name"] == "nccl-recorder"]
    assert account["metadata"]["namespace"] == "gpu-acceptance"
    (role,) = [r for r in graph.of_type("aws:iam/role:Role") if r.inputs["name"] == "prod-train-nccl-recorder"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert trust["aws:RequestTag/kubernetes-namespace"] == "gpu-acceptance"
    assert trust["aws:RequestTag/kubernetes-service-account"] == "nccl-recorder"
    (policy,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy")
                 if r.name.endswith("acceptance-recorder-policy")]
    statements = json.loads(policy.inputs["policy"])["Statement"]
    assert statements[0]["Action"] == ["s3:PutObject"] and statements[0]["Resource"].endswith("/acceptance/*")
    assert statements[1]["Action"] == ["kms:GenerateDataKey"]
    assert len(statements) == 2  # no read, list or delete, no other prefix
    (association,) = [r for r in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if r.inputs["serviceAccount"] == "nccl-recorder"]
    (job_resource,) = [r for r in graph.of_type(JOB) if r.inputs["metadata"]["name"] == "nccl-nodes-h100"]
    assert association.urn in job_resource.dependencies
    (lifecycle,) = [r.inputs for r in graph.of_type(
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
        if r.name == "storage-checkpoints-lifecycle"]
    (records,) = [r for r in lifecycle["rules"] if r["id"] == "expire-acceptance-records"]
    assert records["filter"] == {"prefix": "acceptance/"} and records["expiration"]["days"] == 730


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
    (operator,) = [r for r in graph.of_type("kubernetes:yaml/v2:ConfigFile") if "mpi-operator" in r.name]
    assert operator.inputs["file"] == ("https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.0/deploy/"
                                       "v2beta1/mpi-operator.yaml")
    for job in graph.of_type(MPIJOB):
        assert operator.urn in job.dependencies  # the CRD exists before the jobs
    assert run_spec(dev_spec).graph.of_type(MPIJOB) == []  # opt-in: dev-aws leaves it off


# --- GKE (issue 23): the same gate over GPUDirect-TCPXO and -RDMA -------------------------------------------------


def _gke_worker(job: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    return template


def _launcher_args(job: dict[str, Any]) -> list[str]:
    """The group run's mpirun command line in the launcher's script (the pairs use the same options)."""
    script: str = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][2]
    (line,) = [x for x in script.splitlines() if x.startswith("timeout") and "multinode/nccl.log" in x]
    return shlex.split(line.split(" > ")[0])


def _gke_rank_command(job: dict[str, Any]) -> list[str]:
    args = _launcher_args(job)
    return args[args.index("bash"):]


def test_prod_gcp_holds_a_tcpxo_allreduce_job_valid_against_its_crd() -> None:
    """The TCPXO job: the pod's eight GPU networks named as the stack's Network objects, the pinned RxDM sidecar with
    the GPU devices the NRI injector gives it, and each rank sourcing the node's NCCL plugin profile."""
    graph = offline_run("prod-gcp").graph
    found = jobs(graph)
    assert sorted(found) == ["nccl-allreduce-h100"]
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
    args = _launcher_args(job)
    forwarded = args.index("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY")
    assert args[forwarded - 1] == "-x"  # every rank gets it
    assert args[args.index("btl_tcp_if_include") + 1] == "eth0"  # MPI's own traffic stays off the GPU NICs


def test_the_gke_acceptance_pods_pass_the_gpudirect_admission_policy_and_a_greedy_one_does_not() -> None:
    """The acceptance namespace is at Pod Security privileged for the sidecar, so the per-container policy binds it:
    its worker is admitted, and the benchmark container asking for the sidecar's privileges is refused."""
    from tests.program.test_job_path import _cel

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
    templates = [_gke_worker(job) for job in jobs(graph).values()]
    templates += [job["spec"]["template"] for job in node_jobs(graph).values()]
    assert len(templates) == 2
    for template in templates:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}
        assert _cel(policy, pod, "gpu-acceptance") == []
    greedy = copy.deepcopy(pod)
    greedy["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["NET_ADMIN"]}}
    greedy["spec"]["containers"][0]["volumeMounts"].append({"name": "sys", "mountPath": "/host-sys"})
    refused = _cel(policy, greedy, "gpu-acceptance")
    assert any("only the GPUDirect sidecar" in m for m in refused), refused
    assert any("NET_ADMIN only in the GPUDirect sidecar" in m for m in refused), refused


def test_an_a3_ultra_pool_gets_the_rdma_job() -> None:
    """A3 Ultra: no sidecar; eth1 on the second gVNIC, eth2..eth9 on rdma-0..rdma-7; the gIB profile in each rank;
    the driver and gIB directories read-only."""
    spec = dict(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"] = copy.deepcopy(spec["gcp"])
    spec["gcp"]["nodePools"][1].update(machineType="a3-ultragpu-8g", capacity={"type": "spot"}, placement="auto",
                                       diskType="hyperdisk-balanced")
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


def test_the_gke_per_node_run_keeps_the_tcpxo_shape_and_writes_through_a_managed_folder() -> None:
    """On A3 Mega each per-node pod has the RxDM sidecar before the benchmark, sources the plugin profile, and
    uploads with gcloud as nccl-recorder, which may only create objects in the bucket's acceptance/ managed folder;
    the records expire by a lifecycle rule on that prefix."""
    graph = offline_run("prod-gcp").graph
    (job,) = node_jobs(graph).values()
    validate_builtin(job, "1.35")
    pod = job["spec"]["template"]["spec"]
    sidecar, bench = pod["initContainers"]
    assert sidecar["name"] == "tcpxo-daemon" and sidecar["restartPolicy"] == "Always"
    assert "source /usr/local/nvidia/lib64/nccl-env-profile.sh" in bench["command"][2]
    (uploader,) = pod["containers"]
    assert uploader["image"].startswith("gcr.io/google.com/cloudsdktool/google-cloud-cli:")
    assert '"gs://$RECORDS_BUCKET/acceptance/$NODE_GROUP/$RUN/$NODE_NAME/"' in uploader["command"][2]
    (folder,) = [r.inputs for r in graph.of_type("gcp:storage/managedFolder:ManagedFolder")
                 if r.inputs["name"] == "acceptance/"]
    (grant,) = [r.inputs for r in graph.of_type("gcp:storage/managedFolderIamMember:ManagedFolderIamMember")
                if str(r.inputs["member"]).endswith("/ns/gpu-acceptance/sa/nccl-recorder")]
    assert grant["role"] == "roles/storage.objectCreator" and grant["managedFolder"] == folder["name"]
    (bucket,) = [r.inputs for r in graph.of_type("gcp:storage/bucket:Bucket") if r.name == "storage-checkpoints"]
    (rule,) = [r for r in bucket["lifecycleRules"] if r["condition"].get("matchesPrefixes") == ["acceptance/"]]
    assert rule["action"]["type"] == "Delete" and rule["condition"]["age"] == 730
