"""Typed errors of the Kubernetes API, built from the server's answer.

The API server answers a failed request with a `metav1.Status` body: `code` (the HTTP status),
`reason` (a machine-readable word such as `AlreadyExists`, `Conflict`, `Expired`), `message`
(written for humans: "configmaps \"x\" already exists") and `details` (the object's name and kind,
field `causes`, `retryAfterSeconds`). A watch reports an error in-band, as an `ERROR` event whose
object is such a Status (typically code 410, reason `Expired`, when the requested resourceVersion
has been compacted away).

`error_class` is the one place that maps a (code, reason) pair to an exception class;
`api_error` (HTTP answers) and `error_from_status` (watch ERROR events) both go through it. The
server's message is always kept and shown, because it is what tells the user what to fix. A body
that is not a Status (a proxy's HTML error page, a load balancer's text) is kept as the message,
cut to `MAX_BODY_CHARS` characters.

`ApiConnectionError` is the other family: the server never answered (refused, reset, timed out,
TLS failure, a stream cut mid-event). `sent` says whether the request may have reached the server,
which decides whether a write may be retried (see `caldera.kube.retry`).
"""

# The classes carry the Kubernetes Status reasons as names (NotFound, Conflict, ...), as Kopf and
# the Go apimachinery errors do, rather than pep8-naming's "...Error" suffix.
# ruff: noqa: N818

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Mapping

import msgspec

from caldera.api.codec import STATUS_DECODER
from caldera.api.meta import Status, StatusDetails

__all__ = [
    "MAX_BODY_CHARS",
    "AlreadyExists",
    "ApiConnectionError",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "api_error",
    "error_class",
    "error_from_status",
    "parse_retry_after",
]

MAX_BODY_CHARS = 500
"""How much of a non-Status error body is kept: enough to recognise it, not a whole HTML page."""


class KubeError(Exception):
    """Base of every error raised by `caldera.kube`."""


class ApiError(KubeError):
    """The API server answered with an error status.

    `status` is the HTTP status code, `reason` the Status reason (empty when the body was not a
    Status), `message` the server's explanation, `details` the Status details, `retry_after` the
    delay in seconds the server asked for (Retry-After header, else `details.retryAfterSeconds`).
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        details: StatusDetails | None = None,
        retry_after: float | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after
        self.method = method
        self.path = path
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"{self.method} {self.path}: " if self.method and self.path else ""
        reason = f" {self.reason}" if self.reason else ""
        return f"{where}{self.status}{reason}: {self.message or '(no message)'}"

    @property
    def causes(self) -> tuple[tuple[str, str, str], ...]:
        """(reason, message, field) of each cause in the details, e.g. each invalid field."""
        if self.details is None:
            return ()
        return tuple((c.reason, c.message, c.field) for c in self.details.causes)


class NotFound(ApiError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: a create found an object with that name."""


class Conflict(ApiError):
    """409 (any other reason): a stale resourceVersion, a failed precondition, an apply conflict."""


class Gone(ApiError):
    """410, or reason Expired: the resourceVersion or continue token is too old; list again."""


class Invalid(ApiError):
    """422: the object failed validation; the message and `causes` name the fields."""


class Forbidden(ApiError):
    """403: authenticated, but RBAC (or an admission plugin) refuses this request."""


class Unauthorized(ApiError):
    """401: the credentials were missing, wrong or expired."""


class TooManyRequests(ApiError):
    """429: throttled (API priority and fairness), or an eviction a disruption budget refuses."""


class ServerError(ApiError):
    """5xx: the server (or a webhook or etcd behind it) failed."""


class ApiConnectionError(KubeError):
    """No answer from the API server: connection refused or reset, timeout, TLS failure.

    `sent` is False only when the request certainly did not reach the server (the connection was
    never established), which makes any request safe to retry. `transient` is False for failures
    that retrying cannot fix (a TLS certificate the client does not trust).
    """

    def __init__(
        self,
        message: str,
        *,
        sent: bool,
        transient: bool = True,
        method: str = "",
        path: str = "",
    ) -> None:
        self.sent = sent
        self.transient = transient
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method and path else ""
        super().__init__(f"{where}{message}")


# Watch ERROR events from a compacted history carry reason Expired (and code 410); older servers
# and proxies have sent reason Gone.
_GONE_REASONS = frozenset({"Expired", "Gone"})


def error_class(code: int, reason: str) -> type[ApiError]:
    """The exception class for an error `code` and Status `reason`. The only such mapping."""
    if code == 410 or reason in _GONE_REASONS:
        return Gone
    if code == 409:
        return AlreadyExists if reason == "AlreadyExists" else Conflict
    if 500 <= code <= 599:
        return ServerError
    return _BY_CODE.get(code, ApiError)


_BY_CODE: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    422: Invalid,
    429: TooManyRequests,
}


def parse_retry_after(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date; None if absent.

    An unparseable value counts as absent; a date in the past as 0.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    return max(0.0, (when - now).total_seconds())


def _decode_status(body: bytes) -> Status | None:
    try:
        status = STATUS_DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    # Any JSON object decodes (every field has a default); only a real Status counts.
    return status if status.kind == "Status" and (status.message or status.reason) else None


def api_error(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    method: str | None = None,
    path: str | None = None,
) -> ApiError:
    """The typed error for an HTTP error answer (`status` >= 400) with its body and headers."""
    decoded = _decode_status(body) if body else None
    if decoded is None:
        reason = ""
        message = body[: MAX_BODY_CHARS * 4].decode("utf-8", "replace")[:MAX_BODY_CHARS].strip()
        details = None
    else:
        reason, message, details = decoded.reason, decoded.message, decoded.details
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if retry_after is None and details is not None and details.retry_after_seconds:
        retry_after = float(details.retry_after_seconds)
    cls = error_class(status, reason)
    return cls(
        status,
        reason,
        message,
        details=details,
        retry_after=retry_after,
        method=method,
        path=path,
    )


def error_from_status(status: Status, *, path: str | None = None) -> ApiError:
    """The typed error for the Status object of a watch ERROR event."""
    details = status.details
    retry_after = (
        float(details.retry_after_seconds) if details and details.retry_after_seconds else None
    )
    cls = error_class(status.code, status.reason)
    return cls(
        status.code,
        status.reason,
        status.message,
        details=details,
        retry_after=retry_after,
        method="WATCH" if path else None,
        path=path,
    )
