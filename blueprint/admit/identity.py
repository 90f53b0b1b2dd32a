"""Identity: the pod's service account exists, and one that writes checkpoints to the bucket may.

The service account (``serviceAccountName``, default ``default``, which every namespace has) must be in the
namespace. The program's convention is one ``checkpoints`` service account per team namespace for jobs that write
to the checkpoint bucket; a pod running as it needs, on AWS, an EKS Pod Identity association for the namespace and
account whose role has an inline policy allowing ``s3:PutObject`` on ``<bucket>/<namespace>/*`` (and
``kms:GenerateDataKey`` when the bucket is KMS-encrypted); on GCP, a write role on the team's managed folder (or the
bucket) for the Workload Identity principal ``.../ns/<namespace>/sa/<account>``, on the bucket the namespace's
``checkpoints`` claim mounts when there is one (a write grant on another bucket, one of gcp.storage.buckets, writes
no checkpoint). Managed policies attached to the role are not read (their documents are not in the graph): an S3
write allowed only by one is a note.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

from blueprint.admit.cluster import ClusterView, as_list, as_mapping
from blueprint.admit.volumes import GCSFUSE_DRIVER, bound_volume
from blueprint.admit.workloads import PodSet

CHECKPOINT_SERVICE_ACCOUNT = "checkpoints"  # the program's per-team account for bucket writes (components/*/cloud.py)
CHECKPOINT_CLAIM = "checkpoints"  # GKE: the team's claim of its checkpoint prefix (components/gcp/platform.py)
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE = "aws:iam/role:Role"
POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
GCS_IDENTITY_TYPES = ("gcp:storage/managedFolderIamMember:ManagedFolderIamMember",
                      "gcp:storage/bucketIAMMember:BucketIAMMember")
GCS_WRITER_ROLES = ("roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.objectCreator",
                    "roles/storage.admin", "roles/storage.legacyBucketWriter")
S3_WRITE_MANAGED = ("arn:aws:iam::aws:policy/AmazonS3FullAccess",)


def service_account(pod_set: PodSet) -> str:
    """The pod's service account name."""
    spec = pod_set.spec
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    return str(name)


def needs_bucket(account: str) -> bool:
    """Whether pods running as the account write checkpoints to the bucket (the program's convention)."""
    return account == CHECKPOINT_SERVICE_ACCOUNT


def _statements(document: Any) -> list[dict[str, Any]]:
    doc = document
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return []
    statements = as_mapping(doc).get("Statement")
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else ([str(value)] if value is not None else [])


def _allows(statements: list[dict[str, Any]], action: str, resource_test: Any) -> bool:
    for st in statements:
        if st.get("Effect") != "Allow":
            continue
        if not any(fnmatchcase(action.lower(), a.lower()) for a in _strings(st.get("Action"))):
            continue
        if any(resource_test(r) for r in _strings(st.get("Resource"))):
            return True
    return False


def _s3_prefix_test(namespace: str) -> Any:
    def test(resource: str) -> bool:
        if resource == "*":
            return True
        if not resource.startswith("arn:aws:s3:::"):
            return False
        bucket_and_key = resource.removeprefix("arn:aws:s3:::")
        _, slash, key = bucket_and_key.partition("/")
        return bool(slash) and fnmatchcase(f"{namespace}/checkpoint-0", key)
    return test


