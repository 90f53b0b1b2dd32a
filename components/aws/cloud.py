"""The AWS cloud module: builds the network, compute, storage and EKS planes in order, wires their outputs
together, and hands the cloud-neutral wiring (``components/cluster.py``) a :class:`CloudPlanes`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.autoscaler import NAMESPACE as AUTOSCALER_NAMESPACE
from components.aws.autoscaler import RELEASE as AUTOSCALER_RELEASE
from components.aws.autoscaler import AwsAutoscalerIdentity, autoscaler_values
from components.aws.capacity_block import BlockWindow
from components.aws.compute import AwsNodeGroup
from components.aws.cost import DATA_EXPORT_REGION, AwsCostPlane
from components.aws.data_access import (
    CHECKPOINT_SERVICE_ACCOUNT,
    AwsDataAccess,
    DataAccessArgs,
)
from components.aws.eks import EksAddons, EksControlPlane
from components.aws.kubeconfig import kubeconfig, update_kubeconfig_command
from components.aws.network import AwsNetwork, DeployerPath
from components.aws.platform import AWS_TOPOLOGY, EBS_GP3, POD_IDENTITY_EGRESS, POD_IDENTITY_EGRESS_IPV6, efa_fabric
from components.aws.serving import AwsServingAccess
from components.aws.serving_gateway import eks_serving_gateway
from components.aws.slurm_db import SlurmAccountingDb
from components.aws.slurm_secrets import AwsSecretReaderIdentity
from components.aws.storage import AwsStorage
from components.aws.telemetry import (
    CLOUDWATCH_EXPORTER_RELEASE,
    EFA_EXPORTER_RELEASE,
    FLUENT_BIT_RELEASE,
    LOGS_NAMESPACE,
    AwsTelemetry,
    cloudwatch_exporter_config,
    cloudwatch_exporter_values,
    efa_exporter_values,
    fluent_bit_values,
    log_group_names,
)
from components.bootstrap import ClusterConnection, efa_interfaces
from components.catalog import load_addon_pins, load_aws_catalog
from components.catalog.charts import cluster_autoscaler_image, recorder_image, tool_image
from components.catalog.prices import describe, load_prices, node_hour_price
from components.clock import utcnow
from components.kubernetes.inputs import STORAGE_CLASS, CloudRelease, CloudTelemetry, PlatformInputs
from components.kubernetes.objects import (
    MONITORING_NAMESPACE,
    NODE_GROUP_LABEL,
    AcceptanceRecorder,
    FabricSignals,
    LogSignals,
    SharedFilesystem,
    StorageSignals,
    slurm_cluster,
    volume_generation,
)
from components.kubernetes.objects.node_check import per_node_expected
from components.kubernetes.objects.storage_check import storage_check
from components.kubernetes.quotas import CpuPool, GpuPool
from components.kubernetes.serving import served_models
from components.planes import CloudPlanes, ClusterOutputs
from components.provenance import from_spec, spec_path, team_items
from components.sizing.plan import stack_checkpoint_policy
from components.spec import ClusterSpec, default_subnets, gpu_units_per_gpu, is_autoscaled, is_placed
from components.spec.aws import NodeGroupSpec
from components.spec.decisions import (
    dedicated_cpu_groups,
    group_billing_labels,
    node_release,
    serving_node_groups,
    slurm_cpu_groups,
    slurm_hugepages,
    slurm_node_groups,
    team_cpu_groups,
    teams_billed_directly,
)

# FSx for Lustre through its CSI driver, statically provisioned (kubernetes-sigs/aws-fsx-csi-driver v1.9.0,
# examples/kubernetes/static_provisioning: volumeHandle the filesystem id, volumeAttributes dnsname and mountname,
# mountOptions flock, Retain). The node mounts "<dnsname>@tcp:/<mountname>" (pkg/driver/node.go), so a mountname of
# "<MountName>/<dir>" is FSx's fileset mount of that directory (FSx for Lustre user guide, "Mounting specific
# filesets"): each team's volume is its own directory under the path linked to the bucket.
FSX_CSI = "fsx.csi.aws.com"
FSX_SOURCE = ("kubernetes-sigs/aws-fsx-csi-driver v1.9.0 static provisioning; FSx for Lustre user guide, mounting "
              "specific filesets")


def fsx_volume(spec: ClusterSpec, file_system_id: pulumi.Input[str], dns_name: pulumi.Input[str],
               mount_name: pulumi.Input[str], ready: tuple[pulumi.Resource, ...] = ()) -> SharedFilesystem | None:
    """The FSx filesystem as pods mount it, or None without one."""
    fs = spec.aws_spec().storage.filesystem
    if fs is None:
        return None
    team_root = fs.mount_path.strip("/")
    generation = pulumi.Output.all(file_system_id, dns_name, mount_name).apply(
        lambda v: volume_generation(*map(str, v), team_root))

    def attributes(path: str | None) -> dict[str, Any]:
        name = mount_name if path is None else pulumi.Output.concat(mount_name, "/", path)
        return {"dnsname": dns_name, "mountname": name}
    return SharedFilesystem(
        driver=FSX_CSI, volume_handle=file_system_id, attributes=attributes, capacity_gib=fs.capacity_gib,
        mount_options=("flock",), team_root=team_root, scoped=True, tool_image=tool_image(), source=FSX_SOURCE,
        generation=generation, ready=ready, owned=fs.existing is None)


def node_autoscaler(spec: ClusterSpec, ready: tuple[pulumi.Resource, ...] = ()) -> CloudRelease | None:
    """The Cluster Autoscaler's release when a node group autoscales (None otherwise): the image of the cluster's
    Kubernetes minor (the spec rules refuse a minor without one), its pod on the system groups (no GPUs, no team CPU
    quota)."""
    aws_spec = spec.aws_spec()
    catalog = load_aws_catalog()
    if not any(is_autoscaled(g, catalog[g.instance_type]) for g in aws_spec.node_groups):
        return None
    image = cluster_autoscaler_image(aws_spec.control_plane.kubernetes_version)
    assert image is not None, "rule cluster-autoscaler-release"
    dedicated = dedicated_cpu_groups(spec)
    system = [g.name for g in aws_spec.node_groups
              if not catalog[g.instance_type].gpu_count and g.name not in dedicated]
    return CloudRelease(release=AUTOSCALER_RELEASE, chart="cluster-autoscaler", namespace=AUTOSCALER_NAMESPACE,
                        values=autoscaler_values(spec.name, aws_spec.region, image, system), ready=ready,
                        spec_path=spec_path("aws", "nodeGroups"))


# Slurm's login load balancer: an internal NLB from EKS's built-in service controller (no AWS Load Balancer Controller
# is installed), in the subnets tagged kubernetes.io/role/internal-elb (Kubernetes "Service" docs, cloud provider AWS
# annotations aws-load-balancer-type and aws-load-balancer-internal).
LOGIN_SERVICE = {"annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                                 "service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}


# Fluent Bit reads host paths (/var/log): its namespace runs privileged (components/catalog/namespaces.yaml).
FSX_MBPS_SCRATCH_2 = 200  # SCRATCH_2's baseline MB/s per TiB (FSx for Lustre user guide, "Performance")


def filesystem_throughput_bytes(spec: ClusterSpec) -> float | None:
    """The filesystem's provisioned throughput in bytes per second (capacity x MB/s per TiB; MB = 10^6 bytes), or
    None without one."""
    fs = spec.aws_spec().storage.filesystem
    if fs is None:
        return None
    per_tib = fs.per_unit_storage_throughput or (FSX_MBPS_SCRATCH_2 if fs.deployment_type == "SCRATCH_2" else None)
    return None if per_tib is None else fs.capacity_gib / 1024 * per_tib * 1e6


def cloud_telemetry(spec: ClusterSpec, pools: list[GpuPool], ready_logs: tuple[pulumi.Resource, ...] = (),
                    ready_metrics: tuple[pulumi.Resource, ...] = ()) -> CloudTelemetry:
    """The AWS telemetry on the cluster: the EFA exporter on the EFA groups (with an image), the storage metrics
    exporter and the log shipper, each release after its Pod Identity association (``ready_*``)."""
    aws_spec = spec.aws_spec()
    tel = aws_spec.telemetry
    releases: list[CloudRelease] = []
    fabric = None
    efa_groups = tuple(sorted(p.name for p in pools if p.fabric_per_node))
    if tel.efa_exporter_image is not None and efa_groups:
        releases.append(CloudRelease(release=EFA_EXPORTER_RELEASE, chart="efa-node-exporter",
                                     namespace=MONITORING_NAMESPACE,
                                     values=efa_exporter_values(tel.efa_exporter_image, efa_groups),
                                     spec_path=spec_path("aws", "telemetry", "efaExporterImage")))
        fabric = FabricSignals(kind="efa", node_groups=efa_groups)
    storage = None
    fs = aws_spec.storage.filesystem
    created_bucket = aws_spec.storage.checkpoint_bucket.existing_name is None
    if tel.storage_metrics and (fs is not None or created_bucket):
        config = cloudwatch_exporter_config(
            aws_spec.region, spec.name, fs.existing.file_system_id if fs is not None and fs.existing else None,
            discover_filesystem=fs is not None and fs.existing is None, request_metrics=created_bucket)
        releases.append(CloudRelease(release=CLOUDWATCH_EXPORTER_RELEASE, chart="yet-another-cloudwatch-exporter",
                                     namespace=MONITORING_NAMESPACE, values=cloudwatch_exporter_values(config),
                                     ready=ready_metrics, spec_path=spec_path("aws", "telemetry", "storageMetrics")))
        storage = StorageSignals(filesystem="fsx" if fs is not None else None,
                                 throughput_bytes_per_s=filesystem_throughput_bytes(spec),
                                 capacity_bytes=fs.capacity_gib * 2**30 if fs is not None else None,
                                 bucket="s3" if created_bucket else None)
    logs = None
    if tel.container_logs.enabled:
        releases.append(CloudRelease(release=FLUENT_BIT_RELEASE, chart="aws-for-fluent-bit", namespace=LOGS_NAMESPACE,
                                     values=fluent_bit_values(aws_spec.region, log_group_names(spec.name),
                                                              tel.container_logs.node_logs),
                                     ready=ready_logs, spec_path=spec_path("aws", "telemetry", "containerLogs")))
        logs = LogSignals(daemonset=FLUENT_BIT_RELEASE, namespace=LOGS_NAMESPACE)
    return CloudTelemetry(releases=tuple(releases), fabric=fabric, storage=storage, logs=logs)


def platform_inputs(spec: ClusterSpec, shared_filesystem: SharedFilesystem | None = None,
                    autoscaler: CloudRelease | None = None, slurm_db: tuple[Any, Any] | None = None,
                    telemetry_ready: tuple[tuple[pulumi.Resource, ...], tuple[pulumi.Resource, ...]] = ((), ()),
                    records_bucket: Any = None, records_ready: tuple[pulumi.Resource, ...] = (),
                    node_ipv6_cidr: Any = None,
                    storage_check_ready: tuple[pulumi.Resource, ...] = (),
                    slurm_secret_ready: tuple[pulumi.Resource, ...] = (),
                    serving_ready: Mapping[str, tuple[pulumi.Resource, ...]] | None = None) -> PlatformInputs:
    """The cloud-neutral description of the cluster that the Kubernetes platform is built from; ``telemetry_ready``
    (the log shipper's and the metrics reader's identities) and ``records_bucket`` (the checkpoint bucket's name,
    where the acceptance gate's records go), ``node_ipv6_cidr`` (the VPC's IPv6 block) and ``storage_check_ready``
    (the storage check's Pod Identity association) come from the cloud resources."""
    aws_spec = spec.aws_spec()
    catalog = load_aws_catalog()
    ipv6 = aws_spec.network.ip_family == "ipv6"
    units = gpu_units_per_gpu(spec.platform.gpu_sharing)
    prices = load_prices("aws")
    pools = []
    slurm_cpu = slurm_cpu_groups(spec)
    serving = serving_node_groups(spec)
    for group in aws_spec.node_groups:
        facts = catalog[group.instance_type]
        if not facts.gpu_count and group.name not in slurm_cpu:  # Slurm's CPU groups run slurmd too (no GPU)
            continue
        price = node_hour_price(prices, "aws", group.capacity.type, group.instance_type)
        pools.append(GpuPool(
            name=group.name,
            instance_type=group.instance_type,
            gpus_per_node=facts.gpu_count,
            max_nodes=group.max_size,
            fabric_per_node=efa_interfaces(group, facts),
            vcpu_per_node=facts.vcpu.value,
            memory_gib_per_node=facts.memory_gib.value,
            placed=is_placed(group, facts),
            host_topology=group.name in serving,
            gpu_units_per_gpu=units,
            grows_after_admission=is_autoscaled(group, facts),
            node_hour_usd=price[0].usd if price is not None else None,
            price_basis=describe(*price) if price is not None else "",
            gpu_model=facts.gpu_model,
            fabric_kind="efa" if efa_interfaces(group, facts) else "none",
            fabric_devices=efa_interfaces(group, facts),
        ))
    slurm_names = slurm_node_groups(spec)
    team_cpu = team_cpu_groups(spec)
    cpu_pools = [CpuPool(name=g.name, instance_type=g.instance_type, max_nodes=g.max_size,
                         vcpu_per_node=catalog[g.instance_type].vcpu.value,
                         memory_gib_per_node=catalog[g.instance_type].memory_gib.value,
                         grows_after_admission=is_autoscaled(g, catalog[g.instance_type]))
                 for g in aws_spec.node_groups if g.name in team_cpu]
    return PlatformInputs(
        # NodeSets on the groups' gpu-cluster/node-group label with every EFA interface, the platform's gp3 class
        # for slurmctld's state, an internal NLB for login.
        slurm=slurm_cluster(spec, pools, node_label=NODE_GROUP_LABEL, fabric_resource="vpc.amazonaws.com/efa",
                            storage_class=STORAGE_CLASS, login_service=LOGIN_SERVICE,
                            database_host=slurm_db[0] if slurm_db else None, shared=shared_filesystem is not None,
                            fs=shared_filesystem,
                            job_mapping=True),
        slurm_db_password=slurm_db[1] if slurm_db else None,
        # sssd.conf from Secrets Manager in the stack's region, with ESO's controller's Pod Identity (no auth block:
        # external-secrets docs/provider/aws-access.md "EKS Pod Identity Setup")
        slurm_secret_store={"aws": {"service": "SecretsManager", "region": aws_spec.region}}
        if slurm_secret_ready else None,
        slurm_secret_ready=slurm_secret_ready,
        platform_budget_notify=tuple(spec.billing.notify),
        filesystem_spec_path=spec_path("aws", "storage", "filesystem"),
        cloud_objects_spec_path=spec_path("aws"),
        cluster_name=spec.name,
        labels=spec.billing_labels,
        teams=list(spec.teams),
        platform=spec.platform,
        pools=[p for p in pools if p.name not in slurm_names],  # Kueue's; Slurm's groups run slurmd
        cpu_pools=cpu_pools,
        driver_on_host=True,  # the EKS AL2023 NVIDIA AMI ships the driver and container toolkit
        storage_provisioner=EBS_GP3[0],
        storage_parameters=EBS_GP3[1],
        fabric=efa_fabric([p.instance_type for p in pools if p.fabric_per_node]),  # Slurm's too: the plugin is per node
        topology=AWS_TOPOLOGY,
        extra_egress=(POD_IDENTITY_EGRESS, *((POD_IDENTITY_EGRESS_IPV6,) if ipv6 else ())),
        anywhere=("0.0.0.0/0", "::/0") if ipv6 else ("0.0.0.0/0",),
        node_cidrs=(aws_spec.network.vpc_cidr, *((node_ipv6_cidr,) if ipv6 and node_ipv6_cidr is not None else ())),
        retain_data=spec.deletion_protection,
        checkpoint_service_account=CHECKPOINT_SERVICE_ACCOUNT,
        checkpoint_policy=stack_checkpoint_policy(spec),
        acceptance_image=spec.acceptance.image if spec.acceptance.enabled else None,
        node_check_expected=per_node_expected(spec),
        acceptance_recorder=AcceptanceRecorder(bucket=records_bucket, scheme="s3",
                                               image=spec.acceptance.recorder_image or recorder_image("aws"),
                                               ready=records_ready)
        if spec.acceptance.enabled else None,
        shared_filesystem=shared_filesystem,
        storage_check_ready=storage_check_ready,
        node_autoscaler=autoscaler,
        telemetry=cloud_telemetry(spec, pools, *telemetry_ready),
        # The weights streamed from the checkpoint bucket by each model's own Pod Identity; the S3 client's region.
        serving=served_models(spec, bucket=records_bucket, scheme="s3", env=(("AWS_REGION", aws_spec.region),),
                              ready=serving_ready),
        serving_gateway=eks_serving_gateway(spec),
    )


def system_node_groups(spec: ClusterSpec, node_groups: dict[str, AwsNodeGroup]) -> list[aws.eks.NodeGroup]:
    """The node groups system pods (add-ons, the platform's controllers) run on: those without GPUs, whose nodes are
    untainted; every group when the stack has none (``gpuTaint: false``, GPU-only clusters)."""
    catalog = load_aws_catalog()
    cpu = [g.name for g in spec.aws_spec().node_groups if not catalog[g.instance_type].gpu_count]
    return [node_groups[n].node_group for n in (cpu or list(node_groups))]


def block_windows(spec: ClusterSpec) -> dict[str, BlockWindow]:
    """The Capacity Block window of each capacity-block node group, compared with the program's clock."""
    now = utcnow()
    out = {}
    for group in spec.aws_spec().node_groups:
        cap = group.capacity
        if cap.type == "capacity-block" and cap.start and cap.end and cap.instance_count:
            out[group.name] = BlockWindow(start=cap.start, end=cap.end, instance_count=cap.instance_count, now=now)
    return out




def build(spec: ClusterSpec) -> CloudPlanes:
    """Create every AWS resource of a validated spec and the Kubernetes provider the platform goes through.

    An explicit AWS provider carries the region and the billing labels as ``default_tags``; every
    component takes it through ``providers`` so nothing depends on ambient provider configuration.
    """
    aws_spec = spec.aws_spec()
    labels = spec.billing_labels
    protect = spec.deletion_protection
    catalog = load_aws_catalog()

    # One identity for the whole apply: the AWS provider assumes the deployer role, as the kubeconfig
    # does for every Kubernetes resource, so the access entry and the AWS permissions belong to one role.
    # The runner's own credentials only need sts:AssumeRole on it (its trust policy names the runner).
    provider = aws.Provider(
        "aws",
        region=aws_spec.region,
        assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=aws_spec.control_plane.deployer.role_arn,
                                                 session_name=f"pulumi-{spec.name}")],
        default_tags={"tags": {**spec.tags, **labels, "cluster": spec.name}},
    )
    opts = pulumi.ResourceOptions(providers={"aws": provider})
    # Budgets and the CUR 2.0 export are Billing objects served from us-east-1 only; same identity and tags.
    billing_provider = provider if aws_spec.region == DATA_EXPORT_REGION else aws.Provider(
        "aws-billing",
        region=DATA_EXPORT_REGION,
        assume_roles=[aws.ProviderAssumeRoleArgs(role_arn=aws_spec.control_plane.deployer.role_arn,
                                                 session_name=f"pulumi-{spec.name}")],
        default_tags={"tags": {**spec.tags, **labels, "cluster": spec.name}},
    )

    addons = load_addon_pins(aws_spec.control_plane.kubernetes_version)
    deployer = aws_spec.control_plane.deployer
    path = (DeployerPath(transit_gateway_id=deployer.transit_gateway_id, runner_cidrs=deployer.runner_cidrs)
            if deployer.api_access == "in-vpc" and deployer.transit_gateway_id else None)
    with from_spec(spec_path("aws", "network")):
        network = AwsNetwork("network", spec=aws_spec.network, region=aws_spec.region, physical_prefix=spec.name,
                             labels=labels, deployer_path=path, opts=opts)
    if aws_spec.zones_by_id:
        # Capacity Blocks and ODCRs are sold by AZ ID; zone names differ per account.
        zones = aws.get_availability_zones_output(
            filters=[{"name": "zone-id", "values": [aws_spec.gpu_zone]}],
            opts=pulumi.InvokeOutputOptions(provider=provider))
        gpu_zone: pulumi.Output[str] = zones.names.apply(lambda names: names[0] if names else "")
    else:
        gpu_zone = pulumi.Output.from_input(aws_spec.gpu_zone)
    private_subnets = [network.subnet_ids[sn.name] for sn in aws_spec.network.subnets if sn.role != "public"]
    team_access = [(arn, team.k8s_group) for team in spec.teams for arn in team.role_arns]
    with from_spec(spec_path("aws", "controlPlane")):
        control_plane = EksControlPlane(
            "control-plane", spec=aws_spec.control_plane, physical_name=spec.name, subnet_ids=private_subnets,
            labels=labels, protect=protect, addons=addons, team_access=team_access,
            ip_family=aws_spec.network.ip_family, opts=opts,
        )
    gpu_subnet = next(sn.name for sn in aws_spec.network.subnets if sn.role == "gpu")
    with from_spec(spec_path("aws", "storage")):
        storage = AwsStorage(
            "storage",
            spec=aws_spec.storage,
            physical_prefix=spec.name,
            vpc_id=network.vpc_id,
            gpu_subnet_id=network.subnet_ids[gpu_subnet],
            client_security_group_id=control_plane.cluster_security_group_id,
            labels=labels,
            protect=protect,
            region=aws_spec.region,
            request_metrics=aws_spec.telemetry.storage_metrics,
            record_retention_days=spec.acceptance.record_retention_days if spec.acceptance.enabled else None,
            opts=opts,
        )
    with from_spec(spec_path("teams"), team_items([t.name for t in spec.teams])):
        data_access = AwsDataAccess("data-access", DataAccessArgs(
            eks_cluster_name=control_plane.eks_cluster_name,
            eks_cluster_arn=control_plane.eks_cluster_arn,
            physical_prefix=spec.name,
            region=aws_spec.region,
            bucket_arn=storage.bucket_arn,
            data_key_arn=storage.data_key_arn,
            teams=[t.name for t in spec.teams],
            labels=labels,
            acceptance_records=spec.acceptance.enabled,
            storage_check_bucket=(check := storage_check(spec)) is not None and check.bucket,
        ), opts=opts)
    serving_ready: dict[str, tuple[pulumi.Resource, ...]] = {}
    if spec.inference is not None:
        with from_spec(spec_path("inference", "models")):
            serving_ready = AwsServingAccess(
                "serving-access", models=spec.inference.models, eks_cluster_name=control_plane.eks_cluster_name,
                eks_cluster_arn=control_plane.eks_cluster_arn, physical_prefix=spec.name, region=aws_spec.region,
                bucket_arn=storage.bucket_arn, data_key_arn=storage.data_key_arn, labels=labels, opts=opts).ready
    tel = aws_spec.telemetry
    with from_spec(spec_path("aws", "telemetry")):
        telemetry = AwsTelemetry(
            "telemetry", eks_cluster_name=control_plane.eks_cluster_name,
            eks_cluster_arn=control_plane.eks_cluster_arn, cluster_name=spec.name, region=aws_spec.region,
            labels=labels, protect=protect, ship_logs=tel.container_logs.enabled,
            retention_days=aws_spec.log_retention_days,
            read_metrics=tel.storage_metrics and (aws_spec.storage.filesystem is not None
                                                  or aws_spec.storage.checkpoint_bucket.existing_name is None),
            opts=opts)

    with from_spec(spec_path("billing"), team_items([t.name for t in spec.teams])):
        cost = AwsCostPlane(
            "cost",
            cluster_name=spec.name,
            teams=spec.teams,
            billing=spec.billing,
            labels=labels,
            tag_keys=sorted({*labels, "cluster"}),
            region=aws_spec.region,
            protect=protect,
            billing_provider=billing_provider,
            billed_teams=teams_billed_directly(spec),
            opts=opts,
        )

    windows = block_windows(spec)
    dedicated = dedicated_cpu_groups(spec)
    # What a custom-AMI node needs to join (EKS merges no bootstrap data into such a launch template).
    connection = pulumi.Output.all(control_plane.eks_cluster_name, control_plane.endpoint,
                                   control_plane.certificate_authority, control_plane.service_cidr).apply(
        lambda a: ClusterConnection(name=a[0], endpoint=a[1], certificate_authority=a[2], service_cidr=a[3]))
    node_groups: dict[str, AwsNodeGroup] = {}
    version = aws_spec.control_plane.kubernetes_version

    def node_group(index: int, group: NodeGroupSpec, depends_on: Sequence[pulumi.Resource]) -> AwsNodeGroup:
        facts = catalog[group.instance_type]
        names = group.subnets if group.subnets is not None else default_subnets(aws_spec, facts)
        release = node_release(group, facts, version)
        with from_spec(spec_path("aws", "nodeGroups", index)):
            return AwsNodeGroup(
                f"nodegroup-{group.name}",
                group=group,
                facts=facts,
                eks_cluster_name=control_plane.eks_cluster_name,
                physical_prefix=spec.name,
                node_role_arn=control_plane.node_role_arn,
                subnet_ids=[network.subnet_ids[n] for n in names],
                node_security_group_ids=[control_plane.cluster_security_group_id],
                efa_security_group_id=network.efa_security_group_id,
                labels=group_billing_labels(spec, group.team),
                block=windows.get(group.name),
                instance_tags={**spec.tags, "cluster": spec.name},
                connection=connection if group.ami_id is not None else None,
                vpc_id=network.vpc_id,
                ipv6=aws_spec.network.ip_family == "ipv6",
                gpu_units_per_gpu=gpu_units_per_gpu(spec.platform.gpu_sharing),
                hugepages_2mi_gib=slurm_hugepages(spec, group.name),
                team_cpu=group.name in dedicated,
                kubernetes_version=version,
                release_version=release.release_version if release is not None else None,
                depends_on=depends_on,
                opts=opts,
            )

    # The rollout order of an upgrade, as dependencies: the control plane, its add-ons, the system groups, the add-ons
    # that run on them, then the GPU groups (EKS user guide, update-cluster: the control plane first, then add-ons and
    # nodes). Without a system group (GPU-only clusters) every group is a system group.
    system = {g.name for g in aws_spec.node_groups if not catalog[g.instance_type].gpu_count} \
        or {g.name for g in aws_spec.node_groups}
    for index, group in enumerate(aws_spec.node_groups):
        if group.name in system:
            node_groups[group.name] = node_group(index, group, control_plane.network_addons)
    autoscaler_ready: tuple[pulumi.Resource, ...] = ()
    if any(is_autoscaled(g, catalog[g.instance_type]) for g in aws_spec.node_groups):
        with from_spec(spec_path("aws", "nodeGroups")):
            identity = AwsAutoscalerIdentity(
                "autoscaler", eks_cluster_name=control_plane.eks_cluster_name,
                eks_cluster_arn=control_plane.eks_cluster_arn, cluster_name=spec.name, physical_prefix=spec.name,
                labels=labels, opts=opts)
        autoscaler_ready = (identity.association,)

    with from_spec(spec_path("aws", "controlPlane")):
        cluster_addons = EksAddons(
            "addons",
            eks_cluster_name=control_plane.eks_cluster_name,
            eks_cluster_arn=control_plane.eks_cluster_arn,
            physical_prefix=spec.name,
            addons=addons,
            with_fsx=aws_spec.storage.filesystem is not None,
            labels=labels,
            nodes=[control_plane.pod_identity_agent, *system_node_groups(spec, node_groups)],
            opts=pulumi.ResourceOptions(providers={"aws": provider},
                                        depends_on=[control_plane.pod_identity_agent, *node_groups.values()]),
        )
    after_system = [*control_plane.network_addons, *system_node_groups(spec, node_groups), *cluster_addons.addons]
    for index, group in enumerate(aws_spec.node_groups):
        if group.name not in system:
            node_groups[group.name] = node_group(index, group, after_system)
    node_groups = {g.name: node_groups[g.name] for g in aws_spec.node_groups}  # the spec's order, as before

    config = pulumi.Output.all(
        control_plane.eks_cluster_name, control_plane.endpoint, control_plane.certificate_authority
    ).apply(lambda a: kubeconfig(str(a[0]), str(a[1]), str(a[2]), aws_spec.region, deployer.role_arn))
    kubeconfig_secret: pulumi.Output[str] = pulumi.Output.secret(config)
    # Every Kubernetes resource goes through this provider, so it waits for the deployer's access entry
    # (and its network path), the add-ons and the nodes.
    k8s_provider = k8s.Provider(
        "kubernetes",
        kubeconfig=kubeconfig_secret,
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(
            depends_on=[*network.deployer_path, *control_plane.deployer_access, cluster_addons,
                        *node_groups.values()]),
    )
    outputs = ClusterOutputs(
        cluster_name=control_plane.eks_cluster_name,
        endpoint=control_plane.endpoint,
        kubeconfig=kubeconfig_secret,
        kubeconfig_command=control_plane.eks_cluster_name.apply(
            lambda name: update_kubeconfig_command(name, aws_spec.region)),
        gpu_availability_zone=gpu_zone,
        checkpoint_bucket=storage.bucket_name,
        filesystem_dns_name=storage.filesystem_dns_name,
        filesystem_mount_name=storage.filesystem_mount_name,
        node_group_names={name: ng.node_group_name for name, ng in node_groups.items()},
        checkpoint_role_arns=dict(data_access.team_role_arns),
        cost_export_bucket=cost.export_bucket_name,
    )
    shared = None
    if storage.filesystem_id is not None and storage.filesystem_dns_name is not None \
            and storage.filesystem_mount_name is not None:
        shared = fsx_volume(spec, storage.filesystem_id, storage.filesystem_dns_name, storage.filesystem_mount_name,
                            (storage.filesystem_link,) if storage.filesystem_link is not None else ())
    slurm_db = None
    slurm = spec.scheduler.slurm
    if slurm is not None and slurm.accounting.enabled:
        system_subnets = [network.subnet_ids[sn.name] for sn in aws_spec.network.subnets if sn.role == "system"]
        with from_spec(spec_path("scheduler", "slurm", "accounting")):
            db = SlurmAccountingDb("slurm-accounting", spec=slurm.accounting.database, physical_prefix=spec.name,
                                   vpc_id=network.vpc_id, subnet_ids=system_subnets,
                                   client_security_group_id=control_plane.cluster_security_group_id, labels=labels,
                                   protect=protect, production=spec.environment == "prod", opts=opts)
        slurm_db = (db.host, db.password)
    secret_ready: tuple[pulumi.Resource, ...] = ()
    source = slurm.login.sssd_conf_from if slurm is not None else None
    if source is not None:
        with from_spec(spec_path("scheduler", "slurm", "login", "sssdConfFrom")):
            reader = AwsSecretReaderIdentity(
                "slurm-sssd-reader", eks_cluster_name=control_plane.eks_cluster_name,
                eks_cluster_arn=control_plane.eks_cluster_arn, region=aws_spec.region, key=source.key,
                kms_key_arn=source.kms_key_arn, physical_prefix=spec.name, labels=labels, opts=opts)
        secret_ready = (reader.association,)
    ready = (tuple(r for r in (telemetry.log_shipper,) if r is not None),
             tuple(r for r in (telemetry.metrics_reader,) if r is not None))
    # The per-node runs' pods get credentials only once the recorder's association exists.
    inputs = platform_inputs(spec, shared, node_autoscaler(spec, autoscaler_ready), slurm_db, telemetry_ready=ready,
                             records_bucket=storage.bucket_name,
                             records_ready=tuple(a for a in (data_access.recorder, data_access.node_check_recorder)
                                                 if a is not None),
                             node_ipv6_cidr=network.ipv6_cidr_block,
                             storage_check_ready=(data_access.storage_check,) if data_access.storage_check else (),
                             slurm_secret_ready=secret_ready, serving_ready=serving_ready)
    return CloudPlanes(kubernetes_provider=k8s_provider, platform=inputs, outputs=outputs)
