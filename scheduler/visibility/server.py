"""The HTTPS server behind the APIService ``v1alpha1.visibility.caldera.dev``.

It runs in the scheduler process and answers from the positions the session loop published
last (``scheduler.visibility.order.Positions``), never from the cache: the order is the one the
scheduler itself follows. Only the API server talks to it: the TLS handshake requires a client
certificate signed by the API server's requestheader CA, and a request is served only when that
certificate's common name is an allowed front-proxy name
(``scheduler.visibility.requestheader``). The API server has authenticated the user and checked
RBAC on the path before it proxies a request, so:

- a namespace's list (``namespaces/<ns>/pendingjobs``) and the cluster-wide list are answered
  as they are: RBAC on ``pendingjobs`` there has already said yes;
- a queue's list (``queues/<q>/pendingjobs``) mixes namespaces: RBAC on the subresource lets
  the user ask about the queue, and each entry of a namespace where the user may not list
  ``pendingjobs`` is hidden (``scheduler.visibility.answers``). That is asked with
  SubjectAccessReviews: one for the whole cluster, then one per namespace of the page (at most
  ``MAX_REVIEWS_PER_REQUEST``, the rest hidden), each answer kept ``REVIEW_TTL`` seconds. A
  user thus learns where their job stands among others' without learning what others run.

Until the first session has published (and on a replica that is not the leader) the lists
answer 503. The serving certificate is read at start.
"""

from __future__ import annotations

import ssl
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import msgspec
import structlog
from aiohttp import web

from caldera.api.authz import (
    SUBJECT_ACCESS_REVIEW,
    ResourceAttributes,
    SubjectAccessReview,
    SubjectAccessReviewSpec,
)
from caldera.api.kinds import CONFIGMAP
from caldera.api.meta import Status
from caldera.api.visibility import GROUP, RESOURCE, ROOT, VERSION
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError
from scheduler.visibility.answers import BadQueryError, answer, namespaces_of, page_bounds
from scheduler.visibility.order import Positions
from scheduler.visibility.requestheader import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    Identity,
    RequestHeaderConfig,
    common_name,
    identity,
)

log = structlog.get_logger("visibility")
MAX_REVIEWS_PER_REQUEST = 32
REVIEW_TTL = 10.0  # seconds an access answer is reused
MAX_KEPT_REVIEWS = 4096
_ENCODER = msgspec.json.Encoder()
_IDENTITY = web.RequestKey("identity", Identity)


def _json(body: object, status: int = 200) -> web.Response:
    return web.Response(body=_ENCODER.encode(body), status=status, content_type="application/json")


def _status(code: int, reason: str, message: str) -> web.Response:
    body = Status(status="Failure", message=message, reason=reason, code=code)
    return _json(body, code)


def discovery_group() -> dict[str, object]:
    version = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [version],
        "preferredVersion": version,
    }


