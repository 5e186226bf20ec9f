"""What the visibility API answers, pure: published positions to ``PendingJob`` lists.

A reader sees every entry of a namespace it may read; on a queue's list, another namespace's
entry keeps its place, queue, positions, priority and phase but is ``hidden``: no namespace,
names or wait record (those would tell a tenant what another team runs). ``offset`` and
``limit`` page a list (Kueue's parameters); a bad value is refused naming the parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from caldera.api.meta import ObjectMeta, format_time
from caldera.api.visibility import DEFAULT_LIMIT, MAX_LIMIT, PendingJob, PendingJobList
from scheduler.visibility.order import PendingEntry, Positions


class BadQueryError(ValueError):
    """A query parameter out of its bounds; the message names it."""


def _int_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadQueryError(f"{name}: must be a whole number, not {text[:40]!r}") from None
    if not low <= value <= high:
        raise BadQueryError(f"{name}: must be between {low} and {high}, not {value}")
    return value


def page_bounds(query: Mapping[str, str]) -> tuple[int, int]:
    """(offset, limit) from a request's query."""
    offset = _int_param(query, "offset", 0, 0, 10**9)
    limit = _int_param(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    return offset, limit


def pending_job(entry: PendingEntry, since: str, *, hidden: bool = False) -> PendingJob:
    """The wire form of ``entry``; ``hidden`` leaves out what names it."""
    if hidden:
        return PendingJob(
            queue=entry.queue,
            position_in_queue=entry.position_in_queue,
            position_in_cluster=entry.position_in_cluster,
            priority=entry.priority,
            phase=entry.phase,
            waiting_since=since,
            hidden=True,
        )
    return PendingJob(
        metadata=ObjectMeta(
            name=entry.podgroup,
            namespace=entry.namespace,
            creation_timestamp=format_time(entry.created),
        ),
        job=entry.job,
        pod_group=entry.podgroup,
        queue=entry.queue,
        position_in_queue=entry.position_in_queue,
        position_in_cluster=entry.position_in_cluster,
        priority=entry.priority,
        phase=entry.phase,
        waiting_for=entry.record,
        waiting_since=since,
    )


def answer(
    positions: Positions,
    entries: Sequence[PendingEntry],
    *,
    offset: int,
    limit: int,
    visible: Callable[[str], bool] = lambda _namespace: True,
) -> PendingJobList:
    """The page ``offset``..``offset + limit`` of ``entries``; entries of a namespace that is
    not ``visible`` hidden."""
    chosen = entries[offset : offset + limit]
    items = tuple(
        pending_job(e, positions.since.get(e.key, ""), hidden=not visible(e.namespace))
        for e in chosen
    )
    return PendingJobList(items=items, observed_at=positions.observed_at, total=len(entries))


def namespaces_of(entries: Sequence[PendingEntry], offset: int, limit: int) -> list[str]:
    """The distinct namespaces of a page, in order of first appearance."""
    return list(dict.fromkeys(e.namespace for e in entries[offset : offset + limit]))
