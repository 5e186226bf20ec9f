"""The scheduler process writes a session's PodGroup statuses concurrently (bounded), so that a
session enqueueing hundreds of jobs does not hold the next session back; a write that conflicts
or finds the PodGroup gone is skipped, and the others still land."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import PodGroup, PodGroupStatus
from caldera.kube.errors import Conflict
from scheduler.framework.session import SessionResult
from scheduler.process import STATUS_WRITES_IN_FLIGHT, SchedulerLoop, SchedulerMetrics


class _Store:
    def __init__(self, objects: dict[str, PodGroup]) -> None:
        self.objects = objects

    def get(self, key: str) -> PodGroup | None:
        return self.objects.get(key)


class _Informer:
    def __init__(self, store: _Store) -> None:
        self.store = store


class _Client:
    """Records the PodGroups replaced and how many replaces were in flight at most."""

    def __init__(self, conflict: set[str]) -> None:
        self.conflict = conflict
        self.written: list[PodGroup] = []
        self.in_flight = 0
        self.most = 0

    async def replace(self, kind: Any, body: PodGroup) -> PodGroup:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            if body.metadata.name in self.conflict:
                raise Conflict(409, "Conflict", "the object has been modified")
            self.written.append(body)
            return body
        finally:
            self.in_flight -= 1


def _loop(groups: dict[str, PodGroup], client: _Client) -> SchedulerLoop:
    """A SchedulerLoop with only what ``_write_podgroups`` touches (no informers, no server)."""
    loop = SchedulerLoop.__new__(SchedulerLoop)
    loop.podgroups = _Informer(_Store(groups))  # type: ignore[assignment]
    loop.client = client  # type: ignore[assignment]
    loop.metrics = SchedulerMetrics(CollectorRegistry())
    return loop


async def test_podgroup_status_writes_run_concurrently_and_bounded() -> None:
    """100 changed statuses: every one written, several at once but never more than the
    bound; a conflicting write is skipped without stopping the others."""
    groups = {
        f"ns/pg-{i}": PodGroup(metadata=ObjectMeta(name=f"pg-{i}", namespace="ns"))
        for i in range(100)
    }
    client = _Client(conflict={"pg-7"})
    result = SessionResult()
    for key in groups:
        result.podgroup_status[key] = PodGroupStatus(phase="Inqueue")
    result.podgroup_status["ns/gone"] = PodGroupStatus(phase="Running")  # not in the cache

    started = asyncio.get_running_loop().time()
    await _loop(groups, client)._write_podgroups(result)
    elapsed = asyncio.get_running_loop().time() - started

    assert sorted(pg.metadata.name for pg in client.written) == sorted(
        f"pg-{i}" for i in range(100) if i != 7
    )
    assert all(pg.status.phase == "Inqueue" for pg in client.written)
    assert 1 < client.most <= STATUS_WRITES_IN_FLIGHT
    assert elapsed < 100 * 0.01 / 2, "not one write at a time"
