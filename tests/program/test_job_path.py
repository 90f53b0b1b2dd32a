"""A team's job from submission to checkpoint (issue 21): the objects on its path exist, in the right order, with
defaults that do not kill it. Each test fails when the fault it names comes back."""

from __future__ import annotations

import pytest

from tests.conftest import AWS_STACKS, GCP_STACKS, offline_run

# Add-ons whose pods need no node (vpc-cni and kube-proxy are DaemonSets the nodes need to become ready; the Pod
# Identity agent is the one terraform-aws-eks also creates before compute).
BEFORE_NODES = {"vpc-cni", "kube-proxy", "eks-pod-identity-agent"}


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_addons_that_run_pods_wait_for_the_system_nodes(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    groups = graph.of_type("aws:eks/nodeGroup:NodeGroup")
    system = {g.urn for g in groups if g.inputs.get("labels", {}).get("gpu-cluster/node-group")
              and "nvidia.com/gpu" not in str(g.inputs.get("taints"))}
    assert system, "a system node group"
    checked = 0
    for addon in graph.of_type("aws:eks/addon:Addon"):
        if addon.inputs["addonName"] in BEFORE_NODES:
            assert not system & set(addon.dependencies), addon.name
            continue
        assert system & set(addon.dependencies), f"{addon.name} is created before the system nodes exist"
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("stack_name", GCP_STACKS)
def test_workload_identity_bindings_wait_for_the_cluster(stack_name: str) -> None:
    graph = offline_run(stack_name).graph
    (cluster,) = graph.of_type("gcp:container/cluster:Cluster")
    bindings = [r for r in graph.resources if r.type in ("gcp:storage/managedFolderIamMember:ManagedFolderIamMember",
                                                         "gcp:storage/bucketIAMMember:BucketIAMMember")
                and str(r.inputs.get("member", "")).startswith("principal://")]
    assert len(bindings) >= 2  # a team's folder and its bucket metadata, at least (dev-gcp has one team)
    for binding in bindings:
        assert cluster.urn in binding.dependencies, f"{binding.name} does not wait for the Workload Identity pool"


@pytest.mark.parametrize("stack_name", [*AWS_STACKS, *GCP_STACKS])
def test_namespace_defaults_do_not_kill_a_training_container(stack_name: str) -> None:
    """A container that sets only its GPU limit gets the memory of the largest node its queue reaches as its limit
    (not 8 GiB), and no CPU limit; its requests are still counted (500m, 1 GiB)."""
    from components.spec.decisions import instance_catalog, slurm_node_groups
    from tests.conftest import stack

    spec = stack(stack_name).spec
    catalog = instance_catalog(spec)
    groups = {g.name: g for g in (spec.aws_spec().node_groups if spec.cloud == "aws" else spec.gcp_spec().node_pools)}
    graph = offline_run(stack_name).graph
    slurm = slurm_node_groups(spec)
    for lr in graph.of_type("kubernetes:core/v1:LimitRange"):
        team = next(t for t in spec.teams if t.name == lr.inputs["metadata"]["namespace"])
        (limits,) = lr.inputs["spec"]["limits"]
        assert limits["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
        assert "cpu" not in limits.get("default", {})
        kueue = [q for q in team.quotas if q.node_group not in slurm]  # Slurm's groups are not the queue's
        if not kueue:
            assert "memory" not in limits.get("default", {})
            continue
        biggest = max(catalog[groups[q.node_group].instance_type].memory_gib.value or 0 for q in kueue)
        assert limits["default"]["memory"] == f"{biggest}Gi" and biggest >= 16, (team.name, biggest)


# --- the data path into pods ---------------------------------------------------------------------------------------

SHARED = ("prod-aws", "byo-aws", "dev-aws", "prod-gcp", "dev-gcp-slurm")  # shipped stacks with a filesystem pods mount


def _objects(graph: object, kind: str) -> list[dict[str, object]]:
    return [r.inputs for r in graph.resources if r.type.endswith(f":{kind}")]


@pytest.mark.parametrize("stack_name", SHARED)
def test_every_team_has_a_shared_fs_claim_bound_to_its_own_retained_volume(stack_name: str) -> None:
    from tests.conftest import stack

    spec = stack(stack_name).spec
    graph = offline_run(stack_name).graph
    pvs = {pv["metadata"]["name"]: pv for pv in _objects(graph, "PersistentVolume")}
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c
              for c in _objects(graph, "PersistentVolumeClaim")}
    policies = {c["metadata"]["namespace"]: c["data"] for c in _objects(graph, "ConfigMap")
                if c["metadata"]["name"] == "checkpoint-policy"}
    fs = spec.aws_spec().storage.filesystem if spec.cloud == "aws" else spec.gcp_spec().storage.filesystem
    assert fs is not None
    for team in spec.teams:
        claim = claims[(team.name, "shared-fs")]
        pv = pvs[claim["spec"]["volumeName"]]
        assert pv["spec"]["claimRef"] == {"namespace": team.name, "name": "shared-fs"}
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert pv["spec"]["storageClassName"] == "" == claim["spec"]["storageClassName"]
        csi = pv["spec"]["csi"]
        if spec.cloud == "aws":
            # The team's own directory under the path linked to the bucket (FSx fileset mount): what it writes under
            # /checkpoints reaches s3://<bucket>/<team>/, the prefix its role may write.
            assert csi["driver"] == "fsx.csi.aws.com" and csi["volumeHandle"].startswith("fs-")
            assert csi["volumeAttributes"]["mountname"].endswith(f"/{fs.mount_path.strip('/')}/{team.name}")
            assert pv["spec"]["mountOptions"] == ["flock"]
        else:
            assert csi["driver"] == "lustre.csi.storage.gke.io"
            assert csi["volumeHandle"] == f"{spec.gcp_spec().project}/{spec.gcp_spec().gpu_zone}/{spec.name}-lustre"
            assert set(csi["volumeAttributes"]) == {"ip", "filesystem"}
        if team.name in policies and "CHECKPOINT_DIR" in policies[team.name]:
            assert policies[team.name]["CHECKPOINT_DIR"] == fs.mount_path


@pytest.mark.parametrize("stack_name", SHARED)
def test_shared_fs_volumes_survive_growth_and_replacement_of_the_filesystem(stack_name: str) -> None:
    """Claims request a nominal 1Gi (a static claim's request can never change, so one equal to the filesystem's
    capacity would fail every apply that grows it); volumes carry the capacity and are named after the filesystem's
    generation (a replaced filesystem gets new volumes instead of a source change Kubernetes refuses); each claim
    waits for its volume (pulumi-kubernetes gives a claim five minutes to bind)."""
    from components.kubernetes.objects import volume_generation
    from tests.conftest import stack

    spec = stack(stack_name).spec
    fs = spec.aws_spec().storage.filesystem if spec.cloud == "aws" else spec.gcp_spec().storage.filesystem
    graph = offline_run(stack_name).graph
    pvs = {r.inputs["metadata"]["name"]: r for r in graph.of_type("kubernetes:core/v1:PersistentVolume")}
    claims = [r for r in graph.of_type("kubernetes:core/v1:PersistentVolumeClaim")
              if r.inputs["metadata"]["name"] == "shared-fs" or r.inputs["metadata"]["name"].startswith(
                  "shared-fs-admin-")]
    slurm = 1 if spec.scheduler.slurm is not None else 0  # Slurm's claim in the slurm namespace
    assert len(claims) == len(spec.teams) + 1 + slurm
    generations = set()
    for claim in claims:
        assert claim.inputs["spec"]["resources"]["requests"] == {"storage": "1Gi"}
        pv = pvs[claim.inputs["spec"]["volumeName"]]
        assert pv.inputs["spec"]["capacity"] == {"storage": f"{fs.capacity_gib}Gi"}
        assert pv.urn in claim.dependencies, f"{claim.name} does not wait for its volume"
        base, _, generation = pv.inputs["metadata"]["name"].rpartition("-")
        assert base in ("shared-fs.admin", "shared-fs.slurm", f"shared-fs-{claim.inputs['metadata']['namespace']}")
        generations.add(generation)
        if base == "shared-fs.admin":  # the platform's claim and Job are named after the filesystem too
            assert claim.inputs["metadata"]["name"] == f"shared-fs-admin-{generation}"
    csi = pvs[f"shared-fs.admin-{generation}"].inputs["spec"]["csi"]
    if spec.cloud == "aws":
        attributes = csi["volumeAttributes"]
        expected = volume_generation(csi["volumeHandle"], attributes["dnsname"], attributes["mountname"],
                                     fs.mount_path.strip("/"))
    else:
        expected = volume_generation(csi["volumeHandle"], csi["volumeAttributes"]["ip"], "lustrefs")
    assert generations == {expected}
    assert volume_generation("fs-1", "a", "b", "c") != volume_generation("fs-2", "a", "b", "c")


def test_the_team_directories_are_made_inside_the_path_linked_to_the_bucket() -> None:
    graph = offline_run("prod-aws").graph
    (link,) = graph.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    (job,) = [r for r in graph.of_type("kubernetes:batch/v1:Job") if r.inputs["metadata"]["name"].startswith(
              "shared-fs-team-dirs-")]
    assert link.urn in job.dependencies


@pytest.mark.parametrize("stack_name", SHARED)
def test_a_job_creates_each_team_directory_owned_by_its_group(stack_name: str) -> None:
    from tests.conftest import stack

    spec = stack(stack_name).spec
    graph = offline_run(stack_name).graph
    (job,) = [j for j in _objects(graph, "Job") if j["metadata"]["name"].startswith("shared-fs-team-dirs-")]
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    root = spec.aws_spec().storage.filesystem.mount_path.strip("/") + "/" if spec.cloud == "aws" else ""
    for team in spec.teams:
        path = f"/fs/{root}{team.name}"
        assert f"mkdir -p {path} && chown 0:{team.posix_gid} {path} && chmod 2770 {path}" in script
    (admin,) = [c for c in _objects(graph, "PersistentVolumeClaim")
                if c["metadata"]["name"].startswith("shared-fs-admin-")]
    assert admin["metadata"]["namespace"] == "kube-system"
    assert job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == \
        admin["metadata"]["name"]
    assert job["metadata"]["name"].rpartition("-")[2] == admin["metadata"]["name"].rpartition("-")[2]


def _cel(policy: dict[str, object], pod: dict[str, object], namespace: str) -> list[str]:
    """The messages of a ValidatingAdmissionPolicy a pod breaks (its variables first), CEL through cel-python."""
    import celpy

    env = celpy.Environment()
    spec = policy["spec"]
    activation: dict[str, object] = {"object": celpy.json_to_cel(pod), "request": celpy.json_to_cel(
        {"namespace": namespace})}
    variables = {v["name"]: env.program(env.compile(v["expression"])).evaluate(activation)
                 for v in spec.get("variables", [])}
    activation["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
    return [v["message"] for v in spec["validations"]
            if not env.program(env.compile(v["expression"])).evaluate(activation)]


def test_on_gke_team_pods_stay_in_their_directory() -> None:
    graph = offline_run("prod-gcp").graph
    policy = next(p for p in _objects(graph, "ValidatingAdmissionPolicy")
                  if p["metadata"]["name"] == "gpu-cluster-shared-fs-subpath")

    def pod(mount: dict[str, object]) -> dict[str, object]:
        return {"spec": {"volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "shared-fs"}},
                                     {"name": "scratch", "emptyDir": {}}],
                         "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                         "volumeMounts": [{"name": "ckpt", "mountPath": "/checkpoints", **mount},
                                                          {"name": "scratch", "mountPath": "/scratch"}]}]}}
    assert _cel(policy, pod({"subPath": "research"}), "research") == []
    message = ("containers mount the shared-fs claim with subPath set to exactly the namespace's name (the team's "
               "directory; make subdirectories inside the mount), not a path below it and not subPathExpr")
    # Below the team directory is refused: kubelet follows a symlink there anywhere inside the volume, which on GKE is
    # the whole filesystem (research/x -> ../applied would mount the applied team's directory).
    assert _cel(policy, pod({"subPath": "research/x"}), "research") == [message]
    assert _cel(policy, pod({}), "research") == [message]
    assert _cel(policy, pod({"subPath": "applied"}), "research") == [message]
    assert _cel(policy, pod({"subPath": "researchers"}), "research") == [message]
    assert _cel(policy, pod({"subPathExpr": "$(NS)"}), "research") == [message]
    assert not [p for p in _objects(offline_run("prod-aws").graph, "ValidatingAdmissionPolicy")
                if p["metadata"]["name"] == "gpu-cluster-shared-fs-subpath"]


