"""Constants, patterns and the model base class every part of the spec shares."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from components.catalog.namespaces import fsx_lustre, privileged_namespaces, system_namespaces

SPEC_KEY = "gpu-cluster:spec"
REQUIRED_LABEL_KEYS: tuple[str, ...] = ("team", "cost-center", "environment", "owner")
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
ALL_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator", "controllerManager", "scheduler")
PROD_REQUIRED_LOG_TYPES: tuple[str, ...] = ("api", "audit", "authenticator")
GPU_TAINT_KEY = "nvidia.com/gpu"
# GPU nodes register with this taint; the Node Readiness Controller removes it once the node's check passed
# (components/kubernetes/objects/node_check.py). The controller's CRD accepts only readiness.k8s.io/ keys (v0.5.0).
READINESS_TAINT_KEY = "readiness.k8s.io/gpu-node-check"
HEALTH_TAINT_KEY = "readiness.k8s.io/gpu-health"
# Node groups some team has CPU quota on (teams[].cpuQuotas) carry this taint (NoSchedule), and the team CPU flavor
# tolerates it (Kueue adds a flavor's tolerations to the pods it admits): platform pods, which do not tolerate it, stay
# on the system groups and leave the teams' CPU quota its capacity.
TEAM_CPU_TAINT_KEY = "gpu-cluster/team-cpu"
MAX_PUBLIC_ACCESS_CIDRS = 40  # EKS API, VpcConfigRequest.publicAccessCidrs
MAX_TAINTS = 50  # EKS API, CreateNodegroup taints
MAX_TAGS = 50  # AWS: user tags per resource
# Namespaces whose pods may run privileged (node agents: GPU Operator, EFA plugin, node exporter).
PRIVILEGED_NAMESPACES: tuple[str, ...] = privileged_namespaces()
# Names no team may take: Kubernetes' own namespaces and the platform components' (components/catalog).
SYSTEM_NAMESPACES: tuple[str, ...] = system_namespaces()

# FSx for Lustre sizes and tiers: components/catalog/fsx.yaml (with its source).
FSX_THROUGHPUT_TIERS: dict[str, tuple[int, ...]] = fsx_lustre().throughput_tiers
FSX_MIN_CAPACITY_GIB = fsx_lustre().min_capacity_gib
FSX_CAPACITY_STEP_GIB = fsx_lustre().capacity_step_gib

_LABEL_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{1,63}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,22}[a-z0-9]$")
_GROUP_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")
_ZONE_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_ZONE_ID_RE = re.compile(r"^[a-z]{2,5}\d-az\d{1,2}$")
# AWS tag syntax (AWS General Reference, "Tagging best practices": letters, digits, spaces, + - = . _ : / @).
_AWS_TAG_KEY = re.compile(r"^[\w\s+=.:/@-]{1,128}$")
_AWS_TAG_VALUE = re.compile(r"^[\w\s+=.:/@-]{0,256}$")


def unit(name: str) -> JsonDict:
    """A number field's unit (``json_schema_extra=unit("GiB")``): the stack file's JSON Schema carries it as ``x-unit``
    and the spec reference (docs/spec-reference.md) shows it beside the field."""
    return {"x-unit": name}


class _Model(BaseModel):
    """Base: camelCase keys in YAML, unknown keys rejected, immutable after validation. Integers and
    booleans are strict (``maxSize: true`` is refused, not read as 1); numbers are finite."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, allow_inf_nan=False
    )

# EC2's user data limit: 16 KB before base64 (EC2 user guide, "Run commands when you launch an EC2 instance").
USER_DATA_LIMIT = 16384
