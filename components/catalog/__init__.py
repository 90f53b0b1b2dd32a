"""Hardware facts and pinned charts the program needs at build time, read from data files that cite sources."""

from components.catalog.charts import (
    AddonPin,
    ChartPin,
    addon_names,
    load_addon_pins,
    load_charts,
)
from components.catalog.instances import Fact, InstanceFacts, load_aws_catalog
from components.catalog.regions import zone_id_prefix

__all__ = [
    "AddonPin", "ChartPin", "Fact", "InstanceFacts", "addon_names", "load_addon_pins", "load_aws_catalog",
    "load_charts", "zone_id_prefix",
]
