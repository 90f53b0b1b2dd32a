"""Round two of odd and hostile input (issue 20): what the spec, the graph readers and the configs must refuse,
each with the exact message a user sees. Each test fails when its check is removed."""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from blueprint.cli import main
from blueprint.graph.model import ResourceGraph
from components.spec import SpecError, parse_spec
from components.spec.notes import spec_notes
from components.spec.rules.arns import partition_of
from tests.conftest import offline_run, raw_stack_config

AWS_FILE = "stacks/Pulumi.prod-aws.yaml"
GCP_FILE = "stacks/Pulumi.prod-gcp.yaml"
A = f"{AWS_FILE}: gpu-cluster:spec"
G = f"{GCP_FILE}: gpu-cluster:spec"
NOW = datetime(2026, 11, 29, tzinfo=UTC)


def spec(name: str) -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config(name)["gpu-cluster:spec"])


def errors(value: dict[str, Any], now: datetime = NOW) -> list[str]:
    gcp = value.get("cloud") == "gcp"
    with pytest.raises(SpecError) as info:
        parse_spec(value, GCP_FILE if gcp else AWS_FILE, provider_region="us-central1" if gcp else "us-east-1",
                   now=now)
    return str(info.value).splitlines()


def group(value: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in value["aws"]["nodeGroups"] if g["name"] == name)


# --- YAML values JSON cannot carry ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("replace", "message"), [
    ("maxSize: 16", "{where}config.gpu-cluster:spec.aws.nodeGroups[h100].maxSize: the integer "
     "999999999999999999999999... (5,000 characters) is out of range: numbers stay within +-2^53 "
     "(9,007,199,254,740,992), what Pulumi's property values carry exactly [rule: yaml-number-range]"),
    ("owner: ml-platform-oncall", "{where}config.gpu-cluster:spec.labels.owner: the tag !!binary is "
     "not allowed: values are strings, numbers, booleans, null, lists and mappings, as in JSON "
     "[rule: yaml-json-values]"),
    ('start: "2027-01-04T11:30:00Z"', "{where}config.gpu-cluster:spec.aws.nodeGroups[h100].capacity.start: "
     "the tag !!timestamp is not allowed: values are strings, numbers, booleans, null, lists and mappings, as in "
     "JSON [rule: yaml-json-values]"),
    ("labels: {workload: training}", "{where}config.gpu-cluster:spec.aws.nodeGroups[h100].labels: the tag "
     "!!set is not allowed: values are strings, numbers, booleans, null, lists and mappings, as in JSON "
     "[rule: yaml-json-values]"),
    ("owner: ml-platform-oncall", "{where}config.gpu-cluster:spec.labels.owner: a NUL character in a string "
     "[rule: yaml-json-values]"),
])
def test_stack_files_hold_json_values_only(tmp_path: Path, capsys: pytest.CaptureFixture[str], replace: str,
                                           message: str) -> None:
    key = replace.split(":")[0]
    value = {"maxSize": "9" * 5000, "owner": "!!binary aGVsbG8=", "start": "!!timestamp 2027-01-04T11:30:00Z",
             "labels": "!!set {workload}"}[key] if "NUL" not in message else '"ml\\0oncall"'
    text = Path(AWS_FILE).read_text()
    assert replace in text
    before = text[:text.index(replace)]
    line, column = before.count("\n") + 1, len(before) - before.rfind("\n") + len(key) + 2  # where the value starts
    path = tmp_path / "Pulumi.hostile.yaml"
    path.write_text(text.replace(replace, f"{key}: {value}", 1))
    assert main(["graph", str(path)]) == 2
    where = f"line {line}, column {column}: "
    assert capsys.readouterr().err == f"error: {path}: {message.format(where=where)}\n"


