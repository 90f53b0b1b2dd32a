"""A3 Ultra / A4 GPU networks with the second gVNIC network's subnet sized on its own (gcp.network.
gvnicSubnetPrefixLength), as cluster-toolkit's A3 Ultra blueprint lays them out: a /18 for the gVNIC network beside a
/18 split into 8 RDMA subnets (examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml and modules/network/gpu-rdma-vpc
cidrsubnet(ip_range, ceil(log2(8)), i) @1047080, 2026-06-25). Unset, the layout stays nine subnets of one size."""

from __future__ import annotations

import copy
import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.cli import main
from blueprint.graph.model import ResourceGraph
from components.spec import SpecError, parse_spec
from components.spec.decisions import gpu_subnet_layout
from tests.conftest import ROOT, raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-gcp.yaml"
P = f"{FILE}: gpu-cluster:spec"
SUBNET = "gcp:compute/subnetwork:Subnetwork"


@pytest.fixture
def spec() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])


def ultra(spec: dict[str, Any], **network: Any) -> dict[str, Any]:
    spec["gcp"]["nodePools"][1].update(machineType="a3-ultragpu-8g", diskType="hyperdisk-balanced")
    spec["gcp"]["network"].update(network)
    return spec


def errors(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec, FILE, provider_region="us-central1")
    return str(info.value).splitlines()


def gpu_subnets(graph: ResourceGraph) -> dict[str, str]:
    return {r.inputs["name"]: r.inputs["ipCidrRange"] for r in graph.of_type(SUBNET)
            if "gpunet" in r.inputs["name"] or "rdma" in r.inputs["name"]}


