"""The in-cluster dashboard's gate: who a request's token belongs to (a TokenReview) and what
that user may list (SubjectAccessReviews), asked of the API server and cached briefly.

The decisions are `dashboard.access`'s; this module only asks and remembers. Both caches are
bounded (`dashboard.ttlcache`), keyed by a token's hash, never the token, and by everything an
authorizer decides on. A token the API server refuses is remembered too, for a shorter time, so
a client sending bad tokens in a loop costs one review per token per few seconds. Reviews go out
at most `MAX_REVIEWS` at a time. The client given here creates reviews and nothing else: the
dashboard's reads use another, fenced client (`dashboard.app`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any, Final

from caldera.api.authn import TOKEN_REVIEW, TokenReview, TokenReviewSpec, UserInfo
from caldera.api.authz import SUBJECT_ACCESS_REVIEW, SubjectAccessReview
from caldera.api.kinds import KindInfo
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError
from dashboard.access import (
    CLUSTER_KINDS,
    NAMESPACE_KINDS,
    Scope,
    list_review,
    scope_of,
    token_key,
    user_key,
)
from dashboard.ttlcache import TTLCache

__all__ = ["Gate", "ReviewFailedError"]

TOKEN_TTL: Final = 10.0
REFUSED_TTL: Final = 3.0
ACCESS_TTL: Final = 10.0
MAX_TOKENS: Final = 1000
MAX_ANSWERS: Final = 20000
MAX_REVIEWS: Final = 8
REVIEW_TIMEOUT: Final = 5.0


class ReviewFailedError(Exception):
    """The API server did not answer a review (the request gets 503, not a guess)."""


class Gate:
    """Asks and caches (see the module docstring); `clock` is monotonic seconds."""

    def __init__(
        self,
        client: KubeClient,
        *,
        hidden: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._hidden = tuple(hidden)
        # (user,), or (None,) for a refused token: a remembered refusal is not a miss.
        self._users: TTLCache[str, tuple[UserInfo | None]] = TTLCache(
            ttl=TOKEN_TTL, max_entries=MAX_TOKENS, clock=clock
        )
        self._answers: TTLCache[tuple[Any, ...], bool] = TTLCache(
            ttl=ACCESS_TTL, max_entries=MAX_ANSWERS, clock=clock
        )
        self._limit = asyncio.Semaphore(MAX_REVIEWS)

    async def user(self, token: str) -> UserInfo | None:
        """The token's user, or None when the API server says it authenticates no one."""
        key = token_key(token)
        cached = self._users.get(key)
        if cached is not None:
            return cached[0]
        review = TokenReview(spec=TokenReviewSpec(token=token))
        answer: TokenReview = await self._ask(lambda: self._client.create(TOKEN_REVIEW, review))
        status = answer.status
        if status.authenticated and status.user.username:
            self._users.put(key, (status.user,))
            return status.user
        self._users.put(key, (None,), REFUSED_TTL)
        return None

    async def may_list(self, user: UserInfo, kind: KindInfo[Any], namespace: str = "") -> bool:
        key = (user_key(user), kind.plural, kind.group, namespace)
        cached = self._answers.get(key)
        if cached is not None:
            return cached
        review = list_review(user, kind, namespace)
        answer: SubjectAccessReview = await self._ask(
            lambda: self._client.create(SUBJECT_ACCESS_REVIEW, review)
        )
        allowed = answer.status.allowed and not answer.status.denied
        self._answers.put(key, allowed)
        return allowed

    async def scope(self, user: UserInfo, namespaces: Iterable[str]) -> Scope:
        """What `user` may see of the cache, whose jobs are in `namespaces`."""

        async def all_of(namespace: str) -> bool:
            for kind in NAMESPACE_KINDS:
                if not await self.may_list(user, kind, namespace):
                    return False
            return True

        everywhere = await all_of("")
        per_namespace: dict[str, bool] = {}
        if not everywhere:
            wanted = sorted(set(namespaces))
            answers = await asyncio.gather(*(all_of(ns) for ns in wanted))
            per_namespace = dict(zip(wanted, answers, strict=True))
        cluster = {
            kind.plural: await self.may_list(user, kind)
            for kind in CLUSTER_KINDS
            if kind.plural not in self._hidden
        }
        return scope_of(
            user,
            everywhere=everywhere,
            namespaces=per_namespace,
            cluster=cluster,
            hidden=self._hidden,
        )

    async def _ask(self, send: Callable[[], Any]) -> Any:
        try:
            async with self._limit, asyncio.timeout(REVIEW_TIMEOUT):
                return await send()
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            raise ReviewFailedError(type(exc).__name__) from exc
