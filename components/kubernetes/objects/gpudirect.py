"""The admission policies of GPUDirect namespaces: Pod Security baseline container by container, with one exception,
the receive-datapath sidecar (RxDM), held to exactly the container upstream runs.

Why an exception and not an injected sidecar: GKE's how-to ("Maximize GPU network bandwidth with GPUDirect-TCPXO and
multi-networking") and container-engine-accelerators' TCPXO samples have the team write the ``tcpxo-daemon``
container into its own pod, beside the trainer, with the GPU devices the NRI injector hands it by that container's
name (``devices.gke.io/container.tcpxo-daemon``); a platform that injected it would need a mutating webhook or a
MutatingAdmissionPolicy (alpha in 1.33, beta and off by default in 1.34 and 1.35, GA in 1.36: KEP-3962), which
neither EKS (whose API server flags are not the cluster owner's) nor GKE (no feature gates: GKE "Feature gates") turns
on at the versions these stacks run. So the exception stays in the team's pod, and this policy pins it: the
container named ``sidecar_name`` may mount its host paths (``/sys``, ``/proc/sys``, and the NVIDIA libraries
read-write) and add NET_ADMIN only when it runs one of the stack's accepted releases with that release's command,
args and env exactly and exactly that release's host mounts (``components/catalog/gke_manifests.yaml``, rxdm, each
read in upstream's manifests at a commit). A shell in the RxDM image (which would rewrite the libraries and NCCL
plugin every pod on the node loads) is refused, as are extra env (LD_PRELOAD), lifecycle hooks and exec probes (each
runs a command in the container), extra or other host mounts, a shared process namespace (another container would
reach the sidecar's mounts through /proc/<pid>/root: Kubernetes docs, "Share Process Namespace between Containers in
a Pod") and, in a second policy, ``kubectl exec`` or ``attach`` into it (team members may exec into their pods).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from components.kubernetes.objects.common import POD_SECURITY_REASON_LABEL, Manifest, meta
from components.kubernetes.objects.tenancy import pod_rules

# Pod Security Standards "baseline" (kubernetes.io/docs/concepts/security/pod-security-standards, v1.33): the
# capabilities a container may add, the sysctls a pod may set, the SELinux types it may ask for.
BASELINE_CAPABILITIES = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")
BASELINE_SYSCTLS = ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                    "net.ipv4.tcp_keepalive_probes")
BASELINE_SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
GPUDIRECT_POD_POLICY = "gpu-cluster-gpudirect-pod-limits"
GPUDIRECT_EXEC_POLICY = "gpu-cluster-gpudirect-sidecar-exec"


@dataclass(frozen=True)
class SidecarMount:
    """A host mount of the sidecar: the host path, the mount path, and whether it must be read-only."""

    host_path: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True)
class SidecarRelease:
    """One release the GPUDirect sidecar may run, and exactly how upstream runs it."""

    tag: str
    images: tuple[str, ...]  # upstream's image, then the stack's mirror or digest forms of it
    command: tuple[str, ...]
    args: tuple[tuple[str, ...], ...]  # each argument list upstream published for the release
    env: tuple[tuple[str, str], ...]  # (name, value) in order
    mounts: tuple[SidecarMount, ...]
    capabilities: tuple[str, ...]
    source: str = ""


@dataclass(frozen=True)
class GpuDirectPodRules:
    """What a pod in a GPUDirect namespace may do beyond Pod Security baseline, container by container.

    The namespace enforces ``privileged`` because Pod Security judges a whole pod and the GPUDirect pods need host
    paths baseline refuses; this admission policy bounds each container instead. A container named ``sidecar_name``
    that mounts a host path or adds a capability beyond baseline must run one of ``sidecar_releases`` exactly (its
    image, command, args, env and host mounts); it alone may then mount the releases' host paths outside
    ``shared_host_paths`` and add their capabilities. Any container may mount ``shared_host_paths``, read-only where
    listed in ``readonly_host_paths`` (the sidecar as its release does), and add ``container_capabilities``;
    everything else is refused as baseline refuses it.
    """

    sidecar_name: str | None
    sidecar_releases: tuple[SidecarRelease, ...]
    shared_host_paths: tuple[str, ...]
    readonly_host_paths: tuple[str, ...] = ()
    container_capabilities: tuple[str, ...] = ()
    source: str = ""

    @property
    def sidecar_host_paths(self) -> tuple[str, ...]:
        """The host paths only the sidecar mounts: its releases', outside the shared ones."""
        paths = {m.host_path for r in self.sidecar_releases for m in r.mounts}
        return tuple(sorted(p for p in paths if not _is_under(p, self.shared_host_paths)))

    @property
    def sidecar_capabilities(self) -> tuple[str, ...]:
        """The capabilities only the sidecar adds (its releases', beyond baseline and the containers' own)."""
        extra = {c for r in self.sidecar_releases for c in r.capabilities}
        return tuple(sorted(extra - set(BASELINE_CAPABILITIES) - set(self.container_capabilities)))

    @property
    def sidecar_images(self) -> tuple[str, ...]:
        return tuple(i for r in self.sidecar_releases for i in r.images)

    def accepted(self) -> str:
        """The accepted releases and their images, for messages."""
        return "; ".join(f"{r.tag} ({' or '.join(r.images)})" for r in self.sidecar_releases) or "none"


