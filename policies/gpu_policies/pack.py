"""The pack: every policy, by area, and the entry point the Pulumi CLI runs."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, PolicyPack

from gpu_policies import billing, data_safety, fabric, guards, inference, quotas, security, sizing, slurm, telemetry

PACK_NAME = "gpu-cluster-policies"
POLICIES = [*billing.POLICIES, *quotas.POLICIES, *telemetry.POLICIES, *security.POLICIES, *fabric.POLICIES,
            *data_safety.POLICIES, *sizing.POLICIES, *slurm.POLICIES, *inference.POLICIES,
            *guards.POLICIES]


def serve() -> None:
    """Start the analyzer (the CLI's ``--policy-pack policies`` runs this through ``__main__.py``)."""
    PolicyPack(name=PACK_NAME, policies=list(POLICIES), enforcement_level=EnforcementLevel.ADVISORY,
               description="Rejects GPU cluster stacks that lack telemetry, quotas or billing labels; "
                           "advises on security, fabric and data safety (mandatory on GKE).")
