"""Guards: what keeps teams apart and the cluster watched, required by what it does, not by its name.

A change to the program that drops or weakens one of these must not reach ``pulumi up`` with a green check: each
guard is a pair of policies, mandatory in production environments (``productionEnvironments``, the stack's
``environment`` label on the namespaces it creates) and advisory elsewhere. They read the Kubernetes objects the
stack creates: team namespaces' Pod Security labels, the admission policies and their bindings (judged by the CEL they
run), NetworkPolicies in team and platform namespaces, and the alert rules and routes of the seed's minimum telemetry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyResource, Severity, StackValidationArgs

from gpu_policies.common import (
    NAMESPACE,
    STRING_LIST,
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

PRODUCTION = Knob("productionEnvironments", STRING_LIST, ["prod"])
KUBERNETES_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default")
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
ALERTMANAGER_CONFIG = "kubernetes:monitoring.coreos.com/v1alpha1:AlertmanagerConfig"
ENFORCE = "pod-security.kubernetes.io/enforce"
GPUDIRECT_REASON = ("gpu-cluster/pod-security-reason", "gpudirect-sidecars")
OPEN = ("0.0.0.0/0", "::/0")
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


def _judges(policy: PolicyResource, resources: frozenset[str], operations: frozenset[str]) -> bool:
    """Fails closed and judges every request for these resources on these operations (no match condition narrows
    it)."""
    spec = _spec(policy)
    if spec.get("failurePolicy", "Fail") != "Fail" or spec.get("matchConditions"):
        return False
    if any(str(v.get("expression", "")).strip() == "true" for v in spec.get("validations") or []
           if isinstance(v, dict)):
        return False  # a check that always passes: the policy is hollow, whatever its messages say
    rules = get(spec, "matchConstraints", "resourceRules", default=[]) or []
    judged = [(set(r.get("resources") or []), set(r.get("operations") or [])) for r in rules if isinstance(r, dict)]
    return all(any(resource in res and (operations <= ops or "*" in ops) for res, ops in judged)
               for resource in resources)


def _expressions(policy: PolicyResource) -> list[str]:
    """The CEL a policy runs: its validations, then its variables (which the validations may read)."""
    spec = _spec(policy)
    return [str(v.get("expression", "")) for key in ("validations", "variables") for v in spec.get(key) or []
            if isinstance(v, dict)]


def _prefixes(expression: str) -> list[str] | None:
    """The registry prefixes a ``[...].exists(p, c.image.startsWith(p))`` expression allows (None: not that form)."""
    found = re.search(r"(\[[^\]]*\])\.exists\(\s*(\w+)\s*,\s*c\.image\.startsWith\(\s*\2\s*\)\s*\)", expression)
    if found is None:
        return None
    try:
        values = json.loads(found.group(1))
    except ValueError:
        return None
    return [str(v) for v in values] if isinstance(values, list) else None


def _registries(expressions: list[str]) -> bool:
    """Every kind of container is held to a non-empty list of registry prefixes, none of them empty."""
    for field in ("containers", "initContainers", "ephemeralContainers"):
        lists = [_prefixes(e) for e in expressions if f"object.spec.{field}.all(" in e]
        if not any(p and all(p) for p in lists):
            return False
    return True


def _no_privileged(expressions: list[str]) -> bool:
    """Containers and init containers are refused ``securityContext.privileged``."""
    return all(any(f"object.spec.{field}.all(" in e and "!c.securityContext.privileged" in e for e in expressions)
               for field in ("containers", "initContainers"))


def _team_gid(expressions: list[str]) -> bool:
    """A pod must carry its namespace's team GID (read from the namespace's label) as a group of every container."""
    return any("namespaceObject.metadata.labels" in e and "gpu-cluster/gid" in e for e in expressions) and \
        any("supplementalGroups" in e for e in expressions) and \
        any("object.spec.containers.all(" in e for e in expressions)


def _gpudirect(expressions: list[str]) -> bool:
    """Host paths and added capabilities are bounded container by container."""
    return any("hostPath" in e for e in expressions) and any("capabilities.add" in e for e in expressions)


def _sidecar_exec(expressions: list[str]) -> bool:
    """exec and attach must name a container, and not the GPUDirect sidecar."""
    return any("object.container" in e and "!=" in e for e in expressions)


PODS = frozenset({"pods"})
EXEC = frozenset({"pods/exec", "pods/attach"})
CREATE_UPDATE = frozenset({"CREATE", "UPDATE"})
CREATE = frozenset({"CREATE"})  # a pod's security context cannot change after it is created
CONNECT = frozenset({"CONNECT"})

# (what the guard does, how to recognise it from its expressions, the operations it must judge, which namespaces need
# it: team namespaces by their labels, and any namespace labelled for GPUDirect sidecars, such as the acceptance
# gate's, for the last)
# needed(labels, team namespace, the GPUDirect bounds name a sidecar)
AdmissionGuard = tuple[str, Callable[[list[str]], bool], tuple[frozenset[str], frozenset[str]],
                       Callable[[Mapping[str, Any], bool, bool], bool]]
ADMISSION_GUARDS: list[AdmissionGuard] = [
    ("admits images only from the allowed registries", _registries, (PODS, CREATE_UPDATE),
     lambda labels, team, sidecar: team),
    ("refuses privileged containers", _no_privileged, (PODS, CREATE_UPDATE), lambda labels, team, sidecar: team),
    ("requires the team's GID on every pod (its shared-filesystem directory is group-owned)", _team_gid,
     (PODS, CREATE), lambda labels, team, sidecar: team and "gpu-cluster/gid" in labels),
    ("bounds the GPUDirect containers' host paths and capabilities", _gpudirect, (PODS, CREATE_UPDATE),
     lambda labels, team, sidecar: labels.get(GPUDIRECT_REASON[0]) == GPUDIRECT_REASON[1]),
    # Where the bounds let one named container (GKE's receive-datapath sidecar) do more than the others.
    ("refuses exec and attach into the GPUDirect sidecar", _sidecar_exec, (EXEC, CONNECT),
     lambda labels, team, sidecar: sidecar and labels.get(GPUDIRECT_REASON[0]) == GPUDIRECT_REASON[1]),
]


def _admission(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    policies = {k8s_name(p.props): p for p in of_type(args.resources, VAP)}
    bindings = [(b, policies[str(get(b.props, "spec", "policyName"))]) for b in of_type(args.resources, VAP_BINDING)
                if "Deny" in (get(b.props, "spec", "validationActions", default=[]) or [])
                and get(b.props, "spec", "policyName") in policies]
    teams = {k8s_name(ns.props) for ns in team_namespaces(args.resources, cfg["systemNamespaces"])}
    sidecar = any("c.name ==" in e for p in policies.values() if _gpudirect(_expressions(p)) for e in _expressions(p))
    for ns in of_type(args.resources, NAMESPACE):
        labels, name = _labels(ns), k8s_name(ns.props)
        for does, recognise, (judged, operations), needed in ADMISSION_GUARDS:
            if not needed(labels, name in teams, sidecar):
                continue
            if not any(_judges(policy, judged, operations) and recognise(_expressions(policy))
                       and selects(get(_spec(b), "matchResources", "namespaceSelector"), labels)
                       and selects(get(_spec(policy), "matchConstraints", "namespaceSelector"), labels)
                       for b, policy in bindings):
                # No field: what is missing is a policy and its binding, not an input of the namespace.
                report(f"Namespace {name} must be bound (Deny) to a ValidatingAdmissionPolicy that fails closed and "
                       f"{does}; none of the stack's admission policies does.", ns.urn)


admission_guards = guard(
    "kubernetes-team-admission-policies", "security",
    "every team namespace is bound, with Deny, to admission policies that fail closed and admit images only from "
    "the allowed registries, refuse privileged containers, require the team's GID where the namespace has one and, "
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


def _opens_everything(policy: PolicyResource, team: bool) -> str | None:
    """Why a policy's rules let its pods reach (or be reached from) anything, or None: a rule without peers, or an
    open CIDR on every port; in a team namespace also every namespace of the cluster."""
    spec = _spec(policy)
    for direction, peers_key in (("egress", "to"), ("ingress", "from")):
        for i, rule in enumerate(spec.get(direction) or []):
            peers = rule.get(peers_key)
            if not peers:
                return f"{direction}[{i}] has no {peers_key}: every address"
            if rule.get("ports"):
                continue
            for peer in peers:
                if get(peer, "ipBlock", "cidr") in OPEN:
                    return f"{direction}[{i}] opens {get(peer, 'ipBlock', 'cidr')} on every port"
                if team and peer.get("namespaceSelector") == {} and not peer.get("podSelector"):
                    return f"{direction}[{i}] reaches every namespace of the cluster"
    return None


def _team_isolation(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
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
            why = _opens_everything(p, team=True)
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
            why = _opens_everything(p, team=False)
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