def test_usage_files_refuse_huge_integers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    usage = tmp_path / "u.yaml"
    usage.write_text("version: 1\nresources:\n  storage-checkpoints: {storageGB: " + "9" * 5000 + "}\n")
    assert main(["cost", "dev-aws", "--usage", str(usage)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {usage}: line 3, column 36: resources.storage-checkpoints.storageGB: the integer ")
    assert err.endswith("[rule: yaml-number-range]\n")


# --- CIDR lists that cover the internet, alone or in pieces --------------------------------------------------------


@pytest.mark.parametrize("cidrs", [["0.0.0.0/0"], ["0.0.0.0/1", "128.0.0.0/1"], ["10.8.0.0/24", "0.0.0.0/0"]])
def test_runner_cidrs_never_cover_the_internet(cidrs: list[str]) -> None:
    value = spec("prod-aws")
    value["aws"]["controlPlane"]["deployer"]["runnerCidrs"] = cidrs
    assert errors(value) == [
        f"{A}.aws.controlPlane.deployer.runnerCidrs: runnerCidrs ({', '.join(cidrs)}) cover the whole internet: list "
        "the networks the CI runners are in; the stack opens HTTPS to the API from them and routes them through the "
        "Transit Gateway, and a 0.0.0.0/0 route there collides with the NAT gateway's default route (EC2 refuses a "
        "second route to the same destination in a route table) [rule: runner-cidrs-not-open]"]


def test_gke_networks_never_cover_the_internet_in_pieces() -> None:
    value = spec("prod-gcp")
    cluster = value["gcp"]["cluster"]
    cluster["endpoint"] = "authorized-networks"
    cluster["authorizedNetworks"] = ["0.0.0.0/1", "128.0.0.0/1"]
    cluster["deployer"] = {"serviceAccount": cluster["deployer"]["serviceAccount"],
                           "apiAccess": "authorized-networks", "runnerCidrs": ["0.0.0.0/2", "64.0.0.0/2",
                                                                                "128.0.0.0/1"]}
    lines = errors(value)
    assert (f"{G}.gcp.cluster.authorizedNetworks: authorizedNetworks (0.0.0.0/1, 128.0.0.0/1) together cover the "
            "whole internet; list the networks that need the control plane [rule: authorized-networks-not-open]"
            ) in lines
    assert (f"{G}.gcp.cluster.deployer.runnerCidrs: runnerCidrs (0.0.0.0/2, 64.0.0.0/2, 128.0.0.0/1) together "
            "cover the whole internet; list the networks the CI runners are in [rule: authorized-networks-not-open]"
            ) in lines


def _graph_with(name: str, change: Any) -> dict[str, Any]:
    doc = json.loads(offline_run(name).graph.to_json())
    change(doc)
    return doc


def _resource(doc: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(r for r in doc["resources"] if r["type"] == type_)


def test_the_endpoint_policies_see_the_internet_in_pieces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def eks(doc: dict[str, Any]) -> None:
        vpc = _resource(doc, "aws:eks/cluster:Cluster")["inputs"]["vpcConfig"]
        vpc["endpointPublicAccess"] = True
        vpc["publicAccessCidrs"] = ["0.0.0.0/1", "128.0.0.0/1"]

    def gke(doc: dict[str, Any]) -> None:
        cluster = _resource(doc, "gcp:container/cluster:Cluster")["inputs"]
        cluster["masterAuthorizedNetworksConfig"] = {"cidrBlocks": [{"cidrBlock": "0.0.0.0/1"},
                                                                    {"cidrBlock": "128.0.0.0/1"}]}
    for name, change, policy, text in (
            ("prod-aws", eks, "aws-eks-endpoint-not-open-to-internet",
             "EKS cluster prod-train must keep its API endpoint private, or public only to listed CIDRs; it is "
             "reachable from the whole internet (from 0.0.0.0/1 + 128.0.0.0/1 (together))."),
            ("prod-gcp", gke, "gcp-gke-endpoint-not-open-to-internet",
             "must not authorize 0.0.0.0/1 + 128.0.0.0/1 (together) to reach its control plane")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_graph_with(name, change)))
        assert main(["policy", str(path), "--format", "json"]) == 1, name  # mandatory on both clouds
        (hit,) = [v for v in json.loads(capsys.readouterr().out)["violations"] if v["policy"] == policy]
        assert hit["enforcement"] == "mandatory" and text in hit["message"]


@pytest.mark.parametrize(("key", "cidr", "why"), [
    ("cidrIpv4", "0.0.0.0/1", "0.0.0.0/1: 2,092,957,696 internet IPv4 addresses"),
    ("cidrIpv4", "11.0.0.0/8", "11.0.0.0/8: 16,777,216 internet IPv4 addresses"),
    ("cidrIpv4", "172.0.0.0/8", "172.0.0.0/8: 15,728,640 internet IPv4 addresses"),  # a private /12 inside
    ("cidrIpv6", "::/0", "::/0"),
    ("cidrIpv6", "::/1", "::/1: about 2^125 internet IPv6 addresses"),  # the half holding all of 2000::/3
    ("cidrIpv6", "2000::/3", "2000::/3: about 2^125 internet IPv6 addresses"),
])
def test_ssh_from_wide_ranges_is_ssh_from_anywhere(key: str, cidr: str, why: str) -> None:
    from blueprint.policy.runner import run_policies

    graph = offline_run("prod-aws").graph
    base = next(r for r in graph.resources if r.name.endswith("efa-ingress-self"))
    inputs = {**base.inputs, "ipProtocol": "tcp", "fromPort": 22, "toPort": 22, key: cidr,
              "referencedSecurityGroupId": None}
    rule = dataclasses.replace(base, urn=base.urn + "-ssh", name="ssh", inputs=inputs)
    report = run_policies(ResourceGraph(graph.stack, [*graph.resources, rule]))
    hits = [v for v in report.violations if v.policy == "aws-no-ssh-from-anywhere"]
    assert [(v.urn, v.field, v.value) for v in hits] == [(rule.urn, key, cidr)]
    assert hits[0].message.endswith(f"ssh must not allow SSH (port 22) from anywhere ({why}); reach nodes through "
                                    "Session Manager.")


def test_ssh_from_private_or_narrow_ranges_is_allowed_and_pieces_count_together() -> None:
    from blueprint.policy.runner import run_policies

    graph = offline_run("prod-aws").graph
    group = next(r for r in graph.resources if r.type == "aws:ec2/securityGroup:SecurityGroup")
    quarters = [f"{q}.0.0.0/10" for q in (64, 128, 192)] + ["10.0.0.0/8", "100.0.0.0/10"]
    narrow = ["10.0.0.0/8", "203.0.113.0/24"]
    narrow_v6 = ["fd00::/8", "8000::/1"]  # 8000::/1 holds no global unicast address
    halves = ["8000::/1", "::/1"]
    for cidrs, key, expected in ((narrow, "cidrBlocks", []), (narrow_v6, "ipv6CidrBlocks", []),
                                 (quarters, "cidrBlocks", [("ingress[0].cidrBlocks", quarters)]),
                                 (halves, "ipv6CidrBlocks", [("ingress[0].ipv6CidrBlocks[1]", "::/1")])):
        ingress = [{"protocol": "tcp", "fromPort": 22, "toPort": 22, key: cidrs}]
        changed = dataclasses.replace(group, inputs={**group.inputs, "ingress": ingress})
        resources = [changed if r.urn == group.urn else r for r in graph.resources]
        report = run_policies(ResourceGraph(graph.stack, resources))
        hits = [(v.field, v.value) for v in report.violations if v.policy == "aws-no-ssh-from-anywhere"]
        assert hits == expected, cidrs


# --- graph documents with sizes no cloud has ---------------------------------------------------------------------


@pytest.mark.parametrize(("value", "shown"), [(-16, "-16"), (1e20, "1e+20"), (2.5, "2.5"), ("16", '"16"')])
@pytest.mark.parametrize("command", ["cost", "policy"])
def test_graphs_with_absurd_sizes_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: Any,
                                              shown: str, command: str) -> None:
    def absurd(doc: dict[str, Any]) -> None:
        group = next(r for r in doc["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup"
                     and r["name"] == "nodegroup-h100-ng")
        group["inputs"]["scalingConfig"]["desiredSize"] = value
    doc = _graph_with("prod-aws", absurd)
    index = next(i for i, r in enumerate(doc["resources"]) if r["type"] == "aws:eks/nodeGroup:NodeGroup"
                 and r["name"] == "nodegroup-h100-ng")
    path = tmp_path / "absurd.json"
    path.write_text(json.dumps(doc))
    assert main([command, str(path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}: resources[{index}].inputs.scalingConfig.desiredSize: {shown} is not a node count (a whole "
        "number from 0 to 100,000)\n")


def test_gcp_int64_strings_are_read_as_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def as_string(doc: dict[str, Any]) -> None:
        _resource(doc, "gcp:lustre/instance:Instance")["inputs"]["capacityGib"] = "18000"
    path = tmp_path / "gcp.json"
    path.write_text(json.dumps(_graph_with("prod-gcp", as_string)))
    assert main(["cost", str(path), "--format", "json"]) == 0
    capsys.readouterr()

    def negative(doc: dict[str, Any]) -> None:
        _resource(doc, "gcp:lustre/instance:Instance")["inputs"]["capacityGib"] = "-18000"
    path.write_text(json.dumps(_graph_with("prod-gcp", negative)))
    assert main(["cost", str(path)]) == 2
    assert 'inputs.capacityGib: "-18000" is not a capacity in GiB (a whole number from 0 to 1,000,000,000)' \
        in capsys.readouterr().err


# --- configs and JSON documents -------------------------------------------------------------------------------------


def test_a_policy_config_with_a_key_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "pack.json"
    config.write_text('{"all": "mandatory", "all": "disabled"}')
    assert main(["policy", "dev-aws", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (f"error: {config}: not a readable JSON file: the key \"all\" is given twice "
                                       "(the first value would be silently replaced)\n")


# Every knob that could switch its policy off in effect, with such a value, and what follows its path in the refusal.
NEUTRALISING_KNOBS = [
    ("aws-resources-require-billing-tags", "requiredTags", [], ": [] should be non-empty"),
    ("aws-resources-require-billing-tags", "taggableTypes", [], ": [] should be non-empty"),
    ("gcp-resources-require-billing-labels", "requiredLabels", [], ": [] should be non-empty"),
    ("kubernetes-namespaces-require-billing-labels", "requiredLabels", [], ": [] should be non-empty"),
    ("aws-eks-gpu-nodegroup-require-owner", "ownerTags", [], ": [] should be non-empty"),
    ("aws-eks-control-plane-logging", "requiredLogTypes", [], ": [] should be non-empty"),
    ("gcp-gke-logging", "requiredLogComponents", [], ": [] should be non-empty"),
    ("gcp-gke-logging", "productionLogComponents", [], ": [] should be non-empty"),
    ("gcp-gke-logging", "protectedEnvironments", [], ": [] should be non-empty"),
    ("alerts-reach-a-receiver", "alertedEnvironments", [], ": [] should be non-empty"),
    ("aws-fabric-metrics-in-production", "productionEnvironments", [], ": [] should be non-empty"),
    ("gcp-cmek-in-production", "protectedEnvironments", [], ": [] should be non-empty"),
    ("stateful-resources-protected-in-production", "statefulTypes", [], ": [] should be non-empty"),
    ("gcp-stateful-resources-protected-in-production", "protectedEnvironments", [], ": [] should be non-empty"),
    ("stateful-names-ignore-changes", "nameInputs", {}, ": {} should be non-empty"),
    ("kubernetes-team-namespaces-isolated", "productionEnvironments", [], ": [] should be non-empty"),
    ("aws-eks-gpu-nodegroup-max-size-cap", "maxNodes", 1e12, ": 1000000000000.0 is greater than the maximum of 100000"),
    ("aws-efa-node-groups-wire-all-interfaces", "efaInterfaces", {}, ": {} should be non-empty"),
    ("aws-efa-node-groups-single-az-and-placed", "efaInterfaces", {"p5.48xlarge": 0},
     "['p5.48xlarge']: 0 is less than the minimum of 1"),
    ("gcp-gpudirect-node-pools-wire-all-networks", "gpuNetworks", {"a3-megagpu-8g": 0},
     "['a3-megagpu-8g']: 0 is less than the minimum of 1"),
    ("gcp-storage-bucket-recoverable", "minSoftDeleteDays", 0, ": 0 is less than the minimum of 1"),
]


@pytest.mark.parametrize(("policy", "knob", "value", "why"), NEUTRALISING_KNOBS,
                         ids=[f"{p}.{k}" for p, k, _, _ in NEUTRALISING_KNOBS])
def test_a_knob_that_switches_its_policy_off_is_refused_by_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, knob: str, value: Any, why: str) -> None:
    config = tmp_path / "pack.json"
    config.write_text(json.dumps({policy: {knob: value}}))
    assert main(["policy", "dev-aws", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"error: {config}: {policy}.{knob}{why}; it would switch "
        f'{policy} off in effect (to switch a policy off, set "{policy}": "disabled", which every report shows)\n')


def test_knobs_within_their_bounds_and_an_explicit_disable_are_accepted(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "pack.json"
    config.write_text(json.dumps({"aws-eks-gpu-nodegroup-max-size-cap": {"maxNodes": 100_000},
                                  "aws-resources-require-billing-tags": {"requiredTags": ["team"]},
                                  "gcp-storage-bucket-recoverable": {"minSoftDeleteDays": 90},
                                  "aws-eks-control-plane-logging": "disabled"}))
    assert main(["policy", "dev-aws", "--config", str(config)]) == 0
    capsys.readouterr()
    config.write_text(json.dumps({"aws-eks-gpu-nodegroup-max-size-cap": {"maxNodes": 0}}))
    assert main(["policy", "dev-aws", "--config", str(config)]) == 2  # fails every group: refused, not "off"
    assert capsys.readouterr().err == (f"error: {config}: aws-eks-gpu-nodegroup-max-size-cap.maxNodes: 0 is less than "
                                       "the minimum of 1\n")


def test_graph_documents_refuse_duplicate_keys_and_huge_integers(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.json"
    path.write_text('{"stack": "a", "stack": "b", "resources": []}')
    assert main(["policy", str(path)]) == 2
    assert capsys.readouterr().err == (f"error: {path}: not JSON: the key \"stack\" is given twice (the first value "
                                       "would be silently replaced)\n")
    path.write_text('{"stack": "a", "resources": [], "n": ' + "9" * 5000 + "}")
    assert main(["cost", str(path)]) == 2
    assert capsys.readouterr().err == (f"error: {path}: not JSON: an integer of 5,000 digits "
                                       "(99999999999999999999...); at most 40 digits\n")


def test_nccl_logs_refuse_huge_integers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "n.log"
    log.write_text("  " + "9" * 5000 + "  2 float sum -1 1.0 1.0 1.0 0 1.0 1.0 1.0 0\n# Avg bus bandwidth : 1\n")
    assert main(["nccl", "parse", str(log)]) == 2
    assert capsys.readouterr().err == (f"error: {log}: not an nccl-tests log: line 1: a size, count or root of more "
                                       "than 20 digits; nccl-tests prints 64-bit integers there\n")


def test_debug_before_cost_diff(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", "cost", "diff", "--base", "HEAD", "dev-aws", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"] == "dev-aws"


# --- Capacity Blocks as EC2 sells them --------------------------------------------------------------------------


@pytest.mark.parametrize(("window", "path", "message"), [
    ({"instanceCount": 65}, "capacity.instanceCount",
     "a Capacity Block has 1 to 64 instances (EC2 user guide, Capacity Blocks), got 65"),
    ({"end": "2027-01-18T12:00:00Z"}, "capacity.end",
     "every Capacity Block ends at 11:30 UTC (EC2 user guide, Capacity Blocks); 2027-01-18T12:00:00Z is not a "
     "block's end: copy EndDate from `aws ec2 describe-capacity-reservations`"),
    ({"end": "2027-01-19T11:30:00Z"}, "capacity.end",
     "the window 2027-01-04T11:30:00Z to 2027-01-19T11:30:00Z spans 15 days; Capacity Blocks last 1 to 14 days, or "
     "21 to 182 days in steps of 7 (EC2 user guide, Capacity Blocks)"),
    ({"start": "2027-03-04T11:30:00Z", "end": "2027-03-11T11:30:00Z"}, "capacity.start",
     "the block starts on 2027-03-04T11:30:00Z, more than 8 weeks from now (2026-11-29T00:00:00Z); EC2 sells blocks "
     "that start at most 8 weeks ahead, so no block bought by today starts then: check the start"),
])
def test_capacity_block_windows_as_ec2_sells_them(window: dict[str, Any], path: str, message: str) -> None:
    value = spec("prod-aws")
    group(value, "h100")["capacity"].update(window)
    lines = errors(value)
    assert f"{A}.aws.nodeGroups[h100].{path}: {message} [rule: capacity-block-window]" in lines


def test_long_blocks_and_blocks_that_start_at_once_load() -> None:
    value = spec("prod-aws")
    group(value, "h100")["capacity"].update({"start": "2026-12-07T11:30:00Z", "end": "2027-01-04T11:30:00Z"})
    parse_spec(value, AWS_FILE, provider_region="us-east-1", now=NOW)  # 28 days
    group(value, "h100")["capacity"].update({"start": "2026-11-29T04:55:00Z", "end": "2026-12-03T11:30:00Z"})
    parse_spec(value, AWS_FILE, provider_region="us-east-1", now=NOW)  # began at once, 4 days and some hours


def test_an_ended_block_is_refused_and_a_running_one_warned() -> None:
    value = spec("prod-aws")
    assert errors(value, now=datetime(2027, 1, 18, 11, 30, tzinfo=UTC))[0] == (
        f"{A}.aws.nodeGroups[h100].capacity.end: the block ended on 2027-01-18T11:30:00Z: its instances are gone; "
        "record the next block (reservationId, start, end, instanceCount) or change the group's capacity type "
        "[rule: capacity-block-window]")
    during = datetime(2027, 1, 5, tzinfo=UTC)
    parsed = parse_spec(value, AWS_FILE, provider_region="us-east-1", now=during)
    assert spec_notes(parsed, during)[0] == (
        "warning: gpu-cluster:spec.aws.nodeGroups[h100].capacity.start: the block began on 2027-01-04T11:30:00Z and "
        "ends on 2027-01-18T11:30:00Z: the scheduled scale-up is in the past, so an apply now leaves the group at 0; "
        "scale it with the command the preview prints, and to 0 at least 30 minutes before the end")
    assert not [n for n in spec_notes(parsed, NOW) if "the block began" in n]


# --- labels, taints and mount paths the node or the runtime refuses ---------------------------------------------


@pytest.mark.parametrize("key", ["node-role.kubernetes.io/worker", "kubernetes.io/role", "example.k8s.io/x",
                                 "app.kubernetes.io/name"])
def test_node_labels_kubelet_refuses(key: str) -> None:
    value = spec("prod-aws")
    group(value, "h100")["labels"] = {key: "true"}
    assert errors(value) == [
        f'{A}.aws.nodeGroups[h100].labels["{key}"]: \'{key}\': kubelet sets no kubernetes.io or k8s.io label but its '
        "own (kubernetes.io/hostname, os, arch, topology.kubernetes.io/*, node.kubernetes.io/*, "
        "kubelet.kubernetes.io/*), and the node would never join; use a prefix of your own (gpu-cluster/) "
        "[rule: kubelet-node-label]"]


def test_node_labels_kubelet_allows_and_gke_checks_too() -> None:
    value = spec("prod-aws")
    group(value, "h100")["labels"] = {"node.kubernetes.io/pool": "a", "gpu.node.kubernetes.io/x": "b",
                                      "kubelet.kubernetes.io/y": "c"}
    parse_spec(value, AWS_FILE, provider_region="us-east-1", now=NOW)
    gcp = spec("prod-gcp")
    gcp["gcp"]["nodePools"][1]["labels"] = {"node-role.kubernetes.io/gpu": "true"}
    assert errors(gcp)[0].endswith("[rule: kubelet-node-label]")


@pytest.mark.parametrize(("key", "reserved"), [("kubernetes.io/dedicated", "kubernetes.io"),
                                               ("example.k8s.io/x", "k8s.io"),
                                               ("eks.amazonaws.com/compute", "eks.amazonaws.com")])
def test_taint_keys_eks_refuses(key: str, reserved: str) -> None:
    value = spec("prod-aws")
    group(value, "h100")["taints"] = [{"key": key, "value": "x", "effect": "NoSchedule"}]
    assert f"{A}.aws.nodeGroups[h100].taints[0].key: '{key}': the EKS node-group API refuses taint keys under " \
           f"{reserved}/ (reserved); use a prefix of your own (e.g. gpu-cluster/) [rule: eks-taint-key]" \
           in errors(value)


def test_eks_label_keys_and_values() -> None:
    value = spec("prod-aws")
    long_key = "example.com/" + "a" * 60
    group(value, "h100")["labels"] = {"eks.amazonaws.com/nodegroup": "x", long_key: "y", "empty": ""}
    lines = errors(value)
    assert (f'{A}.aws.nodeGroups[h100].labels["eks.amazonaws.com/nodegroup"]: \'eks.amazonaws.com/nodegroup\': EKS '
            "sets eks.amazonaws.com/ labels itself and refuses them in a node group's labels [rule: eks-label-key]"
            ) in lines
    assert (f'{A}.aws.nodeGroups[h100].labels["{long_key}"]: \'{long_key}\': the EKS API takes label keys of at most '
            "63 characters, prefix included (72) [rule: eks-label-key]") in lines
    assert (f"{A}.aws.nodeGroups[h100].labels.empty: 'empty': the EKS API takes label values of 1 to 63 characters; "
            "give a value [rule: eks-label-key]") in lines


@pytest.mark.parametrize(("path", "reserved"), [("/proc/ckpt", "/proc"), ("/sys", "/sys"), ("/dev/shm", "/dev"),
                                                ("/etc/ckpt", "/etc"), ("/usr/local/ckpt", "/usr")])
def test_mount_paths_the_runtime_needs(path: str, reserved: str) -> None:
    aws = spec("prod-aws")
    aws["aws"]["storage"]["filesystem"]["mountPath"] = path
    expected = (f"'{path}' cannot be the filesystem's path in pods: it is under {reserved}, which the container "
                "runtime and the image need (runc refuses mounts inside /proc; /dev and /sys hold the GPU and EFA "
                "devices); use a path such as /checkpoints [rule: mount-path-allowed]")
    assert f"{A}.aws.storage.filesystem.mountPath: {expected}" in errors(aws)
    gcp = spec("prod-gcp")
    gcp["gcp"]["storage"]["filesystem"]["mountPath"] = path
    assert f"{G}.gcp.storage.filesystem.mountPath: {expected}" in errors(gcp)


def test_a_gcp_region_that_does_not_exist() -> None:
    value = spec("prod-gcp")
    value["gcp"]["region"] = "mars-north1"
    value["gcp"]["gpuZone"] = "mars-north1-a"
    with pytest.raises(SpecError) as info:
        parse_spec(value, GCP_FILE, provider_region="mars-north1", now=NOW)
    assert str(info.value).splitlines()[0].startswith(
        f"{G}.gcp.region: 'mars-north1' is not a Google Cloud region of the catalog (components/catalog/"
        "gcp_regions.yaml, 43 regions, with its source)")
    value["gcp"]["region"] = "us-centrall1"
    with pytest.raises(SpecError) as info:
        parse_spec(value, GCP_FILE, provider_region="us-centrall1", now=NOW)
    assert "; closest: us-central1, " in str(info.value).splitlines()[0]


def test_a_gpu_zone_no_source_lists_is_warned_about() -> None:
    """us-central1-z does not exist; the catalog's zone lists are partial, so the preview warns (naming the zones
    it knows in the region and the command that checks) rather than refusing."""
    value = spec("prod-gcp")
    assert not [n for n in spec_notes(parse_spec(value, GCP_FILE, provider_region="us-central1", now=NOW), NOW)
                if "no source the catalog read" in n]
    value["gcp"]["gpuZone"] = "us-central1-z"
    notes = [n for n in spec_notes(parse_spec(value, GCP_FILE, provider_region="us-central1", now=NOW), NOW)
             if "no source the catalog read" in n]
    assert len(notes) == 2, notes  # the h100 pool and the served model's l4 pool
    assert "nodePools[l4].machineType: no source the catalog read lists g2-standard-8 in us-central1-z" in notes[1]
    assert notes[0].startswith("warning: gpu-cluster:spec.gcp.nodePools[h100].machineType: no source the catalog "
                               "read lists a3-megagpu-8g in us-central1-z (in us-central1: us-central1-a, "
                               "us-central1-b, us-central1-c")
    assert "accelerator-types list --filter=zone:us-central1-z" in notes[0]


# --- teams that cannot work ----------------------------------------------------------------------------------------


def test_teams_without_members_or_quota_and_gpus_no_quota_reaches() -> None:
    value = spec("prod-aws")
    value.pop("inference")  # a served model needs its team's quota (rule inference-quota): not what this is about
    value["teams"][0]["roleArns"] = []
    value["teams"][1]["quotas"][0]["gpus"] = 0
    value["teams"][1]["quotas"][0].pop("borrowingLimitGpus", None)
    value["platform"]["cohort"] = False
    for team in value["teams"]:
        for quota in team["quotas"]:
            quota.pop("borrowingLimitGpus", None)
            quota.pop("lendingLimitGpus", None)
    parsed = parse_spec(value, AWS_FILE, provider_region="us-east-1", now=NOW)
    notes = spec_notes(parsed, NOW)
    assert ("warning: gpu-cluster:spec.teams[research].roleArns: team 'research' has no members: no IAM role is mapped "
            "to its group gpu-cluster:research, so nobody can submit to its queue (add the team's roles)") in notes
    assert ("warning: gpu-cluster:spec.teams[pretraining].quotas[0].gpus: team 'pretraining' has 0 GPUs on 'h100' and "
            "cannot borrow any: its GPU jobs there are never admitted") in notes
    for team in value["teams"]:
        for quota in team["quotas"]:
            quota["gpus"] = 0
    notes = spec_notes(parse_spec(value, AWS_FILE, provider_region="us-east-1", now=NOW), NOW)
    assert ("note: node group 'h100' (16 x p5.48xlarge) is in no team's quota: only the acceptance gate and the "
            "platform can use its GPUs (add it to a team's quotas)") in notes


def test_a_group_created_at_zero_that_nothing_grows_is_warned_about() -> None:
    """A placed multi-node EFA group keeps its desired size (the autoscaler leaves it alone): at 0 it has no nodes."""
    value = spec("dev-aws")
    l4 = next(g for g in value["aws"]["nodeGroups"] if g["name"] == "l4")
    parsed = parse_spec(value, AWS_FILE.replace("prod", "dev"), provider_region="us-west-2", now=NOW)
    assert not [n for n in spec_notes(parsed, NOW) if "nothing grows it" in n]  # autoscaled from 0
    l4.update(instanceType="g5.12xlarge", capacity={"type": "on-demand"}, maxSize=4)  # 1 EFA: placed when multi-node
    parsed = parse_spec(value, AWS_FILE.replace("prod", "dev"), provider_region="us-west-2", now=NOW)
    assert ("warning: gpu-cluster:spec.aws.nodeGroups[l4].desiredSize: node group 'l4' is created at 0 nodes and "
            "nothing grows it: it is a placed multi-node EFA group, whose Kueue flavor is topology-aware, so the "
            "autoscaler leaves it alone (set placement: none to have it autoscaled without topology-aware placement, "
            "or desiredSize to the nodes it should keep)") in spec_notes(parsed, NOW)
    l4["placement"] = "none"
    parsed = parse_spec(value, AWS_FILE.replace("prod", "dev"), provider_region="us-west-2", now=NOW)
    assert not [n for n in spec_notes(parsed, NOW) if "nothing grows it" in n]


def test_an_arn_of_another_partition_is_refused() -> None:
    """A us-east-1 stack cannot map a GovCloud or China role into EKS, nor use their keys: every ARN it names is
    checked, with the partition the region needs."""
    value = spec("prod-aws")
    value["aws"]["controlPlane"]["adminRoleArns"][0] = "arn:aws-us-gov:iam::111122223333:role/platform-admin"
    value["aws"]["controlPlane"]["deployer"]["roleArn"] = "arn:aws-cn:iam::111122223333:role/pulumi-deployer"
    value["teams"][1]["roleArns"] = ["arn:aws-us-gov:iam::111122223333:role/pretraining-engineers"]
    value["aws"]["storage"]["checkpointBucket"] = {
        "existingName": "acme-checkpoints",
        "existingKmsKeyArn": "arn:aws-cn:kms:cn-north-1:111122223333:key/0f0e0d0c-0b0a-0908-0706-050403020100"}
    lines = [line for line in errors(value) if "[rule: arn-partition]" in line]
    assert lines == [
        f"{A}.aws.controlPlane.adminRoleArns[0]: 'arn:aws-us-gov:iam::111122223333:role/platform-admin' is in "
        "partition 'aws-us-gov', but region us-east-1 is in 'aws': an ARN is only usable in its own partition "
        "(arn:aws:...) [rule: arn-partition]",
        f"{A}.aws.controlPlane.deployer.roleArn: 'arn:aws-cn:iam::111122223333:role/pulumi-deployer' is in partition "
        "'aws-cn', but region us-east-1 is in 'aws': an ARN is only usable in its own partition (arn:aws:...) "
        "[rule: arn-partition]",
        f"{A}.teams[pretraining].roleArns[0]: 'arn:aws-us-gov:iam::111122223333:role/pretraining-engineers' is in "
        "partition 'aws-us-gov', but region us-east-1 is in 'aws': an ARN is only usable in its own partition "
        "(arn:aws:...) [rule: arn-partition]",
        f"{A}.aws.storage.checkpointBucket.existingKmsKeyArn: 'arn:aws-cn:kms:cn-north-1:111122223333:key/"
        "0f0e0d0c-0b0a-0908-0706-050403020100' is in partition 'aws-cn', but region us-east-1 is in 'aws': an ARN is "
        "only usable in its own partition (arn:aws:...) [rule: arn-partition]"]
    assert partition_of("us-gov-west-1") == "aws-us-gov" and partition_of("cn-north-1") == "aws-cn"
