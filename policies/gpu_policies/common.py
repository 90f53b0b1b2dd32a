"""Shared machinery of the pack: policy construction by area, config with defaults, graph helpers.

The pack is standalone (``pulumi preview --policy-pack policies`` installs only its own
requirements): nothing here imports the program's ``components``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

# The mission's three areas block a deployment; the rest advise. Pack config overrides either way.
AREA_ENFORCEMENT = {
    "billing": EnforcementLevel.MANDATORY,
    "quotas": EnforcementLevel.MANDATORY,
    "telemetry": EnforcementLevel.MANDATORY,
    "security": EnforcementLevel.ADVISORY,
    "fabric": EnforcementLevel.ADVISORY,
    "data-safety": EnforcementLevel.ADVISORY,
    "sizing": EnforcementLevel.ADVISORY,
}
RELEASE = "kubernetes:helm.sh/v3:Release"
# The label (and value) by which a namespace says its pods run GPUDirect sidecars (host paths, NET_ADMIN): it enforces
# Pod Security privileged, and an admission policy bounds its containers instead.
GPUDIRECT_REASON = ("gpu-cluster/pod-security-reason", "gpudirect-sidecars")
NAMESPACE = "kubernetes:core/v1:Namespace"
DEFAULT_SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease", "default", "gpu-operator",
                             "kueue-system", "monitoring", "opencost", "mpi-operator", "gpu-acceptance",
                             "jobset-system", "kubeflow-system", "slurm", "logging", "slinky", "nrr-system",
                             "gpu-node-check", "external-secrets", "keda", "agentgateway-system",
                             "inference-gateway"]


# The schema of a knob that lists names (tags, types, namespaces): strings, none empty, none twice.
STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
# The same for a knob whose list is what the policy checks for (tags to require, environments to protect): an empty
# list would switch the policy off in effect, so the schema refuses it (the Pulumi CLI validates --policy-pack-config
# against it too); a policy is switched off by saying so ("<policy>": "disabled"), which every report shows.
REQUIRED_LIST: dict[str, Any] = {**STRING_LIST, "minItems": 1}


@dataclass(frozen=True)
class Knob:
    """One configuration property of a policy: its JSON schema and its default."""

    name: str
    schema: dict[str, Any]
    default: Any


def config(args: ResourceValidationArgs | StackValidationArgs, knobs: Sequence[Knob]) -> dict[str, Any]:
    """The policy's configuration, defaults filled in (the CLI fills them too; the offline runner may not)."""
    given = dict(args.get_config() or {})
    return {k.name: given.get(k.name, k.default) for k in knobs}


def _schema(knobs: Sequence[Knob]) -> PolicyConfigSchema | None:
    if not knobs:
        return None
    return PolicyConfigSchema({k.name: {**k.schema, "default": k.default} for k in knobs})


@dataclass(frozen=True)
class Rule:
    """Documentation of a policy, for ``policies/README.md`` and SARIF rule metadata."""

    name: str
    area: str
    description: str
    remediation: str
    severity: Severity
    kind: str  # "resource" or "stack"


RULES: list[Rule] = []

class _Absent:
    """The type of :data:`ABSENT`."""

    def __repr__(self) -> str:
        return "ABSENT"


# The ``value`` of a finding whose field is missing (None would be a JSON null that was seen).
ABSENT: Any = _Absent()
FIELD_LINE = "field: "
SEEN_LINE = "seen: "


