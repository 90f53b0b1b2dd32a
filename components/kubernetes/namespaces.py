"""The platform's own namespaces: the Pod Security level each needs, default-deny egress with what its component
needs (objects/egress.py). Every platform component that installs into a namespace of its own creates it here."""

from __future__ import annotations

from typing import Optional

import pulumi

from components.kubernetes import objects as obj
from components.kubernetes.apply import apply
from components.kubernetes.inputs import PlatformInputs
from components.spec import PRIVILEGED_NAMESPACES


def platform_egress(inputs: PlatformInputs) -> obj.PlatformEgress:
    """What the platform namespaces' egress policies need from the cloud and the spec."""
    smtp = tuple(int(r.smarthost.rsplit(":", 1)[1]) for r in inputs.platform.monitoring.alerts.receivers
                 if r.type == "email" and r.smarthost)
    return obj.PlatformEgress(anywhere=inputs.anywhere, agents=inputs.extra_egress, node_cidrs=inputs.node_cidrs,
                              smtp_ports=smtp)


def egress_policies(parent: pulumi.Resource, namespace: str, ns: pulumi.Resource, inputs: PlatformInputs) -> None:
    """Default-deny egress in a namespace the platform creates, with what its components need (objects/egress.py)."""
    in_ns = pulumi.ResourceOptions(parent=parent, depends_on=[ns])
    for m in obj.platform_network_policies(namespace, platform_egress(inputs)):
        apply(f"egress-{namespace}-{m['metadata']['name']}", m, in_ns)


def system_namespace(parent: pulumi.Resource, name: str, inputs: PlatformInputs,
                      opts: Optional[pulumi.ResourceOptions] = None) -> pulumi.CustomResource:
    """A namespace the platform installs a component in, at the Pod Security level it needs, with default-deny
    egress and the component's allows."""
    security = "privileged" if name in PRIVILEGED_NAMESPACES else "baseline"
    ns = apply(f"ns-{name}", obj.namespace(name, inputs.labels, security),
               opts or pulumi.ResourceOptions(parent=parent))
    egress_policies(parent, name, ns, inputs)
    return ns
