"""Every GPU node proves itself before it takes a job, and keeps proving it: the Node Readiness Controller's rules, the
per-node check DaemonSet that reports the conditions they read, and what lets its reporter write only its own node.

How it fits together (docs/capacity.md, "Node readiness"):

- a GPU node registers with :data:`BOOT_TAINT` (the node group's taint on EKS; on GKE the controller adds it when the
  node joins, see :func:`registers_with_taint`), so nothing that does not tolerate it is scheduled there;
- the check DaemonSet's pod on the node runs the checks once (GPU count and model from ``nvidia-smi``, driver, CUDA,
  DCGM diagnostics, the fabric devices, the NVLink all_reduce against the per-node figure), writes the node's record
  and serves the verdict on localhost; the Node Readiness Controller's reporter (its maintained sidecar) turns it into
  the node condition :data:`BOOT_CONDITION`;
- the ``bootstrap-only`` NodeReadinessRule removes the taint once the condition is True, and marks the node done;
- the ``continuous`` rule keeps :data:`HEALTH_TAINT` on a node whose :data:`HEALTH_CONDITION` is not True: the pod's
  health loop (DCGM health watches, the fabric devices still up, the last check passed) reports it, so a node that
  goes bad stops taking new jobs (NoSchedule: running ones finish; the alerts fire as before).

A check asked again (delete the node's check pod) waits until no process holds a GPU before it benchmarks, so it never
runs beside a job; a failed re-check turns the health condition False.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.kubernetes.objects.acceptance import RECORDS_DIR, RECORDS_PREFIX, AcceptanceRecorder, records_copy
from components.kubernetes.objects.common import (
    NODE_AGENT_TOLERATIONS,
    NODE_GROUP_LABEL,
    QUEUED_TOLERATION,
    Manifest,
    meta,
)
from components.kubernetes.quotas import CPU, MEMORY
from components.spec import HEALTH_TAINT_KEY, READINESS_TAINT_KEY, ClusterSpec

NODE_CHECK_NAMESPACE = "gpu-node-check"
READINESS_NAMESPACE = "nrr-system"  # where the project's own manifests install the controller (its installation.md)
READINESS_API = "readiness.node.x-k8s.io/v1alpha1"
# Taint keys must start with readiness.k8s.io/ (the NodeReadinessRule CRD's CEL rule on spec.taint.key, v0.5.0).
BOOT_TAINT = READINESS_TAINT_KEY
HEALTH_TAINT = HEALTH_TAINT_KEY
BOOT_CONDITION = "gpu-cluster.io/NodeCheckPassed"
HEALTH_CONDITION = "gpu-cluster.io/GpuHealthy"
SERVICE_ACCOUNT = "node-check"
# DCGM diagnostics level 2 ("medium validation, normally lasting approximately two minutes", NVIDIA dcgmi-diag
# reference): level 1 is deployment checks only; level 3 takes about 15 minutes, too long for every node's boot.
DCGM_LEVEL = 2
# Bounds of each level's run: several times what NVIDIA documents (seconds; about two minutes; about 15 minutes), so a
# timeout is a hang, not a slow node.
DCGM_TIMEOUT_S = {1: 300, 2: 900, 3: 3600}
NVLINK_TIMEOUT_S = 1200  # the per-node sweep to 16 GB (objects/acceptance.py NODE_RUN_TIMEOUT_S)
HEALTH_INTERVAL_S = 60
STATUS_PORT = 9461  # the verdict server, on the pod's own loopback
HOST_SYS = "/host/sys"  # the host's /sys, read-only (the fabric devices and the host's network interfaces)
STATUS_DIR = "/status"


@dataclass(frozen=True)
class NodeCheck:
    """What one GPU node group's nodes must show: GPUs (count, and a word of the model nvidia-smi prints), the fabric
    devices (kind: ``efa`` or ``rdma`` devices under /sys/class/infiniband, ``gpu-nic`` host interfaces, ``none``) and
    the per-node NVLink bus bandwidth a node must reach (None: recorded, not judged), with where that figure comes
    from."""

    pool: str
    instance_type: str
    gpus: int
    gpu_model: str
    fabric_kind: str
    fabric_devices: int
    expected_busbw: float | None
    pass_fraction: float
    busbw_source: str = ""
    queued: bool = False
    dcgm_level: int = 2
    unhealthy_effect: str = "NoSchedule"


@dataclass(frozen=True)
class NodeCheckImages:
    """The check's images: DCGM (nv-hostengine, dcgmi), the readiness reporter, a shell with an HTTP server (busybox),
    and the nccl-tests image of the acceptance gate (None: no NVLink benchmark, the other checks still run)."""

    dcgm: str
    reporter: str
    tools: str
    nccl_tests: str | None = None
    tests_dir: str = "/opt/nccl-tests/build"


def per_node_expected(spec: ClusterSpec) -> dict[str, tuple[float, str]]:
    """The stack's per-node NVLink figures (acceptance.expected entries of one node), per group: (GB/s, source)."""
    return {e.node_group: (e.busbw_gbps, e.source) for e in spec.acceptance.expected if e.nodes == 1}


