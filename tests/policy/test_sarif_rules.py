"""Every rule of the finding-to-key table is proven by a real finding (issue 36): for each rule of
:data:`blueprint.policy.spec_keys.RULES` and of every cloud's ``SPEC_KEYS``, a shipped stack's copy (changed by one line
where the stack-file spec accepts a change that breaks the policy) or its graph (broken as ``blueprint policy
--explain`` breaks it, where the spec refuses every such change) gives a finding that this rule, and no earlier one,
sends to its key, and whose SARIF region starts on that key's line: the key itself when the file writes it, else the
nearest key it writes, with the message saying which key to add. A rule no case proves fails the last test."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from blueprint import clouds
from blueprint.cli.common import target_graph
from blueprint.clouds.aws.examples import _without_default_tag
from blueprint.graph.model import ResourceGraph
from blueprint.policy.cloud import cloud_examples
from blueprint.policy.mutations import edit, k8s_type
from blueprint.policy.runner import load_pack, normalize_config, run_policies
from blueprint.policy.sarif import render_sarif
from blueprint.policy.spec_keys import RULES, KeyRule, key_rule
from tests.conftest import offline_run, stack

Mutation = Callable[[ResourceGraph], ResourceGraph]
ALL_RULES: tuple[KeyRule, ...] = (*RULES, *(r for cloud in clouds.names() for r in cloud_examples(cloud).SPEC_KEYS))


def rule(key: str, policy: str = "", type_: str | None = None, field: bool | None = None) -> KeyRule:
    """The one rule of the table with ``key`` (and ``policy`` among its policies, of ``type_``, with or without a
    field pattern)."""
    found = {r for r in ALL_RULES if r.key == key and (not policy or policy in r.policies)
             and (type_ is None or r.type == type_) and (field is None or (r.field is not None) is field)}
    assert len(found) == 1, (key, policy, found)
    return found.pop()


def explain(how: str, cloud: str = "aws") -> Mutation:
    """The mutation ``blueprint policy --explain`` breaks a graph with, by the cloud's description of it."""
    return cloud_examples(cloud).MUTATIONS[how][1]


def _set_inputs(type_: str, name: str, change: Callable[[dict[str, Any]], None]) -> Mutation:
    return lambda g: edit(g, type_, name, change)


def _drop_alerts(pattern: str) -> Mutation:
    """Every alert of the platform's PrometheusRule whose expression matches ``pattern`` removed."""
    def change(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if not ("alert" in r and re.search(pattern, str(r["expr"])))]
    return _set_inputs(k8s_type("PrometheusRule"), "monitoring-rules", change)


@dataclass(frozen=True)
class Case:
    """``stack`` (its line matching ``at`` replaced by ``line``, or ``line`` inserted after it), its graph broken by
    ``mutate``, judged under pack ``config``: the new findings of ``policy`` (those whose field fully matches
    ``field``, on ``resource``) are sent by ``proves`` to ``key``, on the line matching ``where``, exactly
    (``exact``) or as the key to add."""

    stack: str
    policy: str
    key: str
    where: str
    proves: KeyRule
    exact: bool = True
    mutate: Mutation | None = None
    at: str = ""
    line: str = ""
    insert: bool = False
    config: dict[str, Any] | None = None
    field: str | None = None
    resource: str = ""  # only the findings on the resource named so


