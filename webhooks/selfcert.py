"""The webhook's own certificate: kept in a Secret, its CA registered in the webhook
configurations (``--cert-secret``; the pure part is ``webhooks.certificate``).

At start, before serving, and then every minute in the running process
(``CertificateKeeper``): read the Secret; if it holds a pair good for the names and less than
two thirds into its lifetime, use it; otherwise make one and write it, creating the Secret
(409: another replica was first, so read and use its pair) or replacing a stale one with its
resourceVersion (409: another replica replaced it first; read again). Every replica therefore
converges on the pair of the Secret, whichever renewed it. A renewed pair keeps the CA it
replaced (``ca-previous.crt``).

When the Secret's pair is not the one served: its CA bundle (the new CA and the previous one)
is registered first, then the files are written where ``--tls-cert-file`` and
``--tls-key-file`` point and loaded, so the API server trusts every replica while they switch.

The bundle goes into the ``caBundle`` of every webhook of the configurations named by
``--webhook-configurations``, at start and again every minute: the chart renders them without a
CA (so its manifests do not change between renders), and a GitOps tool that re-applies them may
clear it; the webhook puts it back within a minute. Every replica registers the bundle of the
Secret as it reads it that round (not one it remembers), so two replicas never put different
CAs back in turn. A patch names each webhook (the list merges by name), so webhooks of the
configurations are never reordered or replaced.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import structlog

from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, ApiError, Conflict, Forbidden, NotFound
from webhooks.certificate import (
    ServingPair,
    ca_bundle,
    make_pair,
    pair_from_secret,
    pair_problem,
    secret_data,
)

__all__ = [
    "CA_CHECK_INTERVAL",
    "CertificateKeeper",
    "ensure_pair",
    "register_ca",
    "write_files",
]

log = structlog.get_logger("webhook")

CA_CHECK_INTERVAL: Final = 60.0  # seconds between checks of the Secret and the caBundle
_ADMISSION: Final = "/apis/admissionregistration.k8s.io/v1/"
_KINDS: Final = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
_ATTEMPTS: Final = 5  # rounds of read, make, write before giving up (each loser re-reads)


def _secret_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    return f"{base}/{name}" if name else base


async def _read_secret(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        secret: dict[str, Any] = msgspec.json.decode(
            await client.request("GET", _secret_path(namespace, name))
        )
    except NotFound:
        return None
    return secret


async def ensure_pair(
    client: KubeClient,
    *,
    namespace: str,
    name: str,
    names: Sequence[str],
    days: float,
    now: dt.datetime | None = None,  # None: the wall clock (tests give one)
) -> ServingPair:
    """The pair in Secret ``namespace/name`` if good for ``names``, else a new one written there
    (module docstring). Raises ApiError when the Secret cannot be read or written."""
    for _ in range(_ATTEMPTS):
        clock = now or dt.datetime.now(dt.UTC)
        secret = await _read_secret(client, namespace, name)
        held = None
        if secret is not None:
            held = pair_from_secret(secret.get("data") or {})
            problem = "incomplete" if held is None else pair_problem(held, names, now=clock)
            if held is not None and problem is None:
                return held
            log.info("making a new serving certificate", secret=f"{namespace}/{name}", why=problem)
        previous = held.ca_pem if held is not None else b""
        pair = make_pair(names, days=days, now=clock, previous_ca_pem=previous)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "caldera-webhook"},
            },
            "type": "kubernetes.io/tls",
            "data": secret_data(pair),
        }
        encoded = msgspec.json.encode(body)
        try:
            if secret is None:
                await client.request("POST", _secret_path(namespace), body=encoded)
            else:
                body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
                encoded = msgspec.json.encode(body)
                await client.request("PUT", _secret_path(namespace, name), body=encoded)
        except (AlreadyExists, Conflict):
            continue  # another replica wrote first: use its pair
        log.info("serving certificate written", secret=f"{namespace}/{name}", names=list(names))
        return pair
    raise ApiError(409, "Conflict", f"the Secret {namespace}/{name} kept changing while written")


def write_files(pair: ServingPair, cert_file: str, key_file: str) -> None:
    """Write the certificate (with the CA after it, the chain a client may want) and the key
    (readable by the owner only) for the reloader to serve."""
    for path in (cert_file, key_file):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(cert_file).write_bytes(pair.cert_pem + pair.ca_pem)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pair.key_pem)


async def register_ca(client: KubeClient, configurations: Sequence[str], ca_pem: bytes) -> int:
    """Set the caBundle of every webhook of the named Mutating or ValidatingWebhookConfigurations
    to ``ca_pem`` (one or more PEM certificates) where it differs; the number of configurations
    patched. A configuration that
    does not exist (not registered, or none of its kind) is skipped; one the webhook may not
    read or patch is logged and skipped."""
    bundle = base64.b64encode(ca_pem).decode()
    patched = 0
    for name in configurations:
        for kind in _KINDS:
            path = f"{_ADMISSION}{kind}/{name}"
            try:
                config: dict[str, Any] = msgspec.json.decode(await client.request("GET", path))
            except NotFound:
                continue
            except Forbidden as exc:
                log.warning("may not read the webhook configuration", name=name, error=str(exc))
                continue
            stale = [
                hook["name"]
                for hook in config.get("webhooks") or ()
                if (hook.get("clientConfig") or {}).get("caBundle") != bundle
            ]
            if not stale:
                continue
            patch = {"webhooks": [{"name": h, "clientConfig": {"caBundle": bundle}} for h in stale]}
            try:
                await client.request(
                    "PATCH",
                    path,
                    body=msgspec.json.encode(patch),
                    content_type="application/strategic-merge-patch+json",
                )
            except (Forbidden, NotFound, Conflict) as exc:
                log.warning("cannot register the CA", configuration=name, error=str(exc))
                continue
            patched += 1
            log.info("CA registered", configuration=f"{kind}/{name}", webhooks=stale)
    return patched


class CertificateKeeper:
    """The pair of the Secret, served and registered, renewed while the process runs (module
    docstring). ``reload`` loads the written files into the server (the reloader's)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        names: Sequence[str],
        days: float,
        cert_file: str,
        key_file: str,
        configurations: Sequence[str],
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.namespace, self.name, self.names, self.days = namespace, name, names, days
        self.cert_file, self.key_file = cert_file, key_file
        self.configurations = configurations
        self.clock = clock
        self.served: ServingPair | None = None
        self.reload: Callable[[], object] = lambda: None

    async def check(self) -> bool:
        """One round: the Secret's pair (renewed if due), its bundle registered, and served if
        it is not yet; True when the served pair changed. Raises ApiError or OSError."""
        pair = await ensure_pair(
            self.client,
            namespace=self.namespace,
            name=self.name,
            names=self.names,
            days=self.days,
            now=self.clock(),
        )
        try:
            await register_ca(self.client, self.configurations, ca_bundle(pair))
        except ApiError as exc:  # trusted later; the old CA stays registered meanwhile
            log.warning("cannot register the CA bundle", error=str(exc))
        if pair == self.served:
            return False
        write_files(pair, self.cert_file, self.key_file)
        self.reload()
        self.served = pair
        log.info("serving the certificate of the Secret", secret=f"{self.namespace}/{self.name}")
        return True

    async def run(self, interval: float = CA_CHECK_INTERVAL) -> None:
        """``check`` every ``interval`` seconds, forever; errors are logged, not fatal."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check()
            except (ApiError, OSError) as exc:
                log.warning("checking the serving certificate failed", error=str(exc))