def node_checks(pools: Sequence[Any], expected: Mapping[str, tuple[float, str]], pass_fraction: float,
                per_node: Mapping[str, Any], *, dcgm_level: int = DCGM_LEVEL,
                unhealthy_effect: str = "NoSchedule") -> list[NodeCheck]:
    """One :class:`NodeCheck` per GPU pool: the stack's per-node figure, else the catalog's (``per_node``: instance
    type -> a threshold with ``expected_busbw_gbps`` and ``source``), else none (recorded, not judged). The GPU model
    word is the catalog's model without its vendor (``NVIDIA H100 80GB`` -> ``H100``), as nvidia-smi prints it."""
    out = []
    for pool in pools:
        words = (pool.gpu_model or "").split()
        model = words[1] if len(words) > 1 and words[0].upper() == "NVIDIA" else (words[0] if words else "")
        figure, source = expected.get(pool.name, (None, ""))
        found = per_node.get(pool.instance_type)
        if figure is None and found is not None and found.expected_busbw_gbps is not None:
            figure, source = float(found.expected_busbw_gbps), str(found.source)
        out.append(NodeCheck(pool=pool.name, instance_type=pool.instance_type, gpus=pool.gpus_per_node,
                             gpu_model=model, fabric_kind=pool.fabric_kind, fabric_devices=pool.fabric_devices,
                             expected_busbw=figure, pass_fraction=pass_fraction, busbw_source=source,
                             queued=pool.queued, dcgm_level=dcgm_level, unhealthy_effect=unhealthy_effect))
    return out


def readiness_rules(check: NodeCheck) -> list[Manifest]:
    """The group's two NodeReadinessRules: ``bootstrap-only`` on :data:`BOOT_CONDITION` (removes the registration
    taint once, then marks the node done) and ``continuous`` on :data:`HEALTH_CONDITION`. A rule's taint key may repeat
    across groups: their node selectors do not overlap (the controller's webhook refuses only overlapping ones)."""
    selector = {"matchLabels": {NODE_GROUP_LABEL: check.pool}}
    labels = {"gpu-cluster/node-check": check.pool}
    boot = {"conditions": [{"type": BOOT_CONDITION, "requiredStatus": "True"}],
            "enforcementMode": "bootstrap-only", "nodeSelector": selector,
            "taint": {"key": BOOT_TAINT, "value": "pending", "effect": "NoSchedule"}}
    # Not default-allow: a node whose health has never been reported takes no job either.
    health = {"conditions": [{"type": HEALTH_CONDITION, "requiredStatus": "True"}],
              "enforcementMode": "continuous", "nodeSelector": selector,
              "taint": {"key": HEALTH_TAINT, "value": "unhealthy", "effect": check.unhealthy_effect}}
    return [{"apiVersion": READINESS_API, "kind": "NodeReadinessRule",
             "metadata": meta(rule_name(prefix, check.pool, spec), labels=labels), "spec": spec}
            for prefix, spec in (("gpu-node-check", boot), ("gpu-health", health))]


def rule_name(prefix: str, pool: str, spec: Mapping[str, Any]) -> str:
    """A rule's name, with a digest of its spec: the CRD makes the spec immutable (CEL ``self == oldSelf``), so a
    changed rule is a new object under a new name, created before the old one is deleted (deleting a rule first would
    lift its taint from every node of the group until the new one exists: the controller's finalizer cleans up)."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    return f"{prefix}-{pool}-{digest}"


def registers_with_taint(autoscaled: bool, cloud: str) -> bool:
    """Whether a group's nodes register with :data:`BOOT_TAINT`. On EKS always: the Cluster Autoscaler is told it is a
    startup taint (``--startup-taints``). GKE's autoscaler treats only its ``startup-taint.cluster-autoscaler.
    kubernetes.io/`` prefix as one and the flag is not settable there, while the controller's CRD (v0.5.0) accepts only
    ``readiness.k8s.io/`` keys (kubernetes-sigs/node-readiness-controller issue #279): an autoscaled pool registering
    with the taint would never scale up from zero. There the controller adds the taint when the node joins (the
    ``bootstrap-only`` rule taints a matching node that has not completed); no GPU pod can start first, because the
    GPUs are allocatable only after GKE's driver installer and device plugin have run."""
    return cloud == "aws" or not autoscaled


def reporter_rbac(labels: Mapping[str, str]) -> list[Manifest]:
    """What the reporters may do: read nodes and update a node's status (the reporter gets its node, then
    UpdateStatus; cmd/readiness-condition-reporter). Cluster-wide by RBAC; :func:`reporter_node_policy` narrows it to
    the pod's own node and its two conditions."""
    name = "gpu-node-check-reporter"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, labels=labels),
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["get", "update", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": meta(name, labels=labels),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NODE_CHECK_NAMESPACE}]},
    ]


