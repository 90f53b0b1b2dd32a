"""``blueprint audit <stack>`` on a GCP stack: the deployed project against the spec, after ``pulumi up``, read
only, through :class:`GcpApi`.

The counterparts of the AWS audit, on the resources the stack names itself (GCP has no
tag search across services):

- ``billing-labels``: the cluster, every node pool (``config.resourceLabels``), the checkpoint bucket and the
  Managed Lustre instance carry every billing label (Filestore and Parallelstore are not read);
- ``bucket-protection``: the checkpoint bucket prevents public access, has uniform access, keeps overwritten
  checkpoints (versioning, or soft delete with a hierarchical namespace), and, when the stack made it, the spec's
  soft delete days and the stack's CMEK key;
- ``endpoint-access``: the control plane no more open than the spec (the public IP endpoint, the authorized
  networks, Google Cloud public IPs, the DNS endpoint's external traffic), and open where the deployer needs it;
- ``node-pools``: each pool of the spec exists with its machine type and provisioning (reservation, Spot,
  flex-start), and the cluster has no other;
- ``gpu-networks``: each GPUDirect pool wires as many additional node networks as the catalog's GPU NICs
  (the EFA interfaces' counterpart).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blueprint.acceptance.checks import Check, Status
from blueprint.clouds.gcp.api import GcpApi, describe, guard
from components.catalog.gcp_machines import load_gcp_catalog
from components.spec import REQUIRED_LABEL_KEYS, ClusterSpec


def _enum(value: Any) -> str:
    return str(getattr(value, "name", value))


class _Deployed:
    """The reads every check shares, each made once; a 404 becomes cannot-check with the likely reason."""

    def __init__(self, api: GcpApi, spec: ClusterSpec) -> None:
        self.api, self.spec = api, spec
        g = spec.gcp_spec()
        self.location = g.region if g.cluster.location == "regional" else g.gpu_zone
        self._cache: dict[str, Any] = {}

    def once(self, key: str, read: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = read()
        return self._cache[key]

    def cluster(self) -> Any:
        g = self.spec.gcp_spec()
        return self.once("cluster", lambda: self.api.cluster(g.project, self.location, self.spec.name))

    def bucket_name(self) -> str:
        from components.gcp.storage import checkpoint_bucket_name

        g = self.spec.gcp_spec()
        return g.storage.checkpoint_bucket.existing_name or checkpoint_bucket_name(g.project, self.spec.name)

    def bucket(self) -> Any:
        return self.once("bucket", lambda: self.api.bucket(self.bucket_name()))

    def guard(self, check: str, subject: str, fn: Callable[[], list[Check]]) -> list[Check]:
        from google.api_core import exceptions

        def run() -> list[Check]:
            try:
                return fn()
            except exceptions.NotFound as err:
                return [Check(check, subject, "cannot-check",
                              f"{describe(err)}: is the stack deployed in {self.spec.gcp_spec().project}?")]
        return guard(check, subject, run)


def _missing(labels: Any) -> list[str]:
    return [k for k in REQUIRED_LABEL_KEYS if k not in labels]


def _billing_labels(d: _Deployed) -> list[Check]:
    from components.gcp.storage import lustre_instance_id

    g = d.spec.gcp_spec()
    out: list[Check] = []
    read: list[str] = []

    def cluster() -> list[Check]:
        c = d.cluster()
        rows = []
        for kind, name, labels in [("cluster", c.name, c.resource_labels),
                                   *[("node pool", p.name, p.config.resource_labels) for p in c.node_pools]]:
            read.append(f"{kind} {name}")
            if _missing(labels):
                rows.append(Check("billing-labels", f"{kind} {name}", "fail", f"missing {', '.join(_missing(labels))}"))
        return rows
    out += d.guard("billing-labels", f"cluster {d.spec.name}", cluster)
    if g.storage.checkpoint_bucket.existing_name is None:  # an existing bucket's labels stay its owner's
        def bucket() -> list[Check]:
            found = d.bucket()
            read.append(f"bucket {found.name}")
            missing = _missing(found.labels)
            return [Check("billing-labels", f"bucket {found.name}", "fail", f"missing {', '.join(missing)}")] \
                if missing else []
        out += d.guard("billing-labels", f"bucket {d.bucket_name()}", bucket)
    fs = g.storage.filesystem
    if fs is not None and fs.type == "managed-lustre" and fs.existing is None:  # an existing one's labels: its owner's
        instance = lustre_instance_id(d.spec.name)

        def lustre() -> list[Check]:
            found = d.api.lustre_instance(g.project, g.gpu_zone, instance)
            read.append(f"Lustre {instance}")
            missing = _missing(found.labels)
            return [Check("billing-labels", f"Lustre {instance}", "fail", f"missing {', '.join(missing)}")] \
                if missing else []
        out += d.guard("billing-labels", f"Lustre {instance}", lustre)
    if read and not any(c.status == "fail" for c in out):
        out.append(Check("billing-labels", d.spec.name, "pass",
                         f"{len(read)} resources carry every billing label ({', '.join(read)})"))
    return out


def _bucket_protection(d: _Deployed) -> list[Check]:
    from components.gcp.security import kms_key_id

    g = d.spec.gcp_spec()
    wanted = g.storage.checkpoint_bucket
    own = wanted.existing_name is None
    name = d.bucket_name()

    def one() -> list[Check]:
        b = d.bucket()
        problems, good = [], []
        prevention = b.iam_configuration.public_access_prevention
        if prevention != "enforced":
            problems.append(f"public access prevention is {prevention}, not enforced")
        if not b.iam_configuration.uniform_bucket_level_access_enabled:
            problems.append("uniform bucket-level access is off: object ACLs can grant access")
        soft = int((b.soft_delete_policy.retention_duration_seconds or 0) // 86400)
        hns = bool(b.hierarchical_namespace_enabled)
        if b.versioning_enabled:
            good.append("versioned")
        elif hns and soft > 0:
            good.append("hierarchical namespace (no versioning)")
        else:
            problems.append("versioning is off" + (" and soft delete too" if soft == 0 else "")
                            + ": an overwritten checkpoint is gone")
        if own and soft != wanted.soft_delete_days:
            problems.append(f"soft delete {soft} days, the spec says {wanted.soft_delete_days}")
        good.append(f"soft delete {soft} days")
        if own:
            key = kms_key_id(g.project, g.region, d.spec.name, "data")
            if b.default_kms_key_name != key:
                problems.append(f"default key {b.default_kms_key_name or 'none (Google-managed)'}, not the stack's "
                                f"CMEK {key}")
            else:
                good.append("CMEK")
        return [Check("bucket-protection", name, "fail" if problems else "pass",
                      "; ".join(problems) or f"public access prevented, uniform access, {', '.join(good)}")]
    return d.guard("bucket-protection", name, one)


def _authorized_cidrs(cluster: Any) -> tuple[bool, list[str], bool]:
    """(enforced, CIDRs, Google Cloud public IPs allowed), from the IP endpoint's config where GKE reports it,
    else from the cluster's masterAuthorizedNetworksConfig."""
    endpoints = cluster.control_plane_endpoints_config
    ip = endpoints.ip_endpoints_config
    config = ip.authorized_networks_config if "authorized_networks_config" in ip \
        else cluster.master_authorized_networks_config
    return (bool(config.enabled), [c.cidr_block for c in config.cidr_blocks],
            bool(config.gcp_public_cidrs_access_enabled))