def encode_finding(message: str, field: str | None = None, value: Any = ABSENT) -> str:
    """The text a violation reports: the requirement, then ``field: <path>`` and ``seen: <compact JSON>``.

    CrossGuard's reportViolation carries only (message, urn), so the field (a path in the violating resource's
    inputs, see :func:`path`) and the value seen there travel in the message, where ``pulumi preview`` shows them
    too. The requirement is one line (line breaks become spaces, so no text can pass for a field line); the
    ``field:`` line follows when a field is given, and the ``seen:`` line after it when a value is (never for a
    missing field). :func:`decode_finding` reads them back from what the analyzer reports.
    """
    text = " ".join(message.splitlines())
    if field is None:
        return text
    lines = [text, FIELD_LINE + " ".join(field.splitlines())]
    if value is not ABSENT:
        lines.append(SEEN_LINE + json.dumps(plain(value), separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines)


def decode_finding(reported: str) -> tuple[str, str | None, Any]:
    """(message, field, value) of a violation message as the analyzer reports it (the policy's one-line
    description, a line break, what :func:`encode_finding` made): its inverse. The field is None and the value
    :data:`ABSENT` where none was given; a field line is only ever the third line or later, after the description
    and the requirement, so a requirement cannot pass for one."""
    lines = reported.split("\n")
    value: Any = ABSENT
    if len(lines) >= 4 and lines[-1].startswith(SEEN_LINE) and lines[-2].startswith(FIELD_LINE):
        try:
            value = json.loads(lines[-1][len(SEEN_LINE):])
        except ValueError:
            return reported, None, ABSENT
        lines.pop()
    if len(lines) >= 3 and lines[-1].startswith(FIELD_LINE):
        return "\n".join(lines[:-1]), lines[-1][len(FIELD_LINE):], value
    return reported, None, ABSENT


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def path(*steps: str | int) -> str:
    """A field path inside a resource's inputs, camelCase as in the graph: ``vpcConfig.publicAccessCidrs[0]``,
    ``metadata.labels["cost-center"]`` (a key that is not an identifier is quoted as a JSON string)."""
    out = ""
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _IDENTIFIER.match(step):
            out += f".{step}" if out else step
        else:
            out += f"[{json.dumps(step, ensure_ascii=False)}]"
    return out


def plain(value: Any) -> Any:
    """A value of a resource's inputs as plain JSON data (the analyzer hands the pack read-only proxies, and numbers
    as doubles); an input unknown during preview reads ``"[unknown]"``."""
    if isinstance(value, (str, bytes)):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[str(key)] = plain(value[key])
            except UnknownValueError:
                out[str(key)] = "[unknown]"
        return out
    if isinstance(value, Sequence):
        items: list[Any] = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append("[unknown]")
        return items
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)  # the analyzer's numbers are doubles: 3, not 3.0, as the program wrote it
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def seen(value: Any, *steps: str | int) -> Any:
    """The value at ``steps`` inside ``value`` for a finding's ``value``: :data:`ABSENT` where a step is missing or
    the value is null (an input set to null is not set)."""
    cur = value
    for step in steps:
        if isinstance(step, int):
            if isinstance(cur, (str, bytes)) or not isinstance(cur, Sequence) or not 0 <= step < len(cur):
                return ABSENT
        elif not isinstance(cur, Mapping) or step not in cur:
            return ABSENT
        cur = cur[step]
    return ABSENT if cur is None else cur


class Reporter(Protocol):
    """Reports one violation; ``urn`` names the resource for stack policies, ``field`` the path inside that
    resource's inputs that violates (for an absence, the path that should exist) and ``value`` what is there."""

    def __call__(self, message: str, urn: str | None = None, *, field: str | None = None,
                 value: Any = ABSENT) -> None: ...


def _reporter(report: ReportViolation) -> Reporter:
    def call(message: str, urn: str | None = None, *, field: str | None = None, value: Any = ABSENT) -> None:
        report(encode_finding(message, field, value), urn)
    return call


ResourceCheck = Callable[[ResourceValidationArgs, Reporter, dict[str, Any]], None]
StackCheck = Callable[[StackValidationArgs, Reporter, dict[str, Any]], None]


Args = TypeVar("Args", ResourceValidationArgs, StackValidationArgs)


def _guarded(check: Callable[[Args, Reporter, dict[str, Any]], None],
             knobs: Sequence[Knob]) -> Callable[[Args, ReportViolation], None]:
    """The validate function the SDK calls: config filled in, and an input that is unknown during
    preview makes the policy not applicable instead of an error."""

    def validate(args: Args, report: ReportViolation) -> None:
        try:
            check(args, _reporter(report), config(args, knobs))
        except UnknownValueError as err:
            args.not_applicable(f"an input is unknown during preview: {err}")
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as err:
            # A real preview can hand the pack any value; an input of an unexpected shape is a violation
            # (the policy cannot show the requirement holds), never a crash of the pack.
            # No field: the error does not say which input had the shape.
            _reporter(report)(f"An input has an unexpected shape, so this requirement cannot be verified: "
                              f"{type(err).__name__}: {str(err)[:200]}")

    return validate


