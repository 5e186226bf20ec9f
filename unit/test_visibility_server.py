"""The visibility API's routes (scheduler.visibility.server) over aiohttp's test client: who is
believed (only a front-proxy certificate with an allowed name, and only with a user), the
discovery documents, 503 before the first session, a 404 for a job that does not wait, bad
paging named, and a queue's list hiding the namespaces the reader may not list."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from caldera.api.visibility import PENDING_JOB_LIST_DECODER, namespace_path, queue_path
from scheduler.visibility.order import PendingEntry, Positions, publish
from scheduler.visibility.requestheader import Identity, RequestHeaderConfig
from scheduler.visibility.server import AccessReviews, VisibilityServer

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
Client = TestClient[Any, Any]
USER = {"X-Remote-User": "alice", "X-Remote-Group": "team-a"}


def _entry(namespace: str, name: str, position: int) -> PendingEntry:
    return PendingEntry(
        key=f"{namespace}/{name}",
        namespace=namespace,
        podgroup=name,
        job=name,
        queue="q",
        position_in_queue=position,
        position_in_cluster=position,
        priority=0,
        phase="Pending",
        record=None,
        created=T0,
    )


class _Access(AccessReviews):
    """Alice may list pendingjobs in team-a only; the questions asked are kept."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def may_list(self, who: Identity, namespace: str) -> bool:
        self.asked.append((who.user, namespace))
        return namespace == "team-a"


def _server(positions: Positions, *, allowed: tuple[str, ...] = ()) -> VisibilityServer:
    return VisibilityServer(
        positions=lambda: positions,
        access=_Access(),
        config=RequestHeaderConfig(client_ca="", allowed_names=allowed),
        cert_file="",
        key_file="",
    )


PUBLISHED = publish(
    (_entry("team-b", "b1", 1), _entry("team-a", "a1", 2), _entry("team-b", "b2", 3)), T0, None
)


@pytest.fixture
async def http() -> AsyncIterator[Client]:
    async with TestClient(TestServer(_server(PUBLISHED).app())) as client:
        yield client


async def test_without_the_front_proxys_certificate_nobody_is_believed() -> None:
    """Allowed names set and no client certificate (plain HTTP here): 401, headers or not."""
    server = _server(PUBLISHED, allowed=("front-proxy-client",))
    async with TestClient(TestServer(server.app())) as client:
        response = await client.get(namespace_path("team-a"), headers=USER)
        assert response.status == 401
        assert "front proxy" in (await response.json())["message"]


async def test_a_request_naming_no_user_is_refused(http: Client) -> None:
    """No X-Remote-User: 401 on the resources; discovery still answers (availability)."""
    assert (await http.get(namespace_path("team-a"))).status == 401
    discovery = await http.get("/apis/visibility.caldera.dev/v1alpha1")
    assert discovery.status == 200
    names = [r["name"] for r in (await discovery.json())["resources"]]
    assert names == ["pendingjobs", "queues", "queues/pendingjobs"]


async def test_a_namespace_list_is_the_namespaces_entries(http: Client) -> None:
    """The API server checked RBAC: the namespace's entries, in cluster order, all shown."""
    response = await http.get(namespace_path("team-b"), headers=USER)
    listed = PENDING_JOB_LIST_DECODER.decode(await response.read())
    assert [(i.job, i.position_in_queue, i.hidden) for i in listed.items] == [
        ("b1", 1, False),
        ("b2", 3, False),
    ]


async def test_a_queue_list_hides_the_namespaces_the_reader_may_not_list(http: Client) -> None:
    """team-b's entries keep their places without names; team-a's is shown."""
    response = await http.get(queue_path("q"), headers=USER)
    listed = PENDING_JOB_LIST_DECODER.decode(await response.read())
    assert [(i.job, i.hidden) for i in listed.items] == [("", True), ("a1", False), ("", True)]


async def test_one_job_and_a_job_that_does_not_wait(http: Client) -> None:
    """A waiting job by its PodGroup's name; 404 for one that does not wait."""
    found = await http.get(namespace_path("team-a", "a1"), headers=USER)
    assert (await found.json())["positionInQueue"] == 2
    missing = await http.get(namespace_path("team-a", "gone"), headers=USER)
    assert missing.status == 404


async def test_bad_paging_is_a_400_naming_the_parameter(http: Client) -> None:
    """limit=0: a Status 400 whose message starts with the parameter."""
    response = await http.get(queue_path("q"), params={"limit": "0"}, headers=USER)
    assert response.status == 400
    assert (await response.json())["message"].startswith("limit:")


async def test_before_the_first_session_the_lists_answer_503() -> None:
    """Nothing published yet (or not the leader): 503, saying why."""
    async with TestClient(TestServer(_server(Positions()).app())) as client:
        response = await client.get(queue_path("q"), headers=USER)
        assert response.status == 503
        assert "not published" in (await response.json())["message"]
