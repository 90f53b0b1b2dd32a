"""sssd.conf from the cloud's secret store: External Secrets Operator (ESO, pinned chart ``external-secrets``,
components/catalog/charts.yaml) writes the login pods' Secret from AWS Secrets Manager or GCP Secret Manager and keeps
it in sync, so nothing is created by hand in the cluster after the first apply.

Sources (external-secrets/external-secrets v2.9.0, read 2026-12-03; CRDs in blueprint/schemas/crds/external-secrets):
deploy/charts/external-secrets/values.yaml (scopedNamespace, scopedRBAC, the process* switches, crds.annotations);
docs/provider/aws-access.md "EKS Pod Identity Setup" ("No ``auth`` section is defined for the SecretStore": the
controller's own Pod Identity credentials); docs/provider/google-secrets-manager.md "Authorizing the Core Controller
Pod" (no ``auth``: the controller's Workload Identity); docs/guides/ownership-deletion-policy.md (creationPolicy,
deletionPolicy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.kubernetes.objects.common import Manifest, meta

ESO_API = "external-secrets.io/v1"
ESO_NAMESPACE = "external-secrets"
ESO_SERVICE_ACCOUNT = "external-secrets"  # the Pod Identity association and the Workload Identity principal name it
ESO_RELEASE = "external-secrets"
SECRET_STORE = "cloud-secrets"
SSSD_KEY = "sssd.conf"
REFRESH = "1h0m0s"  # a change in the store reaches the Secret within the hour (the CRD's default)


def eso_values(watched: str) -> Manifest:
    """The chart's values: the controller reconciles only ``watched`` (the slurm namespace) with a Role there, no
    cluster-wide stores or secrets, no push to the store; its service account named for the cloud identity; the CRDs
    kept if the release is ever removed (they would take every ExternalSecret, and its Secret, with them)."""
    return {
        "installCRDs": True,
        "crds": {"annotations": {"helm.sh/resource-policy": "keep"}},
        "serviceAccount": {"create": True, "name": ESO_SERVICE_ACCOUNT},
        "scopedNamespace": watched,
        "scopedRBAC": True,
        "processClusterStore": False,
        "processClusterExternalSecret": False,
        "processClusterPushSecret": False,
        "processClusterGenerator": False,
        "processPushSecret": False,
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "webhook": {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}},
        "certController": {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                         "limits": {"memory": "128Mi"}}},
    }


def secret_store(provider: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> Manifest:
    """A namespaced SecretStore on the cloud's store with the controller's own identity (``provider``: AWS
    ``{"aws": {"service": "SecretsManager", "region": ...}}``, GCP ``{"gcpsm": {"projectID": ...}}``; no ``auth``)."""
    return {"apiVersion": ESO_API, "kind": "SecretStore", "metadata": meta(SECRET_STORE, namespace, labels),
            "spec": {"provider": dict(provider)}}


def sssd_external_secret(key: str, target: str, namespace: str, labels: Mapping[str, str]) -> Manifest:
    """The ExternalSecret that writes Secret ``target`` (key sssd.conf) from the store's secret ``key`` (its latest
    value, whole). ``CreateOrMerge`` (ESO 2.8+): ESO creates the Secret, or writes sssd.conf into one an administrator
    made before, without making it its own, so the Secret outlives the ExternalSecret (with ``Owner`` Kubernetes would
    delete it, an adopted one too, when the ExternalSecret goes: removing ``sssdConfFrom`` must not cut the login
    pods off the directory); ``Retain``: it stays if the secret is removed from the store.

    ``pulumi up`` waits for its ``Ready`` condition (ESO sets it once the Secret is written; pulumi-kubernetes
    ``pulumi.com/waitFor``, its await tests' ``condition=...`` form), so a wrong grant, a missing secret or a key
    policy that refuses the role fails the apply here, not later as login pods waiting on an absent volume."""
    metadata = meta(target, namespace, labels)
    metadata["annotations"] = {"pulumi.com/waitFor": "condition=Ready", "pulumi.com/timeoutSeconds": "600"}
    return {
        "apiVersion": ESO_API, "kind": "ExternalSecret", "metadata": metadata,
        "spec": {
            "refreshInterval": REFRESH,
            "secretStoreRef": {"kind": "SecretStore", "name": SECRET_STORE},
            "target": {"name": target, "creationPolicy": "CreateOrMerge", "deletionPolicy": "Retain",
                       "template": {"type": "Opaque", "metadata": {"labels": dict(labels)}}},
            "data": [{"secretKey": SSSD_KEY, "remoteRef": {"key": key}}],
        },
    }
