"""The shared filesystem in pods: per team a ``shared-fs`` claim bound to a statically provisioned volume, the
one-time Job that creates the team directories with their owners, and (where the CSI driver cannot mount a
subdirectory) the admission policy that keeps each team's pods in their own directory.

Teams hold namespaced Roles and cannot create PersistentVolumes; the platform creates one per team, bound to the
team's claim by ``claimRef`` (a claim in another namespace cannot take it) and ``Retain``ed, so deleting a claim
never deletes data. A volume's name ends in the filesystem's ``generation`` (a digest of what it points at), because
Kubernetes refuses to change a bound volume's source: a replaced filesystem gets new volumes, created before the old
ones are released, instead of an update that waits on the bound volume's protection finalizer until it times out.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.kubernetes.objects.common import TENANT_LABEL, Manifest, meta
from components.spec import TeamSpec

SHARED_FS_CLAIM = "shared-fs"
ADMIN_NAMESPACE = "kube-system"
ADMIN_CLAIM = "shared-fs-admin"
TEAM_DIRS_JOB = "shared-fs-team-dirs"
TEAM_GID_LABEL = "gpu-cluster/gid"  # on a team namespace: the POSIX group that owns the team's directory
TEAM_DIR_MODE = "2770"  # the team's group reads and writes; new files inherit the group (setgid); others see nothing


@dataclass(frozen=True, kw_only=True)
class SharedFilesystem:
    """The stack's shared filesystem as the cloud's CSI driver mounts it statically.

    ``attributes(path)`` gives the PersistentVolume's ``volumeAttributes`` for a directory of the filesystem (None:
    its root). Where the driver mounts a subdirectory (``scoped``: FSx for Lustre's fileset mount,
    ``<dns>@tcp:/<mountname>/<path>``) each team's volume is its own directory; otherwise (GKE Managed Lustre, which
    mounts only whole filesystems) the team volume is the whole filesystem and pods must mount it with
    ``subPath: <team>``, which an admission policy enforces.
    """

    driver: str
    volume_handle: Any  # the driver's volume id (a pulumi Input[str] in the program, a string in tests)
    attributes: Callable[[str | None], Mapping[str, Any]]
    capacity_gib: int
    mount_options: tuple[str, ...] = ()
    team_root: str = ""  # the directory (from the filesystem root) that holds one directory per team
    scoped: bool = False
    tool_image: str = ""  # the image of the Job that creates the team directories (a shell, mkdir, chown, chmod)
    source: str = ""  # where the volume's shape was read
    # A short digest of the filesystem's identity (id, address, directory): an Input[str] in the program, "" in tests.
    generation: Any = ""
    # What must exist before the team directories are made (AWS: the association that links the directory to the
    # bucket, so the directories are created inside the linked path and exported); pulumi Resources in the program.
    ready: tuple[Any, ...] = ()
    # False for a filesystem the stack uses but does not create (an existing FSx or Managed Lustre instance): its
    # owner's directories are not re-owned.
    owned: bool = True

    def volume_name(self, base: str) -> Any:
        """``base-<generation>`` (a str, or a pulumi Output in the program), ``base`` without a generation."""
        if isinstance(self.generation, str):
            return f"{base}-{self.generation}" if self.generation else base
        return self.generation.apply(lambda g: f"{base}-{g}")

    def team_dir(self, team: str) -> str:
        """The team's directory from the filesystem root (``checkpoints/research``)."""
        return "/".join(p for p in (self.team_root.strip("/"), team) if p)


# What a shared-fs claim requests. A statically bound claim's request can never change afterwards: the API server
# resizes only claims of a StorageClass that allows expansion (kube-apiserver PersistentVolumeClaimResize admission:
# "only dynamically provisioned pvc can be resized") and refuses a smaller one, so a claim asking for the filesystem's
# capacity would make every `pulumi up` that grows the filesystem fail. The volume carries the real capacity (it may
# change) and binds any claim asking for no more than that.
CLAIM_REQUEST = "1Gi"


def volume_generation(*identity: str) -> str:
    """Eight hex digits of sha256 over what a volume points at: stable across applies, new for a new filesystem."""
    return hashlib.sha256("\0".join(identity).encode()).hexdigest()[:8]


