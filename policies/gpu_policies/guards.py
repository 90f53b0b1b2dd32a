"""Guards: what keeps teams apart and the cluster watched, required by what it does, not by its name.

A change to the program that drops or weakens one of these must not reach ``pulumi up`` with a green check: each
guard is a pair of policies, mandatory in production environments (``productionEnvironments``, the stack's
``environment`` label on the namespaces it creates) and advisory elsewhere. They read the Kubernetes objects the
stack creates: team namespaces' Pod Security labels, the admission policies and their bindings (judged by the CEL they
run), NetworkPolicies in team and platform namespaces, and the alert rules and routes of the seed's minimum telemetry.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyResource, Severity, StackValidationArgs

from gpu_policies.cel import refuses
from gpu_policies.common import (
    GPUDIRECT_REASON,
    NAMESPACE,
    REQUIRED_LIST,
    SYSTEM_NAMESPACES_KNOB,
    Knob,
    Reporter,
    get,
    k8s_name,
    k8s_namespace,
    of_type,
    path,
    plain,
    seen,
    stack_policy,
    team_namespaces,
)

PRODUCTION = Knob("productionEnvironments", REQUIRED_LIST, ["prod"])
KUBERNETES_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default")
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
ALERTMANAGER_CONFIG = "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig"
ENFORCE = "pod-security.kubernetes.io/enforce"
NOTIFIERS = ("slackConfigs", "pagerdutyConfigs", "emailConfigs", "webhookConfigs", "opsgenieConfigs",
             "msteamsConfigs", "msteamsv2Configs", "snsConfigs", "telegramConfigs", "victoropsConfigs",
             "pushoverConfigs", "wechatConfigs", "discordConfigs", "webexConfigs")

Check = Callable[[StackValidationArgs, Reporter, dict[str, Any]], None]


def environment(resources: Iterable[PolicyResource]) -> str | None:
    """The stack's environment: the ``environment`` label the platform puts on every namespace it creates."""
    for ns in of_type(resources, NAMESPACE):
        env = get(ns.props, "metadata", "labels", "environment")
        if env is not None:
            return str(env)
    return None


def guard(name: str, area: str, description: str, remediation: str, severity: Severity, check: Check,
          knobs: list[Knob] | None = None) -> list[Any]:
    """The guard as two policies: ``name`` mandatory in production environments, ``name-outside-production``
    advisory in every other one (CrossGuard sets enforcement per policy, not per violation)."""
    def scoped(production: bool) -> Check:
        def run(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
            if (environment(args.resources) in cfg["productionEnvironments"]) is production:
                check(args, report, cfg)
        return run

    all_knobs = [PRODUCTION, *(knobs or [])]
    return [
        stack_policy(name, area, f"In production: {description}", remediation, severity, scoped(True), all_knobs,
                     enforcement=EnforcementLevel.MANDATORY),
        stack_policy(f"{name}-outside-production", area, f"Outside production: {description}", remediation,
                     Severity.MEDIUM, scoped(False), all_knobs, enforcement=EnforcementLevel.ADVISORY),
    ]


# --- Admission policies, judged by their CEL ----------------------------------------------------------------------


def _spec(resource: PolicyResource) -> dict[str, Any]:
    """The resource's ``spec`` as plain data (the analyzer hands read-only proxies)."""
    spec = plain(resource.props.get("spec"))
    return spec if isinstance(spec, dict) else {}


def _labels(ns: PolicyResource) -> dict[str, Any]:
    given = plain(get(ns.props, "metadata", "labels", default={}) or {})
    labels: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    labels["kubernetes.io/metadata.name"] = k8s_name(ns.props)  # set by the API server on every namespace
    return labels


def selects(selector: Any, labels: Mapping[str, Any]) -> bool:
    """A Kubernetes label selector matches these labels (a missing or empty selector matches everything)."""
    if not isinstance(selector, Mapping):
        return selector is None
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) or \
                (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels) or \
                op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


# A resource a guard judges: (API group, version, plural resource or resource/subresource).
Resource = tuple[str, str, str]


def _covers(rules: Any, resource: Resource, operations: frozenset[str]) -> bool:
    """Some rule of ``rules`` names the resource's API group, version, resource and every one of the operations."""
    def has(rule: Mapping[str, Any], key: str, value: str) -> bool:
        values = rule.get(key) or []
        return value in values or "*" in values
    group, version, plural = resource
    return any(isinstance(r, dict) and has(r, "apiGroups", group) and has(r, "apiVersions", version)
               and has(r, "resources", plural) and all(has(r, "operations", op) for op in operations)
               for r in rules or [])