def discovery_resources() -> dict[str, object]:
    """The APIResourceList kubectl and the aggregator's availability check read."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{VERSION}",
        "resources": [
            {
                "name": RESOURCE,
                "singularName": "pendingjob",
                "namespaced": True,
                "kind": "PendingJob",
                "verbs": ["get", "list"],
            },
            {
                "name": "queues",
                "singularName": "queue",
                "namespaced": False,
                "kind": "Queue",
                "verbs": [],
            },
            {
                "name": f"queues/{RESOURCE}",
                "singularName": "",
                "namespaced": False,
                "kind": "PendingJob",
                "verbs": ["get"],
            },
        ],
    }


class AccessReviews:
    """May a user list ``pendingjobs`` in a namespace ("" for every namespace)? Asked of the
    API server with SubjectAccessReviews, each answer kept ``REVIEW_TTL`` seconds (at most
    ``MAX_KEPT_REVIEWS`` of them, the oldest dropped first)."""

    def __init__(self, client: KubeClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.clock = client, clock
        self._kept: OrderedDict[tuple[object, ...], tuple[float, bool]] = OrderedDict()

    async def may_list(self, who: Identity, namespace: str) -> bool:
        key = (who.user, who.groups, who.uid, tuple(sorted(who.extra.items())), namespace)
        now = self.clock()
        kept = self._kept.get(key)
        if kept is not None and now - kept[0] < REVIEW_TTL:
            return kept[1]
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                resource_attributes=ResourceAttributes(
                    namespace=namespace,
                    verb="list",
                    group=GROUP,
                    version=VERSION,
                    resource=RESOURCE,
                ),
                user=who.user,
                groups=who.groups,
                uid=who.uid,
                extra=dict(who.extra),
            )
        )
        try:
            answered = await self.client.create(SUBJECT_ACCESS_REVIEW, review)
            allowed = answered.status.allowed
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            log.warning("access review failed; hiding", user=who.user, error=str(exc))
            return False  # not kept: asked again next time
        self._kept[key] = (now, allowed)
        self._kept.move_to_end(key)
        while len(self._kept) > MAX_KEPT_REVIEWS:
            self._kept.popitem(last=False)
        return allowed


class VisibilityServer:
    """The aggregated API's HTTPS endpoint; ``positions`` gives the last published order."""

    def __init__(
        self,
        *,
        positions: Callable[[], Positions],
        access: AccessReviews,
        config: RequestHeaderConfig,
        cert_file: str,
        key_file: str,
    ) -> None:
        self.positions, self.access, self.config = positions, access, config
        self.cert_file, self.key_file = cert_file, key_file
        self._runner: web.AppRunner | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """Serving certificate; a client certificate signed by the requestheader CA required."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=self.config.client_ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._front_proxy], client_max_size=4096)
        get = app.router.add_get
        get("/apis", self._groups)
        get(f"/apis/{GROUP}", self._group)
        get(ROOT, self._resources)
        get(f"{ROOT}/{RESOURCE}", self._all)
        get(f"{ROOT}/namespaces/{{namespace}}/{RESOURCE}", self._namespace)
        get(f"{ROOT}/namespaces/{{namespace}}/{RESOURCE}/{{name}}", self._one)
        get(f"{ROOT}/queues/{{queue}}/{RESOURCE}", self._queue)
        return app

    async def start(self, host: str, port: int) -> int:
        """Serve on ``host:port`` (0: any free port); the port taken is returned."""
        context = self.ssl_context()
        self._runner = web.AppRunner(self.app(), handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=context)
        await site.start()
        server = site._server  # aiohttp keeps the bound sockets there
        sockets = getattr(server, "sockets", None) or ()
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _front_proxy(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        transport = request.transport
        peer = transport.get_extra_info("peercert") if transport is not None else None
        if not self.config.proxy_allowed(common_name(peer)):
            return _status(401, "Unauthorized", "only the API server's front proxy may call")
        who = identity(self.config, request.headers.items())
        if who is None and request.path.startswith(f"{ROOT}/"):
            return _status(401, "Unauthorized", "the request names no user")
        if who is not None:
            request[_IDENTITY] = who
        return await handler(request)

    async def _groups(self, _request: web.Request) -> web.Response:
        return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": [discovery_group()]})

    async def _group(self, _request: web.Request) -> web.Response:
        return _json(discovery_group())

    async def _resources(self, _request: web.Request) -> web.Response:
        return _json(discovery_resources())

    def _published(self) -> Positions | None:
        positions = self.positions()
        return positions if positions.observed_at else None

    async def _list(self, request: web.Request, key: str, by: str) -> web.Response:
        positions = self._published()
        if positions is None:
            return _not_yet()
        try:
            offset, limit = page_bounds(request.query)
        except BadQueryError as exc:
            return _status(400, "BadRequest", str(exc))
        entries = positions.by_namespace.get(key, ()) if by == "namespace" else positions.entries
        return _json(answer(positions, entries, offset=offset, limit=limit))

    async def _all(self, request: web.Request) -> web.Response:
        return await self._list(request, "", "all")

    async def _namespace(self, request: web.Request) -> web.Response:
        return await self._list(request, request.match_info["namespace"], "namespace")

    async def _one(self, request: web.Request) -> web.Response:
        positions = self._published()
        if positions is None:
            return _not_yet()
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        entry = positions.by_key.get(f"{namespace}/{name}")
        if entry is None:
            message = f'pendingjobs.{GROUP} "{name}" not found: no such job waits in {namespace}'
            return _status(404, "NotFound", message)
        page = answer(positions, (entry,), offset=0, limit=1)
        return _json(page.items[0])

    async def _queue(self, request: web.Request) -> web.Response:
        positions = self._published()
        if positions is None:
            return _not_yet()
        try:
            offset, limit = page_bounds(request.query)
        except BadQueryError as exc:
            return _status(400, "BadRequest", str(exc))
        entries = positions.by_queue.get(request.match_info["queue"], ())
        who = request[_IDENTITY]
        visible: set[str] = set()
        if await self.access.may_list(who, ""):
            visible.update(e.namespace for e in entries)
        else:
            for namespace in namespaces_of(entries, offset, limit)[:MAX_REVIEWS_PER_REQUEST]:
                if await self.access.may_list(who, namespace):
                    visible.add(namespace)
        page = answer(positions, entries, offset=offset, limit=limit, visible=visible.__contains__)
        return _json(page)


def _not_yet() -> web.Response:
    return _status(
        503,
        "ServiceUnavailable",
        "the scheduler has not published its order yet (no session since it started, "
        "or this replica is not the leader)",
    )


async def read_requestheader(client: KubeClient) -> RequestHeaderConfig:
    """The API server's front-proxy settings (``RequestHeaderError`` when it has none)."""
    configmap = await client.get(CONFIGMAP, CONFIGMAP_NAME, namespace=CONFIGMAP_NAMESPACE)
    return RequestHeaderConfig.from_configmap(configmap.data)
