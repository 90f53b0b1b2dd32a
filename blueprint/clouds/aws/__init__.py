"""The tools' AWS half: what the tools do that depends on AWS (see :mod:`blueprint.clouds` for the families)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # each module meets its family's interface (checked by mypy, never imported here at run time)
    from blueprint.acceptance.cloud import CloudChecks
    from blueprint.admit.cloud import CloudAdmit
    from blueprint.changes.cloud import CloudChanges
    from blueprint.clouds.aws import admit, changes, checks, deployer, examples, graph, preview, pricing, report
    from blueprint.cost.cloud import CloudPricing
    from blueprint.deployer.cloud import CloudDeployer
    from blueprint.graph.cloud import CloudGraph
    from blueprint.policy.cloud import CloudExamples
    from blueprint.preview.cloud import CloudPreview
    from blueprint.report.cloud import CloudReport

    _admit: CloudAdmit = admit
    _changes: CloudChanges = changes
    _checks: CloudChecks = checks
    _deployer: CloudDeployer = deployer
    _examples: CloudExamples = examples
    _graph: CloudGraph = graph
    _preview: CloudPreview = preview
    _pricing: CloudPricing = pricing
    _report: CloudReport = report
