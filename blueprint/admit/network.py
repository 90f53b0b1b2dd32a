"""The network path of the workload's pods: what the namespace's NetworkPolicies let them reach.

NetworkPolicy semantics (Kubernetes "Network Policies"): a pod is isolated for egress (ingress) when a policy of
its namespace selects it (``podSelector``) with that policy type (``policyTypes``; without it, Ingress, plus Egress
when the policy has egress rules); an isolated pod may reach a peer when some rule of some selecting policy allows
both the peer (``to``/``from``: ipBlock with its excepts, or namespaceSelector and podSelector; none = anywhere) and
the port (protocol TCP by default, ``endPort`` ranges; none = every port).

What each pod must reach, and why:

- DNS: kube-dns in kube-system, UDP 53 (every pod resolves names);
- the workload's other pods, every port, both ways, when it has more than one pod (NCCL bootstrap and rendezvous);
- the credentials agent when it uses a cloud identity (writes checkpoints to the bucket, or mounts a GCS FUSE volume,
  whose sidecar runs in the pod): the cluster's cloud names it (EKS Pod Identity 169.254.170.23 TCP 80, the GKE
  metadata server 169.254.169.254 TCP 80);
- the bucket endpoint, HTTPS 443 on public addresses (which change), in the same cases.

Lustre is not on this list: the shared filesystem is mounted by the node's kernel client through the CSI node plugin
on the host network, so LNet (TCP 988, FSx also 1018-1023) leaves from the node, where pod NetworkPolicies do not
apply. What it needs is the node network's rules (security groups on AWS, firewall rules on GCP), which are checked
instead: a rule of the graph must open the port. The cluster's cloud checks the pod's extra networks (GKE
multi-network pods, ``networking.gke.io/interfaces``, need each named Network object in the cluster).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from blueprint.admit.cloud import cloud_admit, cluster_cloud, every_cloud
from blueprint.admit.cluster import ClusterView, K8sObject, as_list, as_mapping, matches_selector
from blueprint.admit.workloads import PodSet

PRIVATE_RANGES = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                          "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"))


@dataclass(frozen=True)
class Peer:
    """Something a pod must reach: an address, any public address, or pods (namespace and labels)."""

    what: str
    protocol: str = "TCP"
    port: int | None = None  # None: every port
    ip: str | None = None
    public: bool = False
    namespace: str | None = None
    namespace_labels: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[str, str] = field(default_factory=dict)


def _types(policy: K8sObject) -> list[str]:
    listed = [str(t) for t in as_list(policy.spec.get("policyTypes"))]
    if listed:
        return listed
    return ["Ingress"] + (["Egress"] if "egress" in policy.spec else [])


def _port_ok(ports: list[Any], peer: Peer) -> bool:
    if not ports:
        return True
    for raw in ports:
        entry = as_mapping(raw)
        if str(entry.get("protocol", "TCP")) != peer.protocol:
            continue
        port = entry.get("port")
        if port is None:
            return True
        if peer.port is None or not isinstance(port, int):
            continue  # a port-limited rule does not open every port; named ports name a pod's port, not these
        end = entry.get("endPort")
        if port <= peer.port <= (end if isinstance(end, int) else port):
            return True
    return False


def _covers_public(block: dict[str, Any]) -> bool:
    try:
        net = ipaddress.ip_network(str(block.get("cidr")), strict=False)
        excepts = [ipaddress.ip_network(str(e), strict=False) for e in as_list(block.get("except"))]
    except ValueError:
        return False
    if net.version != 4 or net.prefixlen != 0:
        return False
    return all(any(e.version == p.version and e.subnet_of(p) for p in PRIVATE_RANGES)  # type: ignore[arg-type]
               for e in excepts)


def _in_block(block: dict[str, Any], ip: str) -> bool:
    try:
        address = ipaddress.ip_address(ip)
        if address not in ipaddress.ip_network(str(block.get("cidr")), strict=False):
            return False
        return not any(address in ipaddress.ip_network(str(e), strict=False) for e in as_list(block.get("except")))
    except ValueError:
        return False


def _peer_ok(peers: list[Any], peer: Peer, policy_ns: str, view: ClusterView) -> bool:
    if not peers:
        return True
    for raw in peers:
        entry = as_mapping(raw)
        block = as_mapping(entry.get("ipBlock"))
        if block:
            if peer.ip is not None and _in_block(block, peer.ip):
                return True
            if (peer.public or peer.namespace is not None) and _covers_public(block):
                return True  # pod IPs and public addresses lie in 0.0.0.0/0
            continue
        if peer.namespace is None:
            continue
        ns_selector = entry.get("namespaceSelector")
        if ns_selector is None:
            ns_ok = peer.namespace == policy_ns
        else:
            ns_ok = matches_selector(as_mapping(ns_selector), peer.namespace_labels)
        if ns_ok and matches_selector(as_mapping(entry.get("podSelector")), peer.pod_labels):
            return True
    return False


def allowed(view: ClusterView, namespace: str, pod_labels: dict[str, str], peer: Peer,
            direction: str = "Egress") -> tuple[bool, list[K8sObject]]:
    """Whether the pod may reach (Egress) or be reached by (Ingress) the peer; and the isolating policies."""
    key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    isolating = [p for p in view.of_kind("NetworkPolicy", namespace)
                 if direction in _types(p) and matches_selector(as_mapping(p.spec.get("podSelector")), pod_labels)]
    if not isolating:
        return True, []
    for policy in isolating:
        for rule in as_list(policy.spec.get(key)):
            rule = as_mapping(rule)
            if _port_ok(as_list(rule.get("ports")), peer) and _peer_ok(as_list(rule.get(peers_key)), peer,
                                                                       namespace, view):
                return True, []
    return False, isolating


def _opens_port(view: ClusterView, port: int) -> bool:
    """Whether the node network lets the nodes open TCP ``port`` to the filesystem: a rule of some cloud's node
    network in the graph (security groups on AWS, firewall rules on GCP) opens it."""
    return any(part.node_network_opens(view, port) for part in every_cloud())


def _lustre_ports(view: ClusterView, driver: str) -> tuple[int, ...]:
    """The ports a Lustre volume of ``driver`` needs from the node (the cloud whose driver it is says)."""
    return next((ports for part in every_cloud() if (ports := part.lustre_ports(view, driver))), ())


def check_network(view: ClusterView, namespace: str, ns_labels: dict[str, str], pod_sets: list[PodSet],
                  identity: bool, volumes: list[K8sObject]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(problems, notes) of the workload's network path. ``identity``: the pods use a cloud identity."""
    problems: list[tuple[str, str, str]] = []
    notes: list[str] = []
    kube_system = view.namespace_labels("kube-system") or {"kubernetes.io/metadata.name": "kube-system"}
    needs = [Peer("DNS (kube-dns in kube-system, UDP 53)", "UDP", 53, namespace="kube-system",
                  namespace_labels=kube_system, pod_labels={"k8s-app": "kube-dns"})]
    cloud = cluster_cloud(view)
    if identity:
        if cloud is not None:
            agent, name = cloud_admit(cloud).CREDENTIALS_AGENT
            needs.append(Peer(f"{name} ({agent}, TCP 80) for credentials", port=80, ip=agent))
        needs.append(Peer("the bucket endpoint (HTTPS 443 on public addresses)", port=443, public=True))
    total = sum(p.count for p in pod_sets)
    for pod_set in pod_sets:
        labels = pod_set.labels
        blocked: list[tuple[str, str, list[K8sObject]]] = []
        for peer in needs:
            ok, policies = allowed(view, namespace, labels, peer)
            if not ok:
                blocked.append(("egress-blocked", f"pod set {pod_set.name} cannot reach {peer.what}", policies))
        if total > 1:
            for other in pod_sets:
                peer = Peer(f"pod set {other.name}", namespace=namespace, namespace_labels=ns_labels,
                            pod_labels=other.labels)
                ok, policies = allowed(view, namespace, labels, peer)
                if not ok:
                    blocked.append(("egress-blocked", f"pod set {pod_set.name} cannot reach the workload's pods of "
                                    f"{other.name} (every port: NCCL bootstrap, rendezvous)", policies))
                back, policies = allowed(view, namespace, other.labels,
                                         Peer(pod_set.name, namespace=namespace, namespace_labels=ns_labels,
                                              pod_labels=labels), "Ingress")
                if not back:
                    blocked.append(("ingress-blocked", f"pod set {other.name} cannot be reached from pod set "
                                    f"{pod_set.name} (every port: NCCL bootstrap, rendezvous)", policies))
        for rule, what, policies in blocked:
            deny = next((p for p in policies if not as_list(p.spec.get("egress" if rule == "egress-blocked"
                                                                          else "ingress"))), policies[0])
            problems.append((deny.ref, rule, f"{what}: {', '.join(p.ref for p in policies)} isolate the pods and "
                             f"no rule of them allows it; add a NetworkPolicy in {namespace} that allows it"))
        if cloud is not None:
            problems += cloud_admit(cloud).pod_network_problems(view, pod_set)
    for pv in {v.ref: v for v in volumes}.values():
        driver = str(as_mapping(pv.spec.get("csi")).get("driver"))
        for port in _lustre_ports(view, driver):
            if not _opens_port(view, port):
                problems.append((pv.ref, "filesystem-unreachable",
                                 f"{pv.ref} is Lustre ({driver}), mounted from the node, and no security group or "
                                 f"firewall rule of the stack opens TCP {port}: the mount hangs; open LNet between the "
                                 "nodes and the filesystem"))
        if _lustre_ports(view, driver):
            notes.append(f"{pv.ref}: Lustre traffic leaves from the node (host network), not through the pod's "
                         "NetworkPolicies")
    return problems, notes