REPORTER_USER = f"system:serviceaccount:{NODE_CHECK_NAMESPACE}:{SERVICE_ACCOUNT}"
# A bound service account token names the node its pod runs on (userInfo.extra authentication.kubernetes.io/
# node-name; Kubernetes "Service account tokens", ServiceAccountTokenPodNodeInfo, on by default since 1.30). The
# project's own answer, constrained impersonation, needs Kubernetes 1.35 (its docs, operations/security.md).
_NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


def reporter_node_policy() -> list[Manifest]:
    """A ValidatingAdmissionPolicy that lets the reporters' service account change only its own node's status, and
    there only the two conditions the check reports: a compromised check pod cannot mark another node ready."""
    ours = f"['{BOOT_CONDITION}', '{HEALTH_CONDITION}']"
    others = "{0}.status.conditions.filter(c, !(c.type in " + ours + "))"
    name = "gpu-node-check-own-node"
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta(name),
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["UPDATE"], "resources": ["nodes/status"]}]},
             "matchConditions": [{"name": "reporter", "expression": f"request.userInfo.username == '{REPORTER_USER}'"}],
             "validations": [
                 {"expression": f"'{_NODE_NAME_EXTRA}' in request.userInfo.extra && "
                                f"request.userInfo.extra['{_NODE_NAME_EXTRA}'][0] == object.metadata.name",
                  "reason": "Forbidden", "message": "the node check may update only the node its pod runs on"},
                 {"expression": "!has(oldObject.status.conditions) || !has(object.status.conditions) || "
                                f"{others.format('object')} == {others.format('oldObject')}",
                  "reason": "Forbidden",
                  "message": f"the node check may change only its conditions {BOOT_CONDITION} and {HEALTH_CONDITION}"},
             ]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": meta(name), "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def _fabric_script(kind: str) -> str:
    """Shell that sets FABRIC_PRESENT, FABRIC_UP and FABRIC_NAMES: EFA and RDMA NICs are InfiniBand-class devices
    (``/sys/class/infiniband/<dev>/ports/1/state`` is ``4: ACTIVE`` when up; the EFA driver registers rdmap* devices,
    mlx5_* for ConnectX); GKE's TCPX/TCPXO GPU NICs are host interfaces eth1..ethN (the pod runs in the host network
    namespace to see them; eth0 is the node's primary NIC)."""
    if kind in ("efa", "rdma"):
        return ("FABRIC_PRESENT=0; FABRIC_UP=0; FABRIC_NAMES=''\n"
                "for d in $SYS/class/infiniband/*; do [ -e \"$d\" ] || continue; n=${d##*/}\n"
                "  FABRIC_PRESENT=$((FABRIC_PRESENT+1)); FABRIC_NAMES=\"$FABRIC_NAMES $n\"\n"
                "  grep -q ACTIVE \"$d/ports/1/state\" 2>/dev/null && FABRIC_UP=$((FABRIC_UP+1)); done")
    if kind == "gpu-nic":
        return ("FABRIC_PRESENT=0; FABRIC_UP=0; FABRIC_NAMES=''\n"
                "for d in $SYS/class/net/eth*; do [ -e \"$d\" ] || continue; n=${d##*/}\n"
                "  [ \"$n\" = eth0 ] && continue\n"
                "  FABRIC_PRESENT=$((FABRIC_PRESENT+1)); FABRIC_NAMES=\"$FABRIC_NAMES $n\"\n"
                "  [ \"$(cat \"$d/operstate\" 2>/dev/null)\" = up ] && FABRIC_UP=$((FABRIC_UP+1)); done")
    return "FABRIC_PRESENT=0; FABRIC_UP=0; FABRIC_NAMES=''"


# Where the scripts read and write; the environment may move them (the tests run the scripts against a fake sysfs).
_DIRS = f"R=${{RECORDS_DIR:-{RECORDS_DIR}}}; S=${{STATUS_DIR:-{STATUS_DIR}}}; SYS=${{SYSFS_ROOT:-/sys}}"
_SMI = "SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)"


