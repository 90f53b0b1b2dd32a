"""The GPUDirect-TCPXO sidecar without an escape (issue 33): the RxDM container runs an accepted release exactly as
upstream runs it, or gets none of its privileges. The CEL of the graph's ValidatingAdmissionPolicies is evaluated
with cel-python (blueprint/admit/policies.py), on Google's own TCPXO sample (tests/fixtures/gke-tcpxo, with its
SOURCE) and on what a team member could write instead."""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.admit.cluster import ClusterView
from blueprint.admit.policies import evaluate_policies
from blueprint.graph.model import ResourceGraph
from tests.admit.test_admit import admit, team_gid
from tests.conftest import offline_run, raw_stack_config, run_spec

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gke-tcpxo"
POD_LIMITS = "ValidatingAdmissionPolicy/gpu-cluster-gpudirect-pod-limits"
TEAM_GID = "ValidatingAdmissionPolicy/gpu-cluster-team-gid"
RXDM = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev"
MIRROR = "us-central1-docker.pkg.dev/acme-ml-prod/mirror/tcpgpudmarxd-dev@sha256:" + "ab" * 32
NAMESPACE = "research"
Pod = dict[str, Any]


def sample(release: str = "v1.0.21") -> Pod:
    """Google's TCPXO NCCL test pod at an RxDM release, as published, placed in a team namespace."""
    pod: Pod = yaml.safe_load((FIXTURES / f"nccl-test-{release}.yaml").read_text(encoding="utf-8"))
    pod["metadata"]["namespace"] = NAMESPACE
    return pod


def fixed(pod: Pod) -> Pod:
    """The two changes this stack asks of Google's sample: the workload container mounts the host's NVIDIA libraries
    read-only (not the sidecar: it runs as upstream does), and the pod carries the team's group."""
    pod = copy.deepcopy(pod)
    for mount in container(pod, "nccl-test")["volumeMounts"]:
        if mount["name"] == "nvidia":
            mount["readOnly"] = True
    pod["spec"]["securityContext"] = {"supplementalGroups": [team_gid(NAMESPACE)]}
    return pod


def container(pod: Pod, name: str) -> dict[str, Any]:
    return next(c for f in ("containers", "initContainers") for c in pod["spec"].get(f, []) if c["name"] == name)


@cache
def _view(stack: str) -> ClusterView:
    return ClusterView(offline_run(stack).graph)


def denied(pod: Pod, view: ClusterView | None = None) -> list[tuple[str, str]]:
    """(policy, message) of every refusal of the graph's admission policies for the pod."""
    view = view or _view("prod-gcp")
    return evaluate_policies(view, pod, NAMESPACE, view.namespace_labels(NAMESPACE)).denied


def sidecar_refusals(pod: Pod, view: ClusterView | None = None) -> list[str]:
    return [m for p, m in denied(pod, view) if p == POD_LIMITS]


# --- Google's sample ---------------------------------------------------------------------------------------------


def test_googles_sample_at_the_pinned_release_is_admitted() -> None:
    """As published, the only GPUDirect refusal is the workload container's read-write mount of the libraries (the
    sidecar passes as it is); with that mount read-only and the team's group, no policy refuses the pod."""
    assert denied(sample()) == [
        (POD_LIMITS, "containers mount /home/kubernetes/bin/nvidia read-only (readOnly: true): the driver and NCCL "
                     "plugin libraries every pod on the node loads"),
        (TEAM_GID, f"the pod runs outside the team's group {team_gid(NAMESPACE)} (label gpu-cluster/gid of namespace "
                   f"research), which owns the team's directory on the shared filesystem (root:{team_gid(NAMESPACE)}, "
                   f"mode 2770): add {team_gid(NAMESPACE)} to spec.securityContext.supplementalGroups (or make it the "
                   "runAsGroup of every container, or the fsGroup)")]
    assert denied(fixed(sample())) == []


