"""Data safety: checkpoints survive mistakes, renames and deletions."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    CLOUD_SQL,
    GCS_BUCKET,
    GKE_CLUSTER,
    NAMESPACE,
    REQUIRED_LIST,
    STRING_LIST,
    Knob,
    Reporter,
    as_dict,
    dependents,
    effective_tags,
    gcp_environment,
    get,
    helm_release,
    k8s_name,
    of_type,
    path,
    resource_policy,
    seen,
    stack_policy,
)


def _versioned(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    versioning_type = "aws:s3/bucketVersioning:BucketVersioning"
    for bucket in of_type(args.resources, "aws:s3/bucket:Bucket"):
        configs = dependents(args.resources, bucket, versioning_type)
        if not any(get(c.props, "versioningConfiguration", "status") == "Enabled" for c in configs):
            message = (f"Bucket {bucket.name} must be versioned (BucketVersioning status Enabled), so an overwritten "
                       "or deleted checkpoint can be restored.")
            if not configs:  # no field: the bucket lacks a whole resource, its versioning configuration
                report(message, bucket.urn)
                continue
            report(message, configs[0].urn, field="versioningConfiguration.status",
                   value=seen(configs[0].props, "versioningConfiguration", "status"))


bucket_versioned = stack_policy(
    "aws-s3-checkpoint-bucket-versioned", "data-safety",
    "Every bucket is versioned.",
    "Keep the BucketVersioning of the storage component with status Enabled.",
    Severity.HIGH, _versioned,
)


RECORD_PREFIXES = Knob("recordPrefixes", STRING_LIST, ["acceptance/"])


def _records_only(rule: dict[str, Any], prefixes: list[str]) -> bool:
    """The rule's filter limits it to a prefix of records (the acceptance gate's), never checkpoints."""
    prefix = str(get(rule, "filter", "prefix", default="") or "")
    return bool(prefix) and any(prefix.startswith(p) for p in prefixes)


def _lifecycle(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration":
        return
    for i, rule in enumerate(args.props.get("rules") or []):
        if rule.get("status") != "Enabled" or _records_only(rule, list(cfg["recordPrefixes"])):
            continue
        expiration = rule.get("expiration") or {}
        if expiration.get("days") is not None or expiration.get("date"):
            key = "days" if expiration.get("days") is not None else "date"
            report(f"Lifecycle rule {rule.get('id', '?')} must not expire current object versions; expire only "
                   "noncurrent versions (noncurrentVersionExpiration).", field=path("rules", i, "expiration", key),
                   value=seen(expiration, key))


lifecycle_keeps_current = resource_policy(
    "aws-s3-lifecycle-keeps-current-versions", "data-safety",
    "Bucket lifecycle rules never expire current object versions, only noncurrent ones (records prefixes aside).",
    "Use noncurrentVersionExpiration (checkpointBucket.noncurrentVersionRetentionDays) instead of expiration; only a "
    "rule filtered to a records prefix (recordPrefixes: the acceptance gate's acceptance/) may expire objects.",
    Severity.CRITICAL, _lifecycle, [RECORD_PREFIXES],
)

STATEFUL = Knob("statefulTypes", REQUIRED_LIST, [
    "aws:s3/bucket:Bucket", "aws:fsx/lustreFileSystem:LustreFileSystem", "aws:kms/key:Key",
    "aws:eks/cluster:Cluster", "aws:cloudwatch/logGroup:LogGroup", "aws:rds/instance:Instance",
])
PROTECTED_ENVS = Knob("protectedEnvironments", REQUIRED_LIST, ["prod"])


def _protected(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type not in cfg["statefulTypes"]:
        return
    tags = effective_tags(args.props, args.provider.props if args.provider else None)
    if tags.get("environment") not in cfg["protectedEnvironments"]:
        return
    if not args.opts.protect:
        # No field: protect is a resource option, not an input.
        report(f"{args.name} holds data in environment {tags.get('environment')} and must be protected "
               "(protect: true) so no update or destroy can delete it.")
    if args.resource_type == "aws:eks/cluster:Cluster" and args.props.get("deletionProtection") is not True:
        report(f"EKS cluster {args.props.get('name', args.name)} in {tags.get('environment')} must have "
               "deletionProtection enabled.", field="deletionProtection", value=seen(args.props, "deletionProtection"))


stateful_protected = resource_policy(
    "stateful-resources-protected-in-production", "data-safety",
    "Buckets, filesystems, KMS keys, clusters, audit log groups and the Slurm accounting database are protected in "
    "production environments.",
    "Keep deletionProtection: true in the stack spec (it cannot be turned off in prod).",
    Severity.CRITICAL, _protected, [STATEFUL, PROTECTED_ENVS],
)

NAME_INPUTS = Knob("nameInputs",
                   {"type": "object", "additionalProperties": REQUIRED_LIST, "minProperties": 1},
                   {
                       "aws:s3/bucket:Bucket": ["bucket", "bucketPrefix"],
                       "aws:eks/cluster:Cluster": ["name"],
                       "aws:cloudwatch/logGroup:LogGroup": ["name", "namePrefix"],
                       "gcp:storage/bucket:Bucket": ["name"],
                       "gcp:container/cluster:Cluster": ["name"],
                       "gcp:lustre/instance:Instance": ["instanceId"],
                       CLOUD_SQL: ["name"],
                   })


def _environment(args: ResourceValidationArgs) -> Any:
    """The environment a resource belongs to: its GCP labels or AWS tags, counting the provider's defaults."""
    provider = args.provider.props if args.provider else None
    if args.resource_type.startswith("gcp:"):
        return gcp_environment(args.resource_type, args.props, provider)
    return effective_tags(args.props, provider).get("environment")


