"""AWS in ``blueprint admit``: EKS managed node groups as the scheduler sees them (the catalog's vCPUs, memory, GPUs
and EFA interfaces; the Cluster Autoscaler's reach; a Capacity Block's window; hugepages the launch template's user
data reserves), a team's bucket writes through EKS Pod Identity, the filesystem's security groups, and the CSI drivers
of EKS add-ons and Helm charts."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from fractions import Fraction
from typing import Any

from blueprint.admit.cloud import Problem
from blueprint.admit.cluster import ClusterView, as_list, as_mapping, as_str_map
from blueprint.admit.nodes import (
    GPU,
    NODE_GROUP_LABEL,
    GpuSharing,
    NodeGroup,
    add_hugepages,
    cpu_memory,
    int_value,
    taints_of,
)
from blueprint.admit.resources import Amounts
from blueprint.admit.workloads import PodSet
from blueprint.clouds.aws.pricing import launch_template
from blueprint.graph.model import SECRET, UNKNOWN, GraphResource
from components.aws.names import AUTOSCALE_TAG, AUTOSCALER_RELEASE
from components.catalog.instances import load_aws_catalog

CLUSTER_TYPE = "aws:eks/cluster:Cluster"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ASG_TAG = "aws:autoscaling/tag:Tag"
EFA = "vpc.amazonaws.com/efa"
PER_NODE_LABEL_PREFIXES = ("topology.k8s.aws/",)
# EKS adds no quota on the system-*-critical classes, nor PriorityClasses or RuntimeClasses of its own that admit
# knows of (a class an EKS add-on creates would be in the graph only as the add-on).
LIMITS_CRITICAL_PRIORITY = False
RUNTIME_CLASS_NOTES: dict[str, str] = {}


def provided_priority_classes(view: ClusterView) -> dict[str, str]:
    """None that admit knows of on EKS."""
    return {}


def provided_runtime_classes(view: ClusterView) -> dict[str, str]:
    """None that admit knows of on EKS."""
    return {}
CREDENTIALS_AGENT = ("169.254.170.23", "the EKS Pod Identity agent")  # EKS user guide, "EKS Pod Identity"
IDENTITY_DRIVERS: frozenset[str] = frozenset()
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE = "aws:iam/role:Role"
POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
S3_WRITE_MANAGED = ("arn:aws:iam::aws:policy/AmazonS3FullAccess",)
SG_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
SG_TYPE = "aws:ec2/securityGroup:SecurityGroup"
FSX_DRIVER = "fsx.csi.aws.com"
LUSTRE_PORTS = (988, 1018)  # FSx for Lustre: LNet TCP 988 and 1018-1023 (FSx user guide, "File system access control")
EKS_ADDON = "aws:eks/addon:Addon"
# CSI driver names by the EKS add-on or Helm chart that installs them (each driver's docs).
ADDON_DRIVERS = {"aws-ebs-csi-driver": "ebs.csi.aws.com", "aws-efs-csi-driver": "efs.csi.aws.com",
                 "aws-fsx-csi-driver": "fsx.csi.aws.com", "aws-mountpoint-s3-csi-driver": "s3.csi.aws.com"}
_NR_HUGEPAGES = re.compile(r"vm\.nr_hugepages=(\d+)")


def kubernetes_version(view: ClusterView) -> str | None:
    """EKS's ``version`` (its minor)."""
    for res in view.graph.of_type(CLUSTER_TYPE):
        version = res.inputs.get("version")
        if isinstance(version, str) and version.count(".") >= 1 and version not in (UNKNOWN, SECRET):
            return ".".join(version.split(".")[:2])
    return None


def _efa_plugin_types(view: ClusterView) -> tuple[bool, tuple[str, ...] | None]:
    """Whether the EFA device plugin runs, and on which instance types (None: on every node it tolerates)."""
    release = view.release(("efa-k8s-device-plugin",))
    if release is None:
        return False, None
    supported = as_mapping(release.values.get("supportedInstanceLabels"))
    values = [str(v) for v in as_list(supported.get("values"))]
    return True, tuple(values) if values else None


