"""GKE on par with EKS (issue 23): GPUDirect pods bounded container by container, the GKE-managed GPU stack, team
access, Lustre, upgrades that spare running jobs. Each test fails when the feature it names is removed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, offline_run
from tests.program.test_job_path import _cel

Pod = dict[str, Any]


def _gpudirect_policy() -> dict[str, Any]:
    graph = offline_run("prod-gcp").graph
    return next(r.inputs for r in graph.resources if r.type.endswith(":ValidatingAdmissionPolicy")
                and r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-pod-limits")


def _example_pod() -> Pod:
    """The pod of the shipped TCPXO training example (RxDM sidecar and trainer)."""
    doc = yaml.safe_load((ROOT / "examples" / "workloads" / "prod-gcp" / "train-multinode.yaml").read_text())
    template = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return {"metadata": template.get("metadata", {}), "spec": template["spec"]}


def _container(pod: Pod, name: str) -> dict[str, Any]:
    return next(c for f in ("containers", "initContainers") for c in pod["spec"].get(f, []) if c["name"] == name)


def test_the_tcpxo_example_with_its_sidecar_is_admitted() -> None:
    assert _cel(_gpudirect_policy(), _example_pod(), "pretraining") == []


def test_a_team_container_asking_for_the_sidecars_privileges_is_refused() -> None:
    policy = _gpudirect_policy()
    pod = _example_pod()
    trainer = _container(pod, "trainer")
    trainer.setdefault("securityContext", {})["capabilities"] = {"add": ["NET_ADMIN"]}
    assert any("NET_ADMIN only in the GPUDirect sidecar" in m for m in _cel(policy, pod, "x"))
    pod = _example_pod()
    _container(pod, "trainer")["volumeMounts"].append({"name": "proc-sys", "mountPath": "/host-proc-sys"})
    assert any(m.startswith("containers: only the GPUDirect sidecar (container tcpxo-daemon, running an accepted ")
               for m in _cel(policy, pod, "x"))


def test_the_sidecar_privileges_need_the_pinned_image() -> None:
    policy = _gpudirect_policy()
    pod = _example_pod()
    _container(pod, "tcpxo-daemon")["image"] = "nvcr.io/nvidia/pytorch:25.01-py3"  # the name alone is not enough
    messages = _cel(policy, pod, "x")
    assert messages == [
        "initContainers: container tcpxo-daemon mounts host paths or adds capabilities only running an RxDM release "
        "this stack accepts: v1.0.21 (us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21) "
        "(gcp.rxdm in the stack; each release's container from components/catalog/gke_manifests.yaml, rxdm)"]


@pytest.mark.parametrize(("change", "says"), [
    (lambda p: _container(p, "trainer")["volumeMounts"][1].pop("readOnly"),
     "containers mount /home/kubernetes/bin/nvidia read-only (readOnly: true)"),
    (lambda p: _container(p, "trainer").setdefault("ports", []).append({"containerPort": 80, "hostPort": 80}),
     "containers use no host ports"),
    (lambda p: p["spec"].setdefault("securityContext", {}).update(
        {"sysctls": [{"name": "kernel.core_pattern", "value": "|/x"}]}), "sets only the sysctls baseline allows"),
    (lambda p: _container(p, "trainer").setdefault("securityContext", {}).update(
        {"seccompProfile": {"type": "Unconfined"}}), "containers keep seccomp, AppArmor and SELinux confined"),
    (lambda p: p["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}}),
     "team pods mount only the GPUDirect host paths"),
    (lambda p: p["spec"].update(hostNetwork=True), "team pods do not use the node's Network namespace"),
])
def test_what_pod_security_baseline_refuses_stays_refused(change: Any, says: str) -> None:
    pod = _example_pod()
    change(pod)
    messages = _cel(_gpudirect_policy(), pod, "x")
    assert any(says in m for m in messages), messages


def test_only_gpudirect_namespaces_are_bound_and_they_stay_privileged() -> None:
    graph = offline_run("prod-gcp").graph
    (binding,) = [r.inputs for r in graph.resources if r.type.endswith(":ValidatingAdmissionPolicyBinding")
                  and r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-pod-limits"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "gpu-cluster/pod-security-reason": "gpudirect-sidecars"}
    assert not [r for r in offline_run("dev-gcp").graph.resources
                if r.type.endswith(":ValidatingAdmissionPolicy")
                and r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-pod-limits"]


def test_the_example_keeps_what_the_policy_requires() -> None:
    """The shipped example's trainer reads the libraries read-only and adds no capability."""
    trainer = _container(copy.deepcopy(_example_pod()), "trainer")
    nvidia = next(m for m in trainer["volumeMounts"] if m["name"] == "nvidia")
    assert nvidia["readOnly"] is True and "capabilities" not in trainer.get("securityContext", {})


