"""What a failed request means, and whether to send it again: the client's retry rule.

`connection_error` turns an aiohttp or timeout failure into an `ApiConnectionError` whose `sent`
says whether the request may have reached the server (answers with an error status are mapped by
`caldera.kube.errors.api_error`). `retry_delay` decides, from the method, the error and the
attempt number, how long to wait before the next attempt, or that there is none:

- 429 Too Many Requests: retried for every method, honouring Retry-After (capped), because the
  server rejected the request before processing it. Except an eviction refused by a
  PodDisruptionBudget (also 429): that is an answer, not throttling, and is raised at once.
- 5xx and connection failures after the request may have been sent (reset, timeout, a cut body):
  retried for reads (GET) only. A write may have been applied: repeating a POST could create
  twice, a PATCH with a JSON-patch `add` could apply twice, a DELETE would answer 404. The
  caller's reconcile loop, which re-reads state first, is the right place to retry those.
- Connection failures before anything was sent (refused, DNS, connect timeout): retried for every
  method. TLS failures are configuration errors and are never retried.
- Everything else (401, 404, 409, 410, 422, 403, ...) is not retried here. `KubeClient` handles
  401 itself: it reloads the credentials once and repeats the request once.

Both are plain functions (the random source is a parameter); `KubeClient` sleeps and counts.
aiohttp is imported only for its exception classes.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Final

import aiohttp

from caldera.kube.errors import ApiConnectionError, ApiError, ServerError, TooManyRequests
from caldera.ratelimit import jittered_backoff

__all__ = ["READ_METHODS", "RetryOptions", "connection_error", "retry_delay"]

READ_METHODS: Final = frozenset({"GET", "HEAD"})


@dataclasses.dataclass(frozen=True, slots=True)
class RetryOptions:
    """How the client retries (see the module docstring for which failures are retried)."""

    max_attempts: int = 5
    """Attempts per request, the first included; 1 disables retries."""
    base: float = 0.25
    """Backoff before the first retry, in seconds; doubles each retry."""
    cap: float = 10.0
    """Longest backoff between two attempts, in seconds."""
    jitter: float = 0.2
    """Backoffs are shortened by a random fraction up to this, so clients do not retry in step."""
    max_retry_after: float = 60.0
    """Longest Retry-After honoured, in seconds; a longer one is shortened to this."""


def connection_error(exc: BaseException, method: str, path: str) -> ApiConnectionError:
    """The ApiConnectionError for an aiohttp or timeout failure; `sent` says whether the request
    may have reached the server."""
    if isinstance(exc, aiohttp.ClientSSLError):
        return ApiConnectionError(
            f"TLS with the API server failed: {exc}",
            sent=False,
            transient=False,
            method=method,
            path=path,
        )
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return ApiConnectionError(f"cannot connect: {exc}", sent=False, method=method, path=path)
    if isinstance(exc, TimeoutError):
        return ApiConnectionError(
            "timed out waiting for the API server", sent=True, method=method, path=path
        )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ApiConnectionError(f"response cut short: {exc}", sent=True, method=method, path=path)
    return ApiConnectionError(
        f"connection failed: {str(exc) or type(exc).__name__}", sent=True, method=method, path=path
    )


def _disruption_budget(err: TooManyRequests) -> bool:
    """An eviction refused because of a PodDisruptionBudget (a decision, not throttling)."""
    return (
        err.details is not None and any(c.reason == "DisruptionBudget" for c in err.details.causes)
    ) or ("disruption budget" in err.message)


def retry_delay(
    method: str,
    error: ApiError | ApiConnectionError,
    attempt: int,
    policy: RetryOptions,
    rng: Callable[[], float] = random.random,
) -> tuple[float, str] | None:
    """(seconds to wait, reason) before retrying after `error` on attempt `attempt` (0-based), or
    None to give up and raise. The rule of the module docstring."""
    if attempt + 1 >= policy.max_attempts:
        return None
    backoff = jittered_backoff(attempt, policy.base, policy.cap, policy.jitter, rng)
    read = method.upper() in READ_METHODS
    if isinstance(error, TooManyRequests):
        if _disruption_budget(error):
            return None
        if error.retry_after is not None and error.retry_after > 0:
            return min(error.retry_after, policy.max_retry_after), "429"
        return backoff, "429"
    if isinstance(error, ServerError):
        return (backoff, str(error.status)) if read else None
    if isinstance(error, ApiConnectionError):
        if not error.transient:
            return None
        return (backoff, "connection") if read or not error.sent else None
    return None
