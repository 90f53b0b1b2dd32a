"""The GCP cloud module: builds the keys and identities, network, storage, GKE and node pools in order, wires
their outputs together, and hands the cloud-neutral wiring (``components/cluster.py``) a :class:`CloudPlanes`.

Who deploys, from where: ``pulumi up`` runs as the deployer service account (the GCP provider impersonates it,
so the runner's own credentials only need ``roles/iam.serviceAccountTokenCreator`` on it), and the Kubernetes
objects go through the same identity (the kubeconfig's auth plugin impersonates it too). The runner reaches the
control plane in the VPC (private endpoint) or from authorized networks; its CIDRs are always on the cluster's
authorized networks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.catalog.charts import recorder_image
from components.catalog.gcp_machines import (
    coupled_rxdm_releases,
    gcp_storage_limits,
    gpudirect_manifests,
    load_gcp_catalog,
    rxdm_image,
    rxdm_releases,
)
from components.catalog.prices import describe, load_prices, node_hour_price
from components.gcp.cost import GcpBudgets
from components.gcp.gke import GkeCluster, GkeNodePool, gke_kubeconfig
from components.gcp.lustre import lustre_filesystem_name, lustre_volume
from components.gcp.network import DEFAULT_MTU, GcpNetwork, GpuNetworkPlan
from components.gcp.node_accounts import GcpPoolAccounts
from components.gcp.platform import (
    GKE_TOPOLOGY,
    PD_CSI,
    bucket_volume,
    checkpoint_volume,
    network_objects,
    pd_storage_class_parameters,
)
from components.gcp.security import (
    GcpDataAccess,
    GcpIdentities,
    GcpKeys,
    GcpSecretReader,
    GcpServices,
    kms_key_id,
    wif_principal,
)
from components.gcp.serving import GcpServingAccess
from components.gcp.serving_gateway import gateway_ip, gateway_wanted, gke_serving_gateway
from components.gcp.slurm_db import SQL_SERVICE, SlurmAccountingDb
from components.gcp.storage import GcpStorage, checkpoint_bucket_name
from components.gcp.telemetry import NOT_VISIBLE, STACKDRIVER_RELEASE, GcpTelemetry, stackdriver_values
from components.kubernetes.inputs import CloudRelease, CloudTelemetry, PlatformInputs
from components.kubernetes.objects import (
    MONITORING_NAMESPACE,
    RECORDER_SERVICE_ACCOUNT,
    AcceptanceRecorder,
    CloudGpuStack,
    EgressRule,
    GpuDirectPodRules,
    Manifest,
    PodFabric,
    SharedFilesystem,
    SidecarMount,
    SidecarRelease,
    StorageSignals,
    slurm_cluster,
)
from components.kubernetes.objects.gateway import ServingGateway
from components.kubernetes.objects.node_check import NODE_CHECK_NAMESPACE, per_node_expected
from components.kubernetes.objects.node_check import SERVICE_ACCOUNT as NODE_CHECK_ACCOUNT
from components.kubernetes.objects.slurm_secrets import ESO_NAMESPACE, ESO_SERVICE_ACCOUNT
from components.kubernetes.objects.storage_check import STORAGE_CHECK_SERVICE_ACCOUNT, storage_check
from components.kubernetes.quotas import CpuPool, GpuPool
from components.kubernetes.serving import served_models
from components.planes import CloudPlanes, ClusterOutputs
from components.provenance import from_spec, spec_path, team_items
from components.sizing.plan import stack_checkpoint_policy
from components.spec import ClusterSpec, GpuSharingSpec, gpu_units_per_gpu
from components.spec.decisions import (
    dedicated_cpu_groups,
    gcs_bucket_name,
    gpu_subnet_prefix,
    gpudirect_pools,
    group_billing_labels,
    is_compact,
    serving_node_groups,
    slurm_cpu_groups,
    slurm_hugepages,
    slurm_node_groups,
    team_cpu_groups,
    teams_billed_directly,
)
from components.spec.gcp import GcpNodePoolSpec, RxdmImageSpec

CHECKPOINT_SERVICE_ACCOUNT = "checkpoints"
# Workload Identity tokens come from the GKE metadata server, which Dataplane V2 clusters (these) serve on
# 169.254.169.254, TCP 80 and 8080 (the pre-DPv2 169.254.169.252:987-988 does not apply); team namespaces deny
# egress by default, so their pods need this to authenticate. Secondary sources (GKE's page was not read): the
# network policies of public GKE deployments pair the address and ports this way, and note that the wrong pairing
# fails as an authentication timeout.
GKE_METADATA_EGRESS = (EgressRule(name="allow-gke-metadata-server", cidr="169.254.169.254/32", port=80),
                       EgressRule(name="allow-gke-metadata-server-8080", cidr="169.254.169.254/32", port=8080))
# GKE injects the GCS FUSE CSI sidecar (gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter) into pods that mount a
# checkpoint volume; the registry admission policy sees injected containers, so it must allow GKE's registry.
GKE_SYSTEM_REGISTRIES = ("gke.gcr.io/",)
# What GPUDirect pods need on the node, per flavour, container by container (GKE "Maximize GPU network bandwidth with
# GPUDirect-TCPXO and multi-networking" / "... GPUDirect-TCPX ...": the daemon sidecar's volumes and capabilities,
# the workload container's; GKE "Run a workload with GPUDirect RDMA (A3 Ultra)"; container-engine-accelerators
# gpudirect-tcpxo/nccl-test-unprivileged-without-hostnetwork.yaml). The receive-datapath daemon (RxDM) alone reads and
# writes the node's /sys and /proc/sys and adds NET_ADMIN/NET_BIND_SERVICE, and only as the catalog's release runs it
# (components/catalog/gke_manifests.yaml, rxdm: command, args, env and host mounts read in upstream's manifests); the
# workload reads the driver and NCCL plugin libraries (read-only) and, on TCPXO, opens the aperture devices (read-write:
# the NCCL plugin in the workload container opens them, NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY); RDMA has no daemon, its
# workload reads the gIB plugin directory.
NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"
GIB_HOST_DIR = "/home/kubernetes/bin/gib"
APERTURE_DEVICES = "/dev/aperture_devices"


# The receive-datapath daemon's container name per flavour, as GKE's how-to pages and the installer's examples run
# it (the NRI injector gives it the GPU devices by this name: devices.gke.io/container.<name>).
GPUDIRECT_SIDECAR_NAMES = {"TCPXO": "tcpxo-daemon", "TCPX": "tcpx-daemon"}


def gpudirect_sidecar(flavour: str) -> tuple[str, str] | None:
    """The flavour's daemon sidecar (name, pinned image), or None (RDMA has none, or the catalog pins no image)."""
    name, image = GPUDIRECT_SIDECAR_NAMES.get(flavour), rxdm_image(flavour)
    return (name, image) if name and image else None


