"""The dashboard's HTTP server: routes that read the cache, build a page's model with the pure
modules and render it with Jinja2; the live-update stream; static files.

Every page works without JavaScript. With it, ``static/live.js`` opens ``/events?topic=...``
(the topic the page names in ``data-topic``) and, on each ``changed`` message, fetches the same
URL with the header ``X-Fragment: 1``, for which the server renders only the page's content
block, and swaps it in.

Everything a tenant can name (object names, labels, Event messages, the wait record) is
escaped by Jinja2's autoescaping; the Content-Security-Policy allows scripts and styles from the
server only, so an escaped string could not run even if it got through.

Two modes. Locally (no `Gate`), the server answers only requests addressed to it by a loopback
name (`LOCAL_HOSTS`): a web page the user visits cannot reach it through a DNS name rebound to
127.0.0.1 (DNS rebinding); the pages show the cache, which the user's own credentials filled.
In-cluster (a `Gate`), every request but the probes, the static files and the login form needs
a bearer token (an auth proxy's ``Authorization`` header, or the login form's cookie); the gate
says whose it is and what they may list (`dashboard.access.Scope`), and each page shows only
that.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import jinja2
from aiohttp import web

from caldera.api.core import Event
from caldera.api.visibility import PendingJobList
from dashboard import login, topics
from dashboard.access import Scope
from dashboard.auth import Gate
from dashboard.cache import ClusterCache
from dashboard.history import CHART_HEIGHT, CHART_WIDTH, ShareHistory, charts
from dashboard.jobpage import build_job_page
from dashboard.jobs import (
    MAX_ROWS,
    PHASES,
    FilterError,
    JobFilter,
    job_rows,
    parse_filter,
    with_positions,
)
from dashboard.live import Hub
from dashboard.login import GATE, SCOPE
from dashboard.nodes import build_nodes
from dashboard.overview import build_overview, queue_bars
from dashboard.topology import build_topology, job_hypernode
from informers.store import KubeObject

__all__ = ["CACHE", "GATE", "HUB", "SCOPE", "make_app", "scope_of_request"]

T = TypeVar("T", bound=KubeObject)

HERE: Final = Path(__file__).resolve().parent
CACHE: Final = web.AppKey("cache", ClusterCache)
HUB: Final = web.AppKey("hub", Hub)
ReadEvents = Callable[[str, Sequence[str]], Awaitable[list[Event] | None]]
ReadPositions = Callable[[str], Awaitable[PendingJobList | None]]
Clock = Callable[[], dt.datetime]
READ_EVENTS: Final = web.AppKey[ReadEvents]("read_events")
READ_POSITIONS: Final = web.AppKey[ReadPositions]("read_positions")
CLOCK: Final = web.AppKey[Clock]("clock")
TEMPLATES: Final = web.AppKey("templates", jinja2.Environment)

LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})
# Live pages one signed-in user may hold open at once (in-cluster).
MAX_STREAMS_PER_USER: Final = 10
STREAMS: Final = web.AppKey("streams", Counter[str])
HISTORY: Final = web.AppKey("history", ShareHistory)
# How often the queues' shares are sampled for their charts (dashboard.history).
SAMPLE_SECONDS: Final = 60.0
# A live stream says something at least this often, so a dead client is noticed.
KEEPALIVE_SECONDS: Final = 15.0
# A client that cannot take a message in this long is dropped.
WRITE_TIMEOUT: Final = 5.0
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def _no_events(_namespace: str, _uids: Sequence[str]) -> list[Event] | None:
    return None


async def _no_positions(_queue: str) -> PendingJobList | None:
    return None


def templates() -> jinja2.Environment:
    """The page templates; autoescaped, and an undefined name is an error, not blank."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["phases"] = PHASES
    return env


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Locally, loopback hosts only; in-cluster, a user's token (see the module docstring).
    Security headers on every answer."""
    in_cluster = GATE in request.app
    if not in_cluster:
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        if host not in LOCAL_HOSTS:
            raise web.HTTPMisdirectedRequest(
                text="the dashboard answers only on a loopback address\n"
            )
    allowed = ("GET", "HEAD", "POST") if in_cluster and request.path in login.PATHS else None
    if request.method not in (allowed or ("GET", "HEAD")):
        raise web.HTTPMethodNotAllowed(request.method, list(allowed or ("GET", "HEAD")))
    started = time.perf_counter()
    if in_cluster and not login.is_public(request.path):
        response = await login.require_user(request, request.app[GATE], _scope_for, handler)
    else:
        response = await handler(request)
    if not isinstance(response, web.FileResponse) and response.content_type == "text/html":
        # The whole server time of a page (the model, the template), for the browser's tools.
        elapsed = (time.perf_counter() - started) * 1000
        response.headers["Server-Timing"] = f"app;dur={elapsed:.1f}"
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def _scope_for(request: web.Request, gate: Gate, user: Any) -> Scope:
    """The request's scope in-cluster: asked of the gate about the namespaces the cache's jobs
    are in (the only ones a page could show)."""
    return await gate.scope(user, request.app[CACHE].job_namespaces())


def scope_of_request(request: web.Request) -> Scope:
    """What this request may show: the gate's answer in-cluster; locally, the whole cache."""
    if SCOPE in request:
        return request[SCOPE]
    cache = request.app[CACHE]
    return Scope(hidden=cache.hidden, watching=cache.namespace)


