"""Security: a private control plane, encrypted data, IMDSv2, no SSH, isolated team namespaces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, Severity, StackValidationArgs

from gpu_policies.common import (
    CLOUD_SQL,
    GCS_BUCKET,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    GPUDIRECT_REASON,
    NAMESPACE,
    REQUIRED_LIST,
    STRING_LIST,
    Knob,
    Reporter,
    dependents,
    gcp_environment,
    get,
    k8s_name,
    k8s_namespace,
    of_type,
    open_entry,
    open_to_everyone,
    open_to_internet,
    path,
    resource_policy,
    seen,
    stack_policy,
)
from gpu_policies.exposure import public_gcs_members, public_s3_acl

BUCKET = "aws:s3/bucket:Bucket"
MANDATORY = EnforcementLevel.MANDATORY


def _endpoint(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/cluster:Cluster":
        return
    vpc = args.props.get("vpcConfig") or {}
    if vpc.get("endpointPublicAccess") is False:
        return
    cidrs = [str(c) for c in vpc.get("publicAccessCidrs") or []]
    opened = open_to_everyone(cidrs)
    if not cidrs or opened:
        how = "with no publicAccessCidrs (EKS then allows 0.0.0.0/0)" if not cidrs else f"from {'; '.join(opened)}"
        # The entry that opens it alone (or is no CIDR); the whole list when only its pieces together do.
        entry = open_entry(cidrs)
        field = ("vpcConfig", "publicAccessCidrs") + (() if entry is None else (entry,))
        report(f"EKS cluster {args.props.get('name', args.name)} must keep its API endpoint private, or public only "
               f"to listed CIDRs; it is reachable from the whole internet ({how}).",
               field=path(*field), value=seen(args.props, *field))


# Mandatory, as on GKE: an API endpoint open to the internet is refused before anything is created.
eks_endpoint = resource_policy(
    "aws-eks-endpoint-not-open-to-internet", "security",
    "The EKS API endpoint is private, or public only to listed CIDRs, never 0.0.0.0/0 (whole or in pieces).",
    "Set controlPlane.endpointAccess: private, or list the office/VPN CIDRs in publicAccessCidrs.",
    Severity.CRITICAL, _endpoint, enforcement=MANDATORY,
)


def _secrets(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:eks/cluster:Cluster":
        return
    enc = args.props.get("encryptionConfig") or {}
    secrets = "secrets" in (enc.get("resources") or [])
    if not secrets or not get(enc, "provider", "keyArn"):
        field = ("encryptionConfig", "resources") if not secrets else ("encryptionConfig", "provider", "keyArn")
        report(f"EKS cluster {args.props.get('name', args.name)} must envelope-encrypt Kubernetes secrets with a "
               "KMS key (encryptionConfig for resources: [secrets]).", field=path(*field),
               value=seen(args.props, *field))


eks_secrets = resource_policy(
    "aws-eks-secrets-encrypted-with-kms", "security",
    "Kubernetes secrets of the EKS cluster are envelope-encrypted with a KMS key.",
    "Set controlPlane.secretsEncryption: true.",
    Severity.HIGH, _secrets,
)

# 1: a pod outside the node's network namespace gets no IMDSv2 token, so it cannot read the node role; components
# that need AWS use Pod Identity (EKS Best Practices Guide, "Restrict access to the instance profile assigned to the
# worker node").
HOP_LIMIT = Knob("maxHopLimit", {"type": "integer", "minimum": 1, "maximum": 64}, 1)


def _imds(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != "aws:ec2/launchTemplate:LaunchTemplate":
        return
    md = args.props.get("metadataOptions") or {}
    if md.get("httpTokens") != "required":
        report(f"Launch template {args.props.get('name', args.name)} must require IMDSv2 (httpTokens: required); "
               "IMDSv1 lets any SSRF read the node's credentials.", field="metadataOptions.httpTokens",
               value=seen(md, "httpTokens"))
    hops = md.get("httpPutResponseHopLimit")
    if hops is not None and float(hops) > cfg["maxHopLimit"]:
        report(f"Launch template {args.props.get('name', args.name)} must keep the metadata hop limit at most "
               f"{cfg['maxHopLimit']}; it is {int(float(hops))}.", field="metadataOptions.httpPutResponseHopLimit",
               value=hops)


imdsv2 = resource_policy(
    "aws-ec2-launch-template-requires-imdsv2", "security",
    "Node launch templates require IMDSv2 with a hop limit of 1, so pods cannot read the node role.",
    "Keep metadataOptions httpTokens: required and httpPutResponseHopLimit: 1 (components/aws/compute.py).",
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
    # (from, to, protocol, [(path of a CIDR in the inputs, CIDR)]) per ingress rule
    rules: list[tuple[Any, Any, Any, list[tuple[tuple[str | int, ...], str]]]] = []

    def listed(where: tuple[str | int, ...], rule: Any, *keys: str) -> list[tuple[tuple[str | int, ...], str]]:
        return [((*where, key, i), c) for key in keys for i, c in enumerate(rule.get(key) or [])]

    if t == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        rules.append((p.get("fromPort"), p.get("toPort"), p.get("ipProtocol"),
                      [((key,), str(p.get(key))) for key in ("cidrIpv4", "cidrIpv6") if p.get(key)]))
    elif t == "aws:ec2/securityGroupRule:SecurityGroupRule" and p.get("type") == "ingress":
        rules.append((p.get("fromPort"), p.get("toPort"), p.get("protocol"),
                      listed((), p, "cidrBlocks", "ipv6CidrBlocks")))
    elif t == "aws:ec2/securityGroup:SecurityGroup":
        for n, r in enumerate(p.get("ingress") or []):
            rules.append((r.get("fromPort"), r.get("toPort"), r.get("protocol"),
                          listed(("ingress", n), r, "cidrBlocks", "ipv6CidrBlocks")))
    elif t == "aws:eks/nodeGroup:NodeGroup" and p.get("remoteAccess"):
        if not get(p, "remoteAccess", "sourceSecurityGroupIds"):
            report(f"Node group {p.get('nodeGroupName', args.name)} must not open SSH: remoteAccess without "
                   "sourceSecurityGroupIds admits port 22 from anywhere. Use Session Manager.",
                   field="remoteAccess.sourceSecurityGroupIds", value=seen(p, "remoteAccess", "sourceSecurityGroupIds"))
        return
    for low, high, protocol, cidrs in rules:
        why = open_to_internet([c for _, c in cidrs])
        if not _covers_22(low, high, protocol) or why is None:
            continue
        # The entry that opens it alone; the rule's whole list when only its entries together do.
        alone = [(where, c) for where, c in cidrs if open_to_internet([c]) is not None]
        field, value = (path(*alone[0][0]), alone[0][1]) if alone else \
            (path(*cidrs[0][0][:-1]), [c for _, c in cidrs])
        report(f"{args.name} must not allow SSH (port 22) from anywhere ({why}); reach nodes through Session "
               "Manager.", field=field, value=value)


no_ssh = resource_policy(
    "aws-no-ssh-from-anywhere", "security",
    "No security group rule or node group opens SSH to the internet (0.0.0.0/0, ::/0, in pieces, or wide public "
    "ranges).",
    "Remove the rule or remote access; nodes carry AmazonSSMManagedInstanceCore for Session Manager.",
    Severity.CRITICAL, _ssh,
)


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _at_rest(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    p, t = args.props, args.resource_type
    if t == "aws:ec2/launchTemplate:LaunchTemplate":
        for i, bdm in enumerate(p.get("blockDeviceMappings") or []):
            if bdm.get("ebs") and not _truthy(get(bdm, "ebs", "encrypted")):
                report(f"Launch template {p.get('name', args.name)} must encrypt its EBS volumes "
                       f"({bdm.get('deviceName')} is not encrypted).",
                       field=path("blockDeviceMappings", i, "ebs", "encrypted"), value=seen(bdm, "ebs", "encrypted"))
    elif t == "aws:ebs/volume:Volume" and not _truthy(p.get("encrypted")):
        report(f"EBS volume {args.name} must be encrypted.", field="encrypted", value=seen(p, "encrypted"))
    elif (t == "aws:fsx/lustreFileSystem:LustreFileSystem"
          and str(p.get("deploymentType", "")).startswith("PERSISTENT") and not p.get("kmsKeyId")):
        report(f"FSx for Lustre {args.name} must be encrypted with a customer-managed KMS key (kmsKeyId).",
               field="kmsKeyId", value=seen(p, "kmsKeyId"))


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
            message = f"Bucket {bucket.name} must have default server-side encryption (SSE-KMS)."
            if not configs:  # no field: the bucket lacks a whole resource, its encryption configuration
                report(message, bucket.urn)
                continue
            # The configuration to edit: its first rule's algorithm.
            field = ("rules", 0, "applyServerSideEncryptionByDefault", "sseAlgorithm")
            report(message, configs[0].urn, field=path(*field), value=seen(configs[0].props, *field))


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
            message = (f"Bucket {bucket.name} must block all public access (a BucketPublicAccessBlock with "
                       f"{', '.join(keys)} all true).")
            if not blocks:  # no field: the bucket lacks a whole resource, its public access block
                report(message, bucket.urn)
                continue
            # The block to edit, at its first setting that is not true.
            key = next(k for k in keys if blocks[0].props.get(k) is not True)
            report(message, blocks[0].urn, field=key, value=seen(blocks[0].props, key))
    for r in args.resources:
        for field, value in public_s3_acl(r.resource_type, r.props):
            report(f"{r.name} must not publish its bucket through an ACL: {value} grants every AWS user or account "
                   "(keep the bucket private, owner-enforced object ownership; share through IAM).", r.urn,
                   field=path(*field), value=value)


bucket_public_access = stack_policy(
    "aws-s3-bucket-public-access-blocked", "security",
    "Every bucket blocks all forms of public access and no ACL grants everyone.",
    "Keep the BucketPublicAccessBlock of the storage component with all four settings true.",
    Severity.CRITICAL, _public_access,
)



# slurm: slurmd runs privileged (Slinky's worker pods: BPF, NET_ADMIN, SYS_ADMIN) and no team pod runs there (it is
# not a tenant namespace; people reach it only through Slurm's login and sbatch). logging: the log shipper (EKS) reads
# /var/log and the journal of every node. gpu-node-check: each GPU node's check (DCGM diagnostics and health with
# every GPU visible, the fabric devices) before and after the node takes jobs; no team pod runs there.
PRIVILEGED_NAMESPACES = Knob("privilegedNamespaces", STRING_LIST,
                             ["kube-system", "gpu-operator", "monitoring", "gpu-node-check", "slurm", "logging"])
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
        labels = get(args.props, "metadata", "labels", default={}) or {}
        level = labels.get("pod-security.kubernetes.io/enforce")
        # The one exception: a namespace whose GPU networking (GKE GPUDirect sidecars: host paths, NET_ADMIN) cannot
        # run at baseline says so; kubernetes-team-admission-policies checks that an admission policy bounds its
        # containers, and the no-privileged-containers admission policy still covers it.
        gpudirect = labels.get(GPUDIRECT_REASON[0]) == GPUDIRECT_REASON[1]
        # A team namespace's level is the mandatory guard's (kubernetes-team-namespaces-pod-security).
        team = labels.get("gpu-cluster/tenant") == "true"
        if name not in allowed and level not in ("baseline", "restricted") and not gpudirect and not team:
            # The enforce label, also when a missing GPUDirect exception label is what let it through.
            report(f"Namespace {name} must enforce the baseline or restricted Pod Security level "
                   f"(pod-security.kubernetes.io/enforce); privileged pods belong only in {', '.join(allowed)}.",
                   field=path("metadata", "labels", "pod-security.kubernetes.io/enforce"),
                   value=seen(labels, "pod-security.kubernetes.io/enforce"))
        return
    if kind not in WORKLOADS or k8s_namespace(args.props) in allowed:
        return
    pod = get(args.props, *WORKLOADS[kind], default={}) or {}
    for key in ("containers", "initContainers"):
        for i, c in enumerate(pod.get(key) or []):
            if get(c, "securityContext", "privileged") is True:
                report(f"{kind} {k8s_name(args.props)} in {k8s_namespace(args.props)} must not run privileged "
                       f"container {c.get('name')}; privileged pods belong only in {', '.join(allowed)}.",
                       field=path(*WORKLOADS[kind], key, i, "securityContext", "privileged"), value=True)


privileged_pods = resource_policy(
    "kubernetes-privileged-pods-only-in-system-namespaces", "security",
    "Privileged pods exist only in system namespaces; other namespaces enforce Pod Security baseline.",
    "Run node agents in kube-system, gpu-operator or monitoring; keep team namespaces at baseline.",
    Severity.HIGH, _privileged, [PRIVILEGED_NAMESPACES],
)

# --- GCP: every policy below blocks a deployment (the GCP blueprint has no advisory-only security baseline) -------



def _gke_name(args: ResourceValidationArgs) -> str:
    return str(args.props.get("name", args.name))


def _private_nodes(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type == GKE_CLUSTER:
        if get(args.props, "privateClusterConfig", "enablePrivateNodes") is not True:
            report(f"GKE cluster {_gke_name(args)} must give its nodes no public IP "
                   "(privateClusterConfig.enablePrivateNodes: true); nodes reach the internet through Cloud NAT.",
                   field="privateClusterConfig.enablePrivateNodes",
                   value=seen(args.props, "privateClusterConfig", "enablePrivateNodes"))
    elif args.resource_type == GKE_NODE_POOL and get(args.props, "networkConfig", "enablePrivateNodes") is False:
        report(f"GKE node pool {_gke_name(args)} must not give its nodes public IPs "
               "(networkConfig.enablePrivateNodes must not be false).", field="networkConfig.enablePrivateNodes",
               value=False)


gke_private_nodes = resource_policy(
    "gcp-gke-private-nodes", "security",
    "GKE nodes have no public IP: the cluster enables private nodes and no node pool turns them off.",
    "Keep privateClusterConfig.enablePrivateNodes and the pools' networkConfig.enablePrivateNodes true "
    "(components/gcp/gke.py).",
    Severity.CRITICAL, _private_nodes, enforcement=MANDATORY,
)


def _gke_endpoint(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type != GKE_CLUSTER:
        return
    authorized = args.props.get("masterAuthorizedNetworksConfig") or {}
    cidrs = [str(get(b, "cidrBlock", default="")) for b in get(authorized, "cidrBlocks", default=[]) or []]
    opened = open_to_everyone(cidrs)
    blocks = ("masterAuthorizedNetworksConfig", "cidrBlocks")
    if opened:
        # The block that opens it alone (or holds no CIDR); the whole list when only its pieces together do.
        entry = open_entry(cidrs)
        field = blocks if entry is None else (*blocks, entry, "cidrBlock")
        report(f"GKE cluster {_gke_name(args)} must not authorize {'; '.join(opened)} to reach its control plane; "
               "list the office, VPN or CI CIDRs instead.", field=path(*field), value=seen(args.props, *field))
    if get(args.props, "privateClusterConfig", "enablePrivateEndpoint") is True:
        return
    if not cidrs:
        report(f"GKE cluster {_gke_name(args)} has a public control-plane endpoint, so it must restrict it to "
               "master authorized networks (masterAuthorizedNetworksConfig.cidrBlocks).", field=path(*blocks),
               value=seen(args.props, *blocks))
    if authorized.get("gcpPublicCidrsAccessEnabled") is True:
        report(f"GKE cluster {_gke_name(args)} must not open its public endpoint to every Google Cloud public IP "
               "(masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled: false).",
               field="masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled", value=True)


gke_endpoint = resource_policy(
    "gcp-gke-endpoint-not-open-to-internet", "security",
    "The GKE control plane is private, or public only to master authorized networks, never 0.0.0.0/0.",
    "Set cluster.endpoint: private, or authorized-networks with the office, VPN or CI CIDRs in "
    "cluster.authorizedNetworks.",
    Severity.CRITICAL, _gke_endpoint, enforcement=MANDATORY,
)

CMEK_PROTECTED_ENVS = Knob("protectedEnvironments", REQUIRED_LIST, ["prod"])


def _cmek(production: bool) -> Callable[[ResourceValidationArgs, Reporter, dict[str, Any]], None]:
    """Customer-managed keys on GKE secrets, bucket objects, node boot disks and Cloud SQL instances, in production
    environments (``production``) or in every other one."""

    def check(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
        t, p = args.resource_type, args.props
        if t not in (GKE_CLUSTER, GKE_NODE_POOL, GCS_BUCKET, CLOUD_SQL):
            return
        env = gcp_environment(t, p, args.provider.props if args.provider else None)
        if (env in cfg["protectedEnvironments"]) is not production:
            return
        if t == GKE_CLUSTER:
            enc = p.get("databaseEncryption") or {}
            if enc.get("state") != "ENCRYPTED" or not enc.get("keyName"):
                key = "state" if enc.get("state") != "ENCRYPTED" else "keyName"
                report(f"GKE cluster {_gke_name(args)} in {env} must envelope-encrypt Kubernetes secrets with a "
                       "Cloud KMS key (databaseEncryption state ENCRYPTED with a keyName).",
                       field=path("databaseEncryption", key), value=seen(enc, key))
        elif t == GKE_NODE_POOL:
            if not get(p, "nodeConfig", "bootDiskKmsKey"):
                report(f"GKE node pool {_gke_name(args)} in {env} must encrypt its boot disks with a Cloud KMS key "
                       "(nodeConfig.bootDiskKmsKey).", field="nodeConfig.bootDiskKmsKey",
                       value=seen(p, "nodeConfig", "bootDiskKmsKey"))
        elif t == CLOUD_SQL:
            if not p.get("encryptionKeyName"):
                report(f"Cloud SQL instance {p.get('name', args.name)} in {env} must encrypt its disks and backups "
                       "with a Cloud KMS key (encryptionKeyName).", field="encryptionKeyName",
                       value=seen(p, "encryptionKeyName"))
        elif not get(p, "encryption", "defaultKmsKeyName"):
            report(f"Bucket {p.get('name', args.name)} in {env} must encrypt new objects with a Cloud KMS key "
                   "(encryption.defaultKmsKeyName).", field="encryption.defaultKmsKeyName",
                   value=seen(p, "encryption", "defaultKmsKeyName"))

    return check


CMEK_REMEDIATION = ("Keep the stack's GcpKeys (components/gcp/security.py): the cluster's databaseEncryption, the "
                    "bucket's encryption.defaultKmsKeyName, the pools' nodeConfig.bootDiskKmsKey and the Cloud SQL "
                    "instance's encryptionKeyName use its keys.")
gcp_cmek_production = resource_policy(
    "gcp-cmek-in-production", "security",
    "In production environments GKE secrets, bucket objects, node boot disks and Cloud SQL instances are encrypted "
    "with Cloud KMS keys.",
    CMEK_REMEDIATION, Severity.HIGH, _cmek(True), [CMEK_PROTECTED_ENVS], enforcement=MANDATORY,
)
gcp_cmek_elsewhere = resource_policy(
    "gcp-cmek-outside-production", "security",
    "Outside production GKE secrets, bucket objects, node boot disks and Cloud SQL instances are encrypted with "
    "Cloud KMS keys.",
    CMEK_REMEDIATION, Severity.MEDIUM, _cmek(False), [CMEK_PROTECTED_ENVS],
)


def _workload_identity(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type == GKE_CLUSTER:
        if not get(args.props, "workloadIdentityConfig", "workloadPool"):
            report(f"GKE cluster {_gke_name(args)} must enable Workload Identity "
                   "(workloadIdentityConfig.workloadPool: <project>.svc.id.goog), so pods never use the node's "
                   "service account.", field="workloadIdentityConfig.workloadPool",
                   value=seen(args.props, "workloadIdentityConfig", "workloadPool"))
    elif (args.resource_type == GKE_NODE_POOL
          and get(args.props, "nodeConfig", "workloadMetadataConfig", "mode") != "GKE_METADATA"):
        report(f"GKE node pool {_gke_name(args)} must serve pods the GKE metadata server "
               "(nodeConfig.workloadMetadataConfig.mode: GKE_METADATA), which hides the node's credentials.",
               field="nodeConfig.workloadMetadataConfig.mode",
               value=seen(args.props, "nodeConfig", "workloadMetadataConfig", "mode"))


gke_workload_identity = resource_policy(
    "gcp-gke-workload-identity", "security",
    "The GKE cluster uses Workload Identity and every node pool runs the GKE metadata server.",
    "Keep workloadIdentityConfig on the cluster and workloadMetadataConfig mode GKE_METADATA on the pools "
    "(components/gcp/gke.py).",
    Severity.HIGH, _workload_identity, enforcement=MANDATORY,
)


def _shielded(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    if args.resource_type == GKE_CLUSTER:
        if args.props.get("enableShieldedNodes") is False:
            report(f"GKE cluster {_gke_name(args)} must use Shielded GKE Nodes (enableShieldedNodes must not be "
                   "false), so a node proves its identity before it joins.", field="enableShieldedNodes", value=False)
    elif (args.resource_type == GKE_NODE_POOL
          and get(args.props, "nodeConfig", "shieldedInstanceConfig", "enableIntegrityMonitoring") is False):
        report(f"GKE node pool {_gke_name(args)} must keep integrity monitoring on "
               "(nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring must not be false).",
               field="nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", value=False)


gke_shielded = resource_policy(
    "gcp-gke-shielded-nodes", "security",
    "GKE nodes are Shielded GKE Nodes with integrity monitoring.",
    "Keep enableShieldedNodes on the cluster and shieldedInstanceConfig on the pools (components/gcp/gke.py).",
    Severity.HIGH, _shielded, enforcement=MANDATORY,
)


def _gcs_public(args: ResourceValidationArgs, report: Reporter, cfg: dict[str, Any]) -> None:
    for field, value in public_gcs_members(args.resource_type, args.props):
        report(f"{args.name} must not grant {args.props.get('role', 'a role')} on a bucket to allUsers or "
               "allAuthenticatedUsers: that publishes its objects to the internet (grant the team's service "
               "accounts or groups instead).", field=path(*field), value=value)
    if args.resource_type != GCS_BUCKET:
        return
    name = args.props.get("name", args.name)
    if args.props.get("publicAccessPrevention") != "enforced":
        report(f"Bucket {name} must prevent public access (publicAccessPrevention: enforced), so no IAM grant to "
               "allUsers or allAuthenticatedUsers can publish checkpoints.", field="publicAccessPrevention",
               value=seen(args.props, "publicAccessPrevention"))
    if args.props.get("uniformBucketLevelAccess") is not True:
        report(f"Bucket {name} must use uniform bucket-level access (uniformBucketLevelAccess: true), so object "
               "ACLs cannot bypass IAM.", field="uniformBucketLevelAccess",
               value=seen(args.props, "uniformBucketLevelAccess"))


gcs_public_access = resource_policy(
    "gcp-storage-bucket-public-access-prevented", "security",
    "Every Cloud Storage bucket enforces public access prevention and uniform bucket-level access, and no IAM grant "
    "names allUsers or allAuthenticatedUsers.",
    "Keep publicAccessPrevention: enforced and uniformBucketLevelAccess: true on the bucket "
    "(components/gcp/storage.py).",
    Severity.CRITICAL, _gcs_public, enforcement=MANDATORY,
)

POLICIES = [eks_endpoint, eks_secrets, imdsv2, no_ssh, encryption_at_rest, bucket_encryption, bucket_public_access,
            privileged_pods,
            gke_private_nodes, gke_endpoint, gcp_cmek_production, gcp_cmek_elsewhere,
            gke_workload_identity, gke_shielded, gcs_public_access]
