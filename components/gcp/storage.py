"""The GCP storage plane: the checkpoint bucket, more buckets (gcp.storage.buckets) and the shared filesystem (Managed
Lustre, Filestore or Parallelstore) in the GPU zone.

Everything that holds data is protected and retained on delete while deletion protection is on, and its physical
name is derived from the cluster name once (a rename of a Pulumi resource is an alias problem, not a new bucket).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.spec.decisions import gcs_bucket_name, gcs_checkpoint_bucket_name
from components.spec.gcp import GcpStorageSpec

RECORDS_PREFIX = "acceptance"  # the acceptance gate's records (components/kubernetes/objects/acceptance.py)
LUSTRE_FILESYSTEM = "lustrefs"  # the Lustre filesystem name clients mount (<= 8 letters and digits)


def lustre_instance_id(prefix: str) -> str:
    """The Managed Lustre instance's id (its name in the CSI driver's volume handle)."""
    return f"{prefix}-lustre"


def checkpoint_bucket_name(project: str, prefix: str) -> str:
    """The checkpoint bucket's name: project and cluster, within GCS's 63 characters."""
    return gcs_checkpoint_bucket_name(project, prefix)


def _bucket(resource_name: str, bucket_name: str, *, project: str, region: str, hierarchical: bool,
            noncurrent_days: int, soft_delete_days: int, data_key: pulumi.Input[str], labels: Mapping[str, str],
            opts: pulumi.ResourceOptions, record_retention_days: Optional[int] = None) -> gcp.storage.Bucket:
    """A regional bucket with uniform access, public access prevention, versioning (or a hierarchical namespace),
    soft delete, the stack's CMEK key and lifecycle rules that never expire live objects, except the acceptance gate's
    records under acceptance/ after ``record_retention_days``."""
    rules = [
        # Abandoned multipart uploads (interrupted checkpoint writes) are not kept forever.
        gcp.storage.BucketLifecycleRuleArgs(
            action=gcp.storage.BucketLifecycleRuleActionArgs(type="AbortIncompleteMultipartUpload"),
            condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=7)),
    ]
    if record_retention_days:
        # The acceptance gate's records (acceptance/<group>/<run>/<node>/) expire after their retention; checkpoints
        # never do (Cloud Storage "Object Lifecycle Management": condition matchesPrefix and age).
        rules.append(gcp.storage.BucketLifecycleRuleArgs(
            action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
            condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=record_retention_days,
                                                                   matches_prefixes=[f"{RECORDS_PREFIX}/"])))
    if not hierarchical:
        # Replaced or deleted objects stay as noncurrent versions for the retention, then expire.
        rules.append(gcp.storage.BucketLifecycleRuleArgs(
            action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
            condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                days_since_noncurrent_time=noncurrent_days, with_state="ARCHIVED")))
    return gcp.storage.Bucket(
        resource_name,
        name=bucket_name,
        project=project,
        location=region.upper(),
        storage_class="STANDARD",
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        # A hierarchical namespace excludes object versioning (Cloud Storage "Hierarchical namespace").
        versioning=gcp.storage.BucketVersioningArgs(enabled=not hierarchical),
        hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True) if hierarchical else None,
        soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(retention_duration_seconds=soft_delete_days * 86400),
        encryption=gcp.storage.BucketEncryptionArgs(default_kms_key_name=data_key),
        lifecycle_rules=rules,
        force_destroy=False,
        labels=dict(labels),
        opts=opts,
    )


class GcpStorage(pulumi.ComponentResource):
    """The checkpoint bucket (or an existing one) and the optional shared filesystem.

    Attributes:
        bucket_name: the checkpoint bucket.
        data_buckets: the names of gcp.storage.buckets, by spec name.
        filesystem_address: how clients mount the filesystem (Lustre ``<ip>@tcp:/<fsname>``, an existing instance's
            as the stack gives it; Filestore IP), or None.
    """

    bucket_name: pulumi.Output[str]
    data_buckets: dict[str, pulumi.Output[str]]
    filesystem_address: Optional[pulumi.Output[str]]

    def __init__(self, name: str, *, spec: GcpStorageSpec, project: str, region: str, zone: str, prefix: str,
                 labels: Mapping[str, str], protect: bool, data_key: pulumi.Input[str],
                 key_grants: list[pulumi.Resource], network_id: pulumi.Input[str],
                 psa_connection: Optional[pulumi.Resource], after: Sequence[pulumi.Resource] = (),
                 record_retention_days: Optional[int] = None,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:GcpStorage", name, provenance.props(), opts)
        keep = pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect, depends_on=list(after))
        b = spec.checkpoint_bucket
        bucket_opts = pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(
            depends_on=key_grants, ignore_changes=["name"]))
        if b.existing_name is not None:
            self.bucket_name = pulumi.Output.from_input(b.existing_name)
        else:
            bucket = _bucket(f"{name}-checkpoints", checkpoint_bucket_name(project, prefix), project=project,
                             region=region, hierarchical=b.hierarchical_namespace,
                             noncurrent_days=b.noncurrent_version_retention_days, soft_delete_days=b.soft_delete_days,
                             data_key=data_key, labels=labels, opts=bucket_opts,
                             record_retention_days=record_retention_days)
            self.bucket_name = bucket.name
        # More buckets (gcp.storage.buckets), built as the checkpoint bucket is; a bucket's resource and physical
        # names come from its spec name alone, so adding or removing another never renames it.
        self.data_buckets = {}
        for extra in spec.buckets:
            self.data_buckets[extra.name] = _bucket(
                f"{name}-bucket-{extra.name}", gcs_bucket_name(project, prefix, extra.name), project=project,
                region=region, hierarchical=extra.hierarchical_namespace,
                noncurrent_days=extra.version_retention_days, soft_delete_days=extra.soft_delete_days,
                data_key=data_key, labels=labels, opts=bucket_opts).name

        self.filesystem_address = None
        fs = spec.filesystem
        if fs is not None:
            after_psa = pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(
                depends_on=[psa_connection] if psa_connection is not None else []))
            if fs.type == "managed-lustre" and fs.existing is not None:
                # An instance the stack does not create (storage.filesystem.existing): nothing is registered for it,
                # so it is neither priced nor protected here, and removing the key never deletes it.
                self.filesystem_address = pulumi.Output.from_input(
                    f"{fs.existing.ip}@tcp:/{fs.existing.filesystem}")
            elif fs.type == "managed-lustre":
                lustre = gcp.lustre.Instance(
                    f"{name}-lustre",
                    instance_id=lustre_instance_id(prefix),
                    project=project,
                    location=zone,
                    filesystem=LUSTRE_FILESYSTEM,
                    capacity_gib=str(fs.capacity_gib),
                    per_unit_storage_throughput=str(fs.per_unit_storage_throughput),
                    network=network_id,
                    # Off: new instances serve LNet on the default port 988, which GKE mounts from the version in
                    # components/catalog/gke_versions.yaml (a load rule holds the cluster to it); on would force the
                    # legacy port 6988 and the cluster's enable_legacy_lustre_port.
                    gke_support_enabled=False,
                    description=f"Shared filesystem of {prefix}",
                    labels=dict(labels),
                    opts=pulumi.ResourceOptions.merge(after_psa, pulumi.ResourceOptions(
                        ignore_changes=["instanceId"])),
                )
                self.filesystem_address = lustre.mount_point
            elif fs.type == "filestore":
                tier = fs.filestore_tier or "ZONAL"
                filestore = gcp.filestore.Instance(
                    f"{name}-filestore",
                    name=f"{prefix}-fs",
                    project=project,
                    location=zone if tier in ("ZONAL", "BASIC_SSD") else region,
                    tier=tier,
                    file_shares=gcp.filestore.InstanceFileSharesArgs(name="checkpoints", capacity_gb=fs.capacity_gib),
                    networks=[gcp.filestore.InstanceNetworkArgs(network=network_id, modes=["MODE_IPV4"],
                                                                connect_mode="PRIVATE_SERVICE_ACCESS")],
                    kms_key_name=data_key if tier != "BASIC_SSD" else None,
                    deletion_protection_enabled=protect,
                    labels=dict(labels),
                    opts=pulumi.ResourceOptions.merge(after_psa, pulumi.ResourceOptions(depends_on=key_grants)),
                )
                self.filesystem_address = filestore.networks.apply(
                    lambda nets: (nets[0].ip_addresses or [""])[0] if nets else "")
            else:
                parallel = gcp.parallelstore.Instance(
                    f"{name}-parallelstore",
                    instance_id=f"{prefix}-ps",
                    project=project,
                    location=zone,
                    capacity_gib=str(fs.capacity_gib),
                    network=network_id,
                    deployment_type="PERSISTENT",
                    labels=dict(labels),
                    opts=after_psa,
                )
                self.filesystem_address = parallel.access_points.apply(lambda ips: ",".join(ips or []))
        self.register_outputs({"bucket": self.bucket_name})