def sidecar_releases(flavour: str, accepted: Sequence[str] | None = None,
                     copies: Sequence[RxdmImageSpec] = ()) -> tuple[SidecarRelease, ...]:
    """The RxDM releases a flavour's sidecar may run: ``accepted`` tags (default: the one the pinned installer
    couples), each with Google's image and the stack's mirror or digest forms of it, and the container upstream runs
    it in (components/catalog/gke_manifests.yaml, rxdm)."""
    tags = coupled_rxdm_releases(flavour) if accepted is None else tuple(accepted)
    return tuple(SidecarRelease(
        tag=r.tag, images=(r.image, *(c.image for c in copies if c.release == r.tag)), command=r.command,
        args=r.args, env=r.env, mounts=tuple(SidecarMount(m.host_path, m.mount_path, m.read_only) for m in r.mounts),
        capabilities=r.capabilities, source=r.source) for r in rxdm_releases(flavour) if r.tag in tags)


def gpudirect_pod_rules(flavour: str, accepted: Sequence[str] | None = None,
                        copies: Sequence[RxdmImageSpec] = ()) -> GpuDirectPodRules:
    """The per-container bounds of a GPUDirect flavour's namespaces (the sidecar held to the accepted releases)."""
    if flavour == "RDMA":
        return GpuDirectPodRules(sidecar_name=None, sidecar_releases=(),
                                 shared_host_paths=(NVIDIA_HOST_DIR, GIB_HOST_DIR),
                                 readonly_host_paths=(NVIDIA_HOST_DIR, GIB_HOST_DIR), source=GPUDIRECT_POD_SOURCE)
    return GpuDirectPodRules(
        sidecar_name=GPUDIRECT_SIDECAR_NAMES.get(flavour), sidecar_releases=sidecar_releases(flavour, accepted, copies),
        shared_host_paths=(NVIDIA_HOST_DIR, *((APERTURE_DEVICES,) if flavour == "TCPXO" else ())),
        readonly_host_paths=(NVIDIA_HOST_DIR,), source=GPUDIRECT_POD_SOURCE)


def pod_network_annotations(networks: Sequence[str]) -> dict[str, str]:
    """GKE multi-networking for a pod: eth0 on the cluster's network, eth1.. on the GPU networks in the pool's order
    (networking.gke.io/interfaces; GKE "Set up multi-network support for Pods"; cluster-toolkit's A3 Mega and A3 Ultra
    examples map eth1..eth8 to vpc1..vpc8, and eth1 to the second gVNIC then eth2..eth9 to rdma-0..rdma-7)."""
    interfaces = [{"interfaceName": "eth0", "network": "default"},
                  *({"interfaceName": f"eth{i + 1}", "network": n} for i, n in enumerate(networks))]
    return {"networking.gke.io/default-interface": "eth0",
            "networking.gke.io/interfaces": json.dumps(interfaces)}


# The NCCL acceptance pods on GPUDirect pools, as Google runs NCCL tests there without host networking
# (container-engine-accelerators @992db81 gpudirect-tcpxo/nccl-test-unprivileged-without-hostnetwork.yaml and
# gpudirect-rdma/nccl-test.yaml; GKE "Maximize GPU network bandwidth with GPUDirect-TCPXO", "Run NCCL on custom GKE
# clusters that use A3 Mega"): the pod's GPU networks, on TCPXO the RxDM sidecar (here a native sidecar, so the
# worker pod ends with its benchmark) with the GPU devices the NRI injector gives it, and in every rank the plugin's
# environment from the node (TCPXO: nccl-env-profile.sh, whose guest-config checker aborts a run without it;
# RDMA: gIB's set_nccl_env.sh). MPI's own traffic stays on eth0 (mpirun --mca btl_tcp_if_include / oob_tcp_if_include
# eth0, as gpudirect-rdma/nccl-test-a4x-max-jobset.yaml and NVIDIA AICR's GKE TCPXO runtime keep it).
NVIDIA_LIB64 = "/usr/local/nvidia/lib64"
ACCEPTANCE_FABRIC_SOURCE = ("container-engine-accelerators @992db81 gpudirect-tcpxo/nccl-test-unprivileged-without-"
                            "hostnetwork.yaml, gpudirect-rdma/nccl-test.yaml; GKE GPUDirect-TCPXO and A3 Ultra how-tos")
MPI_ON_ETH0 = ("--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0")