def resource_policy(name: str, area: str, description: str, remediation: str, severity: Severity,
                    check: ResourceCheck, knobs: Sequence[Knob] = (),
                    enforcement: EnforcementLevel | None = None) -> ResourceValidationPolicy:
    """A policy that looks at one resource at a time; ``enforcement`` overrides its area's default level."""
    validate = _guarded(check, knobs)
    RULES.append(Rule(name, area, description, remediation, severity, "resource"))
    return ResourceValidationPolicy(
        name=name, description=description, validate=validate,
        enforcement_level=enforcement or AREA_ENFORCEMENT[area],
        config_schema=_schema(knobs), severity=severity, tags=[area], remediation_steps=remediation,
    )


def stack_policy(name: str, area: str, description: str, remediation: str, severity: Severity,
                 check: StackCheck, knobs: Sequence[Knob] = (),
                 enforcement: EnforcementLevel | None = None) -> StackValidationPolicy:
    """A policy that looks at the whole stack (absence rules, links between resources); ``enforcement``
    overrides its area's default level."""
    validate = _guarded(check, knobs)
    RULES.append(Rule(name, area, description, remediation, severity, "stack"))
    return StackValidationPolicy(
        name=name, description=description, validate=validate,
        enforcement_level=enforcement or AREA_ENFORCEMENT[area],
        config_schema=_schema(knobs), severity=severity, tags=[area], remediation_steps=remediation,
    )


# --- reading resources --------------------------------------------------------------------------


def get(value: Any, *path: str | int, default: Any = None) -> Any:
    """Walk nested dicts/lists; ``default`` where a step is missing."""
    cur = value
    for step in path:
        if isinstance(step, int):
            if not isinstance(cur, (list, tuple)) or step >= len(cur):
                return default
            cur = cur[step]
        else:
            if not isinstance(cur, Mapping) or step not in cur:
                return default
            cur = cur[step]
    return cur


def as_dict(value: Any) -> dict[str, Any]:
    """Provider inputs arrive as JSON strings for nested objects; resource inputs as objects."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, Mapping) else {}


def effective_tags(props: Mapping[str, Any], provider_props: Mapping[str, Any] | None) -> dict[str, Any]:
    """A resource's tags with its provider's ``defaultTags`` merged under them, as AWS applies them."""
    tags: dict[str, Any] = {}
    if provider_props is not None:
        tags.update(as_dict(as_dict(provider_props.get("defaultTags")).get("tags")))
    own = props.get("tags")
    if isinstance(own, Mapping):
        tags.update(own)
    return tags


def missing_keys(mapping: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """The keys that are absent or blank in a tags/labels mapping."""
    return [k for k in keys if not str(mapping.get(k, "")).strip()]


def of_type(resources: Iterable[PolicyResource], *types: str) -> list[PolicyResource]:
    """The stack's resources of the given type tokens."""
    return [r for r in resources if r.resource_type in types]


def dependents(resources: Iterable[PolicyResource], target: PolicyResource, *types: str) -> list[PolicyResource]:
    """Resources of ``types`` that depend on ``target`` (configuration resources of a bucket, say).

    Ids are unknown during a real preview, so links between resources are read from dependencies.
    """
    return [r for r in of_type(resources, *types) if any(d.urn == target.urn for d in r.dependencies)]


def helm_release(resources: Iterable[PolicyResource], chart: str) -> list[PolicyResource]:
    """Helm releases of a chart, whether named by repository (``chart``) or OCI URL (``.../chart``)."""
    out = []
    for r in of_type(resources, RELEASE):
        name = str(r.props.get("chart", ""))
        if name == chart or name.endswith(f"/{chart}"):
            out.append(r)
    return out


def k8s_name(props: Mapping[str, Any]) -> str:
    """metadata.name of a Kubernetes object."""
    return str(get(props, "metadata", "name", default=""))


def k8s_namespace(props: Mapping[str, Any]) -> str:
    """metadata.namespace of a namespaced Kubernetes object."""
    return str(get(props, "metadata", "namespace", default=""))


