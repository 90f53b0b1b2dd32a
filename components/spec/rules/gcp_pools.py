"""Rules on what a GKE node pool runs as and boots: its own service account and the roles it is granted.

Each rule encodes a refusal IAM or GKE would otherwise make at apply time, or an account two pools would define
twice; the source is named beside it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from components.catalog.gcp_machines import MachineFacts
from components.spec.decisions import pool_image_type
from components.spec.errors import _Collector
from components.spec.gcp import GcpSpec

# IAM role names (IAM "Roles and permissions", "Create and manage custom roles"): predefined roles are
# roles/<service>.<role>; custom roles projects/<project>/roles/<id> or organizations/<number>/roles/<id>, an id of
# at most 64 letters, digits, underscores and periods.
_ROLE_ID = r"[A-Za-z0-9_.]{3,64}"
ROLE_RE = re.compile(rf"^(roles/{_ROLE_ID}|projects/[a-z][a-z0-9-]{{4,28}}[a-z0-9]/roles/{_ROLE_ID}|"
                     rf"organizations/[0-9]{{1,20}}/roles/{_ROLE_ID})$")
# Basic roles grant (nearly) every permission in the project (IAM "Basic roles"): never on a VM's account, which every
# pod on the node can reach through the metadata server's node identity where Workload Identity is off.
BASIC_ROLES = ("roles/owner", "roles/editor", "roles/viewer")


def node_account_id(stack_name: str) -> str:
    """The stack's own node service account id (components/gcp/security.py GcpIdentities)."""
    return f"{stack_name[:23]}-nodes"


def check_pool_accounts(stack_name: str, gcp: GcpSpec, out: _Collector) -> None:
    """A pool's service account: exactly one of accountId and existing, roles only on one the stack creates, each a
    role name IAM takes, no basic role, and one definition per account id."""
    defined: dict[str, tuple[str, ...]] = {}
    for i, pool in enumerate(gcp.node_pools):
        account = pool.service_account
        if account is None:
            continue
        where = f".gcp.nodePools[{i}].serviceAccount"
        if (account.account_id is None) == (account.existing is None):
            out.add(where, "node-service-account",
                    "give exactly one of accountId (a service account the stack creates, with roles) and existing "
                    "(the email of one that exists)")
            continue
        if account.existing is not None:
            if account.roles:
                out.add(f"{where}.roles", "node-service-account",
                        "roles are granted only to an account the stack creates (accountId); an existing account "
                        "keeps the roles its owner gave it")
            continue
        assert account.account_id is not None
        if account.account_id == node_account_id(stack_name):
            out.add(f"{where}.accountId", "node-service-account",
                    f"'{account.account_id}' is the stack's own node account; name another account, or leave "
                    "serviceAccount out to use it")
        for k, role in enumerate(account.roles):
            if not ROLE_RE.fullmatch(role):
                hint = (f" (did you mean roles/{role}? cluster-toolkit's project_roles leave the prefix out)"
                        if re.fullmatch(_ROLE_ID, role) else "")
                out.add(f"{where}.roles[{k}]", "iam-role-name",
                        f"'{role}' is not an IAM role name: roles/<service>.<role> (e.g. roles/logging.logWriter), "
                        f"projects/<project>/roles/<id> or organizations/<number>/roles/<id>{hint}")
            elif role in BASIC_ROLES:
                out.add(f"{where}.roles[{k}]", "node-account-least-privilege",
                        f"{role} is a basic role (nearly every permission in the project); grant the node account "
                        "the predefined roles it needs, e.g. roles/container.defaultNodeServiceAccount")
            if role in account.roles[:k]:
                out.add(f"{where}.roles[{k}]", "iam-role-name", f"{role} is listed twice")
        roles = tuple(sorted(set(account.roles)))
        if defined.setdefault(account.account_id, roles) != roles:
            out.add(f"{where}.roles", "node-service-account",
                    f"another pool creates {account.account_id} with other roles "
                    f"({', '.join(defined[account.account_id]) or 'none'}); pools that share an account list the "
                    "same roles")


