"""``blueprint audit <stack>``: the deployed account against the spec, after ``pulumi up`` (boto3, read only).

Finds the cluster's resources by its ``cluster`` tag (the provider's default tags put it on every taggable
resource) and reports: resources missing a billing tag; buckets without default encryption or versioning; an
EKS endpoint more open than the spec (public access, or CIDRs outside ``publicAccessCidrs``); node groups whose
launch template wires fewer EFA interfaces than the instance type has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blueprint.acceptance.checks import Check, Status
from blueprint.clouds.aws.preflight import guard
from components.catalog import load_aws_catalog
from components.spec import REQUIRED_LABEL_KEYS, ClusterSpec


def _tagged_resources(tagging: Any, cluster: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token = ""
    while True:
        page = tagging.get_resources(TagFilters=[{"Key": "cluster", "Values": [cluster]}], PaginationToken=token)
        out += page.get("ResourceTagMappingList", [])
        token = page.get("PaginationToken", "")
        if not token:
            return out


def _billing_tags(tagging: Any, spec: ClusterSpec) -> list[Check]:
    found = _tagged_resources(tagging, spec.name)
    if not found:
        return [Check("billing-tags", spec.name, "cannot-check",
                      f"no resource carries cluster={spec.name}: is the stack deployed in this account and region?")]
    out = []
    for res in found:
        keys = {t["Key"] for t in res.get("Tags", [])}
        missing = [k for k in REQUIRED_LABEL_KEYS if k not in keys]
        if missing:
            out.append(Check("billing-tags", res["ResourceARN"], "fail", f"missing {', '.join(missing)}"))
    if not out:
        out.append(Check("billing-tags", spec.name, "pass", f"{len(found)} resources carry every billing tag"))
    return out


def _buckets(s3: Any, tagging: Any, spec: ClusterSpec) -> list[Check]:
    import botocore.exceptions

    # arn:<partition>:s3:::<bucket> (every partition)
    names = [r["ResourceARN"].split(":::", 1)[1] for r in _tagged_resources(tagging, spec.name)
             if r["ResourceARN"].split(":")[2:3] == ["s3"] and ":::" in r["ResourceARN"]]
    if spec.aws_spec().storage.checkpoint_bucket.existing_name:
        names.append(spec.aws_spec().storage.checkpoint_bucket.existing_name)
    out = []
    for name in sorted(set(names)):
        problems = []
        # Every bucket has SSE-S3 by default since 2023; the checkpoint bucket is built with the stack's KMS key.
        wants_kms = name.startswith(f"{spec.name}-ckpt-") or \
            name == spec.aws_spec().storage.checkpoint_bucket.existing_name
        try:
            rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"]
            algorithms = {r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for r in rules}
            if wants_kms and not algorithms & {"aws:kms", "aws:kms:dsse"}:
                problems.append(f"default encryption {', '.join(sorted(a for a in algorithms if a))}, not SSE-KMS "
                                "as the stack builds the checkpoint bucket")
        except botocore.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ServerSideEncryptionConfigurationNotFoundError":
                raise
            problems.append("no default encryption")
        if s3.get_bucket_versioning(Bucket=name).get("Status") != "Enabled":
            problems.append("versioning is off")
        out.append(Check("bucket-protection", name, "fail" if problems else "pass",
                         "; ".join(problems)
                         or ("SSE-KMS, versioned" if wants_kms else "encrypted by default, versioned")))
    return out


def _endpoint(eks: Any, spec: ClusterSpec) -> list[Check]:
    cp = spec.aws_spec().control_plane
    vpc = eks.describe_cluster(name=spec.name)["cluster"]["resourcesVpcConfig"]
    problems = []
    if vpc.get("endpointPublicAccess"):
        if cp.endpoint_access == "private":
            problems.append("the public endpoint is on; the spec says private")
        allowed = set(cp.public_access_cidrs or [])
        extra = [c for c in vpc.get("publicAccessCidrs", []) if c not in allowed]
        if extra:
            problems.append(f"public access from {', '.join(extra)}, not in the spec's publicAccessCidrs")
    return [Check("endpoint-access", spec.name, "fail" if problems else "pass",
                  "; ".join(problems) or ("private endpoint only" if not vpc.get("endpointPublicAccess")
                                          else f"public from {', '.join(vpc.get('publicAccessCidrs', []))}"))]


def _efa(eks: Any, ec2: Any, spec: ClusterSpec) -> list[Check]:
    catalog = load_aws_catalog()
    out = []
    for group in spec.aws_spec().node_groups:
        facts = catalog[group.instance_type]
        expected = facts.efa_count if group.efa_interfaces is None else min(group.efa_interfaces, facts.efa_count)
        if not expected:
            continue
        name = f"{spec.name}-{group.name}"

        def one(name: str = name, expected: int = expected, itype: str = group.instance_type) -> list[Check]:
            ng = eks.describe_nodegroup(clusterName=spec.name, nodegroupName=name)["nodegroup"]
            template = ng.get("launchTemplate") or {}
            if not template.get("id"):
                return [Check("efa-interfaces", name, "fail", "no launch template: no EFA interface is wired")]
            versions = ec2.describe_launch_template_versions(
                LaunchTemplateId=template["id"], Versions=[str(template.get("version", "$Latest"))])
            data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
            efa = sum(1 for ni in data.get("NetworkInterfaces", []) if ni.get("InterfaceType") in ("efa", "efa-only"))
            status: Status = "pass" if efa >= expected else "fail"
            return [Check("efa-interfaces", name, status, f"{efa} of the {expected} EFA interfaces of {itype}")]
        out += guard("efa-interfaces", name, one)
    return out


def run_audit(spec: ClusterSpec, client: Callable[[str], Any]) -> list[Check]:
    """Every audit check; ``client(name)`` makes a boto3 client for the stack's region."""
    tagging = client("resourcegroupstaggingapi")
    eks = client("eks")
    checks: list[Check] = []
    checks += guard("billing-tags", spec.name, lambda: _billing_tags(tagging, spec))
    checks += guard("bucket-protection", spec.name, lambda: _buckets(client("s3"), tagging, spec))
    checks += guard("endpoint-access", spec.name, lambda: _endpoint(eks, spec))
    checks += _efa(eks, client("ec2"), spec)
    return checks