def _is_under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _cel_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _under(paths: Sequence[str], expr: str) -> str:
    return f"{_cel_list(paths)}.exists(p, {expr} == p || {expr}.startsWith(p + '/'))"


# CEL fragments on a container ``c`` of the pod (the policy's variable hostVolumes: the pod's hostPath volumes).
_HOST_MOUNT = "variables.hostVolumes.exists(v, v.name == m.name)"
_HOST_MOUNTS = f"(!has(c.volumeMounts) ? [] : c.volumeMounts.filter(m, {_HOST_MOUNT}))"


def _list_is(field: str, values: Sequence[str]) -> str:
    """The container's list field (command, args) is exactly ``values`` (absent or empty when there are none)."""
    if not values:
        return f"(!has(c.{field}) || c.{field}.size() == 0)"
    return f"(has(c.{field}) && c.{field} == {_cel_list(values)})"


def _each(field: str, body: str) -> str:
    """``body`` holds for every container ``c`` of the pod's list ``field`` (an absent list holds)."""
    check = f"object.spec.{field}.all(c, {body})"
    return check if field == "containers" else f"!has(object.spec.{field}) || {check}"


def _release_pins(r: SidecarRelease) -> dict[str, str]:
    """The CEL conditions a container meets when it runs release ``r`` as upstream does, by part."""
    images = f"c.image in {_cel_list(r.images)}"
    args = " || ".join(_list_is("args", a) for a in r.args) or "false"
    names, values = [n for n, _ in r.env], [v for _, v in r.env]
    env = ("(!has(c.env) || c.env.size() == 0)" if not r.env else
           f"(has(c.env) && c.env.map(e, e.name) == {_cel_list(names)} && c.env.all(e, !has(e.valueFrom)) && "
           f"c.env.map(e, has(e.value) ? e.value : '') == {_cel_list(values)})")
    pairs = " || ".join(f"(v.hostPath.path == {json.dumps(m.host_path)} && m.mountPath == {json.dumps(m.mount_path)}"
                        + (" && has(m.readOnly) && m.readOnly" if m.read_only else "") + ")" for m in r.mounts)
    # Exactly the release's mounts and nothing else: a volume of any kind mounted over the entrypoint's directory,
    # /bin or /etc (an emptyDir an init container filled, say) would run the team's code with the sidecar's host
    # mounts and capabilities; so no other mount, no block device and no working directory of its own.
    mounts = (f"((has(c.volumeMounts) ? c.volumeMounts.size() : 0) == {len(r.mounts)} && "
              f"{_HOST_MOUNTS}.size() == {len(r.mounts)} && {_HOST_MOUNTS}.all(m, !has(m.subPath) && "
              f"!has(m.subPathExpr) && variables.hostVolumes.exists(v, v.name == m.name && ({pairs or 'false'}))) && "
              "!has(c.volumeDevices) && !has(c.workingDir))")
    return {"image": images, "run": f"{_list_is('command', r.command)} && ({args})",
            "env": f"{env} && !has(c.envFrom)", "mounts": mounts}


def _shown(values: Sequence[str]) -> str:
    """A command or argument list as one line (a validation message has no line breaks)."""
    return json.dumps(list(values))


