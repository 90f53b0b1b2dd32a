"""Rules on the cloud, region and zones."""

from __future__ import annotations

from components.catalog import (
    known_regions,
    zone_id_prefix,
)
from components.spec.aws import AwsSpec
from components.spec.base import _ZONE_RE
from components.spec.decisions import _gpu_zone_given_once
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec


def _check_cloud(spec: ClusterSpec, provider_region: str | None, out: _Collector,
                 provider_project: str | None = None) -> None:
    if spec.cloud == "aws" and spec.aws is None:
        out.add(".aws", "cloud-settings-required", "cloud is aws, so the aws settings are required")
        return
    if spec.cloud == "gcp" and spec.gcp is None:
        out.add(".gcp", "cloud-settings-required", "cloud is gcp, so the gcp settings are required")
        return
    other = "gcp" if spec.cloud == "aws" else "aws"
    if getattr(spec, other) is not None:
        out.add(f".{other}", "cloud-settings-required",
                f"cloud is {spec.cloud}; remove the {other} settings (one stack builds one cloud)")
        return
    if spec.gcp is not None:
        if provider_region is not None and provider_region != spec.gcp.region:
            out.add(".gcp.region", "region-matches-provider",
                    f"gcp.region '{spec.gcp.region}' must equal the stack's gcp:region '{provider_region}'")
        if provider_project is not None and provider_project != spec.gcp.project:
            # The provider's project is where every resource without its own project lands (pulumi_gcp Provider
            # `project`); two projects would split the cluster between them.
            out.add(".gcp.project", "project-matches-provider",
                    f"gcp.project '{spec.gcp.project}' must equal the stack's gcp:project '{provider_project}'")
        if spec.tags:
            out.add(".tags", "aws-tag-syntax", "tags are AWS tags; a GCP stack labels its resources with labels")
        return
    aws = spec.aws
    if aws is None:
        return
    if aws.region not in known_regions():
        out.add(".aws.region", "region-known",
                f"'{aws.region}' is not a region of the catalog (components/catalog/aws_regions.yaml, with sources); "
                f"known: {', '.join(known_regions())}")
    if provider_region is not None and provider_region != aws.region:
        out.add(".aws.region", "region-matches-provider",
                f"aws.region '{aws.region}' must equal the stack's aws:region '{provider_region}'")
    if not _gpu_zone_given_once(aws):
        out.add(".aws.gpuAvailabilityZone", "zone-given-once",
                "give the GPU zone once: gpuAvailabilityZone (a name, e.g. us-east-1a) or gpuAvailabilityZoneId "
                "(an AZ ID, e.g. use1-az4, as Capacity Blocks and ODCRs are sold)")
        return
    key = "gpuAvailabilityZone" if aws.gpu_availability_zone else "gpuAvailabilityZoneId"
    _check_zone_in_region(aws, aws.gpu_zone, f".aws.{key}", out)


def _check_zone_in_region(aws: AwsSpec, zone: str, where: str, out: _Collector) -> None:
    if _ZONE_RE.fullmatch(zone):
        if not zone.startswith(aws.region):
            out.add(where, "zone-in-region", f"zone '{zone}' is not in region '{aws.region}'")
        return
    prefix = zone_id_prefix(aws.region)
    if prefix is None:
        out.add(where, "zone-in-region",
                f"the region catalog (components/catalog/aws_regions.yaml) has no AZ ID prefix for region "
                f"'{aws.region}', so zone '{zone}' cannot be checked; name the zone instead (e.g. {aws.region}a)")
    elif not zone.startswith(f"{prefix}-az"):
        out.add(where, "zone-in-region",
                f"zone ID '{zone}' is not in region '{aws.region}' (its zone IDs are {prefix}-az<N>)")
