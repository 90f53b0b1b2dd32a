"""Rules on GKE maintenance exclusions: names, ends, and how long each scope may last.

GKE "Maintenance windows and exclusions" (docs.cloud.google.com/kubernetes-engine/docs/concepts/
maintenance-windows-and-exclusions, read 2026-12-02): a NO_UPGRADES exclusion lasts at most 30 days; NO_MINOR_UPGRADES
and NO_MINOR_OR_NODE_UPGRADES last at most until the end of support of the cluster's minor version, and may end
exactly there (exclusion end time behavior UNTIL_END_OF_SUPPORT: pulumi_gcp 10.2.0
ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs.end_time_behavior, "One of: UNTIL_END_OF_SUPPORT.
One and one of end_time_behavior and end_time should be specified"; cluster-toolkit modules/scheduler/gke-cluster
variables.tf maintenance_exclusions, the same rule). Exclusions are keyed by name in the GKE API (MaintenanceWindow
maintenanceExclusions is a map), so names are unique.
"""

from __future__ import annotations

import re
from datetime import timedelta

from components.catalog.gke_versions import load_gke_versions, parse_gke_version
from components.spec.errors import _Collector
from components.spec.gcp import GcpSpec

NO_UPGRADES_MAX = timedelta(days=30)
# GKE documents no length for an exclusion's name (gcloud: "a descriptor for the exclusion"; the pulumi_gcp docstring's
# examples hold spaces: "batch job", "holiday data load"). The blueprint takes names of up to 63 characters, the length
# of a Google Cloud resource name (RFC 1035), which holds cluster-toolkit's no-minor-or-node-upgrades-indefinite.
EXCLUSION_NAME_MAX = 63
_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9 ._-]*[A-Za-z0-9])?$")


def check_exclusions(gcp: GcpSpec, out: _Collector) -> None:
    """Every maintenance exclusion: a name of at most 63 characters, unique; one of end and untilEndOfSupport; an end
    after the start and within what the scope allows."""
    gke = gcp.cluster
    names: set[str] = set()
    minor = None
    if gke.min_master_version is not None:
        try:
            minor = parse_gke_version(gke.min_master_version)[1]
        except ValueError:
            minor = None  # an alias (latest): refused or resolved elsewhere
    versions = load_gke_versions()
    for k, ex in enumerate(gke.maintenance.exclusions):
        where = f".gcp.cluster.maintenance.exclusions[{k}]"
        if len(ex.name) > EXCLUSION_NAME_MAX:
            out.add(f"{where}.name", "maintenance-exclusion-name",
                    f"an exclusion name is at most {EXCLUSION_NAME_MAX} characters; this one has {len(ex.name)}")
        elif not _NAME_RE.fullmatch(ex.name):
            out.add(f"{where}.name", "maintenance-exclusion-name",
                    f"'{ex.name}' is not an exclusion name: letters, digits, spaces, '.', '_' and '-', starting and "
                    "ending with a letter or digit")
        if ex.name in names:
            out.add(f"{where}.name", "maintenance-exclusion-name",
                    f"exclusion name '{ex.name}' is used twice (GKE keys exclusions by name)")
        names.add(ex.name)
        if (ex.end is None) == (not ex.until_end_of_support):
            out.add(where, "maintenance-exclusion",
                    "give exactly one of end and untilEndOfSupport (GKE takes an end time or the end-of-support "
                    "behavior)")
            continue
        if ex.until_end_of_support:
            if ex.scope == "NO_UPGRADES":
                out.add(f"{where}.untilEndOfSupport", "maintenance-exclusion",
                        "a NO_UPGRADES exclusion lasts at most 30 days, never until end of support; use "
                        "NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES")
            continue
        assert ex.end is not None
        if ex.end <= ex.start:
            out.add(f"{where}.end", "maintenance-exclusion", "an exclusion ends after it starts")
        elif ex.scope == "NO_UPGRADES" and ex.end - ex.start > NO_UPGRADES_MAX:
            out.add(f"{where}.end", "maintenance-exclusion",
                    f"a NO_UPGRADES exclusion lasts at most 30 days (this one {(ex.end - ex.start).days} days; use "
                    "NO_MINOR_OR_NODE_UPGRADES for longer)")
        elif ex.scope != "NO_UPGRADES" and minor is not None and gke.release_channel != "EXTENDED":
            eos = versions.end_of_standard_support.get(f"1.{minor}")
            # Only an exclusion that starts while the minor is supported and outlasts it: the version rules speak
            # to a minor already out of support (components/spec/rules/gcp.py, gke-version-*).
            if eos is not None and ex.start.date().isoformat() <= eos[0] < ex.end.date().isoformat():
                out.add(f"{where}.end", "maintenance-exclusion",
                        f"a {ex.scope} exclusion lasts at most until the end of support of the cluster's minor "
                        f"version: 1.{minor} (minMasterVersion) until {eos[0]} (components/catalog/gke_versions.yaml, "
                        f"{eos[1]}); end it by then, or set untilEndOfSupport: true instead of end")
