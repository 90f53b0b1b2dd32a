"""Hardware facts and pinned charts the program needs at build time, read from data files that cite sources."""

from components.catalog.charts import ChartPin, load_charts
from components.catalog.instances import Fact, InstanceFacts, load_aws_catalog

__all__ = ["ChartPin", "Fact", "InstanceFacts", "load_aws_catalog", "load_charts"]
