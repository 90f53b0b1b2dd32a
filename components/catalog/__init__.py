"""Hardware facts and pinned charts the program needs at build time, read from data files that cite sources."""

from components.catalog.charts import (
    AddonPin,
    ChartPin,
    addon_names,
    load_addon_pins,
    load_charts,
)
from components.catalog.instances import Fact, InstanceFacts, load_aws_catalog
from components.catalog.regions import known_regions, zone_id_prefix
from components.catalog.versions import EksVersion, load_eks_versions, supported_eks_versions

__all__ = [
    "AddonPin", "ChartPin", "EksVersion", "Fact", "InstanceFacts", "addon_names", "known_regions",
    "load_addon_pins", "load_aws_catalog", "load_charts", "load_eks_versions", "supported_eks_versions",
    "zone_id_prefix",
]
