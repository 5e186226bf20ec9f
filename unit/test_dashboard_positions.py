"""The dashboard's queue page in the scheduler's order: the positions the visibility API gives
(dashboard.jobs.with_positions), the page with and without them, and the reader that asks the
API (dashboard.cache.PositionReader): kept a few seconds, and not asked again for a minute once
the API turned out not to be served."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any, cast

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from caldera.api.meta import ObjectMeta
from caldera.api.visibility import PendingJob, PendingJobList, queue_path
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from dashboard.cache import ClusterCache, PositionReader
from dashboard.jobs import job_rows, podgroups_by_job, with_positions
from dashboard.live import Hub
from dashboard.server import make_app
from unit.dashboard_objects import T0, job, podgroup, queue

NOW = T0 + dt.timedelta(minutes=10)
Client = TestClient[Any, Any]


def _jobs() -> list[Any]:
    return [
        job("old-low", queue_name="q1", created=1),
        job("new-high", queue_name="q1", created=5),
        job("unknown", queue_name="q1", created=6),
        job("running", queue_name="q1", phase="Running", created=0),
    ]


def _item(name: str, position: int, *, hidden: bool = False) -> PendingJob:
    if hidden:
        return PendingJob(queue="q1", position_in_queue=position, hidden=True)
    return PendingJob(
        metadata=ObjectMeta(name=f"{name}-pg", namespace="team-a"),
        job=name,
        queue="q1",
        position_in_queue=position,
        position_in_cluster=position + 10,
    )


LISTED = PendingJobList(
    items=(_item("new-high", 1), _item("", 2, hidden=True), _item("old-low", 3)),
    observed_at="2026-01-01T00:09:59Z",
)


def test_the_apis_order_puts_waiting_jobs_first_then_unknown_ones_then_the_rest() -> None:
    """Known waiting jobs in the API's order with its positions; a waiting job the scheduler
    has not listed yet next; running jobs last; hidden entries match nothing."""
    jobs = _jobs()
    rows = job_rows(jobs, podgroups_by_job([]), {}, NOW)
    assert [r.name for r in rows][:2] == ["old-low", "new-high"]  # the page's own order
    ordered = with_positions(rows, LISTED.items)
    assert [(r.name, r.position, r.cluster_position) for r in ordered] == [
        ("new-high", 1, 11),
        ("old-low", 3, 13),
        ("unknown", 0, 0),
        ("running", 0, 0),
    ]


def _cache() -> ClusterCache:
    jobs = _jobs()
    return ClusterCache.static(
        queues=[queue("root"), queue("q1", parent="root")],
        jobs=jobs,
        podgroups=[podgroup(j) for j in jobs],
        pods=[],
        nodes=[],
    )


@pytest.fixture
async def http() -> AsyncIterator[Client]:
    async def positions(name: str) -> PendingJobList | None:
        return LISTED if name == "q1" else None

    app = make_app(_cache(), Hub(max_clients=2), read_positions=positions, clock=lambda: NOW)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def test_the_queue_page_shows_the_schedulers_positions(http: Client) -> None:
    """A Position column, the rows in the API's order, and the time of the order."""
    response = await http.get("/queues/q1")
    text = await response.text()
    assert response.status == 200, text
    assert '<th scope="col" title="in the queue, then in the cluster">Position</th>' in text
    assert text.index("team-a/new-high") < text.index("team-a/old-low")
    assert text.index("team-a/old-low") < text.index("team-a/unknown")
    assert '1 <span class="note">(11 in the cluster)</span>' in text
    assert "in the order the scheduler serves them" in text
    assert 'datetime="2026-01-01T00:09:59Z"' in text


async def test_without_the_api_the_page_keeps_its_own_order() -> None:
    """No visibility API: no Position column, priority-then-age order, and a note saying so."""
    app = make_app(_cache(), Hub(max_clients=2), clock=lambda: NOW)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        text = await (await client.get("/queues/q1")).text()
    assert ">Position</th>" not in text
    assert text.index("team-a/old-low") < text.index("team-a/new-high")
    assert "is not served here" in text


class _Api:
    """The one call the reader makes, answered from a script; counts the calls."""

    def __init__(self, answer: bytes | Exception) -> None:
        self.answer, self.calls = answer, 0

    async def request(self, method: str, path: str) -> bytes:
        self.calls += 1
        assert (method, path) == ("GET", queue_path("q1"))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_the_reader_keeps_an_answer_for_a_few_seconds() -> None:
    """Asked twice within its freshness: one call; later: asked again."""
    now = [0.0]
    api = _Api(msgspec.json.encode(LISTED))
    reader = PositionReader(cast(KubeClient, api), clock=lambda: now[0])
    assert await reader.read("q1") == LISTED
    assert await reader.read("q1") == LISTED
    assert api.calls == 1
    now[0] = 5.0
    await reader.read("q1")
    assert api.calls == 2


async def test_an_api_that_is_not_served_is_not_asked_again_for_a_minute() -> None:
    """404 (no APIService): None, and no call until a minute has passed."""
    now = [0.0]
    api = _Api(NotFound(404, "NotFound", "the server could not find the requested resource"))
    reader = PositionReader(cast(KubeClient, api), clock=lambda: now[0])
    assert await reader.read("q1") is None
    assert await reader.read("q1") is None
    assert api.calls == 1
    now[0] = 61.0
    assert await reader.read("q1") is None
    assert api.calls == 2
