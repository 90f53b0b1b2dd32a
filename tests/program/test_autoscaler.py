"""The Cluster Autoscaler on EKS: its pinned chart and image per Kubernetes minor, its IAM (Pod Identity, writes only on
opted-in groups of this cluster), which node groups it manages (open capacity with minSize < maxSize, never a
Capacity Block or ODCR group), the tags it reads to scale a group from zero, and what the preview says."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from blueprint.graph.model import GraphResource, ResourceGraph
from blueprint.graph.stackfile import load_stack
from components.aws.autoscaler import AUTOSCALE_TAG, autoscaler_policy
from components.aws.compute import autoscaler_tags
from components.bootstrap import accelerator_label
from components.catalog import load_aws_catalog, load_charts
from components.catalog.charts import cluster_autoscaler_image
from components.spec import NodeGroupSpec, is_autoscaled
from tests.conftest import offline_run, raw_stack_config, run_spec
from tests.inference.specs import without_serving

TAG = "aws:autoscaling/tag:Tag"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


def release(graph: ResourceGraph) -> GraphResource:
    (found,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "cluster-autoscaler"]
    return found


def asg_tags(graph: ResourceGraph) -> dict[str, dict[str, str]]:
    """Every node group's Auto Scaling group tags (by spec name), from the Tag resources beside it."""
    out: dict[str, dict[str, str]] = {}
    for ng in graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        name = ng.inputs["labels"]["gpu-cluster/node-group"]
        tags = [t for t in graph.children(ng.parent or "") if t.type == TAG]
        for t in tags:
            assert t.inputs["tag"]["propagateAtLaunch"] is False  # on the group only, never on its instances
            assert t.dependencies == [ng.urn]  # the node group's Auto Scaling group, through its output
        out[name] = {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in tags}
    return out


def test_the_chart_and_the_image_of_each_kubernetes_minor_are_pinned_with_their_source() -> None:
    pin = load_charts()["cluster-autoscaler"]
    assert (pin.repository, pin.chart, pin.version) == ("https://kubernetes.github.io/autoscaler",
                                                        "cluster-autoscaler", "9.59.0")
    assert "cluster-autoscaler-chart-9.59.0" in pin.source and pin.as_of == "2026-12-01"
    tags = {v: (cluster_autoscaler_image(v).tag if cluster_autoscaler_image(v) else None)  # type: ignore[union-attr]
            for v in ("1.33", "1.34", "1.35", "1.36", "1.37")}
    assert tags == {"1.33": None, "1.34": "v1.34.5", "1.35": "v1.35.2", "1.36": "v1.36.1", "1.37": None}
    image = cluster_autoscaler_image("1.36")
    assert image is not None and image.reference == "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.1"
    assert "cluster-autoscaler-1.36.1" in image.source


def test_the_release_runs_the_image_of_the_cluster_minor_on_the_system_group(dev_spec: dict[str, Any]) -> None:
    graph = offline_run("dev-aws").graph
    ca = release(graph)
    assert (ca.inputs["chart"], ca.inputs["version"], ca.inputs["namespace"]) == ("cluster-autoscaler", "9.59.0",
                                                                                  "kube-system")
    assert ca.inputs["repositoryOpts"] == {"repo": "https://kubernetes.github.io/autoscaler"}
    values = ca.inputs["values"]
    assert values["cloudProvider"] == "aws" and values["awsRegion"] == "us-west-2"
    assert values["image"] == {"repository": "registry.k8s.io/autoscaling/cluster-autoscaler", "tag": "v1.35.2"}
    assert values["autoDiscovery"] == {"clusterName": "dev-gpu", "tags": [
        "k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/dev-gpu", "gpu-cluster/autoscale=true"]}
    assert values["rbac"]["serviceAccount"] == {"create": True, "name": "cluster-autoscaler"}
    assert "awsAccessKeyID" not in values  # Pod Identity
    # CA's default flags but the GPU nodes' readiness taints, which it leaves out of its node templates
    assert values["extraArgs"] == {"startup-taint": "readiness.k8s.io/gpu-node-check",
                                   "status-taint": "readiness.k8s.io/gpu-health"}
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": "gpu-cluster/node-group", "operator": "In", "values": ["system"]}]}
    assert "tolerations" not in values  # the GPU taint keeps it off GPU nodes
    assert values["containerSecurityContext"]["readOnlyRootFilesystem"] is True
    # It starts only once its Pod Identity association exists (a pod started before gets no credentials).
    (association,) = [r for r in graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if r.inputs["serviceAccount"] == "cluster-autoscaler"]
    assert association.inputs["namespace"] == "kube-system" and ca.dependencies == [association.urn]
    dev_spec["aws"]["controlPlane"]["kubernetesVersion"] = "1.36"
    assert release(run_spec(dev_spec).graph).inputs["values"]["image"]["tag"] == "v1.36.1"


