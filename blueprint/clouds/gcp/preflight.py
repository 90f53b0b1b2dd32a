"""``blueprint preflight <stack>`` on a GCP stack: the project before ``pulumi up``, through :class:`GcpApi`.

Each check is pass, fail or cannot-check with the reason, as on AWS:

- ``apis-enabled``: every API of ``required_services`` is on (Service Usage ``services.batchGet``);
- ``machine-type-offered``: the GPU zone offers each pool's machine type and its GPU (Compute ``machineTypes.get``,
  ``acceleratorTypes.get``);
- ``catalog-matches-compute``: Compute Engine's vCPUs, memory, GPUs and bundled Local SSDs equal the catalog's;
- ``gpu-quota``: the region's quota of each GPU family covers the pools at max size (``regions.get`` quotas:
  ``NVIDIA_<GPU>_GPUS`` on demand, ``PREEMPTIBLE_NVIDIA_<GPU>_GPUS`` for Spot and flex-start), and the project's
  ``GPUS_ALL_REGIONS`` where the project has that quota (``projects.get``);
- ``reservation``: the specific reservation (and block) exists in the GPU zone, READY, for the machine type, with
  at least maxSize VMs, ``specificReservationRequired``, shared with the stack's project when another owns it;
- ``network-names-free``, ``bucket-name-free`` / ``existing-bucket``: the networks and bucket the stack creates are
  not taken; a bucket the spec brings exists and keeps overwritten checkpoints;
- ``deployer``: these credentials may impersonate the deployer service account (IAM ``testIamPermissions`` for
  ``iam.serviceAccounts.getAccessToken``: nothing is minted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blueprint.acceptance.checks import Check, Status
from blueprint.clouds.gcp.api import IMPERSONATE, GcpApi, describe, guard, last_segment, not_found
from components.catalog.gcp_machines import load_gcp_catalog
from components.spec import ClusterSpec
from components.spec.decisions import gcs_bucket_name

CATALOG_FILE = "components/catalog/gcp_machines.yaml"

# The regional allocation quota of each GPU, by the accelerator type GKE names (Compute Engine "Allocation quotas",
# GPU quota; the metric strings regions.get returns). A100, A100 80GB, H100 and L4 are in Compute Engine's own
# Quota.Metric enum (google-cloud-compute 1.48.0, with their PREEMPTIBLE_ twins); the H100 Mega, H200 and B200
# names come from secondary sources (published quota-request and preflight scripts of A3 Mega/Ultra and A4 users)
# and are not in that enum yet. A metric the region does not list is reported as cannot-check, never as a pass.
QUOTA_METRICS: dict[str, str] = {
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
    "nvidia-b200": "NVIDIA_B200_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
}
ALL_REGIONS = "GPUS_ALL_REGIONS"


def _gcp(spec: ClusterSpec) -> Any:
    return spec.gcp_spec()


def _enum(value: Any) -> str:
    """A proto-plus enum member's name, or the string Compute Engine's REST messages keep enums as."""
    return str(getattr(value, "name", value))


def _offered(api: GcpApi, spec: ClusterSpec, seen: dict[str, Any]) -> list[Check]:
    g = _gcp(spec)
    catalog = load_gcp_catalog()
    out: list[Check] = []
    for pool in g.node_pools:
        facts = catalog[pool.machine_type]
        subject = f"nodePools.{pool.name} ({pool.machine_type})"

        def one(pool: Any = pool, facts: Any = facts, subject: str = subject) -> list[Check]:
            if pool.machine_type not in seen:
                seen[pool.machine_type] = not_found(lambda: api.machine_type(g.project, g.gpu_zone, pool.machine_type))
            if seen[pool.machine_type] is None:
                return [Check("machine-type-offered", subject, "fail",
                              f"{g.gpu_zone} does not offer {pool.machine_type} (machineTypes.get: not found): choose "
                              "a zone that does (gcloud compute machine-types list --filter=name=<type>)")]
            if not facts.accelerator:
                return [Check("machine-type-offered", subject, "pass", f"offered in {g.gpu_zone}")]
            accelerator = not_found(lambda: api.accelerator_type(g.project, g.gpu_zone, facts.accelerator))
            if accelerator is None:
                return [Check("machine-type-offered", subject, "fail",
                              f"{g.gpu_zone} offers {pool.machine_type} but not its GPU {facts.accelerator} "
                              "(acceleratorTypes.get: not found)")]
            return [Check("machine-type-offered", subject, "pass",
                          f"offered in {g.gpu_zone} with {accelerator.name} (up to "
                          f"{accelerator.maximum_cards_per_instance} per VM)")]
        out += guard("machine-type-offered", subject, one)
    return out


def _facts(spec: ClusterSpec, seen: dict[str, Any]) -> list[Check]:
    """The catalog against the machine types machineTypes.get returned (those it could not read are skipped:
    machine-type-offered says why)."""
    catalog = load_gcp_catalog()
    out = []
    for name in sorted({p.machine_type for p in _gcp(spec).node_pools}):
        found = seen.get(name)
        if found is None:
            continue
        facts = catalog[name]
        gpus = sum(a.guest_accelerator_count for a in found.accelerators)
        kinds = sorted({a.guest_accelerator_type for a in found.accelerators})
        memory = found.memory_mb / 1024
        ssds = found.bundled_local_ssds.partition_count if "bundled_local_ssds" in found else 0
        compared: list[tuple[str, Any, Any]] = [
            ("vcpu", facts.vcpu.value, found.guest_cpus),
            ("memory_gib", facts.memory_gib.value, int(memory) if memory.is_integer() else memory),
            ("gpu.count", facts.gpu_count, gpus),
            ("gpu.accelerator", facts.accelerator, kinds[0] if len(kinds) == 1 else ", ".join(kinds) or None),
            ("local_ssd.count", facts.local_ssd_count, ssds)]
        wrong = [f"{CATALOG_FILE}: machines.{name}.{key}: catalog {mine}, Compute Engine {theirs}"
                 for key, mine, theirs in compared if mine is not None and mine != theirs]
        unknown = [f"machines.{name}.{key} is unconfirmed; Compute Engine says {theirs} (add it with this source)"
                   for key, mine, theirs in compared if mine is None and theirs is not None]
        detail = (f"{found.guest_cpus} vCPUs, {memory:g} GiB, GPUs {gpus}"
                  + (f" x {kinds[0]}" if len(kinds) == 1 else "") + f", bundled Local SSDs {ssds}")
        out.append(Check("catalog-matches-compute", name, "fail" if wrong else "pass",
                         "; ".join(wrong + unknown) if wrong else detail + (f"; {'; '.join(unknown)}" if unknown
                                                                                else "")))
    return out


def gpu_quota_needs(spec: ClusterSpec) -> dict[tuple[str, bool], tuple[int, list[str]]]:
    """GPUs each quota must cover at max size, and the pools that need them: (metric, preemptible) ->
    (GPUs, pools). Spot and flex-start VMs take the preemptible quota (Compute Engine "Allocation quotas",
    preemptible quotas; "About Flex-start VMs", quota); reservation pools run on VMs whose quota the reservation
    took when it was made, so they need none here."""
    catalog = load_gcp_catalog()
    needs: dict[tuple[str, bool], tuple[int, list[str]]] = {}
    for pool in _gcp(spec).node_pools:
        facts = catalog[pool.machine_type]
        if not facts.gpu_count or pool.capacity.type == "reservation" or facts.accelerator is None:
            continue
        metric = QUOTA_METRICS.get(facts.accelerator, f"<the quota of {facts.accelerator}>")
        key = (metric, pool.capacity.type in ("spot", "flex-start"))
        total, names = needs.get(key, (0, []))
        needs[key] = (total + pool.max_size * facts.gpu_count, [*names, pool.name])
    return needs


def _quota_row(metric: str, where: str, quota: Any, gpus: int, pools: list[str], note: str = "") -> Check:
    limit, usage = float(quota.limit), float(quota.usage)
    status: Status = "pass" if limit >= gpus else "fail"
    used = f", {usage:g} in use now" if usage else ""
    return Check("gpu-quota", f"{metric} ({where})", status,
                 f"{gpus} GPUs at max size ({', '.join(pools)}) against a limit of {limit:g}{used}{note}"
                 + ("" if status == "pass" else ": request an increase before pulumi up"))


def _quotas(api: GcpApi, spec: ClusterSpec) -> list[Check]:
    g = _gcp(spec)
    out: list[Check] = []
    needs = gpu_quota_needs(spec)
    reserved = [p.name for p in g.node_pools if p.capacity.type == "reservation"]
    if needs:
        def regional() -> list[Check]:
            quotas = {q.metric: q for q in api.region(g.project, g.region).quotas}
            rows: list[Check] = []
            for metric in sorted({m for m, _ in needs}):
                standard = needs.get((metric, False), (0, []))
                spot = needs.get((metric, True), (0, []))
                preemptible = quotas.get(f"PREEMPTIBLE_{metric}")
                note = ""
                if spot[0] and preemptible is not None and float(preemptible.limit) > 0:
                    rows.append(_quota_row(f"PREEMPTIBLE_{metric}", g.region, preemptible, *spot))
                elif spot[0]:
                    # Without preemptible quota, Spot and preemptible VMs count against the standard quota
                    # (Compute Engine "Allocation quotas", preemptible quotas).
                    standard = (standard[0] + spot[0], standard[1] + spot[1])
                    note = f" (no PREEMPTIBLE_{metric} quota here: {', '.join(spot[1])} count against this one)"
                if not standard[0]:
                    continue
                quota = quotas.get(metric)
                if quota is None:
                    rows.append(Check("gpu-quota", f"{metric} ({g.region})", "cannot-check",
                                      f"{g.region} lists no {metric} quota for {g.project}: none granted there, or "
                                      "Compute Engine names this GPU's quota otherwise; find it under IAM & Admin > "
                                      f"Quotas and check it covers {standard[0]} GPUs ({', '.join(standard[1])})"))
                else:
                    rows.append(_quota_row(metric, g.region, quota, *standard, note=note))
            return rows
        out += guard("gpu-quota", g.region, regional)

        def project_wide() -> list[Check]:
            quota = next((q for q in api.project(g.project).quotas if q.metric == ALL_REGIONS), None)
            if quota is None:
                return []  # not every project has a project-wide GPU quota
            gpus = sum(n for n, _ in needs.values())
            pools = [p for _, names in needs.values() for p in names]
            return [_quota_row(ALL_REGIONS, g.project, quota, gpus, pools)]
        out += guard("gpu-quota", ALL_REGIONS, project_wide)
    if reserved:
        out.append(Check("gpu-quota", ", ".join(reserved), "cannot-check",
                         "reservation pools run on the reservation's VMs, whose quota was taken when it was made; "
                         "the reservation check covers them"))
    return out


def _reservations(api: GcpApi, spec: ClusterSpec) -> list[Check]:
    g = _gcp(spec)
    out: list[Check] = []
    for pool in g.node_pools:
        cap = pool.capacity
        if cap.type != "reservation" or cap.reservation is None:
            continue
        owner = cap.reservation_project or g.project
        subject = f"nodePools.{pool.name}"

        def one(pool: Any = pool, cap: Any = cap, owner: str = owner, subject: str = subject) -> list[Check]:
            found = not_found(lambda: api.reservation(owner, g.gpu_zone, cap.reservation))
            if found is None:
                zones = sorted(last_segment(r.zone) for r in api.reservations_named(owner, cap.reservation))
                where = (f"; {owner} has it in {', '.join(zones)}: the spec's gpuZone must be the reservation's zone"
                         if zones else "")
                return [Check("reservation", subject, "fail",
                              f"{cap.reservation} does not exist in {g.gpu_zone} of {owner}{where}")]
            sku = found.specific_reservation
            machine = last_segment(sku.instance_properties.machine_type)
            problems = []
            if found.status != "READY":
                problems.append(f"status {found.status} (needs READY)")
            if last_segment(found.zone) != g.gpu_zone:
                problems.append(f"in {last_segment(found.zone)}, not in the GPU zone {g.gpu_zone}")
            if machine != pool.machine_type:
                problems.append(f"for {machine}, not {pool.machine_type}")
            if sku.count < pool.max_size:
                problems.append(f"{sku.count} VMs, fewer than maxSize {pool.max_size}")
            if not found.specific_reservation_required:
                problems.append("specificReservationRequired is false: any VM of the project with these properties "
                                "can consume it before the pool does (create it with --require-specific-reservation)")
            if owner != g.project:
                shared = found.share_settings
                if _enum(shared.share_type) != "SPECIFIC_PROJECTS" or g.project not in shared.project_map:
                    problems.append(f"owned by {owner} and not shared with {g.project}")
            if cap.reservation_block:
                block = not_found(lambda: api.reservation_block(owner, g.gpu_zone, cap.reservation,
                                                                cap.reservation_block))
                if block is None:
                    problems.append(f"has no block {cap.reservation_block}")
                else:
                    if block.status != "READY":
                        problems.append(f"block {cap.reservation_block} is {block.status} (needs READY)")
                    if block.count < pool.max_size:
                        problems.append(f"block {cap.reservation_block} holds {block.count} VMs, fewer than maxSize "
                                        f"{pool.max_size}")
            if problems:
                return [Check("reservation", subject, "fail", f"{cap.reservation}: " + "; ".join(problems))]
            return [Check("reservation", subject, "pass",
                          f"{cap.reservation}: READY, {sku.count} x {machine} in {g.gpu_zone} ({sku.in_use_count} in "
                          "use), specific reservation required"
                          + (f", block {cap.reservation_block}" if cap.reservation_block else ""))]
        out += guard("reservation", subject, one)
    return out


def _apis(api: GcpApi, spec: ClusterSpec) -> list[Check]:
    from components.gcp.cloud import required_services

    g = _gcp(spec)
    names = required_services(spec)

    def one() -> list[Check]:
        state = {last_segment(s.name): _enum(s.state) for s in api.services(g.project, names)}
        off = [n for n in names if state.get(n) != "ENABLED"]
        if off:
            return [Check("apis-enabled", g.project, "fail",
                          f"{', '.join(off)} not enabled: pulumi up enables them as the deployer (which needs "
                          "roles/serviceusage.serviceUsageAdmin); enable them now to check the rest: gcloud services "
                          f"enable {' '.join(off)} --project {g.project}")]
        return [Check("apis-enabled", g.project, "pass", f"the {len(names)} APIs the stack uses are enabled")]
    return guard("apis-enabled", g.project, one)


def stack_network_names(spec: ClusterSpec) -> list[str]:
    """The VPC networks the stack creates (components/gcp/network.py names them)."""
    from components.gcp.cloud import gpu_network_plan

    names = [f"{spec.name}-net"]
    plan = gpu_network_plan(spec)
    if plan is not None:
        if plan.flavour == "RDMA":
            names += [f"{spec.name}-gpunet-0", f"{spec.name}-rdma-net"]
        else:
            names += [f"{spec.name}-gpunet-{i}" for i in range(plan.nics)]
    return names


def _existing(api: GcpApi, spec: ClusterSpec) -> list[Check]:
    from components.gcp.storage import checkpoint_bucket_name

    g = _gcp(spec)
    names = stack_network_names(spec)

    def networks() -> list[Check]:
        taken = sorted({n.name for n in api.networks(g.project)} & set(names))
        if taken:
            return [Check("network-names-free", g.project, "fail",
                          f"{', '.join(taken)} already exist: networks of an earlier stack of this name, or this "
                          "stack is already up (preflight is for before its first pulumi up); import or remove them")]
        return [Check("network-names-free", g.project, "pass",
                      f"none of the {len(names)} networks the stack creates exists ({names[0]}"
                      + (f" ... {names[-1]})" if len(names) > 1 else ")"))]
    out = guard("network-names-free", g.project, networks)
    bucket = g.storage.checkpoint_bucket
    if bucket.existing_name is not None:
        name = bucket.existing_name

        def existing() -> list[Check]:
            found = not_found(lambda: api.bucket(name))
            if found is None:
                return [Check("existing-bucket", name, "fail", "does not exist")]
            soft = int((found.soft_delete_policy.retention_duration_seconds or 0) // 86400)
            kept = [w for w, on in (("versioned", found.versioning_enabled), (f"soft delete {soft} days", soft > 0))
                    if on]
            return [Check("existing-bucket", name, "pass" if kept else "fail",
                          f"exists in {found.location}, {', '.join(kept)}" if kept else
                          f"exists in {found.location} with neither versioning nor soft delete: an overwritten or "
                          "deleted checkpoint is gone")]
        out += guard("existing-bucket", name, existing)
    else:
        name = checkpoint_bucket_name(g.project, spec.name)
        out += guard("bucket-name-free", name, _free(
            api, name, "set storage.checkpointBucket.existingName or rename the stack",
            "import it or name it in storage.checkpointBucket.existingName"))
    # gcp.storage.buckets: names are global too, and these have no existing bucket to fall back on.
    for extra in g.storage.buckets:
        name = gcs_bucket_name(g.project, spec.name, extra.name)
        out += guard("bucket-name-free", name, _free(
            api, name, f"choose another name than {extra.name} in gcp.storage.buckets",
            f"import it, or choose another name than {extra.name} in gcp.storage.buckets"))
    return out


def _free(api: GcpApi, name: str, if_foreign: str, if_found: str) -> Callable[[], list[Check]]:
    """The check that no bucket has ``name`` yet (bucket names are global), with what to do if one has."""
    from google.api_core import exceptions

    def free() -> list[Check]:
        try:
            found = api.bucket(name)
        except exceptions.NotFound:
            return [Check("bucket-name-free", name, "pass", "no bucket has the name the stack gives its own")]
        except exceptions.Forbidden as err:
            return [Check("bucket-name-free", name, "fail",
                          f"taken by a bucket these credentials cannot read ({describe(err)}); bucket names are "
                          f"global: another project's? {if_foreign}")]
        return [Check("bucket-name-free", name, "fail",
                      f"already exists (project number {found.project_number}): a retained bucket of an earlier "
                      f"stack, or this stack is already up; {if_found}")]
    return free


def _deployer(api: GcpApi, spec: ClusterSpec) -> list[Check]:
    g = _gcp(spec)
    deployer = g.cluster.deployer
    account = deployer.service_account

    def one() -> list[Check]:
        granted = not_found(lambda: api.service_account_permissions(account, [IMPERSONATE]))
        if granted is None:
            return [Check("deployer", account, "fail", "the service account does not exist")]
        if IMPERSONATE not in granted:
            return [Check("deployer", account, "fail",
                          f"these credentials cannot impersonate it (no {IMPERSONATE}): grant them "
                          "roles/iam.serviceAccountTokenCreator on the account")]
        where = {"dns-endpoint": "pulumi up reaches the control plane through its DNS endpoint, authorized by IAM",
                 "in-vpc": "the runners must reach the private endpoint from the VPC or a network connected to it",
                 "authorized-networks": "the runners reach the endpoint from runnerCidrs "
                                        f"({', '.join(deployer.runner_cidrs) or 'none listed'})"}[deployer.api_access]
        return [Check("deployer", account, "pass", f"these credentials can impersonate it; {where}")]
    return guard("deployer", account, one)


def run_gcp_preflight(spec: ClusterSpec, api: GcpApi) -> list[Check]:
    """Every GCP preflight check, in order."""
    seen: dict[str, Any] = {}
    checks: list[Check] = []
    checks += _apis(api, spec)
    checks += _offered(api, spec, seen)
    checks += _facts(spec, seen)
    checks += _quotas(api, spec)
    checks += _reservations(api, spec)
    checks += _existing(api, spec)
    checks += _deployer(api, spec)
    return checks


__all__ = ["ALL_REGIONS", "QUOTA_METRICS", "gpu_quota_needs", "run_gcp_preflight", "stack_network_names"]
