"""Keys and identities of a GCP stack: Cloud KMS keys (etcd secrets, the checkpoint bucket, disks) with the service
agents that must use them, the node service account with the least roles GKE needs, cluster admins, and each
team's access to its own prefix of the checkpoint bucket through Workload Identity Federation for GKE.

Service agents (who encrypts and decrypts, not the caller): GKE's ``service-<number>@container-engine-robot``
for database encryption (GKE "Encrypt secrets at the application layer"), Cloud Storage's project service account
for a bucket's default key (Cloud Storage "Use customer-managed encryption keys"), and Compute Engine's
``service-<number>@compute-system`` for CMEK boot disks and PD volumes (GKE "Use customer-managed encryption keys").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from components import provenance
from components.spec.gcp import NODE_MINIMUM_ROLES

# Least-privilege node service account: GKE's own role for it (GKE "Configure node service accounts": "at a minimum,
# these node service accounts must have the Kubernetes Engine Default Node Service Account role"; six permissions:
# log entries, metric descriptors and time series, autoscaler metrics), in place of the five legacy roles
# cluster-toolkit still grants, plus image pulls. Not storage.objectViewer: workloads read data through Workload
# Identity, never through the node's account.
NODE_ROLES = NODE_MINIMUM_ROLES
# What a team's Google group needs to reach the cluster: `gcloud container clusters get-credentials`
# (container.clusters.get) and the control plane's DNS endpoint (container.clusters.connect). Kubernetes Engine
# Cluster Viewer holds exactly those, with clusters.list and the project's get/list (IAM role permissions, dump of
# 2026-08-22); inside the cluster the team's Role (RBAC, Google Groups for RBAC) decides the rest.
TEAM_CLUSTER_ROLE = "roles/container.clusterViewer"
ENCRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
# A team's access to one of gcp.storage.buckets: read lists and reads objects (Storage Object Viewer); read-write also
# creates, overwrites and deletes them (Storage Object User, what the checkpoint folders grant).
BUCKET_ACCESS = {"read": ("read", "roles/storage.objectViewer"), "read-write": ("rw", "roles/storage.objectUser")}
RECORDS_FOLDER = "acceptance"  # the acceptance gate's records (components/kubernetes/objects/acceptance.py)
# The storage check's checkpoint and records (components/kubernetes/objects/storage_check.py, STORAGE_RECORDS_PREFIX)
STORAGE_CHECK_FOLDER = f"{RECORDS_FOLDER}/storage"
# Keys rotate every 90 days (a new primary version; old versions keep decrypting).
ROTATION = "7776000s"


def kms_key_id(project: str, region: str, prefix: str, use: str) -> str:
    """The id of one of :class:`GcpKeys`' keys, known before apply (Cloud KMS ids are derived from project,
    location, key ring and key name)."""
    return f"projects/{project}/locations/{region}/keyRings/{prefix}-keys/cryptoKeys/{prefix}-{use}"


def wif_principal(project_number: pulumi.Input[str], project: str, namespace: str, account: str) -> pulumi.Output[str]:
    """The IAM principal of a Kubernetes service account under Workload Identity Federation for GKE (GKE
    "Authenticate to Google Cloud APIs from GKE workloads": principal://iam.googleapis.com/projects/<number>/
    locations/global/workloadIdentityPools/<project>.svc.id.goog/subject/ns/<namespace>/sa/<account>)."""
    return pulumi.Output.concat(
        "principal://iam.googleapis.com/projects/", project_number, "/locations/global/workloadIdentityPools/",
        project, ".svc.id.goog/subject/ns/", namespace, "/sa/", account)


class GcpServices(pulumi.ComponentResource):
    """The Google APIs the stack needs, enabled first. They stay on when the stack goes away
    (``disable_on_destroy`` off: other workloads in the project may use them).

    Attributes:
        services: the enabled APIs (every root resource of the stack waits for them).
    """

    services: list[pulumi.Resource]

    def __init__(self, name: str, *, project: str, apis: Sequence[str],
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GcpServices", name, provenance.props(), opts)
        self.services = [
            gcp.projects.Service(f"{name}-{api.split('.')[0]}", project=project, service=api, disable_on_destroy=False,
                                 disable_dependent_services=False, opts=pulumi.ResourceOptions(parent=self))
            for api in apis]
        self.register_outputs({})


class GcpKeys(pulumi.ComponentResource):
    """A key ring in the stack's region with one key per use, each usable by the service agent that needs it.

    Key rings and key versions cannot be deleted in Cloud KMS, and destroying a key loses what it encrypts: the
    keys are protected with deletion protection and always retained on delete.

    Attributes:
        secrets_key / data_key / disk_key: the keys' ids (projects/.../cryptoKeys/...).
        grants: the IAM grants to the service agents (resources that use a key wait for them).
    """

    secrets_key: pulumi.Output[str]
    data_key: pulumi.Output[str]
    disk_key: pulumi.Output[str]
    grants: list[pulumi.Resource]

    def __init__(self, name: str, *, project: str, region: str, prefix: str, project_number: pulumi.Output[str],
                 labels: Mapping[str, str], protect: bool, after: Sequence[pulumi.Resource] = (),
                 invoke_opts: Optional[pulumi.InvokeOutputOptions] = None,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GcpKeys", name, provenance.props(), opts)
        # Names are derived from the cluster name once: a rename must not replace a key (what it encrypts would be
        # lost with it).
        keep = pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=True, depends_on=list(after),
                                      ignore_changes=["name"])
        ring = gcp.kms.KeyRing(f"{name}-ring", name=f"{prefix}-keys", project=project, location=region, opts=keep)
        # Reading the Cloud Storage agent creates it if the project has none yet.
        gcs_agent = gcp.storage.get_project_service_account_output(project=project, opts=invoke_opts)
        # The GKE service agent appears some time after the API is enabled; asking for it creates it now, so the
        # key grant below never names an account that does not exist yet.
        gke_agent = gcp.projects.ServiceIdentity(f"{name}-gke-agent", project=project,
                                                 service="container.googleapis.com",
                                                 opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)))
        # An agent created this way may miss its role (Google Cloud "Service agents"): grant it, idempotently.
        gcp.projects.IAMMember(f"{name}-gke-agent-role", project=project, role="roles/container.serviceAgent",
                               member=gke_agent.member, opts=pulumi.ResourceOptions(parent=self))
        agents = {
            "secrets": gke_agent.member,
            "data": pulumi.Output.concat("serviceAccount:", gcs_agent.email_address),
            "disks": pulumi.Output.concat("serviceAccount:service-", project_number,
                                          "@compute-system.iam.gserviceaccount.com"),
        }
        keys: dict[str, pulumi.Output[str]] = {}
        self.grants = []
        for use, member in agents.items():
            key = gcp.kms.CryptoKey(f"{name}-{use}", name=f"{prefix}-{use}", key_ring=ring.id,
                                    purpose="ENCRYPT_DECRYPT", rotation_period=ROTATION, labels=dict(labels), opts=keep)
            self.grants.append(gcp.kms.CryptoKeyIAMMember(
                f"{name}-{use}-agent", crypto_key_id=key.id, role=ENCRYPTER, member=member,
                opts=pulumi.ResourceOptions(parent=self)))
            keys[use] = key.id
        self.secrets_key, self.data_key, self.disk_key = keys["secrets"], keys["data"], keys["disks"]
        self.register_outputs({"secretsKey": self.secrets_key, "dataKey": self.data_key, "diskKey": self.disk_key})


class GcpIdentities(pulumi.ComponentResource):
    """The node service account and its roles, cluster-admin for the stack's admins, and each team group's way to
    the cluster (Kubernetes Engine Cluster Viewer: get-credentials and the DNS endpoint).

    Attributes:
        node_service_account: the nodes' account email.
    """

    node_service_account: pulumi.Output[str]

    def __init__(self, name: str, *, project: str, prefix: str, admins: Sequence[str],
                 team_groups: Mapping[str, str] | None = None,
                 after: Sequence[pulumi.Resource] = (), opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GcpIdentities", name, provenance.props(), opts)
        team_groups = team_groups or {}
        child = pulumi.ResourceOptions(parent=self, depends_on=list(after))
        account = gcp.serviceaccount.Account(
            f"{name}-nodes", account_id=f"{prefix[:23]}-nodes", project=project,
            display_name=f"GKE nodes of {prefix}", description="Node service account: logs, metrics, image pulls only",
            opts=child)
        member = pulumi.Output.concat("serviceAccount:", account.email)
        for role in NODE_ROLES:
            gcp.projects.IAMMember(f"{name}-nodes-{role.split('/')[1]}", project=project, role=role, member=member,
                                   opts=child)
        for i, admin in enumerate(admins):
            gcp.projects.IAMMember(f"{name}-admin-{i}", project=project, role="roles/container.admin", member=admin,
                                   opts=child)
        for team, group in sorted(team_groups.items()):
            gcp.projects.IAMMember(f"{name}-team-{team}", project=project, role=TEAM_CLUSTER_ROLE,
                                   member=f"group:{group}", opts=child)
        self.node_service_account = account.email
        self.register_outputs({"nodeServiceAccount": account.email})


class GcpDataAccess(pulumi.ComponentResource):
    """Each team's ``checkpoints`` service account may read and write ``<team>/`` of the bucket and nothing else
    (a managed folder per team with ``roles/storage.objectUser`` for that principal; Cloud Storage "Managed
    folders": IAM on a managed folder applies to the objects under its prefix); no identity reads every team's
    prefix. Bucket metadata (``roles/storage.bucketViewer``, no object access) lets GCS FUSE mount. Each
    of ``buckets`` (gcp.storage.buckets) is granted whole to the teams its access names, read or read-write.
    With ``recorders``, each may create objects under ``acceptance/``; with ``storage_check`` (namespace, account,
    given only with recorders), that account may also read and delete them under ``acceptance/storage/``.
    """

    def __init__(self, name: str, *, project: str, project_number: pulumi.Output[str], bucket: pulumi.Input[str],
                 teams: Sequence[str], team_account: str, protect: bool,
                 cluster: pulumi.Resource,
                 buckets: Mapping[str, tuple[pulumi.Input[str], Mapping[str, str]]] | None = None,
                 recorders: Sequence[tuple[str, str]] = (),
                 storage_check: tuple[str, str] | None = None,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:storage:GcpDataAccess", name, provenance.props(), opts)
        # The principals name the project's Workload Identity pool (<project>.svc.id.goog), which exists once a cluster
        # with Workload Identity does: on a fresh project a binding made before it fails ("Identity Pool does not
        # exist"). Every binding waits for the cluster (a component's depends_on would not reach them).
        child = pulumi.ResourceOptions(parent=self, depends_on=[cluster])
        for team in teams:
            principal = wif_principal(project_number, project, team, team_account)
            # The folder itself holds no data (deleting it deletes no object); force_destroy stays off.
            folder = gcp.storage.ManagedFolder(
                f"{name}-{team}-folder", bucket=bucket, name=f"{team}/", force_destroy=False,
                opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect))
            gcp.storage.ManagedFolderIamMember(
                f"{name}-{team}-rw", bucket=bucket, managed_folder=folder.name, role="roles/storage.objectUser",
                member=principal, opts=child)  # depends on the folder through its name, and on the cluster
            gcp.storage.BucketIAMMember(f"{name}-{team}-meta", bucket=bucket, role="roles/storage.bucketViewer",
                                        member=principal, opts=child)
        self.recorder: list[pulumi.Resource] = []
        self.storage_check: pulumi.Resource | None = None
        if recorders:
            # The acceptance gate's per-node pods (and each GPU node's check) create their records under acceptance/
            # and nothing else: Storage Object Creator (create only: no read, list, overwrite or delete) on a managed
            # folder of that prefix. The first keeps its resource name (acceptance-recorder).
            folder = gcp.storage.ManagedFolder(
                f"{name}-acceptance-folder", bucket=bucket, name=f"{RECORDS_FOLDER}/", force_destroy=False,
                opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect))
            for i, (namespace, account) in enumerate(recorders):
                suffix = "acceptance-recorder" if i == 0 else f"{namespace}-recorder"
                self.recorder.append(gcp.storage.ManagedFolderIamMember(
                    f"{name}-{suffix}", bucket=bucket, managed_folder=folder.name,
                    role="roles/storage.objectCreator",
                    member=wif_principal(project_number, project, namespace, account), opts=child))
            if storage_check is not None:
                # The storage check (namespace, account) streams a checkpoint to acceptance/storage/, reads it back and
                # deletes it: Storage Object User on a managed folder of that prefix, nested in the records' folder
                # (Cloud Storage "Managed folders": nested folders' grants add up, so the recorders may create there
                # too, and this grant reaches nothing above it). No Cloud KMS grant: the bucket's default key is used
                # by Cloud Storage's service agent (GcpKeys), not by the caller (Cloud Storage "Use customer-managed
                # encryption keys").
                check_folder = gcp.storage.ManagedFolder(
                    f"{name}-storage-check-folder", bucket=bucket, name=f"{STORAGE_CHECK_FOLDER}/",
                    force_destroy=False,
                    opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect,
                                                depends_on=[folder]))
                self.storage_check = gcp.storage.ManagedFolderIamMember(
                    f"{name}-storage-check-rw", bucket=bucket, managed_folder=check_folder.name,
                    role="roles/storage.objectUser", member=wif_principal(project_number, project, *storage_check),
                    opts=child)
        # gcp.storage.buckets: each team's access to the whole bucket, as the spec gives it, and the bucket metadata
        # GCS FUSE reads when it mounts. Named <purpose>.<team>: the dot, in neither name, keeps bucket data's grant
        # to team eng apart from the checkpoint grants of a team data-eng.
        for purpose, (other, access) in sorted((buckets or {}).items()):
            for team, mode in sorted(access.items()):
                principal = wif_principal(project_number, project, team, team_account)
                gcp.storage.BucketIAMMember(
                    f"{name}-{purpose}.{team}-{BUCKET_ACCESS[mode][0]}", bucket=other, role=BUCKET_ACCESS[mode][1],
                    member=principal, opts=child)
                gcp.storage.BucketIAMMember(f"{name}-{purpose}.{team}-meta", bucket=other,
                                            role="roles/storage.bucketViewer", member=principal, opts=child)
        self.register_outputs({})


class GcpSecretReader(pulumi.ComponentResource):
    """One Kubernetes service account may read one Secret Manager secret: Secret Manager Secret Accessor on that secret
    (Secret Manager "Access control with IAM": roles/secretmanager.secretAccessor, "access the payload of secrets") for
    its Workload Identity principal, once the cluster (and so the project's workload identity pool) exists. The secret
    is not the stack's: it must exist first (the grant is on it).

    Attributes:
        grant: the IAM member (what the reader's pods wait for).
    """

    def __init__(self, name: str, *, project: str, project_number: pulumi.Output[str], secret_id: str, namespace: str,
                 account: str, after: Sequence[pulumi.Resource], opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:control-plane:GcpSecretReader", name, provenance.props(), opts)
        self.grant = gcp.secretmanager.SecretIamMember(
            f"{name}-accessor", project=project, secret_id=secret_id, role="roles/secretmanager.secretAccessor",
            member=wif_principal(project_number, project, namespace, account),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)))
        self.register_outputs({})
