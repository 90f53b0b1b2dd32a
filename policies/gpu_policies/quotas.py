"""Quotas: GPUs are handed out through queues with quotas, never first come, first served."""

from __future__ import annotations

from typing import Any

from pulumi_policy import ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    SYSTEM_NAMESPACES_KNOB,
    Knob,
    Reporter,
    get,
    is_gpu_node_group,
    k8s_name,
    k8s_namespace,
    of_type,
    path,
    resource_policy,
    seen,
    stack_policy,
    team_namespaces,
)

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
GPU = "nvidia.com/gpu"


def _quantity(value: Any) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def _gpu_quota(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    # GPUs scheduled by Slurm instead: a Slinky NodeSet holding GPUs, whose accounts carry the teams' GPU limits.
    if any(get(ns.props, "spec", "slurmd", "resources", "limits", GPU) for ns in
           of_type(args.resources, "kubernetes:slinky.slurm.net/v1beta1:NodeSet")):
        return
    first: tuple[Any, tuple[str | int, ...]] | None = None  # the first team queue that lists GPUs, at its quota
    # By URN: the engine registers resources in the order their inputs resolve, which varies between runs.
    for cq in sorted(of_type(args.resources, KUEUE + "ClusterQueue"), key=lambda r: str(r.urn)):
        if get(cq.props, "metadata", "labels", "gpu-cluster/acceptance") == "true":
            continue  # the acceptance gate's queue, not a team's
        for g, group in enumerate(get(cq.props, "spec", "resourceGroups", default=[]) or []):
            for f, flavor in enumerate(group.get("flavors") or []):
                for r, res in enumerate(flavor.get("resources") or []):
                    if res.get("name") != GPU:
                        continue
                    if _quantity(res.get("nominalQuota")) > 0:
                        return
                    if first is None:
                        first = (cq, ("spec", "resourceGroups", g, "flavors", f, "resources", r, "nominalQuota"))
    message = ("The stack must define a Kueue ClusterQueue with a nominal nvidia.com/gpu quota above zero (or Slurm "
               "NodeSets holding GPUs), so GPUs are admitted through queues.")
    if first is None:  # no field: no team's queue lists GPUs, so no single input is at fault
        report(message)
        return
    cq, field = first
    report(message, cq.urn, field=path(*field), value=seen(cq.props, *field))


cluster_queue_gpu_quota = stack_policy(
    "kueue-cluster-queue-requires-gpu-quota", "quotas",
    "The stack has a Kueue ClusterQueue with a nominal GPU quota.",
    "List the teams with their GPU quotas in gpu-cluster:spec.teams; each gets a ClusterQueue.",
    Severity.HIGH, _gpu_quota,
)


def _team_objects(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    required = {
        "LocalQueue": KUEUE + "LocalQueue",
        "ResourceQuota": "kubernetes:core/v1:ResourceQuota",
        "LimitRange": "kubernetes:core/v1:LimitRange",
    }
    # One pass over the stack: which namespaces have each kind (a scan per namespace is quadratic).
    present: dict[str, set[str]] = {type_: set() for type_ in required.values()}
    for r in args.resources:
        if r.resource_type in present:
            present[r.resource_type].add(k8s_namespace(r.props))
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        name = k8s_name(ns.props)
        missing = [kind for kind, type_ in required.items() if name not in present[type_]]
        if missing:
            # No field: the namespace lacks whole resources, no input of its own is wrong.
            report(f"Team namespace {name} must have a Kueue LocalQueue, a ResourceQuota and a LimitRange; "
                   f"missing: {', '.join(missing)}.", ns.urn)


team_namespace_quotas = stack_policy(
    "team-namespaces-require-queue-and-quotas", "quotas",
    "Every team namespace has a LocalQueue, a ResourceQuota and a LimitRange.",
    "Give the team a quota in gpu-cluster:spec.teams; the program creates all three objects.",
    Severity.HIGH, _team_objects, [SYSTEM_NAMESPACES_KNOB],
)

# At most the largest cluster EKS runs (100,000 nodes, "Amazon EKS enables ultra scale AI/ML workloads with support
# for 100K nodes per cluster", 2025-07-16): a cap above it caps nothing.
MAX_NODES = Knob("maxNodes", {"type": "integer", "minimum": 1, "maximum": 100_000}, 64)


def _max_size(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/nodeGroup:NodeGroup" or not is_gpu_node_group(args.props):
        return
    size = get(args.props, "scalingConfig", "maxSize", default=0)
    if float(size) > cfg["maxNodes"]:
        report(f"GPU node group {args.props.get('nodeGroupName', args.name)} must not scale beyond "
               f"{cfg['maxNodes']} nodes; maxSize is {int(float(size))}.", field="scalingConfig.maxSize", value=size)


gpu_node_group_cap = resource_policy(
    "aws-eks-gpu-nodegroup-max-size-cap", "quotas",
    "GPU node groups cannot scale past a configured cap, so a typo cannot rent a fleet.",
    "Lower maxSize, or raise maxNodes in the pack config after a capacity review.",
    Severity.MEDIUM, _max_size, [MAX_NODES],
)

# Project roles that give a group container.clusters.get (get-credentials) and container.clusters.connect (the DNS
# endpoint): Kubernetes Engine Cluster Viewer is the least of them.
GKE_ACCESS_ROLES = ("roles/container.clusterViewer", "roles/container.viewer", "roles/container.developer",
                    "roles/container.clusterAdmin", "roles/container.admin", "roles/viewer", "roles/editor",
                    "roles/owner")
EXTERNAL_GROUPS = Knob("groupsGrantedElsewhere", {"type": "array", "items": {"type": "string", "minLength": 1},
                                                  "uniqueItems": True}, [])
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"


def _teams_reach_gke(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    clusters = of_type(args.resources, "gcp:container/cluster:Cluster")
    if not clusters:
        return  # EKS teams come in through access entries (their own rules)
    # A conditional grant may be narrowed or expire: only unconditional ones count (or groups granted elsewhere).
    granted = {str(r.props.get("member")) for r in of_type(args.resources, "gcp:projects/iAMMember:IAMMember")
               if r.props.get("role") in GKE_ACCESS_ROLES and not r.props.get("condition")}
    granted |= {f"group:{g}" for g in cfg["groupsGrantedElsewhere"]}
    # GKE passes a Google Group to RBAC only with Google Groups for RBAC (authenticatorGroupsConfig.securityGroup).
    groups_for_rbac = all(get(c.props, "authenticatorGroupsConfig", "securityGroup") for c in clusters)
    groups: dict[str, list[str]] = {}
    for rb in of_type(args.resources, ROLE_BINDING):
        for subject in get(rb.props, "subjects") or []:
            if get(subject, "kind") == "Group":
                groups.setdefault(k8s_namespace(rb.props), []).append(str(get(subject, "name")))
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        name = k8s_name(ns.props)
        bound = groups.get(name, [])
        if not bound:  # no field: the namespace lacks a whole binding
            report(f"Team namespace {name} must bind a group to its Role, or nobody can act in it.", ns.urn)
        elif not any(f"group:{g}" in granted for g in bound):
            report(f"The group of team namespace {name} ({', '.join(bound)}) must hold a project role that reaches "
                   "the cluster (container.clusters.get for get-credentials, container.clusters.connect for the DNS "
                   "endpoint), unconditionally: grant it roles/container.clusterViewer, or list it in "
                   "groupsGrantedElsewhere when the grant is made outside the stack.", ns.urn)
        elif not groups_for_rbac:
            cluster = clusters[0]
            report(f"GKE cluster {cluster.props.get('name', cluster.name)} must turn on Google Groups for RBAC "
                   f"(authenticatorGroupsConfig.securityGroup = gke-security-groups@<domain>), or the group of team "
                   f"namespace {name} ({', '.join(bound)}) never reaches RBAC and its members can do nothing there.",
                   cluster.urn, field=path("authenticatorGroupsConfig", "securityGroup"),
                   value=seen(cluster.props, "authenticatorGroupsConfig", "securityGroup"))


teams_reach_gke = stack_policy(
    "gcp-teams-reach-the-cluster", "quotas",
    "On GKE, every team's group can reach the cluster: a project role with get-credentials and the DNS endpoint.",
    "Give the team its Google group (gpu-cluster:spec.teams[].group): the stack grants it Kubernetes Engine Cluster "
    "Viewer (components/gcp/security.py); or name groups granted outside the stack in groupsGrantedElsewhere.",
    Severity.HIGH, _teams_reach_gke, [SYSTEM_NAMESPACES_KNOB, EXTERNAL_GROUPS],
)

POLICIES = [cluster_queue_gpu_quota, team_namespace_quotas, gpu_node_group_cap, teams_reach_gke]
