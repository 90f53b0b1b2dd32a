"""Egress of the namespaces the platform creates: default deny, then what each component needs.

Team namespaces have their own policies (tenancy.py). A platform namespace (monitoring, logging, kueue-system, the
operators', gpu-acceptance, slurm) gets a default-deny egress policy and these allows:

- DNS to the cluster's DNS pods;
- every pod of the cluster, any port (Prometheus scrapes them, operators call their webhooks and each other,
  slurmctld and slurmd talk, MPI launchers reach their workers);
- HTTPS (443) anywhere: the Kubernetes API (its ClusterIP and the control plane's addresses), the cloud's APIs
  (CloudWatch, S3, Cloud Storage, EC2 Auto Scaling), registries;
- the cloud's credential agent (EKS Pod Identity agent, GKE metadata server), the one link-local address a pod needs;
- per namespace (:data:`NAMESPACE_NEEDS`): monitoring reaches the nodes' host-network exporters and kubelets and the
  SMTP servers of the stack's email receivers; slurm reaches its accounting database and the users' directory.

What is refused is everything else leaving the cluster on other ports, and in particular the instance metadata
service (169.254.169.254, port 80) on EKS, where the node role's credentials live: a pod in these namespaces that is
not on the host network cannot read them, on top of the launch templates' hop limit of 1. Pods on the host network
(node exporter, the CNI, the CSI node plugins) are not subject to NetworkPolicy at all (Kubernetes documentation,
"Network Policies": "pods with hostNetwork: true ... the behavior is undefined"; every CNI in use here ignores them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.kubernetes.objects.common import EgressRule, Manifest, meta

# The private address ranges (RFC 1918): where a managed database's private endpoint lives (RDS in the VPC, Cloud SQL
# in the private services access range, whose CIDR Google allocates at apply time and the program cannot name).
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
# LDAP (389, StartTLS), LDAPS (636), Active Directory's global catalog (3268, 3269 over TLS), Kerberos (88) and its
# password change (464): what sssd on the Slurm login and worker pods reaches (sssd-ldap(5), sssd-ad(5), sssd-krb5(5));
# AD's discovery also uses CLDAP (UDP 389) and Kerberos over UDP. The directory is outside the stack.
DIRECTORY_PORTS = (389, 636, 3268, 3269, 88, 464)
DIRECTORY_UDP_PORTS = (389, 88, 464)
# What Prometheus scrapes on the nodes' own addresses (host-network pods and the kubelet): kubelet and cAdvisor (10250),
# kube-proxy (10249), the node exporter (9100) and the EFA node exporter (9102; components/aws/telemetry.py).
NODE_SCRAPE_PORTS = (9100, 9102, 10249, 10250)
SLURM_DB_PORTS = (3306,)  # slurmdbd to MySQL (RDS for MySQL, Cloud SQL for MySQL)


@dataclass(frozen=True)
class PlatformEgress:
    """What the cloud tells the platform namespaces' egress policies.

    anywhere: what "any address" is (0.0.0.0/0, with ::/0 on an IPv6 cluster).
    agents: the cloud's credential agent, as the team namespaces get it (EKS Pod Identity, GKE metadata server).
    node_cidrs: the nodes' addresses (the VPC), for the exporters Prometheus scrapes on the host network; empty where
        the dataplane cannot select nodes by address (GKE Dataplane V2 is Cilium, whose CIDR rules do not match
        cluster nodes, only its host and remote-node entities do: cilium/cilium-cli#1988, cilium/cilium#16308), and
        the rule then names the ports alone.
    smtp_ports: the ports of the stack's email receivers' smarthosts (Alertmanager sends from monitoring).
    """

    anywhere: tuple[str, ...] = ("0.0.0.0/0",)
    agents: tuple[EgressRule, ...] = ()
    node_cidrs: tuple[Any, ...] = ()  # str, or the provider's Output for a block allocated at apply (IPv6)
    smtp_ports: tuple[int, ...] = ()


DEFAULT_DENY_EGRESS = "default-deny-egress"
# Created by the MPI Operator's pinned manifest (components/catalog/acceptance.yaml).
MPI_OPERATOR_NAMESPACE = "mpi-operator"


def network_policy(name: str, namespace: str, spec: Manifest) -> Manifest:
    """A NetworkPolicy object (team namespaces' and platform namespaces' alike)."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta(name, namespace),
            "spec": spec}


