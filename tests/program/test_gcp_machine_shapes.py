"""The CPU shapes cluster-toolkit's GPU blueprints run beside the GPUs (the e2-standard-16 system pool of its A3
Ultra blueprint, the c2 / n2 Slurm controller and login shapes): in the catalog with their vCPU and memory and the
source they were read in, accepted as node pools, and priced from the price catalog."""

from __future__ import annotations

import copy

import pytest

from blueprint.cost.engine import price_graph
from blueprint.cost.prices import prices_for
from components.catalog.gcp_machines import load_gcp_catalog
from components.spec import parse_spec
from tests.conftest import raw_stack_config, run_spec

FILE = "stacks/Pulumi.prod-gcp.yaml"
H = 730  # hours a month (the engine's HOURS_PER_MONTH)
# (vCPU, memory GB): Cyclenerd pricing.yml @fd66b26f compute.instance.<type>.cpu / .ram
SHAPES = {"e2-standard-16": (16, 64), "n2-standard-2": (2, 8), "n2-standard-4": (4, 16),
          "c2-standard-4": (4, 16), "c2-standard-8": (8, 32), "c2-standard-16": (16, 64)}
# us-central1 on-demand and Spot USD per hour, the same file (compute.instance.<type>.cost.us-central1.hour/_spot)
PRICES = {"e2-standard-16": (0.53609136, 0.321696), "n2-standard-2": (0.097118, 0.04606),
          "n2-standard-4": (0.194236, 0.09212), "c2-standard-4": (0.208808, 0.09968),
          "c2-standard-8": (0.417616, 0.19936), "c2-standard-16": (0.835232, 0.39872)}


@pytest.mark.parametrize("machine", sorted(SHAPES))
def test_the_shape_is_in_the_catalog_with_its_source(machine: str) -> None:
    facts = load_gcp_catalog()[machine]
    assert (facts.vcpu.value, facts.memory_gib.value) == SHAPES[machine]
    assert facts.vcpu.status == facts.memory_gib.status == "secondary"
    assert "pricing.yml @fd66b26f" in facts.vcpu.source and facts.vcpu.as_of
    assert facts.gpu_count == 0 and facts.gpudirect == "none" and not facts.gpu_nic_count
    assert facts.network_gbps.value is None and facts.network_gbps.status == "unconfirmed"  # egress not read


@pytest.mark.parametrize("machine", sorted(PRICES))
def test_the_shape_has_its_on_demand_and_spot_price(machine: str) -> None:
    prices = prices_for("gcp")
    on_demand, spot = prices[f"compute_on_demand.{machine}"], prices[f"compute_spot.{machine}"]
    assert (on_demand.usd, on_demand.status, on_demand.as_of) == (PRICES[machine][0], "secondary", "2026-07-30")
    assert (spot.usd, spot.status) == (PRICES[machine][1], "stale")  # every Spot reading is stale
    assert "@fd66b26f" in on_demand.source and "@fd66b26f" in spot.source


def test_a_stack_with_the_toolkit_shapes_loads_and_prices_them() -> None:
    spec = copy.deepcopy(raw_stack_config("prod-gcp")["gpu-cluster:spec"])
    spec["gcp"]["nodePools"][0]["machineType"] = "e2-standard-16"
    spec["gcp"]["nodePools"].append({"name": "slurm-ctl", "machineType": "c2-standard-8", "minSize": 1,
                                     "desiredSize": 1, "maxSize": 1})
    parsed = parse_spec(spec, FILE, provider_region="us-central1")
    assert [p.machine_type for p in parsed.gcp_spec().node_pools] == ["e2-standard-16", "a3-megagpu-8g",
                                                                       "n2-standard-16", "g2-standard-8",
                                                                       "c2-standard-8"]
    report = price_graph(run_spec(spec, "prod-gcp").graph)
    hours = {r.name: r.components[0] for r in report.resources if r.name in ("nodepool-system-pool",
                                                                              "nodepool-slurm-ctl-pool")}
    assert (hours["nodepool-system-pool"].price_key, hours["nodepool-system-pool"].cost_usd) == (
        "compute_on_demand.e2-standard-16", pytest.approx(3 * H * PRICES["e2-standard-16"][0]))
    assert (hours["nodepool-slurm-ctl-pool"].price_key, hours["nodepool-slurm-ctl-pool"].cost_usd) == (
        "compute_on_demand.c2-standard-8", pytest.approx(H * PRICES["c2-standard-8"][0]))
