"""``blueprint preflight`` on an AWS stack: check the real account before ``pulumi up`` (boto3, the usual credentials).

Each check is pass, fail or cannot-check, with the reason: the GPU zone offers each instance type; EC2's own
figures (EFA interfaces, GPUs, local NVMe disks) equal the catalog's; the vCPU quotas cover every group at max
size; the Capacity Block or ODCR exists, is active or scheduled, in the GPU zone, with enough instances of the
type, and ends when the spec says; the VPC, subnets, filesystem and bucket the spec brings exist and match;
the deployer role can be assumed; no bucket of an earlier stack already holds the checkpoint bucket's prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from blueprint.acceptance.checks import AccountAccessError, Check, Status
from components.catalog import load_aws_catalog
from components.spec import ClusterSpec, default_subnets, is_reserved

CATALOG_FILE = "components/catalog/aws_instances.yaml"

# Service Quotas codes of the EC2 vCPU quotas (aws service-quotas list-service-quotas --service-code ec2):
# (family letters, market) -> code.
QUOTAS: dict[tuple[str, str], tuple[str, str]] = {
    ("P", "on-demand"): ("L-417A185B", "Running On-Demand P instances"),
    ("G", "on-demand"): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("standard", "on-demand"): ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    ("P", "spot"): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("G", "spot"): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("standard", "spot"): ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
}
_STANDARD = set("acdhimrtz")


def quota_family(instance_type: str) -> str | None:
    """The vCPU quota family of an instance type: P, G (and VT), standard, or None (another quota)."""
    family = instance_type.split(".")[0].lower()
    if family.startswith("p"):
        return "P"
    if family.startswith(("g", "vt")):
        return "G"
    if family[:1] in _STANDARD and not family.startswith("trn") and not family.startswith("inf"):
        return "standard"
    return None


def _error(err: Exception) -> str:
    code = getattr(err, "response", {}).get("Error", {}).get("Code") if hasattr(err, "response") else None
    return f"{code}: {err}" if code else str(err)


# ClientError codes that mean "these credentials are not valid", not "this one call is not allowed".
_REFUSED_CREDENTIALS = frozenset({"InvalidClientTokenId", "UnrecognizedClientException", "AuthFailure",
                                  "ExpiredToken", "ExpiredTokenException", "InvalidAccessKeyId",
                                  "SignatureDoesNotMatch", "InvalidToken", "RequestExpired"})


def account_access_problem(err: Exception) -> str | None:
    """Why ``err`` means that nothing of the account can be read, or None for an error of one check."""
    import botocore.exceptions as bx

    if isinstance(err, bx.ClientError):
        code = err.response.get("Error", {}).get("Code")
        return f"AWS refused the credentials ({code}): {err}" if code in _REFUSED_CREDENTIALS else None
    if isinstance(err, bx.NoCredentialsError):
        return ("no AWS credentials were found (environment variables, AWS_PROFILE, the shared credentials file, "
                "SSO or an instance role)")
    if isinstance(err, bx.PartialCredentialsError | bx.ProfileNotFound | bx.NoRegionError):
        return str(err)
    if isinstance(err, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ProxyConnectionError):
        return f"the AWS endpoint does not answer ({err}); check AWS_ENDPOINT_URL, the proxy and the network"
    if isinstance(err, bx.SSOError | bx.TokenRetrievalError | bx.CredentialRetrievalError):
        return f"the AWS credentials cannot be loaded: {err}"
    return None


def guard(check: str, subject: str, fn: Callable[[], list[Check]]) -> list[Check]:
    """Run one check; an API error becomes cannot-check with the reason, never a traceback. An error that means
    no check can be made (credentials, endpoint) stops the run with :class:`AccountAccessError`."""
    import botocore.exceptions

    try:
        return fn()
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        problem = account_access_problem(err)
        if problem is not None:
            raise AccountAccessError(problem) from None
        return [Check(check, subject, "cannot-check", _error(err))]


def _offerings(ec2: Any, spec: ClusterSpec) -> list[Check]:
    aws = spec.aws_spec()
    catalog = load_aws_catalog()
    out = []
    by_id = aws.zones_by_id
    zones_of_subnet = {sn.name: sn.availability_zone_id if by_id else sn.availability_zone
                       for sn in aws.network.subnets}
    for group in aws.node_groups:
        facts = catalog[group.instance_type]
        names = group.subnets if group.subnets is not None else default_subnets(aws, facts)
        zones = sorted({str(zones_of_subnet[n]) for n in names if zones_of_subnet.get(n)})
        location_type = "availability-zone-id" if by_id else "availability-zone"
        answer = ec2.describe_instance_type_offerings(
            LocationType=location_type,
            Filters=[{"Name": "instance-type", "Values": [group.instance_type]},
                     {"Name": "location", "Values": zones}])
        offered = {o["Location"] for o in answer.get("InstanceTypeOfferings", [])}
        missing = [z for z in zones if z not in offered]
        subject = f"nodeGroups.{group.name} ({group.instance_type})"
        if missing:
            out.append(Check("instance-type-offered", subject, "fail",
                             f"not offered in {', '.join(missing)} ({location_type}); offered here: "
                             f"{', '.join(sorted(offered)) or 'none of the spec zones'}"))
        else:
            out.append(Check("instance-type-offered", subject, "pass", f"offered in {', '.join(zones)}"))
    return out


def _facts(ec2: Any, spec: ClusterSpec) -> list[Check]:
    catalog = load_aws_catalog()
    types = sorted({g.instance_type for g in spec.aws_spec().node_groups})
    answer = ec2.describe_instance_types(InstanceTypes=types)
    seen = {t["InstanceType"]: t for t in answer.get("InstanceTypes", [])}
    out = []
    for itype in types:
        facts = catalog[itype]
        ec2_type = seen.get(itype)
        if ec2_type is None:
            out.append(Check("catalog-matches-ec2", itype, "cannot-check", "EC2 does not describe this type here"))
            continue
        gpus = sum(g.get("Count", 0) for g in ec2_type.get("GpuInfo", {}).get("Gpus", []))
        efa = ec2_type.get("NetworkInfo", {}).get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
        disks = sum(d.get("Count", 0) for d in ec2_type.get("InstanceStorageInfo", {}).get("Disks", []))
        compared = [("gpu", facts.gpu_count, gpus), ("efa_interfaces", facts.efa_interfaces.value, efa),
                    ("local_nvme.disks", facts.nvme_disks, disks)]
        wrong = [f"{CATALOG_FILE}: instances.{itype}.{key}: catalog {mine}, EC2 {theirs}"
                 for key, mine, theirs in compared if mine is not None and mine != theirs]
        unknown = [f"instances.{itype}.{key} is unconfirmed; EC2 says {theirs} (add it with this source)"
                   for key, mine, theirs in compared if mine is None]
        if wrong:
            out.append(Check("catalog-matches-ec2", itype, "fail", "; ".join(wrong + unknown)))
        else:
            out.append(Check("catalog-matches-ec2", itype, "pass",
                             f"GPUs {gpus}, EFA interfaces {efa}, NVMe disks {disks}"
                             + (f"; {'; '.join(unknown)}" if unknown else "")))
    return out


def quota_needs(spec: ClusterSpec) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """vCPUs each quota must cover at max size, and the groups that need them (Capacity Blocks apart)."""
    catalog = load_aws_catalog()
    needs: dict[tuple[str, str], tuple[int, list[str]]] = {}
    for group in spec.aws_spec().node_groups:
        if group.capacity.type == "capacity-block":
            continue
        market = "spot" if group.capacity.type == "spot" else "on-demand"
        family = quota_family(group.instance_type)
        vcpu = catalog[group.instance_type].vcpu.value
        if family is None or vcpu is None:
            continue
        total, names = needs.get((family, market), (0, []))
        needs[(family, market)] = (total + group.max_size * int(vcpu), [*names, group.name])
    return needs


def _quotas(quotas: Any, spec: ClusterSpec) -> list[Check]:
    out = []
    for (family, market), (vcpus, groups) in sorted(quota_needs(spec).items()):
        code, name = QUOTAS[(family, market)]
        subject = f"{name} ({code})"

        def one(code: str = code, subject: str = subject, vcpus: int = vcpus, groups: list[str] = groups
                ) -> list[Check]:
            value = float(quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
            status: Status = "pass" if value >= vcpus else "fail"
            return [Check("vcpu-quota", subject, status,
                          f"{vcpus} vCPUs at max size ({', '.join(groups)}) against a quota of {value:g}"
                          + ("" if status == "pass" else ": request an increase before pulumi up"))]
        out += guard("vcpu-quota", subject, one)
    blocks = [g.name for g in spec.aws_spec().node_groups if g.capacity.type == "capacity-block"]
    if blocks:
        out.append(Check("vcpu-quota", ", ".join(blocks), "cannot-check",
                         "Capacity Block groups run on the block's instances; the reservation check covers them"))
    return out


def _reservations(ec2: Any, spec: ClusterSpec) -> list[Check]:
    aws = spec.aws_spec()
    out = []
    for group in aws.node_groups:
        cap = group.capacity
        if not is_reserved(group):
            continue
        subject = f"nodeGroups.{group.name}"
        if cap.reservation_id is None:
            out.append(Check("reservation", subject, "cannot-check",
                             "targets ODCRs through a resource group; check its members with "
                             "aws resource-groups list-group-resources"))
            continue

        def one(group: Any = group, cap: Any = cap, subject: str = subject) -> list[Check]:
            answer = ec2.describe_capacity_reservations(CapacityReservationIds=[cap.reservation_id])
            found = answer.get("CapacityReservations", [])
            if not found:
                return [Check("reservation", subject, "fail", f"{cap.reservation_id} does not exist here")]
            cr = found[0]
            problems = []
            if cr.get("State") not in ("active", "scheduled"):
                problems.append(f"state {cr.get('State')} (needs active or scheduled)")
            zone_id, zone = cr.get("AvailabilityZoneId"), cr.get("AvailabilityZone")
            if (aws.zones_by_id and zone_id != aws.gpu_zone) or (not aws.zones_by_id and zone != aws.gpu_zone):
                problems.append(f"in {zone_id or zone}, not in the GPU zone {aws.gpu_zone}")
            if cr.get("InstanceType") != group.instance_type:
                problems.append(f"for {cr.get('InstanceType')}, not {group.instance_type}")
            if int(cr.get("TotalInstanceCount", 0)) < group.max_size:
                problems.append(f"{cr.get('TotalInstanceCount')} instances, fewer than maxSize {group.max_size}")
            if cap.type == "capacity-block":
                if cr.get("ReservationType") not in (None, "capacity-block"):
                    problems.append(f"a {cr.get('ReservationType')} reservation, not a Capacity Block")
                if cap.instance_count is not None and int(cr.get("TotalInstanceCount", 0)) != cap.instance_count:
                    problems.append(f"{cr.get('TotalInstanceCount')} instances, the spec records "
                                    f"{cap.instance_count}")
                # The scale-up is scheduled at the spec's start: both ends of the window must be the block's.
                for key, mine in (("StartDate", cap.start), ("EndDate", cap.end)):
                    theirs = cr.get(key)
                    if mine is not None and isinstance(theirs, datetime) \
                            and theirs.astimezone(UTC) != mine.astimezone(UTC):
                        problems.append(f"{'starts' if key == 'StartDate' else 'ends'} "
                                        f"{theirs.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}, the spec says "
                                        f"{mine.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}")
            if problems:
                return [Check("reservation", subject, "fail", f"{cap.reservation_id}: " + "; ".join(problems))]
            return [Check("reservation", subject, "pass",
                          f"{cap.reservation_id}: {cr.get('State')}, {cr.get('TotalInstanceCount')} x "
                          f"{cr.get('InstanceType')} in {zone_id or zone}")]
        out += guard("reservation", subject, one)
    return out


def _existing(ec2: Any, s3: Any, fsx: Any, spec: ClusterSpec) -> list[Check]:
    aws = spec.aws_spec()
    out: list[Check] = []
    net = aws.network
    if net.existing is not None:
        vpc_id = net.existing.vpc_id

        def vpc() -> list[Check]:
            found = ec2.describe_vpcs(VpcIds=[vpc_id]).get("Vpcs", [])
            if not found:
                return [Check("existing-network", vpc_id, "fail", "does not exist here")]
            cidrs = {a["CidrBlock"] for v in found for a in v.get("CidrBlockAssociationSet", [])} | \
                {v.get("CidrBlock") for v in found}
            if net.vpc_cidr not in cidrs:
                return [Check("existing-network", vpc_id, "fail",
                              f"CIDR {net.vpc_cidr} of the spec is not among the VPC's ({', '.join(sorted(cidrs))})")]
            return [Check("existing-network", vpc_id, "pass", f"exists with {net.vpc_cidr}")]
        out += guard("existing-network", vpc_id, vpc)
        for sn in net.subnets:
            def subnet(sn: Any = sn) -> list[Check]:
                subnets = ec2.describe_subnets(SubnetIds=[sn.id]).get("Subnets", [])
                if not subnets:
                    return [Check("existing-network", f"subnets.{sn.name} ({sn.id})", "fail", "does not exist here")]
                found = subnets[0]
                problems = []
                if found.get("CidrBlock") != sn.cidr:
                    problems.append(f"CIDR {found.get('CidrBlock')}, the spec says {sn.cidr}")
                if found.get("VpcId") != vpc_id:
                    problems.append(f"in {found.get('VpcId')}, not {vpc_id}")
                zone = found.get("AvailabilityZoneId") if aws.zones_by_id else found.get("AvailabilityZone")
                wanted = sn.availability_zone_id if aws.zones_by_id else sn.availability_zone
                if zone != wanted:
                    problems.append(f"in {zone}, the spec says {wanted}")
                return [Check("existing-network", f"subnets.{sn.name} ({sn.id})", "fail" if problems else "pass",
                              "; ".join(problems) or "matches")]
            out += guard("existing-network", f"subnets.{sn.name}", subnet)
    fs = aws.storage.filesystem
    if fs is not None and fs.existing is not None:
        existing = fs.existing

        def filesystem() -> list[Check]:
            systems = fsx.describe_file_systems(FileSystemIds=[existing.file_system_id]).get("FileSystems", [])
            if not systems:
                return [Check("existing-filesystem", existing.file_system_id, "fail", "does not exist here")]
            found = systems[0]
            problems = []
            if found.get("DNSName") != existing.dns_name:
                problems.append(f"DNS name {found.get('DNSName')}, the spec says {existing.dns_name}")
            mount = found.get("LustreConfiguration", {}).get("MountName")
            if mount != existing.mount_name:
                problems.append(f"mount name {mount}, the spec says {existing.mount_name}")
            return [Check("existing-filesystem", existing.file_system_id, "fail" if problems else "pass",
                          "; ".join(problems) or "matches")]
        out += guard("existing-filesystem", existing.file_system_id, filesystem)
    bucket = aws.storage.checkpoint_bucket
    if bucket.existing_name is not None:
        name = bucket.existing_name

        def existing_bucket() -> list[Check]:
            import botocore.exceptions

            try:
                s3.head_bucket(Bucket=name)
            except botocore.exceptions.ClientError as err:
                if err.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket"):
                    return [Check("existing-bucket", name, "fail", "does not exist")]
                raise
            versioning = s3.get_bucket_versioning(Bucket=name).get("Status")
            return [Check("existing-bucket", name, "pass" if versioning == "Enabled" else "fail",
                          "exists, versioned" if versioning == "Enabled"
                          else f"exists but versioning is {versioning or 'off'}: checkpoints can be overwritten")]
        out += guard("existing-bucket", name, existing_bucket)
    else:
        prefix = f"{spec.name}-ckpt-"

        def prefix_free() -> list[Check]:
            taken = [b["Name"] for b in s3.list_buckets().get("Buckets", []) if b["Name"].startswith(prefix)]
            if taken:
                return [Check("bucket-prefix-free", prefix, "fail",
                              f"{', '.join(taken)} already use the prefix (a retained bucket of an earlier stack?): "
                              "import it or remove it before creating another")]
            return [Check("bucket-prefix-free", prefix, "pass", "no bucket of this account uses it")]
        out += guard("bucket-prefix-free", prefix, prefix_free)
    return out


def _deployer(sts: Any, spec: ClusterSpec) -> list[Check]:
    role = spec.aws_spec().control_plane.deployer.role_arn

    def assume() -> list[Check]:
        sts.assume_role(RoleArn=role, RoleSessionName=f"preflight-{spec.name}"[:64], DurationSeconds=900)
        access = spec.aws_spec().control_plane.deployer.api_access
        where = ("the runners must reach the private endpoint from inside the VPC (checked when the Kubernetes "
                 "layer is applied)" if access == "in-vpc" else "the runners reach the public endpoint from "
                 "publicAccessCidrs")
        return [Check("deployer", role, "pass", f"these credentials can assume it; {where}")]
    return guard("deployer", role, assume)


def run_preflight(spec: ClusterSpec, client: Callable[[str], Any]) -> list[Check]:
    """Every check, in order; ``client(name)`` makes a boto3 client for the stack's region."""
    ec2 = client("ec2")
    checks: list[Check] = []
    checks += guard("instance-type-offered", "node groups", lambda: _offerings(ec2, spec))
    checks += guard("catalog-matches-ec2", "instance types", lambda: _facts(ec2, spec))
    checks += _quotas(client("service-quotas"), spec)
    checks += _reservations(ec2, spec)
    checks += _existing(ec2, client("s3"), client("fsx"), spec)
    checks += _deployer(client("sts"), spec)
    return checks
