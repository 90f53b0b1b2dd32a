"""Team namespaces and what makes them a tenant: Role and binding, quota backstop, defaults, network policies,
the checkpoint service account and policy, and the cluster-wide admission policies."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from components.kubernetes.objects.common import (
    MONITORING_NAMESPACE,
    POD_SECURITY_REASON_LABEL,
    PRIORITY_CLASSES,
    TENANT_LABEL,
    EgressRule,
    Manifest,
    meta,
)
from components.kubernetes.objects.egress import agent_egress, dns_egress, https_egress, network_policy
from components.kubernetes.objects.jobs import PUSHGATEWAY_PORT, pushgateway_pod_labels
from components.kubernetes.quotas import GPU, GpuPool, Resources
from components.spec import PRIVILEGED_NAMESPACES, TeamSpec


def team_labels(team: TeamSpec, billing: Mapping[str, str]) -> dict[str, str]:
    """Billing labels of a team's namespace: the stack's, with the team's own team and cost-center."""
    return {**billing, "team": team.name, "cost-center": team.cost_center}


def namespace(name: str, labels: Mapping[str, str], pod_security: str, tenant: bool = False,
              warn_level: str | None = None, gpudirect: bool = False) -> Manifest:
    """A namespace with billing labels and Pod Security Admission labels.

    Team namespaces enforce ``baseline`` (no privileged pods, no host namespaces) and warn/audit
    against ``restricted``; only the system namespaces that run node agents enforce ``privileged``, and namespaces
    whose pods need the GPUDirect host paths (``gpudirect``: teams' on GKE GPUDirect pools, the acceptance jobs'),
    which the per-container GPUDirect admission policy binds instead.
    """
    warn = warn_level or ("restricted" if pod_security != "privileged" else "privileged")
    all_labels = {
        **labels,
        "pod-security.kubernetes.io/enforce": pod_security,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/audit": warn,
        "pod-security.kubernetes.io/warn": warn,
    }
    if tenant:
        all_labels[TENANT_LABEL] = "true"
    if pod_security == "privileged" and (tenant or gpudirect):
        # Why the namespace is not at baseline, for the policy pack and for reviewers: the cloud's GPU networking
        # needs host paths and NET_ADMIN in training pods; the gpu-cluster-gpudirect-pod-limits admission policy binds
        # it by this label and bounds each container, and gpu-cluster-no-privileged-pods still refuses privileged ones.
        all_labels[POD_SECURITY_REASON_LABEL] = "gpudirect-sidecars"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name, labels=all_labels)}


def team_role(team: TeamSpec) -> Manifest:
    """What a team member may do in the team's namespace: run and inspect jobs, never change quotas."""
    run = ["get", "list", "watch", "create", "update", "patch", "delete"]
    read = ["get", "list", "watch"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta("team-member", team.name),
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "resourcequotas", "limitranges"],
             "verbs": read},
            {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["configmaps", "secrets", "services", "persistentvolumeclaims"],
             "verbs": run},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": run},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": run},
            # The job kinds whose controllers the platform runs (objects/controllers.py), and the team's own runtimes.
            {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs"], "verbs": run},
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": run},
            {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs", "trainingruntimes"], "verbs": run},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": read},
        ],
    }


TEAM_VIEWER = "gpu-cluster-team-viewer"


def team_viewer_role(teams: Sequence[TeamSpec]) -> list[Manifest]:
    """What every team member may read outside its namespace: the cluster-scoped objects a job names (the training
    runtimes a TrainJob refers to, the queues, flavors and priority classes its workload is admitted under). A Role
    cannot grant cluster-scoped kinds, and neither the Trainer nor the Kueue chart binds a viewer role to users, so
    without it ``kubectl get clustertrainingruntimes`` and the Trainer SDK's runtime listing return 403."""
    read = ["get", "list", "watch"]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(TEAM_VIEWER),
         "rules": [
             {"apiGroups": ["trainer.kubeflow.org"], "resources": ["clustertrainingruntimes"], "verbs": read},
             {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "resourceflavors", "cohorts",
                                                             "workloadpriorityclasses", "topologies"], "verbs": read},
             {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": read},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(TEAM_VIEWER),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TEAM_VIEWER},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": t.k8s_group}
                      for t in sorted(teams, key=lambda t: t.name)]},
    ]