def _render(
    request: web.Request, name: str, context: Mapping[str, Any], *, status: int = 200
) -> web.Response:
    """The page, or only its content block for a live update (``X-Fragment: 1``)."""
    env = request.app[TEMPLATES]
    template = env.get_template(name)
    ctx = {
        "scope": scope_of_request(request),
        "in_cluster": GATE in request.app,
        "request_path": request.path_qs,
        **context,
    }
    if request.headers.get("X-Fragment") == "1":
        body = "".join(template.blocks["content"](template.new_context(ctx)))
    else:
        body = template.render(ctx)
    return web.Response(
        text=body, status=status, content_type="text/html", headers={"Cache-Control": "no-store"}
    )


def _not_found(request: web.Request, what: str) -> web.Response:
    return _render(
        request, "error.html", {"title": "Not found", "message": what, "topic": ""}, status=404
    )


def _visible(scope: Scope, objects: list[T]) -> list[T]:
    """The objects in namespaces the scope sees (all of them when it sees every namespace)."""
    if scope.namespaces is None:
        return objects
    return [o for o in objects if scope.sees(o.metadata.namespace or "")]


async def overview(request: web.Request) -> web.Response:
    cache, scope = request.app[CACHE], scope_of_request(request)
    model = build_overview(
        cache.queues.list() if scope.shows("queues") else [],
        _visible(scope, cache.jobs.list()),
        cache.nodes.list() if scope.shows("nodes") else [],
        _visible(scope, cache.pods.list()),
    )
    return _render(
        request, "overview.html", {"title": "Overview", "model": model, "topic": topics.OVERVIEW}
    )


async def nodes_page(request: web.Request) -> web.Response:
    cache, scope = request.app[CACHE], scope_of_request(request)
    context: dict[str, Any] = {"title": "Nodes", "topic": topics.NODES}
    if not scope.shows("nodes"):
        context["page"] = None
        return _render(request, "nodes.html", context, status=403)
    context["page"] = build_nodes(
        cache.nodes.list(),
        _visible(scope, cache.pods.list()),
        partial=scope.namespaces is not None or cache.namespace is not None,
    )
    return _render(request, "nodes.html", context)


async def topology_page(request: web.Request) -> web.Response:
    cache, scope = request.app[CACHE], scope_of_request(request)
    context: dict[str, Any] = {"title": "Topology", "topic": topics.TOPOLOGY, "page": None}
    missing = [kind for kind in ("hypernodes", "nodes") if not scope.shows(kind)]
    if missing:
        context["message"] = (
            f"The topology needs the right to list {' and '.join(missing)}: "
            "without it (or without the HyperNode CRD) it is not shown."
        )
        return _render(request, "topology.html", context, status=403)
    context["page"] = build_topology(cache.hypernodes.list(), cache.nodes.list())
    return _render(request, "topology.html", context)