@pytest.mark.parametrize("stack_name", AWS_STACKS)
def test_pod_identity_roles_trust_one_service_account_of_one_cluster(stack_name: str) -> None:
    """Each role's trust policy names the cluster, namespace and service account of its association (the session
    tags Pod Identity adds), so another association cannot take it."""
    import json

    graph = offline_run(stack_name).graph
    (cluster,) = graph.of_type("aws:eks/cluster:Cluster")
    roles = {r.urn: r for r in graph.of_type("aws:iam/role:Role")}
    associations = graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    addons = [a for a in graph.of_type("aws:eks/addon:Addon") if a.inputs.get("podIdentityAssociations")]
    checked = 0
    for role in roles.values():
        doc = json.loads(role.inputs["assumeRolePolicy"])
        if "pods.eks.amazonaws.com" not in json.dumps(doc):
            continue
        (statement,) = doc["Statement"]
        cond = statement["Condition"]["StringEquals"]
        assert cond["aws:RequestTag/eks-cluster-arn"].endswith(f":cluster/{cluster.inputs['name']}")
        bound = [(a.inputs["namespace"], a.inputs["serviceAccount"]) for a in associations
                 if role.urn in a.dependencies]
        bound += [("kube-system", p["serviceAccount"]) for a in addons for p in a.inputs["podIdentityAssociations"]
                  if role.urn in a.dependencies]
        assert bound == [(cond["aws:RequestTag/kubernetes-namespace"],
                          cond["aws:RequestTag/kubernetes-service-account"])], role.name
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("stack_name", ["prod-aws", "dev-aws", "byo-aws"])
def test_the_fsx_csi_controller_may_only_describe(stack_name: str) -> None:
    """Static volumes need no FSx API call from the controller; AmazonFSxFullAccess could delete the filesystem."""
    import json

    graph = offline_run(stack_name).graph
    attached = {r.inputs["policyArn"] for r in graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert "arn:aws:iam::aws:policy/AmazonFSxFullAccess" not in attached
    (policy,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "addons-fsx-csi-policy"]
    assert [s["Action"] for s in json.loads(policy.inputs["policy"])["Statement"]] == [["fsx:DescribeFileSystems"]]


# --- job controllers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack_name", [*AWS_STACKS, *GCP_STACKS])
def test_every_job_kind_the_queues_and_roles_name_has_its_controller(stack_name: str) -> None:
    import yaml

    from tests.k8s_checks import validate_crd_object

    graph = offline_run(stack_name).graph
    releases = {r.inputs["name"]: r.inputs for r in graph.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["jobset"]["version"] == "0.12.0" and releases["jobset"]["chart"].startswith("oci://")
    assert releases["kubeflow-trainer"]["version"] == "2.3.0"
    assert releases["kubeflow-trainer"]["values"]["jobset"] == {"install": False}  # one JobSet controller, not two
    assert [r for r in graph.of_type("kubernetes:yaml/v2:ConfigFile") if r.name == "controllers-mpi-operator"]
    config = yaml.safe_load(releases["kueue"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    frameworks = set(config["integrations"]["frameworks"])
    assert frameworks == {"batch/job", "kubeflow.org/mpijob", "jobset.x-k8s.io/jobset",
                          "trainer.kubeflow.org/trainjob", "pod", "deployment", "statefulset"}
    assert not {f for f in frameworks if f.startswith("ray.io/") or f == "kubeflow.org/pytorchjob"}
    role = next(r.inputs for r in graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
                if r.inputs["metadata"]["name"] == "team-member")
    kinds = {(g, res) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"]}
    assert {("kubeflow.org", "mpijobs"), ("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs")} <= kinds
    assert ("kubeflow.org", "pytorchjobs") not in kinds and not {k for k in kinds if k[0] == "ray.io"}
    (runtime,) = [r.inputs for r in graph.resources if r.type.endswith(":ClusterTrainingRuntime")]
    validate_crd_object(runtime)
    assert runtime["metadata"]["name"] == "torch-distributed"


def test_acceptance_workers_run_the_ssh_server_mpirun_reaches() -> None:
    graph = offline_run("prod-aws").graph
    jobs = [r.inputs for r in graph.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob")]
    assert jobs
    for job in jobs:
        (worker,) = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        assert worker["command"][:2] == ["bash", "-c"] and worker["command"][2].endswith("exec /usr/sbin/sshd -De")
        mpi = next(r for r in graph.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob")
               if r.inputs["metadata"]["name"] == job["metadata"]["name"])
        assert any(d.endswith("::controllers-mpi-operator") for d in mpi.dependencies)


# --- alerts reach someone ----------------------------------------------------------------------------------------


def _anchors() -> set[str]:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "runbooks.md").read_text(encoding="utf-8")
    return {line[3:].strip() for line in text.splitlines() if line.startswith("## ")}


@pytest.mark.parametrize("stack_name", [*AWS_STACKS, *GCP_STACKS])
def test_every_alert_links_a_runbook_section_that_exists(stack_name: str) -> None:
    from tests.conftest import stack

    base = stack(stack_name).spec.platform.monitoring.alerts.runbook_url
    graph = offline_run(stack_name).graph
    (rules,) = [r.inputs for r in graph.resources if r.type.endswith(":PrometheusRule")]
    alerts = [rule for group in rules["spec"]["groups"] for rule in group["rules"] if "alert" in rule]
    assert len(alerts) >= 12
    anchors = _anchors()
    for alert in alerts:
        url, _, anchor = alert["annotations"]["runbook_url"].partition("#")
        assert url == base and anchor in anchors, (alert["alert"], alert["annotations"]["runbook_url"])
    names = {a["alert"] for a in alerts}
    assert {"GpuNvlinkErrors", "NodeNotReady", "KueueQuotaExhausted"} <= names


def _alert_configs(stack_name: str = "prod-aws") -> dict[str, dict[str, object]]:
    graph = offline_run(stack_name).graph
    return {r.inputs["metadata"]["name"]: r.inputs for r in graph.resources if r.type.endswith(":AlertmanagerConfig")}


def test_prod_alerts_are_routed_with_credentials_by_reference() -> None:
    from tests.k8s_checks import validate_crd_object

    configs = _alert_configs()
    # One object per receiver: the operator rejects an object whole when one of its Secrets is missing.
    assert set(configs) == {"gpu-cluster-alerts-platform-pager", "gpu-cluster-alerts-platform-slack",
                            "gpu-cluster-alerts-research-leads", "gpu-cluster-alerts-budget-research",
                            "gpu-cluster-alerts-budget-pretraining", "gpu-cluster-alerts-budget-applied"}
    receivers = {}
    for name, config in configs.items():
        validate_crd_object(config)
        spec = config["spec"]
        notifying = [r for r in spec["receivers"] if r["name"] != "none"]
        assert len(notifying) == 1 and {"name": "none"} in spec["receivers"], name
        receivers[notifying[0]["name"]] = notifying[0]
        assert spec["route"]["routes"][0] == {"receiver": "none", "continue": False, "matchers": [
            {"name": "alertname", "matchType": "=~", "value": "Watchdog|InfoInhibitor"}]}
    assert receivers["platform-pager"]["pagerdutyConfigs"][0]["routingKey"] == {"name": "alertmanager-pagerduty",
                                                                                "key": "routing-key"}
    assert receivers["platform-slack"]["slackConfigs"][0]["apiURL"] == {"name": "alertmanager-slack",
                                                                        "key": "webhook-url"}
    email = receivers["research-leads"]["emailConfigs"][0]
    assert email["authPassword"] == {"name": "alertmanager-smtp", "key": "password"} and "authPasswordFile" not in email
    # The default receiver's object is the catch-all; the others send what their routes do not take to none.
    assert {n: c["spec"]["route"]["receiver"] for n, c in configs.items() if c["spec"]["route"]["receiver"] != "none"
            } == {"gpu-cluster-alerts-platform-slack": "platform-slack"}
    pager = configs["gpu-cluster-alerts-platform-pager"]["spec"]["route"]["routes"]
    assert {"receiver": "platform-pager", "continue": False,
            "matchers": [{"name": "severity", "matchType": "=~", "value": "critical"}]} in pager
    team = [r for r in configs["gpu-cluster-alerts-research-leads"]["spec"]["route"]["routes"]
            if r["receiver"] == "research-leads"]
    assert {m["name"] for r in team for m in r["matchers"]} == {"severity", "namespace", "cluster_queue"}
    release = next(r.inputs for r in offline_run("prod-aws").graph.of_type("kubernetes:helm.sh/v3:Release")
                   if r.inputs["name"] == "kube-prometheus-stack")
    am = release["values"]["alertmanager"]["alertmanagerSpec"]
    assert am["alertmanagerConfigSelector"] == {"matchLabels": {"gpu-cluster/alerting": "true"}}
    assert am["alertmanagerConfigNamespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    assert am["alertmanagerConfigMatcherStrategy"] == {"type": "OnNamespaceExceptForAlertmanagerNamespace"}


def test_alert_rules_refuse_what_would_route_nowhere() -> None:
    import copy

    from components.spec import SpecError, parse_spec
    from tests.conftest import raw_stack_config

    base = raw_stack_config("prod-aws")["gpu-cluster:spec"]
    p = "stacks/Pulumi.prod-aws.yaml: gpu-cluster:spec.platform.monitoring.alerts"

    def errors(change: object) -> list[str]:
        spec = copy.deepcopy(base)
        change(spec["platform"]["monitoring"]["alerts"])  # type: ignore[operator]
        with pytest.raises(SpecError) as info:
            parse_spec(spec, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
        return str(info.value).splitlines()

    def nothing_routed(a: dict[str, object]) -> None:
        a["routes"], a["defaultReceiver"] = [], None
    assert errors(nothing_routed) == [
        f"{p}: a prod stack's alerts must reach someone: add a receiver (slack, pagerduty, email or webhook, its "
        "credential in a Secret) and a route or defaultReceiver [rule: prod-alerts-routed]"]
    assert errors(lambda a: a["routes"].append({"receiver": "nobody"})) == [
        f"{p}.routes[2].receiver: 'nobody' is not a receiver; known: platform-pager, platform-slack, research-leads "
        "[rule: alert-route-receiver]"]
    assert errors(lambda a: a["routes"].append({"receiver": "platform-slack", "teams": ["finance"]})) == [
        f"{p}.routes[2].teams[0]: 'finance' is not a team of this stack; known: applied, pretraining, research "
        "[rule: alert-route-team]"]
    assert errors(lambda a: a["receivers"][2].pop("smarthost")) == [
        f"{p}.receivers[research-leads].smarthost: an email receiver needs smarthost [rule: alert-receiver-complete]"]
    assert errors(lambda a: a["receivers"][0].update({"channel": "#x"})) == [
        f"{p}.receivers[platform-pager].channel: channel does not apply to a pagerduty receiver "
        "[rule: alert-receiver-complete]"]
    assert errors(lambda a: a.update({"runbookUrl": "http://wiki/runbooks#x"})) == [
        f"{p}.runbookUrl: 'http://wiki/runbooks#x' is neither an https URL (without #) nor a path to a .md file; "
        "alerts link to it plus #<section> [rule: alert-runbook-url]"]
    # issue 35: secrets only by reference, addresses and ports that exist
    assert errors(lambda a: a.update({"runbookUrl": "https://bot:s3cret@wiki.example.com/runbooks"})) == [
        f"{p}.runbookUrl: the runbook URL carries credentials (user:password@): every alert would show them; "
        "publish the runbook where it can be read without them [rule: alert-secrets-by-reference]"]
    assert errors(lambda a: a["receivers"][1].update(
        {"channel": "https://hooks.slack.com/services/T000/B000/XXXX"})) == [
        f"{p}.receivers[platform-slack].channel: not a Slack channel (#name: lowercase letters, digits, - and _, at "
        "most 80 characters; the value is not repeated here, in case it is a credential); a webhook URL or token "
        "belongs in the Secret that secret and key name [rule: alert-secrets-by-reference]"]
    assert errors(lambda a: a["receivers"][2].update({"smarthost": "smtp.example.com:99999"})) == [
        f"{p}.receivers[research-leads].smarthost: port 99999 is above 65535, the largest TCP port "
        "[rule: alert-receiver-complete]"]
    from_errors = errors(lambda a: a["receivers"][2].update({"from": "not an address"}))
    assert len(from_errors) == 1 and from_errors[0].startswith(f"{p}.receivers[research-leads].from: ")


def test_gke_namespace_quotas_leave_room_for_the_injected_gcs_fuse_sidecar() -> None:
    """Kueue counts a pod as its template says; GKE then injects the GCS FUSE sidecar (250m CPU, 256Mi), which the
    namespace's ResourceQuota counts: the quota is Kueue's ceiling (GPU flavors and CPU flavor) plus one sidecar per
    node the queue reaches (the team's CPU pool's too)."""
    from components.kubernetes.quotas import cpu_quota_room, namespace_hard_limits
    from tests.conftest import stack

    for name in GCP_STACKS:
        spec = stack(name).spec
        graph = offline_run(name).graph
        quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
                  for r in graph.of_type("kubernetes:core/v1:ResourceQuota")}
        from components.gcp.cloud import platform_inputs

        inputs = platform_inputs(spec, bucket="b", disk_key=None, gpu_network_objects=())
        pools, cpu_pools = inputs.pools_by_name, inputs.cpu_pools_by_name
        for team in spec.teams:
            ceiling = namespace_hard_limits(team, list(spec.teams), pools, spec.platform.cohort) \
                + cpu_quota_room(team, cpu_pools)
            # Kueue's pools only: a quota on a Slurm pool is the team's Slurm account's, its pods never run there
            nodes = sum(pools[q.node_group].max_nodes for q in team.quotas if q.node_group in pools) \
                + sum(cpu_pools[q.node_group].max_nodes for q in team.cpu_quotas)
            assert quotas[team.name]["requests.cpu"] == str(ceiling.cpu + -(-nodes * 250 // 1000)), (name, team.name)
            assert quotas[team.name]["requests.memory"] == f"{ceiling.memory_gib + -(-nodes * 256 // 1024)}Gi"
    from components.aws.cloud import platform_inputs as aws_inputs

    prod = stack("prod-aws").spec
    research = next(t for t in prod.teams if t.name == "research")
    ceiling = namespace_hard_limits(research, list(prod.teams), aws_inputs(prod).pools_by_name, prod.platform.cohort) \
        + cpu_quota_room(research, aws_inputs(prod).cpu_pools_by_name)
    aws = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"]
           for r in offline_run("prod-aws").graph.of_type("kubernetes:core/v1:ResourceQuota")}
    assert aws["research"]["requests.cpu"] == str(ceiling.cpu)  # no injected sidecar on EKS: the ceiling itself


def test_a_team_budget_s_addresses_get_its_spend_alert() -> None:
    """teams[].budget.notify of a team on shared nodes was dropped: it now gets the team's TeamSpendOverBudget through
    the stack's email receiver (its server and credential), and without an email receiver the preview warns."""
    import copy

    from components.kubernetes.objects import alertmanager_configs
    from components.spec import parse_spec
    from components.spec.notes import budget_notes
    from tests.conftest import raw_stack_config, stack
    from tests.program.alert_routing import notified

    spec = stack("prod-aws").spec
    configs = _alert_configs()
    for team in spec.teams:
        assert team.budget is not None
        config = configs[f"gpu-cluster-alerts-budget-{team.name}"]
        (mail,) = [r for r in config["spec"]["receivers"] if r["name"] == f"budget-{team.name}"]
        # the people a cloud budget of the team would mail: its addresses and billing.notify
        assert mail["emailConfigs"][0]["to"] == ", ".join(dict.fromkeys([*team.budget.notify, *spec.billing.notify]))
        assert mail["emailConfigs"][0]["authPassword"] == {"name": "alertmanager-smtp", "key": "password"}
        assert {"receiver": f"budget-{team.name}", "continue": False, "repeatInterval": "24h", "matchers": [
            {"name": "alertname", "matchType": "=", "value": "TeamSpendOverBudget"},
            {"name": "team", "matchType": "=", "value": team.name}]} in config["spec"]["route"]["routes"]
        # taken by that receiver only (once, once a day), not also by every route its namespace label matches
        labels = {"alertname": "TeamSpendOverBudget", "severity": "warning", "namespace": team.name,
                  "team": team.name}
        assert notified(list(configs.values()), labels, "OnNamespaceExceptForAlertmanagerNamespace") == [
            f"budget-{team.name}"]
    assert budget_notes(spec) == []
    raw = copy.deepcopy(raw_stack_config("prod-aws")["gpu-cluster:spec"])
    alerts = raw["platform"]["monitoring"]["alerts"]
    alerts["receivers"] = [r for r in alerts["receivers"] if r["type"] != "email"]
    alerts["routes"] = [r for r in alerts["routes"] if r["receiver"] != "research-leads"]
    no_mail = parse_spec(raw, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
    notes = budget_notes(no_mail)
    assert len(notes) == 3 and notes[0].startswith(
        "warning: gpu-cluster:spec.teams[research].budget.notify: team 'research' is on shared nodes, so no cloud "
        "budget mails research-leads@example.com")
    assert not [c for c in alertmanager_configs(no_mail.platform.monitoring.alerts, {"research": ["a@example.com"]})
                if c["metadata"]["name"].startswith("gpu-cluster-alerts-budget-")]


def test_team_members_can_read_the_cluster_scoped_objects_their_jobs_name() -> None:
    graph = offline_run("prod-aws").graph
    from tests.conftest import stack

    (role,) = [r.inputs for r in graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
               if r.inputs["metadata"]["name"] == "gpu-cluster-team-viewer"]
    (binding,) = [r.inputs for r in graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
                  if r.inputs["metadata"]["name"] == "gpu-cluster-team-viewer"]
    assert {"apiGroups": ["trainer.kubeflow.org"], "resources": ["clustertrainingruntimes"],
            "verbs": ["get", "list", "watch"]} in role["rules"]
    assert all(set(rule["verbs"]) == {"get", "list", "watch"} for rule in role["rules"])  # read only
    assert {s["name"] for s in binding["subjects"]} == {t.k8s_group for t in stack("prod-aws").spec.teams}


@pytest.mark.parametrize("stack_name", [*AWS_STACKS, *GCP_STACKS])
def test_every_rule_is_promql(stack_name: str) -> None:
    """Every recording and alerting expression parses as PromQL (promql-parser, the Rust parser Prometheus' grammar
    is ported to), so Prometheus does not reject the rule group."""
    import promql_parser

    (rules,) = [r.inputs for r in offline_run(stack_name).graph.resources if r.type.endswith(":PrometheusRule")]
    exprs = [rule["expr"] for group in rules["spec"]["groups"] for rule in group["rules"]]
    assert len(exprs) >= 20
    for expr in exprs:
        promql_parser.parse(expr)
    with pytest.raises(ValueError):
        promql_parser.parse("sum by (namespace (x)")


def test_a_team_route_reaches_its_receiver_once_per_alert() -> None:
    """A team route matches the team's namespace, or its queue for alerts with no namespace: an alert carrying both
    labels is not sent twice."""
    from tests.program.alert_routing import notified

    configs = list(_alert_configs().values())

    def leads(labels: dict[str, str]) -> int:
        return notified(configs, labels, "OnNamespaceExceptForAlertmanagerNamespace").count("research-leads")
    assert leads({"alertname": "X", "severity": "warning", "namespace": "research", "cluster_queue": "research"}) == 1
    assert leads({"alertname": "X", "severity": "warning", "cluster_queue": "research"}) == 1
    assert leads({"alertname": "X", "severity": "warning", "namespace": "applied"}) == 0
    assert leads({"alertname": "X", "severity": "info", "namespace": "research"}) == 0


def test_the_spend_rule_counts_each_gpu_once() -> None:
    """Two kube-state-metrics replicas (or a rollout) export every series twice: the cost takes the max first."""
    graph = offline_run("prod-aws").graph
    (rule,) = graph.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    (cost,) = [r for g in rule.inputs["spec"]["groups"] for r in g["rules"]
               if r.get("record") == "gpu_cluster:gpu_cost_usd_per_hour:sum_by_namespace"]
    assert cost["expr"].startswith("sum by (namespace) (max by (namespace, pod, container, node) "
                                   "(kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"})")


def test_gke_debug_containers_cannot_mount_the_whole_filesystem() -> None:
    graph = offline_run("prod-gcp").graph
    policy = next(p for p in _objects(graph, "ValidatingAdmissionPolicy")
                  if p["metadata"]["name"] == "gpu-cluster-shared-fs-subpath")
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {(tuple(r["operations"]), tuple(r["resources"])) for r in rules} == {
        (("CREATE",), ("pods",)), (("UPDATE",), ("pods/ephemeralcontainers",))}
    pod = {"spec": {"volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "shared-fs"}}],
                    "containers": [{"name": "t", "image": "nvcr.io/x", "volumeMounts": [
                        {"name": "ckpt", "mountPath": "/c", "subPath": "research"}]}],
                    "ephemeralContainers": [{"name": "debug", "image": "nvcr.io/x", "volumeMounts": [
                        {"name": "ckpt", "mountPath": "/all"}]}]}}
    assert _cel(policy, pod, "research") == ["ephemeral containers cannot mount the shared-fs claim (they cannot "
                                              "take a subPath)"]
    del pod["spec"]["ephemeralContainers"]
    assert _cel(policy, pod, "research") == []
