"""What a pod names that the cluster must hold: its PriorityClass, RuntimeClass, scheduler and DRA claims.

- ``priorityClassName``: the Priority admission plugin refuses a pod whose class does not exist ("no PriorityClass
  with name ... was found"). Every cluster has ``system-cluster-critical`` and ``system-node-critical`` (Kubernetes
  "Pod Priority and Preemption"); the others are the stack's PriorityClass objects and any the cloud provides. Where
  the cloud limits the two critical classes to namespaces with a quota scoped to them (GKE: its kube-system quota, then
  Kubernetes "Resource Quotas", "Limit Priority Class consumption by default"), a pod elsewhere needs such a quota.
- ``runtimeClassName``: the RuntimeClass admission plugin refuses a pod whose RuntimeClass does not exist ("pod
  rejected: RuntimeClass ... not found", Kubernetes "Runtime Class"). The stack's RuntimeClass objects count, the GPU
  Operator's (``operator.runtimeClass``, default ``nvidia``) where its container toolkit runs (it configures that
  runtime handler), and the cloud's (GKE: ``gvisor`` only where a node pool runs GKE Sandbox).
- ``schedulerName``: a pod that names a scheduler nothing runs is accepted and stays Pending forever: the default
  scheduler only takes pods named ``default-scheduler`` (Kubernetes "Configure Multiple Schedulers").
- ``resourceClaims`` (Dynamic Resource Allocation): a claim made from a ResourceClaimTemplate the namespace does not
  have, or naming a ResourceClaim it does not have, is never allocated and the pod stays Pending; without a DRA driver
  and its DeviceClasses in the stack no claim is allocated at all (Kubernetes "Dynamic Resource Allocation").
"""

from __future__ import annotations

from blueprint.admit.cloud import cloud_admit, cluster_cloud
from blueprint.admit.cluster import ClusterView, as_list, as_mapping
from blueprint.admit.workloads import PodSet

Problem = tuple[str, str, str]
KUBERNETES_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
DEFAULT_SCHEDULER = "default-scheduler"
TENANT_LABEL = "gpu-cluster/tenant"  # components/kubernetes/objects/common.py
GPU_OPERATOR_RUNTIME_CLASS = "nvidia"  # the chart's operator.runtimeClass default (gpu-operator values.yaml)


def priority_classes(view: ClusterView) -> dict[str, str]:
    """Every PriorityClass the cluster has, with where it comes from."""
    out = {name: "every cluster's, Kubernetes \"Pod Priority and Preemption\"" for name in KUBERNETES_PRIORITY_CLASSES}
    cloud = cluster_cloud(view)
    if cloud is not None:
        out.update(cloud_admit(cloud).provided_priority_classes(view))
    out.update({pc.name: pc.ref for pc in view.of_kind("PriorityClass")})
    return out


def runtime_classes(view: ClusterView) -> dict[str, str]:
    """Every RuntimeClass the cluster has, with where it comes from."""
    out: dict[str, str] = {}
    operator = view.release(("gpu-operator",))
    if operator is not None and as_mapping(operator.values.get("toolkit")).get("enabled") is not False:
        name = as_mapping(operator.values.get("operator")).get("runtimeClass") or GPU_OPERATOR_RUNTIME_CLASS
        out[str(name)] = f"{operator.ref}, its container toolkit"
    cloud = cluster_cloud(view)
    if cloud is not None:
        out.update(cloud_admit(cloud).provided_runtime_classes(view))
    out.update({rc.name: rc.ref for rc in view.of_kind("RuntimeClass")})
    return out


def scheduler_names(view: ClusterView) -> dict[str, str]:
    """The schedulers that run: kube-scheduler, and a second scheduler a Helm release of the stack deploys (its
    ``scheduler.name`` value, else the release's name)."""
    out = {DEFAULT_SCHEDULER: "kube-scheduler, every cluster's"}
    for release in view.releases:
        if release.mentions(("scheduler-plugins", "secondary-scheduler")) or (
                release.mentions(("scheduler",)) and not release.mentions(("autoscaler",))):
            name = as_mapping(release.values.get("scheduler")).get("name") or release.name
            out[str(name)] = release.ref
    return out


def dra_drivers(view: ClusterView) -> list[str]:
    """What sets up Dynamic Resource Allocation in the stack: DeviceClasses and DRA driver releases."""
    releases = [r.ref for r in view.releases if r.mentions(("dra-driver",))]
    return [dc.ref for dc in view.of_kind("DeviceClass")] + releases


def _listed(names: dict[str, str]) -> str:
    return "; ".join(f"{name} ({source})" for name, source in sorted(names.items()))


