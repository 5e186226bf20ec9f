"""The in-cluster dashboard's authentication over HTTP: the token of each request, the 401
answer, and the login form that keeps a token in a cookie (``/login``, ``/logout``).

The cookie is HttpOnly (no script reads it), Secure (sent over HTTPS only, and to localhost)
and SameSite=Strict (no other site's page sends it), so it can carry a bearer token. The form
and sign-out are the only POSTs the server takes, and only from a page of its own origin (the
``Sec-Fetch-Site`` or ``Origin`` header), so another site cannot sign a user in or out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from aiohttp import web

from caldera.api.authn import UserInfo
from caldera.api.kinds import EVENT
from dashboard.access import COOKIE, MAX_TOKEN, Scope, UnauthenticatedError, bearer_token
from dashboard.auth import Gate, ReviewFailedError

__all__ = [
    "GATE",
    "MAX_FORM",
    "PATHS",
    "SCOPE",
    "USER",
    "add_routes",
    "is_public",
    "may_read_events",
    "require_user",
]

GATE: Final = web.AppKey("gate", Gate)
SCOPE: Final = web.RequestKey("scope", Scope)
USER: Final = web.RequestKey("user", UserInfo)
Render = Callable[..., web.Response]
RENDER: Final = web.AppKey[Render]("render")
ScopeFor = Callable[[web.Request, Gate, UserInfo], Awaitable[Scope]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

PATHS: Final = frozenset({"/login", "/logout"})
MAX_FORM: Final = 2 * MAX_TOKEN
COOKIE_MAX_AGE: Final = 8 * 3600
"""A signed-in browser keeps the token this long (the token's own expiry may come first)."""
REALM: Final = 'Bearer realm="caldera-dashboard"'


def is_public(path: str) -> bool:
    """What anyone may fetch: the probes, the stylesheet and script, the login form."""
    return path == "/healthz" or path in PATHS or path.startswith("/static/")


def _unauthorized(request: web.Request, message: str) -> web.Response:
    """401: the login form for a browser's page, one line for anything else."""
    headers = {"WWW-Authenticate": REALM, "Cache-Control": "no-store"}
    page = "text/html" in request.headers.get("Accept", "") and RENDER in request.app
    if page and request.headers.get("X-Fragment") != "1":
        response = request.app[RENDER](request, "login.html", _form(message), status=401)
        response.headers.update(headers)
        return response
    return web.Response(status=401, text=f"{message}\n", headers=headers)


def _form(message: str) -> Mapping[str, Any]:
    return {"title": "Sign in", "message": message, "topic": "", "max_token": MAX_TOKEN}


async def require_user(
    request: web.Request, gate: Gate, scope_for: ScopeFor, handler: Handler
) -> web.StreamResponse:
    """The handler's answer for a user the API server knows, with their scope; else 401 (no
    token, a malformed one, one it refuses) or 503 (it did not answer)."""
    try:
        token = bearer_token(request.headers.get("Authorization"), request.cookies.get(COOKIE))
    except UnauthenticatedError as exc:
        return _unauthorized(request, str(exc))
    try:
        user = await gate.user(token)
        if user is None:
            return _unauthorized(request, "the API server does not accept this token")
        request[USER] = user
        request[SCOPE] = await scope_for(request, gate, user)
    except ReviewFailedError:
        return web.Response(
            status=503,
            text="the API server did not answer whether you may see this; try again\n",
            headers={"Retry-After": "5"},
        )
    return await handler(request)


async def may_read_events(request: web.Request, namespace: str) -> bool:
    """Whether the page may show `namespace`'s Events (locally: the reader finds out)."""
    if GATE not in request.app:
        return True
    try:
        return await request.app[GATE].may_list(request[USER], EVENT, namespace)
    except ReviewFailedError:
        return False


def _same_origin(request: web.Request) -> bool:
    """Whether a POST comes from a page of this server: the browser's ``Sec-Fetch-Site`` when
    it sends one (no page can set it; with ``Referrer-Policy: no-referrer`` Chromium sends
    ``Origin: null`` on a form's POST), else an ``Origin`` naming this host."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("Origin", "")
    return bool(origin) and urlsplit(origin).netloc == request.host


async def login_page(request: web.Request) -> web.StreamResponse:
    render = request.app[RENDER]
    if request.method != "POST":
        return render(request, "login.html", _form(""))
    if not _same_origin(request):
        raise web.HTTPForbidden(text="sign in from the dashboard's own page\n")
    form = await request.post()
    value = form.get("token")
    try:
        token = bearer_token(None, value if isinstance(value, str) else "")
    except UnauthenticatedError as exc:
        return render(request, "login.html", _form(str(exc)), status=400)
    try:
        user = await request.app[GATE].user(token)
    except ReviewFailedError:
        return render(
            request, "login.html", _form("the API server did not answer; try again"), status=503
        )
    if user is None:
        return render(
            request, "login.html", _form("the API server does not accept this token"), status=401
        )
    response = web.HTTPSeeOther("/")
    response.set_cookie(
        COOKIE,
        token,
        max_age=COOKIE_MAX_AGE,
        path="/",
        httponly=True,
        secure=True,
        samesite="Strict",
    )
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    if request.method != "POST" or not _same_origin(request):
        raise web.HTTPForbidden(text="sign out from the dashboard's own page\n")
    response = web.HTTPSeeOther("/login")
    response.del_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="Strict")
    raise response


def add_routes(app: web.Application, render: Render) -> None:
    app[RENDER] = render
    app.router.add_route("*", "/login", login_page)
    app.router.add_route("*", "/logout", logout)
