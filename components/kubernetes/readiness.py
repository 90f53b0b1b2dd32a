"""The readiness gate's component (objects/node_check.py builds its objects): the Node Readiness Controller, and per
GPU group its rules and its check."""

from __future__ import annotations

from typing import Optional

import pulumi

from components import provenance
from components.catalog import load_charts
from components.catalog.acceptance import load_per_node, load_thresholds
from components.catalog.charts import node_check_images, tool_image
from components.kubernetes import objects as obj
from components.kubernetes.apply import apply, object_name, release
from components.kubernetes.inputs import PlatformInputs
from components.kubernetes.namespaces import system_namespace
from components.kubernetes.objects import node_check as nc


class NodeReadiness(pulumi.ComponentResource):
    """Every GPU node proves itself before it takes a job (objects/node_check.py): the Node Readiness Controller from
    its pinned chart, per GPU group its two NodeReadinessRules and the check DaemonSet with the controller's reporter,
    the reporters' identity (their own node's status, two conditions: an admission policy), each node's record to the
    acceptance bucket where the stack keeps one."""

    def __init__(self, name: str, inputs: PlatformInputs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("gpu-cluster:platform:NodeReadiness", name, provenance.props(), opts)
        child = pulumi.ResourceOptions(parent=self)
        controller_ns = system_namespace(self, nc.READINESS_NAMESPACE, inputs)
        check_ns = system_namespace(self, nc.NODE_CHECK_NAMESPACE, inputs)
        quotas: list[pulumi.Resource] = []
        if inputs.critical_priority_quota:
            # The controller runs at system-cluster-critical (the chart's default), the checks at system-node-critical.
            nodes = sum(p.max_nodes for p in inputs.pools) + sum(
                p.pool.max_nodes for p in (inputs.slurm.pools if inputs.slurm is not None else ())
                if p.pool.gpus_per_node)
            for namespace, ns, pods in ((nc.READINESS_NAMESPACE, controller_ns, 8),
                                        (nc.NODE_CHECK_NAMESPACE, check_ns, 2 * nodes + 8)):
                quotas.append(apply(f"{name}-{namespace}-critical-pods",
                                    obj.critical_priority_quota(namespace, inputs.labels, pods),
                                    pulumi.ResourceOptions(parent=self, depends_on=[ns])))
        controller = release(nc.CONTROLLER_RELEASE, load_charts()["node-readiness-controller"],
                             nc.READINESS_NAMESPACE, nc.controller_values(),
                             pulumi.ResourceOptions(parent=self, depends_on=[controller_ns, *quotas]))
        apply(f"{name}-controller-pdb", nc.controller_disruption_budget(inputs.labels),
              pulumi.ResourceOptions(parent=self, depends_on=[controller_ns]))
        # Kueue's GPU pools and Slurm's (slurmd, which holds a node's GPUs, waits for the same gate)
        pools = {p.name: p for p in inputs.pools}
        for slurm_pool in inputs.slurm.pools if inputs.slurm is not None else ():
            if slurm_pool.pool.gpus_per_node:  # a Slurm CPU group has no GPU to check, and registers with no gate
                pools.setdefault(slurm_pool.pool.name, slurm_pool.pool)
        settings = inputs.platform.node_checks
        checks = nc.node_checks(list(pools.values()), inputs.node_check_expected, load_thresholds()[0],
                                load_per_node(), dcgm_level=settings.dcgm_level,
                                unhealthy_effect=settings.unhealthy_effect)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[check_ns])
        account = apply(f"{name}-account",
                        obj.service_account(nc.SERVICE_ACCOUNT, nc.NODE_CHECK_NAMESPACE, inputs.labels,
                                            "report the GPU node check's conditions on the pod's own node"), in_ns)
        granted = [account]
        for m in [*nc.reporter_rbac(inputs.labels), *nc.reporter_node_policy()]:
            granted.append(apply(object_name(name, m), m, child))
        dcgm, reporter = node_check_images()
        images = nc.NodeCheckImages(dcgm=dcgm, reporter=reporter, tools=tool_image(),
                                    nccl_tests=inputs.acceptance_image, tests_dir=inputs.acceptance_tests_dir)
        recorder = inputs.acceptance_recorder if inputs.acceptance_image is not None else None
        ready = pulumi.ResourceOptions(parent=self, depends_on=[check_ns, *granted, *quotas,
                                                                *(recorder.ready if recorder else ())])
        fabrics = inputs.acceptance_fabrics or {}
        for check in checks:
            # On GKE's GPUDirect pools the node's NCCL needs the pod's GPU networks and (TCPXO) its receive-datapath
            # sidecar even on one node (objects/acceptance.py PodFabric.single_node); a DaemonSet pod that keeps such
            # a sidecar for good would run beside the teams' own. There the check runs no NCCL: DCGM's level-2
            # diagnostics exercise NVLink and PCIe, and the per-node acceptance Job measures NCCL.
            fabric = fabrics.get(check.pool)
            own_nccl = images if fabric is None or not fabric.single_node else \
                nc.NodeCheckImages(dcgm=dcgm, reporter=reporter, tools=tool_image())
            # The rules after the DaemonSet exists: a rule created first would hold every matching node (existing
            # ones too) with nothing to release it yet.
            daemonset = apply(f"{name}-check-{check.pool}",
                              nc.node_check_daemonset(check, own_nccl, inputs.labels, recorder,
                                                      gke_driver=inputs.cloud_gpu_stack is not None), ready)
            # A changed rule has a new name (nc.rule_name): created, then the old one deleted.
            for rule in nc.readiness_rules(check):
                apply(object_name(name, rule), rule,
                      pulumi.ResourceOptions(parent=self, depends_on=[controller, daemonset]))
        self.register_outputs({})
