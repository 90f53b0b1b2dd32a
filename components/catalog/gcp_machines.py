"""The GCP machine catalog: GPUs, accelerator type, local SSDs, GPU NICs and the GPUDirect flavour per machine type.

The figures live in ``gcp_machines.yaml`` beside this module, each with a source, a status and a date. Unknown
figures are ``None``; the program never guesses them (an unknown zone list is not checked, an unknown GPU NIC
count wires no GPU network and the spec refuses a GPUDirect pool it cannot wire).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from components.catalog import yaml_files
from components.catalog.instances import Fact

GCP_CATALOG_FILE = Path(__file__).with_name("gcp_machines.yaml")
GPUDIRECT_FLAVOURS = ("TCPX", "TCPXO", "RDMA", "none")
# GPUs that support Multi-Instance GPU (NVIDIA MIG User Guide, "Supported GPUs", read 2026-11-29, as for AWS):
# A100, H100, H200, B200; not L4.
_MIG_GPUS = ("A100", "H100", "H200", "B200")
_MIG_SOURCE = "NVIDIA MIG User Guide, Supported GPUs (read 2026-11-29)"


@dataclass(frozen=True)
class MachineFacts:
    """What the blueprint knows about one Compute Engine machine type."""

    machine_type: str
    family: str
    gpu_model: str | None
    accelerator: str | None  # the accelerator type GKE's guest_accelerator names (nvidia-h100-mega-80gb)
    gpu_count: int
    gpu_memory_gib_each: int | None
    vcpu: Fact
    memory_gib: Fact
    local_ssd_count: int | None
    local_ssd_gb: int | None
    gpu_nics: Fact
    gpudirect: str  # TCPX, TCPXO, RDMA or none
    gpu_nic_mtu: Fact
    network_gbps: Fact
    zones: tuple[str, ...] | None  # None: not read from a primary source, so not checked
    zones_source: str
    zones_recorded: tuple[str, ...]  # zones a source the catalog read lists it in (partial: warned, not enforced)
    provisioning: tuple[str, ...] | None  # models a source names (not necessarily all of them)
    not_offered: tuple[str, ...]  # models a source says the type is not sold as (A3 Ultra, A4: no on-demand)
    provisioning_source: str
    mig: Fact
    boot_disk_types: tuple[str, ...] | None = None  # None: not read, any the spec offers is taken
    boot_disk_source: str = ""

    @property
    def instance_type(self) -> str:
        """The machine type, under the name the cloud-neutral code uses."""
        return self.machine_type

    @property
    def gpu_nic_count(self) -> int:
        """GPU networks to wire: the catalog's count, 0 when unknown."""
        return self.gpu_nics.value or 0

    @property
    def has_local_nvme(self) -> bool | None:
        """Local SSDs (NVMe on these types): True/False when known, None when not."""
        if self.local_ssd_count is None:
            return None
        return self.local_ssd_count > 0

    @property
    def efa_count(self) -> int:
        """GCP has no EFA; the fabric devices are the GPU NICs (see :attr:`gpu_nic_count`)."""
        return 0


def _fact(raw: Any, sources: dict[str, str]) -> Fact:
    if not isinstance(raw, dict):
        return Fact(value=None, status="unconfirmed", source="", as_of="")
    source = str(raw.get("source", raw.get("note", "")) or "")
    value = raw.get("value")
    return Fact(value=value if isinstance(value, int) and not isinstance(value, bool) else None,
                status=str(raw.get("status", "unconfirmed")), source=sources.get(source, source),
                as_of=str(raw.get("as_of", "")))


def _strings(raw: Any) -> tuple[str, ...] | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("value"), list):
        return None
    return tuple(str(v) for v in raw["value"])