def gpudirect_pod_policy(rules: GpuDirectPodRules) -> list[Manifest]:
    """The per-container bounds of GPUDirect namespaces (see :class:`GpuDirectPodRules`), as one
    ValidatingAdmissionPolicy: host namespaces, host ports, hostProcess, /proc mounts, seccomp, AppArmor, SELinux and
    sysctls as baseline; host paths and capabilities by container; the sidecar pinned to its release. Privileged
    containers stay refused by ``gpu-cluster-no-privileged-pods``."""
    sidecar = json.dumps(rules.sidecar_name) if rules.sidecar_name else None
    sidecar_paths = rules.sidecar_host_paths
    allowed_caps = _cel_list([*BASELINE_CAPABILITIES, *rules.container_capabilities])

    def mounting(paths: Sequence[str]) -> str:
        """The mount ``m`` is of a host path under ``paths``."""
        return f"variables.hostVolumes.exists(v, v.name == m.name && {_under(paths, 'v.hostPath.path')})"

    each = _each
    named = f"c.name == {sidecar}" if sidecar else "false"
    # A container claims the sidecar's exception when it mounts any host path or adds a capability beyond baseline.
    claims = (f"({_HOST_MOUNTS}.size() > 0 || (has(c.securityContext) && has(c.securityContext.capabilities) && "
              "has(c.securityContext.capabilities.add) && "
              f"c.securityContext.capabilities.add.exists(x, !(x in {allowed_caps}))))")
    validations: list[Manifest] = [
        {"expression": f"!has(object.spec.{ns}) || !object.spec.{ns}", "reason": "Forbidden",
         "message": f"team pods do not use the node's {ns.removeprefix('host')} namespace"}
        for ns in ("hostNetwork", "hostPID", "hostIPC")
    ]
    allowed_paths = [*sidecar_paths, *rules.shared_host_paths]
    validations.append({
        "expression": "variables.hostVolumes.all(v, " + _under(allowed_paths, "v.hostPath.path") + ")",
        "reason": "Forbidden", "message": f"team pods mount only the GPUDirect host paths {', '.join(allowed_paths)}"})
    has_mounts = "!has(c.volumeMounts) || c.volumeMounts.all(m, "
    for field in ("containers", "initContainers"):
        if sidecar_paths:
            validations.append({
                "expression": each(field, f"{named} || {has_mounts}!({mounting(sidecar_paths)}))"),
                "reason": "Forbidden",
                "message": f"{field}: only the GPUDirect sidecar (container {rules.sidecar_name}, running an "
                           f"accepted RxDM release as upstream does) mounts {', '.join(sidecar_paths)}"})
        if rules.readonly_host_paths:
            validations.append({
                "expression": each(field, f"{named} || {has_mounts}!({mounting(rules.readonly_host_paths)}) || "
                                          "(has(m.readOnly) && m.readOnly))"),
                "reason": "Forbidden",
                "message": f"{field} mount {', '.join(rules.readonly_host_paths)} read-only (readOnly: true): the "
                           "driver and NCCL plugin libraries every pod on the node loads"})
        validations.append({
            "expression": each(field, "!has(c.securityContext) || !has(c.securityContext.capabilities) || "
                                      "!has(c.securityContext.capabilities.add) || c.securityContext.capabilities"
                                      f".add.all(x, x in {allowed_caps} || ({named} && "
                                      f"x in {_cel_list(rules.sidecar_capabilities)}))"),
            "reason": "Forbidden",
            "message": f"{field} add only the capabilities Pod Security baseline allows"
                       + (f" (and {', '.join(rules.container_capabilities)})" if rules.container_capabilities else "")
                       + (f"; {', '.join(rules.sidecar_capabilities)} only in the GPUDirect sidecar"
                          if rules.sidecar_capabilities else "")})
        if sidecar:
            validations += _sidecar_pins(rules, field, f"!({named}) || !{claims}")
    if sidecar:
        containers = (f"object.spec.containers.exists(c, c.name == {sidecar}) || "
                      f"(has(object.spec.initContainers) && object.spec.initContainers.exists(c, c.name == {sidecar}))")
        validations.append({
            "expression": f"!has(object.spec.shareProcessNamespace) || !object.spec.shareProcessNamespace || "
                          f"!({containers})",
            "reason": "Forbidden",
            "message": f"a pod with the GPUDirect sidecar ({rules.sidecar_name}) does not share its process "
                       "namespace: the other containers would reach the sidecar's host mounts through "
                       "/proc/<pid>/root"})
    validations += _baseline_rest()
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": meta(GPUDIRECT_POD_POLICY),
         "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": pod_rules()},
                  "variables": [{"name": "hostVolumes", "expression": "!has(object.spec.volumes) ? [] : "
                                 "object.spec.volumes.filter(v, has(v.hostPath))"}],
                  "validations": validations}},
        _binding(GPUDIRECT_POD_POLICY),
    ]