def _endpoint(d: _Deployed) -> list[Check]:
    g = d.spec.gcp_spec()
    gke, deployer = g.cluster, g.cluster.deployer

    def one() -> list[Check]:
        c = d.cluster()
        ip = c.control_plane_endpoints_config.ip_endpoints_config
        public = bool(ip.enable_public_endpoint) if "enable_public_endpoint" in ip \
            else not c.private_cluster_config.enable_private_endpoint
        enforced, cidrs, google_ips = _authorized_cidrs(c)
        dns_external = bool(c.control_plane_endpoints_config.dns_endpoint_config.allow_external_traffic)
        problems = []
        if public and gke.endpoint == "private":
            problems.append("the public IP endpoint is on; the spec says private")
        if public and not enforced:
            problems.append("the public IP endpoint takes every address (authorized networks not enforced)")
        allowed = {*gke.authorized_networks, *deployer.runner_cidrs}
        extra = [x for x in cidrs if x not in allowed]
        if extra:
            problems.append(f"authorized networks {', '.join(extra)} are not in the spec's authorizedNetworks or "
                            "runnerCidrs")
        if google_ips:
            problems.append("every Google Cloud public IP may reach the endpoint (gcpPublicCidrsAccessEnabled)")
        needs_dns = deployer.api_access == "dns-endpoint"
        if dns_external and not needs_dns:
            problems.append("the DNS endpoint takes traffic from anywhere IAM allows; the spec's deployer does not "
                            "use it")
        if needs_dns and not dns_external:
            problems.append("the DNS endpoint refuses external traffic: the deployer (apiAccess dns-endpoint) "
                            "cannot reach the API")
        shown = [("public IP endpoint" if public else "private IP endpoint only"),
                 f"authorized networks {', '.join(cidrs) or 'none'}",
                 "DNS endpoint open to IAM-authorized callers" if dns_external else "DNS endpoint internal only"]
        return [Check("endpoint-access", d.spec.name, "fail" if problems else "pass",
                      "; ".join(problems) or "; ".join(shown))]
    return d.guard("endpoint-access", d.spec.name, one)


