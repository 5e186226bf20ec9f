"""Connection settings for the API server, loaded with kubernetes-asyncio's configuration code.

kubernetes-asyncio knows the kubeconfig format in full (merged `KUBECONFIG` lists, contexts,
`*-data` fields written to temporary files, token files, exec credential plugins, OIDC) and the
in-cluster service-account layout. Caldera uses it for exactly that and nothing else: the result is
a `ConnectionSettings` with the server URL, an `ssl.SSLContext` (CA, client certificate and key,
the insecure flag) and an `Auth` that produces the `Authorization` header for each request.

Where the kubeconfig comes from, in order: the explicit path (`--kubeconfig`), `$KUBECONFIG`
(a `os.pathsep`-separated list, merged), `~/.kube/config`; with none of them, the in-cluster
service account when `KUBERNETES_SERVICE_HOST` is set. Anything missing or broken is a
`ConfigError` with one line that says what to fix.

Token refresh. Credentials that expire are refreshed without restarting the process:
- in-cluster: the Configuration's `refresh_api_key_hook` (installed by kubernetes-asyncio) re-reads
  the projected token file once a minute; `Auth.header()` calls it through
  `Configuration.get_api_key_with_prefix`;
- exec plugins: run again when the credential's `expirationTimestamp` is near;
- any source: after a 401 the client calls `Auth.refresh()`, which reloads the credentials
  (re-reads token files, re-runs the exec plugin) once, and retries the request.
Refreshes are serialised by a lock, so a burst of requests runs the plugin once. Tokens are never
logged. A plugin that returns a client certificate instead of a token is read once, at load time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)
from kubernetes_asyncio.config.kube_config import (
    KubeConfigLoader,
    KubeConfigMerger,
)

__all__ = [
    "Auth",
    "ConfigError",
    "ConfigurationAuth",
    "ConnectionSettings",
    "NoAuth",
    "StaticTokenAuth",
    "kubeconfig_paths",
    "load_config",
    "load_incluster",
    "load_kubeconfig",
    "make_ssl_context",
]

# Refresh an exec credential this long before it expires, so no request carries a token that
# expires in flight.
_EXPIRY_MARGIN = dt.timedelta(seconds=60)


class ConfigError(Exception):
    """The connection settings could not be loaded; the message says what to fix."""


class Auth(Protocol):
    """Produces the Authorization header of each request."""

    async def header(self) -> str | None:
        """The `Authorization` header value, or None to send none (client certificates)."""

    async def refresh(self) -> bool:
        """Reload the credentials after a 401; True if a retry may now succeed."""


class NoAuth:
    """No Authorization header: client-certificate authentication, or a test server."""

    async def header(self) -> str | None:
        return None

    async def refresh(self) -> bool:
        return False


class StaticTokenAuth:
    """A fixed bearer token (a ServiceAccount token obtained by other means, tests)."""

    def __init__(self, token: str) -> None:
        self._value = f"Bearer {token}"

    def __repr__(self) -> str:
        return "StaticTokenAuth(<token>)"  # never show the token

    async def header(self) -> str | None:
        return self._value

    async def refresh(self) -> bool:
        return False


class ConfigurationAuth:
    """The Authorization header of a kubernetes-asyncio `Configuration`, refreshed as needed.

    `reload` re-reads the credentials into the Configuration (token file, exec plugin);
    `expiry` returns when the current credential expires, if known.
    """

    def __init__(
        self,
        configuration: Any,
        *,
        reload: Callable[[], Awaitable[None]] | None = None,
        expiry: Callable[[], dt.datetime | None] | None = None,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),  # a seam for tests
    ) -> None:
        self._configuration = configuration
        self._reload = reload
        self._expiry = expiry
        self._now = now
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return "ConfigurationAuth(<credentials>)"

    def _expiring(self) -> bool:
        when = self._expiry() if self._expiry else None
        return when is not None and when - _EXPIRY_MARGIN <= self._now()

    async def header(self) -> str | None:
        # While a reload runs the old credential is stale (and its expiry unknown): wait for it.
        if self._reload is not None and (self._expiring() or self._lock.locked()):
            async with self._lock:
                if self._expiring():  # another request may have refreshed while we waited
                    await self._reload()
        # Calls refresh_api_key_hook first (the in-cluster token file re-read).
        value = await self._configuration.get_api_key_with_prefix("BearerToken")
        return str(value) if value else None

    async def refresh(self) -> bool:
        if self._reload is None:
            return False
        if self._lock.locked():
            # Several requests got a 401 together: one reload serves them all.
            async with self._lock:
                return True
        async with self._lock:
            await self._reload()
        return True


@dataclasses.dataclass(frozen=True)
class ConnectionSettings:
    """Everything needed to talk to one API server."""

    host: str
    """Base URL, e.g. "https://10.0.0.1:6443" (may carry a path prefix behind a proxy)."""
    ssl_context: ssl.SSLContext | None
    """TLS settings for an https host; None for plain http (tests only)."""
    auth: Auth = dataclasses.field(default_factory=NoAuth)
    """The Authorization header provider."""
    tls_server_name: str | None = None
    """The name to verify the serving certificate against, when it differs from the host."""
    proxy: str | None = None
    """An HTTP proxy URL from the kubeconfig (`proxy-url`)."""
    source: str = ""
    """Where the settings came from, for logs and error messages (no secrets)."""
    namespace: str = ""
    """The namespace the kubeconfig context names (in a pod: the service account's), "" when
    none; the CLI uses it when ``-n`` is not given, as kubectl does."""


def make_ssl_context(
    *,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    verify: bool = True,
    strict: bool = True,
) -> ssl.SSLContext:
    """A client SSLContext trusting `ca_file` (else the system CAs), with an optional client pair.

    `verify=False` is kubeconfig's `insecure-skip-tls-verify`; `strict=False` accepts certificates
    without the extensions that X.509 strict mode requires.
    """
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
        if cert_file:
            ctx.load_cert_chain(cert_file, keyfile=key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load TLS files: {exc}") from exc
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if not strict:
        ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return ctx


def kubeconfig_paths(
    explicit: str | os.PathLike[str] | None,
    environ: Mapping[str, str],
    home: Path,
) -> tuple[list[Path], str]:
    """The kubeconfig files to read and how they were chosen ("--kubeconfig", ...). Pure.

    Returns an empty list when nothing was asked for and `~/.kube/config` is the default.
    """
    if explicit:
        return [Path(explicit).expanduser()], "--kubeconfig"
    env = environ.get("KUBECONFIG", "")
    paths = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    if paths:
        return paths, "KUBECONFIG"
    return [home / ".kube" / "config"], "default"


def _settings_from_configuration(
    configuration: Any, auth: Auth, source: str, namespace: str = ""
) -> ConnectionSettings:
    host = str(configuration.host).rstrip("/")
    ctx: ssl.SSLContext | None = None
    if host.startswith("https://"):
        ctx = make_ssl_context(
            ca_file=configuration.ssl_ca_cert,
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
            verify=bool(configuration.verify_ssl),
            strict=not configuration.disable_strict_ssl_verification,
        )
    elif not host.startswith("http://"):
        raise ConfigError(f"{source}: server {host!r} is not an http(s) URL")
    return ConnectionSettings(
        host=host,
        ssl_context=ctx,
        auth=auth,
        tls_server_name=configuration.tls_server_name,
        proxy=configuration.proxy,
        source=source,
        namespace=namespace,
    )


async def load_kubeconfig(
    path: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> ConnectionSettings:
    """Connection settings from a kubeconfig (explicit path, `$KUBECONFIG`, `~/.kube/config`).

    `context` selects a context other than the current one. Raises ConfigError.
    """
    paths, chosen_by = kubeconfig_paths(
        path, os.environ if environ is None else environ, Path.home() if home is None else home
    )
    existing = [p for p in paths if p.is_file()]
    if not existing:
        shown = os.pathsep.join(str(p) for p in paths)
        if chosen_by == "KUBECONFIG":
            raise ConfigError(f"kubeconfig {shown} (from KUBECONFIG) not found: fix KUBECONFIG")
        raise ConfigError(f"kubeconfig {shown} not found: set --kubeconfig or KUBECONFIG")
    shown = os.pathsep.join(str(p) for p in existing)
    for p in existing:
        _check_kubeconfig_file(p)
    try:
        merged = KubeConfigMerger(os.pathsep.join(str(p) for p in existing)).config
        if merged is None or not isinstance(merged.value, dict):
            raise ConfigError(f"kubeconfig {shown} is empty or not a kubeconfig")
        contexts = [c["name"] for c in merged.value.get("contexts") or [] if "name" in c]
        wanted = context or merged.value.get("current-context")
        if not wanted:
            raise ConfigError(f"kubeconfig {shown} has no current-context: pass --context")
        if wanted not in contexts:
            raise ConfigError(
                f"kubeconfig {shown} has no context {wanted!r} "
                f"(it has: {', '.join(contexts) or 'none'})"
            )
        namespace = next(
            (
                _context_namespace(c["context"]) if "context" in c else ""
                for c in merged.value.get("contexts") or []
                if c["name"] == wanted
            ),
            "",
        )
        loader = KubeConfigLoader(config_dict=merged, active_context=wanted, config_base_path=None)
        configuration = Configuration()
        await loader.load_and_set(configuration)
    except ConfigError:
        raise
    except Exception as exc:  # the loader raises anything from KeyError to YAMLError
        raise ConfigError(f"kubeconfig {shown} is invalid: {_one_line(exc)}") from exc

    user = getattr(loader, "_user", None)
    uses_exec = user is not None and "exec" in user

    async def reload() -> None:
        # Forget the cached exec credential so the plugin runs again; token files are re-read.
        if hasattr(loader, "exec_plugin_expiry"):
            del loader.exec_plugin_expiry
        try:
            await loader.load_and_set(configuration)
        except Exception as exc:
            raise ConfigError(f"refreshing credentials from {shown}: {_one_line(exc)}") from exc

    def expiry() -> dt.datetime | None:
        when = getattr(loader, "exec_plugin_expiry", None)
        if isinstance(when, dt.datetime):
            return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        return None

    auth = ConfigurationAuth(configuration, reload=reload, expiry=expiry if uses_exec else None)
    return _settings_from_configuration(
        configuration, auth, f"kubeconfig {shown} ({wanted})", namespace
    )


def load_incluster(
    *,
    environ: Mapping[str, str] | None = None,
    token_file: str = SERVICE_TOKEN_FILENAME,
    ca_file: str = SERVICE_CERT_FILENAME,
) -> ConnectionSettings:
    """Connection settings from the pod's service account. Raises ConfigError."""
    configuration = Configuration()
    loader = InClusterConfigLoader(
        token_filename=token_file,
        cert_filename=ca_file,
        environ=dict(os.environ if environ is None else environ),
    )
    try:
        loader.load_and_set(configuration)
    except (ConfigException, OSError) as exc:
        raise ConfigError(
            f"in-cluster configuration failed ({_one_line(exc)}): "
            "run in a pod with a service account, or set --kubeconfig"
        ) from exc

    async def reload() -> None:
        try:
            loader.load_and_set(configuration)
        except (ConfigException, OSError) as exc:
            raise ConfigError(f"re-reading the service account token: {exc}") from exc

    return _settings_from_configuration(
        configuration,
        ConfigurationAuth(configuration, reload=reload),
        "in-cluster",
        _service_account_namespace(Path(token_file).with_name("namespace")),
    )


def _context_namespace(context: Any) -> str:
    """A kubeconfig context's ``namespace`` (the merger wraps mappings in its ConfigNode)."""
    value = getattr(context, "value", context)
    return str(value.get("namespace") or "") if isinstance(value, dict) else ""


def _service_account_namespace(path: Path) -> str:
    """The pod's namespace from the service account's ``namespace`` file ("" without it)."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


async def load_config(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> ConnectionSettings:
    """Settings from the kubeconfig when one is given or present, else in-cluster.

    An explicit path or `$KUBECONFIG` must work; `~/.kube/config` is used when it exists; in a pod
    (`KUBERNETES_SERVICE_HOST` set) without either, the service account is used.
    """
    env = os.environ if environ is None else environ
    home_dir = Path.home() if home is None else home
    paths, chosen_by = kubeconfig_paths(kubeconfig, env, home_dir)
    if chosen_by == "default" and not paths[0].is_file() and env.get(SERVICE_HOST_ENV_NAME):
        return load_incluster(environ=env)
    if chosen_by == "default" and not paths[0].is_file():
        raise ConfigError(
            f"kubeconfig {paths[0]} not found and not running in a cluster: "
            "set --kubeconfig or KUBECONFIG"
        )
    return await load_kubeconfig(kubeconfig, context=context, environ=env, home=home_dir)


def _check_kubeconfig_file(path: Path) -> None:
    """Fail with a precise line for the common mistakes before the loader sees the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"kubeconfig {path} cannot be read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"kubeconfig {path} is not valid YAML: {problem}{where}") from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"kubeconfig {path} is empty or not a kubeconfig "
            "(expected a mapping with clusters, users and contexts)"
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