async def job_list(request: web.Request) -> web.Response:
    cache = request.app[CACHE]
    try:
        flt = parse_filter(request.query)
    except FilterError as exc:
        context = {
            "title": "Jobs",
            "rows": [],
            "more": 0,
            "filter": JobFilter(),
            "error": str(exc),
            "topic": "",
        }
        return _render(request, "jobs.html", context, status=400)
    jobs = cache.jobs_in_queue(flt.queue) if flt.queue else cache.jobs.list()
    jobs = _visible(scope_of_request(request), jobs)
    rows = job_rows(jobs, cache.podgroups_of(jobs), cache.priorities(), request.app[CLOCK](), flt)
    context = {
        "title": "Jobs",
        "rows": rows[:MAX_ROWS],
        "more": max(0, len(rows) - MAX_ROWS),
        "filter": flt,
        "error": "",
        "topic": topics.JOBS,
    }
    return _render(request, "jobs.html", context)


async def queue_page(request: web.Request) -> web.Response:
    cache, scope = request.app[CACHE], scope_of_request(request)
    name = request.match_info["name"]
    queue = cache.queues.get(name) if scope.shows("queues") else None
    jobs = _visible(scope, cache.jobs_in_queue(name))
    if queue is None and not jobs:
        return _not_found(
            request, f"queue {name!r} is not in the cache (no such queue, and no job names it)"
        )
    try:
        flt = parse_filter({**request.query, "queue": ""})
    except FilterError as exc:
        return _render(
            request,
            "error.html",
            {"title": "Bad filter", "message": str(exc), "topic": ""},
            status=400,
        )
    rows = job_rows(jobs, cache.podgroups_of(jobs), cache.priorities(), request.app[CLOCK](), flt)
    # The scheduler's own order, read through the API server (so its RBAC applies) when the
    # visibility API is served; otherwise the page's order stands.
    listed = await request.app[READ_POSITIONS](name)
    if listed is not None:
        rows = with_positions(rows, listed.items)
    context = {
        "title": f"Queue {name}",
        "positions": listed is not None,
        "observed_at": listed.observed_at if listed is not None else "",
        "name": name,
        "queue": queue,
        "bars": queue_bars(queue) if queue is not None else (),
        "shares": charts(request.app[HISTORY].samples(name)),
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "rows": rows[:MAX_ROWS],
        "more": max(0, len(rows) - MAX_ROWS),
        "pending": sum(1 for r in rows if r.waiting),
        "filter": flt,
        "topic": topics.queue_topic(name),
    }
    return _render(request, "queue.html", context)


async def job_page(request: web.Request) -> web.Response:
    cache = request.app[CACHE]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    scope = scope_of_request(request)
    # One answer for "no such job" and "not yours": a user learns nothing of other namespaces.
    job = cache.job(namespace, name) if scope.sees(namespace) else None
    if job is None:
        return _not_found(
            request,
            f"job {namespace}/{name} is not in the cache (no such job, or not visible to you)",
        )
    podgroup = cache.podgroup_of(job)
    pods = cache.pods_of(job)
    uids = [job.metadata.uid]
    if podgroup is not None:
        uids.append(podgroup.metadata.uid)
    uids += [p.metadata.uid for p in pods]
    events = None
    if await login.may_read_events(request, namespace):
        events = await request.app[READ_EVENTS](namespace, uids)
    model = build_job_page(job, podgroup, pods, events, request.app[CLOCK]())
    hypernode = None
    if scope.shows("hypernodes") and scope.shows("nodes"):
        hypernode = job_hypernode(
            cache.hypernodes.list(), cache.nodes.list(), (p.spec.node_name for p in pods)
        )
    context = {
        "title": f"Job {namespace}/{name}",
        "job": model,
        "hypernode": hypernode,
        "topic": topics.job_topic(namespace, name),
    }
    return _render(request, "job.html", context)