def test_its_role_scales_only_opted_in_groups_of_this_cluster() -> None:
    assert autoscaler_policy("dev-gpu") == {"Version": "2012-10-17", "Statement": [
        {"Sid": "DiscoverNodeGroups", "Effect": "Allow", "Resource": "*", "Action": [
            "autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
            "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities", "ec2:DescribeImages",
            "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
            "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup"]},
        {"Sid": "ScaleOptedInNodeGroups", "Effect": "Allow", "Resource": "*",
         "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
         "Condition": {"StringEquals": {"autoscaling:ResourceTag/gpu-cluster/autoscale": "true",
                                        "autoscaling:ResourceTag/eks:cluster-name": "dev-gpu"}}}]}
    graph = offline_run("dev-aws").graph
    (policy,) = [r for r in graph.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "autoscaler-policy"]
    assert json.loads(policy.inputs["policy"]) == autoscaler_policy("dev-gpu")
    (role,) = [r for r in graph.of_type("aws:iam/role:Role") if r.name == "autoscaler-role"]
    (trust,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "cluster-autoscaler"


@pytest.mark.parametrize(("stack", "managed", "left"), [
    ("dev-aws", {"l4", "system"}, set()),
    # the served model's group (2..4 with its replicas); left: a Capacity Block group, the teams' cpu group (fixed)
    ("prod-aws", {"system", "l40s"}, {"h100", "cpu"}),
    ("byo-aws", {"system"}, {"a100"}),  # an ODCR group
])
def test_only_open_capacity_groups_with_room_to_scale_are_opted_in(stack: str, managed: set[str],
                                                                   left: set[str]) -> None:
    tags = asg_tags(offline_run(stack).graph)
    assert {g for g, t in tags.items() if t.get(AUTOSCALE_TAG) == "true"} == managed
    assert all(tags[g] == {} for g in left)  # not even a node-template tag


def test_the_l4_group_tells_the_autoscaler_what_its_nodes_offer() -> None:
    """From 0 nodes (and once it has had nodes, from its tags alone): the Kueue flavor's node label, the GPU taint and
    label, four time-sliced GPU units per L4 and the root volume as ephemeral storage."""
    tags = asg_tags(offline_run("dev-aws").graph)
    assert tags["l4"] == {
        AUTOSCALE_TAG: "true",
        f"{TEMPLATE}/label/gpu-cluster/node-group": "l4",
        f"{TEMPLATE}/label/gpu-cluster/instance-type": "g6.xlarge",
        f"{TEMPLATE}/label/gpu-cluster/gpu-count": "1",
        f"{TEMPLATE}/label/k8s.amazonaws.com/accelerator": "nvidia-l4",
        f"{TEMPLATE}/taint/nvidia.com/gpu": "true:NoSchedule",
        f"{TEMPLATE}/resources/nvidia.com/gpu": "4",
        f"{TEMPLATE}/resources/ephemeral-storage": "200Gi",
    }
    graph = offline_run("dev-aws").graph
    (flavor,) = [r for r in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
                 if r.inputs["metadata"]["name"] == "l4"]
    # The flavor's node labels are in the template, so an admitted l4 pod grows l4 and nothing else.
    assert all(tags["l4"][f"{TEMPLATE}/label/{k}"] == v for k, v in flavor.inputs["spec"]["nodeLabels"].items())
    # No ProvisioningRequest on AWS: Kueue admits by quota, the pods go pending, the autoscaler grows the group.
    assert not graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ProvisioningRequestConfig")


def test_every_gpu_node_carries_the_autoscalers_gpu_label() -> None:
    assert [accelerator_label(m) for m in ("NVIDIA L4 24GB", "NVIDIA A100 80GB", "NVIDIA A10G 24GB",
                                           "NVIDIA L40S 48GB", "NVIDIA H100 80GB", "NVIDIA B200", None)] == [
        "nvidia-l4", "nvidia-tesla-a100", "nvidia-a10g", "nvidia-l40s", "nvidia-h100", "nvidia-b200", None]
    groups = {g.inputs["labels"]["gpu-cluster/node-group"]: g.inputs["labels"]
              for stack in ("prod-aws", "byo-aws") for g in offline_run(stack).graph.of_type(
                  "aws:eks/nodeGroup:NodeGroup")}
    assert groups["h100"]["k8s.amazonaws.com/accelerator"] == "nvidia-h100"
    assert groups["a100"]["k8s.amazonaws.com/accelerator"] == "nvidia-tesla-a100"
    assert "k8s.amazonaws.com/accelerator" not in groups["system"]


def test_an_efa_group_on_spot_gets_its_efa_interfaces_and_raid0_disk_in_the_template() -> None:
    p5 = load_aws_catalog()["p5.48xlarge"]
    group = NodeGroupSpec.model_validate({"name": "p5", "instanceType": "p5.48xlarge", "minSize": 0, "desiredSize": 0,
                                          "maxSize": 2, "capacity": {"type": "spot"}, "placement": "none"})
    tags = autoscaler_tags(group, p5, gpu_units_per_gpu=1)
    assert tags[f"{TEMPLATE}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{TEMPLATE}/resources/ephemeral-storage"] == "30400G"  # 8 x 3,800 GB NVMe in RAID0
    assert f"{TEMPLATE}/resources/nvidia.com/gpu" not in tags  # whole GPUs: CA's own count from the instance type
    assert tags[f"{TEMPLATE}/label/gpu-cluster/efa-interfaces"] == "32"
    no_raid = group.model_copy(update={"local_nvme": "none", "root_volume_gib": 500})
    assert autoscaler_tags(no_raid, p5, 1)[f"{TEMPLATE}/resources/ephemeral-storage"] == "500Gi"
    # Bottlerocket leaves the NVMe alone: pods' storage is its data volume, which rootVolumeGiB sizes.
    bottlerocket = group.model_copy(update={"ami_type": "BOTTLEROCKET_x86_64_NVIDIA", "root_volume_gib": 400})
    assert autoscaler_tags(bottlerocket, p5, 1)[f"{TEMPLATE}/resources/ephemeral-storage"] == "400Gi"
    # efaInterfaces wires fewer: the template offers what the launch template wires, not what the type could.
    fewer = autoscaler_tags(group.model_copy(update={"efa_interfaces": 4}), p5, 1)
    assert fewer[f"{TEMPLATE}/resources/vpc.amazonaws.com/efa"] == "4"
    assert fewer[f"{TEMPLATE}/label/gpu-cluster/efa-interfaces"] == "4"
    for capacity in ({"type": "capacity-block", "reservationId": "cr-0a1b2c3d4e5f60718"},
                     {"type": "reserved", "reservationId": "cr-0a1b2c3d4e5f60718"}):
        reserved = NodeGroupSpec.model_validate({**group.model_dump(by_alias=True), "capacity": capacity})
        assert not is_autoscaled(reserved, p5) and autoscaler_tags(reserved, p5, 1) == {}
    fixed = group.model_copy(update={"min_size": 2, "desired_size": 2})
    assert not is_autoscaled(fixed, p5) and autoscaler_tags(fixed, p5, 1) == {}
    # In a placement group its Kueue flavor is topology-aware: Kueue would not queue work for nodes that do not exist.
    placed = group.model_copy(update={"placement": "auto"})
    assert not is_autoscaled(placed, p5) and autoscaler_tags(placed, p5, 1) == {}


def preview(stack: str) -> str:
    from blueprint.preview.render import render_preview

    run = offline_run(stack)
    return render_preview(run.graph, load_stack(stack).spec, f"stacks/Pulumi.{stack}.yaml", run.outputs)


def test_the_preview_says_what_the_autoscaler_manages_and_leaves_alone() -> None:
    dev = preview("dev-aws")
    assert ("node autoscaler: Cluster Autoscaler v1.35.2 (chart cluster-autoscaler 9.59.0, kube-system, on node "
            "group(s) system); it discovers and may scale only Auto Scaling groups tagged gpu-cluster/autoscale=true "
            "in this cluster (its IAM role, through EKS Pod Identity, too)") in dev
    assert ("manages l4: 0..2 nodes (spot, desired 0 at creation, then the autoscaler's); from 0 nodes it reads the "
            "group's labels, taints and ephemeral-storage 200Gi, nvidia.com/gpu 4 from its tags") in dev
    prod = preview("prod-aws")
    assert ("leaves alone h100: Capacity Block: its window's schedule scales it (to 16 at the start; EKS scales it to "
            "0 40 minutes before the end), and an autoscaler would launch outside the window") in prod
    byo = preview("byo-aws")
    assert "leaves alone a100: reserved (ODCR): it holds what was reserved (0/4/4)" in byo


def test_a_placed_efa_group_on_demand_keeps_its_size_and_the_preview_says_why(prod_spec: dict[str, Any]) -> None:
    """prod-aws's h100 group moved to on-demand capacity gets a cluster placement group, so its Kueue flavor is
    topology-aware: it is not autoscaled (no opt-in tag), and with a placement of none it is."""
    from blueprint.preview.render import render_preview
    from components.spec import parse_spec

    h100 = next(g for g in prod_spec["aws"]["nodeGroups"] if g["name"] == "h100")
    h100["capacity"] = {"type": "on-demand"}
    spec = parse_spec(prod_spec, "stacks/Pulumi.prod-aws.yaml", provider_region="us-east-1")
    run = run_spec(prod_spec)
    assert asg_tags(run.graph)["h100"] == {}
    text = render_preview(run.graph, spec, "stacks/Pulumi.prod-aws.yaml", run.outputs)
    assert ("leaves alone h100: placed multi-node EFA group: its Kueue flavor is topology-aware and Kueue assigns a "
            "topology over the nodes that exist (without a ProvisioningRequest check), so an autoscaler would shrink "
            "it and never grow it back; it keeps its desired size 0 (set minSize = maxSize to say so)") in text
    h100["placement"] = "none"
    tags = asg_tags(run_spec(prod_spec).graph)["h100"]
    assert tags[AUTOSCALE_TAG] == "true" and tags[f"{TEMPLATE}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{TEMPLATE}/resources/ephemeral-storage"] == "30400G"


def pods_ready_timeout(graph: ResourceGraph) -> str:
    """waitForPodsReady's timeout in the Kueue release's controller configuration."""
    (kueue,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    config = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    timeout: str = config["waitForPodsReady"]["timeout"]
    return timeout


@pytest.mark.parametrize(("stack", "timeout"), [
    ("dev-aws", "25m"),   # l4 0..2, autoscaled by CA: the pods wait for a node to launch and join
    ("dev-gcp", "25m"),   # the Spot GPU pool 0..2, autoscaled by GKE
    # A Capacity Block, scaled by its schedule before jobs run, and the teams' cpu group fixed; but the served model's
    # group grows with its replicas: a node's boot (15), the image and GPU stack (10), the startup probe's 10 minutes.
    ("prod-aws", "35m"),
    ("byo-aws", "10m"),   # an ODCR group at its size
    ("prod-gcp", "35m"),  # a reservation pool at its size, the teams' cpu pool fixed; the served model's as prod-aws's
])
def test_pods_have_longer_to_get_ready_where_nodes_come_after_admission(stack: str, timeout: str) -> None:
    """Kueue evicts an admitted workload whose pods are not ready in time: where the autoscaler adds the nodes after
    admission, the timeout covers CA's 15-minute node provisioning bound and the image pull after it."""
    assert pods_ready_timeout(offline_run(stack).graph) == timeout


def test_a_flex_start_pool_keeps_the_short_timeout() -> None:
    """Flex-start nodes are provisioned before admission (the ProvisioningRequest check), so the pods only pull."""
    # The training cluster alone (the served model's replicas have their own allowance: tests/inference).
    spec = without_serving(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["nodePools"][1].update(minSize=0, desiredSize=0, capacity={"type": "flex-start", "maxRunHours": 72})
    assert pods_ready_timeout(run_spec(spec, "prod-gcp").graph) == "10m"


def test_desired_size_is_ignored_only_where_something_else_sets_it() -> None:
    """Pulumi keeps the desiredSize in its state for an ignored field and sends it with every scaling update: only
    groups CA manages or a Capacity Block's schedule scales ignore it; elsewhere the stack's desiredSize applies (a
    raised minSize on a fixed or ODCR group is sent with a desiredSize that fits it)."""
    def ignoring(graph: ResourceGraph) -> dict[str, bool]:
        return {ng.inputs["labels"]["gpu-cluster/node-group"]:
                "scalingConfig.desiredSize" in (ng.ignore_changes or [])
                for ng in graph.of_type("aws:eks/nodeGroup:NodeGroup")}

    assert ignoring(offline_run("dev-aws").graph) == {"system": True, "l4": True}  # both autoscaled (CA)
    assert ignoring(offline_run("prod-aws").graph) == {  # CA (system, and l40s with its served model); the block
        "system": True, "h100": True, "cpu": False, "l40s": True}
    assert ignoring(offline_run("byo-aws").graph) == {"system": True, "a100": False}  # an ODCR the stack sizes
    spec = raw_stack_config("dev-aws")["gpu-cluster:spec"]
    spec["aws"]["nodeGroups"][1].update(minSize=2, desiredSize=2, maxSize=2)  # fixed: nothing else sizes it
    assert ignoring(run_spec(spec, "dev-aws").graph) == {"system": True, "l4": False}