def gpudirect_pod_fabric(flavour: str, gpus: int, networks: Sequence[str]) -> PodFabric | None:
    """How an NCCL benchmark pod reaches a GPUDirect pool's fabric, or None (TCPX: not built, the rules say so)."""
    annotations = pod_network_annotations(networks)
    # no empty entry when unset: an empty LD_LIBRARY_PATH element searches the working directory (ld.so(8))
    ld_path = f"export LD_LIBRARY_PATH={NVIDIA_LIB64}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
    if flavour == "RDMA":
        return PodFabric(
            annotations=annotations,
            volumes=({"name": "nvidia", "hostPath": {"path": NVIDIA_HOST_DIR}},
                     {"name": "gib", "hostPath": {"path": GIB_HOST_DIR}}),
            mounts=({"name": "nvidia", "mountPath": "/usr/local/nvidia", "readOnly": True},
                    {"name": "gib", "mountPath": "/usr/local/gib", "readOnly": True}),
            rank_setup=(ld_path, "source /usr/local/gib/scripts/set_nccl_env.sh"),
            mpirun_args=MPI_ON_ETH0, single_node=True, source=ACCEPTANCE_FABRIC_SOURCE)
    sidecar = gpudirect_sidecar(flavour)
    if flavour != "TCPXO" or sidecar is None:
        return None
    devices = [f"/dev/nvidia{i}" for i in range(gpus)] + ["/dev/nvidiactl", "/dev/nvidia-uvm",
                                                          "/dev/dmabuf_import_helper"]
    annotations[f"devices.gke.io/container.{sidecar[0]}"] = "".join(f"- path: {d}\n" for d in devices)
    by_path = {f"{NVIDIA_HOST_DIR}/lib64": "nvidia", "/sys": "sys", "/proc/sys": "proc-sys"}
    host_volumes: tuple[Manifest, ...] = tuple({"name": name, "hostPath": {"path": path}}
                                               for path, name in by_path.items())
    # The release the pinned installer couples, run exactly as upstream runs it (the admission policy accepts it so).
    (release,) = sidecar_releases(flavour)
    daemon: Manifest = {
        "name": sidecar[0], "image": sidecar[1], "imagePullPolicy": "IfNotPresent", "restartPolicy": "Always",
        "command": list(release.command), "args": list(release.args[0]),
        "securityContext": {"capabilities": {"add": list(release.capabilities)}},
        "env": [{"name": n, "value": v} for n, v in release.env],
        "volumeMounts": [{"name": by_path[m.host_path], "mountPath": m.mount_path,
                          **({"readOnly": True} if m.read_only else {})} for m in release.mounts],
    }
    return PodFabric(
        annotations=annotations, sidecars=(daemon,),
        volumes=(*host_volumes, {"name": "aperture-devices", "hostPath": {"path": APERTURE_DEVICES}}),
        mounts=({"name": "nvidia", "mountPath": NVIDIA_LIB64, "readOnly": True},
                {"name": "aperture-devices", "mountPath": APERTURE_DEVICES}),
        env=(("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", APERTURE_DEVICES),),
        rank_setup=(ld_path, f"export NCCL_LIB_DIR={NVIDIA_LIB64}", f"source {NVIDIA_LIB64}/nccl-env-profile.sh"),
        mpirun_args=MPI_ON_ETH0, single_node=True, source=ACCEPTANCE_FABRIC_SOURCE)


GPUDIRECT_POD_SOURCE = ("GKE GPUDirect-TCPX/TCPXO/RDMA how-to pages (daemon and workload volumes); "
                        "container-engine-accelerators gpudirect-tcpxo/nccl-test-unprivileged-without-hostnetwork.yaml")
# Namespaces GKE manages (DCGM exporter in gke-managed-system, GKE "Collect and view DCGM metrics"; Managed
# Prometheus in gmp-system and gmp-public): the no-privileged-pods policy leaves them to GKE.
GKE_MANAGED_NAMESPACES = ("gke-managed-system", "gmp-system", "gmp-public")
# GKE's own GPU stack, as cluster-toolkit deploys A3 Mega and A3 Ultra (modules/compute/gke-node-pool: the GKE driver
# installation, no operator): the driver (gpu_driver_version LATEST or DEFAULT), GKE's device plugin (on by default,
# advertising nvidia.com/gpu), and the DCGM exporter GKE installs with DCGM monitoring on (GKE "Collect and view DCGM
# metrics"): DaemonSet dcgm-exporter in gke-managed-system, pods app.kubernetes.io/name=gke-managed-dcgm-exporter,
# port "metrics" (9400) at /metrics, standard DCGM_FI_* names. That the exporter's namespace, label and port are
# these was read in four independent public scrape configurations, not on a Google page (research notes of 2026-12-01).
GKE_GPU_STACK = CloudGpuStack(
    description="GKE-managed driver, device plugin and DCGM exporter (no GPU Operator)",
    dcgm_namespace="gke-managed-system", dcgm_labels={"app.kubernetes.io/name": "gke-managed-dcgm-exporter"},
    dcgm_port="metrics", source="GKE 'Collect and view DCGM metrics'; cluster-toolkit gke-node-pool and gke-cluster "
    "(enable_dcgm_monitoring)")
# With gpuDriver: operator the GPU Operator installs the driver and the container toolkit on Ubuntu nodes, and its
# device plugin and DCGM exporter serve them (GKE "Manage the GPU stack with the NVIDIA GPU Operator"). NVIDIA
# documents open problems of the toolkit's containerd configuration on GKE 1.33+ (containerd 2.0: NVIDIA/gpu-operator
# #1577, #1679; NVIDIA/nvidia-container-toolkit #1222), which the preview names.
GKE_OPERATOR_ISSUES = ("the GPU Operator on GKE 1.33+ (containerd 2.0): NVIDIA documents that its container toolkit "
                       "can misconfigure containerd's config.toml, leaving GPU and network pods unable to start "
                       "(NVIDIA/gpu-operator #1577, #1679; nvidia-container-toolkit #1222); GKE's own GPU stack "
                       "(gpuDriver: gke-latest) avoids it")


