"""Google Cloud in the cost family: GKE node pools by machine type and provisioning model (on-demand, Spot,
flex-start, specific reservation), their boot disks and Local SSD, the GKE cluster fee, Managed Lustre / Filestore /
Parallelstore capacity, Cloud NAT, KMS key versions and budgets, from ``prices_gcp.yaml``; GCS buckets and NAT traffic
from the usage file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from blueprint.cost.cloud import Shares
from blueprint.cost.lines import (
    HOURS_PER_MONTH,
    CostLine,
    ResourceCost,
    Usage,
    UsageField,
    UsageFields,
    usage_lines,
)
from blueprint.cost.lines import dict_input as _dict
from blueprint.cost.lines import int_input as _int
from blueprint.cost.lines import line as _line
from blueprint.cost.lines import number_input as _number
from blueprint.cost.prices import Price
from blueprint.graph.model import GraphResource, ResourceGraph

GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
GCP_LUSTRE = "gcp:lustre/instance:Instance"
GCP_FILESTORE = "gcp:filestore/instance:Instance"
GCP_PARALLELSTORE = "gcp:parallelstore/instance:Instance"
GCP_NAT = "gcp:compute/routerNat:RouterNat"
GCP_KMS_KEY = "gcp:kms/cryptoKey:CryptoKey"
GCP_BUDGET = "gcp:billing/budget:Budget"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
GCP_SQL = "gcp:sql/databaseInstance:DatabaseInstance"
SQL_BACKUPS = "Cloud SQL backup GiB stored (no usage quantity read)"
GCP_USAGE_PRICED = {
    GCS_BUCKET: "stored GiB and operations",
    GCP_NAT: "GiB processed",
}
GKE_OBSERVABILITY = "Cloud Logging GiB ingested and Managed Prometheus samples (no usage quantity or price read)"
LOCAL_SSD_GIB = 375  # every Local SSD disk is 375 GiB (Compute Engine "About Local SSD disks")
NAT_PORTS_PER_IP = 64512  # ports 1024-65535 of one NAT IP address (Cloud NAT "Ports and addresses")
NAT_VM_CAP = 32  # Cloud NAT bills per VM up to 32 VMs, then a flat gateway hour (prices_gcp.yaml cloud_nat)
RESERVATION_BILLING = ("cloud.google.com/batch/docs/create-run-job-reservation: 'A reservation for a VM incurs the "
                       "costs of that VM from when you create and until you delete the reservation'")



USAGE_FIELDS: UsageFields = {
    # GCP reuses the AWS quantity names (Google bills these per GiB: give GiB). For a GCS bucket putRequests are
    # Class A operations (insert, copy, list, ...) and getRequests Class B (get, metadata reads); the engine swaps
    # in the price of the bucket's storage class and location type.
    "gcp:storage/bucket:Bucket": {
        "storageGB": UsageField("GiB-months stored (GCS Standard, regional; incl. noncurrent and soft-deleted)",
                                "gcs.standard_regional_storage"),
        "putRequests": UsageField("Class A operations (thousands)", "gcs.class_a_operations", 1000.0),
        "getRequests": UsageField("Class B operations (thousands)", "gcs.class_b_operations", 1000.0),
    },
    "gcp:compute/routerNat:RouterNat": {
        "processedGB": UsageField("GiB processed (in and out)", "cloud_nat.data_processed"),
    },
}


@dataclass(frozen=True)
class GkePoolSize:
    """A GKE node pool's node counts and how they were read."""

    desired: int
    maximum: int
    note: str = ""
    minimum: int = 0


def gke_pool_size(inputs: dict[str, Any]) -> GkePoolSize:
    """Nodes at desired and max size. ``nodeCount`` and ``initialNodeCount`` are per zone (GKE multiplies them by
    the pool's zones); ``autoscaling.totalMin/MaxNodeCount`` are totals, ``min/maxNodeCount`` per zone."""
    locations = inputs.get("nodeLocations")
    zones = len(locations) if isinstance(locations, list) and locations else 1
    note = ""
    if not (isinstance(locations, list) and locations) and str(inputs.get("location") or "").count("-") == 1:
        note = ("nodeLocations not set on a regional pool: priced as one zone, but its node counts apply in every "
                "zone of the cluster (usually 3)")
    scaling = _dict(inputs.get("autoscaling"))
    if scaling:
        if "totalMaxNodeCount" in scaling:
            maximum = _int(scaling.get("totalMaxNodeCount"))
        else:
            maximum = _int(scaling.get("maxNodeCount")) * zones
        desired = min(_int(inputs.get("initialNodeCount")) * zones, maximum)
        minimum = _int(scaling.get("totalMinNodeCount")) if "totalMinNodeCount" in scaling else \
            _int(scaling.get("minNodeCount")) * zones
        return GkePoolSize(desired, maximum, note, min(minimum, maximum))
    count = _int(inputs.get("nodeCount")) * zones
    return GkePoolSize(count, count, note, count)