AWS = "gpu-cluster:spec.aws"
GCP = "gpu-cluster:spec.gcp"
SG_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
NS_LABELS = "kubernetes-namespaces-require-billing-labels"
DELETION = "gpu-cluster:spec.deletionProtection"
PROTECT_DEV = {"protectedEnvironments": ["prod", "dev"]}
CASES: dict[str, Case] = {
    # AWS: node groups
    "aws maxSize": Case("prod-aws", "aws-eks-gpu-nodegroup-max-size-cap", f"{AWS}.nodeGroups[1].maxSize",
                        r"^\s*maxSize: 16$", rule(".{1}"), mutate=explain("let the GPU node group scale to 100 nodes")),
    # the spec refuses SSH open to the world: an SSH key the file writes, the remote access then opened in the graph
    "aws ssh": Case("dev-aws", "aws-no-ssh-from-anywhere", f"{AWS}.nodeGroups[1].ssh.sourceCidrs",
                    r"^\s*ssh: \{keyName", rule(".ssh.sourceCidrs"), at=r"^\s*instanceType: g6\.xlarge$",
                    line="ssh: {keyName: ops, sourceCidrs: [10.0.0.0/8]}", insert=True,
                    mutate=_set_inputs(SG_INGRESS, "nodegroup-l4-ssh-0", lambda i: i.update(cidrIpv4="0.0.0.0/0"))),
    "aws efaInterfaces": Case("prod-aws", "aws-efa-node-groups-wire-all-interfaces",
                              f"{AWS}.nodeGroups[1].efaInterfaces", r"^\s*- name: h100$", rule(".efaInterfaces"),
                              exact=False,
                              mutate=explain("drop an EFA interface")),
    "aws placement": Case("prod-aws", "aws-no-placement-group-on-reserved-capacity", f"{AWS}.nodeGroups[1].placement",
                          r"^\s*placement: auto$", rule(".placement", type_="aws:ec2/launchTemplate:LaunchTemplate"),
                          mutate=explain("force a placement group onto the capacity block")),
    # AWS: control plane
    "aws publicAccessCidrs": Case("dev-aws", "aws-eks-endpoint-not-open-to-internet",
                                  f"{AWS}.controlPlane.publicAccessCidrs[0]", r"^\s*publicAccessCidrs: \[",
                                  rule(".publicAccessCidrs{1}"), mutate=explain("open the endpoint to 0.0.0.0/0")),
    "aws secretsEncryption": Case("prod-aws", "aws-eks-secrets-encrypted-with-kms",
                                  f"{AWS}.controlPlane.secretsEncryption", r"^\s*secretsEncryption: true$",
                                  rule(".secretsEncryption"), mutate=explain("stop encrypting secrets")),
    "aws logTypes": Case("dev-aws", "aws-eks-control-plane-logging", f"{AWS}.controlPlane.logTypes",
                         r"^\s*logTypes: \[api\]$", rule(".logTypes"), at=r"^\s*logRetentionDays: 30$",
                         line="logTypes: [api]", insert=True),
    # AWS: Slurm accounting database backups (the spec refuses fewer than 1 day)
    "aws RDS backups": Case("prod-aws-slurm", "slurm-accounting-in-production",
                            "gpu-cluster:spec.scheduler.slurm.accounting.database.backupRetentionDays",
                            r"^\s*database: \{", rule(".database.backupRetentionDays"), field="backupRetentionPeriod",
                            mutate=_set_inputs("aws:rds/instance:Instance", "slurm-accounting-instance",
                                               lambda i: i.update(backupRetentionPeriod=0))),
    # AWS: telemetry (a container log group kept forever: the spec refuses it, the graph has it)
    "aws log retention": Case("prod-aws", "aws-container-logs-in-production",
                              f"{AWS}.telemetry.containerLogs.retentionDays", r"^\s*containerLogs: \{retentionDays",
                              rule(".containerLogs.retentionDays"), at=r"^\s*efaExporterImage:",
                              line="containerLogs: {retentionDays: 90}", insert=True, field="retentionInDays",
                              mutate=_set_inputs("aws:cloudwatch/logGroup:LogGroup", "telemetry-containers-logs",
                                                 lambda i: i.pop("retentionInDays"))),
    "aws storageMetrics": Case("prod-aws", "aws-storage-metrics-in-production", f"{AWS}.telemetry.storageMetrics",
                               r"^\s*storageMetrics: false$", rule(f"{AWS}.telemetry.storageMetrics",
                                                                   "aws-storage-metrics-in-production"),
                               at=r"^\s*efaExporterImage:", line="storageMetrics: false", insert=True),
    "aws containerLogs": Case("prod-aws", "aws-container-logs-in-production", f"{AWS}.telemetry.containerLogs.enabled",
                              r"^\s*containerLogs: \{enabled", rule(f"{AWS}.telemetry.containerLogs.enabled"),
                              at=r"^\s*efaExporterImage:", line="containerLogs: {enabled: false}", insert=True),
    "aws efaExporterImage": Case("prod-aws", "aws-fabric-metrics-in-production", f"{AWS}.telemetry.efaExporterImage",
                                 r"^\s*efaExporterImage:", rule(f"{AWS}.telemetry.efaExporterImage",
                                                                "aws-fabric-metrics-in-production"),
                                 mutate=explain("drop the EFA node exporter")),
    # the image's line replaced: a deleted key has no line, so its parent is annotated and the message says add it
    "aws efaExporterImage removed": Case("prod-aws", "alerts-minimum-telemetry", f"{AWS}.telemetry.efaExporterImage",
                                         r"^\s*telemetry:$", rule(f"{AWS}.telemetry.efaExporterImage",
                                                                  "alerts-minimum-telemetry"),
                                         exact=False, at=r"^\s*efaExporterImage:", line="storageMetrics: true"),
    "aws storage alerts": Case("prod-aws", "alerts-minimum-telemetry", f"{AWS}.telemetry.storageMetrics",
                               r"^\s*telemetry:$", rule(f"{AWS}.telemetry.storageMetrics", "alerts-minimum-telemetry"),
                               exact=False, mutate=_drop_alerts(r"aws_fsx_|aws_s3_")),
    # AWS: billing
    "aws team budget": Case("prod-aws", "aws-every-team-has-a-budget", "gpu-cluster:spec.teams[0].budget",
                            r"^\s*budget: \{monthlyUsd: 115000", rule(".budget", "aws-every-team-has-a-budget"),
                            mutate=explain("drop a team's in-cluster spend alert")),
    "aws cluster budget": Case("prod-aws", "aws-cluster-has-a-budget", "gpu-cluster:spec.billing", r"^\s*billing:$",
                               rule("gpu-cluster:spec.billing", "aws-cluster-has-a-budget"),
                               mutate=explain("remove the cluster's budget")),
    "aws billing tag": Case("prod-aws", "aws-resources-require-billing-tags", "gpu-cluster:spec.labels.cost-center",
                            r"^\s*cost-center: cc-4100$", rule("gpu-cluster:spec.labels.{1}{2}",
                                                                "aws-resources-require-billing-tags"),
                            mutate=explain("remove a billing tag from a resource and the provider defaults")),
    "aws owner tag": Case("prod-aws", "aws-eks-gpu-nodegroup-require-owner", "gpu-cluster:spec.labels.owner",
                          r"^\s*owner: ml-platform-oncall$", rule("gpu-cluster:spec.labels.{1}{2}",
                                                                   "aws-eks-gpu-nodegroup-require-owner"),
                          mutate=explain("remove the owner of the GPU node group")),
    # the environment tag is the stack's environment, not one of its labels
    "aws environment tag": Case("prod-aws", "aws-resources-require-billing-tags", "gpu-cluster:spec.environment",
                                r"^\s*environment: prod$", rule("gpu-cluster:spec.environment"),
                                mutate=lambda g: _without_default_tag("environment")(edit(
                                    g, "aws:ec2/vpc:Vpc", "network-vpc", lambda i: i["tags"].pop("environment")))),
    # GCP
    "gcp placement": Case("prod-gcp", "gcp-no-compact-placement-on-reservation", f"{GCP}.nodePools[1].placement",
                          r"^\s*placement: auto$", rule(".placement", type_="gcp:container/nodePool:NodePool"),
                          at=r"^\s*capacity: \{type: reservation", line="placement: auto", insert=True,
                          mutate=explain("add a compact placement to the reservation pool", "gcp")),
    "gcp authorizedNetworks": Case("dev-gcp", "gcp-gke-endpoint-not-open-to-internet",
                                   f"{GCP}.cluster.authorizedNetworks[0]", r"^\s*authorizedNetworks: \[",
                                   rule(".authorizedNetworks{1}"),
                                   mutate=explain("authorize 0.0.0.0/0 on the public endpoint", "gcp")),
    "gcp databaseEncryption": Case("prod-gcp", "gcp-cmek-in-production", f"{GCP}.cluster.databaseEncryption",
                                   r"^\s*databaseEncryption: true$", rule(".databaseEncryption"),
                                   mutate=explain("stop encrypting prod secrets with KMS", "gcp")),
    "gcp logComponents": Case("dev-gcp", "gcp-gke-logging", f"{GCP}.cluster.logComponents",
                              r"^\s*logComponents: \[SYSTEM_COMPONENTS\]$", rule(".logComponents"),
                              at=r"^\s*rbacSecurityGroup:", line="logComponents: [SYSTEM_COMPONENTS]", insert=True),
    "gcp rbacSecurityGroup": Case("prod-gcp", "gcp-teams-reach-the-cluster", f"{GCP}.cluster.rbacSecurityGroup",
                                  r"^\s*rbacSecurityGroup:", rule(".rbacSecurityGroup"),
                                  mutate=explain("turn off Google Groups for RBAC", "gcp")),
    "gcp softDeleteDays": Case("prod-gcp", "gcp-storage-bucket-recoverable",
                               f"{GCP}.storage.checkpointBucket.softDeleteDays", r"^\s*softDeleteDays: 7$",
                               rule(".checkpointBucket.softDeleteDays"),
                               mutate=explain("keep a hierarchical bucket's soft delete below 7 days", "gcp")),
    "gcp deletion protection": Case("dev-gcp", "gcp-stateful-resources-protected-in-production", DELETION,
                                    r"^\s*deletionProtection: false$", rule(DELETION,
                                    "gcp-stateful-resources-protected-in-production"),
                                    config={"gcp-stateful-resources-protected-in-production": PROTECT_DEV}),
    "gcp storageMetrics": Case("prod-gcp", "gcp-storage-metrics-in-production", f"{GCP}.telemetry.storageMetrics",
                               r"^\s*telemetry: \{storageMetrics", rule(f"{GCP}.telemetry.storageMetrics",
                                                                   "gcp-storage-metrics-in-production"),
                               at=r"^\s*gpuZone:", line="telemetry: {storageMetrics: false}", insert=True),
    "gcp storage alerts": Case("prod-gcp", "alerts-minimum-telemetry", f"{GCP}.telemetry.storageMetrics",
                               r"^\s*gcp:$", rule(f"{GCP}.telemetry.storageMetrics", "alerts-minimum-telemetry"),
                               exact=False, mutate=_drop_alerts(r"stackdriver_.*(lustre|gcs|storage)")),
    "gcp team budget": Case("prod-gcp", "gcp-every-team-has-a-budget", "gpu-cluster:spec.teams[0].budget",
                            r"^\s*budget: \{monthlyUsd: 560000", rule(".budget", "gcp-every-team-has-a-budget"),
                            mutate=explain("drop a team's in-cluster spend alert", "gcp")),
    "gcp cluster budget": Case("prod-gcp", "gcp-cluster-has-a-budget", "gpu-cluster:spec.billing", r"^\s*billing:$",
                               rule("gpu-cluster:spec.billing", "gcp-cluster-has-a-budget"),
                               mutate=explain("remove the cluster's budget", "gcp")),
    "gcp billing label": Case("prod-gcp", "gcp-resources-require-billing-labels", "gpu-cluster:spec.labels.cost-center",
                              r"^\s*cost-center: cc-4100$", rule("gpu-cluster:spec.labels.{1}{2}",
                                                                  "gcp-resources-require-billing-labels"),
                              mutate=explain("drop cost-center from the GPU pool's resourceLabels (defaultLabels do "
                                             "not reach them)", "gcp")),
    # of no cloud in particular: data safety (dev-aws turns protection off; judged as production by pack config)
    "deletion protection field": Case("dev-aws", "stateful-resources-protected-in-production", DELETION,
                                      r"^\s*deletionProtection: false$", rule(DELETION, type_="", field=True),
                                      field="deletionProtection",
                                      config={"stateful-resources-protected-in-production": PROTECT_DEV}),
    "deletion protection": Case("dev-aws", "stateful-resources-protected-in-production", DELETION,
                                r"^\s*deletionProtection: false$", rule(DELETION,
                                                                        "stateful-resources-protected-in-production"),
                                field="", config={"stateful-resources-protected-in-production": PROTECT_DEV}),
    "reclaim policy": Case("dev-aws", "prometheus-metrics-retained-in-production", DELETION,
                           r"^\s*deletionProtection: false$", rule(DELETION, type_=STORAGE_CLASS),
                           field="reclaimPolicy",
                           config={"prometheus-metrics-retained-in-production": PROTECT_DEV}),
    "default receiver": Case("prod-aws", "alerts-reach-a-receiver",
                             "gpu-cluster:spec.platform.monitoring.alerts.defaultReceiver", r"^\s*defaultReceiver:",
                             rule("gpu-cluster:spec.platform.monitoring.alerts.defaultReceiver"),
                             mutate=explain("route every alert to a receiver that notifies no one")),
    # The first team queue by URN (applied), whatever order the engine registered the queues in.
    "quotas": Case("prod-aws", "kueue-cluster-queue-requires-gpu-quota", "gpu-cluster:spec.teams[2].quotas",
                   r"^\s*quotas: \[\{nodeGroup: h100, gpus: 16, borrowingLimitGpus: 16\}, \{nodeGroup: l40s",
                   rule(".quotas"), mutate=explain("set every nominal GPU quota to zero"),
                   resource="clusterqueue-applied"),
    "goodput target": Case("prod-aws", "checkpoint-storage-reaches-goodput-target",
                           "gpu-cluster:spec.workload.goodput.target", r"^\s*target: 0\.97$",
                           rule("gpu-cluster:spec.workload.goodput.target"),
                           mutate=explain("model a goodput below the target")),
    "slurm login": Case("prod-aws-slurm", "slurm-login-not-open-to-the-internet",
                        "gpu-cluster:spec.scheduler.slurm.login.sourceCidrs[0]", r"^\s*sourceCidrs: \[10\.200",
                        rule(".login.sourceCidrs{1}"), mutate=explain("open the Slurm login to every address")),
    "slurm accounting": Case("prod-aws-slurm", "slurm-accounting-in-production",
                             "gpu-cluster:spec.scheduler.slurm.accounting.enabled", r"^\s*accounting:$",
                             rule(".accounting.enabled"), exact=False,
                             mutate=explain("run the prod Slurm controller without accounting")),
    "slurm partition": Case("prod-aws-slurm", "slurm-partitions-have-limits",
                            "gpu-cluster:spec.scheduler.slurm.partitions[train]", r"^\s*- \{name: train,",
                            rule(".partitions[{name}]"), mutate=explain("give a partition no time limit")),
    "slurm pod labels": Case("prod-aws-slurm", "slurm-pods-carry-billing-labels", "gpu-cluster:spec.labels",
                             r"^\s*labels:$", rule("gpu-cluster:spec.labels"),
                             mutate=explain("drop the billing labels from the Slurm NodeSet's pods")),
    # billing labels of a team's namespace: its cost center and team are the team's, the environment the stack's
    "namespace cost center": Case("prod-aws", "kubernetes-namespaces-require-billing-labels",
                                  "gpu-cluster:spec.teams[0].costCenter", r"^\s*costCenter: cc-4200$",
                                  rule(".costCenter"), mutate=explain("remove a team namespace's cost-center label")),
    "namespace team": Case("prod-aws", "kubernetes-namespaces-require-billing-labels", "gpu-cluster:spec.teams[0].name",
                           r"^\s*- name: research$", rule(".name"),
                           mutate=_set_inputs(k8s_type("Namespace"), "tenancy-ns-research",
                                              lambda i: i["metadata"]["labels"].pop("team"))),
    "namespace environment": Case("prod-aws", "kubernetes-namespaces-require-billing-labels",
                                  "gpu-cluster:spec.environment", r"^\s*environment: prod$",
                                  rule("gpu-cluster:spec.environment"),
                                  mutate=_set_inputs(k8s_type("Namespace"), "tenancy-ns-research",
                                                     lambda i: i["metadata"]["labels"].pop("environment"))),
    "system namespace label": Case("prod-aws", "kubernetes-namespaces-require-billing-labels",
                                   "gpu-cluster:spec.labels.cost-center", r"^\s*cost-center: cc-4100$",
                                   rule("gpu-cluster:spec.labels.{1}{2}", NS_LABELS),
                                   mutate=_set_inputs(k8s_type("Namespace"), "ns-monitoring",
                                                      lambda i: i["metadata"]["labels"].pop("cost-center"))),
}


