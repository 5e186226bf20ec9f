"""Label-based HyperNode discovery, pure (controllers.hypernode.discovery)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.topology import NETWORK_TOPOLOGY_SOURCE_KEY
from caldera.api.topology_tree import build_tree
from controllers.hypernode.discovery import (
    DiscoveryConfigError,
    LabelTopology,
    discovered,
    hypernode_name,
    owned,
    parse_discovery,
    plan,
)
from unit.topology_fixtures import exact, hypernode

CONF = {
    "networkTopologyDiscovery": [
        {"source": "ufm", "enabled": True, "config": {"endpoint": "https://ufm"}},
        {
            "source": "label",
            "enabled": True,
            "config": {
                "networkTopologyTypes": {
                    "gpu": [
                        {"nodeLabel": "spine"},
                        {"nodeLabel": "rack"},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                }
            },
        },
    ]
}
GPU = LabelTopology("gpu", ("rack", "spine"))


def test_volcano_configuration_parses_lowest_tier_first() -> None:
    """The hostname key is dropped; ufm is not a label source."""
    assert parse_discovery(CONF) == [GPU]
    assert parse_discovery(None) == []
    disabled = {"networkTopologyDiscovery": [{**CONF["networkTopologyDiscovery"][1]}]}
    disabled["networkTopologyDiscovery"][0]["enabled"] = False
    assert parse_discovery(disabled) == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"networkTopologyDiscovery": {}}, "networkTopologyDiscovery: must be a list"),
        (
            [{"source": "label", "enabled": True, "config": {"networkTopologyTypes": []}}],
            "networkTopologyDiscovery[0].config.networkTopologyTypes: must be a mapping",
        ),
        (
            [
                {
                    "source": "label",
                    "enabled": True,
                    "config": {"networkTopologyTypes": {"a": [{"nodeLabel": "x"}] * 2}},
                }
            ],
            "networkTopologyTypes.a: there are duplicate labels",
        ),
        (
            [
                {
                    "source": "label",
                    "enabled": True,
                    "config": {"networkTopologyTypes": {"a" * 21: [{"nodeLabel": "x"}]}},
                }
            ],
            "the name is longer than 20",
        ),
        (
            [{"source": "label", "enabled": True, "config": {"networkTopologyTypes": {"a": [1]}}}],
            "must be a list of {nodeLabel: <key>}",
        ),
    ],
)
def test_bad_configuration_names_the_field(doc: Any, message: str) -> None:
    with pytest.raises(DiscoveryConfigError, match=re.escape(message)):
        parse_discovery(doc)


def nodes() -> dict[str, dict[str, str]]:
    return {
        "n0": {"rack": "r0", "spine": "s0"},
        "n1": {"rack": "r0", "spine": "s0"},
        "n2": {"rack": "r1", "spine": "s0"},
        "n3": {"rack": "r2"},  # no spine: a rack at the top
        "n4": {"spine": "s0"},  # no rack: the node stops there
    }


def test_labels_become_racks_under_spines() -> None:
    """Racks hold nodes by name, spines hold racks; the tree resolves to the nodes."""
    found = discovered([GPU], nodes())
    r0 = hypernode_name("gpu", 1, "rack", "r0")
    s0 = hypernode_name("gpu", 2, "spine", "s0")
    assert found[r0].spec.tier == 1
    assert found[r0].spec.tier_name == "rack"
    assert found[r0].metadata.labels == {NETWORK_TOPOLOGY_SOURCE_KEY: "label", "rack": "r0"}
    assert found[s0].spec.tier == 2
    tree = build_tree(list(found.values()), nodes())
    assert tree.islands[s0].nodes == {"n0", "n1", "n2"}
    assert tree.islands[hypernode_name("gpu", 1, "rack", "r2")].parent is None
    assert len(found) == 4
    assert r0.startswith("hypernode-gpu-tier1-")
    assert hypernode_name("gpu", 1, "rack", "r0") == r0  # deterministic


def test_plan_never_touches_hypernodes_it_does_not_own() -> None:
    """Creates what is missing, updates owned ones that drifted, deletes owned ones no node
    describes any more, and skips a name a user's HyperNode holds."""
    desired = discovered([GPU], nodes())
    r0 = hypernode_name("gpu", 1, "rack", "r0")
    r1 = hypernode_name("gpu", 1, "rack", "r1")
    stale = hypernode_name("gpu", 1, "rack", "gone")
    mine = msgspec.structs.replace(
        desired[r0],
        metadata=msgspec.structs.replace(desired[r0].metadata, resource_version="7"),
        spec=msgspec.structs.replace(desired[r0].spec, members=(exact("Node", "n9"),)),
    )
    users = hypernode(r1, 1, [exact("Node", "n2")])
    old = msgspec.structs.replace(
        desired[r0],
        metadata=ObjectMeta(
            name=stale, labels={NETWORK_TOPOLOGY_SOURCE_KEY: "label", "rack": "gone"}
        ),
    )
    manual = hypernode("my-rack", 1, [exact("Node", "n0")])
    todo = plan(desired, [mine, users, old, manual])
    assert [h.metadata.name for h in todo.update] == [r0]
    assert todo.update[0].metadata.resource_version == "7"
    assert todo.update[0].spec == desired[r0].spec
    assert todo.skipped == [r1]
    assert [h.metadata.name for h in todo.delete] == [stale]
    assert {h.metadata.name for h in todo.create} == set(desired) - {r0, r1}
    assert plan(desired, [*todo.create, *todo.update, users, manual]).update == []


def test_an_administrators_hypernode_with_the_source_label_is_not_the_discoverys() -> None:
    """The source label alone is no proof: an administrator's HyperNode written by hand with
    it (or copied from a discovered one and renamed, or named like one with another suffix) is
    neither updated nor deleted, and its name is skipped when the discovery wants it."""
    desired = discovered([GPU], nodes())
    r0 = hypernode_name("gpu", 1, "rack", "r0")
    source = {NETWORK_TOPOLOGY_SOURCE_KEY: "label"}
    by_hand = hypernode("admin-rack", 1, [exact("Node", "n0")], labels=source)
    copied = msgspec.structs.replace(
        desired[r0], metadata=ObjectMeta(name="rack-copy", labels={**source, "rack": "r0"})
    )
    lookalike = hypernode(
        "hypernode-gpu-tier1-00000", 1, [exact("Node", "n1")], labels={**source, "rack": "x"}
    )
    taken = hypernode(r0, 1, [exact("Node", "n9")], tier_name="rack", labels=source)
    todo = plan(desired, [by_hand, copied, lookalike, taken])
    assert todo.delete == []
    assert todo.update == []
    assert todo.skipped == [r0]
    assert r0 not in {h.metadata.name for h in todo.create}
    assert all(owned(h) for h in desired.values())
