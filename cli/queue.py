"""``caldera queue create|delete|operate|list|get``: vcctl's queue commands.

Counts (Inqueue, Pending, Running, Unknown, Completed) are computed from PodGroups, as vcctl does
since Volcano v1.11 stopped writing them to the queue status. ``operate -a open|close`` creates an
OpenQueue / CloseQueue Command (in namespace ``default``, as vcctl does) that the queue controller
consumes; ``-a update`` merge-patches the weight.

Beyond vcctl: ``-o json|yaml|wide``; ``wide`` adds each queue's deserved resources, what it is
allocated, and its share (the largest allocated/deserved ratio), computed with the scheduler's own
proportion plugin over the cluster's nodes, PodGroups and pods, so it matches what the scheduler
sees at its next session.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from caldera.api.kinds import NODE, POD, PODGROUP, QUEUE
from caldera.api.meta import OwnerReference
from caldera.api.volcano import Action, PodGroup, Queue, QueueState
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, ApiError, NotFound
from cli import output
from cli.cluster import (
    CliError,
    add_connection_args,
    add_output_arg,
    already_exists,
    create_command,
    get_raw,
    list_raw,
    not_found,
    one_line,
    run,
    usage,
)

# Queue Commands are namespaced; vcctl puts them in "default".
COMMAND_NAMESPACE = "default"
OPERATE_ACTIONS = {"open": Action.OPEN_QUEUE, "close": Action.CLOSE_QUEUE}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera queue`` and its subcommands."""
    queue = sub.add_parser(
        "queue",
        help="create, delete, open, close, list and get queues (vcctl queue)",
        description="Volcano queues, with vcctl's commands, flags and columns.",
    )
    queue.set_defaults(handler=lambda _args: usage(queue))
    cmds = queue.add_subparsers(dest="queue_command", metavar="COMMAND")

    p = cmds.add_parser("create", help="create a queue", description="Create a queue.")
    p.add_argument("-n", "--name", default="test", help="the name of the queue (test)")
    p.add_argument("-w", "--weight", type=int, default=1, help="the weight of the queue (1)")
    p.add_argument(
        "-S", "--state", default="Open", choices=["Open", "Closed"], help="the state (Open)"
    )
    add_connection_args(p)
    p.set_defaults(handler=_create)

    p = cmds.add_parser("delete", help="delete a queue", description="Delete a queue.")
    _name_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_delete)

    p = cmds.add_parser(
        "operate",
        help="open, close or re-weight a queue",
        description="open and close create an OpenQueue / CloseQueue Command; update sets the "
        "weight.",
    )
    _name_arg(p)
    p.add_argument("-a", "--action", default="", help="open, close or update")
    p.add_argument("-w", "--weight", type=int, default=0, help="the new weight (update)")
    add_connection_args(p)
    p.set_defaults(handler=_operate)

    p = cmds.add_parser(
        "list", help="list queues", description="List queues with PodGroup counts per phase."
    )
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_list)

    p = cmds.add_parser("get", help="show one queue", description="Show one queue.")
    _name_arg(p)
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_get)


def _name_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--name", default="", help="the name of the queue")


def _need_name(args: argparse.Namespace) -> str:
    name: str = args.name
    if not name:
        raise CliError("queue name must be specified (-n NAME)")
    return name


def queue_body(name: str, weight: int, state: str) -> dict[str, object]:
    """The Queue `vcctl queue create` makes."""
    return {
        "apiVersion": QUEUE.api_version,
        "kind": QUEUE.kind,
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": state},
    }


@one_line
def _create(args: argparse.Namespace) -> int:
    name = _need_name(args)
    if args.weight <= 0:
        raise CliError("--weight must be greater than 0")

    async def go(client: KubeClient) -> int:
        try:
            await client.create(QUEUE, queue_body(name, args.weight, args.state))
        except AlreadyExists as exc:
            raise already_exists(f"queue {name}", exc) from None
        if args.state != QueueState.OPEN:
            # The status of a create is dropped (status subresource): set it afterwards.
            await client.patch_status(QUEUE, name, {"status": {"state": args.state}})
        print(f"create queue {name} successfully")
        return 0

    return run(args, go)


