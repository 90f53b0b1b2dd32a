"""Volumes: does every volume a pod names exist in its namespace, and can it be mounted?

- ``persistentVolumeClaim``: the claim is in the namespace and bound: to the PersistentVolume its
  ``spec.volumeName`` names (which, if it has a ``claimRef``, points back to the claim), or to a volume whose
  ``claimRef`` names it, with the same storage class; else a StorageClass in the graph provisions it. A claim used by
  pods on several nodes needs ReadWriteMany (or ReadOnlyMany, mounted read-only). The volume's CSI driver must be
  installed: by the cloud's add-ons or a Helm release (each cloud's admit module knows its drivers).
- ``configMap`` (volumes, ``envFrom``, ``env.valueFrom``): the ConfigMap is in the namespace, with the keys asked,
  unless marked optional (a pod waits in CreateContainerConfigError otherwise).
- ``secret``: Secrets are often made outside the program (kubectl, an external-secrets operator): one the graph lacks
  is a note, not a refusal.
- a cloud may ask more of a pod that mounts its volumes (GCS FUSE: the pod annotation that makes GKE inject the
  mounting sidecar).
"""

from __future__ import annotations

from typing import Any

from blueprint.admit.claims import bound_volume
from blueprint.admit.cloud import every_cloud
from blueprint.admit.cluster import ClusterView, K8sObject, as_list, as_mapping, as_str_map
from blueprint.admit.workloads import PodSet

SHARED_MODES = ("ReadWriteMany", "ReadOnlyMany")


def installed_drivers(view: ClusterView) -> tuple[set[str], set[str]]:
    """(CSI drivers installed, CSI drivers admit knows how to detect): each cloud's add-ons and charts."""
    installed: set[str] = set()
    known: set[str] = set()
    for part in every_cloud():
        found, detectable = part.csi_drivers(view)
        installed |= found
        known |= detectable
    return installed, known


def _config_map_refs(spec: dict[str, Any]) -> list[tuple[str, str | None, bool, str]]:
    """(name, key or None, optional, where) of every ConfigMap a pod spec uses."""
    refs: list[tuple[str, str | None, bool, str]] = []
    for volume in as_list(spec.get("volumes")):
        volume = as_mapping(volume)
        cm = as_mapping(volume.get("configMap"))
        if cm:
            refs.append((str(cm.get("name")), None, cm.get("optional") is True, f"volume {volume.get('name')}"))
        for source in as_list(as_mapping(volume.get("projected")).get("sources")):
            cm = as_mapping(as_mapping(source).get("configMap"))
            if cm:
                refs.append((str(cm.get("name")), None, cm.get("optional") is True, f"volume {volume.get('name')}"))
    for key in ("initContainers", "containers"):
        for c in as_list(spec.get(key)):
            c = as_mapping(c)
            for source in as_list(c.get("envFrom")):
                ref = as_mapping(as_mapping(source).get("configMapRef"))
                if ref:
                    refs.append((str(ref.get("name")), None, ref.get("optional") is True,
                                 f"container {c.get('name')} envFrom"))
            for env in as_list(c.get("env")):
                ref = as_mapping(as_mapping(as_mapping(env).get("valueFrom")).get("configMapKeyRef"))
                if ref:
                    refs.append((str(ref.get("name")), str(ref.get("key")), ref.get("optional") is True,
                                 f"container {c.get('name')} env {as_mapping(env).get('name')}"))
    return refs


def _secret_refs(spec: dict[str, Any]) -> set[str]:
    names = {str(as_mapping(as_mapping(v).get("secret")).get("secretName")) for v in as_list(spec.get("volumes"))
             if as_mapping(as_mapping(v).get("secret")).get("optional") is not True
             and as_mapping(v).get("secret")}
    for key in ("initContainers", "containers"):
        for c in as_list(spec.get(key)):
            for source in as_list(as_mapping(c).get("envFrom")):
                ref = as_mapping(as_mapping(source).get("secretRef"))
                if ref and ref.get("optional") is not True:
                    names.add(str(ref.get("name")))
    for secret in as_list(spec.get("imagePullSecrets")):
        names.add(str(as_mapping(secret).get("name")))
    return names


SHARED_FS_CLAIM = "shared-fs"