def gke_manages_drivers(spec: ClusterSpec) -> bool:
    """GKE installs the NVIDIA driver on every GPU pool (the rules refuse mixing it with the GPU Operator's)."""
    catalog = load_gcp_catalog()
    return all(p.gpu_driver != "operator" for p in spec.gcp_spec().node_pools if catalog[p.machine_type].gpu_count)


def slurm_accounting(spec: ClusterSpec) -> bool:
    """The stack runs Slurm with accounting, so it creates Cloud SQL for slurmdbd."""
    slurm = spec.scheduler.slurm
    return slurm is not None and slurm.accounting.enabled


def required_services(spec: ClusterSpec) -> list[str]:
    """The Google APIs the stack's resources need, enabled before any of them is created (a fresh project has
    only a few on; cluster-toolkit's project services do the same)."""
    g = spec.gcp_spec()
    apis = ["compute.googleapis.com", "container.googleapis.com", "cloudkms.googleapis.com",
            "storage.googleapis.com", "iam.googleapis.com", "iamcredentials.googleapis.com",
            "cloudresourcemanager.googleapis.com", "logging.googleapis.com", "monitoring.googleapis.com"]
    fs = g.storage.filesystem
    if fs is not None:
        apis += ["servicenetworking.googleapis.com", {"managed-lustre": "lustre.googleapis.com",
                                                     "filestore": "file.googleapis.com",
                                                     "parallelstore": "parallelstore.googleapis.com"}[fs.type]]
    if slurm_accounting(spec):
        apis += [api for api in ("servicenetworking.googleapis.com", SQL_SERVICE) if api not in apis]
    if g.billing_account is not None:
        apis.append("billingbudgets.googleapis.com")
    if spec.scheduler.slurm is not None and spec.scheduler.slurm.login.sssd_conf_from is not None:
        apis.append("secretmanager.googleapis.com")
    return apis


def gpu_network_plan(spec: ClusterSpec) -> GpuNetworkPlan | None:
    """The stack's GPU networks: the GPUDirect pools' flavour, NIC count and MTU (the rules make them agree)."""
    gcp_spec = spec.gcp_spec()
    catalog = load_gcp_catalog()
    direct = gpudirect_pools([(p, catalog[p.machine_type]) for p in gcp_spec.node_pools])
    if not direct or gcp_spec.network.gpu_networks_cidr is None:
        return None
    facts = direct[0][1]
    # An MTU the catalog does not confirm is left at GCP's default rather than guessed.
    return GpuNetworkPlan(flavour=facts.gpudirect, nics=facts.gpu_nic_count,
                          mtu=facts.gpu_nic_mtu.value or DEFAULT_MTU, cidr=gcp_spec.network.gpu_networks_cidr,
                          prefix=gpu_subnet_prefix(gcp_spec),
                          gvnic_prefix=gcp_spec.network.gvnic_subnet_prefix_length)


# GKE injects the GCS FUSE sidecar into pods that mount a checkpoint volume, with 250m CPU and 256Mi memory requested
# unless the pod's annotations say otherwise (GKE, Cloud Storage FUSE CSI driver, "Configure resources for the sidecar
# container", Standard clusters).
GCSFUSE_SIDECAR_REQUESTS = (250, 256)


# The platform's volumes on GKE: PD balanced with the stack's disk key (components/gcp/platform.py
# pd_storage_class_parameters); slurmctld's state volume uses it too.
STORAGE_CLASS_NAME = "pd-balanced-cmek"
# GKE labels every node with its pool's name (GKE "About node pools": cloud.google.com/gke-nodepool), so a NodeSet
# selects its pool's nodes by it.
GKE_NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
# Slurm's login load balancer: an internal passthrough Network Load Balancer in the cluster's VPC (GKE "LoadBalancer
# Service parameters": networking.gke.io/load-balancer-type: "Internal", every GKE version); the LoginSet adds the
# spec's source ranges (loadBalancerSourceRanges).
LOGIN_SERVICE = {"annotations": {"networking.gke.io/load-balancer-type": "Internal"}}


