"""The GCP network plane: the cluster VPC (nodes, pods and services ranges, Private Google Access, flow logs),
Cloud NAT for private nodes, the firewall, private service access for Managed Lustre and Cloud SQL (Slurm's
accounting database), the extra GPU networks a GPUDirect machine type needs, and, with inference.gateway, what GKE's
internal Application Load Balancer needs in the VPC (proxy-only subnet, reserved address, firewall rules).

GPU networks, per flavour (cluster-toolkit examples gke-a3-highgpu, gke-a3-megagpu, gke-a3-ultragpu; GKE
"Maximize GPU network bandwidth with GPUDirect and multi-networking"):
- TCPX (A3 High) and TCPXO (A3 Mega): one VPC per GPU NIC (4 or 8), one subnet each, MTU 8244, internal traffic
  allowed; the primary VPC gets the same MTU.
- RDMA (A3 Ultra, A4): one more gVNIC VPC, and one VPC on the zone's RoCE network profile with one subnet per CX-7
  NIC (8) and no firewall rules (a RoCE VPC refuses them), MTU 8896. The gVNIC VPC's subnet may be sized apart from
  the RDMA subnets (gcp.network.gvnicSubnetPrefixLength: cluster-toolkit gke-a3-ultragpu gives it a /18 beside a /18
  split into the 8 RDMA subnets); the layout is decisions.gpu_subnet_layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.gcp.platform import GpuNetwork
from components.gcp.serving_gateway import (
    HEALTH_CHECK_PORTS,
    HEALTH_CHECK_RANGES,
    PROXY_PORTS,
    gateway_address_name,
    gateway_ip,
)
from components.spec.decisions import DEFAULT_GPU_SUBNET_PREFIX, gpu_network_count, gpu_subnet_layout
from components.spec.gcp import GcpSpec

# GCP's default VPC MTU (VPC "Maximum transmission unit": 1460 bytes unless set).
DEFAULT_MTU = 1460


@dataclass(frozen=True)
class GpuNetworkPlan:
    """The GPU networks of a stack: flavour, NIC count and MTU (from the catalog), and the ranges they take."""

    flavour: str  # TCPX, TCPXO or RDMA
    nics: int
    mtu: int
    cidr: str
    prefix: int = DEFAULT_GPU_SUBNET_PREFIX
    gvnic_prefix: int | None = None  # RDMA: the gVNIC network's subnet sized on its own (gvnicSubnetPrefixLength)

    def subnets(self) -> list[str]:
        """One subnet per network, in order from the start of ``cidr`` (TCPX/TCPXO: one per VPC; RDMA: the gVNIC
        VPC's, then 8 RoCE subnets), each of ``prefix`` unless ``gvnic_prefix`` sizes the gVNIC one."""
        return gpu_subnet_layout(self.cidr, gpu_network_count(self.flavour, self.nics), self.prefix,
                                 self.gvnic_prefix if self.flavour == "RDMA" else None)


class GcpNetwork(pulumi.ComponentResource):
    """The cluster's VPC and subnet, Cloud NAT, firewall, private service access and the GPU networks.

    Attributes:
        network_self_link / network_name: the cluster VPC.
        subnet_self_link: the cluster subnet (nodes; pods and services as secondary ranges).
        gpu_networks: the GPU networks as node pools wire them and pods name them.
        psa_connection: the private service access peering Managed Lustre and Cloud SQL need (None without it).
        psa_range_name: the peering's allocated range (Cloud SQL takes its private IP from it; None without it).
        gateway_address: the served models' gateway's reserved address name (None without a gateway).
        gateway_ready: the gateway's proxy-only subnet, address and firewall rules (empty without a gateway).
    """

    network_self_link: pulumi.Output[str]
    network_name: pulumi.Output[str]
    network_id: pulumi.Output[str]
    subnet_self_link: pulumi.Output[str]
    gpu_networks: list[tuple[GpuNetwork, pulumi.Output[str], pulumi.Output[str]]]
    psa_connection: Optional[pulumi.Resource]
    psa_range_name: Optional[pulumi.Output[str]]
    gateway_address: Optional[str]
    gateway_ready: tuple[pulumi.Resource, ...]

    def __init__(self, name: str, *, spec: GcpSpec, prefix: str, labels: Mapping[str, str],
                 gpu_plan: GpuNetworkPlan | None, private_service_access: bool,
                 lustre_port: int | None, serving_gateway: bool = False, after: Sequence[pulumi.Resource] = (),
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:network:GcpNetwork", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        net = spec.network
        # TCPX/TCPXO want the primary VPC at the GPU VPCs' MTU too (cluster-toolkit gke-a3-megagpu: mtu 8244).
        mtu = gpu_plan.mtu if gpu_plan is not None and gpu_plan.flavour in ("TCPX", "TCPXO") else DEFAULT_MTU
        vpc = gcp.compute.Network(
            f"{name}-vpc", name=f"{prefix}-net", project=spec.project, auto_create_subnetworks=False,
            routing_mode="REGIONAL", mtu=mtu, delete_default_routes_on_create=False, opts=child)
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet", name=f"{prefix}-nodes", project=spec.project, region=spec.region,
            network=vpc.id, ip_cidr_range=net.node_cidr, private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name="pods", ip_cidr_range=net.pods_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name="services", ip_cidr_range=net.services_cidr),
            ],
            # VPC flow logs for the audit trail of who talked to what (sampled, aggregated every 5 s).
            log_config=gcp.compute.SubnetworkLogConfigArgs(aggregation_interval="INTERVAL_5_SEC", flow_sampling=0.5,
                                                          metadata="INCLUDE_ALL_METADATA"),
            opts=child)
        router = gcp.compute.Router(f"{name}-router", name=f"{prefix}-router", project=spec.project,
                                    region=spec.region, network=vpc.id, opts=child)
        # Private nodes have no external address: Cloud NAT gives them egress (image pulls, pip, Hugging Face).
        gcp.compute.RouterNat(
            f"{name}-nat", name=f"{prefix}-nat", project=spec.project, region=spec.region, router=router.name,
            nat_ip_allocate_option="AUTO_ONLY", source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            enable_dynamic_port_allocation=True, min_ports_per_vm=1024, max_ports_per_vm=65536,
            enable_endpoint_independent_mapping=False,
            log_config=gcp.compute.RouterNatLogConfigArgs(
                enable=net.nat_log != "OFF", filter="ERRORS_ONLY" if net.nat_log == "OFF" else net.nat_log),
            opts=child)
        # Nodes, pods and the control plane talk to each other (GKE creates its own rules for the control plane's
        # webhooks on 443/10250; admission webhooks on other ports need this one: Kueue 9443, GPU Operator).
        internal = [net.node_cidr, net.pods_cidr, net.control_plane_cidr]
        gcp.compute.Firewall(
            f"{name}-internal", name=f"{prefix}-allow-internal", project=spec.project, network=vpc.id,
            direction="INGRESS", priority=1000, source_ranges=internal,
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp"), gcp.compute.FirewallAllowArgs(protocol="udp"),
                    gcp.compute.FirewallAllowArgs(protocol="icmp")],
            log_config=gcp.compute.FirewallLogConfigArgs(metadata="INCLUDE_ALL_METADATA"), opts=child)

        self.gateway_address = None
        self.gateway_ready = ()
        if serving_gateway:
            assert net.proxy_only_cidr is not None  # the rule gke-gateway-proxy-only-subnet requires it
            self.gateway_address = gateway_address_name(prefix)
            self.gateway_ready = self._gateway(name, spec, prefix, net.proxy_only_cidr, vpc, subnet, child)

        self.psa_connection = None
        self.psa_range_name = None
        psa_range: pulumi.Output[str] | None = None
        if private_service_access:
            # Managed Lustre and Cloud SQL's private IP are reached over private service access (Managed Lustre
            # "Configure a VPC network"; Cloud SQL "Private IP"): one allocated range and one peering for both.
            # GCP picks the range from the VPC's free space: after the proxy-only subnet, so it never takes that.
            psa = gcp.compute.GlobalAddress(
                f"{name}-psa-range", name=f"{prefix}-psa", project=spec.project, purpose="VPC_PEERING",
                address_type="INTERNAL", prefix_length=20, network=vpc.id,
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.gateway_ready[0]]))
                if self.gateway_ready else child)
            # ABANDON: removing the peering while a retained filesystem still uses it fails; leave it to the VPC.
            self.psa_connection = gcp.servicenetworking.Connection(
                f"{name}-psa", network=vpc.id, service="servicenetworking.googleapis.com",
                reserved_peering_ranges=[psa.name], deletion_policy="ABANDON", opts=child)
            self.psa_range_name = psa.name
            psa_range = pulumi.Output.concat(psa.address, "/", pulumi.Output.from_input(20).apply(str))
            if lustre_port is not None:
                gcp.compute.Firewall(
                    f"{name}-lustre", name=f"{prefix}-allow-lustre", project=spec.project, network=vpc.id,
                    direction="INGRESS", priority=1000, source_ranges=[psa_range],
                    allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(lustre_port)])],
                    log_config=gcp.compute.FirewallLogConfigArgs(metadata="INCLUDE_ALL_METADATA"), opts=child)

        self.gpu_networks = []
        if gpu_plan is not None:
            self.gpu_networks = self._gpu_networks(name, spec, prefix, gpu_plan, child)

        self.network_self_link = vpc.self_link
        self.network_name = vpc.name
        self.network_id = vpc.id
        self.subnet_self_link = subnet.self_link
        self.register_outputs({"network": vpc.self_link, "subnet": subnet.self_link})

    @staticmethod
    def _gateway(name: str, spec: GcpSpec, prefix: str, cidr: str, vpc: gcp.compute.Network,
                 subnet: gcp.compute.Subnetwork, child: pulumi.ResourceOptions) -> tuple[pulumi.Resource, ...]:
        """What GKE's regional internal Application Load Balancer (the gke-l7-rilb Gateway) needs in the VPC: the
        proxy-only subnet its Envoy proxies run in, the internal address it listens on, and the firewall rules that let
        its proxies and Google's health checks reach the pods (components/gcp/serving_gateway.py for the values)."""
        # Cloud Load Balancing, "Proxy-only subnets for Envoy-based load balancers": purpose REGIONAL_MANAGED_PROXY,
        # role ACTIVE, in the load balancer's region and VPC; only one active one per region and VPC, and this VPC is
        # the stack's own, so the stack's is that one (GKE "Deploying Gateways": internal GatewayClasses need it;
        # accelerated-platforms core/networking compute_network.tf region_proxy, the same settings).
        proxy_only = gcp.compute.Subnetwork(
            f"{name}-proxy-only", name=f"{prefix}-proxy-only", project=spec.project, region=spec.region,
            network=vpc.id, ip_cidr_range=cidr, purpose="REGIONAL_MANAGED_PROXY", role="ACTIVE", opts=child)
        # The Gateway's address: a regional internal address of the node subnet (GKE "Deploying Gateways", a static
        # address for an internal Gateway). SHARED_LOADBALANCER_VIP lets more than one forwarding rule take it (one
        # per listener port and protocol, should the Gateway gain an HTTPS listener); GCE_ENDPOINT holds one only
        # (Compute Engine addresses API, purpose; accelerated-platforms' single-listener llm-d example uses that).
        address = gcp.compute.Address(
            f"{name}-gateway-address", name=gateway_address_name(prefix), project=spec.project, region=spec.region,
            subnetwork=subnet.id, address_type="INTERNAL", purpose="SHARED_LOADBALANCER_VIP",
            address=gateway_ip(spec.network.node_cidr), opts=child)
        # Cloud Load Balancing, "Firewall rules" (regional internal Application Load Balancer: the proxy-only subnet
        # and the health-check ranges) and "Configure firewall rules for proxy-only subnet"; each source on the ports it
        # uses. No target tags: like the rules above, they cover the VPC's instances, which are this cluster's nodes
        # (the rules reach the pods' alias addresses on them).
        proxies = gcp.compute.Firewall(
            f"{name}-gateway-proxies", name=f"{prefix}-allow-gateway-proxies", project=spec.project, network=vpc.id,
            direction="INGRESS", priority=1000, source_ranges=[cidr],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in PROXY_PORTS])],
            log_config=gcp.compute.FirewallLogConfigArgs(metadata="INCLUDE_ALL_METADATA"), opts=child)
        probes = gcp.compute.Firewall(
            f"{name}-gateway-health-checks", name=f"{prefix}-allow-gateway-health-checks", project=spec.project,
            network=vpc.id, direction="INGRESS", priority=1000, source_ranges=list(HEALTH_CHECK_RANGES),
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(p) for p in HEALTH_CHECK_PORTS])],
            log_config=gcp.compute.FirewallLogConfigArgs(metadata="INCLUDE_ALL_METADATA"), opts=child)
        return (proxy_only, address, proxies, probes)

    @staticmethod
    def _gpu_networks(name: str, spec: GcpSpec, prefix: str, plan: GpuNetworkPlan,
                      child: pulumi.ResourceOptions) -> list[tuple[GpuNetwork, pulumi.Output[str], pulumi.Output[str]]]:
        ranges = plan.subnets()
        out: list[tuple[GpuNetwork, pulumi.Output[str], pulumi.Output[str]]] = []

        def gvnic_vpc(i: int, k8s_name: str, cidr: str) -> None:
            vpc = gcp.compute.Network(f"{name}-gpu-{i}", name=f"{prefix}-gpunet-{i}", project=spec.project,
                                      auto_create_subnetworks=False, routing_mode="REGIONAL", mtu=plan.mtu, opts=child)
            sub = gcp.compute.Subnetwork(f"{name}-gpu-{i}-subnet", name=f"{prefix}-gpunet-{i}-subnet",
                                         project=spec.project, region=spec.region, network=vpc.id, ip_cidr_range=cidr,
                                         opts=child)
            gcp.compute.Firewall(
                f"{name}-gpu-{i}-internal", name=f"{prefix}-gpunet-{i}-internal", project=spec.project,
                network=vpc.id, direction="INGRESS", priority=1000, source_ranges=[cidr],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp"), gcp.compute.FirewallAllowArgs(protocol="udp"),
                        gcp.compute.FirewallAllowArgs(protocol="icmp")],
                opts=child)
            out.append((GpuNetwork(name=k8s_name, vpc=f"{prefix}-gpunet-{i}", subnet=f"{prefix}-gpunet-{i}-subnet",
                                   device_mode="NetDevice"), vpc.name, sub.name))

        if plan.flavour in ("TCPX", "TCPXO"):
            # Kubernetes names vpc1..vpcN, as the TCPX/TCPXO pod annotations name them (cluster-toolkit gke-a3-megagpu).
            for i, cidr in enumerate(ranges):
                gvnic_vpc(i, f"vpc{i + 1}", cidr)
            return out
        # RDMA: the second gVNIC (gvnic-1), then the RoCE VPC with one subnet per CX-7 NIC (rdma-0..rdma-7).
        gvnic_vpc(0, "gvnic-1", ranges[0])
        roce = gcp.compute.Network(
            f"{name}-rdma", name=f"{prefix}-rdma-net", project=spec.project, auto_create_subnetworks=False,
            routing_mode="REGIONAL", mtu=plan.mtu,
            network_profile=f"projects/{spec.project}/global/networkProfiles/{spec.gpu_zone}-vpc-roce", opts=child)
        for i, cidr in enumerate(ranges[1:]):
            sub = gcp.compute.Subnetwork(f"{name}-rdma-{i}", name=f"{prefix}-rdma-sub-{i}", project=spec.project,
                                         region=spec.region, network=roce.id, ip_cidr_range=cidr, opts=child)
            out.append((GpuNetwork(name=f"rdma-{i}", vpc=f"{prefix}-rdma-net", subnet=f"{prefix}-rdma-sub-{i}",
                                   device_mode="RDMA"), roce.name, sub.name))
        return out
