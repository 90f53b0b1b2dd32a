"""An existing Managed Lustre instance the stack mounts without creating it (gcp.storage.filesystem.existing): GKE's
Managed Lustre CSI driver stays on, the teams' volumes name the instance as the driver reads a volume handle
(PROJECT_ID/LOCATION/INSTANCE_NAME, volumeAttributes ip and filesystem: GoogleCloudPlatform/lustre-csi-driver v0.6.11
docs/preprov-guide.md, examples/pre-prov/preprov-pvc-pv.yaml and pkg/util/util.go ParseVolumeID, read 2026-12-02), no
instance is registered, priced or protected, and a stack that switches from its own instance to an existing one is
stopped by protection in prod and by the pull-request check everywhere, never deleting the instance silently."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.changes.replacements import replacements
from blueprint.cli import main
from blueprint.cost.engine import price_graph
from blueprint.report.diagram import build_diagram
from components.spec import SpecError, parse_spec
from tests.conftest import ROOT, offline_run, raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-gcp.yaml"
P = f"{FILE}: gpu-cluster:spec"
LUSTRE = "gcp:lustre/instance:Instance"
PV = "kubernetes:core/v1:PersistentVolume"
EXISTING = {"name": "shared-lustre", "location": "us-central1-a", "ip": "10.90.0.4", "filesystem": "ckpt"}


@pytest.fixture
def spec() -> dict[str, Any]:
    value = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    value["gcp"]["storage"]["filesystem"]["existing"] = dict(EXISTING)
    return value


def errors(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-central1")
    return str(info.value).splitlines()


def lustre_volumes(graph: Any) -> list[dict[str, Any]]:
    return [r.inputs["spec"] for r in graph.of_type(PV)
            if (r.inputs["spec"].get("csi") or {}).get("driver") == "lustre.csi.storage.gke.io"]


def test_the_existing_instance_is_mounted_and_nothing_is_created(spec: dict[str, Any]) -> None:
    run = run_spec(spec, "prod-gcp")
    graph = run.graph
    assert graph.of_type(LUSTRE) == []
    (cluster,) = graph.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True, "disableMultiNic": True}
    volumes = lustre_volumes(graph)
    assert len(volumes) == 5  # the three teams', the admin's and the storage check's
    for volume in volumes:
        assert volume["csi"]["volumeHandle"] == "acme-ml-prod/us-central1-a/shared-lustre"
        assert volume["csi"]["volumeAttributes"] == {"ip": "10.90.0.4", "filesystem": "ckpt"}
        assert volume["capacity"] == {"storage": "18000Gi"}
        assert volume["persistentVolumeReclaimPolicy"] == "Retain"
    assert run.outputs["filesystemDnsName"] == "10.90.0.4@tcp:/ckpt"
    assert run.outputs["filesystemMountName"] == "ckpt"
    # the peering the instance is reached over and the LNet firewall rule stay
    assert graph.of_type("gcp:servicenetworking/connection:Connection")
    (rule,) = [r for r in graph.of_type("gcp:compute/firewall:Firewall") if r.inputs["name"].endswith("-allow-lustre")]
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["988"]}]


def test_a_created_instance_keeps_its_volume_handle() -> None:
    volumes = lustre_volumes(offline_run("prod-gcp").graph)
    assert {v["csi"]["volumeHandle"] for v in volumes} == {"acme-ml-prod/us-central1-a/prod-train-gke-lustre"}
    assert {v["csi"]["volumeAttributes"]["filesystem"] for v in volumes} == {"lustrefs"}


def test_an_instance_the_stack_does_not_own_is_not_priced(spec: dict[str, Any]) -> None:
    created = price_graph(offline_run("prod-gcp").graph)
    existing = price_graph(run_spec(spec, "prod-gcp").graph)
    assert "managed_lustre.tier-500" in created.unpriced
    assert not [r for r in existing.resources if r.type == LUSTRE]
    assert not any(key.startswith("managed_lustre") for key in existing.unpriced)


def test_switching_from_the_created_instance_is_stopped_not_silent(spec: dict[str, Any]) -> None:
    before = offline_run("prod-gcp").graph
    (instance,) = before.of_type(LUSTRE)
    assert instance.protect and instance.retain_on_delete  # prod: pulumi up refuses to delete it
    (found,) = [r for r in replacements(before, run_spec(spec, "prod-gcp").graph) if r.type == LUSTRE]
    assert found.name == "storage-lustre" and found.fields == ("(removed)",)
    # the pull-request check fails on it (unless upgrades.allowReplace names it), protected or not
    assert found.holds is not None and found.blocks


def test_the_preview_says_it_is_not_managed_here(tmp_path: Path, spec: dict[str, Any],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((ROOT / FILE).read_text())
    doc["config"]["gpu-cluster:spec"] = spec
    path = tmp_path / "Pulumi.prod-gcp.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["preview", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("existing Managed Lustre shared-lustre in us-central1-a, not managed here (not created, priced or "
            "protected by this stack): mounted as 10.90.0.4@tcp:/ckpt, described as 18,000 GiB at 500 MB/s per TiB"
            ) in out
    assert "Managed Lustre prod-train-gke-lustre" not in out


def test_the_diagram_draws_the_existing_instance_from_the_spec(spec: dict[str, Any]) -> None:
    parsed = parse_spec(spec, FILE, provider_region="us-central1")
    diagram = build_diagram(run_spec(spec, "prod-gcp").graph, parsed)
    (node,) = [n for n in diagram.nodes if n.kind == "filesystem"]
    assert (node.id, node.title, node.keys) == ("n-lustre-shared-lustre", "shared-lustre", set())
    assert node.lines == ["existing Managed Lustre in us-central1-a", "18,000 GiB x 500 MB/s/TiB",
                          "10.90.0.4@tcp:/ckpt", "not managed by this stack"]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("ip", "10.90.0.4@tcp:/ckpt", "ip: '10.90.0.4@tcp:/ckpt' is a mount point: give its address before @tcp as ip "
     "and the name after @tcp:/ as filesystem [rule: lustre-existing-ip]"),
    ("ip", "lustre.example", "ip: 'lustre.example' is not an IPv4 address (the instance's mount point address, e.g. "
     "10.90.1.4) [rule: lustre-existing-ip]"),
    ("ip", "fd00::4", "ip: 'fd00::4' is IPv6: the Lustre mount point is an IPv4 address [rule: lustre-existing-ip]"),
    ("ip", "8.8.8.8", "ip: '8.8.8.8' is not a private address: the instance is reached at an address of the private "
     "service access range of the stack's VPC (RFC 1918 or 100.64.0.0/10) [rule: lustre-existing-ip]"),
    ("ip", "127.0.0.1", "ip: '127.0.0.1' is not a private address: the instance is reached at an address of the "
     "private service access range of the stack's VPC (RFC 1918 or 100.64.0.0/10) [rule: lustre-existing-ip]"),
    ("ip", "10.40.3.7", "ip: '10.40.3.7' is inside gcp.network.nodeCidr '10.40.0.0/20': the instance's address comes "
     "from the private service access range of the stack's VPC, never from the stack's own ranges "
     "[rule: lustre-existing-ip]"),
    ("filesystem", "checkpoints", "filesystem: 'checkpoints' is not a Lustre filesystem name: up to 8 letters and "
     "digits, starting with a letter [rule: lustre-existing-filesystem]"),
    ("filesystem", "@tcp:/ckpt", "filesystem: '@tcp:/ckpt' is not a Lustre filesystem name: up to 8 letters and "
     "digits, starting with a letter (give only the part after @tcp:/ of the mount point) "
     "[rule: lustre-existing-filesystem]"),
    ("location", "us-east4-a", "location: 'us-east4-a' is not a zone of gcp.region 'us-central1': the nodes mount the "
     "instance over the stack's VPC and its private service access peering; use an instance in us-central1 (best in "
     "gpuZone us-central1-a) [rule: lustre-existing-location]"),
])
def test_what_the_stack_says_about_the_instance_is_checked(spec: dict[str, Any], key: str, value: str,
                                                           message: str) -> None:
    spec["gcp"]["storage"]["filesystem"]["existing"][key] = value
    assert errors(spec) == [f"{P}.gcp.storage.filesystem.existing.{message}"]


def test_100_64_is_a_private_service_access_address(spec: dict[str, Any]) -> None:
    spec["gcp"]["storage"]["filesystem"]["existing"]["ip"] = "100.64.8.2"
    assert parse_spec(spec, FILE, provider_region="us-central1").gcp_spec().storage.filesystem is not None


def test_only_managed_lustre_names_an_existing_instance(spec: dict[str, Any]) -> None:
    spec["gcp"]["storage"]["filesystem"].update(type="filestore")
    del spec["gcp"]["storage"]["filesystem"]["perUnitStorageThroughput"]
    assert errors(spec) == [
        f"{P}.gcp.storage.filesystem.existing: existing names a Managed Lustre instance; a filestore filesystem is "
        "created by the stack: remove existing or set type managed-lustre [rule: lustre-existing-type]"]


def test_a_stack_file_with_a_bad_instance_exits_2_before_anything_is_registered(
        tmp_path: Path, spec: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    spec["gcp"]["storage"]["filesystem"]["existing"]["filesystem"] = "lustre_fs"
    doc = yaml.safe_load((ROOT / FILE).read_text())
    doc["config"]["gpu-cluster:spec"] = spec
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["graph", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"error: {path}: gpu-cluster:spec.gcp.storage.filesystem.existing.filesystem: 'lustre_fs' is not a "
                   "Lustre filesystem name: up to 8 letters and digits, starting with a letter "
                   "[rule: lustre-existing-filesystem]\n")


def _team_dirs_script(graph: Any) -> str:
    (job,) = [r for r in graph.of_type("kubernetes:batch/v1:Job") if "-team-dirs" in r.inputs["metadata"]["name"]]
    return str(job.inputs["spec"]["template"]["spec"]["containers"][0]["command"][2])


def test_the_owners_directories_on_an_existing_instance_are_not_re_owned(spec: dict[str, Any],
                                                                            tmp_path: Path) -> None:
    """On an instance the stack does not own, the team-dirs Job makes a team's directory only when it is missing: a
    /research the owner already made keeps its group and mode. On the stack's own instance it still sets them."""
    import os
    import stat
    import subprocess

    script = _team_dirs_script(run_spec(spec, "prod-gcp").graph)
    fs, bin_dir = tmp_path / "fs", tmp_path / "bin"
    (fs / "research").mkdir(parents=True)
    (fs / "research").chmod(0o755)
    bin_dir.mkdir()
    for tool in ("chown", "chmod"):  # log the calls instead of needing root
        (bin_dir / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {tmp_path}/calls\n")
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    local = script.replace("/fs/", f"{fs}/").replace("ls -ln /fs", f"ls -ln {fs}")
    subprocess.run(["sh", "-c", local], check=True, env=env, capture_output=True)
    calls = (tmp_path / "calls").read_text()
    assert f"{fs}/research" not in calls and stat.S_IMODE((fs / "research").stat().st_mode) == 0o755
    assert f"chmod 2770 {fs}/pretraining" in calls and (fs / "pretraining").is_dir()
    owned = _team_dirs_script(offline_run("prod-gcp").graph)
    assert "mkdir -p /fs/research && chown " in owned and "if [ -e" not in owned
