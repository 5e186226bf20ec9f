"""``caldera queue pending QUEUE`` and the position in ``caldera job view``: the scheduler's
order of waiting jobs, read through the visibility API (``caldera.api.visibility``).

The API server authenticates and authorises the read: a user who may not read a namespace sees
its jobs in a queue's list only as ``(hidden)`` rows that keep their place. Where the API is not
registered (no APIService ``v1alpha1.visibility.caldera.dev``), the command says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence

import msgspec

from caldera.api.visibility import (
    PENDING_JOB_DECODER,
    PENDING_JOB_LIST_DECODER,
    PendingJob,
    namespace_path,
    queue_path,
)
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, Forbidden, NotFound
from cli import output
from cli.cluster import run
from cli.commands import need_name
from cli.errors import CliError

PENDING_COLUMNS = ("POSITION", "CLUSTER", "JOB", "NAMESPACE", "PRIORITY", "WAITING FOR", "SINCE")
HIDDEN = "(hidden)"
MAX_REASON = 80  # characters of the wait record's summary in the table


def _waiting_for(item: PendingJob) -> str:
    record = item.waiting_for
    if record is None:
        return "-" if item.hidden else f"{item.phase}: no finding yet"
    text = f"{record.stage}: {record.summary}"
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def pending_table(items: Sequence[PendingJob], now: dt.datetime) -> str:
    """One row per waiting job, in queue order."""
    rows = [
        [
            str(item.position_in_queue),
            str(item.position_in_cluster),
            HIDDEN if item.hidden else (item.job or item.pod_group),
            "-" if item.hidden else item.metadata.namespace,
            str(item.priority),
            _waiting_for(item),
            output.format_age(item.waiting_since, now),
        ]
        for item in items
    ]
    return output.render_table(PENDING_COLUMNS, rows)


def position_lines(item: PendingJob, now: dt.datetime) -> list[str]:
    """The ``Position`` section of ``caldera job view``."""
    since = output.format_age(item.waiting_since, now)
    return [
        f"{item.position_in_queue} in queue {item.queue}, {item.position_in_cluster} in the "
        f"cluster (waiting for {since})"
    ]


def _not_registered(exc: ApiError) -> CliError:
    return CliError(
        "the visibility API is not served here (no APIService v1alpha1.visibility.caldera.dev, "
        f"or the scheduler runs without --visibility): {exc}"
    )


def queue_pending(args: argparse.Namespace) -> int:
    name = need_name(args, "queue", "-n")

    async def go(client: KubeClient) -> int:
        try:
            data = await client.request("GET", queue_path(name), params={"limit": str(args.limit)})
        except NotFound as exc:
            raise _not_registered(exc) from None
        listed = PENDING_JOB_LIST_DECODER.decode(data)
        if args.output in ("json", "yaml"):
            sys.stdout.write(output.dump(msgspec.to_builtins(listed), args.output))
            return 0
        if not listed.items:
            sys.stdout.write(f"No job waits in queue {name}.\n")
            return 0
        sys.stdout.write(pending_table(listed.items, dt.datetime.now(dt.UTC)))
        if listed.total > len(listed.items):
            sys.stdout.write(f"... and {listed.total - len(listed.items)} more (--limit)\n")
        return 0

    return run(args, go)


async def job_position(client: KubeClient, namespace: str, podgroup: str) -> PendingJob | None:
    """Where the job with ``podgroup`` stands, or None: it does not wait, the API is not
    served, or the user may not read it (a view shows what it can)."""
    try:
        data = await client.request("GET", namespace_path(namespace, podgroup))
    except (NotFound, Forbidden):
        return None
    except (ApiError, ApiConnectionError):
        return None  # 503 before the scheduler's first session, and the like
    try:
        return PENDING_JOB_DECODER.decode(data)
    except msgspec.DecodeError:
        return None
