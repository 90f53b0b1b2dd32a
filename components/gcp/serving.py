"""Each served model's read-only identity on its weights: its service account (``serve-<model>`` in its team's
namespace) under Workload Identity Federation may read the objects under the weights' prefix of the checkpoint bucket
and nothing else.

A managed folder per distinct prefix (Cloud Storage "Managed folders": IAM on a managed folder applies to the objects
under its prefix, and nested folders' grants add up, so a prefix inside a team's ``<team>/`` keeps the team's own
read-write there) with Storage Object Viewer (``roles/storage.objectViewer``: get and list objects) for the model's
principal, and Storage Bucket Viewer (bucket metadata, no object) as the checkpoint grants give it. No Cloud KMS grant:
the bucket's default key is used by Cloud Storage's service agent, not by the caller (components/gcp/security.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.gcp.security import wif_principal
from components.kubernetes.objects.serving import serving_account_name
from components.spec.inference import ServedModelSpec


class GcpServingAccess(pulumi.ComponentResource):
    """Per served model, its weights reader.

    Attributes:
        ready: each model's grant, by model name (its replicas wait for it).
    """

    ready: dict[str, tuple[pulumi.Resource, ...]]

    def __init__(self, name: str, *, models: Sequence[ServedModelSpec], project: str,
                 project_number: pulumi.Input[str], bucket: pulumi.Input[str], protect: bool,
                 cluster: pulumi.Resource, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:GcpServingAccess", name, provenance.props(), opts)
        # The principals name the project's Workload Identity pool, which exists once the cluster does.
        child = pulumi.ResourceOptions(parent=self, depends_on=[cluster])
        folders: dict[str, gcp.storage.ManagedFolder] = {}
        self.ready = {}
        for model in models:
            prefix = model.weights.prefix
            if prefix not in folders:
                # The folder holds no data of its own (deleting it deletes no object); force_destroy stays off.
                folders[prefix] = gcp.storage.ManagedFolder(
                    f"{name}-{prefix.rstrip('/').replace('/', '.')}-folder", bucket=bucket, name=prefix,
                    force_destroy=False,
                    opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect))
            principal = wif_principal(project_number, project, model.team, serving_account_name(model.name))
            read = gcp.storage.ManagedFolderIamMember(
                f"{name}-{model.name}-read", bucket=bucket, managed_folder=folders[prefix].name,
                role="roles/storage.objectViewer", member=principal, opts=child)
            meta = gcp.storage.BucketIAMMember(f"{name}-{model.name}-meta", bucket=bucket,
                                               role="roles/storage.bucketViewer", member=principal, opts=child)
            self.ready[model.name] = (read, meta)
        self.register_outputs({})
