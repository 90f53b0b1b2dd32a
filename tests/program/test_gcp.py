"""The GCP planes as a real ``pulumi up`` meets them: what prod-gcp and dev-gcp register, and the program's answer
to the GKE choices that matter (GPU networks per GPUDirect flavour, reservations and placement, flex-start with
Kueue, CMEK and its service agents, Workload Identity data access, who deploys from where)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.graph.model import GraphResource, ResourceGraph
from components.catalog.gcp_machines import GKE_MANIFESTS_FILE, gpudirect_manifests, load_gcp_catalog, rxdm_image
from components.kubernetes.objects import NODE_GROUP_LABEL, PROVISIONING_CHECK
from tests.conftest import GCP_STACKS, offline_run, raw_stack_config, run_spec, stack
from tests.program.test_job_path import _cel

CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def gcp_spec(name: str = "prod-gcp") -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config(name)["gpu-cluster:spec"])


def pool(graph: ResourceGraph, name: str) -> GraphResource:
    return next(r for r in graph.of_type(POOL) if r.inputs["name"] == name)


def one(graph: ResourceGraph, type_: str) -> GraphResource:
    (res,) = graph.of_type(type_)
    return res


def checkpoint_bucket(graph: ResourceGraph) -> GraphResource:
    (bucket,) = [r for r in graph.of_type("gcp:storage/bucket:Bucket") if r.name == "storage-checkpoints"]
    return bucket


def test_gcp_stacks_are_gcp() -> None:
    assert GCP_STACKS == ["dev-gcp", "dev-gcp-slurm", "prod-gcp"]
    assert all(stack(s).spec.cloud == "gcp" for s in GCP_STACKS)


# --- prod-gcp: the done-when of issue 13 -------------------------------------------------------------


def test_prod_gcp_has_16_a3_mega_nodes_with_8_gpu_networks_wired_to_the_pool() -> None:
    graph = offline_run("prod-gcp").graph
    h100 = pool(graph, "h100")
    cfg = h100.inputs["nodeConfig"]
    assert cfg["machineType"] == "a3-megagpu-8g" and h100.inputs["nodeCount"] == 16
    assert cfg["guestAccelerators"] == [{"type": "nvidia-h100-mega-80gb", "count": 8,
                                         "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]
    wired = h100.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert len(wired) == load_gcp_catalog()["a3-megagpu-8g"].gpu_nic_count == 8
    # each entry names a GPU VPC and a subnet of that VPC that the stack creates, once
    vpcs = {r.inputs["name"]: r for r in graph.of_type(NETWORK)}
    subnets = {r.inputs["name"]: r for r in graph.of_type(SUBNET)}
    assert len({(w["network"], w["subnetwork"]) for w in wired}) == 8
    for w in wired:
        assert vpcs[w["network"]].inputs["mtu"] == 8244
        assert subnets[w["subnetwork"]].inputs["network"] == f"projects/acme-ml-prod/global/networks/{w['network']}"
    # and the pool waits for them (the names are outputs of the networks)
    assert sum(1 for d in h100.dependencies if "compute/subnetwork" in d) == 8


def test_prod_gcp_pool_consumes_the_reservation_without_forced_compact_placement() -> None:
    h100 = pool(offline_run("prod-gcp").graph, "h100")
    assert h100.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/acme-ml-prod/reservations/a3mega-prod-16"]}
    assert "placementPolicy" not in h100.inputs
    assert h100.inputs["nodeLocations"] == ["us-central1-a"]
    # a reserved pool upgrades without a surge VM (the reservation has none spare)
    assert h100.inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


def test_prod_gcp_node_pools_are_hardened() -> None:
    graph = offline_run("prod-gcp").graph
    account = one(graph, "gcp:serviceaccount/account:Account")
    for p in graph.of_type(POOL):
        cfg = p.inputs["nodeConfig"]
        assert cfg["serviceAccount"] == account.inputs["accountId"] + "@acme-ml-prod.iam.gserviceaccount.com"
        assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert cfg["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
        assert cfg["bootDiskKmsKey"].endswith("/cryptoKeys/prod-train-gke-disks")
        assert cfg["labels"][NODE_GROUP_LABEL] == p.inputs["name"]
        assert p.inputs["networkConfig"]["enablePrivateNodes"] is True
        assert p.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}
    gpu = pool(graph, "h100").inputs["nodeConfig"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in gpu["taints"]
    # GKE's own GPU stack: its device plugin serves the node (the label would turn it off, and with it the managed
    # driver's install)
    assert "gke-no-default-nvidia-gpu-device-plugin" not in gpu["labels"]
    assert gpu["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 16}
    node_account = f"{account.inputs['accountId']}@acme-ml-prod.iam.gserviceaccount.com"
    roles = {r.inputs["role"] for r in graph.of_type("gcp:projects/iAMMember:IAMMember")
             if r.inputs["member"] == "serviceAccount:" + node_account}
    # GKE's predefined role for node service accounts (logging, monitoring, metadata), not the legacy set
    assert roles == {"roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader"}


def test_prod_gcp_gpu_networks_are_exposed_to_pods_with_the_tcpxo_agents() -> None:
    graph = offline_run("prod-gcp").graph
    params = {r.inputs["metadata"]["name"]: r.inputs["spec"]
              for r in graph.of_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet")}
    nets = {r.inputs["metadata"]["name"]: r.inputs["spec"]
            for r in graph.of_type("kubernetes:networking.gke.io/v1:Network")}
    assert sorted(params) == sorted(nets) == [f"vpc{i}" for i in range(1, 9)]
    wired = pool(graph, "h100").inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [(p["vpc"], p["vpcSubnet"]) for _, p in sorted(params.items())] == \
        [(w["network"], w["subnetwork"]) for w in wired]
    assert all(p["deviceMode"] == "NetDevice" for p in params.values())
    assert all(n == {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                        "name": name}} for name, n in nets.items())
    files = {r.name: r.inputs["file"] for r in graph.of_type("kubernetes:yaml/v2:ConfigFile")}
    tcpxo = {f"cloud-objects-{m.name}": m.url for m in gpudirect_manifests()["TCPXO"]}
    assert tcpxo.items() <= files.items()
    assert all("/container-engine-accelerators/" in u and len(u.split("/")[5]) == 40 for u in tcpxo.values())


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def test_gpudirect_pins_name_one_commit_and_the_images_their_notes_read() -> None:
    """Every agent is pinned at the catalog's one commit of container-engine-accelerators, and the note beside it
    names the image tag (or digest) recorded: a bump of the pin that leaves an old version in its note fails."""
    commit = yaml.safe_load(GKE_MANIFESTS_FILE.read_text())["meta"]["commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    pins = [m for items in gpudirect_manifests().values() for m in items]
    assert {m.url.split("/")[5] for m in pins} == {commit}
    for m in pins:
        tag = m.image.split("@sha256:")[1][:8] if "@sha256:" in m.image else m.image.rsplit(":", 1)[1]
        assert tag in m.source, (m.name, tag)
        assert m.rxdm_image is None or m.rxdm_image.rsplit(":", 1)[1] in m.source, m.name
    # The RxDM sidecar comes from the same GPUDirect family as the plugin it matches (TCPX's is not TCPXO's).
    assert rxdm_image("TCPXO") == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
    assert rxdm_image("TCPX") == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12"
    assert rxdm_image("RDMA") is None
    installers = {f: next(m for m in ms if m.rxdm_image) for f, ms in gpudirect_manifests().items() if f != "RDMA"}
    assert all(m.image.split("/")[2] == str(m.rxdm_image).split("/")[2] for m in installers.values())
    assert installers["TCPXO"].image.endswith("nccl-plugin-gpudirecttcpx-dev:v1.0.15")
    (gib,) = gpudirect_manifests()["RDMA"]
    assert gib.image == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    assert set(gib.accelerators) == {"nvidia-h200-141gb", "nvidia-b200"}


def test_tcpxo_example_runs_the_rxdm_sidecar_the_catalog_pins() -> None:
    """The example's tcpxo-daemon is the RxDM the catalog pairs with the pinned plugin: they cannot drift apart."""
    doc = yaml.safe_load((EXAMPLES / "prod-gcp" / "train-multinode.yaml").read_text())
    pod = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    sidecars = [c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == "tcpxo-daemon"]
    assert [c["image"] for c in sidecars] == [rxdm_image("TCPXO")]
    assert "--num_nics" not in " ".join(sidecars[0]["args"])  # retired (gpudirect-tcpxo/README.md, Nov 19, 2025)