def dcgm_script(check: NodeCheck) -> str:
    """The first check (DCGM image): wait until no process holds a GPU, read the GPUs from nvidia-smi, count the fabric
    devices, run DCGM diagnostics at the stack's level (default :data:`DCGM_LEVEL`) on a host engine of its own, and
    leave the facts in ``facts.env`` for the verdict. It never fails the pod: what it found is the record."""
    return "\n".join([
        "set -u", _DIRS, "mkdir -p $R", _SMI,
        # A re-check on a node in service waits for its jobs to end (the node is tainted by then, or its health is).
        # (only PIDs count: nvidia-smi prints its own errors on stdout, and a broken driver is the check's to judge)
        'while $SMI --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -qE "^ *[0-9]+ *$"; do '
        'echo "GPUs in use: waiting before the check"; sleep 60; done',
        "START=$(date -u +%Y-%m-%dT%H:%M:%SZ)",
        "GPU_COUNT=$($SMI --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c .)",
        "GPU_MODEL=$($SMI --query-gpu=name --format=csv,noheader 2>/dev/null | sort -u | paste -sd ';' | tr -d '\"')",
        "DRIVER=$($SMI --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)",
        "CUDA=$($SMI 2>/dev/null | sed -n 's/.*CUDA Version: *\\([0-9.]*\\).*/\\1/p' | head -n1)",
        _fabric_script(check.fabric_kind),
        "nv-hostengine -n >/dev/null 2>&1 & HE=$!; sleep 5",
        "T0=$(date +%s)",
        f"timeout {DCGM_TIMEOUT_S[check.dcgm_level]} dcgmi diag -r {check.dcgm_level} -j > $R/dcgm.json "
        "2> $R/dcgm.err; DCGM_EXIT=$?",
        "DCGM_SECONDS=$(( $(date +%s) - T0 )); kill $HE 2>/dev/null",
        # The failed tests' names: each result's status follows its test's name in dcgmi's JSON.
        "DCGM_FAILED=$(grep -oE '\"name\" *: *\"[^\"]*\"|\"status\" *: *\"Fail\"' $R/dcgm.json | "
        "awk -F'\"' '/name/ {n=$4} /Fail/ {print n}' | sort -u | paste -sd ',')",
        'if [ -n "$DCGM_FAILED" ]; then DCGM_RESULT=fail; elif [ "$DCGM_EXIT" = 0 ]; then DCGM_RESULT=pass; '
        "else DCGM_RESULT=error; fi",
        # one VAR='value' line each (quotes dropped from the values), read back with `.` by the verdict
        "put() { printf \"%s='%s'\\n\" \"$1\" \"$(printf '%s' \"$2\" | tr -d \"'\")\"; }",
        "{ put START \"$START\"; put GPU_COUNT \"$GPU_COUNT\"; put GPU_MODEL \"$GPU_MODEL\"; put DRIVER \"$DRIVER\"; "
        "put CUDA \"$CUDA\"; put FABRIC_PRESENT \"$FABRIC_PRESENT\"; put FABRIC_UP \"$FABRIC_UP\"; "
        "put FABRIC_NAMES \"$FABRIC_NAMES\"; put DCGM_EXIT \"$DCGM_EXIT\"; put DCGM_SECONDS \"$DCGM_SECONDS\"; "
        "put DCGM_FAILED \"$DCGM_FAILED\"; put DCGM_RESULT \"$DCGM_RESULT\"; } > $R/facts.env",
        "cat $R/facts.env",
    ])


def nvlink_script(check: NodeCheck, tests_dir: str) -> str:
    """The NVLink all_reduce over the node's GPUs in one process (the acceptance gate's per-node sweep), its peak bus
    bandwidth (the larger of out-of-place and in-place busbw over the rows; 13 columns with nccl-tests' root column, 12
    without), and the NCCL and network plugin versions it printed, into ``nccl.env``."""
    binary = f"{tests_dir.rstrip('/')}/all_reduce_perf -b 8 -e 16G -f 2 -g {check.gpus}"
    return "\n".join([
        "set -u", _DIRS,
        f"NCCL_DEBUG=INFO timeout {NVLINK_TIMEOUT_S} {binary} > $R/nccl.log 2>&1; NCCL_EXIT=$?",
        "BUSBW=$(awk '$1 ~ /^[0-9]+$/ && NF==13 {b=($8>$12?$8:$12)} $1 ~ /^[0-9]+$/ && NF==12 {b=($7>$11?$7:$11)} "
        "b>m {m=b} END {print m+0}' $R/nccl.log)",
        "NCCL_VERSION=$(grep -m1 -oE 'NCCL version [0-9][0-9.a-z+-]*' $R/nccl.log | awk '{print $3}')",
        "FABRIC_PLUGIN=$(grep -m1 -oE 'aws-ofi-nccl v?[0-9][0-9.]*|NET/(gIB|GPUDirectTCPX|FasTrak|IB)[^ ]*' "
        "$R/nccl.log | head -n1)",
        "put() { printf \"%s='%s'\\n\" \"$1\" \"$(printf '%s' \"$2\" | tr -d \"'\")\"; }",
        "{ put NCCL_EXIT \"$NCCL_EXIT\"; put BUSBW \"$BUSBW\"; put NCCL_VERSION \"$NCCL_VERSION\"; "
        "put FABRIC_PLUGIN \"$FABRIC_PLUGIN\"; } > $R/nccl.env",
        "tail -n 5 $R/nccl.log; cat $R/nccl.env",
    ])