def platform_inputs(spec: ClusterSpec, *, bucket: str, disk_key: str | None,
                    gpu_network_objects: tuple[dict[str, object], ...],
                    gpu_pools: Sequence[pulumi.Resource] = (),
                    shared_filesystem: SharedFilesystem | None = None,
                    slurm_db: tuple[Any, Any] | None = None,
                    metrics_ready: tuple[pulumi.Resource, ...] = (),
                    records_ready: tuple[pulumi.Resource, ...] = (),
                    storage_check_ready: tuple[pulumi.Resource, ...] = (),
                    slurm_secret_ready: tuple[pulumi.Resource, ...] = (),
                    serving_ready: Mapping[str, tuple[pulumi.Resource, ...]] | None = None,
                    serving_gateway: ServingGateway | None = None) -> PlatformInputs:
    """The cloud-neutral description of the cluster the Kubernetes platform is built from; ``slurm_db`` is Slurm's
    accounting database (host, password) when the stack created one; ``metrics_ready``, ``records_ready`` and
    ``storage_check_ready`` the Workload Identity grants the storage exporter, the acceptance recorder and the
    storage check's bucket leg wait for; ``serving_gateway`` how GKE fronts the served models (with
    inference.gateway: components/gcp/serving_gateway.py)."""
    gcp_spec = spec.gcp_spec()
    catalog = load_gcp_catalog()
    units = gpu_units_per_gpu(spec.platform.gpu_sharing)
    prices = load_prices("gcp")
    pools = []
    slurm_cpu = slurm_cpu_groups(spec)
    for pool in gcp_spec.node_pools:
        facts = catalog[pool.machine_type]
        if not facts.gpu_count and pool.name not in slurm_cpu:  # Slurm's CPU pools run slurmd too (no GPU)
            continue
        placed = pool.capacity.type == "reservation" or is_compact(pool, facts)
        price = node_hour_price(prices, "gcp", pool.capacity.type, pool.machine_type)
        pools.append(GpuPool(
            name=pool.name, instance_type=pool.machine_type, gpus_per_node=facts.gpu_count, max_nodes=pool.max_size,
            fabric_per_node=0, vcpu_per_node=facts.vcpu.value, memory_gib_per_node=facts.memory_gib.value,
            # A Slurm pool shares no GPU (GKE refuses a container more than one time-shared GPU, and slurmd holds them
            # all): its units are whole GPUs.
            placed=placed, host_topology=pool.name in serving_node_groups(spec),
            gpu_units_per_gpu=1 if pool.name in slurm_node_groups(spec) else units,
            queued=pool.capacity.type == "flex-start",
            # GKE's autoscaler grows a pool with room between its sizes; a flex-start pool's nodes come before
            # admission, through the ProvisioningRequest.
            grows_after_admission=pool.min_size != pool.max_size and pool.capacity.type != "flex-start",
            node_hour_usd=price[0].usd if price is not None else None,
            price_basis=describe(*price) if price is not None else "",
            # TCPX and TCPXO GPU NICs are gVNIC host interfaces; RDMA (A3 Ultra, A4) NICs are ConnectX devices.
            gpu_model=facts.gpu_model, fabric_kind={"TCPX": "gpu-nic", "TCPXO": "gpu-nic", "RDMA": "rdma"}.get(
                facts.gpudirect, "none"), fabric_devices=facts.gpu_nic_count if facts.gpudirect != "none" else 0))
    gke_drivers = gke_manages_drivers(spec)
    flavours = {catalog[p.machine_type].gpudirect for p in gcp_spec.node_pools} - {"none"}
    manifests = gpudirect_manifests()
    installers = tuple((m.name, m.url) for f in sorted(flavours) for m in manifests.get(f, ()))
    networks = [str(m["metadata"]["name"]) for m in gpu_network_objects  # type: ignore[index]
                if m.get("kind") == "Network"]
    acceptance_fabrics = {}
    for pool in gcp_spec.node_pools:
        facts = catalog[pool.machine_type]
        if facts.gpu_count and facts.gpudirect != "none" and networks:
            fabric = gpudirect_pod_fabric(facts.gpudirect, facts.gpu_count, networks)
            if fabric is not None:
                acceptance_fabrics[pool.name] = fabric
    labels = spec.billing_labels
    team_objects: dict[str, tuple[Manifest, ...]] = {
        t.name: checkpoint_volume(t.name, bucket, dict(labels)) for t in spec.teams}
    # gcp.storage.buckets: a claim per bucket in each namespace its access names (the names are known before apply).
    for extra in gcp_spec.storage.buckets:
        for team, mode in sorted(extra.access.items()):
            team_objects[team] += bucket_volume(extra.name, team, gcs_bucket_name(gcp_spec.project, spec.name,
                                                                                  extra.name),
                                                mode == "read", dict(labels))
    slurm_names = slurm_node_groups(spec)
    team_cpu = team_cpu_groups(spec)
    # GKE's cluster autoscaler grows a pool with room between its sizes after Kueue admitted the pods that need it.
    cpu_pools = [CpuPool(name=p.name, instance_type=p.machine_type, max_nodes=p.max_size,
                         vcpu_per_node=catalog[p.machine_type].vcpu.value,
                         memory_gib_per_node=catalog[p.machine_type].memory_gib.value,
                         grows_after_admission=p.min_size != p.max_size)
                 for p in gcp_spec.node_pools if p.name in team_cpu]
    return PlatformInputs(
        # NodeSets on their pools' gke-nodepool label (on a GPUDirect pool the acceptance pods' fabric shape: the GPU
        # networks, TCPXO's receive-datapath sidecar, the plugin's environment per task), the platform's CMEK PD
        # class, an internal load balancer for login. With GKE's own GPU stack no DCGM job mapping:
        # GKE's managed DCGM exporter is not configurable to read a job-mapping directory (research notes
        # 2026-12-01, Metrics: unconfirmed, likely not), so the prolog would write files nothing reads.
        slurm=slurm_cluster(spec, pools, node_label=GKE_NODEPOOL_LABEL, fabric_resource=None,
                            storage_class=STORAGE_CLASS_NAME, login_service=LOGIN_SERVICE,
                            database_host=slurm_db[0] if slurm_db else None, shared=shared_filesystem is not None,
                            fs=shared_filesystem, pod_fabrics=acceptance_fabrics,
                            job_mapping=not gke_drivers),
        slurm_db_password=slurm_db[1] if slurm_db else None,
        # sssd.conf from Secret Manager in the stack's project, with ESO's controller's Workload Identity (no auth
        # block: external-secrets docs/provider/google-secrets-manager.md "Authorizing the Core Controller Pod")
        slurm_secret_store={"gcpsm": {"projectID": gcp_spec.project}} if slurm_secret_ready else None,
        slurm_secret_ready=slurm_secret_ready,
        platform_budget_notify=tuple(spec.billing.notify),
        filesystem_spec_path=spec_path("gcp", "storage", "filesystem"),
        cloud_objects_spec_path=spec_path("gcp", "network"),
        cluster_name=spec.name,
        labels=labels,
        teams=list(spec.teams),
        platform=spec.platform,
        pools=[p for p in pools if p.name not in slurm_names],  # Kueue's; Slurm's pools run slurmd
        cpu_pools=cpu_pools,
        driver_on_host=gke_drivers,
        storage_provisioner=PD_CSI,
        storage_parameters=pd_storage_class_parameters(disk_key),
        fabric=None,
        topology=GKE_TOPOLOGY,
        retain_data=spec.deletion_protection,
        checkpoint_service_account=CHECKPOINT_SERVICE_ACCOUNT,
        checkpoint_policy=stack_checkpoint_policy(spec),
        acceptance_image=spec.acceptance.image if spec.acceptance.enabled else None,
        node_check_expected=per_node_expected(spec),
        critical_priority_quota=True,
        acceptance_tests_dir=spec.acceptance.tests_dir,
        acceptance_fabrics=acceptance_fabrics,
        bucket_scheme="gs",
        cloud_objects=gpu_network_objects,
        cloud_manifests=installers,
        team_objects=team_objects,
        cloud_gpu_stack=GKE_GPU_STACK if gke_drivers else None,
        extra_egress=GKE_METADATA_EGRESS,
        node_cidrs=(),  # Dataplane V2 (Cilium) selects nodes by entity, not CIDR: the scrape rule names ports only
        system_registries=GKE_SYSTEM_REGISTRIES,
        storage_class_name=STORAGE_CLASS_NAME,
        tenant_pod_security="privileged" if flavours else "baseline",
        gpudirect_pod_rules=gpudirect_pod_rules(sorted(flavours)[0], gcp_spec.rxdm.releases, gcp_spec.rxdm.images)
        if flavours else None,
        cloud_namespaces=GKE_MANAGED_NAMESPACES,
        gpu_node_dependencies=tuple(gpu_pools),
        shared_filesystem=shared_filesystem,
        injected_sidecar=GCSFUSE_SIDECAR_REQUESTS,
        telemetry=cloud_telemetry(spec, bucket, metrics_ready),
        acceptance_recorder=AcceptanceRecorder(bucket=bucket, scheme="gs",
                                               image=spec.acceptance.recorder_image or recorder_image("gcp"),
                                               ready=records_ready) if spec.acceptance.enabled else None,
        storage_check_ready=storage_check_ready,
        # The weights streamed from the checkpoint bucket by each model's own Workload Identity principal.
        serving=served_models(spec, bucket=bucket, scheme="gs", ready=serving_ready),
        serving_gateway=serving_gateway,
    )


