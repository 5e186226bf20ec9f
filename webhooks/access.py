"""The webhook's one question to the API server: a SubjectAccessReview (`webhooks.commands`).

The API server answers a SubjectAccessReview from its authorizers alone: it is not sent to
admission webhooks, so asking it from inside an admission cannot deadlock, whatever the
webhooks' failurePolicy. The question is bounded in time so that the webhook answers (with an
error) before the API server gives up on it.
"""

from __future__ import annotations

import asyncio
from typing import Final

from caldera.api.authz import SUBJECT_ACCESS_REVIEW, SubjectAccessReview, SubjectAccessReviewStatus
from caldera.kube.client import KubeClient
from webhooks.review import AccessCheck

__all__ = ["ACCESS_TIMEOUT", "access_check"]

ACCESS_TIMEOUT: Final = 5.0
"""Seconds a SubjectAccessReview may take, retries included: half the chart's webhook timeout."""


def access_check(client: KubeClient, *, timeout: float = ACCESS_TIMEOUT) -> AccessCheck:
    """An `AccessCheck` sending reviews with ``client``."""

    async def ask(review: SubjectAccessReview) -> SubjectAccessReviewStatus:
        async with asyncio.timeout(timeout):
            answer = await client.create(SUBJECT_ACCESS_REVIEW, review)
        return answer.status

    return ask
