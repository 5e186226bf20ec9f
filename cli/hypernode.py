"""``caldera hypernode list|get``: Volcano HyperNodes (topology.volcano.sh) as a tree of network
islands with their free resources (``cli.topology_view``); ``-o json|yaml`` prints the objects.

``list`` draws every tree from its roots; ``get NAME`` draws the tree under one HyperNode. The
free resources come from the nodes and the pods bound to them, read once.
"""

from __future__ import annotations

import argparse
import sys

from caldera.api.kinds import HYPERNODE, NODE, POD
from caldera.api.topology_tree import build_tree
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from cli import output
from cli.cluster import get_raw, list_raw, not_found, run
from cli.commands import add_connection_args, add_output_arg, usage
from cli.errors import CliError
from cli.topology_view import render_tree
from scheduler.framework.hypernodes import island_resources
from scheduler.snapshot import build_cluster


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera hypernode`` and its subcommands."""
    hn = sub.add_parser(
        "hypernode",
        aliases=["hn"],
        help="show the HyperNode tree with free resources per island",
        description="Volcano HyperNodes (topology.volcano.sh): network islands by tier.",
    )
    hn.set_defaults(handler=lambda _args: usage(hn))
    cmds = hn.add_subparsers(dest="hypernode_command", metavar="COMMAND")
    p = cmds.add_parser("list", help="every HyperNode tree", description="List HyperNodes.")
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_list)
    p = cmds.add_parser("get", help="one HyperNode's tree", description="Show one HyperNode.")
    p.add_argument("hypernode", nargs="?", default="", metavar="NAME", help="the HyperNode")
    p.add_argument("-N", "--name", default="", help="the name of the HyperNode")
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_get)


async def _show(client: KubeClient, args: argparse.Namespace, name: str | None) -> int:
    hypernodes, raw, _ = await list_raw(client, HYPERNODE)
    if name is not None and args.output in ("json", "yaml"):
        try:
            _, one = await get_raw(client, HYPERNODE, name)
        except NotFound as exc:
            raise not_found(f"hypernode {name}", exc) from None
        sys.stdout.write(output.dump(one, args.output))
        return 0
    if args.output in ("json", "yaml"):
        shown = [raw[h.metadata.uid] for h in sorted(hypernodes, key=lambda h: h.metadata.name)]
        sys.stdout.write(output.dump(output.as_list(shown), args.output))
        return 0
    nodes, _, _ = await list_raw(client, NODE)
    pods, _, _ = await list_raw(
        client, POD, field_selector="status.phase!=Succeeded,status.phase!=Failed"
    )
    cluster, _ = build_cluster(pods=pods, nodes=nodes, podgroups=(), queues=())
    tree = build_tree(hypernodes, {n.metadata.name: n.metadata.labels for n in nodes})
    if name is not None and name not in tree.islands:
        raise CliError(f'hypernode "{name}" not found')
    resources = {n: island_resources(cluster.nodes, i.nodes) for n, i in tree.islands.items()}
    roots = [name] if name is not None else tree.roots()
    sys.stdout.write(render_tree(tree, resources, roots))
    for problem in tree.problems:
        sys.stderr.write(f"warning: {problem}\n")
    return 0


def _list(args: argparse.Namespace) -> int:
    return run(args, lambda client: _show(client, args, None))


def _get(args: argparse.Namespace) -> int:
    name: str = args.name or args.hypernode
    if not name:
        raise CliError("hypernode name must be specified (NAME or -N NAME)")
    return run(args, lambda client: _show(client, args, name))
