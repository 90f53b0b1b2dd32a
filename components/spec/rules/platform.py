"""Rules on the Kubernetes platform settings."""

from __future__ import annotations

import re

from components.catalog.acceptance import catalog_figure
from components.spec.billing import email_problem
from components.spec.decisions import acceptance_runs, cloud_node_groups, instance_catalog
from components.spec.errors import _Collector
from components.spec.model import ClusterSpec


def _check_telemetry(spec: ClusterSpec, out: _Collector) -> None:
    """The EFA exporter image is pinned by digest."""
    if spec.aws is None:
        return
    image = spec.aws.telemetry.efa_exporter_image
    if image is not None and not _DIGEST_IMAGE.fullmatch(image):
        out.add(".aws.telemetry.efaExporterImage", "efa-exporter-image-digest",
                f"{image!r} is not pinned: give the EFA node exporter image you built as <repository>@sha256:<64 hex> "
                "(no published image has a digest anyone here verified)")


def _check_platform(spec: ClusterSpec, out: _Collector) -> None:
    sharing = spec.platform.gpu_sharing
    if sharing.mode == "mig":
        catalog = instance_catalog(spec)
        for ng in cloud_node_groups(spec):
            facts = catalog.get(ng.instance_type)
            if facts is not None and facts.gpu_count and not facts.mig.value:
                out.add(".platform.gpuSharing.mode", "mig-supported",
                        f"MIG needs GPUs that support it, and {ng.instance_type} ({facts.gpu_model}) does not "
                        f"(catalog: {facts.mig.source}); use time-slicing or none")
    if sharing.mode == "time-slicing" and sharing.replicas < 2:
        out.add(".platform.gpuSharing.replicas", "time-slicing-replicas",
                "time-slicing needs replicas >= 2 (1 replica is whole-GPU allocation: use mode none)")
    if sharing.mode != "time-slicing" and sharing.replicas != 1:
        out.add(".platform.gpuSharing.replicas", "time-slicing-replicas",
                f"replicas only applies to time-slicing, not '{sharing.mode}'")
    for i, prefix in enumerate(spec.platform.allowed_registries):
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9._/-]*)?/", prefix):
            out.add(f".platform.allowedRegistries[{i}]", "registry-prefix",
                    f"'{prefix}' must be a registry host (and optional path) ending in '/', e.g. nvcr.io/nvidia/")


# Where the acceptance gate writes each run's record in the checkpoint bucket (acceptance/<group>/<run>/); no team may
# own that prefix.
RECORDS_PREFIX = "acceptance"
_DIGEST_IMAGE = re.compile(r"[a-z0-9][a-z0-9.-]*(:\d+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}")


def _check_acceptance(spec: ClusterSpec, out: _Collector) -> None:
    """The acceptance image is pinned by digest and passes the registry admission policy."""
    acc = spec.acceptance
    if not acc.enabled:
        return
    if acc.image is None or not _DIGEST_IMAGE.fullmatch(acc.image):
        out.add(".acceptance.image", "acceptance-image-digest",
                f"{'acceptance.image is required' if acc.image is None else repr(acc.image) + ' is not pinned'}: "
                "give the nccl-tests image as <repository>@sha256:<64 hex> (the catalog has no verified digest)")
    elif not any(acc.image.startswith(p) for p in spec.platform.allowed_registries):
        out.add(".acceptance.image", "acceptance-image-allowed",
                f"{acc.image.split('@')[0]} is not under platform.allowedRegistries, whose admission policy would "
                "refuse the acceptance pods")
    if acc.recorder_image is not None and not _DIGEST_IMAGE.fullmatch(acc.recorder_image):
        out.add(".acceptance.recorderImage", "acceptance-image-digest",
                f"{acc.recorder_image!r} is not pinned: give the recorder image as <repository>@sha256:<64 hex>")
    for i, team in enumerate(spec.teams):
        if team.name == RECORDS_PREFIX:
            out.add(f".teams[{i}].name", "acceptance-records-prefix",
                    f"team '{team.name}' would own the bucket prefix {RECORDS_PREFIX}/, where the acceptance gate "
                    "writes its records through an identity of its own; rename the team")


def check_acceptance_figures(spec: ClusterSpec, out: _Collector) -> None:
    """Every acceptance run has an expected figure: the catalog's, or one the stack gives (``acceptance.expected``).
    A multi-node figure stands for runs on at least its node count (bus bandwidth does not depend on the rank count);
    the per-node run (1 node) needs its own. Run once the stack is otherwise valid, so a changed instance type or size
    is reported once, by its own rule."""
    acc = spec.acceptance
    groups = {g.name: g for g in cloud_node_groups(spec)}
    for i, entry in enumerate(acc.expected):
        if entry.node_group not in groups:
            out.add(f".acceptance.expected[{i}]", "acceptance-expected-run",
                    f"no node group is named {entry.node_group}: the figure would stand for no acceptance run "
                    f"(node groups: {', '.join(groups) or 'none'})")

    def given(group: str, nodes: int) -> bool:
        return any(e.node_group == group and (e.nodes == nodes if nodes == 1 else 1 < e.nodes <= nodes)
                   for e in acc.expected)
    for group, itype, nodes in acceptance_runs(spec):
        if given(group, nodes) or catalog_figure(itype, nodes) is not None:
            continue
        what = "the per-node run (1 node)" if nodes == 1 else f"the all_reduce over {nodes} nodes"
        out.add(".acceptance.expected", "acceptance-expected-figure",
                f"node group {group} ({itype}): components/catalog/acceptance.yaml publishes no all_reduce figure for "
                f"{what}; give the bus bandwidth the gate expects with its source: {{nodeGroup: {group}, nodes: "
                f"{nodes}, busbwGbps: <GB/s>, source: <your baseline or a published page>}}")