def _policy(name: str, namespace: str, egress: list[Manifest] | None) -> Manifest:
    spec: Manifest = {"podSelector": {}, "policyTypes": ["Egress"]}
    if egress is not None:
        spec["egress"] = egress
    return network_policy(name, namespace, spec)


def _tcp(ports: Sequence[int]) -> list[Manifest]:
    return [{"protocol": "TCP", "port": p} for p in ports]


# Egress rules the team namespaces (tenancy.py) and the platform's share; each call gives a fresh rule.
def dns_egress() -> Manifest:
    """DNS (UDP and TCP 53) to the cluster's DNS pods."""
    return {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}


def agent_egress(rule: EgressRule) -> Manifest:
    """The egress rule to one address and port (the cloud's credential agent)."""
    return {"to": [{"ipBlock": {"cidr": rule.cidr}}], "ports": [{"protocol": rule.protocol, "port": rule.port}]}


def https_egress(anywhere: Sequence[str]) -> Manifest:
    """HTTPS (443) to any address (``anywhere``: 0.0.0.0/0, with ::/0 on an IPv6 cluster)."""
    return {"to": [{"ipBlock": {"cidr": c}} for c in anywhere], "ports": _tcp([443])}


def namespace_needs(namespace: str, egress: PlatformEgress) -> list[tuple[str, list[Manifest]]]:
    """(policy name, egress rules) a namespace needs beyond the shared allows."""
    if namespace == "monitoring":
        needs = []
        # Host-network exporters and the kubelet, on the nodes' addresses where the dataplane can name them.
        scrape: Manifest = {"ports": _tcp(NODE_SCRAPE_PORTS)}
        if egress.node_cidrs:
            scrape = {"to": [{"ipBlock": {"cidr": c}} for c in egress.node_cidrs], **scrape}
        needs.append(("allow-node-exporters", [scrape]))
        if egress.smtp_ports:
            needs.append(("allow-smtp", [{"to": [{"ipBlock": {"cidr": c}} for c in egress.anywhere],
                                          "ports": _tcp(sorted(set(egress.smtp_ports)))}]))
        return needs
    if namespace == "slurm":
        return [("allow-accounting-database", [{"to": [{"ipBlock": {"cidr": c}} for c in PRIVATE_RANGES],
                                                "ports": _tcp(SLURM_DB_PORTS)}]),
                ("allow-directory", [{"to": [{"ipBlock": {"cidr": c}} for c in egress.anywhere],
                                      "ports": [*_tcp(DIRECTORY_PORTS),
                                                *({"protocol": "UDP", "port": p} for p in DIRECTORY_UDP_PORTS)]}])]
    return []


def platform_network_policies(namespace: str, egress: PlatformEgress) -> list[Manifest]:
    """The egress policies of one platform namespace: default deny, then the shared allows and its own needs."""
    out = [
        _policy(DEFAULT_DENY_EGRESS, namespace, None),
        _policy("allow-dns", namespace, [dns_egress()]),
        _policy("allow-cluster-pods", namespace, [{"to": [{"namespaceSelector": {}}]}]),
        _policy("allow-https", namespace, [https_egress(egress.anywhere)]),
    ]
    out += [_policy(rule.name, namespace, [agent_egress(rule)]) for rule in egress.agents]
    for name, rules in namespace_needs(namespace, egress):
        out.append(_policy(name, namespace, rules))
    return out