def test_prod_gcp_cluster_is_private_encrypted_observed_and_reached_by_the_deployer() -> None:
    graph = offline_run("prod-gcp").graph
    c = one(graph, CLUSTER).inputs
    assert c["privateClusterConfig"]["enablePrivateNodes"] is True
    assert c["privateClusterConfig"]["enablePrivateEndpoint"] is True
    # the deployer comes through the IAM-authorized DNS endpoint: the IP endpoint admits no network beyond the VPC
    assert c["masterAuthorizedNetworksConfig"]["cidrBlocks"] == []
    assert c["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    assert c["privateClusterConfig"]["masterGlobalAccessConfig"] == {"enabled": False}
    assert c["workloadIdentityConfig"] == {"workloadPool": "acme-ml-prod.svc.id.goog"}
    assert c["datapathProvider"] == "ADVANCED_DATAPATH" and c["enableMultiNetworking"] is True
    assert c["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": "projects/acme-ml-prod/locations/us-central1/"
                                       "keyRings/prod-train-gke-keys/cryptoKeys/prod-train-gke-secrets"}
    assert "DCGM" in c["monitoringConfig"]["enableComponents"]
    assert c["monitoringConfig"]["managedPrometheus"] == {"enabled": True}
    assert {"SYSTEM_COMPONENTS", "WORKLOADS", "APISERVER"} <= set(c["loggingConfig"]["enableComponents"])
    assert c["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True, "disableMultiNic": True}
    assert c["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert c["removeDefaultNodePool"] is True and c["deletionProtection"] is True
    assert c["costManagementConfig"] == {"enabled": True}
    # the provider impersonates the deployer, and so does the kubeconfig every Kubernetes object goes through
    (provider,) = [p for p in graph.of_type("pulumi:providers:gcp") if p.name == "gcp"]
    assert provider.inputs["impersonateServiceAccount"] == "pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com"
    assert json.loads(provider.inputs["defaultLabels"])["cost-center"] == "cc-4100"
    kubeconfig = json.loads(offline_run("prod-gcp").outputs["kubeconfig"])
    (cluster,) = kubeconfig["clusters"]
    assert cluster["cluster"] == {"server": "https://gke-" + cluster["cluster"]["server"].split("gke-", 1)[1]}
    assert cluster["cluster"]["server"].endswith(".us-central1.gke.goog")  # the DNS endpoint, no CA data
    assert offline_run("prod-gcp").outputs["kubeconfigCommand"].endswith(" --dns-endpoint")
    (user,) = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert user["user"]["exec"]["env"] == [{"name": "CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT",
                                            "value": "pulumi-deployer@acme-ml-prod.iam.gserviceaccount.com"}]


def test_kubernetes_objects_wait_for_the_cluster_and_system_pools_not_the_reservation() -> None:
    graph = offline_run("prod-gcp").graph
    (provider,) = [p for p in graph.of_type("pulumi:providers:kubernetes") if p.name == "kubernetes"]
    deps = set(provider.dependencies)
    assert one(graph, CLUSTER).urn in deps
    assert pool(graph, "system").urn in deps and pool(graph, "h100").urn not in deps


def test_the_cluster_waits_for_its_key_grants_and_the_apis() -> None:
    graph = offline_run("prod-gcp").graph
    c = one(graph, CLUSTER)
    grants = {r.urn for r in graph.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")}
    apis = {r.urn for r in graph.of_type("gcp:projects/service:Service")}
    assert grants <= set(c.dependencies) and apis <= set(c.dependencies)
    members = {r.name: r.inputs["member"] for r in graph.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")}
    agent = "serviceAccount:service-123456789012@"
    assert members["keys-secrets-agent"] == agent + "container-engine-robot.iam.gserviceaccount.com"
    assert members["keys-disks-agent"] == agent + "compute-system.iam.gserviceaccount.com"
    assert members["keys-data-agent"] == agent + "gs-project-accounts.iam.gserviceaccount.com"
    buckets = graph.of_type("gcp:storage/bucket:Bucket")
    assert len(buckets) == 2 and all(grants <= set(b.dependencies) for b in buckets)  # checkpoints and data
    for r in graph.of_type("gcp:projects/service:Service"):
        assert r.inputs["disableOnDestroy"] is False
    assert {r.inputs["service"] for r in graph.of_type("gcp:projects/service:Service")} >= {
        "container.googleapis.com", "lustre.googleapis.com", "servicenetworking.googleapis.com",
        "billingbudgets.googleapis.com"}


def test_prod_gcp_storage_managed_lustre_and_bucket() -> None:
    graph = offline_run("prod-gcp").graph
    lustre = one(graph, "gcp:lustre/instance:Instance")
    assert lustre.inputs["capacityGib"] == "18000" and lustre.inputs["perUnitStorageThroughput"] == "500"
    assert lustre.inputs["location"] == "us-central1-a" and lustre.inputs["gkeSupportEnabled"] is False
    connection = one(graph, "gcp:servicenetworking/connection:Connection")
    assert connection.urn in lustre.dependencies
    (rule,) = [r for r in graph.of_type(FIREWALL) if r.name == "network-lustre"]
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["988"]}]
    bucket = checkpoint_bucket(graph).inputs
    assert bucket["publicAccessPrevention"] == "enforced" and bucket["uniformBucketLevelAccess"] is True
    assert bucket["versioning"] == {"enabled": True} and bucket["forceDestroy"] is False
    assert bucket["softDeletePolicy"] == {"retentionDurationSeconds": 7 * 86400}
    assert bucket["encryption"]["defaultKmsKeyName"].endswith("/cryptoKeys/prod-train-gke-data")
    delete = [r for r in bucket["lifecycleRules"] if r["action"]["type"] == "Delete"]
    # Live objects never expire but the acceptance gate's records, after their retention (issue 27).
    assert delete == [{"action": {"type": "Delete"}, "condition": {"age": 730, "matchesPrefixes": ["acceptance/"]}},
                      {"action": {"type": "Delete"},
                       "condition": {"daysSinceNoncurrentTime": 30, "withState": "ARCHIVED"}}]


@pytest.mark.parametrize("stack_name", GCP_STACKS)
def test_stateful_gcp_resources_are_protected_and_retained_with_deletion_protection(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    protect = stack(stack_name).spec.deletion_protection
    stateful = [r for r in graph.resources if r.type in (
        "gcp:storage/bucket:Bucket", "gcp:lustre/instance:Instance", CLUSTER,
        "gcp:storage/managedFolder:ManagedFolder")]
    assert stateful
    for r in stateful:
        assert (r.protect, r.retain_on_delete) == (protect, protect), r.name
    # Cloud KMS keys can never be deleted and destroying one loses what it encrypts: always retained
    for r in graph.of_type("gcp:kms/cryptoKey:CryptoKey") + graph.of_type("gcp:kms/keyRing:KeyRing"):
        assert r.retain_on_delete is True and r.protect == protect, r.name


def test_teams_reach_only_their_prefix_through_workload_identity() -> None:
    graph = offline_run("prod-gcp").graph
    folders = {r.name: r.inputs["name"] for r in graph.of_type("gcp:storage/managedFolder:ManagedFolder")}
    # One per team, the acceptance gate's records folder (written only by its recorder,
    # tests/program/test_acceptance.py) and the served model's weights (read only by its replicas, tests/inference).
    assert sorted(folders.values()) == ["acceptance/", "applied/", "models/llama-3.1-8b-instruct/", "pretraining/",
                                        "research/"]
    members = {r.name: r.inputs for r in graph.of_type("gcp:storage/managedFolderIamMember:ManagedFolderIamMember")}
    for team in ("applied", "pretraining", "research"):
        m = members[f"data-access-{team}-rw"]
        assert m["role"] == "roles/storage.objectUser"
        assert m["member"] == ("principal://iam.googleapis.com/projects/123456789012/locations/global/"
                               f"workloadIdentityPools/acme-ml-prod.svc.id.goog/subject/ns/{team}/sa/checkpoints")
    checkpoints = checkpoint_bucket(graph).inputs["name"]
    bucket_roles = {(r.inputs["role"], r.inputs["member"].rsplit("/", 3)[-3]) for r in
                    graph.of_type("gcp:storage/bucketIAMMember:BucketIAMMember") if r.inputs["bucket"] == checkpoints}
    # bucket-wide: teams get bucket metadata, no objects; and no identity reads every folder (the platform reader
    # kube-system/checkpoint-reader had no consumer and was removed, issue 33)
    assert not any(role in ("roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.objectViewer")
                   for role, _ in bucket_roles), bucket_roles
    assert {ns for _, ns in bucket_roles} == {"applied", "pretraining", "research"}
    pvs = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type("kubernetes:core/v1:PersistentVolume")}
    assert pvs["checkpoints-research"]["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert "only-dir=research" in pvs["checkpoints-research"]["mountOptions"]
    assert pvs["checkpoints-research"]["claimRef"] == {"namespace": "research", "name": "checkpoints"}


BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
DATA = "acme-ml-prod-prod-train-gke-data"
CHECKPOINT_URN = "urn:pulumi:prod-gcp::gpu-cluster::gpu-cluster:storage:GcpStorage$gcp:storage/bucket:Bucket::"


def test_a_data_bucket_is_built_as_the_checkpoint_bucket_is_and_protected_in_prod() -> None:
    """gcp.storage.buckets: <project>-<cluster>-<name> with the checkpoint bucket's protections (CMEK with the stack's
    data key, uniform access, public access prevention, versioning, soft delete, no force destroy), protected and
    retained in prod and its name ignored by updates; the checkpoint bucket keeps its resource name and its name."""
    graph = offline_run("prod-gcp").graph
    buckets = {r.name: r for r in graph.of_type(BUCKET)}
    assert set(buckets) == {"storage-checkpoints", "storage-bucket-data"}
    checkpoints, data = buckets["storage-checkpoints"], buckets["storage-bucket-data"]
    assert checkpoints.urn == CHECKPOINT_URN + "storage-checkpoints"
    assert checkpoints.inputs["name"] == "acme-ml-prod-prod-train-gke-checkpoints" and data.inputs["name"] == DATA
    for key in ("project", "location", "storageClass", "uniformBucketLevelAccess", "publicAccessPrevention",
                "versioning", "softDeletePolicy", "encryption", "forceDestroy", "labels"):
        assert data.inputs[key] == checkpoints.inputs[key], key
    # The same lifecycle, but the acceptance records' expiry, which only the checkpoint bucket holds.
    assert data.inputs["lifecycleRules"] == [r for r in checkpoints.inputs["lifecycleRules"]
                                             if r["condition"].get("matchesPrefixes") != ["acceptance/"]]
    assert data.inputs["encryption"]["defaultKmsKeyName"].endswith("/cryptoKeys/prod-train-gke-data")
    assert data.inputs["publicAccessPrevention"] == "enforced" and data.inputs["uniformBucketLevelAccess"] is True
    assert data.inputs["versioning"] == {"enabled": True} and data.inputs["forceDestroy"] is False
    for bucket in (checkpoints, data):
        assert (bucket.protect, bucket.retain_on_delete, bucket.ignore_changes) == (True, True, ["name"]), bucket.name


def test_a_hierarchical_data_bucket_in_dev_and_adding_one_moves_no_other() -> None:
    """Outside prod a bucket follows deletionProtection (off in dev-gcp); a hierarchical bucket has no versioning and
    no noncurrent-version rule; adding buckets changes neither the checkpoint bucket nor another bucket."""
    spec = gcp_spec("dev-gcp")
    spec["gcp"]["storage"]["buckets"] = [{"name": "eval", "access": {"research": "read-write"},
                                          "hierarchicalNamespace": True, "softDeleteDays": 14}]
    first = {r.name: r for r in run_spec(spec, "dev-gcp").graph.of_type(BUCKET)}
    assert set(first) == {"storage-checkpoints", "storage-bucket-eval"}
    assert first["storage-checkpoints"].inputs == checkpoint_bucket(offline_run("dev-gcp").graph).inputs
    evals = first["storage-bucket-eval"]
    assert evals.inputs["name"] == "acme-ml-dev-dev-gpu-gke-eval"
    assert (evals.protect, evals.retain_on_delete, evals.ignore_changes) == (False, False, ["name"])
    assert evals.inputs["versioning"] == {"enabled": False}
    assert evals.inputs["hierarchicalNamespace"] == {"enabled": True}
    assert evals.inputs["softDeletePolicy"] == {"retentionDurationSeconds": 14 * 86400}
    assert [r["action"]["type"] for r in evals.inputs["lifecycleRules"]] == ["AbortIncompleteMultipartUpload"]
    assert evals.inputs["encryption"]["defaultKmsKeyName"].endswith("/cryptoKeys/dev-gpu-gke-data")
    spec["gcp"]["storage"]["buckets"].insert(0, {"name": "data", "access": {"research": "read"},
                                                 "noncurrentVersionRetentionDays": 90})
    second = {r.name: r for r in run_spec(spec, "dev-gcp").graph.of_type(BUCKET)}
    assert second["storage-bucket-eval"].urn == evals.urn and second["storage-bucket-eval"].inputs == evals.inputs
    assert second["storage-checkpoints"].inputs == first["storage-checkpoints"].inputs
    (delete,) = [r for r in second["storage-bucket-data"].inputs["lifecycleRules"] if r["action"]["type"] == "Delete"]
    assert delete["condition"] == {"daysSinceNoncurrentTime": 90, "withState": "ARCHIVED"}


def test_each_team_gets_the_access_the_bucket_names_and_no_more() -> None:
    """read: Storage Object Viewer; read-write: Storage Object User; both with bucket metadata for GCS FUSE, to the
    team's checkpoints service account (Workload Identity), after the cluster; nobody else is granted the bucket."""
    graph = offline_run("prod-gcp").graph
    (cluster,) = graph.of_type(CLUSTER)
    grants = [r for r in graph.of_type(BUCKET_IAM) if r.inputs["bucket"] == DATA]
    principal = ("principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/"
                 "acme-ml-prod.svc.id.goog/subject/ns/{}/sa/checkpoints")
    assert sorted((r.name, r.inputs["role"], r.inputs["member"]) for r in grants) == [
        ("data-access-data.applied-meta", "roles/storage.bucketViewer", principal.format("applied")),
        ("data-access-data.applied-read", "roles/storage.objectViewer", principal.format("applied")),
        ("data-access-data.pretraining-meta", "roles/storage.bucketViewer", principal.format("pretraining")),
        ("data-access-data.pretraining-rw", "roles/storage.objectUser", principal.format("pretraining")),
        ("data-access-data.research-meta", "roles/storage.bucketViewer", principal.format("research")),
        ("data-access-data.research-read", "roles/storage.objectViewer", principal.format("research")),
    ]
    assert all(cluster.urn in r.dependencies for r in grants)
    spec = gcp_spec()
    spec["gcp"]["storage"]["buckets"][0]["access"] = {"research": "read"}
    only = [r.inputs["member"] for r in run_spec(spec, "prod-gcp").graph.of_type(BUCKET_IAM)
            if r.inputs["bucket"] == DATA]
    assert only == [principal.format("research")] * 2


def test_each_team_with_access_mounts_the_bucket_read_only_where_it_reads() -> None:
    """The claim `data` in each namespace the access names, bound to a GCS FUSE volume of the whole bucket:
    ReadOnlyMany and csi.readOnly for read, ReadWriteMany for read-write; no claim where a team has no access."""
    spec = gcp_spec()
    spec["gcp"]["storage"]["buckets"][0]["access"] = {"pretraining": "read-write", "research": "read"}
    graph = run_spec(spec, "prod-gcp").graph
    pvs = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type("kubernetes:core/v1:PersistentVolume")
           if (r.inputs["spec"].get("csi") or {}).get("volumeHandle") == DATA}
    claims = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["spec"]
              for r in graph.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert set(pvs) == {"data.pretraining", "data.research"}
    assert ("applied", "data") not in claims
    for team, read_only in (("research", True), ("pretraining", False)):
        pv, pvc = pvs[f"data.{team}"], claims[(team, "data")]
        modes = ["ReadOnlyMany"] if read_only else ["ReadWriteMany"]
        assert pv["csi"]["driver"] == "gcsfuse.csi.storage.gke.io" and pv["csi"]["readOnly"] is read_only
        assert pv["accessModes"] == pvc["accessModes"] == modes
        assert pv["claimRef"] == {"namespace": team, "name": "data"} and pvc["volumeName"] == f"data.{team}"
        assert pv["storageClassName"] == pvc["storageClassName"] == "gcs-fuse-data"
        assert pv["persistentVolumeReclaimPolicy"] == "Retain"
        assert not any(o.startswith("only-dir") for o in pv["mountOptions"])  # the whole bucket
        assert "skipCSIBucketAccessCheck" not in pv["csi"]["volumeAttributes"]  # the team may list the bucket


def test_the_preview_says_who_reaches_each_bucket_and_how(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", "prod-gcp"]) == 0
    storage = capsys.readouterr().out.split("== storage", 1)[1].split("\n== ", 1)[0]
    lines = [line.strip() for line in storage.splitlines()]
    assert (f"bucket {DATA}: uniform access, public access enforced, versioning on, soft delete 7 d, CMEK, "
            "protected") in lines
    assert (f"bucket {DATA} access (Workload Identity, ns/<team>/sa/checkpoints, the whole bucket): applied read "
            "(claim data, read-only), pretraining read-write (claim data), research read (claim data, read-only)") \
        in lines
    # the checkpoint bucket's access stays per managed folder
    assert not any(line.startswith("bucket acme-ml-prod-prod-train-gke-checkpoints access") for line in lines)


def test_gcp_budgets_only_on_labels_something_billed_carries() -> None:
    """prod-gcp's teams share its pools (billed under the stack's labels): only the cluster budget can see spend; the
    teams are watched in the cluster. A pool dedicated to a team (nodePools[].team) gets the team's labels and
    budget."""
    graph = offline_run("prod-gcp").graph
    budgets = {r.name: r.inputs for r in graph.of_type("gcp:billing/budget:Budget")}
    assert set(budgets) == {"cost-cluster"}
    cluster = budgets["cost-cluster"]
    assert cluster["billingAccount"] == "01A2B3-C4D5E6-F7A8B9"
    assert cluster["budgetFilter"]["labels"] == {"cluster": "prod-train-gke"}
    assert [t.get("spendBasis", "CURRENT_SPEND") for t in cluster["thresholdRules"]][-1] == "FORECASTED_SPEND"
    from tests.conftest import raw_stack_config, run_spec
    from tests.inference.specs import without_serving

    spec = without_serving(raw_stack_config("prod-gcp")["gpu-cluster:spec"])  # applied's served model goes with it
    spec["gcp"]["nodePools"][1]["team"] = "pretraining"
    for team in spec["teams"]:
        team["quotas"] = [q for q in team["quotas"] if team["name"] == "pretraining"]
        if not team["quotas"]:
            team["quotas"] = []
    spec["teams"] = [t for t in spec["teams"] if t["name"] == "pretraining"]
    spec["gcp"]["storage"]["buckets"][0]["access"] = {"pretraining": "read-write"}
    spec["teams"][0]["quotas"][0]["lendingLimitGpus"] = 0
    spec["teams"][0]["quotas"][0].pop("borrowingLimitGpus", None)
    spec["platform"]["monitoring"]["alerts"]["routes"] = [{"receiver": "platform-pager"}]
    dedicated = run_spec(spec).graph
    team_budget = next(r.inputs for r in dedicated.of_type("gcp:billing/budget:Budget")
                       if r.name == "cost-team-pretraining")
    assert team_budget["budgetFilter"]["labels"] == {"team": "pretraining"}
    h100 = next(r.inputs for r in dedicated.of_type("gcp:container/nodePool:NodePool")
                if r.name == "nodepool-h100-pool")
    assert h100["nodeConfig"]["resourceLabels"]["team"] == "pretraining"


def test_dev_gcp_is_a_small_spot_pool_without_gpu_networks() -> None:
    graph = offline_run("dev-gcp").graph
    l4 = pool(graph, "l4")
    assert l4.inputs["nodeConfig"]["spot"] is True
    assert l4.inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
    assert "additionalNodeNetworkConfigs" not in l4.inputs["networkConfig"]
    c = one(graph, CLUSTER).inputs
    assert c["location"] == "us-central1-a" and "enableMultiNetworking" not in c
    assert c["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert c["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [{"cidrBlock": "203.0.113.0/24",
                                                                  "displayName": "authorized-0"}]
    assert graph.of_type("gcp:billing/budget:Budget") == []  # no billing account in the stack


# --- variants ------------------------------------------------------------------------------------


def test_flex_start_pool_is_queued_and_admitted_through_a_provisioning_request() -> None:
    spec = gcp_spec()
    h100 = spec["gcp"]["nodePools"][1]
    h100.update(minSize=0, desiredSize=0, capacity={"type": "flex-start", "maxRunHours": 72})
    graph = run_spec(spec, "prod-gcp").graph
    p = pool(graph, "h100").inputs
    assert p["queuedProvisioning"] == {"enabled": True}
    assert p["nodeConfig"]["flexStart"] is True and p["nodeConfig"]["maxRunDuration"] == f"{72 * 3600}s"
    assert p["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert p["management"]["autoRepair"] is False and "placementPolicy" not in p
    kinds = {r.inputs["kind"]: r.inputs for r in graph.resources if r.type.startswith(KUEUE)}
    assert kinds["ProvisioningRequestConfig"]["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert kinds["AdmissionCheck"]["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    for cq in (r.inputs for r in graph.of_type(KUEUE + "ClusterQueue")):
        assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": PROVISIONING_CHECK,
                                                                               "onFlavors": ["h100"]}]}
    (flavor,) = [r.inputs for r in graph.of_type(KUEUE + "ResourceFlavor") if r.inputs["metadata"]["name"] == "h100"]
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in \
        flavor["spec"]["tolerations"]  # the teams' cpu flavor is not queued: no check, no toleration (above)


def test_on_demand_gpudirect_pool_gets_compact_placement() -> None:
    spec = gcp_spec()
    spec["gcp"]["nodePools"][1]["capacity"] = {"type": "spot"}
    p = pool(run_spec(spec, "prod-gcp").graph, "h100").inputs
    assert p["placementPolicy"] == {"type": "COMPACT"}


def test_a3_ultra_gets_a_gvnic_network_and_a_roce_network_of_eight_subnets() -> None:
    spec = gcp_spec()
    spec["gcp"]["nodePools"][1].update(machineType="a3-ultragpu-8g", diskType="hyperdisk-balanced")
    graph = run_spec(spec, "prod-gcp").graph
    wired = pool(graph, "h100").inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert len(wired) == 9
    (roce,) = [r for r in graph.of_type(NETWORK) if r.inputs.get("networkProfile")]
    assert roce.inputs["networkProfile"] == "projects/acme-ml-prod/global/networkProfiles/us-central1-a-vpc-roce"
    assert roce.inputs["mtu"] == 8896
    assert [w["network"] for w in wired].count(roce.inputs["name"]) == 8
    # a RoCE VPC refuses firewall rules; the gVNIC GPU network has its internal one
    assert not any(r.inputs["network"].endswith(f"/{roce.inputs['name']}") for r in graph.of_type(FIREWALL))
    params = {r.inputs["metadata"]["name"]: r.inputs["spec"]["deviceMode"]
              for r in graph.of_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet")}
    assert params == {"gvnic-1": "NetDevice", **{f"rdma-{i}": "RDMA" for i in range(8)}}
    # the primary VPC keeps the default MTU (only TCPX/TCPXO ask for 8244 on it)
    (primary,) = [r for r in graph.of_type(NETWORK) if r.name == "network-vpc"]
    assert primary.inputs["mtu"] == 1460


def test_gpu_subnets_are_24s_by_default_and_take_the_prefix_given() -> None:
    def gpu_subnets(graph: ResourceGraph) -> list[str]:
        return [r.inputs["ipCidrRange"] for r in sorted(graph.of_type(SUBNET), key=lambda r: r.inputs["name"])
                if "gpunet" in r.inputs["name"]]

    assert gpu_subnets(offline_run("prod-gcp").graph) == [f"192.168.{i}.0/24" for i in range(8)]
    spec = gcp_spec()
    spec["gcp"]["network"]["gpuSubnetPrefixLength"] = 23
    spec["gcp"]["nodePools"][1]["maxSize"] = 300
    assert gpu_subnets(run_spec(spec, "prod-gcp").graph) == [f"192.168.{2 * i}.0/23" for i in range(8)]


def test_a_pinned_pool_is_created_at_its_version_and_held_there(capsys: pytest.CaptureFixture[str]) -> None:
    """The pin is the pool's version plus GKE's per-pool exclusion until end of support (the release channel stays:
    node auto-upgrade cannot be turned off on it); an unpinned pool has neither, unless it is a reserved GPU pool."""
    from datetime import UTC, datetime

    from components.gcp.summary import summarize
    from components.spec import parse_spec

    now = datetime(2026, 12, 1, tzinfo=UTC)

    spec = gcp_spec()
    spec["gcp"]["cluster"]["minMasterVersion"] = "1.35.8-gke.1036000"
    spec["gcp"]["nodePools"][0]["version"] = "1.35.8-gke.1036000"
    run = run_spec(spec, "prod-gcp")
    hold = [{"exclusionUntilEndOfSupports": [{"enabled": True}]}]
    system, h100 = pool(run.graph, "system"), pool(run.graph, "h100")
    assert system.inputs["version"] == "1.35.8-gke.1036000" and system.inputs["maintenancePolicies"] == hold
    assert system.inputs["management"]["autoUpgrade"] is True  # required on a release channel
    assert "version" not in h100.inputs and h100.inputs["maintenancePolicies"] == hold  # reserved: held, not pinned
    assert one(run.graph, CLUSTER).inputs["releaseChannel"] == {"channel": "REGULAR"}
    unpinned = pool(offline_run("prod-gcp").graph, "system").inputs
    assert "version" not in unpinned and "maintenancePolicies" not in unpinned
    compute = summarize(run.graph, parse_spec(spec, "stacks/Pulumi.prod-gcp.yaml"), {}, now).planes["compute"]
    assert any(line.startswith("  system is pinned at GKE 1.35.8-gke.1036000: created at it and not auto-upgraded")
               for line in compute)


def test_gpu_operator_managed_drivers_turn_gke_drivers_and_dcgm_off() -> None:
    spec = gcp_spec()
    for gpu_pool in spec["gcp"]["nodePools"][1], next(p for p in spec["gcp"]["nodePools"] if p["name"] == "l4"):
        gpu_pool["gpuDriver"] = "operator"  # one owner of the drivers on every GPU pool (rule gpu-driver-one-owner)
    # Ubuntu nodes cannot mount Managed Lustre (rule lustre-cos-only): the operator variant shares Filestore.
    spec["gcp"]["storage"]["filesystem"] = {"type": "filestore", "capacityGiB": 10240, "filestoreTier": "ZONAL",
                                            "mountPath": "/checkpoints"}
    graph = run_spec(spec, "prod-gcp").graph
    cfg = pool(graph, "h100").inputs["nodeConfig"]
    assert cfg["guestAccelerators"][0]["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "INSTALLATION_DISABLED"}
    assert cfg["imageType"] == "UBUNTU_CONTAINERD"
    assert "DCGM" not in one(graph, CLUSTER).inputs["monitoringConfig"]["enableComponents"]
    values = next(r for r in graph.of_type("kubernetes:helm.sh/v3:Release")
                  if r.inputs["name"] == "gpu-operator").inputs["values"]
    assert values["driver"] == {"enabled": True} and "hostPaths" not in values


def test_gke_runs_its_own_gpu_stack_and_prometheus_scrapes_its_dcgm() -> None:
    """No GPU Operator on GKE-managed pools (cluster-toolkit's A3 way): GKE's driver, device plugin and DCGM exporter,
    which a PodMonitor brings into the platform's Prometheus for the GPU alerts."""
    graph = offline_run("prod-gcp").graph
    assert not [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator"]
    (monitor,) = [r.inputs for r in graph.resources if r.type.endswith(":PodMonitor")
                  and r.inputs["metadata"]["namespace"] == "monitoring"]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["gke-managed-system"]}
    assert monitor["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "gke-managed-dcgm-exporter"}}
    assert monitor["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    (cluster,) = graph.of_type("gcp:container/cluster:Cluster")
    assert "DCGM" in cluster.inputs["monitoringConfig"]["enableComponents"]


def test_gke_topology_levels_are_used_for_the_reserved_pool() -> None:
    graph = offline_run("prod-gcp").graph
    topologies = {r.inputs["metadata"]["name"]: r.inputs for r in graph.resources if r.type.endswith(":Topology")}
    topology = topologies["gke-network"]
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [
        "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host", "kubernetes.io/hostname"]
    flavors = {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type(KUEUE + "ResourceFlavor")}
    assert flavors["h100"]["spec"]["topologyName"] == topology["metadata"]["name"]
    # The teams' cpu pool is not placed; its flavor has the one-level hosts topology, so the queues stay TAS-only.
    assert flavors["cpu-47400688"]["spec"]["topologyName"] == "hosts"
    assert topologies["hosts"]["spec"]["levels"] == [{"nodeLabel": "kubernetes.io/hostname"}]


def test_team_pods_reach_the_gke_metadata_server_and_may_run_gke_sidecars() -> None:
    graph = offline_run("prod-gcp").graph
    egress = [r.inputs["spec"]["egress"][0] for r in graph.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
              if r.inputs["metadata"]["namespace"] == "research"
              and r.inputs["metadata"]["name"].startswith("allow-gke-metadata-server")]
    assert sorted((e["to"][0]["ipBlock"]["cidr"], e["ports"][0]["port"]) for e in egress) == [
        ("169.254.169.254/32", 80), ("169.254.169.254/32", 8080)]
    (policy,) = [r.inputs for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
        if r.inputs["metadata"]["name"] == "gpu-cluster-allowed-registries"]
    assert 'gke.gcr.io/' in json.dumps(policy)


@pytest.mark.parametrize(("kind", "extra", "resource", "addon", "api"), [
    ("filestore", {"capacityGiB": 10240, "filestoreTier": "ZONAL"}, "gcp:filestore/instance:Instance",
     "gcpFilestoreCsiDriverConfig", "file.googleapis.com"),
    ("parallelstore", {"capacityGiB": 12000}, "gcp:parallelstore/instance:Instance",
     "parallelstoreCsiDriverConfig", "parallelstore.googleapis.com"),
])
def test_filestore_and_parallelstore_replace_managed_lustre(kind: str, extra: dict[str, Any], resource: str,
                                                            addon: str, api: str) -> None:
    spec = gcp_spec()
    spec["gcp"]["storage"]["filesystem"] = {"type": kind, **extra}
    spec["workload"]["goodput"]["checkpointPath"] = "bucket"
    spec["workload"]["goodput"]["bucketWriteMbps"] = 4000
    graph = run_spec(spec, "prod-gcp").graph
    fs = one(graph, resource)
    assert fs.protect and fs.retain_on_delete
    assert one(graph, "gcp:servicenetworking/connection:Connection").urn in fs.dependencies
    assert graph.of_type("gcp:lustre/instance:Instance") == []
    addons = one(graph, CLUSTER).inputs["addonsConfig"]
    assert addons[addon] == {"enabled": True} and "lustreCsiDriverConfig" not in addons
    assert api in {r.inputs["service"] for r in graph.of_type("gcp:projects/service:Service")}
    assert not [r for r in graph.of_type(FIREWALL) if r.name == "network-lustre"]


def _admits(policy: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """The messages of a ValidatingAdmissionPolicy's validations a pod breaks (CEL evaluated with cel-python)."""
    import celpy

    env = celpy.Environment()
    broken = []
    for v in policy["spec"]["validations"]:
        if not env.program(env.compile(v["expression"])).evaluate({"object": celpy.json_to_cel(pod)}):
            broken.append(v["message"])
    return broken


def _pinned_rxdm() -> str:
    from components.gcp.cloud import gpudirect_sidecar

    sidecar = gpudirect_sidecar("TCPXO")
    assert sidecar is not None
    return sidecar[1]


def _tcpxo_pod(**changes: Any) -> dict[str, Any]:
    """A training pod shaped like GKE's TCPXO example: a tcpxo-daemon sidecar with NET_ADMIN and host paths."""
    pod: dict[str, Any] = {"spec": {
        "containers": [
            # As container-engine-accelerators @abbe8ddf gpudirect-tcpxo/nccl-test-latest.yaml runs it.
            {"name": "tcpxo-daemon", "image": _pinned_rxdm(), "command": ["/bin/sh", "-c"],
             "args": ["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
                      "/fts/entrypoint_rxdm_container.sh --num_hops=2\n"],
             "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
             "volumeMounts": [{"name": "libraries", "mountPath": "/usr/local/nvidia/lib64"},
                              {"name": "sys", "mountPath": "/hostsysfs"},
                              {"name": "proc-sys", "mountPath": "/hostprocsysfs"}],
             "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}}},
            {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}],
        "volumes": [{"name": "libraries", "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64"}},
                    {"name": "sys", "hostPath": {"path": "/sys"}},
                    {"name": "proc-sys", "hostPath": {"path": "/proc/sys"}},
                    {"name": "aperture-devices", "hostPath": {"path": "/dev/aperture_devices"}},
                    {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}}]}}
    pod["spec"].update(changes)
    return pod


def test_gpudirect_tenant_namespaces_admit_the_tcpxo_sidecar_and_nothing_wider() -> None:
    graph = offline_run("prod-gcp").graph
    policies = {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")}
    limits, privileged = policies["gpu-cluster-gpudirect-pod-limits"], policies["gpu-cluster-no-privileged-pods"]
    assert _cel(limits, _tcpxo_pod(), "research") == [] and _admits(privileged, _tcpxo_pod()) == []
    assert _cel(limits, _tcpxo_pod(hostNetwork=True), "research") == [
        "team pods do not use the node's Network namespace"]
    assert _cel(limits, _tcpxo_pod(hostPID=True), "research") == ["team pods do not use the node's PID namespace"]
    root = _tcpxo_pod()
    root["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    assert len(_cel(limits, root, "research")) == 1
    sneaky = _tcpxo_pod()
    sneaky["spec"]["volumes"].append({"name": "x", "hostPath": {"path": "/system"}})  # a prefix of no allowed path
    assert len(_cel(limits, sneaky, "research")) == 1
    admin = _tcpxo_pod()
    admin["spec"]["containers"][1]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert _cel(limits, admin, "research") == [
        "containers add only the capabilities Pod Security baseline allows; NET_ADMIN only in the GPUDirect sidecar"]
    priv = _tcpxo_pod()
    priv["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    assert len(_admits(privileged, priv)) == 1
    bindings = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in graph.of_type(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")}
    assert bindings["gpu-cluster-gpudirect-pod-limits"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "gpu-cluster/pod-security-reason": "gpudirect-sidecars"}
    exempt = bindings["gpu-cluster-no-privileged-pods"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert {"gke-managed-system", "gmp-system"} <= set(exempt[0]["values"])
    research = next(r.inputs for r in graph.of_type("kubernetes:core/v1:Namespace")
                    if r.inputs["metadata"]["name"] == "research")
    assert research["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert research["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "baseline"


def test_gpu_agents_wait_for_the_gpu_pool() -> None:
    graph = offline_run("prod-gcp").graph
    h100 = pool(graph, "h100").urn
    for installer in graph.of_type("kubernetes:yaml/v2:ConfigFile"):
        if installer.name.startswith("cloud-objects-"):
            assert h100 in installer.dependencies, installer.name
    kueue = next(r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue")
    assert h100 not in kueue.dependencies


def test_prod_gcp_preview_names_the_rxdm_sidecar_and_the_gke_version_floors(capsys: pytest.CaptureFixture[str]) -> None:
    from blueprint.cli import main

    assert main(["preview", "prod-gcp"]) == 0
    out = capsys.readouterr().out
    compute = out.split("== compute", 1)[1].split("\n== ", 1)[0]
    assert f"GPUDirect pods run the RxDM sidecar {rxdm_image('TCPXO')} beside NCCL" in compute
    network = out.split("== network", 1)[1].split("\n== ", 1)[0]
    assert "GPU networks: 8 VPC(s), MTU 8244; 8 subnets of /24 (252 nodes each)" in network
    control = out.split("== control plane", 1)[1].split("\n== ", 1)[0]
    assert ("GKE version: 1.35.8-gke.1036000 or later (the REGULAR channel's default version as of the GKE release "
            "notes of 2026-09-17), which meets what the stack needs: GPUDirect-TCPXO on A3 Mega 1.28.15-gke.3163000+ "
            "(patch floors per minor to 1.32); Managed Lustre on port 988 1.33.2-gke.4780000+") in control