def cloud_telemetry(spec: ClusterSpec, bucket: str, ready: tuple[pulumi.Resource, ...] = ()) -> CloudTelemetry:
    """The GKE telemetry on the cluster: the storage exporter (Managed Lustre when the stack has it, the checkpoint
    bucket's requests), and what cannot be seen where the stack has GPUDirect pools."""
    g = spec.gcp_spec()
    catalog = load_gcp_catalog()
    gpudirect = any(catalog[p.machine_type].gpudirect != "none" and catalog[p.machine_type].gpu_count
                    for p in g.node_pools)
    lustre = g.storage.filesystem is not None and g.storage.filesystem.type == "managed-lustre"
    releases: tuple[CloudRelease, ...] = ()
    storage = None
    if g.telemetry.storage_metrics:
        releases = (CloudRelease(release=STACKDRIVER_RELEASE, chart="stackdriver-exporter",
                                 namespace=MONITORING_NAMESPACE,
                                 values=stackdriver_values(g.project, bucket, lustre), ready=ready,
                                 spec_path=spec_path("gcp", "telemetry", "storageMetrics")),)
        storage = StorageSignals(filesystem="managed-lustre" if lustre else None, bucket="gcs")
    return CloudTelemetry(releases=releases, storage=storage, not_visible=(NOT_VISIBLE,) if gpudirect else ())