def _boot_hugepages(template: dict[str, Any]) -> int:
    """The hugepages a launch template's user data reserves (the program's sysctl before kubelet starts)."""
    raw = template.get("userData")
    if not isinstance(raw, str) or not raw:
        return 0
    try:
        text = base64.b64decode(raw).decode("utf-8", "replace")
    except (ValueError, TypeError):
        return 0
    found = _NR_HUGEPAGES.findall(text)
    return int(found[-1]) if found else 0


def _autoscaled(view: ClusterView, group: GraphResource) -> bool:
    """Whether the Cluster Autoscaler manages the group: its Auto Scaling group carries the opt-in tag (a tag beside
    the node group under the same component) and the autoscaler's release runs."""
    if group.parent is None or view.release((AUTOSCALER_RELEASE,)) is None:
        return False
    return any(as_mapping(s.inputs.get("tag")).get("key") == AUTOSCALE_TAG
               and as_mapping(s.inputs.get("tag")).get("value") == "true"
               for s in view.graph.children(group.parent) if s.type == ASG_TAG)


def node_groups(view: ClusterView, sharing: GpuSharing) -> list[NodeGroup]:
    """EKS managed node groups: the catalog's figures of their instance types (a mixed group fits its smallest),
    EFA devices where the device plugin runs on the type, and the nodes each group reaches: maxSize when the Cluster
    Autoscaler manages it (its Auto Scaling group's opt-in tag and the autoscaler's release, both in the graph) or a
    Capacity Block schedules it, else its desiredSize, since nothing grows it (a reserved ODCR group the operator
    sizes, a fixed group)."""
    catalog = load_aws_catalog()
    efa_plugin, efa_types = _efa_plugin_types(view)
    groups = []
    for res in view.resources_of(EKS_NODE_GROUP):
        inputs = res.inputs
        listed = [str(t) for t in as_list(inputs.get("instanceTypes"))]
        types = listed or [str(launch_template(view.graph, res).get("instanceType") or "")]
        known = [catalog[t] for t in types if t in catalog]
        labels = as_str_map(inputs.get("labels"))
        name = labels.get(NODE_GROUP_LABEL) or str(inputs.get("nodeGroupName") or res.name)
        notes = []
        allocatable: dict[str, Fraction] = {}
        if known:
            # Several types (a mixed CPU group): a pod must fit the smallest, since any of them may come up.
            per_type = [cpu_memory(f.vcpu.value, f.memory_gib.value) for f in known]
            for key in ("cpu", "memory"):
                if all(key in p for p in per_type):
                    allocatable[key] = min(p[key] for p in per_type)
            gpus = min(f.gpu_count for f in known)
            if gpus:
                allocatable[GPU] = Fraction(gpus * sharing.replicas)
            efa = min(f.efa_count for f in known)
            wired = labels.get("gpu-cluster/efa-interfaces", "")
            if wired.isdigit():  # the group wires fewer than the type has (efaInterfaces)
                efa = min(efa, int(wired))
            if efa and efa_plugin and (efa_types is None or all(t in efa_types for t in types)):
                allocatable[EFA] = Fraction(efa)
            elif efa and not efa_plugin:
                notes.append(f"{types[0]} has {efa} EFA interfaces but no EFA device plugin release runs: pods cannot "
                             f"request {EFA}")
        else:
            notes.append(f"instance type {', '.join(types) or '(none)'} is not in the AWS catalog: per-node capacity "
                         "unknown")
        add_hugepages(_boot_hugepages(launch_template(view.graph, res)), allocatable)
        arch = "arm64" if known and known[0].arch == "arm64" else "amd64"
        labels = {**labels, "node.kubernetes.io/instance-type": types[0], "kubernetes.io/arch": arch,
                  "kubernetes.io/os": "linux", "eks.amazonaws.com/nodegroup": str(inputs.get("nodeGroupName") or name),
                  "eks.amazonaws.com/capacityType": str(inputs.get("capacityType") or "ON_DEMAND")}
        scaling = as_mapping(inputs.get("scalingConfig"))
        low, desired = int_value(scaling.get("minSize")) or 0, int_value(scaling.get("desiredSize")) or 0
        high = int_value(scaling.get("maxSize")) or 0
        window = as_str_map(inputs.get("tags")).get("capacity-block-window")
        reach = high
        if window:
            notes.append(f"its nodes exist only inside the Capacity Block window {window.replace('/', ' to ')}")
        elif _autoscaled(view, res):
            if desired < high:
                notes.append(f"the Cluster Autoscaler grows it from {desired} to at most {high} nodes for pending pods "
                             f"(min {low}): counted at {high}")
        elif desired < high:
            reach = desired
            notes.append(f"nothing grows it past its desiredSize {desired} (not autoscaled; maxSize {high}): counted "
                         f"at {desired}")
        groups.append(NodeGroup(name=name, ref=f"NodeGroup/{name}", instance_type=types[0], labels=labels,
                                taints=taints_of(inputs.get("taints")), max_nodes=reach,
                                allocatable=allocatable, sharing=sharing if GPU in allocatable else GpuSharing(),
                                notes=notes, max_size=high, vcpus=_vcpus(catalog.get(types[0])),
                                spec_key=f"aws.nodeGroups[{name}]"))
    return groups