def _judges(policy: Mapping[str, Any], binding: Mapping[str, Any], resources: frozenset[Resource],
            operations: frozenset[str]) -> bool:
    """The policy (``spec``) and its binding (``spec``) fail closed on every request for these resources and
    operations: no match condition, object selector or exclude rule narrows them (a namespace selector is judged
    against each namespace), and the binding denies."""
    constraints = policy.get("matchConstraints") or {}
    matched = binding.get("matchResources") or {}
    if policy.get("failurePolicy", "Fail") != "Fail" or policy.get("matchConditions") or policy.get("paramKind"):
        return False
    if "Deny" not in (binding.get("validationActions") or []):
        return False
    for narrowing in (constraints, matched):
        if narrowing.get("objectSelector") or narrowing.get("excludeResourceRules"):
            return False
    return all(_covers(constraints.get("resourceRules"), r, operations)
               and (not matched.get("resourceRules") or _covers(matched.get("resourceRules"), r, operations))
               for r in resources)


# Probe requests: what a policy must refuse to count as the guard, each beside its good twin (the same request with
# the one property fixed) that the policy must admit, so that a policy refusing the probe for another reason (a
# registry policy refusing every probe's image, say) does not count. (object, request) in the namespace.
Probe = tuple[dict[str, Any], dict[str, Any]]
Pair = tuple[Probe, Probe | None]
FOREIGN_IMAGE = "registry.invalid/probe:1"  # a registry no stack allows (.invalid: RFC 2606)


def _pod(namespace: str, gid: int | None, **spec: Any) -> Probe:
    """A pod that breaks nothing but what ``spec`` changes: the team's group, one container, no host access."""
    body: dict[str, Any] = {"containers": [{"name": "main", "image": FOREIGN_IMAGE}], **spec}
    if gid is not None and "securityContext" not in spec:
        body["securityContext"] = {"supplementalGroups": [gid]}
    request = {"operation": "CREATE", "namespace": namespace, "name": "probe",
               "kind": {"group": "", "version": "v1", "kind": "Pod"},
               "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "",
               "userInfo": {"username": "probe", "groups": []}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace},
            "spec": body}, request


def _registry_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    init = {"name": "init", "image": FOREIGN_IMAGE}
    return [(_pod(namespace, gid), None),
            (_pod(namespace, gid, initContainers=[init]), None),
            (_pod(namespace, gid, ephemeralContainers=[{**init, "name": "debug"}]), None)]


def _privileged_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    privileged = {"name": "main", "image": FOREIGN_IMAGE, "securityContext": {"privileged": True}}
    good = _pod(namespace, gid)
    return [(_pod(namespace, gid, containers=[privileged]), good),
            (_pod(namespace, gid, initContainers=[{**privileged, "name": "init"}]), good)]


def _gid_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    other = (gid or 0) + 1
    good = _pod(namespace, gid)
    return [(_pod(namespace, gid, securityContext={}), good),
            (_pod(namespace, gid, securityContext={"supplementalGroups": [other], "runAsGroup": other}), good)]


CRITICAL_CLASSES = ("system-node-critical", "system-cluster-critical")


def _priority_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    # system-node-critical (2000001000) would run a team pod above every other team's, and give the Workload Kueue
    # makes of its job that priority (Kueue docs, "Workload Priority Class").
    good = _pod(namespace, gid)
    return [(_pod(namespace, gid, priorityClassName=name), good) for name in CRITICAL_CLASSES]


def _object(namespace: str, api: str, kind: str, resource: Resource, spec: dict[str, Any]) -> Probe:
    """A namespaced object of any kind, created."""
    group, version, plural = resource
    request = {"operation": "CREATE", "namespace": namespace, "name": "probe",
               "kind": {"group": group, "version": version, "kind": kind},
               "resource": {"group": group, "version": version, "resource": plural}, "subResource": "",
               "userInfo": {"username": "probe", "groups": []}}
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "probe", "namespace": namespace},
            "spec": spec}, request


def _pod_spec(gid: int | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"restartPolicy": "Never", "containers": [{"name": "main", "image": FOREIGN_IMAGE}],
                            **spec}
    if gid is not None:
        body["securityContext"] = {"supplementalGroups": [gid]}
    return body


