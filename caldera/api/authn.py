"""TokenReview (authentication.k8s.io/v1): who a bearer token belongs to, as the API server
says. The dashboard asks it for each token its users bring (docs/dashboard.md); the API server
answers without storing anything. Pure models only."""

from __future__ import annotations

from typing import Final

import msgspec

from caldera.api.kinds import KindInfo
from caldera.api.meta import Model, ObjectMeta, type_meta

__all__ = [
    "TOKEN_REVIEW",
    "TokenReview",
    "TokenReviewSpec",
    "TokenReviewStatus",
    "UserInfo",
]


class UserInfo(Model, frozen=True):
    """The authenticated user: what a SubjectAccessReview then asks about."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


class TokenReviewSpec(Model, frozen=True):
    token: str = ""
    audiences: tuple[str, ...] = ()


class TokenReviewStatus(Model, frozen=True):
    authenticated: bool = False
    user: UserInfo = UserInfo()
    audiences: tuple[str, ...] = ()
    error: str = ""


class TokenReview(Model, frozen=True):
    """authentication.k8s.io/v1 TokenReview (create-only, never stored)."""

    api_version: str = type_meta("authentication.k8s.io/v1")
    kind: str = type_meta("TokenReview")
    metadata: ObjectMeta = ObjectMeta()
    spec: TokenReviewSpec = TokenReviewSpec()
    status: TokenReviewStatus = TokenReviewStatus()


TOKEN_REVIEW: Final = KindInfo(
    "TokenReview", "authentication.k8s.io", "v1", "tokenreviews", False, TokenReview
)