def _vcpus(facts: Any) -> int | None:
    """The catalog's vCPUs of an instance type, when known."""
    vcpu = facts.vcpu.value if facts is not None else None
    return int(vcpu) if vcpu is not None else None


def _statements(document: Any) -> list[dict[str, Any]]:
    doc = document
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return []
    statements = as_mapping(doc).get("Statement")
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else ([str(value)] if value is not None else [])


def _allows(statements: list[dict[str, Any]], action: str, resource_test: Any) -> bool:
    for st in statements:
        if st.get("Effect") != "Allow":
            continue
        if not any(fnmatchcase(action.lower(), a.lower()) for a in _strings(st.get("Action"))):
            continue
        if any(resource_test(r) for r in _strings(st.get("Resource"))):
            return True
    return False


def _s3_prefix_test(namespace: str) -> Any:
    def test(resource: str) -> bool:
        if resource == "*":
            return True
        if not resource.startswith("arn:aws:s3:::"):
            return False
        bucket_and_key = resource.removeprefix("arn:aws:s3:::")
        _, slash, key = bucket_and_key.partition("/")
        return bool(slash) and fnmatchcase(f"{namespace}/checkpoint-0", key)
    return test


def bucket_access(view: ClusterView, namespace: str, account: str) -> tuple[list[Problem], list[str]]:
    """A Pod Identity association for the account whose role may put objects under ``<bucket>/<namespace>/`` (and
    use the bucket's KMS key)."""
    ref = f"ServiceAccount/{namespace}/{account}"
    association = next((a for a in view.resources_of(POD_IDENTITY) if a.inputs.get("namespace") == namespace
                        and a.inputs.get("serviceAccount") == account), None)
    if association is None:
        return [(ref, "bucket-access", f"no EKS Pod Identity association for service account {namespace}/{account}: "
                 "its pods get no AWS credentials and cannot write checkpoints to the bucket; the program creates one "
                 "per team (is the namespace a team of the stack?)")], []
    role_arn = str(association.inputs.get("roleArn") or "")
    role_name = role_arn.rpartition("/")[2]
    statements: list[dict[str, Any]] = []
    for policy in view.resources_of(ROLE_POLICY):
        if str(policy.inputs.get("role")) in (role_name, role_arn):
            statements += _statements(policy.inputs.get("policy"))
    for role in view.resources_of(ROLE):
        if role.inputs.get("name") == role_name:
            for inline in as_list(role.inputs.get("inlinePolicies")):
                statements += _statements(as_mapping(inline).get("policy"))
    attached = [str(a.inputs.get("policyArn")) for a in view.resources_of(POLICY_ATTACHMENT)
                if str(a.inputs.get("role")) in (role_name, role_arn)]
    if not _allows(statements, "s3:PutObject", _s3_prefix_test(namespace)):
        if any(p in S3_WRITE_MANAGED for p in attached):
            return [], [f"role {role_name} writes S3 through a managed policy ({', '.join(attached)})"]
        return [(f"Role/{role_name}", "bucket-access",
                 f"role {role_name} (Pod Identity for {namespace}/{account}) has no policy allowing s3:PutObject on "
                 f"<bucket>/{namespace}/*: checkpoints cannot be written; grant it on the team's prefix")], []
    kms = any("aws:kms" in json.dumps(r.inputs) for r in view.resources_of(BUCKET_ENCRYPTION))
    if kms and not _allows(statements, "kms:GenerateDataKey", lambda r: r.startswith(("arn:aws:kms:", "*"))):
        return [(f"Role/{role_name}", "bucket-access",
                 f"role {role_name} may put objects but not kms:GenerateDataKey, and the bucket is encrypted with "
                 "SSE-KMS: every upload is refused; grant kms:GenerateDataKey on the bucket's key")], []
    return [], [f"{namespace}/{account} writes s3://<bucket>/{namespace}/ as role {role_name}"]


