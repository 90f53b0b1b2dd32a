"""Pod Security admission: the checks of the Pod Security Standards (kubernetes.io/docs/concepts/security/
pod-security-standards, policy version "latest") for the level a namespace enforces
(``pod-security.kubernetes.io/enforce``).

Baseline: no host namespaces, no privileged containers, capabilities added only from the baseline list, no
hostPath volumes, no host ports, AppArmor and SELinux options left to the runtime, the default /proc mount,
seccomp not Unconfined, only the safe sysctls. Restricted adds: volume types limited to configMap, csi, downwardAPI,
emptyDir, ephemeral, persistentVolumeClaim, projected and secret; ``allowPrivilegeEscalation: false``; running as
non-root (and never as UID 0); a RuntimeDefault or Localhost seccomp profile; every capability dropped (``ALL``) and
only NET_BIND_SERVICE added back.
"""

from __future__ import annotations

from typing import Any

from blueprint.admit.cluster import as_list, as_mapping, as_str_map

LEVELS = ("privileged", "baseline", "restricted")
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}
_SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def enforced_level(namespace_labels: dict[str, str]) -> str:
    """The level a namespace enforces (``privileged`` when unlabelled, as the API server's default is)."""
    level = namespace_labels.get(ENFORCE_LABEL, "privileged")
    return level if level in LEVELS else "restricted"  # an unknown level is refused by the API: assume the strictest


def _containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for key, what in (("initContainers", "init container"), ("containers", "container"),
                      ("ephemeralContainers", "ephemeral container")):
        for c in as_list(spec.get(key)):
            if isinstance(c, dict):
                out.append((f"{what} {c.get('name')}", c))
    return out


def _baseline(spec: dict[str, Any], annotations: dict[str, str]) -> list[str]:
    problems = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field) is True:
            problems.append(f"{field}: true (host namespaces)")
    pod_sc = as_mapping(spec.get("securityContext"))
    for volume in as_list(spec.get("volumes")):
        if isinstance(volume, dict) and "hostPath" in volume:
            problems.append(f"volume {volume.get('name')} is a hostPath")
    for sysctl in as_list(pod_sc.get("sysctls")):
        name = as_mapping(sysctl).get("name")
        if name not in SAFE_SYSCTLS:
            problems.append(f"sysctl {name} is not one of the safe sysctls")
    problems += _seccomp_apparmor_selinux("pod", pod_sc)
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and value != "runtime/default" \
                and not value.startswith("localhost/"):
            problems.append(f"annotation {key}: {value} (AppArmor left unconfined)")
    for who, c in _containers(spec):
        sc = as_mapping(c.get("securityContext"))
        if sc.get("privileged") is True:
            problems.append(f"{who} is privileged")
        added = [str(x) for x in as_list(as_mapping(sc.get("capabilities")).get("add"))]
        beyond = sorted(set(added) - BASELINE_CAPABILITIES)
        if beyond:
            problems.append(f"{who} adds capabilities {', '.join(beyond)}")
        for port in as_list(c.get("ports")):
            if isinstance(port, dict) and port.get("hostPort") not in (None, 0):
                problems.append(f"{who} uses hostPort {port.get('hostPort')}")
        if sc.get("procMount") not in (None, "Default"):
            problems.append(f"{who} sets procMount {sc.get('procMount')}")
        problems += _seccomp_apparmor_selinux(who, sc)
    return problems


def _seccomp_apparmor_selinux(who: str, sc: dict[str, Any]) -> list[str]:
    problems = []
    if as_mapping(sc.get("seccompProfile")).get("type") == "Unconfined":
        problems.append(f"{who} sets seccompProfile Unconfined")
    if as_mapping(sc.get("appArmorProfile")).get("type") == "Unconfined":
        problems.append(f"{who} sets appArmorProfile Unconfined")
    selinux = as_mapping(sc.get("seLinuxOptions"))
    if selinux.get("type", "") not in _SELINUX_TYPES:
        problems.append(f"{who} sets SELinux type {selinux.get('type')}")
    if selinux.get("user") or selinux.get("role"):
        problems.append(f"{who} sets an SELinux user or role")
    return problems


def _restricted(spec: dict[str, Any]) -> list[str]:
    problems = []
    for volume in as_list(spec.get("volumes")):
        if isinstance(volume, dict):
            kinds = set(volume) - {"name"}
            if kinds and not kinds <= RESTRICTED_VOLUMES:
                problems.append(f"volume {volume.get('name')} is of type {', '.join(sorted(kinds))}")
    pod_sc = as_mapping(spec.get("securityContext"))
    pod_non_root = pod_sc.get("runAsNonRoot") is True
    pod_seccomp = as_mapping(pod_sc.get("seccompProfile")).get("type") in ("RuntimeDefault", "Localhost")
    if pod_sc.get("runAsUser") == 0:
        problems.append("the pod runs as UID 0")
    for who, c in _containers(spec):
        sc = as_mapping(c.get("securityContext"))
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{who} does not set allowPrivilegeEscalation: false")
        if sc.get("runAsNonRoot") is False or (not pod_non_root and sc.get("runAsNonRoot") is not True):
            problems.append(f"{who} does not set runAsNonRoot: true")
        if sc.get("runAsUser") == 0:
            problems.append(f"{who} runs as UID 0")
        seccomp = as_mapping(sc.get("seccompProfile")).get("type")
        if not (seccomp in ("RuntimeDefault", "Localhost") or (seccomp is None and pod_seccomp)):
            problems.append(f"{who} has no RuntimeDefault or Localhost seccompProfile")
        caps = as_mapping(sc.get("capabilities"))
        if "ALL" not in [str(x) for x in as_list(caps.get("drop"))]:
            problems.append(f"{who} does not drop ALL capabilities")
        extra = sorted({str(x) for x in as_list(caps.get("add"))} - {"NET_BIND_SERVICE"})
        if extra:
            problems.append(f"{who} adds {', '.join(extra)} (restricted allows only NET_BIND_SERVICE)")
    return problems


def pod_security_problems(pod: dict[str, Any], level: str) -> list[str]:
    """What the level forbids in the pod (empty when it is admitted)."""
    if level == "privileged":
        return []
    spec = as_mapping(pod.get("spec"))
    annotations = as_str_map(as_mapping(pod.get("metadata")).get("annotations"))
    problems = _baseline(spec, annotations)
    if level == "restricted":
        problems += _restricted(spec)
    return problems