_RUNBOOK_URL = re.compile(r"^(https://[^\s#]+|[A-Za-z0-9_./-]+\.md)$")
# A Slack channel name: lowercase letters, digits, hyphens and underscores, at most 80 characters (Slack Help Center,
# "Create a channel": channel name guidelines), with its # (or @ for a user).
_SLACK_CHANNEL = re.compile(r"^[#@][a-z0-9][a-z0-9._-]{0,79}$")


def _check_alerts(spec: ClusterSpec, out: _Collector) -> None:
    """Receivers complete for their type, routes naming known receivers and teams, and a production stack whose
    alerts reach someone."""
    alerts = spec.platform.monitoring.alerts
    where = ".platform.monitoring.alerts"
    if not _RUNBOOK_URL.fullmatch(alerts.runbook_url):
        out.add(f"{where}.runbookUrl", "alert-runbook-url",
                f"'{alerts.runbook_url}' is neither an https URL (without #) nor a path to a .md file; alerts link to "
                "it plus #<section>")
    elif alerts.runbook_url.startswith("https://") and "@" in alerts.runbook_url.split("/", 3)[2]:
        # https://user:token@host/...: the credential would be copied into every alert's annotations
        out.add(f"{where}.runbookUrl", "alert-secrets-by-reference",
                "the runbook URL carries credentials (user:password@): every alert would show them; publish the "
                "runbook where it can be read without them")
    names: dict[str, int] = {}
    for i, r in enumerate(alerts.receivers):
        rw = f"{where}.receivers[{i}]"
        if r.name in names:
            out.add(f"{rw}.name", "unique-names", f"receiver name '{r.name}' is used twice")
        if r.name == "none" or r.name.startswith("budget-"):
            out.add(f"{rw}.name", "alert-receiver-reserved",
                    f"receiver name '{r.name}' is reserved: 'none' silences Watchdog and budget-<team> mails a "
                    "team's budget addresses (teams[].budget.notify); choose another")
        names.setdefault(r.name, i)
        needs = {"email": ("to", "from", "smarthost")}.get(r.type, ())
        given = {"to": bool(r.to), "from": r.sender is not None, "smarthost": r.smarthost is not None}
        for key in needs:
            if not given[key]:
                out.add(f"{rw}.{key}", "alert-receiver-complete", f"an email receiver needs {key}")
        for key, value in (("channel", r.channel), ("to", r.to or None), ("from", r.sender),
                           ("smarthost", r.smarthost), ("username", r.username)):
            allowed = {"slack": ("channel",), "email": ("to", "from", "smarthost", "username")}.get(r.type, ())
            if value is not None and key not in allowed:
                out.add(f"{rw}.{key}", "alert-receiver-complete", f"{key} does not apply to a {r.type} receiver")
        for j, address in enumerate(r.to):
            if (problem := email_problem(address)) is not None:
                out.add(f"{rw}.to[{j}]", "budget-email", problem)
        if r.sender is not None and (problem := email_problem(r.sender)) is not None:
            out.add(f"{rw}.from", "budget-email", problem)
        if r.smarthost is not None and int(r.smarthost.rsplit(":", 1)[1]) > 65535:
            out.add(f"{rw}.smarthost", "alert-receiver-complete",
                    f"port {r.smarthost.rsplit(':', 1)[1]} is above 65535, the largest TCP port")
        if r.channel is not None and not _SLACK_CHANNEL.fullmatch(r.channel):
            # a webhook URL or a token pasted here would be written in clear into the AlertmanagerConfig
            out.add(f"{rw}.channel", "alert-secrets-by-reference",
                    "not a Slack channel (#name: lowercase letters, digits, - and _, at most 80 characters; the "
                    "value is not repeated here, in case it is a credential); a webhook URL or token belongs in the "
                    "Secret that secret and key name")
    teams = {t.name for t in spec.teams}
    for i, route in enumerate(alerts.routes):
        if route.receiver not in names:
            out.add(f"{where}.routes[{i}].receiver", "alert-route-receiver",
                    f"'{route.receiver}' is not a receiver; known: {', '.join(names) or 'none'}")
        for j, team in enumerate(route.teams):
            if team not in teams:
                out.add(f"{where}.routes[{i}].teams[{j}]", "alert-route-team",
                        f"'{team}' is not a team of this stack; known: {', '.join(sorted(teams))}")
    if alerts.default_receiver is not None and alerts.default_receiver not in names:
        out.add(f"{where}.defaultReceiver", "alert-route-receiver",
                f"'{alerts.default_receiver}' is not a receiver; known: {', '.join(names) or 'none'}")
    if spec.environment == "prod" and not (alerts.routes or alerts.default_receiver):
        out.add(f"{where}", "prod-alerts-routed",
                "a prod stack's alerts must reach someone: add a receiver (slack, pagerduty, email or webhook, its "
                "credential in a Secret) and a route or defaultReceiver")
    elif spec.environment == "prod" and alerts.default_receiver is None:
        # Routes alone: each severity needs a route for every team (no teams), or an alert of a team no route names
        # (or of no team: a node, the fabric) reaches nobody.
        covered = {s for route in alerts.routes if not route.teams
                   for s in (route.severity or ("critical", "warning", "info"))}
        missing = [s for s in ("critical", "warning", "info") if s not in covered]
        if missing:
            out.add(f"{where}.defaultReceiver", "prod-every-severity-routed",
                    f"{', '.join(missing)} alerts of a team no route names, or of no team (nodes, fabric, storage), "
                    "reach no receiver: set defaultReceiver, or add a route without teams for "
                    f"{'them' if len(missing) > 1 else 'it'}")