def check_volumes(view: ClusterView, namespace: str, pod_sets: list[PodSet],
                  nodes_used: int) -> tuple[list[tuple[str, str, str]], list[str], list[K8sObject]]:
    """(problems, notes, the PersistentVolumes the pods mount) for the workload's pods in ``namespace``."""
    problems: list[tuple[str, str, str]] = []
    notes: list[str] = []
    installed, known = installed_drivers(view)
    seen: set[tuple[str, str]] = set()
    checked: set[tuple[str, str]] = set()
    claims: dict[str, K8sObject | None] = {}
    for pod_set in pod_sets:
        spec = pod_set.spec
        annotations = as_str_map(as_mapping(pod_set.pod.get("metadata")).get("annotations"))
        for volume in as_list(spec.get("volumes")):
            volume = as_mapping(volume)
            claim_ref = as_mapping(volume.get("persistentVolumeClaim"))
            csi = as_mapping(volume.get("csi"))
            drivers = []
            if claim_ref:
                name = str(claim_ref.get("claimName"))
                if name not in claims:
                    claims[name] = _claim(view, namespace, pod_set, name, nodes_used, problems)
                pv = claims[name]
                if pv is None:
                    continue
                driver = as_mapping(pv.spec.get("csi")).get("driver")
                if isinstance(driver, str):
                    drivers.append((driver, pv.ref))
            elif csi:
                drivers.append((str(csi.get("driver")), f"volume {volume.get('name')}"))
            for driver, what in drivers:
                if (driver, what) in checked:
                    pass
                elif driver in known and driver not in installed:
                    problems.append((what, "volume-driver", f"{what} needs the CSI driver {driver}, which the "
                                     "cluster does not install: enable its add-on in the stack"))
                elif driver not in known:
                    notes.append(f"{what}: CSI driver {driver} not checked")
                checked.add((driver, what))
                for part in every_cloud():
                    problems += part.volume_problems(pod_set, driver, what, annotations)
        for name, key, optional, where in _config_map_refs(spec):
            if optional or ("configmap", f"{name}/{key}") in seen:
                continue
            seen.add(("configmap", f"{name}/{key}"))
            cm = view.get("ConfigMap", name, namespace)
            ref = f"ConfigMap/{namespace}/{name}"
            if cm is None:
                problems.append((ref, "config-map", f"{where} of pod set {pod_set.name} uses ConfigMap {name}, which "
                                 f"is not in namespace {namespace}: create it, or mark the reference optional"))
            elif key is not None and key not in as_mapping(cm.manifest.get("data")) \
                    and key not in as_mapping(cm.manifest.get("binaryData")):
                problems.append((ref, "config-map", f"{where} of pod set {pod_set.name} reads key {key} of ConfigMap "
                                 f"{name}, which has no such key: use one of {', '.join(sorted(as_mapping(cm.manifest.get('data')))) or '(none)'}"))  # noqa: E501
        for name in sorted(_secret_refs(spec)):
            if view.get("Secret", name, namespace) is None and ("secret", name) not in seen:
                seen.add(("secret", name))
                notes.append(f"Secret {namespace}/{name} is not in the graph: create it before submitting")
    volumes = list({pv.ref: pv for pv in claims.values() if pv is not None}.values())
    return problems, notes, volumes


def _claim(view: ClusterView, namespace: str, pod_set: PodSet, name: str, nodes_used: int,
           problems: list[tuple[str, str, str]]) -> K8sObject | None:
    """The PersistentVolume behind a claim the pods mount; None (with a problem, unless provisioned) otherwise."""
    ref = f"PersistentVolumeClaim/{namespace}/{name}"
    claim = view.get("PersistentVolumeClaim", name, namespace)
    if claim is None:
        present = ", ".join(sorted(c.name for c in view.of_kind("PersistentVolumeClaim", namespace)))
        problems.append((ref, "volume-claim", f"pod set {pod_set.name} mounts claim {name}, which is not in "
                         f"namespace {namespace} (its claims: {present or 'none'}): use one of those, or create the "
                         "claim"))
        return None
    pv, why = bound_volume(view, claim)
    if why is not None:
        problems.append((ref, "volume-claim", f"claim {name} cannot be mounted: {why}; bind it to a "
                         "PersistentVolume (the team's shared-fs claim is)"))
        return None
    modes = [str(m) for m in as_list(claim.spec.get("accessModes"))]
    if nodes_used > 1 and not any(m in SHARED_MODES for m in modes):
        problems.append((ref, "volume-claim", f"claim {name} is {', '.join(modes) or 'ReadWriteOnce'}, but the "
                         f"workload's pods run on {nodes_used} nodes: use a ReadWriteMany claim (the team's "
                         "shared-fs)"))
    return pv
