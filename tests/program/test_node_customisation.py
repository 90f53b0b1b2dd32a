"""Node customisation on EKS node groups (issue 24): a custom AMI, kubelet settings, commands before and after
kubelet, SSH from listed networks, fewer EFA interfaces with a reason, and IPv6 clusters: the user data each AMI
reads, the resources a real apply meets, and the rules that refuse what AWS, EKS or kubelet would."""

from __future__ import annotations

import base64
import copy
import email
import ipaddress
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.policy.mutations import edit
from blueprint.policy.runner import run_policies
from components.bootstrap import (
    ClusterConnection,
    NodeBootstrap,
    al2023_user_data,
    bottlerocket_user_data,
    node_bootstrap,
    render_user_data,
)
from components.catalog import load_aws_catalog
from components.spec import SpecError, parse_spec
from tests.conftest import ROOT, offline_run, run_spec

CUSTOM = "examples/stacks/Pulumi.custom-ami-aws.yaml"
IPV6 = "examples/stacks/Pulumi.ipv6-aws.yaml"
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "stacks").glob("Pulumi.*.yaml"))
CLUSTER = ClusterConnection(name="nodes-demo", endpoint="https://ABC.gr7.us-west-2.eks.amazonaws.com",
                            certificate_authority="Q0E=", service_cidr="172.20.0.0/16")
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def spec_of(path: str) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((ROOT / path).read_text())["config"]["gpu-cluster:spec"]
    return spec


def errors(spec: dict[str, Any], path: str = CUSTOM) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, path, provider_region=spec["aws"]["region"])
    return str(info.value).splitlines()


def group(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in spec["aws"]["nodeGroups"] if g["name"] == name)


def parts(raw: str) -> list[tuple[str, str]]:
    """The (content type, body) parts of a MIME user data document."""
    out = []
    for chunk in raw.split("--//GPU-CLUSTER-BOUNDARY")[1:]:
        if chunk.startswith("--"):
            break
        head, _, body = chunk.strip("\n").partition("\n\n")
        out.append((head.removeprefix("Content-Type: "), body))
    return out


def boot_of(path: str, name: str) -> Any:
    parsed = parse_spec(spec_of(path), path, provider_region=spec_of(path)["aws"]["region"])
    g = next(g for g in parsed.aws_spec().node_groups if g.name == name)
    return node_bootstrap(g, load_aws_catalog()[g.instance_type])


@pytest.mark.parametrize("path", EXAMPLES)
def test_every_example_stack_loads_and_passes_the_pack(path: str) -> None:
    report = run_policies(offline_run(path).graph)
    assert report.passed and [v for v in report.violations if v.enforcement == "mandatory"] == [], \
        [(v.policy, v.message) for v in report.violations]
    # An example is what people copy: none carries a high-severity finding, advisory or not.
    assert [(v.policy, v.urn) for v in report.violations if v.severity in ("high", "critical")] == []


def test_a_custom_ami_joins_the_cluster_with_its_labels_taints_and_kubelet_settings() -> None:
    """EKS merges nothing into a custom AMI's user data: the NodeConfig carries the cluster's connection, the
    kubelet config and the node's labels and taints as flags; the commands run before kubelet, then after it."""
    raw = render_user_data(boot_of(CUSTOM, "l4"), CLUSTER)
    assert raw is not None
    found = parts(raw)
    kinds = [k for k, _ in found]
    assert kinds == ['text/x-shellscript; charset="us-ascii"', 'text/x-shellscript; charset="us-ascii"',
                     "application/node.eks.aws"]
    assert "nvidia-smi -pm 1" in found[0][1]
    post = found[1][1]
    assert "After=nodeadm-run.service" in post and "systemctl restart nvidia-persistenced || true" in post
    config = yaml.safe_load(found[2][1])
    assert config["spec"]["cluster"] == {"name": "nodes-demo", "apiServerEndpoint": CLUSTER.endpoint,
                                         "certificateAuthority": "Q0E=", "cidr": "172.20.0.0/16"}
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["maxPods"] == 58 and kubelet["config"]["evictionSoftGracePeriod"] == {
        "memory.available": "90s"}
    flags = kubelet["flags"]
    assert any(f.startswith("--node-labels=") and "gpu-cluster/node-group=l4" in f for f in flags)
    assert "--register-with-taints=nvidia.com/gpu=true:NoSchedule,readiness.k8s.io/gpu-node-check=pending:NoSchedule" \
        in flags
    assert len(raw.encode()) < 16384


