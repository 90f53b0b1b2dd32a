"""pyxis's ``--container-image`` read as pyxis and enroot read it, for the registry importer's ConfigMap
(objects/slurm_pyxis.py writes it) and for ``blueprint admit`` on sbatch scripts (blueprint/admit/sbatch_images.py),
which judges a job's images as the importer will. No imports beyond the standard library: admit loads it.

pyxis (NVIDIA/pyxis ``pyxis_slurmstepd.c``, read at v0.24.0 on 2026-12-03): an image starting with ``.`` or ``/`` is
a squashfs file, started without any importer; any other is an enroot URI, ``docker://`` prefixed unless it starts
with ``docker://`` or ``dockerd://``. enroot (v4.1.2 ``src/docker.sh`` ``docker::_parse_uri``) then reads the
registry and the image path: Docker's ``REGISTRY/IMAGE`` where the first part has a dot or a port (else it is a
Docker Hub namespace), a bare name as Docker Hub's ``library/NAME``, or enroot's own ``[USER@]REGISTRY#IMAGE``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

IMPORTER_CONFIG_MAP = "slurm-pyxis-importer"
# enroot's system configuration directory (ENROOT_SYSCONF_PATH's default) and the GPUDirect groups' hook there
# (objects/slurm_fabric.py writes it; admit reads the NodeSets that mount it)
ENROOT_HOOKS_DIR = "/etc/enroot/hooks.d"
FABRIC_HOOK = "50-gpu-cluster-fabric.sh"
IMPORTER_KEY = "registry-importer.sh"  # the importer script's key in that ConfigMap
ALLOWED_LINE = re.compile(r"^ALLOWED=\((.*)\)$", re.MULTILINE)  # the script's list of allowed prefixes

# enroot's character classes ([[:alnum:]] in the C locale; ",-@" is a range, as in enroot's pattern).
_U = r"[A-Za-z0-9_.!~*'()%\\;:&=+$,-@]+"
_I = r"[a-z0-9/._-]+"
_T = r"[A-Za-z0-9._:-]+"
_D = r"sha256:[A-Za-z0-9]+"
_USER = rf"(({_U})@)?"
# Each form's three patterns (tag and digest, digest, optional tag), in enroot's order; groups 3 and 4 are the
# registry (or Docker Hub name) and the image.
_DOCKER = [re.compile(rf"^docker://{_USER}([^/#]+)/({_I}):({_T})@({_D})$"),
           re.compile(rf"^docker://{_USER}([^/#]+)/({_I})@({_D})$"),
           re.compile(rf"^docker://{_USER}([^/#]+)/({_I})(:({_T}))?$")]
_LIBRARY = [re.compile(rf"^docker://{_USER}([^/@#:]+):({_T})@({_D})$"),
            re.compile(rf"^docker://{_USER}([^/@#:]+)@({_D})$"),
            re.compile(rf"^docker://{_USER}([^/@#:]+)(:({_T}))?$")]
_ENROOT = [re.compile(rf"^docker://{_USER}([^#/@]+)#({_I}):({_T})@({_D})$"),
           re.compile(rf"^docker://{_USER}([^#/@]+)#({_I})@({_D})$"),
           re.compile(rf"^docker://{_USER}([^#/@]+)#({_I})(:({_T}))?$")]
NOT_ALLOWED = "is not from a registry this cluster allows"  # the importer's refusal of a readable image
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?$")


def is_squashfs(image: str) -> bool:
    """pyxis takes the image as a squashfs file on the node (``strspn(image, "./") > 0``): no importer runs."""
    return image[:1] in (".", "/")


def enroot_uri(image: str) -> str:
    """The URI pyxis hands enroot (or the importer) for ``--container-image``."""
    return image if image.startswith(("docker://", "dockerd://")) else f"docker://{image}"


def parse_uri(uri: str) -> tuple[str, str] | None:
    """(registry, image path) as enroot reads the URI; None when enroot would not read it."""
    for pattern in _DOCKER:
        if m := pattern.match(uri):
            reg, img = m.group(3), m.group(4)
            return (reg, img) if re.search(r"[.:]", reg) else ("docker.io", f"{reg}/{img}")
    for pattern in _LIBRARY:
        if m := pattern.match(uri):
            return "docker.io", f"library/{m.group(3)}"
    for pattern in _ENROOT:
        if m := pattern.match(uri):
            return m.group(3), m.group(4)
    return None


def allowed_prefixes(script: str) -> list[str] | None:
    """The prefixes the importer script allows (its ``ALLOWED=(...)`` line), or None without one."""
    m = ALLOWED_LINE.search(script)
    return shlex.split(m.group(1)) if m else None


def importer_refusal(image: str, allowed: Sequence[str]) -> str | None:
    """Why the importer refuses ``--container-image`` ``image`` (its message's reason), or None when it imports it.
    A squashfs path never reaches the importer: None."""
    if is_squashfs(image):
        return None
    uri = enroot_uri(image)
    if not uri.startswith("docker://"):
        return f"{uri} is not a registry image (docker://)"
    parsed = parse_uri(uri)
    if parsed is None:
        return f"{uri} is not an image reference enroot reads"
    reg, img = parsed
    if not _HOST.match(reg):
        return f"registry '{reg}' of {uri} is not a host name"
    path = f"/{img}/"
    if "//" in path or "/../" in path or "/./" in path:
        return f"image path '{img}' of {uri}"
    name = f"{reg}/{img}"
    if any(name.startswith(prefix) for prefix in allowed):
        return None
    return f"{name} {NOT_ALLOWED}"
