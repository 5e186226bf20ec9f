"""The in-cluster dashboard over a static cache, with a stand-in API server answering the
TokenReviews and SubjectAccessReviews: no token or a bad one is a 401, each user sees what the
review answers allow and nothing of other namespaces, answers are cached, the login form sets a
locked-down cookie and takes posts from its own origin only, and the loopback check is off."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer

from caldera.api.authn import TokenReview, TokenReviewStatus, UserInfo
from caldera.api.authz import SubjectAccessReview, SubjectAccessReviewStatus
from caldera.api.kinds import KindInfo
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError
from cli.main import main
from dashboard.access import COOKIE
from dashboard.auth import Gate
from dashboard.cache import ClusterCache
from dashboard.live import Hub
from dashboard.server import MAX_STREAMS_PER_USER, make_app
from unit.dashboard_objects import job, node, pod, podgroup, queue

Client = TestClient[Any, Any]
TOKENS = {"tok-admin": "admin", "tok-a": "alice", "tok-b": "bob"}
# (user, resource, namespace) the stand-in RBAC allows; "" is cluster-wide.
ALLOWED = {
    ("admin", r, ns)
    for r in ("jobs", "pods", "queues", "nodes", "hypernodes", "events")
    for ns in ("", "team-a", "team-b")
} | {("alice", "jobs", "team-a"), ("alice", "pods", "team-a")}
# bob: alice's rights, and nodes.
ALLOWED |= {("bob", r, ns) for (who, r, ns) in ALLOWED if who == "alice"} | {("bob", "nodes", "")}


class Reviews:
    """Answers reviews from TOKENS and ALLOWED, counting them."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.down = False

    async def create(self, kind: KindInfo[Any], body: Any) -> Any:
        if self.down:
            raise ApiConnectionError("down", sent=False, transient=True, method="POST", path="/")
        if isinstance(body, TokenReview):
            self.asked.append("token")
            user = TOKENS.get(body.spec.token)
            status = TokenReviewStatus(
                authenticated=user is not None, user=UserInfo(username=user or "")
            )
            return TokenReview(status=status)
        assert isinstance(body, SubjectAccessReview)
        attrs = body.spec.resource_attributes
        assert attrs is not None
        assert attrs.verb == "list"
        self.asked.append(f"{body.spec.user}:{attrs.resource}:{attrs.namespace}")
        allowed = (body.spec.user, attrs.resource, attrs.namespace) in ALLOWED
        return SubjectAccessReview(status=SubjectAccessReviewStatus(allowed=allowed))


def _cache() -> ClusterCache:
    a = job("job-a", namespace="team-a", queue_name="q1")
    b = job("job-b", namespace="team-b", queue_name="q1", phase="Running")
    return ClusterCache.static(
        queues=[queue("q1")],
        jobs=[a, b],
        podgroups=[podgroup(a), podgroup(b, phase="Running")],
        pods=[pod(a, 0), pod(b, 0, phase="Running", node="n0")],
        nodes=[node("n0")],
    )


@pytest.fixture
def reviews() -> Reviews:
    return Reviews()


@pytest.fixture
async def http(reviews: Reviews) -> AsyncIterator[Client]:
    gate = Gate(cast(KubeClient, reviews))
    app = make_app(_cache(), Hub(), gate=gate)
    # Not a loopback address, as in a pod: in-cluster, the host check is off.
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Host": "dashboard.example:8090"}


async def test_no_token_or_a_bad_one_is_401(http: Client) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic eDp5"}):
        response = await http.get("/", headers=headers)
        assert response.status == 401, headers
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    page = await http.get("/jobs", headers={"Accept": "text/html"})
    assert page.status == 401
    assert '<label for="token">' in await page.text()  # the login form
    for public in ("/healthz", "/static/style.css", "/login"):
        assert (await http.get(public)).status == 200, public