JOBS: Resource = ("batch", "v1", "jobs")
DEPLOYMENTS: Resource = ("apps", "v1", "deployments")
STATEFULSETS: Resource = ("apps", "v1", "statefulsets")
JOBSETS: Resource = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
MPIJOBS: Resource = ("kubeflow.org", "v2beta1", "mpijobs")
WORKLOADS: Resource = ("kueue.x-k8s.io", "v1beta2", "workloads")


def _template_priority_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    # A job's template class becomes its Workload's priority before any pod exists (Kueue docs, "Workload Priority
    # Class"): the pods guard alone comes too late.
    def job(**spec: Any) -> Probe:
        return _object(namespace, "batch/v1", "Job", JOBS, {"template": {"spec": _pod_spec(gid, **spec)}})

    def deployment(**spec: Any) -> Probe:
        return _object(namespace, "apps/v1", "Deployment", DEPLOYMENTS, {
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {"metadata": {"labels": {"app": "probe"}},
                         "spec": {**_pod_spec(gid, **spec), "restartPolicy": "Always"}}})
    return [(make(priorityClassName=name), make()) for make in (job, deployment) for name in CRITICAL_CLASSES]


def _jobset_priority_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    def jobset(**spec: Any) -> Probe:
        return _object(namespace, "jobset.x-k8s.io/v1alpha2", "JobSet", JOBSETS, {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": _pod_spec(gid, **spec)}}}}]})
    return [(jobset(priorityClassName=name), jobset()) for name in CRITICAL_CLASSES]


def _mpijob_priority_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    # Kueue takes an MPIJob's runPolicy.schedulingPolicy.priorityClass first, then its templates' classes.
    def mpijob(run_policy: str | None = None, **spec: Any) -> Probe:
        body: dict[str, Any] = {"mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": _pod_spec(gid)}},
            "Worker": {"replicas": 1, "template": {"spec": _pod_spec(gid, **spec)}}}}
        if run_policy is not None:
            body["runPolicy"] = {"schedulingPolicy": {"priorityClass": run_policy}}
        return _object(namespace, "kubeflow.org/v2beta1", "MPIJob", MPIJOBS, body)
    return [pair for name in CRITICAL_CLASSES
            for pair in ((mpijob(priorityClassName=name), mpijob()), (mpijob(run_policy=name), mpijob()))]


def _workload_priority_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    # What Kueue makes of a job whose template names a class (a kind no job policy covers, or a Workload made
    # directly): its priorityClassRef names the scheduling.k8s.io class; the twin names a WorkloadPriorityClass.
    def workload(group: str, kind: str, name: str) -> Probe:
        return _object(namespace, "kueue.x-k8s.io/v1beta2", "Workload", WORKLOADS, {
            "queueName": "default", "priorityClassRef": {"group": group, "kind": kind, "name": name},
            "podSets": [{"name": "main", "count": 1, "template": {"spec": _pod_spec(gid)}}]})
    good = workload("kueue.x-k8s.io", "WorkloadPriorityClass", "standard")
    return [(workload("scheduling.k8s.io", "PriorityClass", name), good) for name in CRITICAL_CLASSES]


