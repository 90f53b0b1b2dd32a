"""The preview's day-two lines for EKS: how each node group follows the control plane (its Kubernetes version and
pinned AMI release, how EKS rolls it and when), in the order an upgrade takes them (docs/upgrades.md)."""

from __future__ import annotations

from datetime import datetime

from components.aws.capacity_block import BlockWindow
from components.catalog import load_aws_catalog, load_eks_versions
from components.catalog.versions import support_warning
from components.planes import GraphView
from components.spec import ClusterSpec
from components.spec.decisions import node_release


def upgrade_lines(graph: GraphView, spec: ClusterSpec, now: datetime) -> list[str]:
    """How each node group follows the control plane: its Kubernetes version and pinned AMI release (with the
    catalog's source), how EKS rolls it (its updateConfig) and when it can, in the order an upgrade takes them."""
    aws = spec.aws_spec()
    catalog = load_aws_catalog()
    version = aws.control_plane.kubernetes_version
    groups = {str(r.inputs.get("nodeGroupName")): r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup")}
    system = [g for g in aws.node_groups if not catalog[g.instance_type].gpu_count] or list(aws.node_groups)
    ordered = [*system, *(g for g in aws.node_groups if g not in system)]
    lines = [f"upgrades: control plane {version}, then its add-ons, then "
             + " -> ".join(("system groups " if i == 0 else "GPU groups ") + ", ".join(g.name for g in batch)
                           for i, batch in enumerate((system, [g for g in ordered if g not in system])) if batch)
             + " (each waits for the one before: docs/upgrades.md)"]
    for group in ordered:
        facts = catalog[group.instance_type]
        res = groups.get(f"{spec.name}-{group.name}")
        update = (res.inputs.get("updateConfig") or {}) if res is not None else {}
        if group.ami_id is not None:
            what = f"custom AMI {group.ami_id} built for Kubernetes {group.ami_kubernetes_version}"
        else:
            release = node_release(group, facts, version)
            what = f"Kubernetes {version}, " + (
                f"AMI release {release.release_version} ({release.status}"
                + (f", {release.as_of}" if release.as_of else "") + ")" if release is not None else
                "no pinned AMI release (components/catalog/eks_node_releases.yaml has none for "
                f"{version}): EKS gives it its latest")
        if update.get("updateStrategy") == "MINIMAL":
            how = ("terminate then launch, every node at once" if update.get("maxUnavailablePercentage") == 100
                   else f"terminate then launch, {update.get('maxUnavailable', 1)} node(s) at a time")
        else:
            how = f"surge: new nodes first, {update.get('maxUnavailable', 1)} drained at a time"
        when = ""
        cap = group.capacity
        if cap.type == "capacity-block" and cap.start and cap.end and cap.instance_count and BlockWindow(
                start=cap.start, end=cap.end, instance_count=cap.instance_count, now=now).running:
            when = (f"; held while the block runs: this apply leaves its version, AMI release and launch template "
                    f"as deployed (ignoreChanges), and the first apply after {cap.end:%Y-%m-%d %H:%M} UTC rolls it at "
                    "0 nodes")
        elif cap.type == "capacity-block":
            when = ("; rolls only at 0 nodes: outside the block's window (an apply inside it leaves the group as "
                    "deployed)")
        elif group.capacity.type == "reserved":
            when = "; a full reservation has no spare instance: nodes are replaced in place, roll between runs"
        lines.append(f"  {group.name}: {what}; rolls by {how}{when}")
    return lines


def support_notes(spec: ClusterSpec, now: datetime) -> list[str]:
    """The warning that the cluster's minor leaves EKS standard support within upgrades.supportWarningDays."""
    aws = spec.aws_spec()
    notes: list[str] = []
    release = load_eks_versions().get(aws.control_plane.kubernetes_version)
    warning = support_warning("EKS", release.version, release.end_of_standard_support, now,
                              spec.upgrades.support_warning_days) if release is not None else None
    if warning is not None:
        notes.append(f"warning: {warning}: plan the upgrade (docs/upgrades.md); the cluster stays on standard support "
                     "(upgradePolicy STANDARD) and EKS upgrades it after that date")
    return notes


def pin_notes(graph: GraphView, spec: ClusterSpec) -> list[str]:
    """The warnings for what has no pin at the cluster's minor: add-ons (an installed one is not upgraded) and AMI
    releases (groups created at different times would run different AMIs)."""
    aws = spec.aws_spec()
    notes: list[str] = []
    unpinned = sorted(str(a.inputs.get("addonName")) for a in graph.of_type("aws:eks/addon:Addon")
                      if not a.inputs.get("addonVersion"))
    if unpinned:
        version = aws.control_plane.kubernetes_version
        notes.append(f"warning: no sourced version of {', '.join(unpinned)} for Kubernetes {version} in "
                     "components/catalog/charts.yaml: a new cluster gets EKS's default version for "
                     f"{version}, but an installed add-on keeps the version it runs (the provider's addonVersion is "
                     "optional and computed: leaving it out changes nothing), also across a Kubernetes upgrade; "
                     "pin it after checking `aws eks describe-addon-versions --kubernetes-version "
                     f"{version} --addon-name <name>`, or update it by hand before the next upgrade")
    catalog = load_aws_catalog()
    unreleased = sorted(g.name for g in aws.node_groups if g.ami_id is None and g.instance_type in catalog
                        and node_release(g, catalog[g.instance_type], aws.control_plane.kubernetes_version) is None)
    if unreleased:
        version = aws.control_plane.kubernetes_version
        notes.append(f"warning: no pinned AMI release for Kubernetes {version} (components/catalog/eks_node_releases."
                     f"yaml) for {', '.join(unreleased)}: EKS gives each its latest AMI at creation, so groups created "
                     "at different times run different AMIs; pin one (aws.nodeGroups[].amiReleaseVersion) after "
                     f"`aws ssm get-parameter --name /aws/service/eks/optimized-ami/{version}/amazon-linux-2023/"
                     "x86_64/nvidia/recommended/release_version`")
    return notes