@one_line
def _delete(args: argparse.Namespace) -> int:
    name = _need_name(args)

    async def go(client: KubeClient) -> int:
        try:
            await client.delete(QUEUE, name)
        except NotFound as exc:
            raise not_found(f"queue {name}", exc) from None
        print(f"delete queue {name} successfully")
        return 0

    return run(args, go)


@one_line
def _operate(args: argparse.Namespace) -> int:
    name = _need_name(args)
    action: str = args.action
    if not action:
        raise CliError("action can not be null (-a open|close|update)")
    if action not in (*OPERATE_ACTIONS, "update"):
        raise CliError(f"action {action} invalid, valid actions are open, close and update")
    if action == "update" and args.weight <= 0:
        raise CliError(
            f"when update queue {name}, weight must be specified, the value must be greater than 0"
        )

    async def go(client: KubeClient) -> int:
        try:
            if action == "update":
                await client.patch(QUEUE, name, {"spec": {"weight": args.weight}})
                print(f"update queue {name} weight to {args.weight}")
                return 0
            queue = await client.get(QUEUE, name)
        except NotFound as exc:
            raise not_found(f"queue {name}", exc) from None
        target = OwnerReference(
            api_version=QUEUE.api_version,
            kind=QUEUE.kind,
            name=queue.metadata.name,
            uid=queue.metadata.uid,
            controller=True,
        )
        command = await create_command(client, COMMAND_NAMESPACE, OPERATE_ACTIONS[action], target)
        print(f"{action} queue {name}: command {command} ({OPERATE_ACTIONS[action]}) created")
        return 0

    return run(args, go)


async def queue_shares(
    client: KubeClient, queues: list[Queue], podgroups: list[PodGroup]
) -> dict[str, output.QueueShare] | None:
    """Deserved, allocated and share per queue, as the scheduler's proportion plugin computes
    them; None when the nodes or pods cannot be read (no permission)."""
    # The scheduler is imported only here: the other commands need not pay for it.
    from scheduler.framework.plugin import Arguments, PluginOption
    from scheduler.framework.session import Session
    from scheduler.plugins.proportion import ProportionPlugin
    from scheduler.snapshot import build_cluster

    try:
        nodes, pods = await asyncio.gather(client.list(NODE), client.list(POD))
    except ApiError:
        return None
    cluster, _report = build_cluster(
        pods=pods.items, nodes=nodes.items, podgroups=podgroups, queues=queues
    )
    session = Session(cluster, [[PluginOption("proportion")]])
    plugin = ProportionPlugin(Arguments("proportion", {}))
    plugin.on_session_open(session)
    return {
        name: output.QueueShare(
            deserved=attr.deserved.to_list(),
            allocated=attr.allocated.to_list(),
            share=attr.share,
        )
        for name, attr in plugin.queue_attrs.items()
    }


async def _show(client: KubeClient, args: argparse.Namespace, name: str | None) -> int:
    if name is None:
        queues, raw, _version = await list_raw(client, QUEUE)
    else:
        try:
            queue, one = await get_raw(client, QUEUE, name)
        except NotFound as exc:
            raise not_found(f"queue {name}", exc) from None
        queues, raw = [queue], {queue.metadata.uid: one}
    queues.sort(key=lambda q: q.metadata.name)
    if args.output in ("json", "yaml"):
        if name is not None:
            sys.stdout.write(output.dump(raw[queues[0].metadata.uid], args.output))
        else:
            sys.stdout.write(
                output.dump(output.as_list([raw[q.metadata.uid] for q in queues]), args.output)
            )
        return 0
    podgroups = list((await client.list(PODGROUP)).items)
    wide = args.output == "wide"
    shares = None
    if wide:
        every_queue = queues if name is None else list((await client.list(QUEUE)).items)
        shares = await queue_shares(client, every_queue, podgroups)
    sys.stdout.write(
        output.queue_table(queues, output.queue_counts(podgroups), shares=shares, wide=wide)
    )
    return 0


@one_line
def _list(args: argparse.Namespace) -> int:
    return run(args, lambda client: _show(client, args, None))


@one_line
def _get(args: argparse.Namespace) -> int:
    name = _need_name(args)
    return run(args, lambda client: _show(client, args, name))
