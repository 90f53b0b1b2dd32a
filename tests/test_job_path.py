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
    assert len(bindings) >= 3
    for binding in bindings:
        assert cluster.urn in binding.dependencies, f"{binding.name} does not wait for the Workload Identity pool"


@pytest.mark.parametrize("stack_name", [*AWS_STACKS, *GCP_STACKS])
def test_namespace_defaults_do_not_kill_a_training_container(stack_name: str) -> None:
    """A container that sets only its GPU limit gets the memory of the largest node its queue reaches as its limit
    (not 8 GiB), and no CPU limit; its requests are still counted (500m, 1 GiB)."""
    from components.spec.decisions import instance_catalog
    from tests.conftest import stack

    spec = stack(stack_name).spec
    catalog = instance_catalog(spec)
    groups = {g.name: g for g in (spec.aws_spec().node_groups if spec.cloud == "aws" else spec.gcp_spec().node_pools)}
    graph = offline_run(stack_name).graph
    for lr in graph.of_type("kubernetes:core/v1:LimitRange"):
        team = next(t for t in spec.teams if t.name == lr.inputs["metadata"]["namespace"])
        (limits,) = lr.inputs["spec"]["limits"]
        assert limits["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
        assert "cpu" not in limits.get("default", {})
        biggest = max(catalog[groups[q.node_group].instance_type].memory_gib.value or 0 for q in team.quotas)
        assert limits["default"]["memory"] == f"{biggest}Gi" and biggest >= 16, (team.name, biggest)
