"""The GKE control plane and node pools.

The cluster (GKE Standard, VPC-native, Dataplane V2 with multi-networking, private nodes, Workload Identity,
Managed Prometheus with DCGM, system and workload logging, etcd secrets under a Cloud KMS key, GKE cost
allocation) and one node pool per spec entry, with the GPUs, the GPU networks, the reservation or provisioning
model, local SSDs, the GPU taint, shielded nodes and the GKE metadata server. Sources: the pulumi_gcp 10.2.0
``container`` module (argument names), cluster-toolkit ``modules/scheduler/gke-cluster`` and
``modules/compute/gke-node-pool`` (what a GPU cluster sets), GKE documentation named beside each choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.catalog.gcp_machines import MachineFacts
from components.gcp.platform import GpuNetwork
from components.gcp.serving_gateway import GATEWAY_API_CHANNEL
from components.kubernetes.objects import NODE_GROUP_LABEL
from components.kubernetes.objects.node_check import registers_with_taint
from components.spec import GPU_TAINT_KEY, READINESS_TAINT_KEY, TEAM_CPU_TAINT_KEY, GpuSharingSpec
from components.spec.decisions import PoolUpgrade, is_compact, pool_image_type, pool_upgrade
from components.spec.gcp import GcpNodePoolSpec, GcpSpec

# Managed Prometheus components, plus DCGM when GKE manages the drivers (GKE "Collect and view DCGM metrics":
# GKE installs the DCGM exporter with its Google-managed drivers).
MONITORING_COMPONENTS = ("SYSTEM_COMPONENTS", "POD", "DAEMONSET", "DEPLOYMENT", "STATEFULSET", "STORAGE", "HPA",
                         "CADVISOR", "KUBELET")
_DRIVER_VERSION = {"gke-latest": "LATEST", "gke-default": "DEFAULT", "operator": "INSTALLATION_DISABLED"}
# TCP buffers every cluster-toolkit GPU node pool sets (modules/compute/gke-node-pool main.tf linux_node_config).
GPU_SYSCTLS = {"net.ipv4.tcp_rmem": "4096 87380 16777216", "net.ipv4.tcp_wmem": "4096 16384 16777216"}
# Only where the GPU Operator serves the node (gpuDriver: operator) does GKE's own device plugin step aside: the
# label turns it off (NVIDIA GPU Operator "Google GKE"; GKE "Manage the GPU stack with the NVIDIA GPU Operator"). On a
# GKE-managed pool it must not be set: the managed driver install is finished by the same DaemonSet the label
# disables, so a labelled pool comes up without a driver (NVIDIA/aicr PR #2047, review of 2026-08-04).
NO_GKE_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"


def reservation_value(project: str, pool: GcpNodePoolSpec) -> str:
    """The reservation a SPECIFIC_RESERVATION pool names: ``projects/<p>/reservations/<name>``, or one block of a
    same-project reservation as ``<name>/reservationBlocks/<block>`` (GKE "Consume reserved zonal resources";
    cluster-toolkit gke-node-pool reservation_definitions.tf)."""
    cap = pool.capacity
    if cap.reservation_block:
        return f"{cap.reservation}/reservationBlocks/{cap.reservation_block}"
    return f"projects/{cap.reservation_project or project}/reservations/{cap.reservation}"


class GkeCluster(pulumi.ComponentResource):
    """The GKE Standard cluster (its default pool removed; every pool is a :class:`GkeNodePool`).

    Attributes:
        cluster: the cluster resource. name / endpoint / ca: what the kubeconfig needs.
    """

    cluster: gcp.container.Cluster
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    dns_endpoint: pulumi.Output[str]
    ca: pulumi.Output[str]

    def __init__(self, name: str, *, spec: GcpSpec, cluster_name: str, labels: Mapping[str, str], protect: bool,
                 network: pulumi.Input[str], subnet: pulumi.Input[str], multi_networking: bool,
                 secrets_key: pulumi.Input[str], disk_key: pulumi.Input[str], key_grants: Sequence[pulumi.Resource],
                 node_account: pulumi.Input[str],
                 dcgm: bool, filesystem: str | None, gateway_api: bool = False,
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GkeCluster", name, provenance.props(), opts)
        gke = spec.cluster
        deployer = gke.deployer
        authorized = list(dict.fromkeys([*gke.authorized_networks, *deployer.runner_cidrs]))
        location = spec.region if gke.location == "regional" else spec.gpu_zone
        mw = gke.maintenance
        end = mw.start.timestamp() + mw.duration_hours * 3600
        from datetime import UTC, datetime

        def rfc3339(ts: float) -> str:
            return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        self.cluster = gcp.container.Cluster(
            f"{name}-gke",
            name=cluster_name,
            project=spec.project,
            location=location,
            # Every pool is managed separately; the default one is created (with the locked-down node account and
            # settings below, never the Compute Engine default account) and removed.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=node_account, oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
                boot_disk_kms_key=disk_key,
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True),
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")),
            deletion_protection=protect,
            network=network,
            subnetwork=subnet,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name="pods", services_secondary_range_name="services"),
            # Dataplane V2 (eBPF; enforces NetworkPolicy, which the team namespaces rely on) is required for
            # multi-networking (GKE "Set up multi-network support for Pods").
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=multi_networking or None,
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=gke.endpoint == "private",
                master_ipv4_cidr_block=spec.network.control_plane_cidr,
                # Runners on Cloud VPN/Interconnect in another region reach the private endpoint only with global
                # access (GKE "Advanced private cluster configurations"); the authorized networks still apply.
                master_global_access_config=gcp.container.ClusterPrivateClusterConfigMasterGlobalAccessConfigArgs(
                    enabled=deployer.api_access == "in-vpc")),
            # The DNS-based endpoint: IAM decides who reaches the API, from anywhere Google APIs are, with no
            # network path to build (GKE "About the DNS-based endpoint"); on only for a dns-endpoint deployer.
            control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
                dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                    allow_external_traffic=deployer.api_access == "dns-endpoint")),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=c, display_name=f"authorized-{i}") for i, c in enumerate(authorized)],
                gcp_public_cidrs_access_enabled=False,
                # The private endpoint checks the list too: only the runner's and the listed networks reach it.
                private_endpoint_enforcement_enabled=True),
            master_auth=gcp.container.ClusterMasterAuthArgs(
                client_certificate_config=gcp.container.ClusterMasterAuthClientCertificateConfigArgs(
                    issue_client_certificate=False)),
            enable_shielded_nodes=True,
            enable_legacy_abac=False,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=gke.release_channel),
            min_master_version=gke.min_master_version,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{spec.project}.svc.id.goog"),
            authenticator_groups_config=gcp.container.ClusterAuthenticatorGroupsConfigArgs(
                security_group=gke.rbac_security_group) if gke.rbac_security_group else None,
            database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(state="ENCRYPTED", key_name=secrets_key)
            if gke.database_encryption else None,
            logging_config=gcp.container.ClusterLoggingConfigArgs(enable_components=list(gke.log_components)),
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=[*MONITORING_COMPONENTS, *(["DCGM"] if dcgm else [])],
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True)),
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True),
                gce_persistent_disk_csi_driver_config=gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs(
                    enabled=True),
                # Multi-NIC Lustre (on by default from GKE 1.35.2-gke.1842000) uses only NICs in eth0's VPC; GPU
                # nodes whose NICs span several VPCs (the GPUDirect networks) keep Lustre on eth0, said explicitly
                # (GKE Managed Lustre CSI driver, "Disable multi-NIC"; lustre-csi-driver pkg/network/network.go).
                lustre_csi_driver_config=gcp.container.ClusterAddonsConfigLustreCsiDriverConfigArgs(
                    enabled=True, disable_multi_nic=True if multi_networking else None)
                if filesystem == "managed-lustre" else None,
                gcp_filestore_csi_driver_config=gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(
                    enabled=True) if filesystem == "filestore" else None,
                parallelstore_csi_driver_config=gcp.container.ClusterAddonsConfigParallelstoreCsiDriverConfigArgs(
                    enabled=True) if filesystem == "parallelstore" else None,
            ),
            # The GKE Gateway controller and the Gateway API's CRDs, for the served models' private gateway only
            # (components/gcp/serving_gateway.py): other stacks' clusters stay as they were. Its load balancers need the
            # HttpLoadBalancing add-on, on by default and left so above (GKE "Deploying Gateways", requirements).
            gateway_api_config=gcp.container.ClusterGatewayApiConfigArgs(channel=GATEWAY_API_CHANNEL)
            if gateway_api else None,
            # GKE cost allocation: namespace and label costs in the Cloud Billing export (per team, per job).
            cost_management_config=gcp.container.ClusterCostManagementConfigArgs(enabled=True),
            maintenance_policy=gcp.container.ClusterMaintenancePolicyArgs(
                recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                    start_time=rfc3339(mw.start.timestamp()), end_time=rfc3339(end), recurrence=mw.recurrence),
                # An exclusion until end of support gives GKE's end-time behavior instead of an end time (exactly
                # one of the two: pulumi_gcp ClusterMaintenancePolicyMaintenanceExclusionArgs.end_time).
                maintenance_exclusions=[gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                    exclusion_name=ex.name, start_time=rfc3339(ex.start.timestamp()),
                    end_time=rfc3339(ex.end.timestamp()) if ex.end is not None else None,
                    exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope=ex.scope, end_time_behavior="UNTIL_END_OF_SUPPORT" if ex.until_end_of_support else None))
                    for ex in mw.exclusions] or None),
            resource_labels=dict(labels),
            opts=pulumi.ResourceOptions(
                parent=self, protect=protect, retain_on_delete=protect, depends_on=[*key_grants, *after],
                # The default pool's settings only matter at creation; the name is derived once.
                ignore_changes=["nodeConfig", "initialNodeCount", "name"]),
        )
        self.name = self.cluster.name
        self.dns_endpoint = self.cluster.control_plane_endpoints_config.apply(
            lambda c: (c.dns_endpoint_config.endpoint if c and c.dns_endpoint_config else None) or "")
        self.endpoint = self.cluster.endpoint
        self.ca = self.cluster.master_auth.cluster_ca_certificate.apply(lambda c: c or "")
        self.register_outputs({"name": self.name, "endpoint": self.endpoint})


class GkeNodePool(pulumi.ComponentResource):
    """One node pool in the GPU zone.

    Attributes:
        pool_name: the node pool's name.
        pool: the node pool resource (the Kubernetes provider waits for it).
    """

    pool_name: pulumi.Output[str]
    pool: gcp.container.NodePool

    def __init__(self, name: str, *, spec: GcpSpec, pool: GcpNodePoolSpec, facts: MachineFacts,
                 sharing: GpuSharingSpec,
                 cluster: pulumi.Input[str], location: str, node_account: pulumi.Input[str],
                 disk_key: pulumi.Input[str], key_grants: Sequence[pulumi.Resource], labels: Mapping[str, str],
                 gpu_networks: Sequence[tuple[GpuNetwork, pulumi.Output[str], pulumi.Output[str]]],
                 hugepages_2mi_gib: int = 0,
                 team_cpu: bool = False,
                 depends_on: Sequence[pulumi.Resource] = (),
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:compute:GkeNodePool", name, provenance.props(), opts)
        cap = pool.capacity
        gpu = facts.gpu_count > 0
        autoscaled = pool.min_size != pool.max_size
        node_labels = {NODE_GROUP_LABEL: pool.name, **pool.labels}
        if gpu and pool.gpu_driver == "operator":
            node_labels[NO_GKE_DEVICE_PLUGIN] = "true"
        # GKE's device plugin time-shares a GPU among max_shared_clients_per_gpu containers, each asking for one
        # nvidia.com/gpu (GKE "Share GPUs with multiple workloads using GPU time-sharing"; pulumi_gcp
        # gpu_sharing_config). The GPU Operator's pools take the sharing from its device plugin config instead.
        sharing_config = gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
            gpu_sharing_strategy="TIME_SHARING", max_shared_clients_per_gpu=sharing.replicas) \
            if gpu and pool.gpu_driver != "operator" and sharing.mode == "time-slicing" else None
        taints = [gcp.container.NodePoolNodeConfigTaintArgs(key=t.key, value=t.value, effect={
            "NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}[t.effect])
            for t in pool.taints]
        if gpu and pool.gpu_taint and not any(t.key == GPU_TAINT_KEY for t in pool.taints):
            taints.append(gcp.container.NodePoolNodeConfigTaintArgs(key=GPU_TAINT_KEY, value="present",
                                                                    effect="NO_SCHEDULE"))
        if team_cpu and not any(t.key == TEAM_CPU_TAINT_KEY for t in pool.taints):
            # A pool teams have CPU quota on (teams[].cpuQuotas) repels pods its Kueue CPU flavor did not admit. GKE
            # changes a pool's node taints in place (node_config.taints is not among the fields that replace a
            # google_container_node_pool: blueprint/clouds/gcp/replacements.yaml); a pool holds no data either way.
            taints.append(gcp.container.NodePoolNodeConfigTaintArgs(key=TEAM_CPU_TAINT_KEY, value="true",
                                                                    effect="NO_SCHEDULE"))
        if gpu and registers_with_taint(autoscaled or cap.type == "flex-start", "gcp"):
            # A pool of fixed size registers with the readiness taint; an autoscaled one could not scale up from zero
            # with it, so the Node Readiness Controller adds it when the node joins (objects/node_check.py).
            taints.append(gcp.container.NodePoolNodeConfigTaintArgs(key=READINESS_TAINT_KEY, value="pending",
                                                                    effect="NO_SCHEDULE"))
        ssd = facts.local_ssd_count or 0
        use_ssd = pool.local_ssd != "none" and ssd > 0
        affinity = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION", key="compute.googleapis.com/reservation-name",
            values=[reservation_value(spec.project, pool)]) if cap.type == "reservation" else (
            gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
            if cap.type == "flex-start" else None)
        node_config = gcp.container.NodePoolNodeConfigArgs(
            machine_type=pool.machine_type,
            service_account=node_account,
            oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"],
            # The GPU Operator's driver containers need Ubuntu nodes; GKE-managed drivers run on COS.
            image_type=pool_image_type(pool, gpu),
            disk_type=pool.disk_type,
            disk_size_gb=pool.disk_size_gb,
            boot_disk_kms_key=disk_key,
            labels=node_labels,
            resource_labels=dict(labels),
            taints=taints or None,
            guest_accelerators=[gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=str(facts.accelerator), count=facts.gpu_count,
                gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                    gpu_driver_version=_DRIVER_VERSION[pool.gpu_driver]),
                gpu_sharing_config=sharing_config)] if gpu else None,
            reservation_affinity=affinity,
            spot=True if cap.type == "spot" else None,
            flex_start=True if cap.type == "flex-start" else None,
            max_run_duration=f"{cap.max_run_hours * 3600}s" if cap.max_run_hours else None,
            ephemeral_storage_local_ssd_config=gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                local_ssd_count=ssd) if use_ssd else None,
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
            # Secure Boot loads signed kernel modules only: GKE's drivers are signed, a driver the GPU Operator builds
            # on Ubuntu is not (GKE "Manage the GPU stack with the NVIDIA GPU Operator": shielded nodes, secure boot
            # off), so operator-driven GPU pools keep integrity monitoring only.
            shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=not (gpu and pool.gpu_driver == "operator"), enable_integrity_monitoring=True),
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            metadata={"disable-legacy-endpoints": "true"},
            # Slurm's slurmd pods ask for 2 MiB hugepages: GKE reserves them on the node (linux_node_config
            # hugepages_config, in pages of 2 MiB; GKE "Customizing node system configuration").
            linux_node_config=gcp.container.NodePoolNodeConfigLinuxNodeConfigArgs(
                sysctls=GPU_SYSCTLS if gpu_networks else None,
                hugepages_config=gcp.container.NodePoolNodeConfigLinuxNodeConfigHugepagesConfigArgs(
                    hugepage_size2m=hugepages_2mi_gib * 512) if hugepages_2mi_gib else None)
            if gpu_networks or hugepages_2mi_gib else None,
        )
        network_config = gcp.container.NodePoolNetworkConfigArgs(
            enable_private_nodes=True,
            additional_node_network_configs=[
                gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=vpc, subnetwork=sub)
                for _, vpc, sub in gpu_networks] or None)
        self.pool = gcp.container.NodePool(
            f"{name}-pool",
            name=pool.name,
            project=spec.project,
            location=location,
            cluster=cluster,
            node_locations=[spec.gpu_zone],
            initial_node_count=pool.desired_size if autoscaled else None,
            node_count=None if autoscaled else pool.min_size,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=pool.min_size, total_max_node_count=pool.max_size, location_policy="ANY")
            if autoscaled else None,
            # Flex-start nodes are replaced by a new request, not repaired (cluster-toolkit gke-node-pool precondition).
            management=gcp.container.NodePoolManagementArgs(auto_repair=cap.type != "flex-start", auto_upgrade=True),
            # A pool on a reservation is not auto-upgraded by GKE under a running job: on a release channel node
            # auto-upgrade cannot be turned off (GKE ReleaseChannel reference), so the pool carries GKE's per-pool
            # exclusion, which ends at the control plane version's end of support (NodePool.maintenancePolicy
            # exclusionUntilEndOfSupport, end_time "the cluster control plane version's end of support time";
            # cluster-toolkit's A3 Ultra blueprint holds nodes the same way, cluster-wide); the operator upgrades it
            # between runs (the preview prints the command). Flex-start pools get GKE's short-lived upgrades. The
            # GKE API sets it only when the pool is created (UpdateNodePoolRequest has no maintenance policy,
            # google-cloud-container 2.65.0), so a change to it is ignored rather than replacing a reserved pool.
            # A pinned pool (nodePools[].version) is held the same way: created at its version, upgraded when the
            # stack changes it.
            maintenance_policies=[gcp.container.NodePoolMaintenancePolicyArgs(
                exclusion_until_end_of_supports=[
                    gcp.container.NodePoolMaintenancePolicyExclusionUntilEndOfSupportArgs(enabled=True)])]
            if (gpu and cap.type == "reservation") or pool.version is not None else None,
            version=pool.version,
            # How GKE replaces the nodes for a version or configuration change (decisions.pool_upgrade): a surge
            # node first on open capacity; on a reservation or flex-start, one node at a time in place (no spare VM).
            upgrade_settings=upgrade_settings(pool_upgrade(pool)),  # None on flex-start: GKE's own strategy
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
            if is_compact(pool, facts) else None,
            queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
            if cap.type == "flex-start" else None,
            network_config=network_config,
            node_config=node_config,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*key_grants, *depends_on],
                                        ignore_changes=["initialNodeCount", "maintenancePolicies"]
                                        + (["nodeCount"] if autoscaled else [])),
        )
        self.pool_name = self.pool.name
        self.register_outputs({"name": self.pool_name})


def upgrade_settings(upgrade: PoolUpgrade | None) -> gcp.container.NodePoolUpgradeSettingsArgs | None:
    """NodePool upgradeSettings (pulumi_gcp 10.2.0 NodePoolUpgradeSettingsArgs: strategy SURGE or BLUE_GREEN;
    maxSurge and maxUnavailable for a surge; blueGreenSettings with standardRolloutPolicy {batchPercentage in (0, 1],
    batchNodeCount, batchSoakDuration} and nodePoolSoakDuration for blue-green)."""
    if upgrade is None:
        return None
    bg = upgrade.blue_green
    if upgrade.strategy == "BLUE_GREEN" and bg is not None:
        return gcp.container.NodePoolUpgradeSettingsArgs(
            strategy="BLUE_GREEN",
            blue_green_settings=gcp.container.NodePoolUpgradeSettingsBlueGreenSettingsArgs(
                standard_rollout_policy=gcp.container.NodePoolUpgradeSettingsBlueGreenSettingsStandardRolloutPolicyArgs(
                    batch_percentage=bg.batch_percentage, batch_node_count=bg.batch_node_count,
                    batch_soak_duration=bg.batch_soak_duration),
                node_pool_soak_duration=bg.node_pool_soak_duration))
    return gcp.container.NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=upgrade.max_surge,
                                                     max_unavailable=upgrade.max_unavailable)


def gke_kubeconfig(name: str, endpoint: str, ca: str | None, deployer: str) -> str:
    """A kubeconfig that authenticates with ``gke-gcloud-auth-plugin`` as the deployer service account (gcloud's
    ``CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT``, which the plugin's ``gcloud config config-helper`` call honours):
    the same identity that creates the cloud resources applies the Kubernetes objects, and a short-lived token is
    refreshed for the whole apply. The plugin caches tokens per kubeconfig context under ~/.kube: give each run
    its own KUBECONFIG/HOME on shared runners (README)."""
    import json

    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        # The DNS endpoint presents a publicly trusted certificate (no CA data); the IP endpoint, the cluster's CA.
        "clusters": [{"name": name, "cluster": {"server": f"https://{endpoint}",
                                                **({"certificate-authority-data": ca} if ca else {})}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [{"name": name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "env": [{"name": "CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT", "value": deployer}],
            "installHint": "Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)",
            "provideClusterInfo": True,
        }}}],
    }, sort_keys=True)