def _text(case: Case) -> str:
    """The case's stack file, with its one-line change."""
    lines = stack(case.stack).path.read_text().splitlines()
    if case.at:
        at = next(i for i, text in enumerate(lines) if re.search(case.at, text))
        indent = re.match(r"\s*", lines[at]).group(0)  # type: ignore[union-attr]
        if case.insert:
            lines.insert(at + 1, indent + case.line)
        else:
            lines[at] = indent + case.line
    return "\n".join(lines) + "\n"


def _graph(case: Case, text: str, tmp_path: Path) -> ResourceGraph:
    if not case.at:
        return offline_run(case.stack).graph
    path = tmp_path / f"Pulumi.{case.stack}.yaml"
    path.write_text(text)
    return target_graph(str(path))[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_sends_a_real_finding_to_its_key_line(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    text = _text(case)
    pack = load_pack()
    config = normalize_config(case.config, pack.policies) if case.config else None
    unchanged = _graph(case, text, tmp_path)
    graph = case.mutate(unchanged) if case.mutate else unchanged
    before = {(v.policy, v.urn, v.field) for v in run_policies(unchanged, config, pack).violations} \
        if case.mutate else set()
    if case.at:  # the one-line change did it: the shipped file has no such finding
        before |= {(v.policy, v.urn, v.field) for v in run_policies(offline_run(case.stack).graph, config,
                                                                       pack).violations}
    report = run_policies(graph, config, pack)
    hits = [v for v in report.violations if v.policy == case.policy and (v.policy, v.urn, v.field) not in before
            and (case.field is None or re.fullmatch(case.field, v.field)) and v.urn.endswith(case.resource)]
    assert hits, name
    assert {key_rule(graph, v)[0] for v in hits} == {case.proves}  # type: ignore[index]
    doc = json.loads(render_sarif(report, case.stack, graph, f"stacks/Pulumi.{case.stack}.yaml", text))
    urns = {v.urn for v in hits}
    results = [r for r in doc["runs"][0]["results"] if r["ruleId"] == case.policy and r["properties"]["urn"] in urns
               and (case.field is None or re.fullmatch(case.field, r["properties"].get("field", "")))]
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if re.search(case.where, t))
    assert results
    for result in results:
        assert result["properties"]["specPath"] == case.key
        assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == line, result["message"]["text"]
        assert result["message"]["text"].endswith(f"\nStack file: {case.key}") is case.exact


def test_every_rule_is_proven_by_a_case() -> None:
    """No rule of the table goes unproven (a rule no finding reaches is dead, or points at a key nobody checked)."""
    assert set(ALL_RULES) - {case.proves for case in CASES.values()} == set()