def test_googles_sample_is_admitted_end_to_end(graph_files: Callable[[str], Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, report = admit(graph_files("prod-gcp"), tmp_path, fixed(sample()), capsys=capsys)
    assert code == 0, report


def test_the_sidecar_as_a_native_sidecar_is_the_same_container() -> None:
    """The shipped example runs the RxDM as an init container with restartPolicy Always: the same pins hold there."""
    pod = fixed(sample())
    daemon = container(pod, "tcpxo-daemon")
    pod["spec"]["containers"].remove(daemon)
    pod["spec"]["initContainers"] = [{**daemon, "restartPolicy": "Always"}]
    assert denied(pod) == []
    container(pod, "tcpxo-daemon")["args"] = ["cp /tmp/libnccl-net.so /usr/local/nvidia/lib64/"]
    assert any(m.startswith("initContainers: container tcpxo-daemon runs its release's command and args")
               for m in sidecar_refusals(pod))


# --- what a team member could write instead ----------------------------------------------------------------------

SHELL = "cp /tmp/libnccl-net.so /usr/local/nvidia/lib64/libnccl-net.so; /fts/entrypoint_rxdm_container.sh --num_hops=2"


@pytest.mark.parametrize(("change", "says"), [
    (lambda c: c.update(command=["/bin/sh", "-c", SHELL], args=[]), "runs its release's command and args exactly"),
    (lambda c: c.update(args=[SHELL]), "runs its release's command and args exactly"),
    (lambda c: c.update(command=["/fts/entrypoint_rxdm_container.sh"], args=["--num_hops=2"]),
     "runs its release's command and args exactly"),
    (lambda c: c.pop("command"), "runs its release's command and args exactly"),  # the image's entrypoint
    (lambda c: c["env"].append({"name": "LD_PRELOAD", "value": "/tmp/evil.so"}), "sets exactly its release's env"),
    (lambda c: c.update(env=[{"name": "LD_LIBRARY_PATH", "value": "/tmp:/usr/local/nvidia/lib64"}]),
     "sets exactly its release's env"),
    (lambda c: c.update(envFrom=[{"configMapRef": {"name": "x"}}]), "sets exactly its release's env"),
    (lambda c: c["volumeMounts"].append({"name": "bin", "mountPath": "/host-bin"}),
     "has exactly its release's host mounts"),
    (lambda c: c["volumeMounts"][0].update(mountPath="/usr/local/nvidia/lib64-x"),
     "has exactly its release's host mounts"),
    (lambda c: c["volumeMounts"][1].update(subPath="bus"), "has exactly its release's host mounts"),
    (lambda c: c.update(lifecycle={"postStart": {"exec": {"command": ["/bin/sh", "-c", SHELL]}}}),
     "has no lifecycle hooks and no exec probes"),
    (lambda c: c.update(livenessProbe={"exec": {"command": ["/bin/sh", "-c", SHELL]}}),
     "has no lifecycle hooks and no exec probes"),
    (lambda c: c.update(image=f"{RXDM}:v1.0.17"), "only running an RxDM release this stack accepts"),
    # An emptyDir over the entrypoint's directory (an init container wrote the team's script there), or over /bin
    (lambda c: c["volumeMounts"].append({"name": "scratch", "mountPath": "/fts"}),
     "has exactly its release's host mounts and no other volume"),
    (lambda c: c["volumeMounts"].append({"name": "scratch", "mountPath": "/bin"}),
     "has exactly its release's host mounts and no other volume"),
    (lambda c: c.update(workingDir="/tmp"), "has exactly its release's host mounts and no other volume"),
])
def test_the_rxdm_image_runs_nothing_but_its_release(change: Callable[[dict[str, Any]], None], says: str) -> None:
    pod = fixed(sample())
    change(container(pod, "tcpxo-daemon"))
    pod["spec"]["volumes"].append({"name": "bin", "hostPath": {"path": "/home/kubernetes/bin/nvidia"}})
    pod["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    refusals = sidecar_refusals(pod)
    assert any(m.startswith(f"containers: container tcpxo-daemon {says}") or says in m for m in refusals), refusals


def test_a_shell_in_the_rxdm_image_is_refused_and_says_what_upstream_runs() -> None:
    pod = fixed(sample())
    container(pod, "tcpxo-daemon").update(
        command=["/bin/sh", "-c", "cp /tmp/libnccl-net.so /home/kubernetes/bin/nvidia/lib64/"], args=[])
    (message,) = sidecar_refusals(pod)
    assert message == (
        "containers: container tcpxo-daemon runs its release's command and args exactly as upstream does, nothing "
        'else (v1.0.21: command ["/bin/sh", "-c"] with args ["set -ex\\nchmod 755 /fts/entrypoint_rxdm_container.sh'
        '\\n/fts/entrypoint_rxdm_container.sh --num_hops=2\\n"] or ["set -ex\\nchmod 755 '
        '/fts/entrypoint_rxdm_container.sh\\n/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=8\\n"])')


def test_the_libraries_stay_read_only_for_every_other_container() -> None:
    """The sidecar mounts the libraries as upstream does (read-write); a second container named otherwise, running
    the RxDM image with its exact command, is just another container: read-only, no NET_ADMIN, no /sys."""
    pod = fixed(sample())
    twin = copy.deepcopy(container(pod, "tcpxo-daemon"))
    twin["name"] = "rxdm-twin"
    pod["spec"]["containers"].append(twin)
    refusals = sidecar_refusals(pod)
    assert any(m.startswith("containers: only the GPUDirect sidecar (container tcpxo-daemon") for m in refusals)
    assert any(m.startswith("containers mount /home/kubernetes/bin/nvidia read-only") for m in refusals)
    assert any("NET_ADMIN only in the GPUDirect sidecar" in m for m in refusals)


def test_no_other_container_shares_the_sidecars_processes() -> None:
    pod = fixed(sample())
    pod["spec"]["shareProcessNamespace"] = True
    assert sidecar_refusals(pod) == [
        "a pod with the GPUDirect sidecar (tcpxo-daemon) does not share its process namespace: the other containers "
        "would reach the sidecar's host mounts through /proc/<pid>/root"]


def test_a_container_only_named_like_the_sidecar_is_a_baseline_container() -> None:
    """The name alone grants nothing: a tcpxo-daemon with no host mount and no extra capability is left alone."""
    pod = fixed(sample())
    container(pod, "tcpxo-daemon").update(image="nvcr.io/nvidia/pytorch:25.01-py3", command=["sleep", "1"],
                                          volumeMounts=[], securityContext={})
    assert sidecar_refusals(pod) == []


# --- the releases the stack accepts ------------------------------------------------------------------------------


def test_the_sample_at_an_unlisted_release_is_refused_naming_the_accepted_ones() -> None:
    assert sidecar_refusals(fixed(sample("v1.0.20"))) == [
        "containers: container tcpxo-daemon mounts host paths or adds capabilities only running an RxDM release "
        f"this stack accepts: v1.0.21 ({RXDM}:v1.0.21) (gcp.rxdm in the stack; each release's container from "
        "components/catalog/gke_manifests.yaml, rxdm)"]


@cache
def _listing_view() -> ClusterView:
    """prod-gcp listing v1.0.20 beside v1.0.21 (an installer upgrade under way) and a mirror of v1.0.21 by digest."""
    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["rxdm"] = {"releases": ["v1.0.21", "v1.0.20"], "images": [{"release": "v1.0.21", "image": MIRROR}]}
    graph: ResourceGraph = run_spec(spec, "prod-gcp").graph
    return ClusterView(graph)


def test_a_release_the_stack_lists_is_admitted_as_upstream_runs_it() -> None:
    view = _listing_view()
    assert sidecar_refusals(fixed(sample("v1.0.20")), view) == []
    assert sidecar_refusals(fixed(sample("v1.0.21")), view) == []
    # Each release with its own arguments: v1.0.20 was published with --num_nics=8 only.
    pod = fixed(sample("v1.0.20"))
    container(pod, "tcpxo-daemon")["args"] = container(sample("v1.0.21"), "tcpxo-daemon")["args"]
    assert any("runs its release's command and args exactly" in m for m in sidecar_refusals(pod, view))


def test_a_mirror_the_stack_names_runs_its_release_exactly() -> None:
    pod = fixed(sample())
    container(pod, "tcpxo-daemon")["image"] = MIRROR
    assert sidecar_refusals(pod, _listing_view()) == []
    assert any("only running an RxDM release this stack accepts" in m for m in sidecar_refusals(pod))  # not named
    container(pod, "tcpxo-daemon")["args"] = [SHELL]
    assert any("runs its release's command and args exactly" in m for m in sidecar_refusals(pod, _listing_view()))


# --- exec into the sidecar ---------------------------------------------------------------------------------------


def _exec_policy() -> tuple[dict[str, Any], dict[str, Any]]:
    graph = offline_run("prod-gcp").graph
    (policy,) = [r.inputs for r in graph.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
                 if r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-sidecar-exec"]
    (binding,) = [r.inputs for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if r.inputs["metadata"]["name"] == "gpu-cluster-gpudirect-sidecar-exec"]
    return policy, binding


def test_kubectl_exec_into_the_sidecar_is_refused() -> None:
    """Team members may exec into their pods (the team Role grants pods/exec): not into the sidecar, whose shell has
    the host mounts. The policy judges the CONNECT of pods/exec and pods/attach, whose object names the container."""
    import celpy

    policy, binding = _exec_policy()
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CONNECT"],
         "resources": ["pods/exec", "pods/attach"]}]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "gpu-cluster/pod-security-reason": "gpudirect-sidecars"}
    env = celpy.Environment()
    (validation,) = policy["spec"]["validations"]
    program = env.program(env.compile(validation["expression"]))

    def allowed(options: dict[str, Any]) -> bool:
        return bool(program.evaluate({"object": celpy.json_to_cel({"kind": "PodExecOptions", **options})}))

    assert allowed({"container": "nccl-test", "command": ["bash"], "stdin": True, "tty": True})
    assert not allowed({"container": "tcpxo-daemon", "command": ["/bin/sh"], "stdin": True, "tty": True})
    assert not allowed({"command": ["/bin/sh"]})  # no container: the API server would pick the pod's only one


# --- the catalog -------------------------------------------------------------------------------------------------


def test_every_accepted_release_says_where_its_container_comes_from() -> None:
    from components.catalog.gcp_machines import coupled_rxdm_releases, rxdm_image, rxdm_releases

    releases = rxdm_releases("TCPXO")
    assert [r.tag for r in releases] == ["v1.0.21", "v1.0.20"]
    assert coupled_rxdm_releases("TCPXO") == ("v1.0.21",) and releases[0].image == rxdm_image("TCPXO")
    for r in releases:
        assert r.image.endswith(f":{r.tag}") and r.tag in r.source and r.plugin in r.source
        assert len(r.args) == len(r.args_sources) and all("container-engine-accelerators @" in s and ".yaml" in s
                                                          for s in r.args_sources)
    # The fixture's sidecar is one of the catalog's forms, read independently of it.
    daemon = container(sample(), "tcpxo-daemon")
    assert tuple(daemon["args"]) in releases[0].args and tuple(daemon["command"]) == releases[0].command


# --- the sidecar left out (issue 36) -----------------------------------------------------------------------------


def test_gpu_networks_without_the_rxdm_sidecar_are_named(graph_files: Callable[[str], Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Google's sample with its tcpxo-daemon container removed: the pod still attaches the eight GPU networks, and
    without the receive-datapath manager the NCCL plugin has no GPUDirect path. Said, not admitted silently."""
    pod = fixed(sample())
    pod["spec"]["containers"].remove(container(pod, "tcpxo-daemon"))
    del pod["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"]
    code, report = admit(graph_files("prod-gcp"), tmp_path, pod, capsys=capsys)
    (reason,) = report["workloads"][0]["reasons"]
    assert code == 1 and reason == {
        "object": "Pod/main", "rule": "gpudirect-sidecar",
        "message": "pod set main attaches the GPU networks vpc1, vpc2, vpc3, vpc4, vpc5, vpc6, vpc7, vpc8 of h100 "
                   "(GPUDirect-TCPXO) but runs no RxDM sidecar (no container of the tcpgpudmarxd image): the NCCL "
                   "plugin moves data through it, so the job gets no GPUDirect path; add the tcpxo-daemon container "
                   "as the stack's examples and Google's NCCL test pods run it, or drop the networks annotation to run "
                   "without the fabric"}
    del pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
    code, report = admit(graph_files("prod-gcp"), tmp_path, pod, capsys=capsys)
    assert code == 0, report  # no GPU networks: no sidecar needed (and no fabric)