def _parse(data: dict[str, Any]) -> dict[str, MachineFacts]:
    sources: dict[str, str] = data["meta"].get("sources", {}) or {}
    out: dict[str, MachineFacts] = {}
    for name, raw in data["machines"].items():
        gpu = raw.get("gpu") or {}
        ssd = raw.get("local_ssd") or {}
        flavour = (raw.get("gpudirect") or {}).get("value") or "none"
        if flavour not in GPUDIRECT_FLAVOURS:
            raise ValueError(f"{GCP_CATALOG_FILE.name}: {name}: gpudirect '{flavour}' is not one of "
                             f"{', '.join(GPUDIRECT_FLAVOURS)}")
        model = gpu.get("model")
        mig = any(g in str(model) for g in _MIG_GPUS) if model else False
        zones_raw = raw.get("zones") or {}
        out[name] = MachineFacts(
            machine_type=name,
            family=str(raw.get("family", name.split("-")[0])),
            gpu_model=model,
            accelerator=gpu.get("accelerator"),
            gpu_count=int(gpu.get("count") or 0),
            gpu_memory_gib_each=gpu.get("memory_gib_each"),
            vcpu=_fact(raw.get("vcpu"), sources),
            memory_gib=_fact(raw.get("memory_gib"), sources),
            local_ssd_count=ssd.get("count"),
            local_ssd_gb=ssd.get("disk_gb"),
            gpu_nics=_fact(raw.get("gpu_nics"), sources),
            gpudirect=str(flavour),
            gpu_nic_mtu=_fact(raw.get("gpu_nic_mtu"), sources),
            network_gbps=_fact(raw.get("network_gbps"), sources),
            zones=_strings(zones_raw),
            zones_source=str(sources.get(str(zones_raw.get("source", "")), zones_raw.get("source", ""))),
            zones_recorded=tuple(str(z) for z in zones_raw.get("recorded") or ()),
            provisioning=_strings(raw.get("provisioning")),
            not_offered=tuple(str(v) for v in (raw.get("provisioning") or {}).get("not_offered", []) or []),
            provisioning_source=str((raw.get("provisioning") or {}).get("source", "")),
            mig=Fact(value=1 if mig else 0, status="confirmed", source=_MIG_SOURCE, as_of="2026-11-29"),
            boot_disk_types=_strings(raw.get("boot_disk_types")),
            boot_disk_source=str(sources.get(str((raw.get("boot_disk_types") or {}).get("source", "")), "")),
        )
    return out


@lru_cache(maxsize=1)
def load_gcp_catalog() -> dict[str, MachineFacts]:
    """Load the GCP machine catalog (cached: the file is read once per process)."""
    return _parse(yaml_files.load_file(GCP_CATALOG_FILE))


GCP_STORAGE_FILE = Path(__file__).with_name("gcp_storage.yaml")


@dataclass(frozen=True)
class LustreTier:
    """Managed Lustre capacity limits of one throughput tier (MB/s per TiB)."""

    min_gib: int
    max_gib: int
    step_gib: int
    threshold_gib: int | None
    large_step_gib: int | None

    def problem(self, capacity_gib: int) -> str | None:
        """Why a capacity is not one GCP accepts for this tier, or None."""
        if not self.min_gib <= capacity_gib <= self.max_gib:
            return f"must be between {self.min_gib:,} and {self.max_gib:,} GiB"
        if self.threshold_gib is None or capacity_gib <= self.threshold_gib:
            if capacity_gib % self.step_gib:
                upto = f" up to {self.threshold_gib:,} GiB" if self.threshold_gib else ""
                return f"must be a multiple of {self.step_gib:,} GiB{upto}"
        elif self.large_step_gib and capacity_gib % self.large_step_gib:
            return f"must be a multiple of {self.large_step_gib:,} GiB above {self.threshold_gib:,} GiB"
        return None


@dataclass(frozen=True)
class GcpStorageLimits:
    """What the spec rules check of GCP storage, with the source of the figures."""

    lustre_tiers: dict[int, LustreTier]
    lustre_source: str
    lustre_port: int  # the LNet port instances serve unless created with gke_support_enabled (the stack's)
    lustre_port_gke: int
    soft_delete_min_days: int
    soft_delete_max_days: int
    subnet_reserved_addresses: int
    subnet_prefix_min: int  # the largest IPv4 subnet GCP creates (/4)
    subnet_prefix_max: int  # the smallest (/29)
    subnet_prefix_source: str
    bucket_name_pattern: str  # without dots: the stack's names have none
    bucket_name_max: int
    bucket_name_reserved_prefix: str
    bucket_name_reserved_words: tuple[str, ...]
    bucket_name_source: str

    def bucket_name_problem(self, name: str) -> str | None:
        """Why Cloud Storage would refuse ``name`` for a bucket (without dots), or None."""
        if len(name) > self.bucket_name_max:
            return f"{len(name)} characters, and Cloud Storage names have at most {self.bucket_name_max}"
        if name.startswith(self.bucket_name_reserved_prefix):
            return f"it starts with '{self.bucket_name_reserved_prefix}', which Cloud Storage reserves"
        for word in self.bucket_name_reserved_words:
            if word in name:
                return f"it contains '{word}', which Cloud Storage refuses in bucket names"
        if not re.fullmatch(self.bucket_name_pattern, name):
            return (f"not 3 to {self.bucket_name_max} lowercase letters, digits, dashes and underscores starting and "
                    "ending with a letter or digit")
        return None