def verdict_script(check: NodeCheck, nvlink: bool) -> str:
    """The verdict (busybox sh and awk): each check passed or not with its detail, ``node.json`` (the layout
    ``blueprint nccl nodes`` reads), and ``/status/passed`` only when every check passed."""
    floor = (f"{check.expected_busbw * check.pass_fraction:.2f}" if check.expected_busbw is not None else "")
    lines = [
        "set -u", _DIRS, "mkdir -p $S; rm -f $S/passed",
        "NCCL_EXIT=''; BUSBW=''; NCCL_VERSION=''; FABRIC_PLUGIN=''",
        ". $R/facts.env",
        ". $R/nccl.env 2>/dev/null || true" if nvlink else "",
        'CHECKS=""; OK=1',
        # check NAME PASSED DETAIL: one entry of the checks list
        'check() { [ "$2" = true ] || OK=0; D=$(printf "%s" "$3" | tr -d "\\"\\\\"); '
        'CHECKS="$CHECKS${CHECKS:+, }{\\"name\\": \\"$1\\", \\"passed\\": $2, \\"detail\\": \\"$D\\"}"; }',
        f'[ "$GPU_COUNT" = "{check.gpus}" ] && P=true || P=false; '
        f'check gpu-count $P "nvidia-smi lists $GPU_COUNT GPUs, the group has {check.gpus}"',
        f'case "$GPU_MODEL" in *";"*) P=false;; *"{check.gpu_model}"*) P=true;; *) P=false;; esac; '
        f'check gpu-model $P "nvidia-smi: $GPU_MODEL; expected {check.gpu_model}"',
        '[ "$DCGM_RESULT" = pass ] && P=true || P=false; '
        f'check dcgm $P "dcgmi diag -r {check.dcgm_level}: $DCGM_RESULT in ${{DCGM_SECONDS}}s'
        '${DCGM_FAILED:+ (failed: $DCGM_FAILED)}"',
        f'[ "$FABRIC_UP" -ge {check.fabric_devices} ] 2>/dev/null && P=true || P=false; '
        f'check fabric-devices $P "{check.fabric_kind}: $FABRIC_UP of {check.fabric_devices} up, $FABRIC_PRESENT '
        'present:$FABRIC_NAMES"',
    ]
    if nvlink:
        if floor:
            lines.append(
                f'[ "$NCCL_EXIT" = 0 ] && awk -v b="$BUSBW" \'BEGIN {{exit !(b >= {floor})}}\' && P=true || P=false; '
                f'check nvlink-busbw $P "peak busbw $BUSBW GB/s, floor {floor} ({check.pass_fraction:g} x '
                f'{check.expected_busbw:g}), exit $NCCL_EXIT"')
        else:
            lines.append('[ "$NCCL_EXIT" = 0 ] && P=true || P=false; '
                         'check nvlink-busbw $P "peak busbw $BUSBW GB/s (no per-node figure: recorded, not judged), '
                         'exit $NCCL_EXIT"')
    lines += [
        '[ "$OK" = 1 ] && PASSED=true || PASSED=false',
        "q() { printf '\"%s\"' \"$(printf '%s' \"$1\" | tr -d '\"\\\\')\"; }",
        "n() { case \"$1\" in ''|*[!0-9.]*) printf null;; *) printf '%s' \"$1\";; esac; }",
        "FAILED_JSON=$(printf '%s' \"$DCGM_FAILED\" | awk -F, '{for (i=1;i<=NF;i++) printf \"%s\\\"%s\\\"\", "
        "(i>1?\", \":\"\"), $i}')",
        "DEVICES_JSON=$(for d in $FABRIC_NAMES; do printf '\"%s\"\\n' $d; done | paste -sd ',')",
        "{ printf '{\"node\": %s, \"pod\": %s, \"node_group\": %s, \"instance_type\": %s, ' \"$(q \"$NODE_NAME\")\" "
        "\"$(q \"$POD_NAME\")\" \"$(q \"$NODE_GROUP\")\" \"$(q \"$INSTANCE_TYPE\")\"",
        f"  printf '\"gpus\": {check.gpus}, \"gpu_count\": %s, \"gpu_model\": %s, \"driver\": %s, \"cuda\": %s, ' "
        "\"$(n \"$GPU_COUNT\")\" \"$(q \"$GPU_MODEL\")\" \"$(q \"$DRIVER\")\" \"$(q \"$CUDA\")\"",
        "  printf '\"nccl_version\": %s, \"fabric_plugin\": %s, \"busbw_gbps\": %s, ' \"$(q \"$NCCL_VERSION\")\" "
        "\"$(q \"$FABRIC_PLUGIN\")\" \"$(n \"$BUSBW\")\"",
        f"  printf '\"dcgm\": {{\"level\": {check.dcgm_level}, \"result\": %s, \"seconds\": %s, \"failed\": [%s]}}, ' "
        "\"$(q \"$DCGM_RESULT\")\" \"$(n \"$DCGM_SECONDS\")\" \"$FAILED_JSON\"",
        f"  printf '\"fabric\": {{\"kind\": \"{check.fabric_kind}\", \"expected\": {check.fabric_devices}, "
        "\"present\": %s, \"up\": %s, \"devices\": [%s]}, ' \"$(n \"$FABRIC_PRESENT\")\" \"$(n \"$FABRIC_UP\")\" "
        "\"$DEVICES_JSON\"",
        "  printf '\"checks\": [%s], \"passed\": %s, \"exit_status\": %s, \"started\": %s, \"finished\": %s}\\n' "
        "\"$CHECKS\" \"$PASSED\" \"$(n \"$NCCL_EXIT\")\" \"$(q \"$START\")\" "
        "\"$(q \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\")\"; } > $R/node.json",
        "cat $R/node.json",
        '[ "$PASSED" = true ] && date -u +%Y-%m-%dT%H:%M:%SZ > $S/passed',
        "exit 0",
    ]
    return "\n".join(line for line in lines if line)


