"""Resource options for anything that holds data: protected and retained where the spec says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import pulumi


def stateful_options(
    parent: pulumi.Resource,
    protect: bool,
    ignore_changes: Optional[Sequence[str]] = None,
    depends_on: Optional[Sequence[pulumi.Resource]] = None,
) -> pulumi.ResourceOptions:
    """Options for buckets, filesystems, KMS keys and clusters.

    ``protect`` makes ``pulumi up``/``destroy`` refuse to delete the resource; ``retain_on_delete``
    keeps the cloud object if the resource is ever removed from the program. ``ignore_changes`` lists
    name-like properties derived from the cluster name, so that renaming the cluster never replaces
    (and so deletes) the data. Logical names of stateful resources do not contain the cluster name,
    so a rename keeps their URNs.
    """
    return pulumi.ResourceOptions(
        parent=parent,
        protect=protect,
        retain_on_delete=protect,
        ignore_changes=list(ignore_changes) if ignore_changes else None,
        depends_on=list(depends_on) if depends_on else None,
    )
