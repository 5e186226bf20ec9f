"""The webhook's own certificate: kept in a Secret, its CA registered in the webhook
configurations (``--cert-secret``; the pure part is ``webhooks.certificate``).

At start, before serving: read the Secret; if it holds a pair good for the names (and for more
than 30 days), use it; otherwise make one and write it, creating the Secret (409: another
replica was first, so read and use its pair) or replacing a stale one with its
resourceVersion (409: another replica replaced it first; read again). Every replica therefore
ends up serving the same pair. The files are then written where ``--tls-cert-file`` and
``--tls-key-file`` point, and the usual reloader serves them.

The CA goes into the ``caBundle`` of every webhook of the configurations named by
``--webhook-configurations``, at start and again every minute: the chart renders them without a
CA (so its manifests do not change between renders), and a GitOps tool that re-applies them may
clear it; the webhook puts it back within a minute. A patch names each webhook (the list merges
by name), so webhooks of the configurations are never reordered or replaced.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import structlog

from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, ApiError, Conflict, Forbidden, NotFound
from webhooks.certificate import (
    ServingPair,
    make_pair,
    pair_from_secret,
    pair_problem,
    secret_data,
)

__all__ = ["CA_CHECK_INTERVAL", "ensure_pair", "keep_ca_registered", "register_ca", "write_files"]

log = structlog.get_logger("webhook")

CA_CHECK_INTERVAL: Final = 60.0  # seconds between checks of the configurations' caBundle
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
    days: int,
    now: dt.datetime | None = None,  # None: the wall clock (tests give one)
) -> ServingPair:
    """The pair in Secret ``namespace/name`` if good for ``names``, else a new one written there
    (module docstring). Raises ApiError when the Secret cannot be read or written."""
    for _ in range(_ATTEMPTS):
        clock = now or dt.datetime.now(dt.UTC)
        secret = await _read_secret(client, namespace, name)
        if secret is not None:
            held = pair_from_secret(secret.get("data") or {})
            problem = "incomplete" if held is None else pair_problem(held, names, now=clock)
            if held is not None and problem is None:
                return held
            log.info("making a new serving certificate", secret=f"{namespace}/{name}", why=problem)
        pair = make_pair(names, days=days, now=clock)
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
    to ``ca_pem`` where it differs; the number of configurations patched. A configuration that
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


async def keep_ca_registered(
    client: KubeClient,
    configurations: Sequence[str],
    ca_pem: bytes,
    *,
    interval: float = CA_CHECK_INTERVAL,
) -> None:
    """``register_ca`` every ``interval`` seconds, forever; API errors are logged, not fatal."""
    while True:
        await asyncio.sleep(interval)
        try:
            await register_ca(client, configurations, ca_pem)
        except ApiError as exc:
            log.warning("checking the webhook configurations failed", error=str(exc))