@lru_cache(maxsize=1)
def gcp_storage_limits() -> GcpStorageLimits:
    """Managed Lustre tiers, GCS soft delete bounds, subnet reservations and sizes from ``gcp_storage.yaml``."""
    data = yaml_files.load_file(GCP_STORAGE_FILE)
    lustre = data["managed_lustre"]
    names = data["gcs"]["bucket_names"]
    return GcpStorageLimits(
        lustre_tiers={int(k): LustreTier(**v) for k, v in lustre["tiers"].items()},
        lustre_source=f"{lustre['source']} (read {lustre['as_of']})",
        lustre_port=int(lustre["ports"]["default"]),
        lustre_port_gke=int(lustre["ports"]["gke_support"]),
        soft_delete_min_days=int(data["gcs"]["soft_delete_min_days"]),
        soft_delete_max_days=int(data["gcs"]["soft_delete_max_days"]),
        subnet_reserved_addresses=int(data["subnets"]["reserved_addresses"]),
        subnet_prefix_min=int(data["subnets"]["prefix_length"]["min"]),
        subnet_prefix_max=int(data["subnets"]["prefix_length"]["max"]),
        subnet_prefix_source=f"{data['subnets']['prefix_length']['source']} (read "
        f"{data['subnets']['prefix_length']['as_of']})",
        bucket_name_pattern=str(names["pattern"]),
        bucket_name_max=int(names["max_length"]),
        bucket_name_reserved_prefix=str(names["reserved_prefix"]),
        bucket_name_reserved_words=tuple(str(w) for w in names["reserved_words"]),
        bucket_name_source=f"{names['source']} (read {names['as_of']})",
    )


GKE_MANIFESTS_FILE = Path(__file__).with_name("gke_manifests.yaml")


@dataclass(frozen=True)
class PinnedManifest:
    """A node agent's manifest, pinned by commit, with where the pin comes from."""

    name: str
    url: str
    source: str
    accelerators: tuple[str, ...]  # the accelerator types its DaemonSet's node affinity selects
    image: str  # the agent image the manifest runs (NCCL plugin or gIB installer, NRI injector), as it writes it
    rxdm_image: str | None = None  # TCPX/TCPXO installers: the RxDM sidecar image that matches the plugin


@lru_cache(maxsize=1)
def gpudirect_manifests() -> dict[str, tuple[PinnedManifest, ...]]:
    """The pinned installer manifests per GPUDirect flavour (``components/catalog/gke_manifests.yaml``)."""
    data = yaml_files.load_file(GKE_MANIFESTS_FILE)
    return {flavour: tuple(PinnedManifest(name=m["name"], url=m["url"], source=m["source"],
                                           accelerators=tuple(m["accelerators"]), image=m["image"],
                                           rxdm_image=m.get("rxdm_image")) for m in items)
            for flavour, items in data["gpudirect"].items()}


def rxdm_image(flavour: str) -> str | None:
    """The receive-datapath-manager sidecar (tcpx-daemon/tcpxo-daemon) image a training pod runs beside NCCL for a
    GPUDirect flavour: the one that matches the pinned plugin installer. None for flavours without one (RDMA)."""
    return next((m.rxdm_image for m in gpudirect_manifests().get(flavour, ()) if m.rxdm_image), None)


@dataclass(frozen=True)
class RxdmMount:
    """A host mount of the RxDM container: the host path, where the container sees it, and whether upstream mounts
    it read-only (False: upstream leaves readOnly unset, so the pod may set it either way)."""

    host_path: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True)
class RxdmRelease:
    """A published RxDM (receive-datapath-manager) release and the container upstream runs it in
    (``components/catalog/gke_manifests.yaml``, rxdm)."""

    tag: str
    plugin: str  # the NCCL plugin installer release it is coupled with
    image: str
    command: tuple[str, ...]
    args: tuple[tuple[str, ...], ...]  # every argument list upstream published for the release
    args_sources: tuple[str, ...]  # where each of those is read (commit and file)
    env: tuple[tuple[str, str], ...]  # (name, value), in upstream's order
    mounts: tuple[RxdmMount, ...]
    capabilities: tuple[str, ...]
    source: str


@lru_cache(maxsize=1)
def _rxdm_catalog() -> dict[str, tuple[RxdmRelease, ...]]:
    data = yaml_files.load_file(GKE_MANIFESTS_FILE)
    return {flavour: tuple(RxdmRelease(
        tag=r["tag"], plugin=r["plugin"], image=r["image"], command=tuple(r["command"]),
        args=tuple(tuple(a["value"]) for a in r["args"]), args_sources=tuple(a["source"] for a in r["args"]),
        env=tuple((e["name"], e["value"]) for e in r["env"]),
        mounts=tuple(RxdmMount(m["hostPath"], m["mountPath"], bool(m.get("readOnly", False))) for m in r["mounts"]),
        capabilities=tuple(r["capabilities"]), source=r["source"]) for r in items)
        for flavour, items in data["rxdm"].items()}


def rxdm_releases(flavour: str) -> tuple[RxdmRelease, ...]:
    """Every RxDM release the catalog knows for a GPUDirect flavour, newest first (none for RDMA)."""
    return _rxdm_catalog().get(flavour, ())


def coupled_rxdm_releases(flavour: str) -> tuple[str, ...]:
    """The release tags a stack accepts by default: the one the pinned installer couples (its rxdm_image's tag)."""
    image = rxdm_image(flavour)
    return tuple(r.tag for r in rxdm_releases(flavour) if r.image == image)