def _local_ssd_count(config: dict[str, Any]) -> int:
    for key in ("ephemeralStorageLocalSsdConfig", "localNvmeSsdBlockConfig"):
        count = _int(_dict(config.get(key)).get("localSsdCount"))
        if count:
            return count
    return _int(config.get("localSsdCount"))


def _gke_pool(res: GraphResource,
              prices: Mapping[str, Price]) -> tuple[tuple[CostLine, ...], tuple[CostLine, ...], str]:
    """A GKE node pool's lines at desired and at max size, and a note on how it was priced."""
    config = _dict(res.inputs.get("nodeConfig"))
    machine = str(config.get("machineType") or "e2-medium")  # GKE's default machine type
    size = gke_pool_size(res.inputs)
    affinity = _dict(config.get("reservationAffinity"))
    reserved = affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION"
    notes = [size.note] if size.note else []
    if config.get("flexStart"):
        section, model = "compute_flex_start", "flex-start"
        notes.append("flex-start (DWS): billed only while nodes run, at a rate Google discounts from on-demand; no "
                     "flex-start figure read, so the VM hours are bounded by the on-demand rate (unpriced where that "
                     "is not read either)")
    elif config.get("spot") or config.get("preemptible"):
        section, model = "compute_spot", "spot" if config.get("spot") else "preemptible"
        notes.append("Spot prices change up to once a day: the figure is indicative (stale)")
    else:
        section, model = "compute_on_demand", "on-demand"
    if reserved and section == "compute_on_demand":
        model = "specific reservation"
        values = affinity.get("values")
        names = ", ".join(map(str, values)) if isinstance(values, list) else "?"
        notes.append(f"specific reservation {names}: billed at the on-demand rate whether VMs run or not "
                     f"({RESERVATION_BILLING}); priced at the pool's reach ({size.maximum} nodes) for a full month "
                     "at both sizes (the reservation's own count is not in the graph and may be larger). A "
                     "committed-use discount attached to the reservation is not in the graph and not applied")
    else:
        reserved = False
    disk_type = str(config.get("diskType") or "pd-balanced")  # GKE's defaults: pd-balanced, 100 GB
    disk_gb = _int(config.get("diskSizeGb")) or 100
    ssd = _local_ssd_count(config)
    machine_price = prices.get(f"{section}.{machine}")
    ssd_included = machine_price is not None and "local-ssd" in machine_price.includes
    if ssd and ssd_included:
        notes.append(f"the {machine} price includes its bundled Local SSD ({ssd} x {LOCAL_SSD_GIB} GiB)")

    def lines(count: int) -> tuple[CostLine, ...]:
        paid = size.maximum if reserved else count
        out = [_line(f"{machine} VM hours ({model})", paid * HOURS_PER_MONTH, prices, f"{section}.{machine}", "hour"),
               _line(f"boot disks ({disk_type}, {disk_gb} GiB per node)", count * disk_gb, prices,
                     f"persistent_disk.{disk_type}", "GB-month")]
        if ssd and not ssd_included:  # Local SSD is held (and billed) with the VM, reserved or running
            out.append(_line(f"Local SSD ({ssd} x {LOCAL_SSD_GIB} GiB per node)", paid * ssd * LOCAL_SSD_GIB, prices,
                             "local_ssd.capacity", "GB-month"))
        return tuple(out)

    return lines(size.desired), lines(size.maximum), "; ".join(notes)