def _node_pools(d: _Deployed) -> list[Check]:
    from components.gcp.gke import reservation_value

    g = d.spec.gcp_spec()

    def one() -> list[Check]:
        deployed = {p.name: p for p in d.cluster().node_pools}
        rows = []
        for pool in g.node_pools:
            found = deployed.get(pool.name)
            if found is None:
                rows.append(Check("node-pools", pool.name, "fail", "not in the cluster"))
                continue
            problems = []
            config = found.config
            if config.machine_type != pool.machine_type:
                problems.append(f"machine type {config.machine_type}, the spec says {pool.machine_type}")
            cap = pool.capacity
            affinity = config.reservation_affinity
            if cap.type == "reservation":
                wanted = reservation_value(g.project, pool)
                kind = _enum(affinity.consume_reservation_type)
                if kind != "SPECIFIC_RESERVATION" or wanted not in affinity.values:
                    problems.append(f"reservation affinity {' '.join([kind, *affinity.values])}, not the specific "
                                    f"reservation {wanted}")
            if cap.type == "spot" and not config.spot:
                problems.append("not on Spot VMs, as the spec says")
            if cap.type != "spot" and config.spot:
                problems.append(f"on Spot VMs; the spec says {cap.type}")
            if cap.type == "flex-start" and not config.flex_start:
                problems.append("not flex-start, as the spec says")
            status: Status = "fail" if problems else "pass"
            rows.append(Check("node-pools", pool.name, status, "; ".join(problems) or
                              f"{config.machine_type}, {cap.type}"))
        extra = sorted(set(deployed) - {p.name for p in g.node_pools})
        if extra:
            rows.append(Check("node-pools", d.spec.name, "fail",
                              f"{', '.join(extra)} not in the spec: made outside the stack?"))
        return rows
    return d.guard("node-pools", d.spec.name, one)


def _gpu_networks(d: _Deployed) -> list[Check]:
    from components.gcp.cloud import gpu_network_plan

    g = d.spec.gcp_spec()
    plan = gpu_network_plan(d.spec)
    catalog = load_gcp_catalog()
    if plan is None:
        return []
    expected = len(plan.subnets())
    out: list[Check] = []
    for pool in g.node_pools:
        facts = catalog[pool.machine_type]
        if not facts.gpu_count or facts.gpudirect == "none":
            continue

        def one(pool: Any = pool) -> list[Check]:
            found = next((p for p in d.cluster().node_pools if p.name == pool.name), None)
            if found is None:
                return [Check("gpu-networks", pool.name, "fail", "not in the cluster")]
            wired = len(found.network_config.additional_node_network_configs)
            status: Status = "pass" if wired >= expected else "fail"
            return [Check("gpu-networks", pool.name, status,
                          f"{wired} of the {expected} additional networks of {pool.machine_type} ({plan.flavour})")]
        out += d.guard("gpu-networks", pool.name, one)
    return out


def run_gcp_audit(spec: ClusterSpec, api: GcpApi) -> list[Check]:
    """Every GCP audit check."""
    deployed = _Deployed(api, spec)
    checks: list[Check] = []
    checks += _billing_labels(deployed)
    checks += _bucket_protection(deployed)
    checks += _endpoint(deployed)
    checks += _node_pools(deployed)
    checks += _gpu_networks(deployed)
    return checks


__all__ = ["run_gcp_audit"]
