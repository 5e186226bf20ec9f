"""``caldera node list``: each node's GPU cards with the pods, memory and cores its bound pods
were given, one row per card; nodes without cards on one row."""

from __future__ import annotations

from caldera.api.core import Node, Pod, PodSpec
from caldera.api.meta import ObjectMeta
from caldera.api.vgpu import IDS, REGISTER
from cli.main import build_parser
from cli.node import HEADERS, card_objects, card_rows, node_cards
from cli.output import render_table

REGISTER_TEXT = (
    "GPU-a,10,8000,NVIDIA-A100,true,hami-core:GPU-b,10,8000,NVIDIA-A100,false,hami-core:"
)


def pod(name: str, node: str, ids: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", annotations={IDS: ids}),
        spec=PodSpec(node_name=node),
    )


def test_rows_per_card_with_what_pods_hold() -> None:
    """Pods' ids annotations add up per card; an unhealthy card says so; a node without
    registered cards is one row; pods not bound count nowhere."""
    nodes = [
        Node(metadata=ObjectMeta(name="gpu-1", annotations={REGISTER: REGISTER_TEXT})),
        Node(metadata=ObjectMeta(name="cpu-1")),
    ]
    pods = [
        pod("a", "gpu-1", "GPU-a,NVIDIA,3000,30:"),
        pod("b", "gpu-1", "GPU-a,NVIDIA,3000,0:"),
        pod("c", "", "GPU-b,NVIDIA,8000,100:"),
    ]
    cards = node_cards(nodes, pods)
    assert card_rows(cards) == [
        ("cpu-1", "-", "", "", "", ""),
        ("gpu-1", "GPU-a", "NVIDIA-A100", "2/10", "6000/8000", "30/100"),
        ("gpu-1", "GPU-b", "NVIDIA-A100 (unhealthy)", "0/10", "0/8000", "0/100"),
    ]
    table = render_table(HEADERS, card_rows(cards))
    assert table.splitlines()[0].split() == [
        "NODE",
        "CARD",
        "TYPE",
        "PODS",
        "MEMORY",
        "(MiB)",
        "CORES",
    ]
    listed = card_objects(cards)
    assert listed[1]["cards"][0]["memoryUsedMiB"] == 6000
    assert listed[0]["cards"] == []


def test_the_command_is_registered() -> None:
    """``caldera node list`` parses, with -o json|yaml."""
    args = build_parser("node").parse_args(["node", "list", "-o", "json"])
    assert args.output == "json"
