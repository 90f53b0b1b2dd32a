"""Identity: the pod's service account exists, and one that writes checkpoints to the bucket may.

The service account (``serviceAccountName``, default ``default``, which every namespace has) must be in the
namespace. The program's convention is one ``checkpoints`` service account per team namespace for jobs that write
to the checkpoint bucket; whether a pod running as it may is the cluster's cloud's question (its admit module's
``bucket_access``): on AWS, an EKS Pod Identity association for the namespace and account whose role has an inline
policy allowing ``s3:PutObject`` on ``<bucket>/<namespace>/*`` (and ``kms:GenerateDataKey`` when the bucket is
KMS-encrypted; managed policies attached to the role are not read, their documents are not in the graph: an S3 write
allowed only by one is a note); on GCP, a write role on the team's managed folder (or the bucket) for the Workload
Identity principal ``.../ns/<namespace>/sa/<account>``, on the bucket the namespace's ``checkpoints`` claim mounts
when there is one (a write grant on another bucket, one of gcp.storage.buckets, writes no checkpoint).
"""

from __future__ import annotations

from blueprint.admit.cloud import cloud_admit, cluster_cloud
from blueprint.admit.cluster import ClusterView
from blueprint.admit.workloads import PodSet

CHECKPOINT_SERVICE_ACCOUNT = "checkpoints"  # the program's per-team account for bucket writes (components/*/cloud.py)


def service_account(pod_set: PodSet) -> str:
    """The pod's service account name."""
    spec = pod_set.spec
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    return str(name)


def needs_bucket(account: str) -> bool:
    """Whether pods running as the account write checkpoints to the bucket (the program's convention)."""
    return account == CHECKPOINT_SERVICE_ACCOUNT


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
        cloud = cluster_cloud(view)
        if cloud is not None:
            found, said = cloud_admit(cloud).bucket_access(view, namespace, account)
        else:
            found, said = [], [f"no cloud cluster in the graph: bucket access of {account} not checked"]
        problems += found
        notes += said
    return problems, notes, bucket_users
