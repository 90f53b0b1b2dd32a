"""Billing labels and tags: one merge rule for every resource of every plane.

Provider ``default_tags`` carry the billing labels to every taggable AWS resource, and each resource
also gets them explicitly (with its ``Name``) so that tags survive on things the provider does not
tag for us: instances and volumes launched by an Auto Scaling group, for example.
"""

from __future__ import annotations

from collections.abc import Mapping


def merge_tags(labels: Mapping[str, str], name: str | None = None, **extra: str) -> dict[str, str]:
    """Billing labels, then resource-specific extras, then ``Name``; later keys win.

    Billing keys cannot be overridden by extras: a resource cannot opt out of cost attribution.
    """
    out: dict[str, str] = {**extra, **labels}
    if name is not None:
        out["Name"] = name
    return out