def _gke_cluster(res: GraphResource, prices: Mapping[str, Price]) -> tuple[tuple[CostLine, ...], str]:
    location = str(res.inputs.get("location") or "")
    zonal = location.count("-") >= 2
    note = ("zonal cluster: the GKE free tier ($74.40 a month per billing account) covers one zonal or Autopilot "
            "cluster's fee; not subtracted here, since it is per billing account, not per stack" if zonal else
            "regional cluster: the GKE free tier credit does not apply to it")
    return (_line("cluster management fee", HOURS_PER_MONTH, prices, "gke.cluster_fee", "hour"),), note


def _gcp_filesystem(res: GraphResource, prices: Mapping[str, Price]) -> tuple[CostLine, ...]:
    inputs = res.inputs
    if res.type == GCP_LUSTRE:
        tier = f"tier-{_number(inputs.get('perUnitStorageThroughput')):g}"
        return (_line(f"Managed Lustre {tier} ({tier[5:]} MB/s per TiB) capacity", _number(inputs.get("capacityGib")),
                      prices, f"managed_lustre.{tier}", "GB-month"),)
    if res.type == GCP_FILESTORE:
        tier = str(inputs.get("tier") or "BASIC_HDD").lower()
        shares = inputs.get("fileShares")
        share = _dict(shares[0] if isinstance(shares, list) and shares else shares)
        return (_line(f"Filestore {tier} capacity", _number(share.get("capacityGb")), prices, f"filestore.{tier}",
                      "GB-month"),)
    return (_line("Parallelstore capacity", _number(inputs.get("capacityGib")), prices, "parallelstore.capacity",
                  "GB-month"),)