def admission_problems(view: ClusterView, namespace: str, pod_set: PodSet, refused: str) -> list[Problem]:
    """What the API server's admission plugins refuse in the pod's references (priority and runtime class);
    ``refused`` says what is refused (the object, or the pods its controller creates)."""
    spec = pod_set.spec
    problems: list[Problem] = []
    priority = spec.get("priorityClassName")
    if isinstance(priority, str) and priority:
        known = priority_classes(view)
        # In a team namespace the stack's policies refuse every class it does not offer teams (objects/tenancy.py
        # team_priority_policy), so adding one to the stack is no fix there.
        team = (view.namespace_labels(namespace) or {}).get(TENANT_LABEL) == "true"
        if priority not in known:
            problems.append((f"PriorityClass/{priority}", "priority-class-exists",
                             f"pod set {pod_set.name} names priorityClassName {priority}, which the cluster does not "
                             f"have (the Priority admission plugin refuses {refused}: \"no PriorityClass with name "
                             f"{priority} was found\"); its PriorityClasses: {_listed(known)}. Drop the field (team "
                             "work is ordered by Kueue's WorkloadPriorityClasses: the kueue.x-k8s.io/priority-class "
                             f"label){'' if team else ', or add the PriorityClass to the stack'}"))
        elif priority in KUBERNETES_PRIORITY_CLASSES and namespace != "kube-system":
            problems += _critical_quota(view, namespace, pod_set, priority)
    runtime = spec.get("runtimeClassName")
    if isinstance(runtime, str) and runtime:
        known = runtime_classes(view)
        cloud = cluster_cloud(view)
        why = cloud_admit(cloud).RUNTIME_CLASS_NOTES.get(runtime, "") if cloud is not None else ""
        if runtime not in known:
            problems.append((f"RuntimeClass/{runtime}", "runtime-class-exists",
                             f"pod set {pod_set.name} names runtimeClassName {runtime}, which the cluster does not "
                             f"have (the RuntimeClass admission plugin refuses {refused}: \"RuntimeClass {runtime} "
                             f"not found\"); its RuntimeClasses: {_listed(known) or 'none'}{'; ' + why if why else ''}"
                             ". Drop the field (the "
                             "nodes' default runtime runs GPU containers here), or add the RuntimeClass to the stack"))
    return problems


def _critical_quota(view: ClusterView, namespace: str, pod_set: PodSet, priority: str) -> list[Problem]:
    cloud = cluster_cloud(view)
    if cloud is None or not cloud_admit(cloud).LIMITS_CRITICAL_PRIORITY:
        return []
    for quota in view.of_kind("ResourceQuota", namespace):
        for expr in as_list(as_mapping(quota.spec.get("scopeSelector")).get("matchExpressions")):
            expr = as_mapping(expr)
            if expr.get("scopeName") == "PriorityClass" and expr.get("operator") == "In" \
                    and priority in as_list(expr.get("values")):
                return []
    return [(f"Namespace/{namespace}", "priority-class-quota",
             f"pod set {pod_set.name} runs at {priority}, which this cluster lets pods use only in namespaces with a "
             f"ResourceQuota scoped to it (GKE's kube-system quota; Kubernetes \"Resource Quotas\", \"Limit Priority "
             f"Class consumption by default\"), and namespace {namespace} has none: the pods are refused. Drop "
             "priorityClassName: team work is ordered by Kueue's WorkloadPriorityClasses")]


def scheduling_problems(view: ClusterView, namespace: str, pod_set: PodSet) -> list[Problem]:
    """What leaves the pods Pending although the API server accepts them: a scheduler nothing runs, a DRA claim that
    is never allocated."""
    spec = pod_set.spec
    problems: list[Problem] = []
    scheduler = spec.get("schedulerName")
    if isinstance(scheduler, str) and scheduler:
        known = scheduler_names(view)
        if scheduler not in known:
            problems.append((f"Pod/{pod_set.name}", "scheduler-name",
                             f"pod set {pod_set.name} names schedulerName {scheduler}, which no scheduler of the "
                             f"cluster serves (its schedulers: {_listed(known)}): the pods are accepted and stay "
                             "Pending; drop the field"))
    claims = [as_mapping(c) for c in as_list(spec.get("resourceClaims"))]
    if not claims:
        return problems
    drivers = dra_drivers(view)
    if not drivers:
        names = ", ".join(str(c.get("name")) for c in claims)
        problems.append((f"Pod/{pod_set.name}", "dra-not-set-up",
                         f"pod set {pod_set.name} claims devices through Dynamic Resource Allocation "
                         f"(spec.resourceClaims: {names}), and the stack sets up no DRA driver and no DeviceClass: "
                         "nothing allocates the claims and the pods stay Pending. Ask for the devices as extended "
                         "resources (resources.limits, e.g. nvidia.com/gpu), as the stack's device plugins offer them"))
        return problems
    for claim in claims:
        for field, kind in (("resourceClaimTemplateName", "ResourceClaimTemplate"),
                            ("resourceClaimName", "ResourceClaim")):
            name = claim.get(field)
            if isinstance(name, str) and name and view.get(kind, name, namespace) is None:
                present = ", ".join(sorted(o.name for o in view.of_kind(kind, namespace))) or "none"
                problems.append((f"{kind}/{namespace}/{name}", "resource-claim",
                                 f"pod set {pod_set.name} claim {claim.get('name')} names {kind} {name}, which is not "
                                 f"in namespace {namespace} (its {kind}s: {present}): the claim is never allocated "
                                 f"and the pods stay Pending; name one of those, or add it to the stack"))
    return problems
