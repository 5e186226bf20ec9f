"""Volcano's label-based HyperNode discovery, pure: configuration in, HyperNodes to create,
update and delete out.

The configuration is Volcano's controller configuration (``volcano-controller.conf``)::

    networkTopologyDiscovery:
      - source: label
        enabled: true
        config:
          networkTopologyTypes:
            gpu:                                  # at most 20 characters
              - nodeLabel: topology.example.com/spine   # the highest tier first
              - nodeLabel: topology.example.com/rack
              - nodeLabel: kubernetes.io/hostname       # the node itself: not a HyperNode

For each type, the label keys above the last one are tiers, the lowest (just above the node)
tier 1. Nodes carrying the same value of a tier's key form one HyperNode of that tier: its
members are the nodes (tier 1, by exact name) or the HyperNodes of the tier below (by exact
name) that its nodes belong to. A node stops at the first key it lacks. Each HyperNode is
labelled ``volcano.sh/network-topology-source: label`` and ``<key>: <value>``, and carries the
key as its ``tierName``.

Names are ``hypernode-<type>-tier<N>-<suffix>`` as in Volcano, but the suffix is a hash of the
key and value instead of a random string, so a restart or a second replica derives the same
names (Caldera's deterministic child names). Only HyperNodes the discovery made are changed
or deleted (``owned``: the source label and a name derived from one of their labels):
HyperNodes a user wrote are never touched, even one that carries the source label, and a
discovered name already taken by one of them is skipped and reported. Other sources (ufm,
roce) are accepted in the file and not run: they talk to fabric managers Caldera does not
reach.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from caldera.api.meta import ObjectMeta
from caldera.api.topology import (
    NETWORK_TOPOLOGY_SOURCE_KEY,
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    MemberSelector,
    MemberSpec,
    MemberType,
)

LABEL_SOURCE: Final = "label"
MAX_TYPE_NAME: Final = 20


class DiscoveryConfigError(ValueError):
    """The discovery configuration is malformed; the message names the field."""


@dataclass(frozen=True)
class LabelTopology:
    """One network topology type: its tier label keys, tier 1 first."""

    name: str
    keys: tuple[str, ...]


def parse_discovery(doc: Any) -> list[LabelTopology]:
    """The enabled label source's topology types, from Volcano's controller configuration
    (the whole document, or its ``networkTopologyDiscovery`` list)."""
    if doc is None:
        return []
    entries = doc.get("networkTopologyDiscovery", []) if isinstance(doc, Mapping) else doc
    if not isinstance(entries, list):
        raise DiscoveryConfigError("networkTopologyDiscovery: must be a list of sources")
    out: list[LabelTopology] = []
    for i, entry in enumerate(entries):
        where = f"networkTopologyDiscovery[{i}]"
        if not isinstance(entry, Mapping):
            raise DiscoveryConfigError(f"{where}: must be a mapping with source and enabled")
        if entry.get("source") != LABEL_SOURCE or entry.get("enabled") is not True:
            continue
        types = (entry.get("config") or {}).get("networkTopologyTypes")
        types = {} if types is None else types
        if not isinstance(types, Mapping):
            raise DiscoveryConfigError(f"{where}.config.networkTopologyTypes: must be a mapping")
        for name, labels in sorted(types.items()):
            path = f"{where}.config.networkTopologyTypes.{name}"
            if len(str(name)) > MAX_TYPE_NAME:
                raise DiscoveryConfigError(f"{path}: the name is longer than {MAX_TYPE_NAME}")
            if not isinstance(labels, list) or not all(
                isinstance(x, Mapping) and isinstance(x.get("nodeLabel"), str) and x["nodeLabel"]
                for x in labels
            ):
                raise DiscoveryConfigError(f"{path}: must be a list of {{nodeLabel: <key>}}")
            keys = [x["nodeLabel"] for x in labels]
            if len(set(keys)) != len(keys):
                raise DiscoveryConfigError(f"{path}: there are duplicate labels")
            # The last key names the node itself; the others are tiers, highest first.
            out.append(LabelTopology(str(name), tuple(reversed(keys[:-1]))))
    return out


def _clean(text: str) -> str:
    return re.sub(r"[^a-z0-9-]", "", text.lower()) or "x"


def _suffix(key: str, value: str) -> str:
    return hashlib.sha256(f"{key}={value}".encode()).hexdigest()[:5]


def hypernode_name(topology: str, tier: int, key: str, value: str) -> str:
    return f"hypernode-{_clean(topology)}-tier{tier}-{_suffix(key, value)}"


_DISCOVERED_NAME: Final = re.compile(r"hypernode-[a-z0-9-]+-tier[0-9]+-([0-9a-f]{5})")


@dataclass
class _Found:
    tier: int
    key: str
    value: str
    members: set[str] = field(default_factory=set)


def discovered(
    topologies: Sequence[LabelTopology], nodes: Mapping[str, Mapping[str, str]]
) -> dict[str, HyperNode]:
    """The HyperNodes the node labels describe, by name."""
    found: dict[str, _Found] = {}
    for node in sorted(nodes):
        labels = nodes[node]
        for topology in topologies:
            member = node
            for tier, key in enumerate(topology.keys, start=1):
                value = labels.get(key)
                if value is None:
                    break
                name = hypernode_name(topology.name, tier, key, value)
                found.setdefault(name, _Found(tier, key, value)).members.add(member)
                member = name
    out: dict[str, HyperNode] = {}
    for name, f in found.items():
        kind = MemberType.NODE if f.tier == 1 else MemberType.HYPERNODE
        out[name] = HyperNode(
            metadata=ObjectMeta(
                name=name, labels={NETWORK_TOPOLOGY_SOURCE_KEY: LABEL_SOURCE, f.key: f.value}
            ),
            spec=HyperNodeSpec(
                tier=f.tier,
                tier_name=f.key,
                members=tuple(
                    MemberSpec(
                        type=kind.value,
                        selector=MemberSelector(exact_match=ExactMatch(name=m)),
                    )
                    for m in sorted(f.members)
                ),
            ),
        )
    return out


def owned(hypernode: HyperNode) -> bool:
    """Whether the label discovery made (and so may change or delete) this HyperNode: it
    carries the source label, and its name is one the discovery derives from a ``<key>:
    <value>`` label it carries (the hash suffix). The source label alone proves nothing: an
    administrator's HyperNode written by hand, or copied from a discovered one and renamed,
    has it too."""
    labels = hypernode.metadata.labels
    if labels.get(NETWORK_TOPOLOGY_SOURCE_KEY) != LABEL_SOURCE:
        return False
    match = _DISCOVERED_NAME.fullmatch(hypernode.metadata.name)
    return match is not None and any(
        _suffix(k, v) == match.group(1)
        for k, v in labels.items()
        if k != NETWORK_TOPOLOGY_SOURCE_KEY
    )


@dataclass(frozen=True)
class DiscoveryPlan:
    create: list[HyperNode]
    update: list[HyperNode]  # the existing object with the discovered spec and labels
    delete: list[HyperNode]
    skipped: list[str]  # discovered names taken by HyperNodes the discovery does not own


def plan(desired: Mapping[str, HyperNode], existing: Iterable[HyperNode]) -> DiscoveryPlan:
    """What to write so that the owned HyperNodes are exactly ``desired``."""
    current = {hn.metadata.name: hn for hn in existing}
    create, update, skipped = [], [], []
    for name, want in sorted(desired.items()):
        have = current.get(name)
        if have is None:
            create.append(want)
        elif not owned(have):
            skipped.append(name)
        elif have.spec != want.spec or any(
            have.metadata.labels.get(k) != v for k, v in want.metadata.labels.items()
        ):
            labels = {**have.metadata.labels, **want.metadata.labels}
            # The whole object as cached (finalizers, owners, annotations kept), its labels
            # and spec as discovered; its resourceVersion makes a stale read answer 409.
            update.append(
                msgspec.structs.replace(
                    have,
                    metadata=msgspec.structs.replace(have.metadata, labels=labels),
                    spec=want.spec,
                )
            )
    delete = [hn for name, hn in sorted(current.items()) if owned(hn) and name not in desired]
    return DiscoveryPlan(create, update, delete, skipped)
