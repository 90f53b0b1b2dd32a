"""The stack file's provider settings beside ``gpu-cluster:spec``: each cloud's region key (which must agree with the
spec's region) and the JSON Schema of the provider keys the shipped stacks set."""

from __future__ import annotations

from typing import Any

from components.spec.base import _REGION_RE
from components.spec.gcp import _GCP_REGION_RE, _PROJECT_RE

# The Pulumi provider's region setting of each cloud (the `<provider>:region` config key).
PROVIDER_REGION_KEYS = {"aws": "aws:region", "gcp": "gcp:region"}
# The provider's project setting, where the cloud has one (must be the spec's project).
PROVIDER_PROJECT_KEYS = {"gcp": "gcp:project"}


def provider_keys_schema() -> dict[str, dict[str, Any]]:
    """The providers' settings the shipped stacks set, as JSON Schema properties of the stack file's config."""
    return {
        "aws:region": {
            "type": "string", "pattern": _REGION_RE.pattern,
            "description": "The AWS provider's region (AWS stacks); must equal gpu-cluster:spec.aws.region.",
        },
        "gcp:project": {
            "type": "string", "pattern": _PROJECT_RE.pattern,
            "description": "The Google Cloud provider's project (GCP stacks): the project of "
            "gpu-cluster:spec.gcp.project.",
        },
        "gcp:region": {
            "type": "string", "pattern": _GCP_REGION_RE.pattern,
            "description": "The Google Cloud provider's region (GCP stacks); must equal gpu-cluster:spec.gcp.region.",
        },
    }
