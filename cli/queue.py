"""The handlers of ``caldera queue create|delete|operate|list|get``: vcctl's queue commands
(their flags are in `cli.commands`).

Counts (Inqueue, Pending, Running, Unknown, Completed) are computed from PodGroups, as vcctl does
since Volcano v1.11 stopped writing them to the queue status. ``operate -a open|close`` creates an
OpenQueue / CloseQueue Command (in namespace ``default``, as vcctl does, or ``--namespace``) that
the queue controller consumes; ``-a update`` merge-patches the weight. The Command runs only for
those who may update the queue: the webhook checks and stamps its creator, and the controller
checks the stamp again unless the Command sits in a namespace it trusts with queue Commands (the
release namespace by default; docs/reliability.md, "Queue Commands"). An administrator whose
cluster has no Caldera webhook creates it there with ``--namespace``.

Beyond vcctl: ``-o json|yaml|wide``; ``wide`` adds each queue's deserved resources, what it is
allocated, and its share (the largest allocated/deserved ratio), computed with the scheduler's own
proportion plugin over the cluster's nodes, PodGroups and pods, so it matches what the scheduler
sees at its next session.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from caldera.api.kinds import NODE, POD, PODGROUP, QUEUE
from caldera.api.volcano import Action, PodGroup, Queue, QueueState
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, ApiError, NotFound
from cli import output
from cli.cluster import (
    already_exists,
    controller_ref,
    create_command,
    get_object,
    not_found,
    run,
    show_objects,
)
from cli.commands import need_name
from cli.errors import CliError

OPERATE_ACTIONS = {"open": Action.OPEN_QUEUE, "close": Action.CLOSE_QUEUE}


def queue_body(name: str, weight: int, state: str) -> dict[str, object]:
    """The Queue `vcctl queue create` makes."""
    return {
        "apiVersion": QUEUE.api_version,
        "kind": QUEUE.kind,
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": state},
    }


def create_queue(args: argparse.Namespace) -> int:
    name: str = args.name
    if not name:
        raise CliError("queue name must be specified (-n NAME)")
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


def delete_queue(args: argparse.Namespace) -> int:
    name = need_name(args, "queue", "-n")

    async def go(client: KubeClient) -> int:
        try:
            await client.delete(QUEUE, name)
        except NotFound as exc:
            raise not_found(f"queue {name}", exc) from None
        print(f"delete queue {name} successfully")
        return 0

    return run(args, go)


def operate_queue(args: argparse.Namespace) -> int:
    name = need_name(args, "queue", "-n")
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
        if action == "update":
            try:
                await client.patch(QUEUE, name, {"spec": {"weight": args.weight}})
            except NotFound as exc:
                raise not_found(f"queue {name}", exc) from None
            print(f"update queue {name} weight to {args.weight}")
            return 0
        queue = await get_object(client, QUEUE, name)
        target = controller_ref(QUEUE, queue.metadata.name, queue.metadata.uid)
        namespace: str = args.command_namespace
        command = await create_command(client, namespace, OPERATE_ACTIONS[action], target)
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


def _shower(args: argparse.Namespace, name: str | None) -> Callable[[KubeClient], Awaitable[int]]:
    async def show(client: KubeClient) -> int:
        async def table(queues: list[Queue]) -> str:
            podgroups = list((await client.list(PODGROUP)).items)
            wide = args.output == "wide"
            shares = None
            if wide:
                every_queue = queues if name is None else list((await client.list(QUEUE)).items)
                shares = await queue_shares(client, every_queue, podgroups)
            return output.queue_table(
                queues, output.queue_counts(podgroups), shares=shares, wide=wide
            )

        return await show_objects(
            client, QUEUE, args.output, name=name, namespace=None, table=table
        )

    return show


def list_queues(args: argparse.Namespace) -> int:
    return run(args, _shower(args, None))


def get_queue(args: argparse.Namespace) -> int:
    return run(args, _shower(args, need_name(args, "queue", "-n")))