def _sidecar_pins(rules: GpuDirectPodRules, field: str, exempt: str) -> list[Manifest]:
    """The validations that hold a sidecar claiming its exception to an accepted release, run as upstream runs it."""
    each = _each
    name = rules.sidecar_name
    pins = [(r, _release_pins(r)) for r in rules.sidecar_releases]
    images = _cel_list(rules.sidecar_images)

    def per_release(part: str) -> str:
        """The container runs one of the accepted images, as that image's release does for ``part``."""
        return " || ".join(f"({p['image']} && {p[part]})" for _, p in pins) or "false"

    runs = "; ".join(f"{r.tag}: command {_shown(r.command)} with args "
                     + " or ".join(_shown(a) for a in r.args) for r in rules.sidecar_releases)
    envs = "; ".join(f"{r.tag}: " + (", ".join(f"{n}={v}" for n, v in r.env) or "none")
                     for r in rules.sidecar_releases)
    mounts = "; ".join(f"{r.tag}: " + ", ".join(f"{m.host_path} at {m.mount_path}" + (" read-only" if m.read_only
                                                                                     else "") for m in r.mounts)
                       for r in rules.sidecar_releases)
    probes = " && ".join(f"(!has(c.{p}) || !has(c.{p}.exec))" for p in ("livenessProbe", "readinessProbe",
                                                                           "startupProbe"))
    return [
        {"expression": each(field, f"{exempt} || c.image in {images}"), "reason": "Forbidden",
         "message": f"{field}: container {name} mounts host paths or adds capabilities only running an RxDM release "
                    f"this stack accepts: {rules.accepted()} (gcp.rxdm in the stack; each release's container from "
                    "components/catalog/gke_manifests.yaml, rxdm)"},
        {"expression": each(field, f"{exempt} || !(c.image in {images}) || {per_release('run')}"),
         "reason": "Forbidden",
         "message": f"{field}: container {name} runs its release's command and args exactly as upstream does, "
                    f"nothing else ({runs})"},
        {"expression": each(field, f"{exempt} || !(c.image in {images}) || {per_release('env')}"),
         "reason": "Forbidden",
         "message": f"{field}: container {name} sets exactly its release's env and no envFrom ({envs})"},
        {"expression": each(field, f"{exempt} || !(c.image in {images}) || {per_release('mounts')}"),
         "reason": "Forbidden",
         "message": f"{field}: container {name} has exactly its release's host mounts and no other volume, no "
                    f"subPath, no volumeDevices and no workingDir ({mounts})"},
        {"expression": each(field, f"{exempt} || (!has(c.lifecycle) && {probes})"), "reason": "Forbidden",
         "message": f"{field}: container {name} has no lifecycle hooks and no exec probes (each runs a command in it)"},
    ]