def _aws(view: ClusterView, namespace: str, account: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    ref = f"ServiceAccount/{namespace}/{account}"
    association = next((a for a in view.resources_of(POD_IDENTITY) if a.inputs.get("namespace") == namespace
                        and a.inputs.get("serviceAccount") == account), None)
    if association is None:
        return [(ref, "bucket-access", f"no EKS Pod Identity association for service account {namespace}/{account}: "
                 "its pods get no AWS credentials and cannot write checkpoints to the bucket; the program creates one "
                 "per team (is the namespace a team of the stack?)")], []
    role_arn = str(association.inputs.get("roleArn") or "")
    role_name = role_arn.rpartition("/")[2]
    statements: list[dict[str, Any]] = []
    for policy in view.resources_of(ROLE_POLICY):
        if str(policy.inputs.get("role")) in (role_name, role_arn):
            statements += _statements(policy.inputs.get("policy"))
    for role in view.resources_of(ROLE):
        if role.inputs.get("name") == role_name:
            for inline in as_list(role.inputs.get("inlinePolicies")):
                statements += _statements(as_mapping(inline).get("policy"))
    attached = [str(a.inputs.get("policyArn")) for a in view.resources_of(POLICY_ATTACHMENT)
                if str(a.inputs.get("role")) in (role_name, role_arn)]
    if not _allows(statements, "s3:PutObject", _s3_prefix_test(namespace)):
        if any(p in S3_WRITE_MANAGED for p in attached):
            return [], [f"role {role_name} writes S3 through a managed policy ({', '.join(attached)})"]
        return [(f"Role/{role_name}", "bucket-access",
                 f"role {role_name} (Pod Identity for {namespace}/{account}) has no policy allowing s3:PutObject on "
                 f"<bucket>/{namespace}/*: checkpoints cannot be written; grant it on the team's prefix")], []
    kms = any("aws:kms" in json.dumps(r.inputs) for r in view.resources_of(BUCKET_ENCRYPTION))
    if kms and not _allows(statements, "kms:GenerateDataKey", lambda r: r.startswith(("arn:aws:kms:", "*"))):
        return [(f"Role/{role_name}", "bucket-access",
                 f"role {role_name} may put objects but not kms:GenerateDataKey, and the bucket is encrypted with "
                 "SSE-KMS: every upload is refused; grant kms:GenerateDataKey on the bucket's key")], []
    return [], [f"{namespace}/{account} writes s3://<bucket>/{namespace}/ as role {role_name}"]


def checkpoint_bucket(view: ClusterView, namespace: str) -> str | None:
    """The bucket the namespace's ``checkpoints`` claim mounts through GCS FUSE (components/gcp/platform.py
    checkpoint_volume), or None."""
    claim = view.get("PersistentVolumeClaim", CHECKPOINT_CLAIM, namespace)
    pv = bound_volume(view, claim)[0] if claim is not None else None
    csi = as_mapping(pv.spec.get("csi")) if pv is not None else {}
    handle = csi.get("volumeHandle")
    return handle if csi.get("driver") == GCSFUSE_DRIVER and isinstance(handle, str) else None


def _gcp(view: ClusterView, namespace: str, account: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    suffix = f"/ns/{namespace}/sa/{account}"
    bucket = checkpoint_bucket(view, namespace)
    grants = [r for t in GCS_IDENTITY_TYPES for r in view.resources_of(t)
              if str(r.inputs.get("member", "")).endswith(suffix)
              and (bucket is None or r.inputs.get("bucket") == bucket)]
    writers = [g for g in grants if g.inputs.get("role") in GCS_WRITER_ROLES]
    if not writers:
        have = ", ".join(sorted({str(g.inputs.get("role")) for g in grants})) or "no role"
        return [(f"ServiceAccount/{namespace}/{account}", "bucket-access",
                 f"the Workload Identity principal ...{suffix} has {have} on the checkpoint bucket"
                 f"{f' {bucket}' if bucket else ''}, no write role: checkpoints cannot be written; grant "
                 "roles/storage.objectUser on the team's managed folder")], []
    folder = writers[0].inputs.get("managedFolder")
    where = f"managed folder {folder}" if folder else f"bucket {writers[0].inputs.get('bucket')}"
    return [], [f"{namespace}/{account} writes {where} as {writers[0].inputs.get('role')}"]


def check_identity(view: ClusterView, namespace: str,
                   pod_sets: list[PodSet]) -> tuple[list[tuple[str, str, str]], list[str], set[str]]:
    """(problems, notes, the service accounts that reach the bucket)."""
    problems: list[tuple[str, str, str]] = []
    notes: list[str] = []
    bucket_users: set[str] = set()
    for account in sorted({service_account(p) for p in pod_sets}):
        if account != "default" and view.get("ServiceAccount", account, namespace) is None:
            present = ", ".join(sorted(s.name for s in view.of_kind("ServiceAccount", namespace)))
            problems.append((f"ServiceAccount/{namespace}/{account}", "service-account",
                             f"service account {account} is not in namespace {namespace} (its accounts: default"
                             f"{', ' + present if present else ''}): the pods are refused; use one of those"))
            continue
        if not needs_bucket(account):
            continue
        bucket_users.add(account)
        if view.cloud == "aws":
            found, said = _aws(view, namespace, account)
        elif view.cloud == "gcp":
            found, said = _gcp(view, namespace, account)
        else:
            found, said = [], [f"no cloud cluster in the graph: bucket access of {account} not checked"]
        problems += found
        notes += said
    return problems, notes, bucket_users