def static_volume(base: str, fs: SharedFilesystem, path: str | None, namespace: str, claim: str,
                  labels: Mapping[str, str]) -> tuple[Manifest, Manifest]:
    """A static volume of the shared filesystem (``path`` inside it, or the whole of it) and the claim in ``namespace``
    bound to it, both named with the filesystem's generation."""
    name = fs.volume_name(base)
    pv: Manifest = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": meta(name, labels={**labels, "gpu-cluster/volume": "shared-fs"}),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "capacity": {"storage": f"{fs.capacity_gib}Gi"},
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",  # static: no provisioner, and never the default class
            "claimRef": {"namespace": namespace, "name": claim},
            "csi": {"driver": fs.driver, "volumeHandle": fs.volume_handle,
                    "volumeAttributes": dict(fs.attributes(path))},
            **({"mountOptions": list(fs.mount_options)} if fs.mount_options else {}),
        },
    }
    pvc: Manifest = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": meta(claim, namespace, labels),
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": CLAIM_REQUEST}},
                 "storageClassName": "", "volumeName": name},
    }
    return pv, pvc


def team_shared_fs(fs: SharedFilesystem, team: TeamSpec, labels: Mapping[str, str]) -> tuple[Manifest, Manifest]:
    """The team's ``shared-fs`` claim and its volume: the team's directory where the driver can mount one, else the
    filesystem (pods then mount it with ``subPath: <team>``)."""
    path = fs.team_dir(team.name) if fs.scoped else None
    return static_volume(f"shared-fs-{team.name}", fs, path, team.name, SHARED_FS_CLAIM, labels)


# The platform's volume of the whole filesystem: a dot, which no team name (a DNS label) has, keeps it apart from
# every team's shared-fs-<team> volume (a team called "admin" included).
ADMIN_VOLUME = "shared-fs.admin"


def admin_shared_fs(fs: SharedFilesystem, labels: Mapping[str, str]) -> tuple[Manifest, Manifest]:
    """The whole filesystem, claimed in ``kube-system`` for the platform's own Job (teams cannot bind it). The claim's
    name, like the volume's, ends in the filesystem's generation: a replaced filesystem gets a new claim and a new
    Job beside the old ones (a claim that a finished pod still names would hold a same-named replacement forever)."""
    pv, pvc = static_volume(ADMIN_VOLUME, fs, None, ADMIN_NAMESPACE, ADMIN_CLAIM, labels)
    claim = fs.volume_name(ADMIN_CLAIM)
    pvc["metadata"]["name"] = claim
    pv["spec"]["claimRef"]["name"] = claim
    return pv, pvc


def team_dirs_job(fs: SharedFilesystem, teams: Sequence[TeamSpec], labels: Mapping[str, str],
                  roots: Sequence[str] = ()) -> Manifest:
    """A Job that creates each team's directory, owned by root and the team's group, mode 2770: idempotent (mkdir -p,
    chown, chmod), so a new team's directory appears on the next apply, which replaces the Job. Named after the
    filesystem's generation, so a new filesystem gets its directories from a new Job. On a filesystem the stack does
    not own, a directory that already exists is left as its owner made it (the Job's log shows its owner and mode).
    ``roots``: directories (from the filesystem's root) made root:root 0755 too, where others make their own
    subdirectories as root (Slurm's homes, objects/slurm.py HOME_DIR)."""
    lines = ["set -eu"]
    wanted = [(shlex.quote(f"/fs/{d.strip('/')}"), "0:0", "0755") for d in roots]
    wanted += [(shlex.quote(f"/fs/{fs.team_dir(t.name)}"), f"0:{t.posix_gid}", TEAM_DIR_MODE)
               for t in sorted(teams, key=lambda t: t.name)]
    for path, owner, mode in wanted:
        make = f"mkdir -p {path} && chown {owner} {path} && chmod {mode} {path}"
        lines.append(make if fs.owned else f"if [ -e {path} ]; then ls -ldn {path}; else {make}; fi")
    lines.append("ls -ln " + shlex.quote(f"/fs/{fs.team_root.strip('/')}" if fs.team_root.strip("/") else "/fs"))
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(fs.volume_name(TEAM_DIRS_JOB), ADMIN_NAMESPACE, labels),
        "spec": {
            "backoffLimit": 4,
            "template": {"spec": {
                "restartPolicy": "OnFailure",
                "securityContext": {"runAsUser": 0, "runAsGroup": 0},  # chown needs root on the filesystem
                "containers": [{
                    "name": "mkdirs", "image": fs.tool_image, "command": ["sh", "-c", "\n".join(lines)],
                    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
                    "volumeMounts": [{"name": "fs", "mountPath": "/fs"}],
                }],
                "volumes": [{"name": "fs", "persistentVolumeClaim": {"claimName": fs.volume_name(ADMIN_CLAIM)}}],
            }},
        },
    }


