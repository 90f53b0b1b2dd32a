"""Which PersistentVolume a claim is bound to, as the API server binds it: the volume its ``spec.volumeName`` names,
or the volume whose ``claimRef`` names the claim, with the same storage class; else a StorageClass provisions one."""

from __future__ import annotations

from blueprint.admit.cluster import ClusterView, K8sObject, as_mapping


def bound_volume(view: ClusterView, claim: K8sObject) -> tuple[K8sObject | None, str | None]:
    """The PersistentVolume the claim is bound to, or why it is not bound (None, None: dynamically provisioned)."""
    ns, name = claim.namespace, claim.name
    wanted_class = claim.spec.get("storageClassName")
    volume_name = claim.spec.get("volumeName")
    if isinstance(volume_name, str) and volume_name:
        pv = view.get("PersistentVolume", volume_name)
        if pv is None:
            return None, f"its spec.volumeName {volume_name} names no PersistentVolume in the cluster"
        ref = as_mapping(pv.spec.get("claimRef"))
        if ref and (ref.get("namespace"), ref.get("name")) != (ns, name):
            return None, (f"{pv.ref} is reserved for claim {ref.get('namespace')}/{ref.get('name')} "
                          "(spec.claimRef)")
        if wanted_class is not None and (pv.spec.get("storageClassName") or "") != wanted_class:
            return None, (f"{pv.ref} has storageClassName {pv.spec.get('storageClassName')!r}, the claim asks "
                          f"{wanted_class!r}")
        return pv, None
    for pv in view.of_kind("PersistentVolume"):
        ref = as_mapping(pv.spec.get("claimRef"))
        if (ref.get("namespace"), ref.get("name")) == (ns, name):
            return pv, None
    if isinstance(wanted_class, str) and wanted_class and view.get("StorageClass", wanted_class) is not None:
        return None, None
    return None, ("no PersistentVolume is bound to it (no spec.volumeName, no volume's claimRef names it) and no "
                  "StorageClass in the cluster provisions one")
