"""Hardware facts the program needs at build time, read from data files that cite their sources."""

from components.catalog.instances import Fact, InstanceFacts, load_aws_catalog

__all__ = ["Fact", "InstanceFacts", "load_aws_catalog"]
