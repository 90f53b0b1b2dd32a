"""The Pulumi program: read the stack's spec, validate it, build the cluster, export what operators need.

``__main__.py`` (what the Pulumi CLI runs) calls :func:`main`; the offline engine calls it too, so an
installed package (``pip install .``) carries the whole program, not a path into a source tree.
"""

from __future__ import annotations

import pulumi

from components.cluster import build_cluster
from components.sizing.plan import spec_warnings
from components.spec import SpecError, parse_spec


def main() -> None:
    """Run the program for the selected stack."""
    stack_file = f"stacks/Pulumi.{pulumi.get_stack()}.yaml"
    raw = pulumi.Config("gpu-cluster").get_object("spec")
    try:
        cloud = raw.get("cloud") if isinstance(raw, dict) else None
        provider = pulumi.Config("gcp" if cloud == "gcp" else "aws")
        spec = parse_spec(raw, stack_file, provider_region=provider.get("region"),
                          provider_project=provider.get("project") if cloud == "gcp" else None)
    except SpecError as err:
        # RunError prints the message alone (no traceback) and registers nothing.
        raise pulumi.RunError(f"invalid stack configuration:\n{err}") from None
    for warning in spec_warnings(spec):
        pulumi.log.warn(f"{stack_file}: {warning}")

    out = build_cluster(spec)
    pulumi.export("clusterName", out.cluster_name)
    pulumi.export("endpoint", out.endpoint)
    pulumi.export("kubeconfig", out.kubeconfig)
    pulumi.export("kubeconfigCommand", out.kubeconfig_command)
    pulumi.export("gpuAvailabilityZone", out.gpu_availability_zone)
    pulumi.export("checkpointBucket", out.checkpoint_bucket)
    if out.filesystem_dns_name is not None:
        pulumi.export("filesystemDnsName", out.filesystem_dns_name)
        pulumi.export("filesystemMountName", out.filesystem_mount_name)
    pulumi.export("nodeGroupNames", out.node_group_names)
    pulumi.export("checkpointRoleArns", out.checkpoint_role_arns)
    if out.cost_export_bucket is not None:
        pulumi.export("costExportBucket", out.cost_export_bucket)