def build(spec: ClusterSpec) -> CloudPlanes:
    """Create every GCP resource of a validated spec and the Kubernetes provider the platform goes through."""
    g = spec.gcp_spec()
    labels = {**spec.billing_labels, "cluster": spec.name}
    protect = spec.deletion_protection
    catalog = load_gcp_catalog()
    deployer = g.cluster.deployer
    provider = gcp.Provider(
        "gcp",
        project=g.project,
        region=g.region,
        zone=g.gpu_zone,
        impersonate_service_account=deployer.service_account,
        default_labels=labels,
        # Budgets and other billing-account APIs need a quota project (Cloud Billing Budget API).
        user_project_override=True,
        billing_project=g.project,
    )
    opts = pulumi.ResourceOptions(providers={"gcp": provider})
    with from_spec(spec_path("gcp", "project")):
        services = GcpServices("apis", project=g.project, apis=required_services(spec), opts=opts).services
    # Invokes wait for the APIs too (a fresh project has Cloud Resource Manager off).
    after_apis = pulumi.InvokeOutputOptions(provider=provider, depends_on=services)
    number = gcp.organizations.get_project_output(project_id=g.project, opts=after_apis).number

    with from_spec(spec_path("gcp")):
        keys = GcpKeys("keys", project=g.project, region=g.region, prefix=spec.name, project_number=number,
                       labels=labels, protect=protect, after=services, invoke_opts=after_apis, opts=opts)
    with from_spec(spec_path("gcp", "cluster"), team_items([t.name for t in spec.teams])):
        identities = GcpIdentities("identities", project=g.project, prefix=spec.name, admins=g.cluster.admin_members,
                                   team_groups={t.name: t.group for t in spec.teams if t.group},
                                   after=services, opts=opts)
    own = [p for p in g.node_pools if p.service_account is not None]  # pools with their own account
    with from_spec(spec_path("gcp", "nodePools")):
        pool_accounts = GcpPoolAccounts("pool-accounts", project=g.project, pools=own, after=services, opts=opts) \
            if own else None
    plan = gpu_network_plan(spec)
    fs = g.storage.filesystem
    with from_spec(spec_path("gcp", "network")):
        lustre = fs is not None and fs.type == "managed-lustre"
        network = GcpNetwork("network", spec=g, prefix=spec.name, labels=labels, gpu_plan=plan,
                             private_service_access=fs is not None or slurm_accounting(spec),
                             lustre_port=gcp_storage_limits().lustre_port if lustre else None,
                             serving_gateway=gateway_wanted(spec), after=services, opts=opts)
    with from_spec(spec_path("gcp", "storage")):
        storage = GcpStorage("storage", spec=g.storage, project=g.project, region=g.region, zone=g.gpu_zone,
                             prefix=spec.name, labels=labels, protect=protect, data_key=keys.data_key,
                             key_grants=keys.grants, network_id=network.network_id,
                             psa_connection=network.psa_connection, after=services,
                             record_retention_days=spec.acceptance.record_retention_days
                             if spec.acceptance.enabled else None, opts=opts)
    if g.billing_account is not None:
        with from_spec(spec_path("billing"), team_items([t.name for t in spec.teams])):
            GcpBudgets("cost", billing_account=g.billing_account, project=g.project, project_number=number,
                       cluster_name=spec.name, teams=spec.teams, billing=spec.billing, labels=labels,
                       billed_teams=teams_billed_directly(spec), after=services,
                       opts=opts)

    with from_spec(spec_path("gcp", "cluster")):
        cluster = GkeCluster("control-plane", spec=g, cluster_name=spec.name, labels=labels, protect=protect,
                             network=network.network_self_link, subnet=network.subnet_self_link,
                             multi_networking=bool(network.gpu_networks), secrets_key=keys.secrets_key,
                             disk_key=keys.disk_key, key_grants=keys.grants,
                             node_account=identities.node_service_account, dcgm=gke_manages_drivers(spec),
                             filesystem=fs.type if fs is not None else None, gateway_api=gateway_wanted(spec),
                             after=services, opts=opts)
    with from_spec(spec_path("teams"), team_items([t.name for t in spec.teams])):
        data_access = GcpDataAccess(
            "data-access", project=g.project, project_number=number, bucket=storage.bucket_name,
            teams=[t.name for t in spec.teams], team_account=CHECKPOINT_SERVICE_ACCOUNT,
            protect=protect, cluster=cluster.cluster,
            buckets={b.name: (storage.data_buckets[b.name], b.access) for b in g.storage.buckets},
            recorders=[("gpu-acceptance", RECORDER_SERVICE_ACCOUNT), (NODE_CHECK_NAMESPACE, NODE_CHECK_ACCOUNT)]
            if spec.acceptance.enabled else [],
            storage_check=("gpu-acceptance", STORAGE_CHECK_SERVICE_ACCOUNT)
            if (check := storage_check(spec)) is not None and check.bucket else None, opts=opts)
    serving_ready: dict[str, tuple[pulumi.Resource, ...]] = {}
    if spec.inference is not None:
        with from_spec(spec_path("inference", "models")):
            serving_ready = GcpServingAccess("serving-access", models=spec.inference.models, project=g.project,
                                             project_number=number, bucket=storage.bucket_name, protect=protect,
                                             cluster=cluster.cluster, opts=opts).ready
    secret_ready: tuple[pulumi.Resource, ...] = ()
    source = spec.scheduler.slurm.login.sssd_conf_from if spec.scheduler.slurm is not None else None
    if source is not None:
        # External Secrets' controller reads exactly the secret holding sssd.conf (objects/slurm_secrets.py)
        with from_spec(spec_path("scheduler", "slurm", "login", "sssdConfFrom")):
            reader = GcpSecretReader("slurm-sssd-reader", project=g.project, project_number=number,
                                     secret_id=source.key, namespace=ESO_NAMESPACE, account=ESO_SERVICE_ACCOUNT,
                                     after=[cluster.cluster, *services], opts=opts)
        secret_ready = (reader.grant,)
    location = g.region if g.cluster.location == "regional" else g.gpu_zone
    pools: dict[str, GkeNodePool] = {}
    system_pools: list[pulumi.Resource] = []
    gpu_pools: list[pulumi.Resource] = []
    system_names = {p.name for p in g.node_pools if not catalog[p.machine_type].gpu_count}
    dedicated = dedicated_cpu_groups(spec)

    def node_pool(index: int, pool: GcpNodePoolSpec, depends_on: Sequence[pulumi.Resource]) -> GkeNodePool:
        facts = catalog[pool.machine_type]
        wired = network.gpu_networks if facts.gpudirect != "none" and facts.gpu_count else []
        with from_spec(spec_path("gcp", "nodePools", index)):
            return GkeNodePool(
                f"nodepool-{pool.name}", spec=g, pool=pool, facts=facts,
                sharing=GpuSharingSpec() if pool.name in slurm_node_groups(spec) else spec.platform.gpu_sharing,
                cluster=cluster.name, location=location,
                node_account=pool_accounts.emails[pool.name] if pool_accounts and pool.service_account
                else identities.node_service_account, disk_key=keys.disk_key,
                key_grants=[*keys.grants, *(pool_accounts.grants[pool.name] if pool_accounts and pool.service_account
                                            else [])],
                labels={**group_billing_labels(spec, pool.team), "cluster": spec.name}, gpu_networks=wired,
                hugepages_2mi_gib=slurm_hugepages(spec, pool.name), team_cpu=pool.name in dedicated,
                depends_on=depends_on, opts=opts)

    # The rollout order of a version change, as dependencies: the cluster, the pools without GPUs (the system pods'
    # nodes), then the GPU pools.
    for index, pool in enumerate(g.node_pools):
        if pool.name in system_names:
            pools[pool.name] = node_pool(index, pool, ())
            system_pools.append(pools[pool.name])
    for index, pool in enumerate(g.node_pools):
        if pool.name not in system_names:
            pools[pool.name] = node_pool(index, pool, [pools[n].pool for n in sorted(system_names)])
            gpu_pools.append(pools[pool.name].pool)
    pools = {p.name: pools[p.name] for p in g.node_pools}  # the spec's order

    dns = deployer.api_access == "dns-endpoint"
    config = pulumi.Output.all(cluster.name, cluster.dns_endpoint if dns else cluster.endpoint, cluster.ca).apply(
        lambda a: gke_kubeconfig(str(a[0]), str(a[1]), None if dns else str(a[2]), deployer.service_account))
    kubeconfig: pulumi.Output[str] = pulumi.Output.secret(config)
    # Kubernetes objects wait for the cluster and the pools without GPUs (the system pods' nodes). They do not wait
    # for GPU pools: a reservation that is late or short would otherwise hold back the whole platform; the GPU
    # agents are DaemonSets that start when GPU nodes join.
    k8s_provider = k8s.Provider(
        "kubernetes", kubeconfig=kubeconfig, enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(depends_on=[cluster, *system_pools]))
    gpu_objects = tuple(network_objects([net for net, _, _ in network.gpu_networks]))
    # Both names are known before apply: the bucket's is derived from project and cluster (unless an existing one
    # is used), and Cloud KMS ids from project, location, key ring and key name.
    bucket = g.storage.checkpoint_bucket.existing_name or checkpoint_bucket_name(g.project, spec.name)
    disk_key = kms_key_id(g.project, g.region, spec.name, "disks")
    slurm_db = None
    slurm = spec.scheduler.slurm
    if slurm is not None and slurm.accounting.enabled:
        assert network.psa_connection is not None and network.psa_range_name is not None  # private_service_access
        with from_spec(spec_path("scheduler", "slurm", "accounting")):
            db = SlurmAccountingDb("slurm-accounting", spec=slurm.accounting.database, project=g.project,
                                   region=g.region, zone=g.gpu_zone, physical_prefix=spec.name,
                                   network_id=network.network_id, psa_range=network.psa_range_name,
                                   psa_connection=network.psa_connection, data_key=keys.data_key, labels=labels,
                                   protect=protect, production=spec.environment == "prod",
                                   maintenance_start=g.cluster.maintenance.start, after=services, opts=opts)
        slurm_db = (db.host, db.password)
    metrics_ready: tuple[pulumi.Resource, ...] = ()
    if g.telemetry.storage_metrics:
        with from_spec(spec_path("gcp", "telemetry")):
            metrics_ready = tuple(GcpTelemetry("telemetry", project=g.project, project_number=number,
                                               cluster=cluster.cluster, after=services, opts=opts).grants)
    inputs = platform_inputs(spec, bucket=bucket, disk_key=disk_key, gpu_network_objects=gpu_objects,
                             gpu_pools=gpu_pools, shared_filesystem=lustre_volume(spec, storage.filesystem_address),
                             slurm_db=slurm_db, metrics_ready=metrics_ready, records_ready=tuple(data_access.recorder),
                             storage_check_ready=(data_access.storage_check,) if data_access.storage_check else (),
                             slurm_secret_ready=secret_ready, serving_ready=serving_ready,
                             serving_gateway=gke_serving_gateway(
                                 address_name=network.gateway_address, address_ip=gateway_ip(g.network.node_cidr),
                                 proxy_only_cidr=g.network.proxy_only_cidr,
                                 # and the cluster: its Gateway API (turned on in place on an existing cluster)
                                 # installs the Gateway and InferencePool CRDs
                                 ready=(*network.gateway_ready, cluster.cluster))
                             if network.gateway_address is not None and g.network.proxy_only_cidr is not None
                             else None)
    outputs = ClusterOutputs(
        cluster_name=cluster.name,
        endpoint=cluster.endpoint,
        kubeconfig=kubeconfig,
        kubeconfig_command=cluster.name.apply(
            lambda n: f"gcloud container clusters get-credentials {n} --location {location} --project {g.project}"
            # People take the same way in as the deployer: the DNS endpoint where it is on, else the private IP.
            + (" --dns-endpoint" if dns else " --internal-ip" if g.cluster.endpoint == "private" else "")),
        gpu_availability_zone=pulumi.Output.from_input(g.gpu_zone),
        checkpoint_bucket=storage.bucket_name,
        filesystem_dns_name=storage.filesystem_address,
        filesystem_mount_name=pulumi.Output.from_input(mount) if (mount := lustre_filesystem_name(spec)) else None,
        node_group_names={name: p.pool_name for name, p in pools.items()},
        checkpoint_role_arns={t.name: wif_principal(number, g.project, t.name, CHECKPOINT_SERVICE_ACCOUNT)
                              for t in spec.teams},
    )
    return CloudPlanes(kubernetes_provider=k8s_provider, platform=inputs, outputs=outputs)