def test_the_gpu_operator_stays_an_explicit_option_with_its_known_issues_named() -> None:
    """gpuDriver: operator puts the GPU Operator back (GKE's device plugin off on its pools) and the preview names
    the operator's containerd problems on GKE 1.33+."""
    from components.spec import parse_spec
    from tests.conftest import raw_stack_config, run_spec

    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    for pool in spec["gcp"]["nodePools"]:
        if pool["name"] in ("h100", "l4"):  # every GPU pool: one owner of the drivers
            pool["gpuDriver"] = "operator"
    # Ubuntu nodes cannot mount Managed Lustre (rule lustre-cos-only): the operator variant shares Filestore.
    spec["gcp"]["storage"]["filesystem"] = {"type": "filestore", "capacityGiB": 10240, "filestoreTier": "ZONAL",
                                            "mountPath": "/checkpoints"}
    run = run_spec(spec, "prod-gcp")
    releases = {r.inputs["name"] for r in run.graph.of_type("kubernetes:helm.sh/v3:Release")}
    assert "gpu-operator" in releases
    # No scrape of GKE's DCGM (the served model's engine is still scraped in its team's namespace).
    assert not [r for r in run.graph.resources if r.type.endswith(":PodMonitor")
                and r.inputs["metadata"]["namespace"] == "monitoring"]
    (h100,) = [r for r in run.graph.of_type("gcp:container/nodePool:NodePool") if r.inputs["name"] == "h100"]
    assert h100.inputs["nodeConfig"]["labels"]["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    from components.gcp.summary import summarize

    parsed = parse_spec(spec, "stacks/Pulumi.prod-gcp.yaml")
    import datetime

    notes = summarize(run.graph, parsed, {}, datetime.datetime.now(datetime.UTC)).notes
    assert any("nvidia-container-toolkit #1222" in n and "#1577" in n for n in notes)


def test_gke_time_shares_gpus_with_its_own_device_plugin() -> None:
    """dev-gcp's time-slicing x4 is GKE's gpu_sharing_config on the GPU pool (no operator to configure)."""
    graph = offline_run("dev-gcp").graph
    gpu_pools = [r for r in graph.of_type("gcp:container/nodePool:NodePool")
                 if r.inputs["nodeConfig"].get("guestAccelerators")]
    assert gpu_pools
    for pool in gpu_pools:
        (accelerator,) = pool.inputs["nodeConfig"]["guestAccelerators"]
        assert accelerator["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 4}


def test_every_team_group_reaches_the_cluster_and_nodes_use_gkes_node_role() -> None:
    from tests.conftest import stack

    graph = offline_run("prod-gcp").graph
    members = {(r.inputs["role"], r.inputs["member"]) for r in graph.of_type("gcp:projects/iAMMember:IAMMember")}
    for team in stack("prod-gcp").spec.teams:
        assert ("roles/container.clusterViewer", f"group:{team.group}") in members, team.name
    node_roles = {role for role, member in members if member.startswith("serviceAccount:") and "-nodes@" in member}
    assert node_roles == {"roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader"}


def test_reserved_gpu_pools_are_not_upgraded_under_a_running_job() -> None:
    graph = offline_run("prod-gcp").graph
    pools = {r.inputs["name"]: r.inputs for r in graph.of_type("gcp:container/nodePool:NodePool")}
    h100 = pools["h100"]
    assert h100["maintenancePolicies"] == [{"exclusionUntilEndOfSupports": [{"enabled": True}]}]
    assert h100["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    assert "maintenancePolicies" not in pools["system"]  # the system pool follows the channel
    # GKE sets the exclusion only at creation (no maintenance policy in UpdateNodePoolRequest): a change to it must
    # never plan a replacement of 16 reserved nodes
    (pool,) = [r for r in graph.of_type("gcp:container/nodePool:NodePool") if r.inputs["name"] == "h100"]
    assert "maintenancePolicies" in pool.ignore_changes


def test_lustre_stays_on_eth0_and_its_missing_cmek_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    graph = offline_run("prod-gcp").graph
    (cluster,) = graph.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True, "disableMultiNic": True}
    assert main(["preview", "prod-gcp"]) == 0
    out = capsys.readouterr().out
    assert "Managed Lustre documents that CMEK-protected instances cannot be used from GKE" in out
    assert "VPC Service Controls perimeter restricting container.googleapis.com" in out