def node_network_opens(view: ClusterView, port: int) -> bool:
    """An ingress rule of the filesystem's security group (its ``securityGroupIds`` in the graph) that opens the port
    (from the nodes' group, another group or a CIDR); for a filesystem the stack does not create, an ingress rule that
    names the port (an all-traffic rule elsewhere, such as EFA's self rule, proves nothing)."""
    fs_groups = {str(g) for fs in view.resources_of(FSX) for g in as_list(fs.inputs.get("securityGroupIds"))}
    rules = [r.inputs for r in view.resources_of(SG_INGRESS)]
    for group in view.resources_of(SG_TYPE):
        rules += [{**as_mapping(raw), "securityGroupId": "(inline)"} for raw in as_list(group.inputs.get("ingress"))]
    for rule in rules:
        if fs_groups and str(rule.get("securityGroupId")) in fs_groups and _rule_opens(rule, port):
            return True
        if not fs_groups and _rule_opens(rule, port, explicit=True):
            return True
    return False


def _rule_opens(inputs: dict[str, Any], port: int, explicit: bool = False) -> bool:
    protocol = str(inputs.get("ipProtocol") or inputs.get("protocol") or "").lower()
    if protocol in ("-1", "all"):
        return not explicit
    low, high = inputs.get("fromPort"), inputs.get("toPort")
    return protocol in ("tcp", "6") and isinstance(low, int) and isinstance(high, int) and low <= port <= high


def lustre_ports(view: ClusterView, driver: str) -> tuple[int, ...]:
    """FSx for Lustre's LNet ports for its CSI driver."""
    return LUSTRE_PORTS if driver == FSX_DRIVER else ()


def csi_drivers(view: ClusterView) -> tuple[set[str], set[str]]:
    """The drivers of the EKS add-ons and of Helm releases of their charts."""
    installed: set[str] = set()
    for addon in view.resources_of(EKS_ADDON):
        driver = ADDON_DRIVERS.get(str(addon.inputs.get("addonName")))
        if driver:
            installed.add(driver)
    for release in view.releases:
        for chart, driver in ADDON_DRIVERS.items():
            if release.mentions((chart,)):
                installed.add(driver)
    return installed, set(ADDON_DRIVERS.values())


def volume_problems(pod_set: PodSet, driver: str, what: str, annotations: Mapping[str, str]) -> list[Problem]:
    """Nothing: no AWS volume needs the pod to carry anything."""
    return []


def pod_network_problems(view: ClusterView, pod_set: PodSet) -> list[Problem]:
    """Nothing: EKS pods use the VPC CNI's one network (EFA devices come through the device plugin)."""
    return []


def injected_requests(pod: dict[str, Any]) -> tuple[str, Amounts]:
    """Nothing is injected into pods after admission on EKS."""
    return "", {}


def gateway_proxy_source(view: ClusterView) -> str | None:
    """EKS's gateway (agentgateway) proxies are pods of the cluster: no address of the cloud's."""
    return None
