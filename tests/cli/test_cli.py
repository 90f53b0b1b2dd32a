"""The command-line tool: preview, graph, and clear errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.graph.model import FORMAT_KEYS, ResourceGraph
from tests.conftest import ROOT, CatalogEdit


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_preview_prints_the_production_stack_by_plane(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "preview", "prod-aws")
    assert code == 0
    for heading in ("== network & fabric", "== compute", "== storage", "== control plane", "== Kubernetes platform"):
        assert heading in out
    platform = out.split("== Kubernetes platform", 1)[1].split("\n== ", 1)[0]
    assert "GPU stack: gpu-operator" in platform and "- Queues  queues" in platform and "- Tenancy  tenancy" in platform
    assert "GPU stack" not in out.split("== control plane", 1)[1].split("\n== ", 1)[0]
    assert ("prod-train-h100: p5.48xlarge (8 x NVIDIA H100 80GB), nodes 0/0/16 (min/desired/max); capacity "
            "CAPACITY_BLOCK cr-0a1b2c3d4e5f60718; EFA 32 of 32 interfaces per node; no placement group (a Capacity "
            "Block is placed by AWS, in an UltraCluster); GPUs at max 128; local NVMe RAID0") in out
    assert "FSx for Lustre PERSISTENT_2 9600 GiB x 500 MB/s/TiB = 4,688 MB/s, protected" in out
    assert ("checkpoint of the 70B model: 0.98 TB, filesystem path: blocks 3.5 min, every 6.74 h of compute (Daly); "
            "fleet MTBF 396 h; goodput 98.24% (target 97.0%) (`blueprint sizing`)") in out
    assert "EKS prod-train 1.35: endpoint private; KMS-encrypted secrets" in out
    assert "GPUs 2 desired / 132 at max size (128 on Capacity Blocks, running only in their window)" in out
    assert ("deployer: arn:aws:iam::111122223333:role/pulumi-deployer (the AWS provider and the kubeconfig assume "
            "it; cluster-admin access entry created before any Kubernetes resource) from inside the VPC: a "
            "self-hosted CI runner or Pulumi Deployments agent in 10.8.0.0/24") in out
    assert ("runner network: Transit Gateway tgw-0123456789abcdef0 attached in 2 zone(s), 2 route(s) back to the "
            "runners") in out
    assert ("Capacity Block cr-0a1b2c3d4e5f60718 (h100): 16 x p5.48xlarge, 2027-01-04T11:30:00Z -> "
            "2027-01-18T11:30:00Z (336 h, paid whether nodes run or not)") in out
    assert "operator step: scale to 0 at least 30 minutes before the block ends (by 2027-01-18T11:00:00Z" in out
    assert ("team data access (EKS Pod Identity): service account <team>/checkpoints reads and writes only "
            "s3://<bucket>/<team>/ for applied, pretraining, research") in out
    assert "GPU zone use1-az4 = us-east-1d in this account" in out
    assert "- aws.eks.NodeGroup  nodegroup-h100-ng" in out
    assert ("GPU stack: gpu-operator v26.7.0 (driver and toolkit from the node image, whole GPUs); EFA device "
            "plugin: aws-efa-k8s-device-plugin v0.5.20") in out
    assert ("team research: cpu-47400688 16 CPUs, 56Gi memory for CPU-only work, h100 64 GPUs (+32 borrowable); "
            "LocalQueue yes; namespace GPU ceiling 96") in out
    assert ("Prometheus: kube-prometheus-stack 81.4.3; DCGM exporter on; Kueue metrics on; 26 recording rules, "
            "37 alerts") in out
    assert "fabric: EFA node exporter (efa-node-exporter 4.56.1, image by digest) on h100" in out
    assert "== telemetry & cost" in out


def _b200_stack(tmp_path: Path) -> Path:
    text = Path("stacks/Pulumi.prod-aws.yaml").read_text().replace("p5.48xlarge", "p6-b200.48xlarge")
    text = text.replace("localNvme: raid0", "localNvme: auto")
    text = text.replace("{nodeGroup: h100, gpus:", "{nodeGroup: h100, cpu: 100, memoryGiB: 1000, gpus:")
    # No published all_reduce figure for p6-b200: the stack gives the gate's (rule acceptance-expected-figure).
    # (appended to the acceptance section, which the served model's section follows)
    after = "    # Private inference"
    text = text.replace(after, "      expected:\n"
                        "        - {nodeGroup: h100, nodes: 1, busbwGbps: 700.0, source: our baseline}\n"
                        "        - {nodeGroup: h100, nodes: 2, busbwGbps: 700.0, source: our baseline}\n"
                        + after, 1)
    stack_file = tmp_path / "Pulumi.b200.yaml"
    stack_file.write_text(text)
    return stack_file


def test_preview_flags_secondary_efa_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            edited_aws_catalog: CatalogEdit) -> None:
    from components.catalog.prices import describe, load_prices

    # p6-b200's 8 EFA interfaces are confirmed (EC2 DescribeInstanceTypes): no note. A count read only in
    # third-party material is built here to keep the note tested.
    code, out, _ = run(capsys, "preview", str(_b200_stack(tmp_path)))
    assert code == 0 and "EFA 8 of 8 interfaces per node" in out and "note: EFA interface counts" not in out

    def secondary(instances: dict[str, Any]) -> None:
        instances["p6-b200.48xlarge"]["efa_interfaces"].update(status="secondary", source="a third-party README")

    edited_aws_catalog(secondary)
    code, out, _ = run(capsys, "preview", str(_b200_stack(tmp_path)))
    assert "EFA 8 of 8 interfaces per node" in out
    assert ("note: EFA interface counts for p6-b200.48xlarge are not confirmed by a primary source "
            "(components/catalog/aws_instances.yaml)") in out
    # The p6-b200 Capacity Block rate was read: the teams' spend is watched at it.
    block = load_prices("aws")["ec2_capacity_block.p6-b200.48xlarge"]
    assert f"prices: h100: {describe(block)} / 8 GPU units" in out
    assert code == 0


def test_without_a_gpu_price_the_preview_says_nothing_watches_the_team_budgets(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from components.catalog import prices as catalog

    data = yaml.safe_load(catalog.AWS_PRICES_FILE.read_text())
    data["ec2_capacity_block"]["p6-b200.48xlarge"] = {
        "usd": None, "unit": "hour", "region": "us-east-1", "status": "unconfirmed", "source": "", "as_of": "2026-12"}
    unread = tmp_path / "prices_aws.yaml"
    unread.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(catalog, "AWS_PRICES_FILE", unread)
    # Without the served model's l40s group, whose price is read: then no GPU group has one.
    stack_file = _b200_stack(tmp_path)
    doc = yaml.safe_load(stack_file.read_text())
    spec = doc["config"]["gpu-cluster:spec"]
    spec.pop("inference")
    spec["aws"]["nodeGroups"] = [g for g in spec["aws"]["nodeGroups"] if g["name"] != "l40s"]
    for team in spec["teams"]:
        team["quotas"] = [q for q in team["quotas"] if q["nodeGroup"] != "l40s"]
    stack_file.write_text(yaml.safe_dump(doc))
    code, out, _ = run(capsys, "preview", str(stack_file))
    # No Capacity Block price of p6-b200: no spend alert can be built, the preview says why and the pack refuses the
    # unwatched team budgets (the only mandatory violation).
    assert ("warning: no in-cluster spend alert: no price read for the GPU groups h100 (components/catalog/"
            "prices_*.yaml)") in out
    assert code == 1 and "MANDATORY high     aws-every-team-has-a-budget" in out
    assert out.count("MANDATORY") == 3  # one per team namespace


def test_graph_writes_the_documented_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "graph.json"
    code, out, err = run(capsys, "graph", "prod-aws", "-o", str(target))
    assert code == 0 and out == ""
    assert err.startswith(f"wrote {target} (")
    doc = json.loads(target.read_text())
    assert doc["stack"] == "prod-aws"
    assert all(set(r) == set(FORMAT_KEYS) for r in doc["resources"])
    cluster = next(r for r in doc["resources"] if r["type"] == "aws:eks/cluster:Cluster")
    assert cluster["inputs"]["enabledClusterLogTypes"]  # camelCase wire format
    assert cluster["protect"] is True and cluster["retain_on_delete"] is True
    assert ResourceGraph.from_dict(doc).to_json() == target.read_text()


def test_graph_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "graph", "dev-aws")
    assert code == 0 and json.loads(out)["stack"] == "dev-aws"


def test_unknown_stack(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "preview", "staging-aws")
    assert code == 2 and out == ""
    assert err == ("error: stacks/Pulumi.staging-aws.yaml: stack file not found (stacks in stacks: "
                   "byo-aws, dev-aws, dev-gcp, dev-gcp-slurm, prod-aws, prod-aws-slurm, prod-gcp)\n")


@pytest.mark.parametrize(("content", "message"), [
    ("config: [unclosed", "line 1, column 18: not valid YAML: expected ',' or ']', but got '<stream end>' "
                          "[rule: yaml-syntax]"),
    ("- a list", "a stack file is a mapping with a 'config' key [rule: stack-file-shape]"),
    ("encryptionsalt: x", "config: required mapping is missing [rule: stack-file-shape]"),
    ("config:\n  aws:region: us-east-1", "config.gpu-cluster:spec: required key is missing "
                                         "[rule: schema-required-key]"),
    ("config:\n  gpu-cluster:spec: 3", "gpu-cluster:spec: must be a mapping of keys, got int [rule: schema-type]"),
])
def test_malformed_stack_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str) -> None:
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text(content)
    code, out, err = run(capsys, "graph", str(path))
    assert code == 2 and out == ""
    assert err == f"error: {path}: {message}\n"


def test_rule_violation_lists_every_issue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = Path("stacks/Pulumi.prod-aws.yaml").read_text()
    text = text.replace("placement: auto", "placement: cluster").replace("deletionProtection", "x")
    text = text.replace("    environment: prod\n", "    environment: prod\n    deletionProtection: false\n")
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    code, _, err = run(capsys, "preview", str(path))
    assert code == 2
    lines = err.splitlines()
    assert lines[0] == (f"error: {path}: gpu-cluster:spec.deletionProtection: prod stacks cannot turn off "
                        "deletion protection of stateful resources [rule: prod-deletion-protection]")
    assert lines[1].startswith(f"{path}: gpu-cluster:spec.aws.nodeGroups[h100].placement: a new cluster placement "
                               "group must not be forced onto capacity-block capacity")


def test_bench_stacks_pass_every_spec_rule() -> None:
    # At the bench's largest size: rules that compare teams pairwise (gid-unique: 1,000 names hashed into 40,000
    # group IDs collide) pass only if every generated team is distinct there too.
    from blueprint.bench import generated_spec
    from components.spec import parse_spec

    spec = parse_spec(generated_spec(1000), "stacks/Pulumi.bench-1000.yaml", provider_region="us-east-1")
    gpu_groups = [g for g in spec.aws_spec().node_groups if g.name.startswith("gpu-")]
    assert len(gpu_groups) == len(spec.teams) == 1000


@pytest.mark.parametrize("args", [
    ["admit", "dev-aws", "examples/workloads/dev-aws/finetune-single-node.yaml"],
    ["admit", "prod-aws-slurm", "examples/slurm/train.sbatch"],
    ["policy", "dev-aws"],
])
def test_each_command_runs_in_a_fresh_process(args: list[str]) -> None:
    """A command imports its modules in its own order: a circular import that an in-process test hides (the modules
    already loaded by earlier tests) breaks it here."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "blueprint.cli", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "internal error" not in out.stdout + out.stderr