# The node images GKE offers (GKE "Node images", docs.cloud.google.com/kubernetes-engine/docs/concepts/node-images,
# read 2026-12-02: Container-Optimized OS with containerd cos_containerd, Ubuntu with containerd ubuntu_containerd,
# Windows Server LTSC with containerd windows_ltsc_containerd; Docker-based images (cos, ubuntu) are not supported from
# GKE 1.24, "About the Docker node image deprecation"). The API takes them upper-case (pulumi_gcp NodePoolNodeConfig
# image_type). Windows nodes are GKE's but not this platform's: its node agents are Linux DaemonSets.
GKE_IMAGE_TYPES = ("COS_CONTAINERD", "UBUNTU_CONTAINERD", "WINDOWS_LTSC_CONTAINERD")
LINUX_IMAGE_TYPES = ("COS_CONTAINERD", "UBUNTU_CONTAINERD")
IMAGE_SOURCE = "GKE 'Node images', docs.cloud.google.com/kubernetes-engine/docs/concepts/node-images"


# GKE "About the Managed Lustre CSI driver", Limitations (read 2026-12-02): "Only Container-Optimized OS (COS) nodes
# are supported"; Managed Lustre "Connect to an existing instance from GKE" says Ubuntu images are not.
LUSTRE_SOURCE = "GKE 'About the Managed Lustre CSI driver', Limitations: only Container-Optimized OS nodes"


def check_lustre_images(gcp: GcpSpec, catalog: Mapping[str, MachineFacts], out: _Collector) -> None:
    """Managed Lustre is mounted by GKE's CSI driver on COS nodes only: a pool on Ubuntu could never mount the stack's
    filesystem (its pods stay ContainerCreating), whether the image is asked for or follows from gpuDriver operator."""
    fs = gcp.storage.filesystem
    if fs is None or fs.type != "managed-lustre":
        return
    for i, pool in enumerate(gcp.node_pools):
        facts = catalog.get(pool.machine_type)
        image = pool_image_type(pool, bool(facts and facts.gpu_count))
        if image != "UBUNTU_CONTAINERD":  # COS mounts it; other images are refused by gke-image-type
            continue
        key, why = (("imageType", f"imageType {image}") if pool.image_type is not None
                    else ("gpuDriver", "gpuDriver operator (the GPU Operator needs Ubuntu nodes)"))
        out.add(f".gcp.nodePools[{i}].{key}", "lustre-cos-only",
                f"pool '{pool.name}' runs {image} ({why}), but the stack's Managed Lustre filesystem mounts on "
                f"Container-Optimized OS nodes only ({LUSTRE_SOURCE}): its pods could never mount it; use "
                "COS_CONTAINERD (gpuDriver gke-latest or gke-default)")


def check_pool_images(gcp: GcpSpec, out: _Collector) -> None:
    """imageType: a node image GKE offers, Linux, and Ubuntu where the GPU Operator builds the driver."""
    for i, pool in enumerate(gcp.node_pools):
        image = pool.image_type
        if image is None:
            continue
        where = f".gcp.nodePools[{i}].imageType"
        if image not in GKE_IMAGE_TYPES:
            docker = " (Docker-based images are not supported from GKE 1.24)" if image in ("COS", "UBUNTU") else ""
            out.add(where, "gke-image-type",
                    f"'{image}' is not a node image GKE offers{docker}: {' or '.join(LINUX_IMAGE_TYPES)} "
                    f"({IMAGE_SOURCE})")
        elif image not in LINUX_IMAGE_TYPES:
            out.add(where, "gke-image-type",
                    f"{image} is a Windows Server image; the platform's node agents (GPU stack, fabric, node checks) "
                    f"are Linux DaemonSets: use {' or '.join(LINUX_IMAGE_TYPES)}")
        elif pool.gpu_driver == "operator" and image != "UBUNTU_CONTAINERD":
            out.add(where, "gke-image-type",
                    "gpuDriver operator needs UBUNTU_CONTAINERD: the GPU Operator's driver containers run on Ubuntu "
                    "nodes (GKE 'Manage the GPU stack with the NVIDIA GPU Operator')")
