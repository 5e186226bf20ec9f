"""``caldera cronjob list|get|suspend|resume``: Volcano CronJobs with kubectl's columns.

vcctl has no cronjob command; these follow ``kubectl get cronjobs`` (NAME, SCHEDULE, SUSPEND,
ACTIVE, LAST SCHEDULE, AGE; ``-o wide`` adds the time zone, the concurrency policy and the age of
the last success) and vcctl's flags (``-n`` namespace, ``-N`` name). ``suspend`` and ``resume``
merge-patch ``spec.suspend``, as ``kubectl patch`` would: the cronjob controller starts nothing
while it is true, and on resume starts only the most recent time it missed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable

from caldera.api.kinds import CRONJOB
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from cli import output
from cli.cluster import (
    CliError,
    add_connection_args,
    add_output_arg,
    get_raw,
    list_raw,
    not_found,
    one_line,
    run,
    usage,
)

DEFAULT_NAMESPACE = "default"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera cronjob`` and its subcommands."""
    cronjob = sub.add_parser(
        "cronjob",
        help="list, get, suspend and resume Volcano CronJobs",
        description="Volcano CronJobs (batch.volcano.sh), with kubectl's columns.",
    )
    cronjob.set_defaults(handler=lambda _args: usage(cronjob))
    cmds = cronjob.add_subparsers(dest="cronjob_command", metavar="COMMAND")

    p = cmds.add_parser("list", help="list cronjobs", description="List CronJobs.")
    _namespace_arg(p)
    p.add_argument("--all-namespaces", action="store_true", help="list in all namespaces")
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_list)

    p = cmds.add_parser("get", help="show one cronjob", description="Show one CronJob.")
    _namespace_arg(p)
    _name_args(p)
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_get)

    for verb, value in (("suspend", True), ("resume", False)):
        text = "start no Jobs until resumed" if value else "start Jobs on schedule again"
        p = cmds.add_parser(
            verb, help=f"{verb} a cronjob: {text}", description=f"Set spec.suspend to {value}."
        )
        _namespace_arg(p)
        _name_args(p)
        add_connection_args(p)
        p.set_defaults(handler=_suspender(verb, value))


def _namespace_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", default=DEFAULT_NAMESPACE, help="the namespace (default)")


def _name_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("cronjob", nargs="?", default="", metavar="NAME", help="the cronjob")
    p.add_argument("-N", "--name", default="", help="the name of the cronjob")


def _need_name(args: argparse.Namespace) -> str:
    name: str = args.name or args.cronjob
    if not name:
        raise CliError("cronjob name must be specified (NAME or -N NAME)")
    return name


async def _show(client: KubeClient, args: argparse.Namespace, name: str | None) -> int:
    all_namespaces = name is None and args.all_namespaces
    namespace = None if all_namespaces else args.namespace
    if name is None:
        cronjobs, raw, _version = await list_raw(client, CRONJOB, namespace=namespace)
    else:
        try:
            cronjob, one = await get_raw(client, CRONJOB, name, namespace=namespace)
        except NotFound as exc:
            raise not_found(f"cronjob {namespace}/{name}", exc) from None
        cronjobs, raw = [cronjob], {cronjob.metadata.uid: one}
    cronjobs.sort(key=lambda c: (c.metadata.namespace, c.metadata.name))
    if args.output in ("json", "yaml"):
        shown = [raw[c.metadata.uid] for c in cronjobs]
        sys.stdout.write(
            output.dump(shown[0] if name is not None else output.as_list(shown), args.output)
        )
        return 0
    sys.stdout.write(
        output.cronjob_table(
            cronjobs,
            all_namespaces=all_namespaces,
            wide=args.output == "wide",
            now=dt.datetime.now(dt.UTC),
        )
    )
    return 0


@one_line
def _list(args: argparse.Namespace) -> int:
    return run(args, lambda client: _show(client, args, None))


@one_line
def _get(args: argparse.Namespace) -> int:
    name = _need_name(args)
    return run(args, lambda client: _show(client, args, name))


def _suspender(verb: str, value: bool) -> Callable[[argparse.Namespace], int]:
    @one_line
    def handler(args: argparse.Namespace) -> int:
        name = _need_name(args)

        async def go(client: KubeClient) -> int:
            try:
                await client.patch(
                    CRONJOB, name, {"spec": {"suspend": value}}, namespace=args.namespace
                )
            except NotFound as exc:
                raise not_found(f"cronjob {args.namespace}/{name}", exc) from None
            print(f"cronjob {args.namespace}/{name} {'suspended' if value else 'resumed'}")
            return 0

        return run(args, go)

    return handler
