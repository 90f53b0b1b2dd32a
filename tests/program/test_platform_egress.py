"""Every namespace the platform creates denies egress by default and allows what its components need; on EKS no
pod off the host network can reach the instance metadata service (hop limit 1, and no egress to it)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from blueprint.graph.model import ResourceGraph
from components.kubernetes.objects import PlatformEgress, platform_network_policies
from components.kubernetes.objects.common import EgressRule
from tests.conftest import AWS_STACKS, SHIPPED_STACKS, offline_run

NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
KUBERNETES_OWN = {"kube-system", "kube-public", "kube-node-lease", "default"}
IMDS = ipaddress.ip_address("169.254.169.254")


def _policies(graph: ResourceGraph) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in graph.of_type(NETPOL):
        meta = r.inputs["metadata"]
        out.setdefault(meta["namespace"], {})[meta["name"]] = r.inputs["spec"]
    return out


def _platform_namespaces(graph: ResourceGraph) -> list[str]:
    names = []
    for ns in graph.of_type("kubernetes:core/v1:Namespace"):
        meta = ns.inputs["metadata"]
        if meta["name"] not in KUBERNETES_OWN and meta.get("labels", {}).get("gpu-cluster/tenant") != "true":
            names.append(meta["name"])
    return names


@pytest.mark.parametrize("stack_name", SHIPPED_STACKS)
def test_every_platform_namespace_denies_egress_by_default(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    policies = _policies(graph)
    namespaces = _platform_namespaces(graph)
    assert {"monitoring", "kueue-system"} <= set(namespaces)
    for ns in [*namespaces, "mpi-operator"]:  # mpi-operator: created by the operator's pinned manifest
        mine = policies.get(ns, {})
        assert mine.get("default-deny-egress") == {"podSelector": {}, "policyTypes": ["Egress"]}, ns
        assert {"allow-dns", "allow-cluster-pods", "allow-https"} <= set(mine), (ns, sorted(mine))
        assert mine["allow-https"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 443}]
        for name, spec in mine.items():
            for rule in spec.get("egress", []):
                assert rule.get("to") or rule.get("ports"), (ns, name)  # never every address on every port


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_no_platform_or_team_pod_reaches_the_instance_metadata_service(stack_name: str) -> None:
    """The node role lives behind 169.254.169.254:80: no egress rule of any namespace allows it (the Pod Identity
    agent, 169.254.170.23, is what pods get credentials from), and the launch templates' hop limit is 1."""
    graph = offline_run(stack_name).graph
    for ns, specs in _policies(graph).items():
        for name, spec in specs.items():
            for rule in spec.get("egress", []):
                ports = {p.get("port") for p in rule.get("ports", [])}
                for peer in rule.get("to", []):
                    cidr = peer.get("ipBlock", {}).get("cidr")
                    if cidr is None or ":" in cidr:
                        continue
                    network = ipaddress.ip_network(cidr)
                    if IMDS in network and network.prefixlen > 0:
                        pytest.fail(f"{ns}/{name} allows {cidr} (the instance metadata service)")
                    if IMDS in network:  # 0.0.0.0/0: only on named ports, never the metadata port
                        assert ports and 80 not in ports, (ns, name, ports)
    for lt in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1, lt.name
        assert lt.inputs["metadataOptions"]["httpTokens"] == "required", lt.name


def test_monitoring_reaches_the_nodes_and_the_smtp_server_and_slurm_its_database() -> None:
    aws = _policies(offline_run("prod-aws-slurm").graph)
    # the VPC (stacks/Pulumi.prod-aws-slurm.yaml vpcCidr): the kubelets and the host-network exporters
    scrape = [{"protocol": "TCP", "port": p} for p in (9100, 9102, 10249, 10250)]
    assert aws["monitoring"]["allow-node-exporters"]["egress"] == [
        {"to": [{"ipBlock": {"cidr": "10.40.0.0/16"}}], "ports": scrape}]
    assert aws["monitoring"]["allow-smtp"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 587}]
    db = aws["slurm"]["allow-accounting-database"]["egress"][0]
    assert db["ports"] == [{"protocol": "TCP", "port": 3306}]
    assert {p["ipBlock"]["cidr"] for p in db["to"]} == {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}
    assert {(p["protocol"], p["port"]) for p in aws["slurm"]["allow-directory"]["egress"][0]["ports"]} == {
        ("TCP", 389), ("TCP", 636), ("TCP", 3268), ("TCP", 3269), ("TCP", 88), ("TCP", 464),
        ("UDP", 389), ("UDP", 88), ("UDP", 464)}
    gcp = _policies(offline_run("prod-gcp").graph)
    # Cilium does not match nodes by CIDR: the scrape ports to any destination, never every port
    assert gcp["monitoring"]["allow-node-exporters"]["egress"] == [{"ports": scrape}]
    assert "allow-gke-metadata-server" in gcp["monitoring"]  # Workload Identity's tokens come from it


def test_the_egress_policies_follow_what_the_cloud_gives() -> None:
    egress = PlatformEgress(anywhere=("0.0.0.0/0", "::/0"),
                            agents=(EgressRule(name="allow-agent", cidr="169.254.170.23/32", port=80),),
                            node_cidrs=("10.1.0.0/16",), smtp_ports=(465, 587, 587))
    mon = {m["metadata"]["name"]: m["spec"] for m in platform_network_policies("monitoring", egress)}
    assert mon["allow-smtp"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 465},
                                                       {"protocol": "TCP", "port": 587}]
    assert [p["ipBlock"]["cidr"] for p in mon["allow-https"]["egress"][0]["to"]] == ["0.0.0.0/0", "::/0"]
    assert mon["allow-agent"]["egress"][0]["to"] == [{"ipBlock": {"cidr": "169.254.170.23/32"}}]
    queue = {m["metadata"]["name"] for m in platform_network_policies("kueue-system", egress)}
    assert queue == {"default-deny-egress", "allow-dns", "allow-cluster-pods", "allow-https", "allow-agent"}
    bare = {m["metadata"]["name"]: m["spec"] for m in platform_network_policies("monitoring", PlatformEgress())}
    assert "allow-smtp" not in bare and "to" not in bare["allow-node-exporters"]["egress"][0]