def test_the_graph_wires_the_custom_ami_the_key_pair_and_ssh_from_the_bastion_only() -> None:
    graph = offline_run(CUSTOM).graph
    lts = {r.name: r.inputs for r in graph.of_type(LT)}
    gpu = lts["nodegroup-l4-lt"]
    assert gpu["imageId"] == "ami-0123456789abcdef0" and gpu["keyName"] == "platform-bastion"
    assert "imageId" not in lts["nodegroup-system-lt"] and "keyName" not in lts["nodegroup-system-lt"]
    ngs = {r.name: r.inputs for r in graph.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert "amiType" not in ngs["nodegroup-l4-ng"]  # EKS refuses amiType beside a launch template ImageId
    assert ngs["nodegroup-system-ng"]["amiType"] == "AL2023_x86_64_STANDARD"
    (rule,) = [r.inputs for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
               if r.name.startswith("nodegroup-l4-ssh")]
    assert (rule["cidrIpv4"], rule["fromPort"], rule["toPort"], rule["ipProtocol"]) == ("10.70.48.0/24", 22, 22,
                                                                                        "tcp")
    (ssh_sg,) = [r for r in graph.of_type("aws:ec2/securityGroup:SecurityGroup") if r.name == "nodegroup-l4-ssh"]
    assert any(ssh_sg.urn in dep or "nodegroup-l4-ssh" in dep for dep in
               next(r for r in graph.of_type(LT) if r.name == "nodegroup-l4-lt").dependencies)
    # the EKS-AMI group keeps EKS's bootstrap: its user data is only the extra NodeConfig and the command
    system = base64.b64decode(lts["nodegroup-system-lt"]["userData"]).decode()
    (_, node_config) = next(p for p in parts(system) if p[0] == "application/node.eks.aws")
    spec = yaml.safe_load(node_config)["spec"]
    assert "cluster" not in spec and spec["kubelet"]["config"]["kubeReserved"]["memory"] == "1Gi"


# The inputs of a security group EC2 cannot update in place: a change to any of them replaces the group.
SG_REPLACED_ON = ("name", "namePrefix", "description", "vpcId")


def test_changing_ssh_source_cidrs_replaces_no_security_group() -> None:
    """A bastion network added to sourceCidrs changes rules only: the SSH group keeps every input EC2 cannot update
    (a new description would replace it, and its fixed name would make the replacement fail as a duplicate)."""
    def groups(graph: Any) -> dict[str, dict[str, Any]]:
        return {r.name: {k: r.inputs.get(k) for k in SG_REPLACED_ON}
                for r in graph.of_type("aws:ec2/securityGroup:SecurityGroup")}

    spec = spec_of(CUSTOM)
    before = groups(run_spec(spec, "custom-ami-aws").graph)
    group(spec, "l4")["ssh"]["sourceCidrs"].append("10.70.49.0/24")
    changed = run_spec(spec, "custom-ami-aws").graph
    assert groups(changed) == before and before["nodegroup-l4-ssh"]["description"] == "SSH to nodes-demo-l4 nodes"
    rules = {r.inputs["cidrIpv4"]: r.inputs["description"] for r in
             changed.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
             if r.name.startswith("nodegroup-l4-ssh")}
    assert rules == {"10.70.48.0/24": "SSH from 10.70.48.0/24", "10.70.49.0/24": "SSH from 10.70.49.0/24"}


def test_bottlerocket_gets_its_settings_in_toml() -> None:
    spec = spec_of(CUSTOM)
    g = group(spec, "system")
    g.update(amiType="BOTTLEROCKET_x86_64", preBootstrapCommands=[])
    g["kubelet"]["maxPods"] = 40  # EKS's Bottlerocket settings are overridden by the user's
    parsed = parse_spec(spec, CUSTOM, provider_region="us-west-2")
    ng = next(x for x in parsed.aws_spec().node_groups if x.name == "system")
    boot = node_bootstrap(ng, load_aws_catalog()[ng.instance_type])
    settings = tomllib.loads(bottlerocket_user_data(boot) or "")["settings"]["kubernetes"]
    assert settings["max-pods"] == 40 and settings["kube-reserved"]["memory"] == "1Gi"
    assert settings["eviction-hard"]["memory.available"] == "500Mi" and "cluster-name" not in settings
    custom = tomllib.loads(bottlerocket_user_data(boot, CLUSTER) or "")["settings"]["kubernetes"]
    assert custom["cluster-dns-ip"] == "172.20.0.10" and custom["api-server"] == CLUSTER.endpoint
    assert not boot.raid0_local_nvme  # nodeadm's RAID0 is AL2023's; Bottlerocket is not configured by it


def test_bottlerocket_ssh_enables_the_admin_container() -> None:
    """Bottlerocket's SSH server is its admin host container, off by default: a key pair alone opens nothing."""
    spec = spec_of(CUSTOM)
    g = group(spec, "system")
    g.update(amiType="BOTTLEROCKET_x86_64", preBootstrapCommands=[],
             ssh={"keyName": "ops", "sourceCidrs": ["10.70.48.0/24"]})
    del g["kubelet"]
    parsed = parse_spec(spec, CUSTOM, provider_region="us-west-2")
    ng = next(x for x in parsed.aws_spec().node_groups if x.name == "system")
    boot = node_bootstrap(ng, load_aws_catalog()[ng.instance_type])
    settings = tomllib.loads(bottlerocket_user_data(boot) or "")["settings"]
    assert settings == {"host-containers": {"admin": {"enabled": True}}}
    g.pop("ssh")
    parsed = parse_spec(spec, CUSTOM, provider_region="us-west-2")
    ng = next(x for x in parsed.aws_spec().node_groups if x.name == "system")
    assert bottlerocket_user_data(node_bootstrap(ng, load_aws_catalog()[ng.instance_type])) is None


def test_bottlerocket_sizes_and_encrypts_its_data_volume() -> None:
    """rootVolumeGiB lands on Bottlerocket's data volume /dev/xvdb, not its OS volume; both encrypted."""
    run = offline_run("examples/stacks/Pulumi.bottlerocket-aws.yaml")
    lt = {r.name: r.inputs for r in run.graph.of_type(LT)}["nodegroup-system-lt"]
    devices = {m["deviceName"]: m["ebs"] for m in lt["blockDeviceMappings"]}
    assert devices["/dev/xvdb"]["volumeSize"] == 50 and "volumeSize" not in devices["/dev/xvda"]
    assert all(d["encrypted"] == "true" for d in devices.values())
    al2023 = {r.name: r.inputs for r in offline_run(CUSTOM).graph.of_type(LT)}["nodegroup-l4-lt"]
    assert [m["deviceName"] for m in al2023["blockDeviceMappings"]] == ["/dev/xvda"]


def test_nothing_to_configure_writes_no_user_data() -> None:
    assert al2023_user_data(boot_of(IPV6, "l4")) is None


@pytest.mark.parametrize(("change", "expected"), [
    (lambda s: group(s, "system")["kubelet"].update(maxPods=50),
     ".aws.nodeGroups[system].kubelet.maxPods: on the EKS AL2023 AMI, EKS appends its own NodeConfig with maxPods "
     "after the launch template's user data, and the later one wins (eksctl refuses maxPodsPerNode on AL2023 managed "
     "nodes for this reason, eksctl #8037): set maxPods with a custom AMI (amiId), or leave it to EKS "
     "[rule: kubelet-max-pods-custom-ami]"),
    (lambda s: group(s, "l4")["kubelet"].pop("evictionSoftGracePeriod"),
     ".aws.nodeGroups[l4].kubelet.evictionSoftGracePeriod: evictionSoft.memory.available needs a grace period in "
     "evictionSoftGracePeriod (kubelet refuses a soft threshold without one) [rule: kubelet-soft-eviction]"),
    (lambda s: group(s, "l4")["kubelet"].pop("evictionSoft"),
     ".aws.nodeGroups[l4].kubelet.evictionSoftGracePeriod: a grace period for memory.available, which has no "
     "evictionSoft threshold [rule: kubelet-soft-eviction]"),
    (lambda s: group(s, "l4").setdefault("labels", {}).update({"kubernetes.io/hostname": "gpu-1"}),
     ".aws.nodeGroups[l4].labels[\"kubernetes.io/hostname\"]: 'kubernetes.io/hostname': the kubelet sets this "
     "label from the node itself (its name, OS, architecture, type or zone); a group's value would give every node "
     "the same one: leave it out, or use a label of your own (gpu-cluster/) [rule: kubelet-node-label]"),
    (lambda s: group(s, "l4")["kubelet"]["evictionHard"].update({"nodefs.available": "150%"}),
     ".aws.nodeGroups[l4].kubelet.evictionHard.nodefs.available: 150% is above 100 % (kubelet refuses it and does "
     "not start) [rule: kubelet-eviction-threshold]"),
    (lambda s: group(s, "l4")["kubelet"]["evictionSoft"].update({"memory.available": "0Mi"}),
     ".aws.nodeGroups[l4].kubelet.evictionSoft.memory.available: 0Mi: an amount of zero (kubelet refuses it and "
     "does not start; 0% turns the threshold off) [rule: kubelet-eviction-threshold]"),
    (lambda s: group(s, "system")["kubelet"]["kubeReserved"].update(memory="32Gi"),
     ".aws.nodeGroups[system].kubelet: kubeReserved, systemReserved and evictionHard together hold back 32.9883 GiB "
     "of memory, and m6i.2xlarge has 32 GiB: nothing would be left for pods [rule: kubelet-reserved-fits]"),
    (lambda s: group(s, "system").update(amiType="BOTTLEROCKET_x86_64"),
     ".aws.nodeGroups[system].preBootstrapCommands: Bottlerocket runs no shell user data (its bootstrap containers "
     "and apiclient commands take their place, and are not built here): use an AL2023 AMI type or drop the commands "
     "[rule: bootstrap-commands-al2023]"),
    (lambda s: group(s, "l4")["ssh"].update(sourceCidrs=["0.0.0.0/1", "128.0.0.0/1"]),
     ".aws.nodeGroups[l4].ssh.sourceCidrs: sourceCidrs (0.0.0.0/1, 128.0.0.0/1) open SSH to the whole internet: "
     "list the networks of your bastion or VPN (Session Manager needs no open port) [rule: ssh-not-open]"),
    (lambda s: group(s, "l4").update(efaInterfaces=2),
     ".aws.nodeGroups[l4].efaInterfaces: g6.xlarge has no EFA interface (catalog: "
     f"{load_aws_catalog()['g6.xlarge'].efa_interfaces.source}) [rule: efa-interfaces-fit]"),
    (lambda s: group(s, "l4").update(preBootstrapCommands=["echo " + "x" * 4000] * 5),
     ".aws.nodeGroups[l4]: the group's user data takes 24,176 bytes with the cluster's connection details, over "
     "EC2's 16,384-byte limit: shorten the bootstrap commands (fetch a script instead) [rule: user-data-size]"),
])
def test_node_customisation_rules(change: Any, expected: str) -> None:
    spec = spec_of(CUSTOM)
    change(spec)
    assert f"{CUSTOM}: gpu-cluster:spec{expected}" in errors(spec), errors(spec)


def prod_with_efa(count: int | None, reason: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((ROOT / "stacks/Pulumi.prod-aws.yaml").read_text())["config"][
        "gpu-cluster:spec"]
    h100 = group(spec, "h100")
    if count is not None:
        h100["efaInterfaces"] = count
    if reason is not None:
        h100["efaInterfacesReason"] = reason
    return spec


@pytest.mark.parametrize(("count", "reason", "expected"), [
    (33, None, ".aws.nodeGroups[h100].efaInterfaces: p5.48xlarge has 32 EFA interfaces, not 33 "
               "[rule: efa-interfaces-fit]"),
    (16, None, ".aws.nodeGroups[h100].efaInterfacesReason: efaInterfaces 16 wires fewer than the 32 EFA interfaces "
               "of p5.48xlarge, which caps the node's inter-node bandwidth: say why in efaInterfacesReason "
               "[rule: efa-interfaces-reason]"),
    (None, "because", ".aws.nodeGroups[h100].efaInterfacesReason: efaInterfacesReason explains efaInterfaces below "
                      "the type's count; it is set without such a count [rule: efa-interfaces-reason]"),
])
def test_efa_interface_count_rules(count: int | None, reason: str | None, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(prod_with_efa(count, reason), "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
    assert f"stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec{expected}" in str(info.value).splitlines()


def test_fewer_efa_interfaces_are_wired_labelled_and_accepted_with_their_reason() -> None:
    graph = run_spec(prod_with_efa(16, "one EFA per GPU pair, matching the team's NCCL topology file"),
                     "prod-aws").graph
    (lt,) = [r for r in graph.of_type(LT) if r.name == "nodegroup-h100-lt"]
    efa = [ni for ni in lt.inputs["networkInterfaces"] if ni.get("interfaceType") in ("efa", "efa-only")]
    assert len(efa) == 16 and lt.inputs["tags"]["efa-interfaces-reason"].startswith("one EFA per GPU pair")
    (ng,) = [r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.name == "nodegroup-h100-ng"]
    assert ng.inputs["labels"]["gpu-cluster/efa-interfaces"] == "16"
    wired = "aws-efa-node-groups-wire-all-interfaces"
    assert wired not in {v.policy for v in run_policies(graph).violations}
    untagged = edit(graph, LT, "nodegroup-h100-lt", lambda i: i["tags"].pop("efa-interfaces-reason"))
    assert wired in {v.policy for v in run_policies(untagged).violations}


def test_an_ipv6_cluster_is_dual_stack_with_egress_only_routes_and_ipv6_grants() -> None:
    graph = offline_run(IPV6).graph
    (vpc,) = graph.of_type("aws:ec2/vpc:Vpc")
    assert vpc.inputs["assignGeneratedIpv6CidrBlock"] is True
    subnets = graph.of_type("aws:ec2/subnet:Subnet")
    assert subnets and all(s.inputs["assignIpv6AddressOnCreation"] is True for s in subnets)
    assert len(graph.of_type("aws:ec2/egressOnlyInternetGateway:EgressOnlyInternetGateway")) == 1
    v6_routes = {r.name: r.inputs for r in graph.of_type("aws:ec2/route:Route")
                 if r.inputs.get("destinationIpv6CidrBlock") == "::/0"}
    assert "network-route-public-igw-ipv6" in v6_routes
    assert any("egressOnlyGatewayId" in r for r in v6_routes.values())
    (cluster,) = graph.of_type("aws:eks/cluster:Cluster")
    assert cluster.inputs["kubernetesNetworkConfig"] == {"ipFamily": "ipv6"}
    attached = {r.inputs["policyArn"] for r in graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if r.name.startswith("control-plane-node-policy")}
    assert "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy" not in attached
    (cni,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "control-plane-node-cni-ipv6"]
    assert "ec2:AssignIpv6Addresses" in cni.inputs["policy"]
    policies = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy") if r.inputs["metadata"]["namespace"] == "applied"}
    assert {"ipBlock": {"cidr": "::/0"}} in policies["allow-https-egress"]["egress"][0]["to"]
    assert policies["allow-pod-identity-agent-ipv6"]["egress"][0]["to"] == [{"ipBlock": {"cidr": "fd00:ec2::23/128"}}]
    # an IPv4 stack is untouched
    ipv4 = offline_run("dev-aws").graph
    assert "assignGeneratedIpv6CidrBlock" not in ipv4.of_type("aws:ec2/vpc:Vpc")[0].inputs


def test_an_ipv6_cluster_with_a_custom_bottlerocket_ami_gets_the_cluster_dns_of_its_ipv6_service_block() -> None:
    """EKS chooses an IPv6 cluster's service block; a custom AMI's node reads the cluster DNS address from it (::a).
    This stack stopped with an internal error: the offline engine returned no block."""
    spec = spec_of(IPV6)
    system = group(spec, "system")
    system.update(amiId="ami-0123456789abcdef0", amiType="BOTTLEROCKET_x86_64", amiKubernetesVersion="1.35")
    graph = run_spec(spec, "ipv6-aws").graph
    (lt,) = [r for r in graph.of_type(LT) if r.name == "nodegroup-system-lt"]
    settings = tomllib.loads(base64.b64decode(lt.inputs["userData"]).decode())["settings"]["kubernetes"]
    dns = ipaddress.ip_address(settings["cluster-dns-ip"])
    # The tenth address of a /108 (20 host bits) of the unique local range.
    assert dns in ipaddress.ip_network("fc00::/7") and int(dns) % 2**20 == 10


def test_a_subnet_added_at_the_front_moves_no_other_subnets_ipv6_block() -> None:
    """Each subnet's /64 follows from its IPv4 CIDR, not its place in the list: EC2 refuses to move a block whose
    addresses are in use."""
    def blocks(spec: dict[str, Any]) -> dict[str, str]:
        return {r.name.removeprefix("network-subnet-"): r.inputs["ipv6CidrBlock"]
                for r in run_spec(spec, "ipv6-aws").graph.of_type("aws:ec2/subnet:Subnet")}

    spec = spec_of(IPV6)
    before = blocks(spec)
    spec["aws"]["network"]["subnets"].insert(
        0, {"name": "public-b", "cidr": "10.80.49.0/24", "availabilityZone": "us-east-1b", "role": "public"})
    after = blocks(spec)
    assert {name: after[name] for name in before} == before
    assert len(set(after.values())) == len(after) == 5
    assert before["gpu-a"].endswith("00::/64") and after["public-b"].endswith("31::/64")  # 10.80.49.0 is /24 no. 49


@pytest.mark.parametrize(("change", "expected"), [
    (lambda s: s["aws"]["storage"].update(filesystem={"deploymentType": "SCRATCH_2", "capacityGiB": 1200}),
     ".aws.network.ipFamily: FSx for Lustre is not supported on IPv6 EKS clusters (EKS user guide, cni-ipv6 "
     "considerations; a Lustre file system has no IPv6 network type): remove storage.filesystem (checkpoints through "
     "the bucket) or use ipv4 [rule: ipv6-cluster]"),
    (lambda s: s["aws"]["network"]["subnets"].__setitem__(
        slice(None), [{**sn, "availabilityZone": "us-east-1a"} for sn in s["aws"]["network"]["subnets"]]),
     ".aws.network.subnets: EKS needs private (gpu or system) subnets in at least two availability zones: the control "
     "plane's network interfaces go in the cluster's subnets, which must span two zones (EKS CreateCluster, network "
     "requirements); a single-zone GPU group is fine, add a small system subnet in a second zone "
     "[rule: eks-two-zones]"),
])
def test_ipv6_and_zone_rules(change: Any, expected: str) -> None:
    spec = spec_of(IPV6)
    change(spec)
    assert f"{IPV6}: gpu-cluster:spec{expected}" in errors(spec, IPV6), errors(spec, IPV6)


def test_an_ipv6_cluster_cannot_adopt_an_existing_vpc() -> None:
    spec = copy.deepcopy(spec_of(IPV6))
    spec["aws"]["network"]["existing"] = {"vpcId": "vpc-0123456789abcdef0"}
    for i, sn in enumerate(spec["aws"]["network"]["subnets"]):
        sn["id"] = f"subnet-0123456789abcdef{i}"
    assert any("[rule: ipv6-cluster]" in line and "network.existing" in line for line in errors(spec, IPV6))


def test_the_preview_says_what_changes_on_the_node(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", CUSTOM]) == 0
    out = capsys.readouterr().out
    assert "l4: custom AMI ami-0123456789abcdef0" in out and "SSH with key pair platform-bastion" in out
    assert "after nodeadm-run" in out and "maxPods 58" in out
    assert Path(ROOT / CUSTOM).is_file()


def test_support_costs_beyond_any_cluster_are_refused() -> None:
    """Issue 35: ``supportUsdPerMonth: 1e300`` was accepted and printed as money."""
    from components.spec import SpecError, parse_spec
    from tests.conftest import raw_stack_config

    spec = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    spec["workload"]["economics"]["supportUsdPerMonth"] = 1e300
    with pytest.raises(SpecError, match=r"economics\.supportUsdPerMonth: Input should be less than or equal to "
                                        r"1000000000 \[rule: schema-type\]"):
        parse_spec(spec, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")


HOSTILE_LINES = ("--//GPU-CLUSTER-BOUNDARY", "--//GPU-CLUSTER-BOUNDARY--", "GPU_CLUSTER_EOF", "GPU_CLUSTER_EOF-1")


def test_no_command_can_end_the_mime_part_or_the_heredoc_it_is_written_in(tmp_path: Path) -> None:
    """A command holding the generator's MIME boundary or heredoc terminator stays inside its part and its file: a
    MIME reader (Python's, as cloud-init uses) sees the same three parts, and bash writes the whole script."""
    pre = ("echo before", *HOSTILE_LINES)
    post = ("echo after", *HOSTILE_LINES, "echo last")
    raw = al2023_user_data(NodeBootstrap(os="al2023", pre_commands=pre, post_commands=post), CLUSTER)
    assert raw is not None
    message = email.message_from_string(raw)
    found = [(p.get_content_type(), str(p.get_payload())) for p in message.walk() if not p.is_multipart()]
    assert [t for t, _ in found] == ["text/x-shellscript", "text/x-shellscript", "application/node.eks.aws"]
    assert all(line in found[0][1].splitlines() for line in pre)
    assert yaml.safe_load(found[2][1])["kind"] == "NodeConfig"
    # Run the post-bootstrap part's writer with its paths moved under tmp_path; systemctl is left out.
    writer = found[1][1].replace("/usr/local/bin/", f"{tmp_path}/").replace("/etc/systemd/system/", f"{tmp_path}/")
    writer = writer.split("systemctl daemon-reload")[0]
    subprocess.run(["bash", "-c", writer], check=True)
    written = (tmp_path / "gpu-cluster-post-bootstrap.sh").read_text().splitlines()
    assert written[2:] == list(post)
    assert "ExecStart=" in (tmp_path / "gpu-cluster-post-bootstrap.service").read_text()


def test_raid0_of_the_local_nvme_is_accepted_on_p5en() -> None:
    """p5en.48xlarge has 8 NVMe disks of 3,800 GB (catalog, secondary): localNvme raid0 was refused because the
    catalog did not know its disks."""
    spec = spec_of("stacks/Pulumi.prod-aws.yaml")
    h100 = group(spec, "h100")
    h100["instanceType"] = "p5en.48xlarge"
    assert h100["localNvme"] == "raid0"
    # The acceptance catalog publishes no p5en figure: the gate takes the team's own baseline.
    spec["acceptance"]["expected"] = [{"nodeGroup": "h100", "nodes": n, "busbwGbps": 300, "source": "our baseline"}
                                      for n in (1, 16)]
    parsed = parse_spec(spec, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
    g = next(g for g in parsed.aws_spec().node_groups if g.name == "h100")
    facts = load_aws_catalog()["p5en.48xlarge"]
    assert (facts.nvme_disks, facts.nvme_disk_gb) == (8, 3800)
    assert node_bootstrap(g, facts).raid0_local_nvme
