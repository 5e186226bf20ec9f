"""``caldera node list``: the nodes with their GPU cards as HAMi's device plugin registers them
(``volcano.sh/node-vgpu-register``) and what the pods bound there were given of each
(``volcano.sh/vgpu-ids-new``; docs/gpu-sharing.md), one row per card:

    NODE   CARD      TYPE         PODS   MEMORY (MiB)   CORES
    gpu-1  GPU-ab12  NVIDIA-A100  2/10   6000/32768     30/100
    cpu-1  -

A node without registered cards has one row with ``-``. ``-o json|yaml`` prints the same
figures as objects. The figures are what pods were given at bind, not what they use.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from caldera.api.core import Node, Pod
from caldera.api.kinds import NODE, POD
from caldera.api.vgpu import IDS, REGISTER, CardInUse, cards_in_use
from caldera.kube.client import KubeClient
from cli import output
from cli.cluster import list_raw, run
from cli.commands import add_connection_args, add_output_arg, usage

HEADERS = ("NODE", "CARD", "TYPE", "PODS", "MEMORY (MiB)", "CORES")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera node`` and its subcommand."""
    node = sub.add_parser(
        "node",
        help="show nodes with their GPU cards and what pods hold of them",
        description="Nodes and their GPU cards (deviceshare, HAMi's device plugin).",
    )
    node.set_defaults(handler=lambda _args: usage(node))
    cmds = node.add_subparsers(dest="node_command", metavar="COMMAND")
    p = cmds.add_parser("list", help="every node, one row per GPU card", description="List nodes.")
    add_output_arg(p, wide=False)
    add_connection_args(p)
    p.set_defaults(handler=_list)


def node_cards(nodes: Iterable[Node], pods: Iterable[Pod]) -> dict[str, tuple[CardInUse, ...]]:
    """Each node's cards with what the pods bound there hold (a pure function of the
    objects)."""
    held: dict[str, list[str]] = {}
    for pod in pods:
        text = pod.metadata.annotations.get(IDS)
        if pod.spec.node_name and text:
            held.setdefault(pod.spec.node_name, []).append(text)
    return {
        n.metadata.name: cards_in_use(
            n.metadata.annotations.get(REGISTER, ""), held.get(n.metadata.name, [])
        )
        for n in sorted(nodes, key=lambda n: n.metadata.name)
    }


def card_rows(cards: dict[str, tuple[CardInUse, ...]]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = []
    for name, in_use in cards.items():
        if not in_use:
            rows.append((name, "-", "", "", "", ""))
        for use in in_use:
            card = use.card
            rows.append(
                (
                    name,
                    card.uuid,
                    card.type if card.healthy else f"{card.type} (unhealthy)",
                    f"{use.pods}/{card.split}",
                    f"{use.memory}/{card.memory}",
                    f"{use.cores}/100",
                )
            )
    return rows


def card_objects(cards: dict[str, tuple[CardInUse, ...]]) -> list[dict[str, Any]]:
    return [
        {
            "node": name,
            "cards": [
                {
                    "uuid": u.card.uuid,
                    "type": u.card.type,
                    "healthy": u.card.healthy,
                    "split": u.card.split,
                    "memoryMiB": u.card.memory,
                    "pods": u.pods,
                    "memoryUsedMiB": u.memory,
                    "coresUsed": u.cores,
                }
                for u in in_use
            ],
        }
        for name, in_use in cards.items()
    ]


async def _show(client: KubeClient, args: argparse.Namespace) -> int:
    nodes, _, _ = await list_raw(client, NODE)
    pods, _, _ = await list_raw(
        client, POD, field_selector="status.phase!=Succeeded,status.phase!=Failed"
    )
    cards = node_cards(nodes, pods)
    if args.output in ("json", "yaml"):
        sys.stdout.write(output.dump({"items": card_objects(cards)}, args.output))
        return 0
    sys.stdout.write(output.render_table(HEADERS, card_rows(cards)))
    return 0


def _list(args: argparse.Namespace) -> int:
    return run(args, lambda client: _show(client, args))