def _baseline_rest() -> list[Manifest]:
    """What baseline refuses beyond host paths and capabilities: host ports, /proc mounts, unconfined profiles,
    host processes, unsafe sysctls, unconfined AppArmor annotations."""
    each = _each
    validations: list[Manifest] = []
    for field in ("containers", "initContainers", "ephemeralContainers"):
        validations += [
            {"expression": each(field, "!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)"),
             "reason": "Forbidden", "message": f"{field} use no host ports"},
            {"expression": each(field, "!has(c.securityContext) || !has(c.securityContext.procMount) || "
                                       "c.securityContext.procMount == 'Default'"),
             "reason": "Forbidden", "message": f"{field} keep the default /proc mount"},
            {"expression": each(field, "!has(c.securityContext) || ((!has(c.securityContext.seccompProfile) || "
                                       "c.securityContext.seccompProfile.type != 'Unconfined') && "
                                       "(!has(c.securityContext.appArmorProfile) || "
                                       "c.securityContext.appArmorProfile.type != 'Unconfined') && "
                                       "(!has(c.securityContext.windowsOptions) || "
                                       "!has(c.securityContext.windowsOptions.hostProcess) || "
                                       "!c.securityContext.windowsOptions.hostProcess) && "
                                       "(!has(c.securityContext.seLinuxOptions) || "
                                       "((!has(c.securityContext.seLinuxOptions.type) || "
                                       f"c.securityContext.seLinuxOptions.type in {_cel_list(BASELINE_SELINUX_TYPES)})"
                                       " && !has(c.securityContext.seLinuxOptions.user) && "
                                       "!has(c.securityContext.seLinuxOptions.role))))"),
             "reason": "Forbidden", "message": f"{field} keep seccomp, AppArmor and SELinux confined and run no "
                                               "host process"},
        ]
    validations.append({
        "expression": "!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, "
                      "!has(c.volumeMounts) || c.volumeMounts.all(m, !variables.hostVolumes.exists(v, "
                      "v.name == m.name)))",
        "reason": "Forbidden", "message": "ephemeral containers mount no host path"})
    validations.append({
        "expression": "!has(object.spec.securityContext) || ((!has(object.spec.securityContext.seccompProfile) || "
                      "object.spec.securityContext.seccompProfile.type != 'Unconfined') && "
                      "(!has(object.spec.securityContext.appArmorProfile) || "
                      "object.spec.securityContext.appArmorProfile.type != 'Unconfined') && "
                      "(!has(object.spec.securityContext.sysctls) || object.spec.securityContext.sysctls.all(s, "
                      f"s.name in {_cel_list(BASELINE_SYSCTLS)})) && "
                      "(!has(object.spec.securityContext.seLinuxOptions) || "
                      "((!has(object.spec.securityContext.seLinuxOptions.type) || "
                      f"object.spec.securityContext.seLinuxOptions.type in {_cel_list(BASELINE_SELINUX_TYPES)}) && "
                      "!has(object.spec.securityContext.seLinuxOptions.user) && "
                      "!has(object.spec.securityContext.seLinuxOptions.role))) && "
                      "(!has(object.spec.securityContext.windowsOptions) || "
                      "!has(object.spec.securityContext.windowsOptions.hostProcess) || "
                      "!object.spec.securityContext.windowsOptions.hostProcess))",
        "reason": "Forbidden", "message": "the pod keeps seccomp, AppArmor and SELinux confined, sets only the "
                                          "sysctls baseline allows and runs no host process"})
    validations.append({
        "expression": "!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
                      "!k.startsWith('container.apparmor.security.beta.kubernetes.io/') || "
                      "object.metadata.annotations[k] == 'runtime/default' || "
                      "object.metadata.annotations[k].startsWith('localhost/'))",
        "reason": "Forbidden", "message": "AppArmor annotations name runtime/default or a localhost profile"})
    return validations


def _binding(name: str) -> Manifest:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": meta(name),
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     # Every namespace that says it runs GPUDirect pods: the teams' and the acceptance jobs'.
                     "matchResources": {"namespaceSelector": {"matchLabels": {
                         POD_SECURITY_REASON_LABEL: "gpudirect-sidecars"}}}}}


def gpudirect_exec_policy(rules: GpuDirectPodRules) -> list[Manifest]:
    """Refuse ``kubectl exec`` and ``attach`` into the sidecar (and requests that name no container, which the API
    server would send to a pod's only container): a team member may exec into the team's pods (the team Role grants
    pods/exec), and a shell in the running sidecar has its host mounts. The policy runs on the CONNECT of
    pods/exec and pods/attach, whose object is the PodExecOptions or PodAttachOptions (``container``); kubectl
    always names the container it picked. ValidatingAdmissionPolicies are called on these CONNECT requests as
    admission webhooks are (kyverno/kyverno @3153d4bc test/conformance/chainsaw/generate-validating-admission-policy/
    clusterpolicy/standard/generate/block-exec-in-pods/chainsaw-test.yaml: a generated policy on pods/exec CONNECT
    refuses ``kubectl exec``)."""
    if not rules.sidecar_name:
        return []
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": meta(GPUDIRECT_EXEC_POLICY),
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CONNECT"],
                                                          "resources": ["pods/exec", "pods/attach"]}]},
                  "validations": [{
                      "expression": f"has(object.container) && object.container != '' && "
                                    f"object.container != {json.dumps(rules.sidecar_name)}",
                      "reason": "Forbidden",
                      "message": f"exec and attach name a container (kubectl -c), never the GPUDirect sidecar "
                                 f"{rules.sidecar_name}: a shell there could rewrite the node's NVIDIA libraries"}]}},
        _binding(GPUDIRECT_EXEC_POLICY),
    ]