def test_the_gvnic_subnet_takes_its_own_size_and_the_rdma_subnets_follow_it(spec: dict[str, Any]) -> None:
    # cluster-toolkit's sizes: a /18 for the gVNIC network, eight /21 RDMA subnets (a /18 split in 8)
    ultra(spec, gpuNetworksCidr="192.168.0.0/16", gvnicSubnetPrefixLength=18, gpuSubnetPrefixLength=21)
    graph = run_spec(spec, "prod-gcp").graph
    assert gpu_subnets(graph) == {
        "prod-train-gke-gpunet-0-subnet": "192.168.0.0/18",
        **{f"prod-train-gke-rdma-sub-{i}": f"192.168.{64 + 8 * i}.0/21" for i in range(8)}}
    # the gVNIC network's firewall admits its own subnet
    (rule,) = [r for r in graph.of_type("gcp:compute/firewall:Firewall")
               if r.inputs["name"] == "prod-train-gke-gpunet-0-internal"]
    assert rule.inputs["sourceRanges"] == ["192.168.0.0/18"]
    # the pool is wired to the same nine networks
    (pool,) = [r for r in graph.of_type("gcp:container/nodePool:NodePool") if r.inputs["name"] == "h100"]
    assert len(pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 9


def test_unset_keeps_nine_subnets_of_one_size(spec: dict[str, Any]) -> None:
    ultra(spec)
    assert list(gpu_subnets(run_spec(spec, "prod-gcp").graph).values()) == [
        "192.168.0.0/24", *(f"192.168.{i}.0/24" for i in range(1, 9))]
    base = ipaddress.ip_network("192.168.0.0/20")
    assert gpu_subnet_layout(str(base), 9, 24) == [str(n) for n in list(base.subnets(new_prefix=24))[:9]]


@pytest.mark.parametrize(("cidr", "prefix", "gvnic"), [
    ("192.168.0.0/16", 21, 18), ("192.168.0.0/20", 24, 26), ("10.0.0.0/8", 29, 9), ("10.64.0.0/16", 20, 18),
    ("10.64.0.0/16", 24, 24)])
def test_the_gvnic_and_rdma_subnets_never_overlap_and_stay_in_the_range(cidr: str, prefix: int, gvnic: int) -> None:
    layout = [ipaddress.ip_network(n) for n in gpu_subnet_layout(cidr, 9, prefix, gvnic)]
    assert len(layout) == 9
    assert layout[0].prefixlen == gvnic and {n.prefixlen for n in layout[1:]} == {prefix}
    assert all(n.subnet_of(ipaddress.ip_network(cidr)) for n in layout)  # type: ignore[arg-type]
    assert not any(a.overlaps(b) for i, a in enumerate(layout) for b in layout[i + 1:])


def test_only_rdma_machine_types_size_a_gvnic_subnet(spec: dict[str, Any]) -> None:
    spec["gcp"]["network"]["gvnicSubnetPrefixLength"] = 22
    assert errors(spec) == [
        f"{P}.gcp.network.gvnicSubnetPrefixLength: only RDMA machine types (A3 Ultra, A4) have a second gVNIC network "
        "to size apart; a3-megagpu-8g uses GPUDirect-TCPXO, whose networks all take gpuSubnetPrefixLength: remove "
        "gvnicSubnetPrefixLength [rule: gvnic-subnet-rdma-only]"]
    dev = copy.deepcopy(raw_stack_config("dev-gcp")["gpu-cluster:spec"])
    dev["gcp"]["network"]["gvnicSubnetPrefixLength"] = 22
    assert errors(dev) == [
        f"{P}.gcp.network.gvnicSubnetPrefixLength: no node pool has a GPUDirect machine type, so there are no GPU "
        "networks to address [rule: gpu-networks-required]"]


def test_the_gvnic_prefix_is_one_gcp_creates(spec: dict[str, Any]) -> None:
    ultra(spec, gvnicSubnetPrefixLength=30)
    (line,) = errors(spec)
    assert line.startswith(f"{P}.gcp.network.gvnicSubnetPrefixLength: GCP creates IPv4 subnets from /4 to /29 ")
    assert line.endswith("got /30 [rule: gpu-subnet-prefix-range]")


def test_the_gvnic_subnet_and_the_rdma_subnets_fit_in_the_range(spec: dict[str, Any]) -> None:
    ultra(spec, gvnicSubnetPrefixLength=18)  # gpuNetworksCidr 192.168.0.0/20
    assert errors(spec) == [
        f"{P}.gcp.network.gvnicSubnetPrefixLength: the gVNIC network's /18 subnet is larger than gpuNetworksCidr "
        "'192.168.0.0/20': give a /18 or larger range, or a longer prefix [rule: gpu-networks-cidr-size]"]
    ultra(spec, gvnicSubnetPrefixLength=21, gpuSubnetPrefixLength=23)
    assert errors(spec) == [
        f"{P}.gcp.network.gpuNetworksCidr: the gVNIC network's /21 subnet and 8 RDMA subnets of /23 do not fit in "
        "'192.168.0.0/20': beside the /21 it holds 4 /23; give a /19 or larger [rule: gpu-networks-cidr-size]"]
    spec["gcp"]["network"]["gpuNetworksCidr"] = "192.168.0.0/19"
    parse_spec(spec, FILE, provider_region="us-central1")


def test_the_gvnic_subnet_holds_the_pools_nodes(spec: dict[str, Any]) -> None:
    ultra(spec, gvnicSubnetPrefixLength=29)  # 8 addresses, 4 usable; the pool reaches 16 nodes
    assert errors(spec) == [
        f"{P}.gcp.network.gvnicSubnetPrefixLength: the GPUDirect pools reach 16 nodes, and the gVNIC network's /29 "
        "subnet holds 4 (four addresses of a subnet are reserved): use 27 or less (a /27 holds 28) "
        "[rule: gpu-network-subnet-size]"]


def test_a_stack_file_with_a_bad_gvnic_subnet_exits_2_before_anything_is_registered(
        tmp_path: Path, spec: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load((ROOT / FILE).read_text())
    doc["config"]["gpu-cluster:spec"] = ultra(spec, gvnicSubnetPrefixLength=18)
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["graph", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"error: {path}: gpu-cluster:spec.gcp.network.gvnicSubnetPrefixLength: the gVNIC network's /18 "
                   "subnet is larger than gpuNetworksCidr '192.168.0.0/20': give a /18 or larger range, or a longer "
                   "prefix [rule: gpu-networks-cidr-size]\n")