def health_script(check: NodeCheck) -> str:
    """The health loop (DCGM image): a host engine with every health watch set (``dcgmi health -s a``: PCIe, memory
    and ECC, InfoROM, thermal and power, NVLink, NVSwitch), then every :data:`HEALTH_INTERVAL_S` seconds the node is
    healthy when its last check passed, DCGM's overall health is not Failure and every fabric device is still up;
    ``/status/healthy`` says so to the health reporter. A DCGM that does not answer is logged, not a Failure: the node's
    GPU alerts still fire from the exporter."""
    return "\n".join([
        "set -u", _DIRS, "mkdir -p $S",
        "nv-hostengine -n >/dev/null 2>&1 & sleep 5",
        "dcgmi health -s a >/dev/null 2>&1 || echo 'dcgmi health -s failed'",
        "while true; do",
        "  OK=1; WHY=''",
        "  [ -f $S/passed ] || { OK=0; WHY='the node check has not passed'; }",
        "  H=$(timeout 60 dcgmi health -c 2>&1)",
        "  if printf '%s' \"$H\" | grep -q 'Overall Health.*Failure'; then OK=0; WHY=\"$WHY dcgm: Failure\"; "
        "printf '%s\\n' \"$H\"; fi",
        "  printf '%s' \"$H\" | grep -q 'Overall Health' || echo \"dcgmi health did not answer: $H\"",
        "  " + _fabric_script(check.fabric_kind).replace("\n", "\n  "),
        f"  [ \"$FABRIC_UP\" -ge {check.fabric_devices} ] || {{ OK=0; WHY=\"$WHY fabric: $FABRIC_UP of "
        f"{check.fabric_devices} up\"; }}",
        "  if [ $OK = 1 ]; then echo ok > $S/healthy.tmp && mv $S/healthy.tmp $S/healthy; "
        "else rm -f $S/healthy; echo \"unhealthy:$WHY\"; fi",
        f"  sleep {HEALTH_INTERVAL_S}",
        "done",
    ])


def _upload_script(recorder: AcceptanceRecorder) -> str:
    """Wait for the verdict's node.json, upload the node's record to acceptance/<group>/node-check-<day>/<node>/,
    then stay (a DaemonSet's containers run for ever; the record is written once per pod)."""
    target = (f'"{recorder.scheme}://$RECORDS_BUCKET/{RECORDS_PREFIX}/$NODE_GROUP/'
              f'node-check-$(date -u +%Y%m%d)/$NODE_NAME/"')
    copy = records_copy(recorder, target)
    # retried: on a cluster of GPU nodes only, cluster DNS may start on this node only once the check released it
    return (f"until [ -f {RECORDS_DIR}/node.json ]; do sleep 10; done; "
            f"for i in $(seq 1 30); do {copy} && break; echo 'upload failed; retrying'; sleep 60; done; "
            "exec sleep 2147483647")


