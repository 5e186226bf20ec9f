"""The in-cluster dashboard's pure decisions: the token a request carries, the reviews asked,
the scope their answers make, and the bounded, expiring cache of answers."""

from __future__ import annotations

import pytest

from caldera.api.authn import UserInfo
from caldera.api.kinds import JOB, NODE, QUEUE
from dashboard.access import (
    MAX_TOKEN,
    UnauthenticatedError,
    bearer_token,
    list_review,
    scope_of,
    token_key,
    user_key,
)
from dashboard.ttlcache import TTLCache

ALICE = UserInfo(username="alice", uid="u1", groups=("team-a", "system:authenticated"))


def test_the_header_comes_before_the_cookie() -> None:
    assert bearer_token("Bearer abc.def-ghi_", "cookie-token") == "abc.def-ghi_"
    assert bearer_token("bearer  xyz== ", None) == "xyz=="
    assert bearer_token(None, "cookie-token") == "cookie-token"


@pytest.mark.parametrize(
    ("header", "cookie", "message"),
    [
        (None, None, "no token"),
        (None, "", "no token"),
        ("Basic dXNlcjpwYXNz", None, "not 'Bearer TOKEN'"),
        ("Bearer ", None, "is empty"),
        ("Bearer a b", None, "characters a bearer token cannot have"),
        (None, "tok\nen", "characters a bearer token cannot have"),
        (None, "x" * (MAX_TOKEN + 1), f"longer than {MAX_TOKEN}"),
    ],
)
def test_a_missing_or_malformed_token_is_refused_with_a_reason(
    header: str | None, cookie: str | None, message: str
) -> None:
    with pytest.raises(UnauthenticatedError, match=message) as caught:
        bearer_token(header, cookie)
    assert "dXNlcjpwYXNz" not in str(caught.value)  # never the credential itself


def test_the_cache_keys_hold_no_token_and_tell_users_apart() -> None:
    assert "secret" not in token_key("secret")
    assert len(token_key("secret")) == 64
    other_groups = UserInfo(username="alice", uid="u1", groups=("team-b",))
    assert user_key(ALICE) != user_key(other_groups)
    assert user_key(ALICE) == user_key(
        UserInfo(username="alice", uid="u1", groups=ALICE.groups[::-1])
    )


def test_list_review_asks_about_the_user_the_kind_and_the_namespace() -> None:
    review = list_review(ALICE, JOB, "team-a")
    attrs = review.spec.resource_attributes
    assert attrs is not None
    assert (attrs.verb, attrs.group, attrs.resource, attrs.namespace) == (
        "list", "batch.volcano.sh", "jobs", "team-a",
    )  # fmt: skip
    assert (review.spec.user, review.spec.groups, review.spec.uid) == ("alice", ALICE.groups, "u1")
    queues = list_review(ALICE, QUEUE, "team-a").spec.resource_attributes
    assert queues is not None
    assert queues.namespace == ""


def test_scope_from_the_answers() -> None:
    one = scope_of(
        ALICE,
        everywhere=False,
        namespaces={"team-a": True, "team-b": False},
        cluster={"queues": True, "nodes": False},
    )
    assert one.sees("team-a")
    assert not one.sees("team-b")
    assert not one.sees("other")
    assert one.shows("queues")
    assert not one.shows("nodes")
    assert one.user == "alice"
    every = scope_of(ALICE, everywhere=True, namespaces={}, cluster={"queues": True})
    assert every.sees("anything")
    assert every.namespaces is None
    # What the dashboard itself could not list stays hidden, whatever the user may.
    assert not scope_of(
        ALICE, everywhere=True, namespaces={}, cluster={"nodes": True}, hidden=[NODE.plural]
    ).shows("nodes")


def test_ttl_cache_expires_and_stays_bounded() -> None:
    now = [0.0]
    cache: TTLCache[str, int] = TTLCache(ttl=10, max_entries=3, clock=lambda: now[0])
    cache.put("a", 1)
    cache.put("short", 2, ttl=1)
    now[0] = 2
    assert cache.get("a") == 1
    assert cache.get("short") is None
    for key in "bcd":
        cache.put(key, 0)
    assert len(cache) == 3
    assert cache.get("a") is None
    now[0] = 20
    assert cache.get("d") is None
    assert len(cache) == 2
    with pytest.raises(ValueError, match="positive"):
        TTLCache(ttl=0, max_entries=1, clock=lambda: 0.0)
