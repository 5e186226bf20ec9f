"""The handlers of ``caldera cronjob list|get|suspend|resume``: Volcano CronJobs with kubectl's
columns (their flags are in `cli.commands`).

vcctl has no cronjob command; these follow ``kubectl get cronjobs`` (NAME, SCHEDULE, SUSPEND,
ACTIVE, LAST SCHEDULE, AGE; ``-o wide`` adds the time zone, the concurrency policy and the age of
the last success) and vcctl's flags (``-n`` namespace, ``-N`` name). ``suspend`` and ``resume``
merge-patch ``spec.suspend``, as ``kubectl patch`` would: the cronjob controller starts nothing
while it is true, and on resume starts only the most recent time it missed.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable

from caldera.api.kinds import CRONJOB
from caldera.api.volcano import CronJob
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from cli import output
from cli.cluster import not_found, run, show_objects
from cli.commands import need_name


def _show(args: argparse.Namespace, name: str | None) -> int:
    every = name is None and args.all_namespaces

    async def table(cronjobs: list[CronJob]) -> str:
        return output.cronjob_table(
            cronjobs, all_namespaces=every, wide=args.output == "wide", now=dt.datetime.now(dt.UTC)
        )

    return run(
        args,
        # args.namespace is known once connected (the context's when -n is not given).
        lambda client: show_objects(
            client,
            CRONJOB,
            args.output,
            name=name,
            namespace=None if every else args.namespace,
            table=table,
        ),
    )


def list_cronjobs(args: argparse.Namespace) -> int:
    return _show(args, None)


def get_cronjob(args: argparse.Namespace) -> int:
    return _show(args, need_name(args, "cronjob", "-N"))


def _suspender(verb: str, value: bool) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        name = need_name(args, "cronjob", "-N")

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


suspend_cronjob = _suspender("suspend", True)
resume_cronjob = _suspender("resume", False)