def subpath_policy() -> list[Manifest]:
    """Where a team's volume is the whole filesystem, its pods mount ``shared-fs`` only with ``subPath`` exactly the
    namespace's directory, never below it and never ``subPathExpr``: a ValidatingAdmissionPolicy on tenant namespaces.

    Exactly, because kubelet resolves symlinks in a subPath and only checks that the result stays inside the volume
    (kubernetes pkg/volume/util/subpath, doBindSubPath / safeOpenSubPath), and the volume here is the whole
    filesystem: ``subPath: research/x`` with ``research/x -> ../applied`` would mount the applied team's directory.
    The team directory itself is created by the platform's Job in a root-owned parent no team pod mounts, so no team
    can make it a symlink; inside the container ``..`` and absolute links resolve in the container's own tree."""
    claim = json.dumps(SHARED_FS_CLAIM)

    def contained(field_name: str) -> str:
        mounts = (f"object.spec.{field_name}.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, "
                  "!(m.name in variables.shared) || (has(m.subPath) && !has(m.subPathExpr) && "
                  "m.subPath == request.namespace)))")
        return mounts if field_name == "containers" else f"!has(object.spec.{field_name}) || {mounts}"

    name = "gpu-cluster-shared-fs-subpath"
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": meta(name),
         "spec": {"failurePolicy": "Fail",
                  # Pod volumes and mounts are immutable after creation, so CREATE is where they are judged (an
                  # UPDATE rule would only block finalizer removal on pods created under an older rule); debug
                  # containers arrive through the ephemeralcontainers subresource.
                  "matchConstraints": {"resourceRules": [
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                       "resources": ["pods/ephemeralcontainers"]}]},
                  "variables": [{"name": "shared", "expression":
                                 "!has(object.spec.volumes) ? [] : object.spec.volumes.filter(v, "
                                 f"has(v.persistentVolumeClaim) && v.persistentVolumeClaim.claimName == {claim})"
                                 ".map(v, v.name)"}],
                  "validations": [*({"expression": contained(f),
                                     "reason": "Forbidden",
                                     "message": f"{f} mount the {SHARED_FS_CLAIM} claim with subPath set to exactly "
                                                "the namespace's name (the team's directory; make subdirectories "
                                                "inside the mount), not a path below it and not subPathExpr"}
                                    for f in ("containers", "initContainers")),
                                  # Kubernetes forbids subPath on ephemeral containers: one would see every team.
                                  {"expression": "!has(object.spec.ephemeralContainers) || "
                                                 "object.spec.ephemeralContainers.all(c, !has(c.volumeMounts) || "
                                                 "c.volumeMounts.all(m, !(m.name in variables.shared)))",
                                   "reason": "Forbidden",
                                   "message": f"ephemeral containers cannot mount the {SHARED_FS_CLAIM} claim (they "
                                              "cannot take a subPath)"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": meta(name),
         "spec": {"policyName": name, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "true"}}}}},
    ]


TEAM_GID_POLICY = "gpu-cluster-team-gid"


