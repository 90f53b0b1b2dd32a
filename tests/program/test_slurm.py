"""Slurm (Slinky) beside Kueue: the spec's rules, the objects against their CRDs, the split of node groups and
quotas between the two schedulers, the accounting database, and the policies that guard them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from blueprint.clouds.aws.examples import SLURM_MUTATIONS
from blueprint.policy.runner import run_policies
from components.spec import SpecError, parse_spec
from tests.conftest import offline_run, raw_stack_config
from tests.k8s_checks import is_builtin, validate_builtin, validate_crd_object

STACK = "prod-aws-slurm"
FILE = "stacks/Pulumi.prod-aws-slurm.yaml"
SLINKY = "kubernetes:slinky.slurm.net/v1beta1:"
G = "gpu-cluster:spec"


def spec() -> dict[str, Any]:
    return copy.deepcopy(raw_stack_config(STACK)["gpu-cluster:spec"])


def refused(value: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(value, FILE, provider_region="us-east-1")
    return str(info.value).splitlines()


def manifest(r: Any) -> dict[str, Any]:
    """A graph resource as the Kubernetes object it creates."""
    api, kind = r.type.removeprefix("kubernetes:").rsplit(":", 1)
    api = api.removeprefix("core/")
    return {"apiVersion": api, "kind": kind, **r.inputs}


@pytest.mark.parametrize("stack_name", [STACK, "dev-gcp-slurm"])
def test_the_stack_loads_passes_the_pack_and_its_slinky_objects_fit_their_crds(stack_name: str) -> None:
    run = offline_run(stack_name)
    report = run_policies(run.graph)
    assert report.passed and not report.violations, [(v.policy, v.message) for v in report.violations]
    kinds = sorted(r.type.removeprefix(SLINKY) for r in run.graph.resources if r.type.startswith(SLINKY))
    # a NodeSet per Slurm node group: the GPU group(s) and the CPU partition's group
    assert kinds == ["Accounting", "Controller", "LoginSet", "NodeSet", "NodeSet", "RestApi"]
    for r in run.graph.resources:
        if r.type.startswith(SLINKY):
            validate_crd_object(manifest(r))
    job = next(r for r in run.graph.resources if r.type == "kubernetes:batch/v1:Job" and "slurm-accounts" in r.name)
    m = manifest(job)
    assert is_builtin(m)
    validate_builtin(m, "1.35" if stack_name == STACK else "1.33")


def test_slurm_owns_its_node_group_and_kueue_has_no_flavor_there() -> None:
    graph = offline_run(STACK).graph
    flavors = [r.inputs["metadata"]["name"] for r in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")]
    assert "h100" not in flavors
    for cq in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"):
        groups = cq.inputs["spec"].get("resourceGroups", [])
        assert not any(f["name"] == "h100" for g in groups for f in g["flavors"])
    (ns,) = [n for n in graph.of_type(SLINKY + "NodeSet") if n.inputs["metadata"]["name"] == "h100"]
    spec_ = ns.inputs["spec"]
    assert spec_["scalingMode"] == "DaemonSet"
    assert spec_["template"]["spec"]["nodeSelector"] == {"gpu-cluster/node-group": "h100"}
    limits = spec_["slurmd"]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 8 and limits["vpc.amazonaws.com/efa"] == 32  # every GPU and EFA of a p5
    assert spec_["extraConf"].startswith("Gres=gpu:8 ")
    # The EFA device plugin runs although no Kueue pool has EFA: Slurm's NodeSet asks for the interfaces.
    assert any(r.inputs.get("name") == "aws-efa-k8s-device-plugin" for r in
               graph.of_type("kubernetes:helm.sh/v3:Release"))


def test_a_teams_quota_on_slurm_is_its_accounts_gpu_limit_fair_share_and_budget() -> None:
    graph = offline_run(STACK).graph
    (cm,) = [r for r in graph.of_type("kubernetes:core/v1:ConfigMap") if r.name.endswith(
        r.inputs["metadata"]["name"]) and r.inputs["metadata"]["name"].startswith("slurm-accounts")]
    text = cm.inputs["data"]["accounts.cfg"]
    assert "Account - 'research':Description='team research':Organization='cc-4200':Fairshare=64:" \
           "GrpTRES=gres/gpu=64:GrpTRESMins=gres/gpu=" in text
    # 115,000 USD a month at the p5 Capacity Block's GPU-hour (41.528 / 8): about 22,150 GPU-hours.
    minutes = int(text.split("'research'")[1].split("GrpTRESMins=gres/gpu=")[1].split("\n")[0])
    assert 22_000 * 60 < minutes < 22_300 * 60
    assert "Parent - 'research'\nUser - 'ana':DefaultAccount='research':Fairshare=1" in text
    (ctl,) = graph.of_type(SLINKY + "Controller")
    conf = ctl.inputs["spec"]["extraConf"]
    for line in ("GresTypes=gpu", "AccountingStorageTRES=gres/gpu",
                 "AccountingStorageEnforce=associations,limits,qos,safe", "PriorityUsageResetPeriod=MONTHLY",
                 "PartitionName=debug Nodes=h100 Default=NO MaxTime=0-02:00:00 DefaultTime=0-00:30:00 MaxNodes=2 "
                 "AllowAccounts=applied,pretraining,research,root DefMemPerGPU=255383 DefCpuPerGPU=22 "
                 "TRESBillingWeights=GRES/gpu=1.0 State=UP"):
        assert line in conf.splitlines()


def test_accounting_is_a_private_encrypted_protected_database() -> None:
    graph = offline_run(STACK).graph
    (db,) = graph.of_type("aws:rds/instance:Instance")
    i = db.inputs
    assert (i["engine"], i["engineVersion"], i["storageEncrypted"], i["publiclyAccessible"]) == ("mysql", "8.4", True,
                                                                                                 False)
    assert i["deletionProtection"] is True and db.protect and i["multiAz"] is True and i["backupRetentionPeriod"] == 14
    (params,) = graph.of_type("aws:rds/parameterGroup:ParameterGroup")
    assert {"name": "innodb_lock_wait_timeout", "value": "900", "applyMethod": "immediate"} in params.inputs[
        "parameters"]
    (rule,) = [r for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
               if r.name == "slurm-accounting-mysql-from-nodes"]
    assert rule.inputs["fromPort"] == rule.inputs["toPort"] == 3306 and "cidrIpv4" not in rule.inputs
    (acct,) = graph.of_type(SLINKY + "Accounting")
    assert acct.inputs["spec"]["storageConfig"]["passwordKeyRef"] == {"name": "slurm-db", "key": "password"}


@pytest.mark.parametrize("mutation", sorted(SLURM_MUTATIONS))
def test_each_slurm_mutation_is_refused_by_its_policy(mutation: str) -> None:
    stack_name, mutate, policy = SLURM_MUTATIONS[mutation]
    report = run_policies(mutate(offline_run(stack_name).graph))
    assert policy in {v.policy for v in report.violations}, [(v.policy, v.message) for v in report.violations]


RULES = [
    (lambda s: s["scheduler"]["slurm"]["nodeGroups"].append("a100"),
     f"{G}.scheduler.slurm.nodeGroups[2]: 'a100' is not one of aws.nodeGroups (system, h100, prep) "
     "[rule: slurm-node-group]"),
    (lambda s: s["scheduler"]["slurm"]["nodeGroups"].append("system"),
     f"{G}.scheduler.slurm.nodeGroups: every node group without GPUs is Slurm's or carries team CPU quota (prep, "
     "system): keep one for system pods (slurmctld, slurmdbd, the login pods, Kueue, Prometheus), so jobs cannot "
     "starve the platform [rule: system-node-group]"),
    (lambda s: s["teams"][0].update(cpuQuotas=[{"nodeGroup": "prep", "cpu": 16, "memoryGiB": 64}]),
     f"{G}.scheduler.slurm.nodeGroups[1]: 'prep' carries teams' CPU quota (teams[].cpuQuotas: Kueue's CPU flavor), "
     "so it cannot also be Slurm's: a node group belongs to one scheduler; give Slurm its own CPU group "
     "[rule: slurm-node-group]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][1]["nodeGroups"].append("system"),
     f"{G}.scheduler.slurm.partitions[debug].nodeGroups[1]: 'system' is not in scheduler.slurm.nodeGroups (h100, "
     "prep): a partition holds only nodes Slurm runs on [rule: slurm-partition-groups]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][1]["nodeGroups"].append("prep"),
     f"{G}.scheduler.slurm.partitions[debug].nodeGroups: partition 'debug' mixes CPU groups (prep) and GPU groups "
     "(h100): its memory default is per GPU or per CPU (slurm.conf(5): DefMemPerGPU and DefMemPerCPU are mutually "
     "exclusive); make a CPU-only partition for the CPU groups [rule: slurm-partition-groups]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][2].pop("teams"),
     f"{G}.scheduler.slurm.partitions[prep].teams: no team has a quota on prep, so no account may submit to "
     "partition 'prep': list the teams whose accounts may submit (a CPU-only partition has no GPU quota to infer "
     "them from) [rule: slurm-partition-teams]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][0].update(teams=["research", "ops"]),
     f"{G}.scheduler.slurm.partitions[train].teams[1]: 'ops' is not a team of the stack (research, pretraining, "
     "applied) [rule: slurm-partition-teams]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][1].update(maxTimeHours=1, defaultTimeMinutes=90),
     f"{G}.scheduler.slurm.partitions[debug].defaultTimeMinutes: 90 minutes is longer than maxTimeHours (1 h = 60 "
     "minutes): a job that asks for no time limit would never run [rule: slurm-partition-time]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][1].update(maxNodesPerJob=32),
     f"{G}.scheduler.slurm.partitions[debug].maxNodesPerJob: 32 nodes per job, and partition 'debug' has at most 16 "
     "[rule: slurm-partition-limits]"),
    (lambda s: s["scheduler"]["slurm"]["partitions"][1].update(default=True),
     f"{G}.scheduler.slurm.partitions: 2 partitions say default: at most one [rule: slurm-partition-default]"),
    (lambda s: s["scheduler"]["slurm"]["users"].update(ops=["zed"]),
     f"{G}.scheduler.slurm.users: 'ops' is not a team of the stack (research, pretraining, applied) "
     "[rule: slurm-users-team]"),
    (lambda s: s["scheduler"]["slurm"]["login"].update(sourceCidrs=["203.0.113.0/24"]),
     f"{G}.scheduler.slurm.login.sourceCidrs[0]: '203.0.113.0/24' is not a private network (RFC 1918 or "
     "100.64.0.0/10): the login load balancer is internal, reached from your VPN or peered networks "
     "[rule: slurm-login-private]"),
    (lambda s: s["scheduler"]["slurm"]["accounting"].update(enabled=False),
     f"{G}.scheduler.slurm.accounting.enabled: a prod stack keeps Slurm accounting: job history, accounts, fair share "
     "and GPU limits live in it [rule: slurm-accounting-prod]"),
    (lambda s: s["scheduler"]["slurm"]["accounting"]["database"].update(tier="db-custom-4-16384"),
     f"{G}.scheduler.slurm.accounting.database.tier: tier is Cloud SQL's; on AWS set instanceClass "
     "[rule: slurm-database-cloud]"),
    (lambda s: s["scheduler"]["slurm"]["accounting"]["database"].update(instanceClass="db.r7g.huge"),
     f"{G}.scheduler.slurm.accounting.database.instanceClass: 'db.r7g.huge': RDS has no size 'huge' (sizes: micro, "
     "small, medium, large, xlarge, 2xlarge, 3xlarge, 4xlarge, 6xlarge, 8xlarge, 9xlarge, 10xlarge, 12xlarge, "
     "16xlarge, 18xlarge, 24xlarge, 32xlarge, 48xlarge; Amazon RDS User Guide, 'DB instance classes' and 'DB instance "
     "class types') [rule: slurm-database-shape]"),
    (lambda s: s["scheduler"]["slurm"]["accounting"]["database"].update(instanceClass="db.p5.48xlarge"),
     f"{G}.scheduler.slurm.accounting.database.instanceClass: 'db.p5.48xlarge' is not an RDS for MySQL instance "
     "class: db.<type>.<size> with a general-purpose (m), memory-optimized (r, x, z) or burstable (t) type, e.g. "
     "db.r7g.large (Amazon RDS User Guide, 'DB instance classes' and 'DB instance class types') "
     "[rule: slurm-database-shape]"),
    (lambda s: s["teams"][0].pop("gid"),
     f"{G}.teams[research].gid: team 'research' has Slurm users (ana, bruno): set gid to the group id your directory "
     "gives its members (as sssd resolves it), so their jobs can write the team's directory on /shared (root:gid, "
     "mode 2770); the default 59426 is a hash no directory knows [rule: slurm-team-gid]"),
    (lambda s: s["teams"][0]["quotas"][0].update(borrowingLimitGpus=8),
     f"{G}.teams[research].quotas[0]: borrowing and lending limits are Kueue's; 'h100' is a Slurm node group, where "
     "the team's gpus are its account's GPU limit (GrpTRES gres/gpu) and fair share [rule: slurm-quota-kueue-only]"),
]


@pytest.mark.parametrize(("mutate", "message"), RULES, ids=[m.split("[rule: ")[1][:-1] + str(i)
                                                            for i, (_, m) in enumerate(RULES)])
def test_each_slurm_rule_says_what_is_wrong(mutate: Any, message: str) -> None:
    value = spec()
    mutate(value)
    lines = refused(value)
    assert any(line.endswith(message) for line in lines), lines


def test_slurm_nodes_reserve_the_hugepages_slurmd_asks_for() -> None:
    """slurmd asks 5 GiB of hugepages-2Mi: the h100 nodes reserve 2,560 pages at boot, before kubelet starts, or the
    pod never schedules and Slurm has no node; the system group reserves none."""
    import base64

    graph = offline_run(STACK).graph
    lts = {r.name: r.inputs for r in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    h100 = base64.b64decode(lts["nodegroup-h100-lt"]["userData"]).decode()
    assert "sysctl -w vm.nr_hugepages=2560" in h100 and "vm.nr_hugepages = 2560" in h100
    system = lts["nodegroup-system-lt"].get("userData") or ""
    assert "nr_hugepages" not in base64.b64decode(system).decode()
    (ns,) = [n for n in graph.of_type(SLINKY + "NodeSet") if n.inputs["metadata"]["name"] == "h100"]
    assert ns.inputs["spec"]["slurmd"]["resources"]["requests"]["hugepages-2Mi"] == "5Gi"
    # the CPU partition's group neither reserves them nor asks for them
    prep = base64.b64decode(lts["nodegroup-prep-lt"].get("userData") or "").decode()
    assert "nr_hugepages" not in prep


def test_the_objects_are_created_in_the_order_the_operator_needs() -> None:
    """The webhook refuses a Controller whose config ConfigMaps are missing; the Controller names the Accounting; the
    accounts Job needs slurmdbd: each waits for what it reads (dependencies in the graph, not creation luck)."""
    graph = offline_run(STACK).graph
    by_urn = {r.urn: r for r in graph.resources}

    def deps(type_: str) -> set[str]:
        r = graph.of_type(type_)[0]
        return {by_urn[d].type.rsplit(":", 1)[-1] + "/" + by_urn[d].name for d in r.dependencies if d in by_urn}

    controller = deps(SLINKY + "Controller")
    assert {"Accounting/slurm-accounting-slurm-slurm", "ConfigMap/slurm-configmap-slurm-slurm-config-files",
            "ConfigMap/slurm-configmap-slurm-slurm-prolog", "Secret/slurm-slurm-auth-slurm",
            "Release/slurm-operator"} <= controller
    assert "Controller/slurm-controller-slurm-slurm" in deps(SLINKY + "NodeSet")
    (job,) = [r for r in graph.of_type("kubernetes:batch/v1:Job") if "slurm-accounts" in r.name]
    assert any(d.endswith("slurm-accounting-slurm-slurm") for d in job.dependencies)


def test_the_accounts_job_authenticates_loads_and_removes() -> None:
    """slurm.conf and slurm.key where Slurm looks (/etc/slurm), slurmdbd's error shown while waiting, and what the
    stack no longer lists removed (sacctmgr load only adds)."""
    graph = offline_run(STACK).graph
    (job,) = [r for r in graph.of_type("kubernetes:batch/v1:Job") if "slurm-accounts" in r.name]
    container = job.inputs["spec"]["template"]["spec"]["containers"][0]
    script = container["command"][-1]
    assert "install -m 0644 /config/slurm.conf /etc/slurm/slurm.conf" in script
    assert "/etc/slurm/slurm.key" in script and "SLURM_CONF" not in str(container.get("env", ""))
    assert "2>&1" in script and ">/dev/null" not in script
    assert "sacctmgr -i delete user" in script and "sacctmgr -i delete account" in script
    (cm,) = [r for r in graph.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"]["name"].startswith(
        "slurm-accounts")]
    assert "research|ana" in cm.inputs["data"]["associations.txt"].splitlines()
    maps = {r.inputs["metadata"]["name"]: r.inputs["data"] for r in graph.of_type("kubernetes:core/v1:ConfigMap")}
    prolog, epilog = maps["slurm-prolog"], maps["slurm-epilog"]
    assert not set(prolog) & set(epilog)  # one /etc/slurm: the same file name would be one script for both


def test_login_takes_the_administrators_public_keys() -> None:
    (login,) = offline_run(STACK).graph.of_type(SLINKY + "LoginSet")
    assert login.inputs["spec"]["rootSshAuthorizedKeys"].startswith("ssh-ed25519 ")