def team_namespaces(resources: Iterable[PolicyResource], system: Sequence[str]) -> list[PolicyResource]:
    """Namespaces the stack creates that are not system namespaces: the teams'."""
    return [r for r in of_type(resources, NAMESPACE) if k8s_name(r.props) not in system]


SYSTEM_NAMESPACES_KNOB = Knob("systemNamespaces", STRING_LIST,
                              DEFAULT_SYSTEM_NAMESPACES)


def is_gpu_node_group(props: Mapping[str, Any]) -> bool:
    """An EKS node group of GPU nodes: an NVIDIA AMI type or the GPU taint."""
    if "NVIDIA" in str(props.get("amiType", "")):
        return True
    return any(get(t, "key") == "nvidia.com/gpu" for t in props.get("taints") or [])


# --- GCP ------------------------------------------------------------------------------------------

GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
CLOUD_SQL = "gcp:sql/databaseInstance:DatabaseInstance"
# Where each labelled GCP type of the blueprint keeps its labels, and whether the provider's ``defaultLabels`` merge
# into them. pulumi_gcp applies defaultLabels to the types with an ``effective_labels`` output (a ``labels`` field,
# or the cluster's ``resourceLabels``); a node pool's ``nodeConfig.resourceLabels``, a notification channel's
# ``userLabels`` and a Cloud SQL instance's ``settings.userLabels`` get none of them. A test keeps this table in step
# with pulumi_gcp and the program.
GCP_LABEL_FIELDS: dict[str, tuple[tuple[str, ...], bool]] = {
    GKE_CLUSTER: (("resourceLabels",), True),
    GKE_NODE_POOL: (("nodeConfig", "resourceLabels"), False),
    GCS_BUCKET: (("labels",), True),
    "gcp:compute/globalAddress:GlobalAddress": (("labels",), True),
    "gcp:compute/address:Address": (("labels",), True),
    "gcp:kms/cryptoKey:CryptoKey": (("labels",), True),
    "gcp:lustre/instance:Instance": (("labels",), True),
    "gcp:monitoring/notificationChannel:NotificationChannel": (("userLabels",), False),
    CLOUD_SQL: (("settings", "userLabels"), False),  # pulumi_gcp sql.DatabaseInstance: no effective_labels
}


def gcp_default_labels(provider_props: Mapping[str, Any] | None) -> dict[str, Any]:
    """The provider's ``defaultLabels`` (a JSON string among provider inputs, an object elsewhere)."""
    return as_dict(provider_props.get("defaultLabels")) if provider_props is not None else {}


def gcp_labels(resource_type: str, props: Mapping[str, Any],
               provider_props: Mapping[str, Any] | None) -> dict[str, Any]:
    """A GCP resource's labels as GCP records them: its own, over the provider's defaultLabels where they apply.

    A type missing from :data:`GCP_LABEL_FIELDS` with a ``labels`` input is treated like a ``labels`` type."""
    path, merged = GCP_LABEL_FIELDS.get(resource_type, (("labels",), True))
    labels = gcp_default_labels(provider_props) if merged else {}
    own = get(props, *path)
    if isinstance(own, Mapping):
        labels = {**labels, **own}
    return labels


def gcp_labelled(resource_type: str, props: Mapping[str, Any]) -> bool:
    """A GCP resource that carries labels: a type of :data:`GCP_LABEL_FIELDS`, or any with a ``labels`` input."""
    return resource_type.startswith("gcp:") and (resource_type in GCP_LABEL_FIELDS or "labels" in props)


def gcp_environment(resource_type: str, props: Mapping[str, Any],
                    provider_props: Mapping[str, Any] | None) -> str | None:
    """The environment label of a GCP resource: its own labels, else the provider's defaultLabels (which describe
    the stack, so they also tell a key ring or node pool's environment)."""
    env = gcp_labels(resource_type, props, provider_props).get("environment")
    if env is None:
        env = gcp_default_labels(provider_props).get("environment")
    return None if env is None else str(env)