def team_gid_policy(team_gids: Sequence[int] = ()) -> list[Manifest]:
    """Every container of a pod in a team namespace runs with the team's POSIX group (the namespace's label
    ``gpu-cluster/gid``, read through ``namespaceObject``), or the pod is refused with the fix in the message.

    The team's directory on the shared filesystem is ``root:<gid>`` mode 2770 (:func:`team_dirs_job`), and nothing
    changes the ownership of these ReadWriteMany volumes for a pod (under a CSI driver's default fsGroupPolicy,
    ReadWriteOnceWithFSType, the kubelet leaves volumes that are not ReadWriteOnce alone: kubernetes-csi docs, "CSI
    Driver fsGroup Support"), so a non-root process reaches the directory only with the group among its own: its
    primary group (``runAsGroup``, the pod's or the container's) or a supplementary one (``supplementalGroups``; and
    ``fsGroup``, which the kubelet adds to every container's supplementary groups: Kubernetes docs, "Configure a
    Security Context for a Pod or Container", "all processes of the container are also part of the supplementary
    group ID 2000"). ``supplementalGroups`` is the fix the message gives: it reaches every container, injected ones
    included (GKE's GCS FUSE sidecar sets its own runAsGroup), and changes no file.

    A ValidatingAdmissionPolicy, not a MutatingAdmissionPolicy that would add the group: that API is beta and off by
    default in Kubernetes 1.34 and 1.35 (feature gate MutatingAdmissionPolicy and
    --runtime-config=admissionregistration.k8s.io/v1beta1=true on the API server: Kubernetes docs, "Mutating Admission
    Policy"; GA in 1.36, KEP-3962 kep.yaml). The stacks run 1.35 on EKS, whose API server flags are not the
    cluster owner's, and 1.33 or later on GKE (the oldest minor the REGULAR channel may run), where it is alpha; GKE
    lets no one set feature gates (GKE "Feature gates": "You can't modify Kubernetes feature gates in GKE clusters").
    Pods only: their security context cannot change after creation, so CREATE is where it is judged. A pod also takes
    no other team's GID (``team_gids``, every team's) as a group, primary or supplementary: with it, a pod that
    mounted another team's directory could write there.
    """
    gid = f"namespaceObject.metadata.labels[{json.dumps(TEAM_GID_LABEL)}]"
    pod_sc = "object.spec.securityContext"

    def taken(group: str) -> str:
        # Another team's group: a map of every team's, looked up by key (constant time), not a list scanned per
        # group; with a list, each namespace's checks grew with the number of teams (issue 37).
        return f"({group} in variables.teamGroups && {group} != variables.gid)"

    def each(field: str) -> str:
        check = (f"object.spec.{field}.all(c, variables.podGroups || (has(c.securityContext) && "
                 "has(c.securityContext.runAsGroup) ? c.securityContext.runAsGroup == variables.gid : "
                 "variables.podRunAsGroup))")
        return check if field == "containers" else f"!has(object.spec.{field}) || {check}"

    def others(field: str) -> str:
        check = (f"object.spec.{field}.all(c, !has(c.securityContext) || !has(c.securityContext.runAsGroup) || "
                 f"!{taken('c.securityContext.runAsGroup')})")
        return check if field == "containers" else f"!has(object.spec.{field}) || {check}"

    fix = ("add it to spec.securityContext.supplementalGroups (or make it the runAsGroup of every container, or the "
           "fsGroup)")
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": meta(TEAM_GID_POLICY),
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                  "variables": [
                      {"name": "gid", "expression": f"int({gid})"},
                      {"name": "podGroups", "expression":
                       f"has({pod_sc}) && ((has({pod_sc}.supplementalGroups) && "
                       f"variables.gid in {pod_sc}.supplementalGroups) || "
                       f"(has({pod_sc}.fsGroup) && {pod_sc}.fsGroup == variables.gid))"},
                      {"name": "podRunAsGroup", "expression":
                       f"has({pod_sc}) && has({pod_sc}.runAsGroup) && {pod_sc}.runAsGroup == variables.gid"},
                      {"name": "teamGroups", "expression":
                       "{" + ", ".join(f"{g}: true" for g in sorted(set(team_gids))) + "}"}],
                  "validations": [{
                      "expression": f"{each('containers')} && ({each('initContainers')})", "reason": "Forbidden",
                      "message": f"every container runs with the team's group (label {TEAM_GID_LABEL} of the "
                                 f"namespace), which owns the team's directory on the shared filesystem (mode "
                                 f"{TEAM_DIR_MODE}): {fix}",
                      "messageExpression": f"'the pod runs outside the team\\'s group ' + {gid} + ' (label "
                                           f"{TEAM_GID_LABEL} of namespace ' + request.namespace + '), which owns the "
                                           f"team\\'s directory on the shared filesystem (root:' + {gid} + ', mode "
                                           f"{TEAM_DIR_MODE}): add ' + {gid} + ' to "
                                           "spec.securityContext.supplementalGroups (or make it the runAsGroup of "
                                           "every container, or the fsGroup)'"},
                      {"expression": f"(!has({pod_sc}) || ((!has({pod_sc}.supplementalGroups) || "
                                     f"!{pod_sc}.supplementalGroups.exists(g, {taken('g')})) && "
                                     f"(!has({pod_sc}.fsGroup) || !{taken(pod_sc + '.fsGroup')}) && "
                                     f"(!has({pod_sc}.runAsGroup) || !{taken(pod_sc + '.runAsGroup')})))"
                                     f" && {others('containers')} && ({others('initContainers')})",
                       "reason": "Forbidden",
                       "message": "a team's pod takes no other team's group (supplementalGroups, fsGroup or "
                                  "runAsGroup): those groups own the other teams' directories on the shared "
                                  "filesystem"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": meta(TEAM_GID_POLICY),
         "spec": {"policyName": TEAM_GID_POLICY, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchExpressions": [
                      {"key": TENANT_LABEL, "operator": "In", "values": ["true"]},
                      {"key": TEAM_GID_LABEL, "operator": "Exists"}]}}}},
    ]