def _reporter(name: str, condition: str, path: str, image: str) -> Manifest:
    """The Node Readiness Controller's readiness-condition-reporter: polls the verdict server and writes the node
    condition (the env v0.5.0's cmd/readiness-condition-reporter/main.go reads: NODE_NAME, CHECK_ENDPOINT,
    CONDITION_TYPE, CHECK_INTERVAL; it serves no port)."""
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "CHECK_ENDPOINT", "value": f"http://127.0.0.1:{STATUS_PORT}/{path}"},
                    {"name": "CONDITION_TYPE", "value": condition},
                    {"name": "CHECK_INTERVAL", "value": "30s"}],
            "resources": {"requests": {CPU: "10m", MEMORY: "32Mi"}, "limits": {CPU: "100m", MEMORY: "64Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True, "runAsUser": 65532, "capabilities": {"drop": ["ALL"]}}}


# GKE mounts the driver it installs under /home/kubernetes/bin/nvidia on the host; containers read it at
# /usr/local/nvidia (GKE "Run GPUs in GKE Standard node pools", and its DCGM exporter's DaemonSet).
GKE_DRIVER_HOST_PATH = "/home/kubernetes/bin/nvidia"


def node_check_daemonset(check: NodeCheck, images: NodeCheckImages, labels: Mapping[str, str],
                         recorder: AcceptanceRecorder | None, *, gke_driver: bool) -> Manifest:
    """The group's check DaemonSet: init containers run the checks once per pod (DCGM image, then nccl-tests, then the
    verdict), containers serve the verdict and health, run the two reporters, and upload the record. The checks run
    privileged with every GPU visible (``NVIDIA_VISIBLE_DEVICES=all``) instead of requesting them, so the pod holds no
    GPU from the scheduler once the node is released; the node is tainted while they run, so no job shares them."""
    name = f"gpu-node-check-{check.pool}"
    selector = {"gpu-cluster/node-check": check.pool}
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "NODE_GROUP", "value": check.pool},
           {"name": "INSTANCE_TYPE", "value": check.instance_type},
           # the host's sysfs: its network class lists the host's interfaces (GKE's GPU NICs), not the pod's
           {"name": "SYSFS_ROOT", "value": HOST_SYS},
           {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
           {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    if gke_driver:
        env += [{"name": "PATH", "value": "/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                 "/sbin:/bin"}, {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}]
    records = {"name": "records", "mountPath": RECORDS_DIR}
    status = {"name": "status", "mountPath": STATUS_DIR}
    host_sys = {"name": "host-sys", "mountPath": HOST_SYS, "readOnly": True}
    gpu_mounts = [{"name": "nvidia", "mountPath": "/usr/local/nvidia", "readOnly": True}] if gke_driver else []
    privileged = {"privileged": True}
    heavy = {"requests": {CPU: "1", MEMORY: "2Gi"}, "limits": {CPU: "8", MEMORY: "16Gi"}}
    inits: list[Manifest] = [
        {"name": "dcgm", "image": images.dcgm, "imagePullPolicy": "IfNotPresent", "env": env,
         "command": ["bash", "-c", dcgm_script(check)], "securityContext": privileged, "resources": heavy,
         "volumeMounts": [records, host_sys, *gpu_mounts]},
    ]
    if images.nccl_tests is not None:
        inits.append({"name": "nvlink", "image": images.nccl_tests, "imagePullPolicy": "IfNotPresent", "env": env,
                      "command": ["bash", "-c", nvlink_script(check, images.tests_dir)],
                      "securityContext": privileged,
                      "resources": {"requests": {CPU: "4", MEMORY: "8Gi"}, "limits": {CPU: "32", MEMORY: "96Gi"}},
                      "volumeMounts": [records, {"name": "dshm", "mountPath": "/dev/shm"}, *gpu_mounts]})
    small = {"requests": {CPU: "10m", MEMORY: "16Mi"}, "limits": {CPU: "200m", MEMORY: "64Mi"}}
    unprivileged = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]}}
    inits.append({"name": "verdict", "image": images.tools, "imagePullPolicy": "IfNotPresent", "env": env[:4],
                  "command": ["sh", "-c", verdict_script(check, images.nccl_tests is not None)],
                  "securityContext": unprivileged, "resources": small, "volumeMounts": [records, status]})
    # The verdict server and the reporters are native sidecars (restartPolicy Always in initContainers, Kubernetes
    # 1.29+), listed first: they start before the checks, so while a new pod checks (first boot, a re-check, a reboot)
    # both conditions are reported False and the node is held; a reporter that stopped would leave its last value.
    sidecars: list[Manifest] = [
        {"name": "status", "image": images.tools, "imagePullPolicy": "IfNotPresent", "restartPolicy": "Always",
         # busybox httpd serves /status: GET /passed and /healthy are 200 while the file exists, else 404
         "command": ["httpd", "-f", "-p", f"127.0.0.1:{STATUS_PORT}", "-h", STATUS_DIR],
         "securityContext": unprivileged, "resources": small, "volumeMounts": [status]},
        {**_reporter("report-check", BOOT_CONDITION, "passed", images.reporter), "restartPolicy": "Always"},
        {**_reporter("report-health", HEALTH_CONDITION, "healthy", images.reporter), "restartPolicy": "Always"},
    ]
    inits = [*sidecars, *inits]
    containers: list[Manifest] = [
        {"name": "health", "image": images.dcgm, "imagePullPolicy": "IfNotPresent", "env": env,
         "command": ["bash", "-c", health_script(check)], "securityContext": privileged,
         "resources": {"requests": {CPU: "50m", MEMORY: "128Mi"}, "limits": {CPU: "1", MEMORY: "1Gi"}},
         "volumeMounts": [status, host_sys, *gpu_mounts]},
    ]
    if recorder is not None:
        containers.append({
            "name": "record", "image": recorder.image, "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "RECORDS_BUCKET", "value": recorder.bucket}, *env[:4]],
            "command": ["sh", "-c", _upload_script(recorder)],
            "resources": {"requests": {CPU: "10m", MEMORY: "128Mi"}, "limits": {CPU: "500m", MEMORY: "512Mi"}},
            "volumeMounts": [records]})
    volumes: list[Manifest] = [{"name": "records", "emptyDir": {"sizeLimit": "1Gi"}},
                               {"name": "status", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                               {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                               {"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}}]
    if gke_driver:
        volumes.append({"name": "nvidia", "hostPath": {"path": GKE_DRIVER_HOST_PATH, "type": "Directory"}})
    tolerations = [*NODE_AGENT_TOLERATIONS, *([QUEUED_TOLERATION] if check.queued else [])]
    spec: Manifest = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "priorityClassName": "system-node-critical",
        "nodeSelector": {NODE_GROUP_LABEL: check.pool},
        "tolerations": tolerations,
        "initContainers": inits, "containers": containers, "volumes": volumes,
        "terminationGracePeriodSeconds": 10,
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": meta(name, NODE_CHECK_NAMESPACE, {**labels, **selector}),
        "spec": {"selector": {"matchLabels": selector},
                 # A new check pod re-checks its node: the node is held (health False) until its jobs end and it
                 # passes again. A changed check (an upgrade) therefore applies to nodes that join, and to a node
                 # only when its pod is deleted (docs/capacity.md), never as a rolling drain of the whole fleet.
                 "updateStrategy": {"type": "OnDelete"},
                 "template": {"metadata": {"labels": dict(selector)}, "spec": spec}},
    }


# Labels only GPU nodes carry (EKS: the one the blueprint sets for the Cluster Autoscaler; GKE: its own).
GPU_NODE_LABELS = ("k8s.amazonaws.com/accelerator", "cloud.google.com/gke-accelerator")


CONTROLLER_RELEASE = "node-readiness-controller"
# The chart's pod labels (charts/node-readiness-controller/templates/_helpers.tpl selectorLabels at v0.5.0: the chart's
# name, the release's name, control-plane: controller-manager).
CONTROLLER_SELECTOR = {"app.kubernetes.io/name": "node-readiness-controller",
                       "app.kubernetes.io/instance": CONTROLLER_RELEASE, "control-plane": "controller-manager"}


def controller_values() -> Manifest:
    """The Node Readiness Controller chart's values (v0.5.0's values.yaml keys only): two replicas with leader
    election, on different nodes where it can, preferring nodes without GPUs. It tolerates the GPU and readiness
    taints (not the chart's default of every taint) so that a cluster of GPU nodes only, all registering with the
    readiness taint, still runs the controller that lifts it."""
    return {"replicaCount": 2, "leaderElection": {"enabled": True}, "tolerations": list(NODE_AGENT_TOLERATIONS),
            "affinity": {
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "preference": {"matchExpressions": [
                        {"key": k, "operator": "DoesNotExist"} for k in GPU_NODE_LABELS]}}]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": dict(CONTROLLER_SELECTOR)},
                                                        "topologyKey": "kubernetes.io/hostname"}}]}}}


def controller_disruption_budget(labels: Mapping[str, str]) -> Manifest:
    """One controller replica always up through node drains (the chart at v0.5.0 has no PodDisruptionBudget): a
    controller that is down leaves new nodes tainted."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": meta(CONTROLLER_RELEASE, READINESS_NAMESPACE, labels),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(CONTROLLER_SELECTOR)}}}
