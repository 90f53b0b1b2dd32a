"""Security: a private control plane, encrypted data, IMDSv2, no SSH, isolated team namespaces."""

from __future__ import annotations

import ipaddress
from typing import Any

from pulumi_policy import ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    NAMESPACE,
    STRING_LIST,
    SYSTEM_NAMESPACES_KNOB,
    Knob,
    Reporter,
    dependents,
    get,
    k8s_name,
    k8s_namespace,
    of_type,
    resource_policy,
    stack_policy,
    team_namespaces,
)

BUCKET = "aws:s3/bucket:Bucket"
OPEN = ("0.0.0.0/0", "::/0")


def _endpoint(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/cluster:Cluster":
        return
    vpc = args.props.get("vpcConfig") or {}
    if vpc.get("endpointPublicAccess") is False:
        return
    cidrs = list(vpc.get("publicAccessCidrs") or [])
    open_to_all = not cidrs or any(ipaddress.ip_network(c, strict=False).prefixlen == 0 for c in cidrs)
    if open_to_all:
        report(f"EKS cluster {args.props.get('name', args.name)} must keep its API endpoint private, or public only "
               "to listed CIDRs; it is reachable from the whole internet (0.0.0.0/0).")


eks_endpoint = resource_policy(
    "aws-eks-endpoint-not-open-to-internet", "security",
    "The EKS API endpoint is private, or public only to listed CIDRs, never 0.0.0.0/0.",
    "Set controlPlane.endpointAccess: private, or list the office/VPN CIDRs in publicAccessCidrs.",
    Severity.CRITICAL, _endpoint,
)


def _secrets(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/cluster:Cluster":
        return
    enc = args.props.get("encryptionConfig") or {}
    if "secrets" not in (enc.get("resources") or []) or not get(enc, "provider", "keyArn"):
        report(f"EKS cluster {args.props.get('name', args.name)} must envelope-encrypt Kubernetes secrets with a "
               "KMS key (encryptionConfig for resources: [secrets]).")


eks_secrets = resource_policy(
    "aws-eks-secrets-encrypted-with-kms", "security",
    "Kubernetes secrets of the EKS cluster are envelope-encrypted with a KMS key.",
    "Set controlPlane.secretsEncryption: true.",
    Severity.HIGH, _secrets,
)

HOP_LIMIT = Knob("maxHopLimit", {"type": "integer", "minimum": 1, "maximum": 64}, 2)


def _imds(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:ec2/launchTemplate:LaunchTemplate":
        return
    md = args.props.get("metadataOptions") or {}
    if md.get("httpTokens") != "required":
        report(f"Launch template {args.props.get('name', args.name)} must require IMDSv2 (httpTokens: required); "
               "IMDSv1 lets any SSRF read the node's credentials.")
    hops = md.get("httpPutResponseHopLimit")
    if hops is not None and float(hops) > cfg["maxHopLimit"]:
        report(f"Launch template {args.props.get('name', args.name)} must keep the metadata hop limit at most "
               f"{cfg['maxHopLimit']}; it is {int(float(hops))}.")


imdsv2 = resource_policy(
    "aws-ec2-launch-template-requires-imdsv2", "security",
    "Node launch templates require IMDSv2 with a hop limit of at most 2.",
    "Keep metadataOptions httpTokens: required and httpPutResponseHopLimit: 2 (components/aws/compute.py).",
    Severity.HIGH, _imds, [HOP_LIMIT],
)


def _covers_22(low: Any, high: Any, protocol: Any) -> bool:
    if str(protocol) in ("-1", "all"):
        return True
    if str(protocol) not in ("tcp", "6"):
        return False
    try:
        return float(low) <= 22 <= float(high)
    except (TypeError, ValueError):
        return False


def _ssh(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    p, t = args.props, args.resource_type
    rules: list[tuple[Any, Any, Any, list[str]]] = []
    if t == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        rules.append((p.get("fromPort"), p.get("toPort"), p.get("ipProtocol"),
                      [c for c in (p.get("cidrIpv4"), p.get("cidrIpv6")) if c]))
    elif t == "aws:ec2/securityGroupRule:SecurityGroupRule" and p.get("type") == "ingress":
        rules.append((p.get("fromPort"), p.get("toPort"), p.get("protocol"),
                      list(p.get("cidrBlocks") or []) + list(p.get("ipv6CidrBlocks") or [])))
    elif t == "aws:ec2/securityGroup:SecurityGroup":
        for r in p.get("ingress") or []:
            rules.append((r.get("fromPort"), r.get("toPort"), r.get("protocol"),
                          list(r.get("cidrBlocks") or []) + list(r.get("ipv6CidrBlocks") or [])))
    elif t == "aws:eks/nodeGroup:NodeGroup" and p.get("remoteAccess"):
        if not get(p, "remoteAccess", "sourceSecurityGroupIds"):
            report(f"Node group {p.get('nodeGroupName', args.name)} must not open SSH: remoteAccess without "
                   "sourceSecurityGroupIds admits port 22 from anywhere. Use Session Manager.")
        return
    for low, high, protocol, cidrs in rules:
        if _covers_22(low, high, protocol) and any(c in OPEN for c in cidrs):
            report(f"{args.name} must not allow SSH (port 22) from anywhere ({', '.join(cidrs)}); reach nodes "
                   "through Session Manager.")


no_ssh = resource_policy(
    "aws-no-ssh-from-anywhere", "security",
    "No security group rule or node group opens SSH to the internet.",
    "Remove the rule or remote access; nodes carry AmazonSSMManagedInstanceCore for Session Manager.",
    Severity.CRITICAL, _ssh,
)


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _at_rest(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    p, t = args.props, args.resource_type
    if t == "aws:ec2/launchTemplate:LaunchTemplate":
        for bdm in p.get("blockDeviceMappings") or []:
            if bdm.get("ebs") and not _truthy(get(bdm, "ebs", "encrypted")):
                report(f"Launch template {p.get('name', args.name)} must encrypt its EBS volumes "
                       f"({bdm.get('deviceName')} is not encrypted).")
    elif t == "aws:ebs/volume:Volume" and not _truthy(p.get("encrypted")):
        report(f"EBS volume {args.name} must be encrypted.")
    elif (t == "aws:fsx/lustreFileSystem:LustreFileSystem"
          and str(p.get("deploymentType", "")).startswith("PERSISTENT") and not p.get("kmsKeyId")):
        report(f"FSx for Lustre {args.name} must be encrypted with a customer-managed KMS key (kmsKeyId).")


encryption_at_rest = resource_policy(
    "aws-encryption-at-rest", "security",
    "Volumes and persistent filesystems are encrypted at rest.",
    "Keep encrypted: true on launch template volumes and kmsKeyId on persistent FSx filesystems.",
    Severity.HIGH, _at_rest,
)


def _bucket_encryption(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    sse_type = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    for bucket in of_type(args.resources, BUCKET):
        if bucket.props.get("serverSideEncryptionConfiguration"):
            continue
        configs = dependents(args.resources, bucket, sse_type)
        algorithms = [get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm")
                      for c in configs for r in c.props.get("rules") or []]
        if not any(a in ("aws:kms", "aws:kms:dsse", "AES256") for a in algorithms):
            report(f"Bucket {bucket.name} must have default server-side encryption (SSE-KMS).", bucket.urn)


bucket_encryption = stack_policy(
    "aws-s3-bucket-encrypted", "security",
    "Every bucket has default server-side encryption.",
    "Keep the BucketServerSideEncryptionConfiguration of the storage component.",
    Severity.HIGH, _bucket_encryption,
)


def _public_access(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    pab_type = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
    keys = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    for bucket in of_type(args.resources, BUCKET):
        blocks = dependents(args.resources, bucket, pab_type)
        if not any(all(b.props.get(k) is True for k in keys) for b in blocks):
            report(f"Bucket {bucket.name} must block all public access (a BucketPublicAccessBlock with "
                   f"{', '.join(keys)} all true).", bucket.urn)


bucket_public_access = stack_policy(
    "aws-s3-bucket-public-access-blocked", "security",
    "Every bucket blocks all forms of public access.",
    "Keep the BucketPublicAccessBlock of the storage component with all four settings true.",
    Severity.CRITICAL, _public_access,
)


def _default_deny(args: StackValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    denying: set[str] = set()  # namespaces with a default-deny policy, found in one pass
    for p in of_type(args.resources, "kubernetes:networking.k8s.io/v1:NetworkPolicy"):
        if (get(p.props, "spec", "podSelector") == {}
                and set(get(p.props, "spec", "policyTypes", default=[]) or []) == {"Ingress", "Egress"}
                and not get(p.props, "spec", "ingress") and not get(p.props, "spec", "egress")):
            denying.add(k8s_namespace(p.props))
    for ns in team_namespaces(args.resources, cfg["systemNamespaces"]):
        name = k8s_name(ns.props)
        if name not in denying:
            report(f"Team namespace {name} must have a default-deny NetworkPolicy (empty podSelector, Ingress and "
                   "Egress, no rules) under its allowances.", ns.urn)


default_deny = stack_policy(
    "kubernetes-team-namespaces-default-deny", "security",
    "Every team namespace denies all traffic by default.",
    "Keep the default-deny NetworkPolicy of the Tenancy component.",
    Severity.HIGH, _default_deny, [SYSTEM_NAMESPACES_KNOB],
)

PRIVILEGED_NAMESPACES = Knob("privilegedNamespaces", STRING_LIST,
                             ["kube-system", "gpu-operator", "monitoring"])
WORKLOADS = {"Pod": ("spec",), "Deployment": ("spec", "template", "spec"), "StatefulSet": ("spec", "template", "spec"),
             "DaemonSet": ("spec", "template", "spec"), "ReplicaSet": ("spec", "template", "spec"),
             "Job": ("spec", "template", "spec"), "CronJob": ("spec", "jobTemplate", "spec", "template", "spec")}


def _privileged(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if not args.resource_type.startswith("kubernetes:"):
        return
    allowed = cfg["privilegedNamespaces"]
    kind = str(args.props.get("kind", ""))
    if args.resource_type == NAMESPACE:
        name = k8s_name(args.props)
        level = get(args.props, "metadata", "labels", "pod-security.kubernetes.io/enforce")
        if name not in allowed and level not in ("baseline", "restricted"):
            report(f"Namespace {name} must enforce the baseline or restricted Pod Security level "
                   f"(pod-security.kubernetes.io/enforce); privileged pods belong only in {', '.join(allowed)}.")
        return
    if kind not in WORKLOADS or k8s_namespace(args.props) in allowed:
        return
    pod = get(args.props, *WORKLOADS[kind], default={}) or {}
    for field in ("containers", "initContainers"):
        for c in pod.get(field) or []:
            if get(c, "securityContext", "privileged") is True:
                report(f"{kind} {k8s_name(args.props)} in {k8s_namespace(args.props)} must not run privileged "
                       f"container {c.get('name')}; privileged pods belong only in {', '.join(allowed)}.")


privileged_pods = resource_policy(
    "kubernetes-privileged-pods-only-in-system-namespaces", "security",
    "Privileged pods exist only in system namespaces; other namespaces enforce Pod Security baseline.",
    "Run node agents in kube-system, gpu-operator or monitoring; keep team namespaces at baseline.",
    Severity.HIGH, _privileged, [PRIVILEGED_NAMESPACES],
)

POLICIES = [eks_endpoint, eks_secrets, imdsv2, no_ssh, encryption_at_rest, bucket_encryption, bucket_public_access,
            default_deny, privileged_pods]
