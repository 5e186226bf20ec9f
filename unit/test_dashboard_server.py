"""The dashboard's routes over a static cache (aiohttp's test client, no API server): pages,
escaping of what tenants write, 404s and bad filters, the live fragment, the loopback guard,
and the live stream with its bounds."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from caldera.api.core import Event
from caldera.api.meta import ObjectMeta, ObjectReference
from caldera.api.topology import ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec
from dashboard.cache import ClusterCache
from dashboard.live import Hub
from dashboard.server import make_app
from unit.dashboard_objects import T0, job, node, pod, podgroup, queue, ts

NOW = T0 + dt.timedelta(minutes=10)
EVIL = '<script>alert("x")</script>'

Client = TestClient[Any, Any]


def _cache() -> ClusterCache:
    waiting = job("waiting", namespace="team-a", queue_name="q1", created=5)
    running = job("running", namespace="team-b", queue_name="q1", phase="Running", created=1)
    return ClusterCache.static(
        queues=[queue("root"), queue("q1", parent="root", deserved={"cpu": "4"})],
        jobs=[waiting, running],
        podgroups=[podgroup(waiting, why=f"held: {EVIL}"), podgroup(running, phase="Running")],
        pods=[pod(waiting, 0), pod(running, 0, phase="Running", node="n0")],
        nodes=[node("n0")],
    )


async def _events(namespace: str, uids: Sequence[str]) -> list[Event] | None:
    return [
        Event(
            metadata=ObjectMeta(name="e1", namespace=namespace),
            involved_object=ObjectReference(kind="Job", name="waiting", uid=uids[0]),
            reason="Created",
            message=f"<img src=x onerror=alert(1)> {len(uids)} objects",
            type="Normal",
            last_timestamp=ts(3),
        )
    ]


@pytest.fixture
def hub() -> Hub:
    return Hub(max_clients=2, queue_size=2)


@pytest.fixture
async def http(hub: Hub) -> AsyncIterator[Client]:
    app = make_app(_cache(), hub, read_events=_events, clock=lambda: NOW)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def _page(http: Client, path: str, status: int = 200, **kw: Any) -> str:
    response = await http.get(path, **kw)
    text = await response.text()
    assert response.status == status, text
    return text


async def test_overview_shows_the_queue_tree_and_counts(http: Client) -> None:
    text = await _page(http, "/")
    assert 'href="/queues/q1"' in text
    assert text.index('data-queue="root"') < text.index('data-queue="q1"')
    assert "depth-1" in text
    assert "1 allocated" not in text  # nothing allocated: 0 is shown
    assert "0 allocated, 4 deserved" in text


async def test_tenant_text_is_escaped_everywhere(http: Client) -> None:
    """The wait record and Event messages are written by others: escaped, never markup."""
    for path in ("/queues/q1", "/jobs", "/jobs/team-a/waiting"):
        text = await _page(http, path)
        assert EVIL not in text
        assert "<img src=x" not in text
    text = await _page(http, "/jobs/team-a/waiting")
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in text
    # the job, its PodGroup and its pod: the Events of each were asked for
    assert "&lt;img src=x onerror=alert(1)&gt; 3 objects" in text


async def test_queue_page_lists_pending_first_with_the_reason_and_links_to_jobs(
    http: Client,
) -> None:
    text = await _page(http, "/queues/q1")
    assert text.index("team-a/waiting") < text.index("team-b/running")
    assert 'href="/jobs/team-a/waiting"' in text
    assert "held: &lt;script&gt;" in text


async def test_job_page_shows_pods_podgroup_timeline_and_events(http: Client) -> None:
    text = await _page(http, "/jobs/team-b/running")
    assert 'id="job-phase" class="phase-running">Running<' in text
    assert "running-worker-0" in text
    assert "<td>n0</td>" in text
    assert "running-uid-team-b-running" in text  # its PodGroup
    assert "<strong>Created (Job/waiting)</strong>" in text  # an Event in the timeline


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/jobs/team-a/nope", "job team-a/nope is not in the cache"),
        ("/queues/nope", "queue &#39;nope&#39; is not in the cache"),
        ("/no/such/page", ""),
    ],
)
async def test_unknown_objects_are_404_with_a_clear_page(
    http: Client, path: str, message: str
) -> None:
    text = await _page(http, path, status=404)
    assert message in text


async def test_what_the_user_may_not_list_is_said_not_shown_as_zero() -> None:
    """Watching one namespace without the right to list queues and nodes: the pages say so,
    show no node counts, and a queue the jobs name is "not readable", not missing."""
    cache = ClusterCache.static(
        jobs=[job("j", namespace="team-a", queue_name="q1")],
        namespace="team-a",
        hidden=("queues", "nodes", "priorityclasses"),
    )
    async with TestClient(TestServer(make_app(cache, Hub()), host="127.0.0.1")) as client:
        text = await _page(client, "/")
        assert "Watching namespace <strong>team-a</strong> only." in text
        assert "does not let you list queues, nodes, priorityclasses" in text
        assert "<dt>Nodes</dt>" not in text
        assert 'q1</a> <span class="note">(not readable)</span>' in text
        assert "team-a/j" in await _page(client, "/queues/q1")
        nodes = await _page(client, "/nodes", status=403)
        assert "Your access does not let you list nodes." in nodes
        topology = await _page(client, "/topology", status=403)
        assert "The topology needs the right to list nodes:" in topology


async def test_topology_page_without_hypernodes_says_so(http: Client) -> None:
    text = await _page(http, "/topology")
    assert "No HyperNodes (topology.volcano.sh)" in text


async def test_nodes_page_shows_requests_and_gpu_cards(http: Client) -> None:
    text = await _page(http, "/nodes")
    assert '<tr data-node="n0">' in text
    assert "cpu: 1 of 16" in text  # the running pod's request on n0
    assert "0 of 4" in text
    assert "Requests are summed over" not in text  # the whole cache: every pod counted
    assert 'href="/nodes"' in text


async def test_job_list_filters(http: Client) -> None:
    text = await _page(http, "/jobs?namespace=team-b")
    assert "team-b/running" in text
    assert "team-a/waiting" not in text
    text = await _page(http, "/jobs?phase=pending&queue=q1")
    assert "team-a/waiting" in text
    assert "team-b/running" not in text
    assert "<option selected>Pending</option>" in text
    text = await _page(http, "/jobs?queue=other")
    assert "No jobs match." in text
    text = await _page(http, "/jobs?label=absent%3Dx")
    assert "No jobs match." in text
    assert 'name="label" value="absent=x"' in text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("phase=Sleeping", "phase &#39;Sleeping&#39; is not a job phase: one of Pending"),
        ("namespace=%3Cb%3E", "namespace &#39;&lt;b&gt;&#39; is not a valid name"),
        ("label=a%3D%3Cb%3E", "&#39;&lt;b&gt;&#39; is not a label value"),
    ],
)
async def test_a_bad_filter_is_a_400_that_says_why(http: Client, query: str, message: str) -> None:
    text = await _page(http, f"/jobs?{query}", status=400)
    assert message in text
    await _page(http, f"/queues/q1?{query}", status=400)


async def test_a_live_update_gets_the_content_block_only(http: Client) -> None:
    text = await _page(http, "/jobs/team-a/waiting", headers={"X-Fragment": "1"})
    assert "<html" not in text
    assert text.lstrip().startswith("<h1>Job team-a/waiting</h1>")


async def test_only_loopback_hosts_and_reads_are_answered(http: Client) -> None:
    """A page on another site reaching 127.0.0.1 through a rebound DNS name is refused."""
    await _page(http, "/", status=421, headers={"Host": "evil.example:8090"})
    response = await http.post("/jobs")
    assert response.status == 405
    response = await http.get("/", headers={"Host": "localhost:8090"})
    assert response.status == 200
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


async def _first_message(http: Client, topic: str) -> str:
    response = await http.get(f"/events?topic={topic}")
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    lines = []
    async with asyncio.timeout(5):
        while True:
            line = (await response.content.readline()).decode()
            if line.startswith("event:"):
                lines.append(line.strip())
                lines.append((await response.content.readline()).decode().strip())
                response.close()
                return "\n".join(lines)


async def test_a_change_reaches_the_subscribed_page(http: Client, hub: Hub) -> None:
    task = asyncio.create_task(_first_message(http, "job:team-a/waiting"))
    async with asyncio.timeout(5):
        while hub.clients == 0:  # noqa: ASYNC110 - the server's handler subscribes; poll for it
            await asyncio.sleep(0.01)
    hub.publish({"job:team-b/running"})  # another page's topic: not sent
    hub.publish({"job:team-a/waiting", "overview"})
    assert await task == "event: changed\ndata: job:team-a/waiting"


async def test_bad_topics_and_too_many_clients_are_refused(http: Client, hub: Hub) -> None:
    response = await http.get("/events?topic=everything")
    assert response.status == 400
    held = [hub.subscribe("overview"), hub.subscribe("overview")]
    response = await http.get("/events?topic=overview")
    assert response.status == 503
    assert "not updated live" in await response.text()
    for sub in held:
        assert sub is not None
        hub.unsubscribe(sub)


async def test_a_client_that_falls_behind_is_dropped_and_memory_stays_bounded() -> None:
    """Changes queue up to the bound; one more drops the client (its stream ends)."""
    hub = Hub(max_clients=5, queue_size=3)
    slow = hub.subscribe("jobs")
    assert slow is not None
    for _ in range(3):
        hub.publish({"jobs"})
    assert slow.pending() == 3
    assert hub.clients == 1
    hub.publish({"jobs"})
    assert (hub.clients, hub.dropped, slow.dropped) == (0, 1, True)
    assert await slow.next() is False  # what was queued is not delivered: the stream ends
    for _ in range(100):
        hub.publish({"jobs"})
    assert slow.pending() == 0


async def test_changes_queued_meanwhile_make_one_message() -> None:
    hub = Hub(queue_size=10)
    sub = hub.subscribe("overview")
    assert sub is not None
    for _ in range(5):
        hub.publish({"overview"})
    assert await sub.next() is True
    assert sub.pending() == 0


async def test_stopping_the_server_ends_open_live_streams_at_once() -> None:
    """Shutdown closes every subscription first, so an open page does not hold the process for
    the whole shutdown timeout."""
    hub = Hub()
    runner = web.AppRunner(make_app(_cache(), hub), shutdown_timeout=30)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/events?topic=overview") as response,
    ):
        assert response.status == 200
        assert await response.content.readline() == b"retry: 2000\n"
        assert hub.clients == 1
        started = time.monotonic()
        await runner.cleanup()
        assert time.monotonic() - started < 5
        assert hub.clients == 0


async def test_topology_page_renders_the_tree() -> None:
    def member(kind: str, name: str) -> MemberSpec:
        return MemberSpec(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=name)))

    hypernodes = [
        HyperNode(
            metadata=ObjectMeta(name="rack-a"),
            spec=HyperNodeSpec(tier=1, members=(member("Node", "n0"),)),
        ),
        HyperNode(
            metadata=ObjectMeta(name="spine"),
            spec=HyperNodeSpec(tier=2, tier_name="spine", members=(member("HyperNode", "rack-a"),)),
        ),
    ]
    cache = ClusterCache.static(nodes=[node("n0")], hypernodes=hypernodes)
    async with TestClient(TestServer(make_app(cache, Hub()), host="127.0.0.1")) as client:
        text = await _page(client, "/topology")
    assert text.index('data-hypernode="spine"') < text.index('data-hypernode="rack-a"')
    assert '<th scope="row" class="depth-1">rack-a</th>' in text
    assert "<td>2 (spine)</td>" in text
    assert 'data-topic="topology"' in text

    running = job("j", phase="Running")
    cache = ClusterCache.static(
        nodes=[node("n0")], hypernodes=hypernodes, jobs=[running], pods=[pod(running, 0, node="n0")]
    )
    async with TestClient(TestServer(make_app(cache, Hub()), host="127.0.0.1")) as client:
        page = await _page(client, "/jobs/team-a/j")
    assert '<dt>HyperNode</dt><dd><a href="/topology#hn-rack-a">rack-a</a></dd>' in page