def _gpudirect_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    root = [{"name": "root", "hostPath": {"path": "/"}}]
    mounted = {"name": "main", "image": FOREIGN_IMAGE, "volumeMounts": [{"name": "root", "mountPath": "/host"}]}
    admin = {"name": "main", "image": FOREIGN_IMAGE, "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}
    good = _pod(namespace, gid)
    return [(_pod(namespace, gid, containers=[mounted], volumes=root), good),
            (_pod(namespace, gid, containers=[admin]), good),
            (_pod(namespace, gid, hostNetwork=True), good)]


def _connect(namespace: str, subresource: str, kind: str, container: str | None) -> Probe:
    obj = {"apiVersion": "v1", "kind": kind, "stdin": True, "tty": True,
           **({"container": container} if container else {})}
    return obj, {"operation": "CONNECT", "namespace": namespace, "name": "probe",
                 "kind": {"group": "", "version": "v1", "kind": kind},
                 "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": subresource,
                 "userInfo": {"username": "probe", "groups": []}}


def _exec_probes(namespace: str, gid: int | None, sidecar: str | None) -> list[Pair]:
    return [(_connect(namespace, sub, kind, container), _connect(namespace, sub, kind, "main"))
            for sub, kind in (("exec", "PodExecOptions"), ("attach", "PodAttachOptions"))
            for container in (sidecar, None)]


PODS = frozenset({("", "v1", "pods")})
EXEC = frozenset({("", "v1", "pods/exec"), ("", "v1", "pods/attach")})
CREATE_UPDATE = frozenset({"CREATE", "UPDATE"})
CREATE = frozenset({"CREATE"})  # a pod's security context cannot change after it is created
CONNECT = frozenset({"CONNECT"})
SIDECAR_NAME = re.compile(r'c\.name == "([^"]+)"')

# (what the guard does, the requests it must judge (resources, operations), the probes it must refuse, which namespaces
# need it: needed(labels, team namespace, the GPUDirect bounds name a sidecar))
AdmissionGuard = tuple[str, tuple[frozenset[Resource], frozenset[str]],
                       Callable[[str, int | None, str | None], list[Pair]],
                       Callable[[Mapping[str, Any], bool, bool], bool]]
ADMISSION_GUARDS: list[AdmissionGuard] = [
    ("admits images only from the allowed registries", (PODS, CREATE_UPDATE), _registry_probes,
     lambda labels, team, sidecar: team),
    ("refuses privileged containers", (PODS, CREATE_UPDATE), _privileged_probes, lambda labels, team, sidecar: team),
    ("requires the team's GID on every pod (its shared-filesystem directory is group-owned)", (PODS, CREATE),
     _gid_probes, lambda labels, team, sidecar: team and "gpu-cluster/gid" in labels),
    ("refuses pods of the system-*-critical PriorityClasses (above every other team's pods and Kueue priority)",
     (PODS, CREATE), _priority_probes, lambda labels, team, sidecar: team),
    # The job kinds Kueue admits for teams, and its Workloads: a class there reaches the queue before any pod.
    ("refuses the system-*-critical PriorityClasses in the pod templates of Jobs and Deployments",
     (frozenset({JOBS, DEPLOYMENTS, STATEFULSETS}), CREATE_UPDATE), _template_priority_probes,
     lambda labels, team, sidecar: team),
    ("refuses the system-*-critical PriorityClasses in JobSets' pod templates", (frozenset({JOBSETS}), CREATE_UPDATE),
     _jobset_priority_probes, lambda labels, team, sidecar: team),
    ("refuses the system-*-critical PriorityClasses in MPIJobs (run policy and pod templates)",
     (frozenset({MPIJOBS}), CREATE_UPDATE), _mpijob_priority_probes, lambda labels, team, sidecar: team),
    ("refuses Kueue Workloads that take a system-*-critical PriorityClass", (frozenset({WORKLOADS}), CREATE_UPDATE),
     _workload_priority_probes, lambda labels, team, sidecar: team),
    ("bounds the GPUDirect containers' host paths and capabilities", (PODS, CREATE_UPDATE), _gpudirect_probes,
     lambda labels, team, sidecar: labels.get(GPUDIRECT_REASON[0]) == GPUDIRECT_REASON[1]),
    # Where the bounds let one named container (GKE's receive-datapath sidecar) do more than the others.
    ("refuses exec and attach into the GPUDirect sidecar", (EXEC, CONNECT), _exec_probes,
     lambda labels, team, sidecar: sidecar and labels.get(GPUDIRECT_REASON[0]) == GPUDIRECT_REASON[1]),
]


def _gid(labels: Mapping[str, Any]) -> int | None:
    try:
        return int(str(labels.get("gpu-cluster/gid")))
    except ValueError:
        return None


def _refused(verdicts: dict[tuple[int, str], bool], policy: Mapping[str, Any],
             request: tuple[Mapping[str, Any], Mapping[str, Any]], namespace_object: Mapping[str, Any]) -> bool:
    """:func:`refuses`, once per (policy, probe) in a namespace (``verdicts`` is the namespace's): a policy bound more
    than once, and a probe more than one guard sends (the good request), meet the namespace again (on prod-gcp a
    quarter of the CEL evaluations were repeats; issue 37)."""
    key = (id(policy), json.dumps(request, sort_keys=True))
    if key not in verdicts:
        verdicts[key] = refuses(policy, *request, namespace_object)
    return verdicts[key]


def _admission(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    policies = {k8s_name(p.props): _spec(p) for p in of_type(args.resources, VAP)}
    bindings = [(spec, policies[str(spec.get("policyName"))]) for spec in map(_spec, of_type(args.resources,
                                                                                             VAP_BINDING))
                if str(spec.get("policyName")) in policies]
    teams = {k8s_name(ns.props) for ns in team_namespaces(args.resources, cfg["systemNamespaces"])}
    # The sidecar the GPUDirect bounds single out (GKE's tcpxo-daemon), if any: exec into it must be refused.
    named = [m for spec in policies.values() for v in spec.get("validations") or [] if isinstance(v, dict)
             for m in SIDECAR_NAME.findall(str(v.get("expression", ""))) if "hostPath" in str(v.get("expression"))]
    sidecar = named[0] if named else None
    for ns in of_type(args.resources, NAMESPACE):
        labels, name = _labels(ns), k8s_name(ns.props)
        namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        verdicts: dict[tuple[int, str], bool] = {}  # this namespace's: see _refused
        for does, (judged, operations), probes, needed in ADMISSION_GUARDS:
            if not needed(labels, name in teams, sidecar is not None):
                continue
            requests = probes(name, _gid(labels), sidecar)
            if not any(_judges(policy, binding, judged, operations)
                       and selects(get(binding, "matchResources", "namespaceSelector"), labels)
                       and selects(get(policy, "matchConstraints", "namespaceSelector"), labels)
                       and all(_refused(verdicts, policy, bad, namespace_object)
                               and (good is None or not _refused(verdicts, policy, good, namespace_object))
                               for bad, good in requests)
                       for binding, policy in bindings):
                # No field: what is missing is a policy and its binding, not an input of the namespace.
                report(f"Namespace {name} must be bound (Deny) to a ValidatingAdmissionPolicy that fails closed and "
                       f"{does}; none of the stack's admission policies refuses its probe requests.", ns.urn)


admission_guards = guard(
    "kubernetes-team-admission-policies", "security",
    "every team namespace is bound, with Deny, to admission policies that fail closed and admit images only from "
    "the allowed registries, refuse privileged containers and the system-*-critical priority classes on pods, on the "
    "pod templates of Jobs, Deployments, JobSets and MPIJobs (and an MPIJob's run policy) and on Kueue Workloads, "
    "require the team's GID where the namespace has one and, "
    "where GPUDirect sidecars run, bound each container and keep exec out of the sidecar; each policy is recognised "
    "by the CEL it runs.",
    "Keep the Tenancy component's ValidatingAdmissionPolicies and their bindings (components/kubernetes/objects/"
    "tenancy.py) unchanged.", Severity.CRITICAL, _admission, [SYSTEM_NAMESPACES_KNOB],
)


# --- Pod Security --------------------------------------------------------------------------------------------------


def _pod_security(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        labels = _labels(ns)
        level = labels.get(ENFORCE)
        gpudirect = labels.get(GPUDIRECT_REASON[0]) == GPUDIRECT_REASON[1]
        if level in ("baseline", "restricted") or (level == "privileged" and gpudirect):
            continue  # a GPUDirect namespace is bounded by its admission policy (kubernetes-team-admission-policies)
        report(f"Team namespace {k8s_name(ns.props)} must enforce Pod Security baseline or restricted "
               f"({ENFORCE}); it enforces {level or 'nothing'}, so a team pod could run privileged, share the node's "
               "namespaces or mount any host path.", ns.urn, field=path("metadata", "labels", ENFORCE),
               value=seen(labels, ENFORCE))


pod_security_guard = guard(
    "kubernetes-team-namespaces-pod-security", "security",
    "every team namespace enforces Pod Security baseline or restricted; only a namespace labelled for GPUDirect "
    "sidecars enforces privileged, and then its admission policy bounds each container.",
    "Keep the team namespaces' pod-security.kubernetes.io/enforce label (Tenancy component).",
    Severity.CRITICAL, _pod_security, [SYSTEM_NAMESPACES_KNOB],
)


# --- NetworkPolicies -----------------------------------------------------------------------------------------------


def _default_deny(policy: PolicyResource, kinds: set[str]) -> bool:
    """An empty-selector policy of these types with no rules: it denies them to every pod of its namespace."""
    spec = _spec(policy)
    return spec.get("podSelector") == {} and kinds <= set(spec.get("policyTypes") or []) and \
        not any(spec.get(k.lower()) for k in kinds)


# A port range at least this wide counts as every port (endPort 1-65535 is not a named port).
WIDE_PORT_RANGE = 1024
IMDS = ipaddress.ip_address("169.254.169.254")  # EC2's instance metadata service: the node role's credentials
IMDS_PORT = 80


def _every_port(rule: Mapping[str, Any]) -> bool:
    """The rule's ports are all ports: none listed, an entry without a port, or a very wide range."""
    ports = rule.get("ports") or []
    if not ports:
        return True
    for entry in ports:
        if not isinstance(entry, dict) or entry.get("port") is None:
            return True
        start, end = entry.get("port"), entry.get("endPort")
        if isinstance(start, int) and isinstance(end, int) and end - start >= WIDE_PORT_RANGE:
            return True
    return False


def _opens_port(rule: Mapping[str, Any], port: int, protocol: str = "TCP") -> bool:
    """The rule's ports include this one (all ports do)."""
    ports = rule.get("ports") or []
    if not ports:
        return True
    for entry in ports:
        if not isinstance(entry, dict) or entry.get("protocol", "TCP") != protocol:
            continue
        start = entry.get("port")
        if start is None:
            return True
        end = entry.get("endPort", start)
        if isinstance(start, int) and isinstance(end, int) and start <= port <= end:
            return True
    return False


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _without(part: Network, hole: Network) -> list[Network]:
    """``part`` with ``hole`` taken out (an ipBlock's except)."""
    if part.version != hole.version or not part.overlaps(hole):
        return [part]
    if part.subnet_of(hole):  # type: ignore[arg-type]
        return []
    return list(part.address_exclude(hole))  # type: ignore[arg-type]


def _blocks(peers: list[Any]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The address ranges the peers' ipBlocks name, their exceptions taken out."""
    nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for peer in peers:
        block = peer.get("ipBlock") if isinstance(peer, dict) else None
        if not isinstance(block, dict):
            continue
        try:
            net = ipaddress.ip_network(str(block.get("cidr")), strict=False)
            parts = [net]
            for cut in block.get("except") or []:
                hole = ipaddress.ip_network(str(cut), strict=False)
                parts = [rest for part in parts for rest in _without(part, hole)]
            nets += parts
        except ValueError:
            continue
    return nets


def _wide(nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    """Together the ranges hold at least half of the IPv4 or the IPv6 address space (0.0.0.0/1 + 128.0.0.0/1, ...)."""
    v4 = ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv4Network))
    v6 = ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv6Network))
    return sum(n.num_addresses for n in v4) * 2 >= 2 ** 32 or sum(n.num_addresses for n in v6) * 2 >= 2 ** 128


def _opens_everything(policy: PolicyResource, team: str | None, namespaces: list[dict[str, Any]],
                      aws: bool) -> str | None:
    """Why a policy's rules let its pods reach (or be reached from) too much, or None: every address on every port
    (no peers, or ranges holding half the address space), on EKS the instance metadata service's port, and in a team
    namespace (``team``) another team's namespace or several namespaces at once."""
    spec = _spec(policy)
    teams = {str(n["metadata"]["name"]) for n in namespaces if n["metadata"]["labels"].get("gpu-cluster/tenant")
             == "true"}
    for direction, peers_key in (("egress", "to"), ("ingress", "from")):
        for i, rule in enumerate(spec.get(direction) or []):
            if not isinstance(rule, dict):
                continue
            peers = [p for p in rule.get(peers_key) or [] if isinstance(p, dict)]
            nets = _blocks(peers)
            everywhere = not peers or _wide(nets)
            if everywhere and _every_port(rule):
                return f"{direction}[{i}] reaches every address on every port"
            if aws and direction == "egress" and (not peers or any(IMDS in n for n in nets)) and \
                    _opens_port(rule, IMDS_PORT):
                return f"{direction}[{i}] reaches {IMDS}:{IMDS_PORT}, the instance metadata service"
            if team is None:
                continue
            for peer in peers:
                if "namespaceSelector" not in peer:
                    continue
                chosen = {str(n["metadata"]["name"]) for n in namespaces
                          if selects(peer.get("namespaceSelector"), n["metadata"]["labels"])}
                if len(chosen) > 1 or (chosen & teams) - {team}:
                    return f"{direction}[{i}] reaches namespaces {', '.join(sorted(chosen))}"
    return None


def _namespaces(resources: Iterable[PolicyResource]) -> list[dict[str, Any]]:
    """Every namespace of the stack with its labels (and the name label the API server sets)."""
    return [{"metadata": {"name": k8s_name(ns.props), "labels": _labels(ns)}} for ns in of_type(resources, NAMESPACE)]


def _on_aws(resources: Iterable[PolicyResource]) -> bool:
    return bool(of_type(resources, "aws:eks/cluster:Cluster"))


def _team_isolation(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    namespaces, aws = _namespaces(args.resources), _on_aws(args.resources)
    by_ns: dict[str, list[PolicyResource]] = {}
    for p in of_type(args.resources, NETWORK_POLICY):
        by_ns.setdefault(k8s_namespace(p.props), []).append(p)
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        name = k8s_name(ns.props)
        policies = by_ns.get(name, [])
        if not any(_default_deny(p, {"Ingress", "Egress"}) for p in policies):
            report(f"Team namespace {name} must have a default-deny NetworkPolicy (empty podSelector, Ingress and "
                   "Egress, no rules) under its named allows.", ns.urn)
        for p in policies:
            why = _opens_everything(p, name, namespaces, aws)
            if why is not None:
                report(f"NetworkPolicy {k8s_name(p.props)} in team namespace {name} must allow only named peers "
                       f"and ports; {why}.", p.urn, field="spec", value=seen(p.props, "spec"))


team_isolation_guard = guard(
    "kubernetes-team-namespaces-isolated", "security",
    "every team namespace denies ingress and egress by default and its other NetworkPolicies allow only named "
    "peers (its own pods, DNS, the metrics scraper, HTTPS, the credential agent), never every address or namespace.",
    "Keep the Tenancy component's NetworkPolicies (components/kubernetes/objects/tenancy.py network_policies).",
    Severity.HIGH, _team_isolation, [SYSTEM_NAMESPACES_KNOB],
)


def _platform_egress(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    teams = {k8s_name(ns.props) for ns in team_namespaces(args.resources, cfg["systemNamespaces"])}
    namespaces, aws = _namespaces(args.resources), _on_aws(args.resources)
    by_ns: dict[str, list[PolicyResource]] = {}
    for p in of_type(args.resources, NETWORK_POLICY):
        by_ns.setdefault(k8s_namespace(p.props), []).append(p)
    for ns in of_type(args.resources, NAMESPACE):
        name = k8s_name(ns.props)
        if name in teams or name in KUBERNETES_NAMESPACES:
            continue
        policies = by_ns.get(name, [])
        if not any(_default_deny(p, {"Egress"}) for p in policies):
            report(f"Namespace {name}, which the platform creates, must deny egress by default (a NetworkPolicy with "
                   "an empty podSelector, policyType Egress and no egress rules) and allow only what its components "
                   "need: without it its pods reach the instance metadata service and the whole network.", ns.urn)
        for p in policies:
            why = _opens_everything(p, None, namespaces, aws)
            if why is not None:
                report(f"NetworkPolicy {k8s_name(p.props)} in {name} must allow only named peers and ports; {why}.",
                       p.urn, field="spec", value=seen(p.props, "spec"))


platform_egress_guard = guard(
    "kubernetes-platform-namespaces-deny-egress", "security",
    "every namespace the platform creates (monitoring, logging, the operators', acceptance, Slurm) denies egress by "
    "default and allows only what its components need.",
    "Keep the platform namespaces' egress policies (components/kubernetes/objects/egress.py).",
    Severity.HIGH, _platform_egress, [SYSTEM_NAMESPACES_KNOB],
)


# --- The seed's minimum telemetry: alerts that exist and reach someone ------------------------------------------------

# (signal, metric pattern one alert's expression must read, the resource types that make it required (none: always)).
# Fabric and storage alerts read the cloud's exporters, which the program installs in production stacks (the
# fabric-metrics and storage-metrics policies require them there): they are required in production only.
ALERT_SIGNALS: list[tuple[str, str, tuple[str, ...]]] = [
    ("GPU XID errors", r"DCGM_FI_DEV_XID_ERRORS", ()),
    ("GPU ECC errors", r"DCGM_FI_DEV_ECC_DBE", ()),
    ("NVLink errors", r"DCGM_FI_DEV_NVLINK_", ()),
    ("node not ready", r"kube_node_status_condition\{[^}]*condition=\"Ready\"", ()),
    ("jobs stuck in their queue", r"kueue_pending_workloads|queue_wait_seconds", ()),
    ("fabric (EFA) errors", r"node_amazonefa_", ("aws:ec2/launchTemplate:LaunchTemplate#efa",)),
    ("storage (filesystem, checkpoint bucket)", r"aws_fsx_|aws_s3_|stackdriver_.*(lustre|gcs|storage)",
     ("aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket")),
    ("checkpoints too slow", r"gpu_cluster_checkpoint_duration_seconds", ("pushgateway",)),
]


def _required(resources: list[PolicyResource], triggers: tuple[str, ...]) -> bool:
    if not triggers:
        return True
    for trigger in triggers:
        if trigger == "aws:ec2/launchTemplate:LaunchTemplate#efa":
            if any(any(str(n.get("interfaceType")) == "efa" or str(n.get("interfaceType")) == "efa-only"
                       for n in r.props.get("networkInterfaces") or [])
                   for r in of_type(resources, "aws:ec2/launchTemplate:LaunchTemplate")):
                return True
        elif trigger == "pushgateway":
            if any("pushgateway" in str(r.props.get("chart", "")) for r in of_type(
                    resources, "kubernetes:helm.sh/v3:Release")):
                return True
        elif of_type(resources, trigger):
            return True
    return False


def _alert_rules(resources: list[PolicyResource]) -> list[dict[str, Any]]:
    return [rule for r in of_type(resources, PROMETHEUS_RULE) for g in _spec(r).get("groups") or []
            if isinstance(g, dict) for rule in g.get("rules") or [] if isinstance(rule, dict) and rule.get("alert")]


def _matches(matcher: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    value, have = str(matcher.get("value", "")), labels.get(str(matcher.get("name")), "")
    kind = matcher.get("matchType", "=")
    if kind in ("=~", "!~"):
        hit = re.fullmatch(value, have) is not None
        return hit if kind == "=~" else not hit
    return (have == value) if kind == "=" else (have != value)


def _receivers(route: Mapping[str, Any], labels: Mapping[str, str], parent: str | None) -> list[str] | None:
    """Alertmanager's routing of one alert through a route tree: the receivers it reaches, or None when the route
    does not match (children in order, ``continue`` to go on after a match; the node itself when no child takes it)."""
    if not all(_matches(m, labels) for m in route.get("matchers") or []):
        return None
    own = str(route.get("receiver") or parent or "")
    reached: list[str] = []
    for child in route.get("routes") or []:
        got = _receivers(child, labels, own) if isinstance(child, dict) else None
        if got is not None:
            reached += got
            if not child.get("continue"):
                break
    return reached or [own]


PRODUCTION_ONLY_SIGNALS = ("fabric (EFA) errors", "storage (filesystem, checkpoint bucket)")


def _alerts(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    resources = list(args.resources)
    rules = _alert_rules(resources)
    production = environment(resources) in cfg["productionEnvironments"]
    # The resource to edit: the stack's PrometheusRule (the platform writes one), or the stack when it has none.
    rule_urn = [r.urn for r in of_type(resources, PROMETHEUS_RULE)][:1]
    for signal, pattern, triggers in ALERT_SIGNALS:
        if signal in PRODUCTION_ONLY_SIGNALS and not production:
            continue
        if _required(resources, triggers) and not any(re.search(pattern, str(r.get("expr", ""))) for r in rules):
            report(f"The stack must alert on {signal} (a PrometheusRule alert whose expression reads {pattern}): the "
                   "seed's minimum telemetry; without it the failure is seen only when a job dies.", *rule_urn)
    if not production:
        return  # outside production nobody is paged (alerts-reach-a-receiver draws the same line)
    configs = of_type(resources, ALERTMANAGER_CONFIG)
    for severity in sorted({str(get(r, "labels", "severity", default="")) for r in rules} - {""}):
        labels = {"severity": severity, "alertname": "GuardProbe"}
        delivered = False
        for config in configs:
            spec = _spec(config)
            notifying = {str(r.get("name")) for r in spec.get("receivers") or [] if any(r.get(k) for k in NOTIFIERS)}
            if set(_receivers(spec.get("route") or {}, labels, None) or []) & notifying:
                delivered = True
                break
        if not delivered:
            report(f"Alerts of severity {severity} must reach a receiver that notifies someone: no "
                   "AlertmanagerConfig route delivers them (add a route or a default receiver under "
                   "platform.monitoring.alerts).", *[c.urn for c in configs][:1])


alerts_guard = guard(
    "alerts-minimum-telemetry", "telemetry",
    "alert rules exist for the seed's minimum telemetry (GPU XID, ECC and NVLink errors, fabric errors, storage, node "
    "not ready, jobs stuck, checkpoints too slow) and every severity the rules use reaches a receiver that notifies.",
    "Keep the Monitoring component's PrometheusRule (components/kubernetes/objects/telemetry.py) and give every "
    "severity a route or a default receiver under gpu-cluster:spec.platform.monitoring.alerts.",
    Severity.HIGH, _alerts,
)

POLICIES = [*admission_guards, *pod_security_guard, *team_isolation_guard, *platform_egress_guard, *alerts_guard]
