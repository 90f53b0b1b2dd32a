"""Regions the blueprint knows. AWS: the prefix of each region's availability-zone IDs (``use1-az4``).

Zone names (``us-east-1a``) are shuffled per account; zone IDs name the same physical zone everywhere,
which is how Capacity Blocks and ODCRs are sold. The data lives in ``aws_regions.yaml`` with its source.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from components.catalog import yaml_files

REGIONS_FILE = Path(__file__).with_name("aws_regions.yaml")


@lru_cache(maxsize=1)
def _prefixes() -> dict[str, str]:
    data = yaml_files.load_file(REGIONS_FILE)
    return {str(region): str(raw["az_id_prefix"]) for region, raw in data["regions"].items()}


def zone_id_prefix(region: str) -> str | None:
    """The AZ ID prefix of a region (``us-east-1`` -> ``use1``), or None when the catalog lacks it."""
    return _prefixes().get(region)


def known_regions() -> list[str]:
    """Every region in the catalog."""
    return sorted(_prefixes())


GCP_REGIONS_FILE = Path(__file__).with_name("gcp_regions.yaml")


@lru_cache(maxsize=1)
def known_gcp_regions() -> list[str]:
    """Every Google Cloud region in ``gcp_regions.yaml`` (with its source)."""
    data = yaml_files.load_file(GCP_REGIONS_FILE)
    return sorted(str(region) for region in data["regions"])