def _nat_lines(res: GraphResource, vms: int, prices: Mapping[str, Price]) -> tuple[CostLine, ...]:
    """Cloud NAT at ``vms`` nodes: $0.0014 per VM-hour up to 32 VMs, the flat gateway hour above; its IPs."""
    if vms > NAT_VM_CAP:
        gateway = _line(f"NAT gateway hours ({vms} VMs, above {NAT_VM_CAP}: flat rate)", HOURS_PER_MONTH, prices,
                        "cloud_nat.gateway_hour", "hour")
    else:
        gateway = _line(f"NAT gateway VM-hours ({vms} VMs)", vms * HOURS_PER_MONTH, prices,
                        "cloud_nat.gateway_vm_hour", "hour")
    inputs = res.inputs
    if inputs.get("natIpAllocateOption") == "MANUAL_ONLY":
        listed = inputs.get("natIps")
        ips = len(listed) if isinstance(listed, list) else 0
    else:  # AUTO_ONLY: enough addresses for every VM's minimum ports (more if dynamic allocation grows them)
        ports = _int(inputs.get("minPortsPerVm")) or 64
        ips = -(-vms * ports // NAT_PORTS_PER_IP)
    addresses = f"{ips} address" + ("" if ips == 1 else "es")
    return (gateway, _line(f"NAT external IP address hours ({addresses})", ips * HOURS_PER_MONTH, prices,
                           "cloud_nat.external_ip_hour", "hour"))


def _nat_note(res: GraphResource) -> str:
    note = "every node counts as a VM using the gateway (private nodes)"
    if res.inputs.get("natIpAllocateOption") != "MANUAL_ONLY":
        note += ("; auto-allocated IPs priced for each node's minPortsPerVm, a lower bound: dynamic port allocation "
                 "(up to maxPortsPerVm) can add addresses")
    return note


def _kms_key(res: GraphResource, prices: Mapping[str, Price]) -> tuple[tuple[CostLine, ...], str]:
    level = str(_dict(res.inputs.get("versionTemplate")).get("protectionLevel") or "SOFTWARE")
    key = "kms.key_version" if level == "SOFTWARE" else f"kms.key_version_{level.lower()}"
    note = ""
    period = str(res.inputs.get("rotationPeriod") or "")
    if period.endswith("s") and _number(period[:-1]) > 0:
        days = _number(period[:-1]) / 86400
        note = (f"priced at 1 active version; rotation every {days:g} days adds a billed version each time (old "
                f"versions stay enabled until destroyed): about {1 + int(365 // days)} after a year")
    return (_line(f"active key version ({level})", 1, prices, key, "key-month"),), note


_GCS_CLASSES = {"STANDARD": "standard", "NEARLINE": "nearline", "COLDLINE": "coldline", "ARCHIVE": "archive"}


def _gcs_keys(res: GraphResource) -> dict[str, str]:
    """The price keys of a bucket's usage: its storage class and location type (regional, dual- or multi-region)."""
    cls = _GCS_CLASSES.get(str(res.inputs.get("storageClass") or "STANDARD").upper(), "standard")
    location = str(res.inputs.get("location") or "")
    if "-" in location:  # a region: US-CENTRAL1
        kind = "regional"
    elif _dict(res.inputs.get("customPlacementConfig")) or any(ch.isdigit() for ch in location):
        kind = "dual_region"  # configurable, or predefined (NAM4, EUR4, ASIA1)
    else:
        kind = "multi_region"  # US, EU, ASIA
    ops = "" if cls == "standard" else f"{cls}_"
    return {"gcs.standard_regional_storage": f"gcs.{cls}_{kind}_storage",
            "gcs.class_a_operations": f"gcs.{ops}class_a_operations",
            "gcs.class_b_operations": f"gcs.{ops}class_b_operations"}


def _gcs_note(res: GraphResource) -> str:
    parts = []
    if _dict(res.inputs.get("versioning")).get("enabled"):
        parts.append("versioning on: noncurrent versions are billed as stored data until deleted")
    soft = _number(_dict(res.inputs.get("softDeletePolicy")).get("retentionDurationSeconds"))
    if soft:
        parts.append(f"soft delete keeps deleted objects (billed) for {soft / 86400:g} days")
    return "; ".join(parts) + ("; include them in storageGB" if parts else "")


def _cloud_sql(res: GraphResource, prices: Mapping[str, Price]) -> tuple[tuple[CostLine, ...], str]:
    """A Cloud SQL for MySQL instance (Slurm's accounting database): vCPU hours, memory GiB-hours and SSD capacity of a
    db-custom-<vCPU>-<MiB> tier on the Enterprise edition, zonal or regional (twice the rate); any other tier or
    edition is one line without a price."""
    settings = _dict(res.inputs.get("settings"))
    tier = str(settings.get("tier") or "?")
    where = "regional" if str(settings.get("availabilityType") or "ZONAL") == "REGIONAL" else "zonal"
    edition = str(settings.get("edition") or "ENTERPRISE")
    disk_gb = _number(settings.get("diskSize")) or 10.0  # Cloud SQL's default, 10 GB
    disk = "ssd" if str(settings.get("diskType") or "PD_SSD") == "PD_SSD" else "hdd"
    parts = tier.split("-")
    storage = _line(f"Cloud SQL {disk.upper()} storage ({where})", disk_gb, prices, f"cloud_sql.{disk}_{where}",
                    "GB-month")
    note = "backups and network are usage, not priced; the disk may grow (diskAutoresize) past the size priced"
    if edition != "ENTERPRISE" or len(parts) != 4 or parts[:2] != ["db", "custom"] \
            or not (parts[2].isdigit() and parts[3].isdigit()):
        return (_line(f"Cloud SQL {tier} instance hours ({edition.lower()}, {where})", HOURS_PER_MONTH, prices,
                      f"cloud_sql.{tier}.{edition.lower()}_{where}", "hour"), storage), note
    vcpus, gib = int(parts[2]), int(parts[3]) / 1024
    return (_line(f"Cloud SQL vCPU hours ({vcpus} vCPU, {where})", vcpus * HOURS_PER_MONTH, prices,
                  f"cloud_sql.mysql_vcpu_{where}", "hour"),
            _line(f"Cloud SQL memory ({gib:g} GiB, {where})", gib * HOURS_PER_MONTH, prices,
                  f"cloud_sql.mysql_memory_{where}", "GB-hour"),
            storage), note


def _gcp_team(graph: ResourceGraph, res: GraphResource) -> str:
    """The ``team`` label: the resource's labels (node pools: nodeConfig.resourceLabels), else the provider's
    ``defaultLabels`` (which GCP applies to every labelled resource)."""
    for labels in (res.inputs.get("labels"), res.inputs.get("resourceLabels"),
                   _dict(res.inputs.get("nodeConfig")).get("resourceLabels"),
                   _dict(res.inputs.get("settings")).get("userLabels")):
        if isinstance(labels, dict) and labels.get("team"):
            return str(labels["team"])
    prov = graph.get(res.provider_urn) if res.provider_urn else None
    defaults = prov.inputs.get("defaultLabels") if prov else None
    if isinstance(defaults, str):
        try:
            defaults = json.loads(defaults)
        except ValueError:
            defaults = None
    return str(defaults.get("team", "")) if isinstance(defaults, dict) else ""


def _gke_nodes(res: GraphResource) -> tuple[tuple[int, int], int, bool]:
    """A pool's (desired, max) nodes, GPUs per node (the machine catalog) and whether a specific reservation is paid
    whether nodes run or not."""
    from components.catalog.gcp_machines import load_gcp_catalog

    size = gke_pool_size(res.inputs)
    config = _dict(res.inputs.get("nodeConfig"))
    facts = load_gcp_catalog().get(str(config.get("machineType") or ""))
    paid = _dict(config.get("reservationAffinity")).get("consumeReservationType") == "SPECIFIC_RESERVATION"
    return (size.desired, size.maximum), facts.gpu_count if facts else 0, paid


def price(graph: ResourceGraph, prices: Mapping[str, Price], usage: Usage,
          shares: Shares) -> tuple[list[ResourceCost], list[tuple[str, str]]]:
    """The cost of every priced GCP resource of ``graph`` and the usage-priced ones not estimated."""
    costs: list[ResourceCost] = []
    not_estimated: list[tuple[str, str]] = []
    sizes = [gke_pool_size(r.inputs) for r in graph.resources if r.type == GKE_NODE_POOL]
    vms_now, vms_max = sum(s.desired for s in sizes), sum(s.maximum for s in sizes)
    for res in sorted(graph.resources, key=lambda r: r.urn):
        note, label = "", None
        nodes: tuple[int, int] | None = None
        gpus, paid = 0, False
        if res.type == GKE_NODE_POOL:
            now, at_max, note = _gke_pool(res, prices)
            label = _dict(_dict(res.inputs.get("nodeConfig")).get("labels")).get("gpu-cluster/node-group")
            nodes, gpus, paid = _gke_nodes(res)
        elif res.type == GKE_CLUSTER:
            lines, note = _gke_cluster(res, prices)
            now = at_max = lines
            if res.inputs.get("loggingConfig") or res.inputs.get("monitoringConfig"):
                not_estimated.append((res.urn, GKE_OBSERVABILITY))
        elif res.type in (GCP_LUSTRE, GCP_FILESTORE, GCP_PARALLELSTORE):
            now = at_max = _gcp_filesystem(res, prices)
        elif res.type == GCP_NAT:
            traffic = usage_lines(res, USAGE_FIELDS, usage, prices)
            now, at_max = (*_nat_lines(res, vms_now, prices), *traffic), (*_nat_lines(res, vms_max, prices), *traffic)
            note = _nat_note(res)
        elif res.type == GCP_KMS_KEY:
            lines, note = _kms_key(res, prices)
            now = at_max = lines
        elif res.type == GCP_BUDGET:
            now = at_max = (_line("budget days", HOURS_PER_MONTH / 24, prices, "billing.budget", "budget-day"),)
        elif res.type == GCP_SQL:
            lines, note = _cloud_sql(res, prices)
            now = at_max = lines
            not_estimated.append((res.urn, SQL_BACKUPS))
        elif res.type == GCS_BUCKET:
            if res.name not in usage:
                not_estimated.append((res.urn, GCP_USAGE_PRICED[res.type]))
                continue
            now = at_max = usage_lines(res, USAGE_FIELDS, usage, prices, _gcs_keys(res))
            note = _gcs_note(res)
        else:
            continue
        if res.type in GCP_USAGE_PRICED and res.type != GCS_BUCKET and res.name not in usage:
            not_estimated.append((res.urn, GCP_USAGE_PRICED[res.type]))
        costs.append(ResourceCost(urn=res.urn, type=res.type, name=res.name, plane=graph.plane_of(res),
                                  team=_gcp_team(graph, res), components=now, components_at_max=at_max, note=note,
                                  team_shares=shares.get(str(label), ()) if label else (), nodes=nodes,
                                  gpus_per_node=gpus, paid_regardless=paid,
                                  min_nodes=gke_pool_size(res.inputs).minimum if res.type == GKE_NODE_POOL else 0,
                                  autoscaled=bool(_dict(res.inputs.get("autoscaling")))
                                  if res.type == GKE_NODE_POOL else None))
    return costs, not_estimated


