"""EFA interface layouts: every interface the type has, in AWS's current layout."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.aws.launch import NetworkInterface, efa_layout
from components.catalog import load_aws_catalog
from components.catalog.instances import CATALOG_FILE
from tests.conftest import CatalogEdit

EXPECTED_EFA = {
    "p4d.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "g6e.48xlarge": 4,
    "g6e.24xlarge": 2,
    "p5.4xlarge": 1,
}


@pytest.mark.parametrize(("instance_type", "count"), sorted(EXPECTED_EFA.items()))
def test_layout_wires_every_efa_interface(instance_type: str, count: int) -> None:
    layout = efa_layout(load_aws_catalog()[instance_type])
    assert layout[0] == NetworkInterface(network_card_index=0, device_index=0, interface_type=None)
    assert layout[1] == NetworkInterface(network_card_index=0, device_index=1, interface_type="efa-only")
    assert layout[2:] == [NetworkInterface(card, 0, "efa-only") for card in range(1, count)]
    assert sum(ni.is_efa for ni in layout) == count
    # one EFA per network card, never more cards than the type has
    efa_cards = [ni.network_card_index for ni in layout if ni.is_efa]
    assert len(set(efa_cards)) == count
    assert max(efa_cards) < (load_aws_catalog()[instance_type].network_cards.value or 0)


def test_types_without_efa_declare_no_interfaces() -> None:
    assert efa_layout(load_aws_catalog()["g6.xlarge"]) == []
    assert efa_layout(load_aws_catalog()["m6i.2xlarge"]) == []


def test_single_card_efa_type_gets_one_efa_beside_the_primary() -> None:
    assert efa_layout(load_aws_catalog()["g5.48xlarge"]) == [
        NetworkInterface(0, 0, None), NetworkInterface(0, 1, "efa-only"),
    ]


def test_every_catalog_figure_has_a_source_and_date() -> None:
    for facts in load_aws_catalog().values():
        for fact in (facts.vcpu, facts.memory_gib, facts.efa_interfaces, facts.network_cards, facts.network_gbps,
                     facts.capacity_blocks, facts.mig):
            assert fact.status in {"confirmed", "secondary", "unconfirmed"}, facts.instance_type
            assert fact.as_of, facts.instance_type
            if fact.value is not None:
                assert fact.source and fact.status != "unconfirmed", facts.instance_type
            else:  # unknown stays null, and says so
                assert fact.status == "unconfirmed", facts.instance_type


def _raw_instances() -> dict[str, Any]:
    instances: dict[str, Any] = yaml.safe_load(CATALOG_FILE.read_text(encoding="utf-8"))["instances"]
    return instances


def test_every_gpu_type_has_efa_cards_and_nvme_confirmed_or_unknown() -> None:
    # Issue 24: each GPU type's EFA interfaces, network cards and local NVMe either read in a source (confirmed, with
    # it) or left null and unconfirmed; never a figure of lesser standing that the program would wire. The one
    # exception is NVMe's split into disks (p5en: secondary): the program wires only RAID0 of whatever instance store
    # the node has, whose existence EC2's confirmed total (InstanceStorageInfo.TotalSizeInGB) shows.
    raw = _raw_instances()
    gpu_types = [f for f in load_aws_catalog().values() if f.gpu_count]
    assert len(gpu_types) >= 37
    for facts in gpu_types:
        for fact in (facts.efa_interfaces, facts.network_cards):
            assert (fact.status, fact.value is None) in {("confirmed", False), ("unconfirmed", True)}, \
                facts.instance_type
        nvme = raw[facts.instance_type]["local_nvme"]
        if nvme["status"] == "secondary":
            assert "TotalSizeInGB" in nvme["source"] and nvme["disks"] * nvme["disk_gb"] > 0, facts.instance_type
        elif nvme["status"] == "confirmed":
            assert nvme.get("source") and nvme["disks"] is not None and nvme["disk_gb"] is not None, \
                facts.instance_type
        else:
            assert nvme["status"] == "unconfirmed" and facts.nvme_disks is None and facts.nvme_disk_gb is None, \
                facts.instance_type
            assert facts.has_local_nvme is None, facts.instance_type


def test_every_cpu_size_states_its_local_nvme() -> None:
    raw = _raw_instances()
    for facts in load_aws_catalog().values():
        if not facts.gpu_count:
            nvme = raw[facts.instance_type]["local_nvme"]
            assert nvme["status"] == "confirmed" and nvme.get("source") and facts.has_local_nvme is False, \
                facts.instance_type


def test_every_efa_count_and_network_card_count_is_read_in_ec2s_own_data() -> None:
    # CPU sizes too: the program wires (or refuses) EFA on any group, so no count rests on a secondary source.
    for facts in load_aws_catalog().values():
        for fact in (facts.efa_interfaces, facts.network_cards):
            assert fact.status == "confirmed" and fact.value is not None, facts.instance_type
        assert facts.efa_interfaces.source.startswith("EC2 DescribeInstanceTypes"), facts.instance_type


# GPU memory is the marketed size per GPU (what NVIDIA and AWS state), one figure per GPU model; the EC2 API's GpuInfo
# MiB figures are rounded down and must not leak in (A10G and L4 would read 22, L40S 44, B200 179).
MARKETED_GB = {"T4": 16, "A10G": 24, "L4": 24, "L40S": 48, "A100 40GB": 40, "A100 80GB": 80, "H100": 80, "H200": 141,
               "B200": 180}


def test_gpu_memory_is_the_marketed_size_per_gpu_model() -> None:
    models = set()
    for facts in load_aws_catalog().values():
        if not facts.gpu_count:
            assert facts.gpu_model is None and facts.gpu_memory_gib_each is None, facts.instance_type
            continue
        model = str(facts.gpu_model).removeprefix("NVIDIA ")
        key = next(k for k in MARKETED_GB if model == k or model.startswith(f"{k} "))
        assert facts.gpu_memory_gib_each == MARKETED_GB[key], facts.instance_type
        models.add(key)
    assert {"T4", "A10G", "L4", "L40S", "H100", "H200", "B200"} <= models


def test_a_figure_that_is_not_a_whole_number_is_refused(edited_aws_catalog: CatalogEdit) -> None:
    def fractional(instances: dict[str, Any]) -> None:
        instances["m6a.8xlarge"]["network_gbps"] = {"value": 12.5, "status": "confirmed", "source": "gp.html",
                                                    "as_of": "2026-12-01"}

    edited_aws_catalog(fractional)
    with pytest.raises(ValueError) as err:
        load_aws_catalog()
    assert str(err.value) == ("aws_instances.yaml: m6a.8xlarge.network_gbps.value: 12.5 is not a whole number; "
                              "record null with status unconfirmed and give the figure in a note")


def test_more_efa_interfaces_than_network_cards_is_refused(edited_aws_catalog: CatalogEdit) -> None:
    def too_many(instances: dict[str, Any]) -> None:
        instances["g6e.24xlarge"]["efa_interfaces"]["value"] = 3

    edited_aws_catalog(too_many)
    with pytest.raises(ValueError) as err:
        load_aws_catalog()
    assert str(err.value) == ("aws_instances.yaml: g6e.24xlarge: efa_interfaces (3) exceeds network_cards (2); each "
                              "network card takes at most one EFA interface")


def test_efa_count_never_exceeds_network_cards() -> None:
    for facts in load_aws_catalog().values():
        assert facts.efa_count <= (facts.network_cards.value or 0), facts.instance_type
