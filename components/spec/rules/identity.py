"""Rules on identity and billing: labels and tags."""

from __future__ import annotations

from components.spec.base import _AWS_TAG_KEY, _AWS_TAG_VALUE, _LABEL_RE, _LABEL_VALUE_RE, MAX_TAGS, REQUIRED_LABEL_KEYS
from components.spec.errors import _Collector, _path
from components.spec.model import ClusterSpec


def _check_labels(spec: ClusterSpec, out: _Collector) -> None:
    for key, value in spec.labels.items():
        if not _LABEL_RE.fullmatch(key):
            out.add(_path(["labels", key], root=""), "label-syntax",
                    "label keys must be 1-63 characters of lowercase letters, digits, '-' or '_', "
                    "starting with a letter (valid as AWS tags and GCP labels alike)")
        if not _LABEL_VALUE_RE.fullmatch(value):
            out.add(_path(["labels", key], root=""), "label-syntax",
                    f"label value '{value}' must be 1-63 characters of lowercase letters, digits, "
                    "'-' or '_' (valid as AWS tags and GCP labels alike)")
    for key in REQUIRED_LABEL_KEYS:
        if key == "environment":
            continue
        if key not in spec.labels:
            out.add(".labels", "billing-labels-required",
                    f"billing label '{key}' is required (required keys: {', '.join(REQUIRED_LABEL_KEYS)})")
    # Subnets carry the most tags: the billing labels, Name, the provider's cluster tag and three
    # Kubernetes tags (kubernetes.io/cluster/<name>, the load-balancer role, subnet-role).
    added = {"Name", "cluster", f"kubernetes.io/cluster/{spec.name}", "kubernetes.io/role/internal-elb",
             "subnet-role"}
    total = len(set(spec.billing_labels) | set(spec.tags) | added)
    if total > MAX_TAGS:
        extra = f" and {len(spec.tags)} tags" if spec.tags else ""
        out.add(".labels", "tag-limit",
                f"the {len(spec.billing_labels)} billing labels{extra} and the {len(added)} tags the program adds "
                f"make {total} tags on a subnet; AWS allows {MAX_TAGS} per resource")
    for key, value in spec.tags.items():
        if not _AWS_TAG_KEY.fullmatch(key) or key.lower().startswith("aws:") or not _AWS_TAG_VALUE.fullmatch(value):
            out.add(_path(["tags", key], root=""), "aws-tag-syntax",
                    "AWS tags have keys of 1-128 and values of 0-256 letters, digits, spaces and + - = . _ : / @ "
                    "(keys may not start with aws:)")
        if key in spec.billing_labels:
            out.add(_path(["tags", key], root=""), "aws-tag-syntax",
                    f"'{key}' is a billing label; set it under labels, not tags")
    env = spec.labels.get("environment")
    if env is not None and env != spec.environment:
        out.add(".labels.environment", "billing-labels-required",
                f"label environment '{env}' must equal the environment key '{spec.environment}' "
                "(it is filled in from it; leave it out)")
