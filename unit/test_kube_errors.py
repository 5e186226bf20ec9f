"""Tests of caldera.kube.errors (Status answers to typed errors) and of caldera.kube.config (the
one-line ConfigErrors a user sees, and credentials that refresh)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from caldera.api.meta import Status, StatusCause, StatusDetails
from caldera.kube.config import (
    ConfigError,
    kubeconfig_paths,
    load_config,
    load_kubeconfig,
)
from caldera.kube.errors import (
    MAX_BODY_CHARS,
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    api_error,
    error_from_status,
    parse_retry_after,
)


def status_body(code: int, reason: str, message: str, **details: Any) -> bytes:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Gone", Gone),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (403, "Forbidden", Forbidden),
        (401, "Unauthorized", Unauthorized),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (504, "Timeout", ServerError),
        (400, "BadRequest", ApiError),
        (415, "UnsupportedMediaType", ApiError),
    ],
)
def test_status_codes_map_to_classes(code: int, reason: str, cls: type[ApiError]) -> None:
    """Each status code (and 409's reason) gives its own class, keeping code, reason, message."""
    err = api_error(code, status_body(code, reason, "the server says why"), {})
    assert type(err) is cls
    assert (err.status, err.reason, err.message) == (code, reason, "the server says why")


def test_already_exists_is_not_a_conflict() -> None:
    """Code that catches Conflict (optimistic locking) must not swallow AlreadyExists."""
    err = api_error(409, status_body(409, "AlreadyExists", 'configmaps "a" already exists'), {})
    assert not isinstance(err, Conflict)


def test_message_names_the_request_and_the_server_reason() -> None:
    """str(error) carries method, path, code, reason and the server's own message."""
    body = status_body(
        422,
        "Invalid",
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain must consist of ...",
        name="Bad_Name",
        kind="ConfigMap",
        causes=[
            {"reason": "FieldValueInvalid", "message": "Invalid value", "field": "metadata.name"}
        ],
    )
    err = api_error(422, body, {}, method="POST", path="/api/v1/namespaces/x/configmaps")
    text = str(err)
    assert text.startswith("POST /api/v1/namespaces/x/configmaps: 422 Invalid: ")
    assert "a lowercase RFC 1123 subdomain" in text
    assert err.causes == (("FieldValueInvalid", "Invalid value", "metadata.name"),)
    assert err.details is not None
    assert err.details.name == "Bad_Name"


def test_non_status_body_is_kept_and_truncated() -> None:
    """An HTML page from a proxy becomes the message, cut to MAX_BODY_CHARS characters."""
    page = b"<html><body>" + b"x" * 5000 + b"</body></html>"
    err = api_error(502, page, {})
    assert isinstance(err, ServerError)
    assert err.reason == ""
    assert err.message.startswith("<html><body>xxx")
    assert len(err.message) == MAX_BODY_CHARS


def test_json_that_is_not_a_status_is_treated_as_text() -> None:
    """A JSON body of another kind does not pretend to be a Status."""
    err = api_error(500, b'{"error": "boom"}', {})
    assert err.message == '{"error": "boom"}'
    assert err.reason == ""


def test_empty_body_still_gives_a_readable_error() -> None:
    """No body at all still gives the class and a message saying there was none."""
    err = api_error(503, b"", {})
    assert isinstance(err, ServerError)
    assert str(err) == "503: (no message)"


def test_retry_after_header_wins_over_details() -> None:
    """Retry-After (seconds) is used; without it, details.retryAfterSeconds."""
    body = status_body(429, "TooManyRequests", "slow down", retryAfterSeconds=7)
    assert api_error(429, body, {"Retry-After": "3"}).retry_after == 3.0
    assert api_error(429, body, {}).retry_after == 7.0
    assert api_error(429, status_body(429, "TooManyRequests", "x"), {}).retry_after is None


def test_retry_after_accepts_http_dates() -> None:
    """Retry-After may be an HTTP date: the delay is counted from now; the past means 0."""
    now = dt.datetime(2024, 5, 1, 10, 0, 0, tzinfo=dt.UTC)
    assert parse_retry_after("Wed, 01 May 2024 10:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 01 May 2024 09:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None


def test_watch_error_event_status_becomes_gone() -> None:
    """A watch ERROR event's Status (410 Expired: too old resource version) maps to Gone."""
    status = Status(
        status="Failure",
        message="too old resource version: 5 (1234)",
        reason="Expired",
        code=410,
    )
    err = error_from_status(status, path="/api/v1/configmaps")
    assert isinstance(err, Gone)
    assert "too old resource version: 5 (1234)" in str(err)
    assert str(err).startswith("WATCH /api/v1/configmaps: 410 Expired")


def test_watch_error_status_keeps_details() -> None:
    """The Status details (causes, retryAfterSeconds) survive the conversion."""
    details = StatusDetails(causes=(StatusCause(reason="r", message="m", field="f"),))
    details = StatusDetails(causes=details.causes, retry_after_seconds=2)
    err = error_from_status(
        Status(code=500, reason="InternalError", message="etcd", details=details)
    )
    assert isinstance(err, ServerError)
    assert err.retry_after == 2.0
    assert err.causes == (("r", "m", "f"),)


# --- configuration errors ------------------------------------------------------------------------


def test_kubeconfig_paths_precedence(tmp_path: Path) -> None:
    """--kubeconfig beats $KUBECONFIG (a merged list), which beats ~/.kube/config."""
    env = {"KUBECONFIG": f"/a{':'}/b"}
    assert kubeconfig_paths("/x", env, tmp_path) == ([Path("/x")], "--kubeconfig")
    assert kubeconfig_paths(None, env, tmp_path) == ([Path("/a"), Path("/b")], "KUBECONFIG")
    assert kubeconfig_paths(None, {}, tmp_path) == ([tmp_path / ".kube/config"], "default")


async def test_missing_explicit_kubeconfig_says_what_to_set(tmp_path: Path) -> None:
    """A missing kubeconfig is one line naming the path and the flag/variable to fix."""
    with pytest.raises(ConfigError) as err:
        await load_kubeconfig(tmp_path / "nope", environ={}, home=tmp_path)
    assert str(err.value) == (
        f"kubeconfig {tmp_path / 'nope'} not found: set --kubeconfig or KUBECONFIG"
    )


async def test_missing_kubeconfig_from_env_blames_the_env(tmp_path: Path) -> None:
    """A $KUBECONFIG pointing nowhere says so."""
    with pytest.raises(ConfigError, match=r"\(from KUBECONFIG\) not found: fix KUBECONFIG"):
        await load_kubeconfig(environ={"KUBECONFIG": str(tmp_path / "gone")}, home=tmp_path)


async def test_nothing_configured_outside_a_cluster(tmp_path: Path) -> None:
    """No kubeconfig anywhere and no in-cluster environment: one line saying both."""
    with pytest.raises(ConfigError, match="not found and not running in a cluster"):
        await load_config(environ={}, home=tmp_path)


async def test_broken_yaml_is_one_clear_line(tmp_path: Path) -> None:
    """A kubeconfig that is not YAML fails with a one-line message naming the file."""
    path = tmp_path / "config"
    path.write_text("clusters: [unclosed\n  - {")
    with pytest.raises(ConfigError) as err:
        await load_kubeconfig(path, environ={}, home=tmp_path)
    assert str(err.value) == (
        f"kubeconfig {path} is not valid YAML: expected ',' or ']', but got '{{' (line 2, column 5)"
    )


@pytest.mark.parametrize("text", ["", "[]", "just a string"])
async def test_not_a_kubeconfig_is_one_clear_line(tmp_path: Path, text: str) -> None:
    """An empty file, or YAML that is not a mapping, says what a kubeconfig should be."""
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"is empty or not a kubeconfig \(expected a mapping"):
        await load_kubeconfig(path, environ={}, home=tmp_path)


def write_kubeconfig(path: Path, server: str, *, token: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path.write_text(json.dumps(config))
    return path


async def test_unknown_context_lists_the_known_ones(tmp_path: Path) -> None:
    """Asking for a context that is not there names the ones that are."""
    path = write_kubeconfig(tmp_path / "config", "http://127.0.0.1:1", token="t")
    with pytest.raises(ConfigError, match=r"has no context 'prod' \(it has: ctx\)"):
        await load_kubeconfig(path, context="prod", environ={}, home=tmp_path)


async def test_kubeconfig_token_becomes_a_bearer_header(tmp_path: Path) -> None:
    """A token user gives 'Authorization: Bearer <token>'; the token is not in the repr."""
    path = write_kubeconfig(tmp_path / "config", "http://127.0.0.1:1/", token="s3cret")
    settings = await load_kubeconfig(path, environ={}, home=tmp_path)
    assert settings.host == "http://127.0.0.1:1"
    assert settings.ssl_context is None
    assert await settings.auth.header() == "Bearer s3cret"
    assert "s3cret" not in repr(settings)


async def test_token_file_is_reread_on_refresh(tmp_path: Path) -> None:
    """After a 401 the client calls refresh(): a rotated tokenFile is picked up."""
    token_file = tmp_path / "token"
    token_file.write_text("one")
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    (tmp_path / "config").write_text(json.dumps(config))
    settings = await load_kubeconfig(tmp_path / "config", environ={}, home=tmp_path)
    assert await settings.auth.header() == "Bearer one"
    token_file.write_text("two")
    assert await settings.auth.refresh() is True
    assert await settings.auth.header() == "Bearer two"


async def test_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    """An https cluster whose CA file is missing fails at load time, not at the first request."""
    config = {
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority": str(tmp_path / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    (tmp_path / "config").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"ca\.crt"):
        await load_kubeconfig(tmp_path / "config", environ={}, home=tmp_path)


EXEC_PLUGIN = """\
import datetime as dt, json, pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text() or 0) + 1 if counter.exists() else 1
counter.write_text(str(n))
# The first credential expires within the client's refresh margin, later ones in an hour.
ttl = dt.timedelta(seconds=30 if n == 1 else 3600)
expiry = (dt.datetime.now(dt.UTC) + ttl).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {"token": f"tok-{n}", "expirationTimestamp": expiry},
}))
"""


async def test_exec_plugin_token_is_refreshed_before_it_expires(tmp_path: Path) -> None:
    """An exec credential close to expiry is replaced before use, once for a burst of requests;
    a fresh one is reused until a 401 forces refresh(), once for a burst of 401s."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(EXEC_PLUGIN)
    counter = tmp_path / "runs"
    exec_config = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(plugin), str(counter)],
        "interactiveMode": "Never",
    }
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"exec": exec_config}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    (tmp_path / "config").write_text(json.dumps(config))
    settings = await load_kubeconfig(tmp_path / "config", environ={}, home=tmp_path)
    assert counter.read_text() == "1"
    headers = await asyncio.gather(*(settings.auth.header() for _ in range(5)))
    assert headers == ["Bearer tok-2"] * 5, "the near-expiry token was replaced, once"
    assert await settings.auth.header() == "Bearer tok-2"
    assert counter.read_text() == "2"
    assert await settings.auth.refresh() is True
    assert await settings.auth.header() == "Bearer tok-3"
    # Requests that all got a 401 together share one reload.
    assert await asyncio.gather(*(settings.auth.refresh() for _ in range(4))) == [True] * 4
    assert counter.read_text() == "4"
    assert await settings.auth.header() == "Bearer tok-4"