def _rename_safe(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    inputs = cfg["nameInputs"].get(args.resource_type) if isinstance(cfg["nameInputs"], dict) else None
    if not isinstance(inputs, list):
        return
    if _environment(args) not in cfg["protectedEnvironments"]:
        return
    ignored = set(args.opts.ignore_changes or [])
    for key in inputs:
        if key in args.props and key not in ignored:
            # The field is the name input whose changes must be ignored (ignoreChanges is an option, not an input).
            report(f"{args.name} holds data and its {key} is derived from a name, so {key} must be listed in "
                   "ignoreChanges: renaming the cluster must never replace (and so delete) it.", field=path(key),
                   value=seen(args.props, key))


stateful_rename_safe = resource_policy(
    "stateful-names-ignore-changes", "data-safety",
    "Name-like inputs of buckets, clusters, filesystems and audit log groups are ignoreChanges in production "
    "environments.",
    "Create stateful resources with ignore_changes=[<name input>] (components/aws/stateful.py stateful_options; "
    "the GCP components pass it directly).",
    Severity.HIGH, _rename_safe, [NAME_INPUTS, PROTECTED_ENVS],
)

def _metrics_retained(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    namespaces = {k8s_name(r.props): r for r in of_type(args.resources, NAMESPACE)}
    classes = {k8s_name(r.props): r for r in of_type(args.resources, "kubernetes:storage.k8s.io/v1:StorageClass")}
    for release in helm_release(args.resources, "kube-prometheus-stack"):
        ns = namespaces.get(str(release.props.get("namespace", "")))
        env = get(ns.props, "metadata", "labels", "environment") if ns is not None else None
        if env not in cfg["protectedEnvironments"]:
            continue
        where = f"the Prometheus release {release.props.get('name', release.name)} in {env}"
        # No field for protect: it is a resource option, not an input.
        if not release.opts.protect:
            report(f"{where} owns the metrics volume and must be protected (protect: true).", release.urn)
        if ns is not None and not ns.opts.protect:
            report(f"Namespace {k8s_name(ns.props)} holds {where} and its volume claim; it must be protected.", ns.urn)
        values = as_dict(release.props.get("values"))
        claim = ("prometheus", "prometheusSpec", "storageSpec", "volumeClaimTemplate", "spec", "storageClassName")
        name = get(values, *claim)
        if not isinstance(name, str):
            report(f"{where} must keep its metrics on a persistent volume (storageSpec.volumeClaimTemplate).",
                   release.urn, field=path("values", *claim), value=seen(values, *claim))
            continue
        storage = classes.get(name)
        if storage is None:  # the release names a class the stack does not create
            report(f"StorageClass {name} of {where} must have reclaimPolicy Retain, so deleting the claim keeps "
                   "the metrics history.", release.urn, field=path("values", *claim), value=name)
        elif storage.props.get("reclaimPolicy") != "Retain":
            report(f"StorageClass {name} of {where} must have reclaimPolicy Retain, so deleting the claim keeps "
                   "the metrics history.", storage.urn, field="reclaimPolicy", value=seen(storage.props,
                                                                                          "reclaimPolicy"))


metrics_retained = stack_policy(
    "prometheus-metrics-retained-in-production", "data-safety",
    "In production the Prometheus volume is retained and its namespace and release are protected.",
    "Keep deletionProtection: true (the platform then retains the volume and protects the monitoring namespace).",
    Severity.HIGH, _metrics_retained, [PROTECTED_ENVS],
)

# --- GCP -----------------------------------------------------------------------------------------

# Cloud Storage keeps soft-deleted objects 7 to 90 days (or not at all): 0 would accept no soft delete.
MIN_SOFT_DELETE_DAYS = Knob("minSoftDeleteDays", {"type": "integer", "minimum": 1, "maximum": 90}, 7)


def _gcs_recoverable(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != GCS_BUCKET:
        return
    p = args.props
    if get(p, "versioning", "enabled") is True:
        return
    days = float(get(p, "softDeletePolicy", "retentionDurationSeconds", default=0) or 0) / 86400
    hierarchical = get(p, "hierarchicalNamespace", "enabled") is True
    if hierarchical and days >= cfg["minSoftDeleteDays"]:
        return
    # A hierarchical-namespace bucket cannot be versioned: its soft delete is the field to raise.
    field = ("softDeletePolicy", "retentionDurationSeconds") if hierarchical else ("versioning", "enabled")
    report(f"Bucket {p.get('name', args.name)} must keep overwritten and deleted checkpoints recoverable: "
           f"versioning.enabled: true, or (a hierarchical-namespace bucket, which cannot be versioned) "
           f"softDeletePolicy.retentionDurationSeconds of at least {cfg['minSoftDeleteDays']} days; "
           f"it has neither (soft delete {days:g} days).", field=path(*field), value=seen(p, *field))


gcs_recoverable = resource_policy(
    "gcp-storage-bucket-recoverable", "data-safety",
    "Every Cloud Storage bucket is versioned, or has a hierarchical namespace and at least 7 days of soft delete.",
    "Keep versioning on the checkpoint bucket; with a hierarchical namespace set checkpointBucket.softDeleteDays "
    "to 7 or more.",
    Severity.HIGH, _gcs_recoverable, [MIN_SOFT_DELETE_DAYS], enforcement=EnforcementLevel.MANDATORY,
)

GCP_STATEFUL = Knob("statefulTypes", REQUIRED_LIST, [
    GCS_BUCKET, "gcp:lustre/instance:Instance", "gcp:kms/cryptoKey:CryptoKey", "gcp:kms/keyRing:KeyRing",
    GKE_CLUSTER, CLOUD_SQL,
])


def _gcp_protected(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type not in cfg["statefulTypes"]:
        return
    env = gcp_environment(args.resource_type, args.props, args.provider.props if args.provider else None)
    if env not in cfg["protectedEnvironments"]:
        return
    if not args.opts.protect:
        # No field: protect is a resource option, not an input.
        report(f"{args.name} holds data (or the keys to it) in environment {env} and must be protected "
               "(protect: true) so no update or destroy can delete it.")
    if args.resource_type == GKE_CLUSTER and args.props.get("deletionProtection") is False:
        report(f"GKE cluster {args.props.get('name', args.name)} in {env} must keep deletionProtection on.",
               field="deletionProtection", value=False)
    if args.resource_type == GCS_BUCKET and args.props.get("forceDestroy") is True:
        report(f"Bucket {args.props.get('name', args.name)} in {env} must not set forceDestroy, which deletes "
               "every checkpoint with the bucket.", field="forceDestroy", value=True)
    if args.resource_type == CLOUD_SQL:
        # Pulumi's own guard (deletionProtection, on unless set false: pulumi_gcp sql.DatabaseInstance) and the API
        # flag that stops every surface, console and gcloud included (settings.deletionProtectionEnabled).
        if args.props.get("deletionProtection") is False:
            report(f"Cloud SQL instance {args.props.get('name', args.name)} in {env} must keep deletionProtection "
                   "on.", field="deletionProtection", value=False)
        if get(args.props, "settings", "deletionProtectionEnabled") is not True:
            report(f"Cloud SQL instance {args.props.get('name', args.name)} in {env} must turn on the API's deletion "
                   "protection (settings.deletionProtectionEnabled).", field="settings.deletionProtectionEnabled",
                   value=seen(args.props, "settings", "deletionProtectionEnabled"))


gcp_stateful_protected = resource_policy(
    "gcp-stateful-resources-protected-in-production", "data-safety",
    "Buckets, Lustre instances, Cloud SQL instances, KMS keys and key rings and GKE clusters are protected in "
    "production environments.",
    "Keep deletionProtection: true in the stack spec (it cannot be turned off in prod): the GCP components then "
    "protect and retain them, and keep the cluster's and the Cloud SQL instance's deletion protection.",
    Severity.CRITICAL, _gcp_protected, [GCP_STATEFUL, PROTECTED_ENVS], enforcement=EnforcementLevel.MANDATORY,
)

POLICIES = [bucket_versioned, lifecycle_keeps_current, stateful_protected, stateful_rename_safe, metrics_retained,
            gcs_recoverable, gcp_stateful_protected]
