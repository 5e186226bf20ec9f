"""Volcano's topology.volcano.sh/v1alpha1 HyperNode as msgspec models (Volcano v1.12+).

A HyperNode is one network island (a rack under one leaf switch, a spine, an NVLink domain) of
tier ``spec.tier`` (1 = the closest). Its ``members`` are Nodes or lower-tier HyperNodes, each
chosen by exactly one selector: an exact name, a regular expression over names, or labels.
``status.nodeCount`` is the number of nodes its Node members select. Cluster-scoped, short name
``hn``; the CRD in the chart is generated from these models (``caldera.api.crdgen``).

Volcano's CRD also carries two CEL rules on a selector (one of the three must be set, at most
one may be); Caldera's generator emits no CEL, so the ``/hypernodes/validate`` webhook says both
(``webhooks.hypernodes``).
"""

from __future__ import annotations

import enum
from typing import Annotated, Final

import msgspec

from caldera.api.meta import (
    DNS1123_SUBDOMAIN,
    Condition,
    Int64,
    LabelSelector,
    Model,
    ObjectMeta,
    crd,
    type_meta,
)

TOPOLOGY_API_VERSION: Final = "topology.volcano.sh/v1alpha1"
# The label a discovery source puts on the HyperNodes it owns (Volcano's
# NetworkTopologySourceLabelKey); the label source's value is "label".
NETWORK_TOPOLOGY_SOURCE_KEY: Final = "volcano.sh/network-topology-source"
# The PodGroup annotation naming the HyperNode a job's pods are placed under (the lowest one
# holding them all), as Volcano's scheduler writes it.
JOB_ALLOCATED_HYPERNODE_KEY: Final = "volcano.sh/job-allocated-hypernode"


class MemberType(enum.StrEnum):
    """spec.members[].type."""

    NODE = "Node"
    HYPERNODE = "HyperNode"


class ExactMatch(Model, frozen=True):
    name: Annotated[
        str, crd(required=True, min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)
    ] = ""


class RegexMatch(Model, frozen=True):
    pattern: Annotated[str, crd(required=True, min_length=1)] = ""


class MemberSelector(Model, frozen=True):
    """How a member is chosen: exactly one of the three."""

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None


class MemberSpec(Model, frozen=True):
    type: Annotated[str, crd(required=True, enum=MemberType)] = ""
    selector: MemberSelector = MemberSelector()


class HyperNodeSpec(Model, frozen=True):
    tier: Annotated[int, crd(required=True, minimum=0)] = 0
    tier_name: Annotated[str, crd(max_length=253)] = ""
    members: Annotated[tuple[MemberSpec, ...], crd(min_items=1)] = ()


class HyperNodeStatus(Model, frozen=True):
    conditions: tuple[Condition, ...] = ()
    node_count: Annotated[Int64, crd(minimum=0)] = 0


class HyperNode(Model, frozen=True):
    """topology.volcano.sh/v1alpha1 HyperNode (hn), cluster-scoped."""

    api_version: str = type_meta(TOPOLOGY_API_VERSION)
    kind: str = type_meta("HyperNode")
    metadata: ObjectMeta = ObjectMeta()
    spec: HyperNodeSpec = HyperNodeSpec()
    status: HyperNodeStatus = HyperNodeStatus()


HYPERNODE_DECODER: Final = msgspec.json.Decoder(HyperNode)