def open_to_everyone(cidrs: Iterable[str]) -> list[str]:
    """The CIDRs of a list that, alone or together, cover a whole address family (0.0.0.0/0 or ::/0, also split
    into pieces such as 0.0.0.0/1 and 128.0.0.0/1); an entry that is not a CIDR is named as such."""
    import ipaddress

    nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    bad: list[str] = []
    for cidr in cidrs:
        try:
            nets.append(ipaddress.ip_network(str(cidr), strict=False))
        except ValueError:
            bad.append(f"{cidr} (not a CIDR)")
    out = list(bad)
    for version in (4, 6):
        family = [n for n in nets if n.version == version]
        collapsed = list(ipaddress.collapse_addresses(family))  # type: ignore[type-var]
        if any(n.prefixlen == 0 for n in collapsed):
            alone = [str(n) for n in family if n.prefixlen == 0]
            out.append(", ".join(alone) if alone else " + ".join(str(n) for n in family) + " (together)")
    return out


def open_entry(cidrs: Sequence[str]) -> int | None:
    """The index of the first entry that alone covers a whole address family or is not a CIDR (the field a finding
    of :func:`open_to_everyone` names); None when only entries together do, or none."""
    import ipaddress

    for i, cidr in enumerate(cidrs):
        try:
            if ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0:
                return i
        except ValueError:
            return i
    return None


# Addresses no one on the internet has (IANA IPv4 Special-Purpose Address Registry, RFC 6890: this network, private,
# shared CGNAT, loopback, link-local, benchmarking, multicast and reserved); on IPv6 only 2000::/3 is global unicast.
NOT_INTERNET_V4 = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
                   "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4")
GLOBAL_UNICAST_V6 = "2000::/3"
# Ranges holding at least this many internet addresses are the internet for a firewall rule: half a /8 of IPv4 (8.4
# million addresses, so a /8 with a private block inside still counts), half a /16 of IPv6 (wider than a regional
# registry's blocks).
WIDE_INTERNET = {4: 2**23, 6: 2**111}


def internet_addresses(cidrs: Iterable[str]) -> dict[int, int]:
    """How many internet (public) addresses the CIDRs hold together, per IP version; entries that are no CIDR count
    for nothing."""
    import ipaddress

    nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for cidr in cidrs:
        try:
            nets.append(ipaddress.ip_network(str(cidr), strict=False))
        except ValueError:
            continue
    out = {4: 0, 6: 0}
    for version, public in ((4, None), (6, ipaddress.ip_network(GLOBAL_UNICAST_V6))):
        family = list(ipaddress.collapse_addresses(n for n in nets if n.version == version))  # type: ignore[type-var]
        for net in family:
            if public is not None:  # IPv6: the part inside 2000::/3
                out[6] += (net.num_addresses if net.subnet_of(public) else  # type: ignore[arg-type]
                           public.num_addresses if public.subnet_of(net) else 0)  # type: ignore[arg-type]
                continue
            hidden = 0
            for block in map(ipaddress.ip_network, NOT_INTERNET_V4):
                if net.subnet_of(block):  # type: ignore[arg-type]
                    hidden = net.num_addresses
                    break
                if block.subnet_of(net):  # type: ignore[arg-type]
                    hidden += block.num_addresses
            out[4] += net.num_addresses - hidden
    return out


def open_to_internet(cidrs: Sequence[str]) -> str | None:
    """Why the CIDRs, alone or together, let the whole internet in, or None: a whole address family (0.0.0.0/0,
    ::/0, also in pieces such as 0.0.0.0/1 + 128.0.0.0/1) or at least :data:`WIDE_INTERNET` public addresses of one
    version (11.0.0.0/8, 2000::/3)."""
    whole = [w for w in open_to_everyone(cidrs) if not w.endswith("(not a CIDR)")]
    if whole:
        return "; ".join(whole)
    counts = internet_addresses(cidrs)
    wide = [f"{_count(counts[v])} internet {name} addresses" for v, name in ((4, "IPv4"), (6, "IPv6"))
            if counts[v] >= WIDE_INTERNET[v]]
    return f"{', '.join(cidrs)}: {' and '.join(wide)}" if wide else None


def _count(n: int) -> str:
    """An address count as people read it: 16,777,216, or about 2^125 for IPv6 sizes."""
    return f"{n:,}" if n < 10**12 else f"about 2^{n.bit_length() - 1}"