def service_account(name: str, namespace: str, labels: Mapping[str, str], purpose: str) -> Manifest:
    """A service account whose AWS permissions come from an EKS Pod Identity association (no annotation
    is needed: the association names the namespace and service account)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {**meta(name, namespace, labels), "annotations": {"gpu-cluster/purpose": purpose}},
            "automountServiceAccountToken": True}


CHECKPOINT_POLICY_LABEL = "gpu-cluster/checkpoint-policy"


def checkpoint_policy(team: TeamSpec, billing: Mapping[str, str], data: Mapping[str, str]) -> Manifest:
    """The goodput model's checkpoint interval and figures where the team's jobs can read them
    (``envFrom: [{configMapRef: {name: checkpoint-policy}}]``), and the policy pack can check them."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta("checkpoint-policy", team.name,
                              {**team_labels(team, billing), CHECKPOINT_POLICY_LABEL: "true"}),
            "data": dict(sorted(data.items()))}


def team_role_binding(team: TeamSpec) -> Manifest:
    """Bind the team's Kubernetes group (mapped from IAM by access entries) to its Role."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta("team-member", team.name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team-member"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team.k8s_group}],
    }


def resource_quota(team: TeamSpec, hard: Resources, fabric_resource: str | None) -> Manifest:
    """A backstop under Kueue: the most the namespace can have admitted, never less."""
    limits = {
        f"requests.{GPU}": str(hard.gpu),
        "requests.cpu": str(hard.cpu),
        "requests.memory": f"{hard.memory_gib}Gi",
    }
    if fabric_resource is not None:
        limits[f"requests.{fabric_resource}"] = str(hard.fabric)
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("gpu-quota", team.name),
            "spec": {"hard": limits}}


def limit_range(team: TeamSpec, reachable: Sequence[GpuPool]) -> Manifest:
    """Defaults for containers that state no requests, so every pod is counted against the quota (500m CPU, 1 GiB).

    No default CPU limit (a training container throttled at 2 CPUs starves its data loaders), and the default memory
    limit is the memory of the largest node the namespace's queue can reach: a container that sets only its GPU
    limit is not OOM-killed at a small default, and one that requests more memory without a limit is not refused
    for exceeding it. The namespace stays bounded by its ResourceQuota and Kueue by its ClusterQueue."""
    limits: Manifest = {"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}
    memory = max((p.memory_gib_per_node for p in reachable if p.memory_gib_per_node), default=None)
    if memory:
        limits["default"] = {"memory": f"{memory}Gi"}
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta("defaults", team.name),
            "spec": {"limits": [limits]}}


def network_policies(team: TeamSpec, allow_https_egress: bool,
                     extra_egress: Sequence[EgressRule] = (),
                     anywhere: Sequence[str] = ("0.0.0.0/0",), push_metrics: bool = False) -> list[Manifest]:
    """Default deny, then what a distributed training job needs: its own namespace (NCCL bootstrap,
    MPI launchers), DNS, the metrics scraper, optionally HTTPS egress (S3 checkpoints) and, with ``push_metrics``,
    the team's own Pushgateway its jobs push checkpoint durations to (whose NetworkPolicy admits this namespace
    only: objects/jobs.py pushgateway_network_policy).

    EFA traffic bypasses the kernel network stack and is governed by the EFA security group instead.
    """
    ns = team.name

    def policy(name: str, spec: Manifest) -> Manifest:
        return network_policy(name, ns, spec)

    out = [
        policy("default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        policy("allow-same-namespace", {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
            "egress": [{"to": [{"podSelector": {}}]}],
        }),
        policy("allow-dns", {"podSelector": {}, "policyTypes": ["Egress"], "egress": [dns_egress()]}),
        policy("allow-metrics-scrape", {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": MONITORING_NAMESPACE}}}]}],
        }),
    ]
    for rule in extra_egress:  # what the cloud's node agents need (e.g. the credentials agent)
        out.append(policy(rule.name, {"podSelector": {}, "policyTypes": ["Egress"], "egress": [agent_egress(rule)]}))
    if push_metrics:
        out.append(policy("allow-metrics-push", {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": MONITORING_NAMESPACE}},
                "podSelector": {"matchLabels": pushgateway_pod_labels(ns)}}],
                "ports": [{"protocol": "TCP", "port": PUSHGATEWAY_PORT}]}],
        }))
    if allow_https_egress:
        out.append(policy("allow-https-egress", {"podSelector": {}, "policyTypes": ["Egress"],
                                                 "egress": [https_egress(anywhere)]}))
    return out


def pod_rules() -> list[Manifest]:
    return [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]


def registry_policy(allowed: Sequence[str]) -> list[Manifest]:
    """A ValidatingAdmissionPolicy (and binding) that admits team pods only from listed registries."""
    prefixes = "[" + ", ".join(json.dumps(p) for p in allowed) + "]"
    checks = []
    for field in ("containers", "initContainers", "ephemeralContainers"):
        guard = "" if field == "containers" else f"!has(object.spec.{field}) || "
        checks.append({
            "expression": f"{guard}object.spec.{field}.all(c, {prefixes}.exists(p, c.image.startsWith(p)))",
            "message": f"{field} images must come from an allowed registry: {', '.join(allowed)}",
            "reason": "Forbidden",
        })
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": meta("gpu-cluster-allowed-registries"),
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": pod_rules()},
                     "validations": checks},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": meta("gpu-cluster-allowed-registries"),
            "spec": {
                "policyName": "gpu-cluster-allowed-registries",
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}}},
            },
        },
    ]


def privileged_policy(cloud_namespaces: Sequence[str] = ()) -> list[Manifest]:
    """Refuse privileged containers everywhere but the system namespaces that run node agents (and those the cloud
    manages itself, which it may fill with privileged agents)."""
    def unprivileged(field: str) -> str:
        check = (f"object.spec.{field}.all(c, !has(c.securityContext) || "
                 "!has(c.securityContext.privileged) || !c.securityContext.privileged)")
        return check if field == "containers" else f"!has(object.spec.{field}) || {check}"

    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": meta("gpu-cluster-no-privileged-pods"),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": pod_rules()},
                "validations": [
                    {"expression": unprivileged(f), "reason": "Forbidden",
                     "message": f"privileged {f} run only in {', '.join(PRIVILEGED_NAMESPACES)}"}
                    for f in ("containers", "initContainers")
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": meta("gpu-cluster-no-privileged-pods"),
            "spec": {
                "policyName": "gpu-cluster-no-privileged-pods",
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": [*PRIVILEGED_NAMESPACES, *cloud_namespaces]}]}},
            },
        },
    ]


CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
# Their values (Kubernetes docs, "Pod Priority and Preemption": system-cluster-critical 2000000000,
# system-node-critical 2000001000), above every user-defined PriorityClass (at most 1000000000).
CRITICAL_PRIORITY_VALUES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
TEAM_PRIORITY_POLICY = "gpu-cluster-team-priority"
# The PriorityClasses (scheduling.k8s.io) the stack offers team pods: none. Team work is ordered by Kueue's
# WorkloadPriorityClasses (the kueue.x-k8s.io/priority-class label), which leave the pods' priority alone.
TEAM_PRIORITY_CLASSES: tuple[str, ...] = ()


def team_priority_policy(offered: Sequence[str] = TEAM_PRIORITY_CLASSES) -> list[Manifest]:
    """ValidatingAdmissionPolicies (and bindings) on team namespaces that refuse a ``priorityClassName`` the stack does
    not offer teams (``offered``; none): on pods, on the pod templates of the job kinds Kueue admits for teams (batch
    Job, Deployment, StatefulSet, JobSet, MPIJob and its ``spec.runPolicy.schedulingPolicy.priorityClass``:
    controllers.KUEUE_FRAMEWORKS), of the kinds the team Role lets members make that hold such templates (batch
    CronJob, Kubeflow Trainer TrainingRuntime) and on Kueue's Workloads. On UPDATE a class the old object already
    named passes, so objects made before the policy still take Kueue's unsuspend and their finalizers' removal.

    Why: a pod of ``system-node-critical`` (2000001000) runs above everything on the node, where kube-scheduler evicts
    lower-priority pods of any namespace to place it (Kubernetes "Pod Priority and Preemption", "Preemption"); and a
    job that names a PriorityClass and no WorkloadPriorityClass gets that priority for its Workload too, so Kueue
    queues it ahead of, and preempts, the team's other work (Kueue docs, "Workload Priority Class", "The relationship
    between pod's priority and workload's priority": "A job specifies only PriorityClass: PriorityClass is used for
    the workload's priority").

    Why here and not a ResourceQuota: a quota scoped to the PriorityClass (Kubernetes "Resource Quotas", "Limit
    Priority Class consumption by default") counts pods only, and Kueue makes the Workload from the job's pod template
    (and may preempt for it) before any pod exists; the job kinds and the Workload are refused at creation, so the job
    never reaches a queue. The policies on the job kinds refuse the user's object with the reason; the one on
    Workloads holds whatever the job policies miss (a kind added later, a Workload made directly), since Kueue creates
    every Workload in the job's namespace. TrainJob needs none: it names no PriorityClass (trainer.kubeflow.org
    v1alpha1 schema); its runtime's templates may, and Kueue makes the TrainJob's Workload from them, so the Workload
    policy refuses it before the Trainer makes any JobSet (a namespaced TrainingRuntime is refused at creation by its
    own policy; a ClusterTrainingRuntime is the platform's). CronJobs and TrainingRuntimes are checked so the user
    sees the reason when writing them, not at each Job or TrainJob made from them. One policy per object shape, so
    each expression is type-checked against the one schema it reads (Kubernetes "Validating Admission Policy", "Type
    checking"). On GKE the critical classes are also limited to namespaces with a quota scoped to them
    (critical_priority_quota); that does not reach other classes, Workloads or EKS.

    A PriorityClass with ``globalDefault: true`` would make the Priority admission plugin give its name to every pod
    that names none (Kubernetes "Pod Priority and Preemption", "PriorityClass": globalDefault), and the pods policy
    would then refuse every team pod. The stack makes no PriorityClass; one added to it (or to the cluster) must not
    be a global default, or must be in ``offered``.
    """
    allowed = json.dumps(sorted(set(offered)))
    offers = f"the stack offers teams {', '.join(sorted(set(offered)))}" if offered else \
        "the stack offers teams none"
    wpcs = ", ".join(name for name, _, _ in PRIORITY_CLASSES)
    message = (f"team pods take no PriorityClass ({offers}): priorityClassName system-node-critical "
               f"({CRITICAL_PRIORITY_VALUES['system-node-critical']}) or system-cluster-critical "
               f"({CRITICAL_PRIORITY_VALUES['system-cluster-critical']}), or any other class, would run the pods "
               "above other teams' pods, which kube-scheduler evicts from a node to place them, and give the job's "
               "Kueue Workload that priority, which queues it ahead of and preempts the team's other work; drop "
               "priorityClassName (and spec.runPolicy.schedulingPolicy.priorityClass on an MPIJob) and set the "
               f"kueue.x-k8s.io/priority-class label ({wpcs}) instead")

    def fine(spec: str) -> str:
        return f"(!has({spec}.priorityClassName) || {spec}.priorityClassName in {allowed})"

    def rule(group: str, version: str, resources: list[str], operations: list[str]) -> Manifest:
        return {"apiGroups": [group], "apiVersions": [version], "operations": operations, "resources": resources}

    def named(spec: str, guards: Sequence[str] = ()) -> str:
        """The class a pod spec names, as a list (empty when none), each optional field on the way guarded."""
        return f"({' && '.join([*guards, f'has({spec}.priorityClassName)'])} ? [{spec}.priorityClassName] : [])"

    def listed(items: str, var: str, spec: str, guards: Sequence[str]) -> str:
        """The classes the pod specs of a list (or a map's values) name."""
        present = " && ".join([*guards, f"has({spec}.priorityClassName)"])
        return f"{items}.filter({var}, {present}).map({var}, {spec}.priorityClassName)"

    def classes(o: str, kind: str) -> str:
        """The PriorityClasses object ``o`` (``object`` or ``oldObject``) of one shape names, as a CEL list."""
        if kind == "templates":
            return named(f"{o}.spec.template.spec", [f"has({o}.spec.template.spec)"])
        if kind == "cronjobs":  # batch/v1 CronJob: spec.jobTemplate.spec.template.spec
            return named(f"{o}.spec.jobTemplate.spec.template.spec",
                         [f"has({o}.spec.jobTemplate.spec)", f"has({o}.spec.jobTemplate.spec.template.spec)"])
        if kind == "jobsets":
            return (f"(has({o}.spec.replicatedJobs) ? "
                    + listed(f"{o}.spec.replicatedJobs", "r", "r.template.spec.template.spec",
                             ["has(r.template.spec)", "has(r.template.spec.template.spec)"]) + " : [])")
        if kind == "trainingruntimes":  # trainer.kubeflow.org v1alpha1: the JobSet template of a TrainingRuntime
            jobs = f"{o}.spec.template.spec.replicatedJobs"
            return (f"(has({o}.spec.template) && has({o}.spec.template.spec) && has({jobs}) ? "
                    + listed(jobs, "r", "r.template.spec.template.spec",
                             ["has(r.template.spec)", "has(r.template.spec.template)",
                              "has(r.template.spec.template.spec)"]) + " : [])")
        # mpijobs: Kueue reads .spec.runPolicy.schedulingPolicy.priorityClass first, then the launcher's and the
        # workers' templates (kueue pkg/controller/jobs/mpijob/mpijob_controller.go, MPIJob.PriorityClass()).
        replica = f"{o}.spec.mpiReplicaSpecs[k]"
        policy = f"{o}.spec.runPolicy.schedulingPolicy"
        return ("(" + listed(f"{o}.spec.mpiReplicaSpecs", "k", f"{replica}.template.spec",
                             [f"has({replica}.template)", f"has({replica}.template.spec)"])
                + f" + (has({o}.spec.runPolicy) && has({policy}) && has({policy}.priorityClass) && "
                f"{policy}.priorityClass != '' ? [{policy}.priorityClass] : []))")

    def kept(kind: str) -> str:
        """Every class the object names is offered, or (on UPDATE) the old object named it already: Kueue's unsuspend,
        a controller's status and finalizer updates, a Deployment's scaling of an object made before the policy go
        through; a new class does not."""
        return (f"{classes('object', kind)}.all(n, n in {allowed} || "
                f"(request.operation == 'UPDATE' && n in {classes('oldObject', kind)}))")

    ref = "object.spec.priorityClassRef"
    shapes: list[tuple[str, list[Manifest], str]] = [
        # A pod's priorityClassName cannot change after creation (Kubernetes API, PodSpec).
        ("pods", [rule("", "v1", ["pods"], ["CREATE"])], fine("object.spec")),
        # Deployments' templates change on UPDATE; a suspended Job's template may too (Kubernetes "Jobs", "Mutable
        # Scheduling Directives").
        ("templates", [rule("batch", "v1", ["jobs"], ["CREATE", "UPDATE"]),
                       rule("apps", "v1", ["deployments", "statefulsets"], ["CREATE", "UPDATE"])], kept("templates")),
        # The team Role lets members make CronJobs, whose Jobs would be refused one by one at each schedule.
        ("cronjobs", [rule("batch", "v1", ["cronjobs"], ["CREATE", "UPDATE"])], kept("cronjobs")),
        ("jobsets", [rule("jobset.x-k8s.io", "v1alpha2", ["jobsets"], ["CREATE", "UPDATE"])], kept("jobsets")),
        ("mpijobs", [rule("kubeflow.org", "v2beta1", ["mpijobs"], ["CREATE", "UPDATE"])], kept("mpijobs")),
        # The team Role lets members make TrainingRuntimes, whose pod templates a TrainJob's Workload is made from.
        ("trainingruntimes", [rule("trainer.kubeflow.org", "v1alpha1", ["trainingruntimes"], ["CREATE", "UPDATE"])],
         kept("trainingruntimes")),
        # Kueue v0.19's stored version (v1beta2) names the class in priorityClassRef ({group, kind, name}); a request
        # in another served version is converted to it (matchPolicy Equivalent). On UPDATE an unchanged reference
        # passes, so a Workload made before the policy can still be finished and deleted (its finalizer removed).
        ("workloads", [rule("kueue.x-k8s.io", "v1beta2", ["workloads"], ["CREATE", "UPDATE"])],
         f"!has({ref}) || {ref}.group != 'scheduling.k8s.io' || {ref}.name in {allowed} || "
         "(request.operation == 'UPDATE' && has(oldObject.spec.priorityClassRef) && "
         f"oldObject.spec.priorityClassRef.group == {ref}.group && "
         f"oldObject.spec.priorityClassRef.name == {ref}.name)"),
    ]
    out: list[Manifest] = []
    for suffix, rules, expression in shapes:
        name = f"{TEAM_PRIORITY_POLICY}-{suffix}"
        out += [
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
             "metadata": meta(name),
             "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules},
                      "validations": [{"expression": expression, "reason": "Forbidden", "message": message}]}},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": meta(name),
             "spec": {"policyName": name, "validationActions": ["Deny"],
                      "matchResources": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}}}}},
        ]
    return out


def critical_priority_quota(namespace: str, labels: Mapping[str, str], pods: int) -> Manifest:
    """A ResourceQuota that lets a namespace run pods of the system-*-critical priority classes. GKE Standard ships a
    kube-system quota scoped to them, and once any quota scopes a priority class, pods of that class are admitted only
    in namespaces with a matching quota (Kubernetes "Resource Quotas", "Limit Priority Class consumption by default";
    the GPU Operator's GKE guidance and NVIDIA/aicr PR #921, which sizes it max(nodes x 32, 32))."""
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("critical-pods", namespace, labels),
            "spec": {"hard": {"pods": str(pods)},
                     "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                             "values": list(CRITICAL_PRIORITY_CLASSES)}]}}}


def storage_class(name: str, provisioner: str, parameters: Mapping[str, str], retain: bool) -> Manifest:
    """An encrypted block storage class for platform volumes (Prometheus). With ``retain`` (stacks with
    deletion protection) a deleted claim leaves its volume, and so the metrics history, in place."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta(name),
        "provisioner": provisioner,
        "parameters": dict(parameters),
        "reclaimPolicy": "Retain" if retain else "Delete",
        "allowVolumeExpansion": True,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


