"""EFA interface layouts: every interface the type has, in AWS's current layout."""

from __future__ import annotations

import pytest

from components.aws.launch import NetworkInterface, efa_layout
from components.catalog import load_aws_catalog

EXPECTED_EFA = {
    "p4d.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "g6e.48xlarge": 4,
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
        for fact in (facts.vcpu, facts.memory_gib, facts.efa_interfaces, facts.network_cards, facts.network_gbps):
            assert fact.status in {"confirmed", "secondary", "unconfirmed"}, facts.instance_type
            assert fact.as_of, facts.instance_type
            if fact.value is not None:
                assert fact.source and fact.status != "unconfirmed", facts.instance_type


def test_efa_count_never_exceeds_network_cards() -> None:
    for facts in load_aws_catalog().values():
        assert facts.efa_count <= (facts.network_cards.value or 0), facts.instance_type