async def test_each_user_sees_what_the_reviews_allow(http: Client) -> None:
    admin = await (await http.get("/jobs", headers=_as("tok-admin"))).text()
    assert "job-a" in admin
    assert "job-b" in admin
    response = await http.get("/jobs", headers=_as("tok-a"))
    alice = await response.text()
    assert response.status == 200
    assert "job-a" in alice
    assert "job-b" not in alice
    assert "Signed in as <strong>alice</strong>" in alice
    overview = await (await http.get("/", headers=_as("tok-a"))).text()
    assert "list hypernodes, nodes, queues: they are not shown" in overview
    assert "Nodes</dt>" not in overview
    # Another namespace's job is a 404 with the same words as a job that does not exist.
    other = await http.get("/jobs/team-b/job-b", headers=_as("tok-a"))
    missing = await http.get("/jobs/team-a/nothing", headers=_as("tok-a"))
    assert other.status == missing.status == 404
    queue_page = await (await http.get("/queues/q1", headers=_as("tok-a"))).text()
    assert "job-a" in queue_page
    assert "job-b" not in queue_page
    live = await http.get("/events?topic=job:team-b/job-b", headers=_as("tok-a"))
    assert live.status == 404
    assert (await http.get("/nodes", headers=_as("tok-a"))).status == 403
    nodes = await http.get("/nodes", headers=_as("tok-admin"))
    assert nodes.status == 200
    assert "Requests are summed over" not in await nodes.text()
    partial = await (await http.get("/nodes", headers=_as("tok-b"))).text()
    assert "Requests are summed over the pods of the namespaces you may read only." in partial
    assert "cpu: 0 of 16" in partial  # job-b's pod on n0 is in team-b: not counted for bob


async def test_answers_are_cached(http: Client, reviews: Reviews) -> None:
    for _ in range(3):
        assert (await http.get("/", headers=_as("tok-a"))).status == 200
    assert reviews.asked.count("token") == 1
    assert reviews.asked.count("alice:jobs:team-a") == 1
    for _ in range(2):
        assert (await http.get("/", headers=_as("nope"))).status == 401
    assert reviews.asked.count("token") == 2  # a refused token is remembered too


async def test_an_api_server_that_does_not_answer_is_503(http: Client, reviews: Reviews) -> None:
    reviews.down = True
    response = await http.get("/", headers=_as("tok-a"))
    assert response.status == 503
    assert "tok-a" not in await response.text()


async def test_login_sets_a_locked_down_cookie_from_the_same_origin_only(http: Client) -> None:
    origin = f"http://{http.server.host}:{http.server.port}"
    for foreign_headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {},
        {"Sec-Fetch-Site": "cross-site", "Origin": origin},
    ):
        foreign = await http.post("/login", data={"token": "tok-a"}, headers=foreign_headers)
        assert foreign.status == 403, foreign_headers
    # What Chromium sends from the form, under Referrer-Policy: no-referrer.
    chromium = await http.post(
        "/login",
        data={"token": "tok-a"},
        headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"},
        allow_redirects=False,
    )
    assert chromium.status == 303
    bad = await http.post("/login", data={"token": "nope"}, headers={"Origin": origin})
    assert bad.status == 401
    assert "does not accept this token" in await bad.text()
    good = await http.post(
        "/login", data={"token": "tok-a"}, headers={"Origin": origin}, allow_redirects=False
    )
    assert good.status == 303
    cookie = good.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}=tok-a;")
    for attribute in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/"):
        assert attribute in cookie, attribute
    # The cookie is a token like the header's.
    page = await http.get("/jobs", headers={"Cookie": f"{COOKIE}=tok-a"})
    assert page.status == 200
    assert "job-b" not in await page.text()
    assert (await http.post("/jobs", headers={"Origin": origin})).status == 405
    out = await http.post("/logout", headers={"Origin": origin}, allow_redirects=False)
    assert out.status == 303
    assert f'{COOKIE}=""' in out.headers["Set-Cookie"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--address=0.0.0.0"], "listens on a loopback address only"),
        (["--in-cluster", "-n", "team-a"], "--in-cluster watches every namespace"),
    ],
)
def test_the_command_refuses_a_local_dashboard_off_loopback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dashboard", *argv]) == 2
    assert message in capsys.readouterr().err


async def test_one_user_cannot_hold_every_live_slot(http: Client) -> None:
    opened = []
    try:
        for _ in range(MAX_STREAMS_PER_USER):
            response = await http.get("/events?topic=overview", headers=_as("tok-a"))
            assert response.status == 200
            opened.append(response)
        refused = await http.get("/events?topic=overview", headers=_as("tok-a"))
        assert refused.status == 429
        other = await http.get("/events?topic=overview", headers=_as("tok-admin"))
        assert other.status == 200
        other.close()
        # bob may list nodes, not HyperNodes: he hears of changes to what he may see only.
        nodes = await http.get("/events?topic=nodes", headers=_as("tok-b"))
        assert nodes.status == 200
        nodes.close()
        assert (await http.get("/events?topic=topology", headers=_as("tok-b"))).status == 404
    finally:
        for response in opened:
            response.close()