async def live(request: web.Request) -> web.StreamResponse:
    """The server-sent events of one topic: ``event: changed`` once per burst of changes."""
    topic = request.query.get("topic", "")
    if not topics.valid_topic(topic):
        raise web.HTTPBadRequest(text=f"unknown topic {topic[:80]!r}\n")
    scope = scope_of_request(request)
    namespace = topics.topic_namespace(topic)
    hidden_kind = {topics.NODES: "nodes", topics.TOPOLOGY: "hypernodes"}.get(topic)
    if (namespace is not None and not scope.sees(namespace)) or (
        hidden_kind is not None and not scope.shows(hidden_kind)
    ):
        raise web.HTTPNotFound(text="no such topic for you\n")
    # In-cluster, one user may not hold every live slot: the others' pages would go static.
    streams = request.app[STREAMS]
    if scope.user and streams[scope.user] >= MAX_STREAMS_PER_USER:
        raise web.HTTPTooManyRequests(
            text=f"{MAX_STREAMS_PER_USER} of your pages are live; this one is not updated live\n",
            headers={"Retry-After": "30"},
        )
    hub = request.app[HUB]
    sub = hub.subscribe(topic)
    if sub is None:
        raise web.HTTPServiceUnavailable(
            text=f"{hub.max_clients} live pages are open; this one is not updated live\n",
            headers={"Retry-After": "30"},
        )
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    streams[scope.user] += 1
    try:
        await response.prepare(request)
        await response.write(b"retry: 2000\n\n")
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    changed = await sub.next()
                message = f"event: changed\ndata: {topic}\n\n" if changed else ""
            except TimeoutError:
                message = ": keepalive\n\n"
            if not message:
                break  # dropped for falling behind, or the server stops
            async with asyncio.timeout(WRITE_TIMEOUT):
                await response.write(message.encode())
    except (TimeoutError, ConnectionResetError):
        pass  # a client that cannot keep up, or gone: its subscription ends below
    finally:
        hub.unsubscribe(sub)
        streams[scope.user] -= 1
        if streams[scope.user] <= 0:
            del streams[scope.user]  # the counter holds only users with an open page
    return response


async def healthz(_request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def make_app(
    cache: ClusterCache,
    hub: Hub,
    *,
    read_events: ReadEvents = _no_events,
    read_positions: ReadPositions = _no_positions,
    clock: Clock = _now,  # a fixed clock for tests
    gate: Gate | None = None,
    sample_seconds: float = SAMPLE_SECONDS,
) -> web.Application:
    """The dashboard's application over `cache`; `read_events` reads a job page's Events,
    `read_positions` a queue's order from the visibility API; with a `gate`, in-cluster:
    every user brings a token and sees what their RBAC allows."""
    # The login form is the only body the server reads: a token, a few KiB.
    app = web.Application(middlewares=[_guard], client_max_size=login.MAX_FORM)
    if gate is not None:
        app[GATE] = gate
    app[CACHE] = cache
    app[HUB] = hub
    app[READ_EVENTS] = read_events
    app[READ_POSITIONS] = read_positions
    app[CLOCK] = clock
    app[TEMPLATES] = templates()
    app[STREAMS] = Counter()

    async def close_streams(_app: web.Application) -> None:
        hub.close()  # ends every live stream, so shutdown does not wait for them

    app.on_shutdown.append(close_streams)
    app[HISTORY] = ShareHistory()

    async def sample_shares(app: web.Application) -> AsyncIterator[None]:
        """Sample every queue's amounts now and each ``sample_seconds`` after, while the
        dashboard runs (the charts of the queue pages)."""

        async def sample() -> None:
            while True:
                app[HISTORY].record(clock(), cache.queues.list())
                await asyncio.sleep(sample_seconds)

        task = asyncio.create_task(sample())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(sample_shares)
    app.router.add_get("/", overview)
    app.router.add_get("/jobs", job_list)
    app.router.add_get("/jobs/{namespace}/{name}", job_page)
    app.router.add_get("/queues/{name}", queue_page)
    app.router.add_get("/nodes", nodes_page)
    app.router.add_get("/topology", topology_page)
    app.router.add_get("/events", live)
    app.router.add_get("/healthz", healthz)
    if gate is not None:
        login.add_routes(app, _render)
    app.router.add_static("/static/", HERE / "static")
    return app
