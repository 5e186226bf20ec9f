"""What the user commands' handlers (`cli.job`, `cli.queue`, ...) share: the client, the namespace
when ``-n`` is not given, the one-line error mapping, getting one object or listing them for a
table or ``-o json|yaml``, and Command creation.

The kubeconfig is found as kubectl finds it (flag, ``$KUBECONFIG``, ``~/.kube/config``,
in-cluster); the connection flags themselves are defined in `cli.commands`.
Every failure a user can meet (no kubeconfig, no cluster, no permission, an unknown object) ends
as one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec
import yaml

from caldera.api.kinds import COMMAND, KindInfo, resource_path
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.config import ConfigError, load_config
from caldera.kube.errors import (
    AlreadyExists,
    ApiConnectionError,
    ApiError,
    Forbidden,
    NotFound,
    Unauthorized,
)
from caldera.kube.requests import list_query
from caldera.kube.retry import RetryOptions
from cli import output
from cli.commands import DEFAULT_NAMESPACE
from cli.errors import CliError, fail

__all__ = [
    "CliError",
    "command_body",
    "connect",
    "create_command",
    "get_object",
    "get_raw",
    "list_raw",
    "load_documents",
    "run",
    "show_objects",
]

T = TypeVar("T")

# A CLI gives up quickly: a few attempts, short timeouts, so "no cluster" answers in seconds.
CLI_OPTIONS: Final = ClientOptions(
    qps=100.0,
    burst=200,
    timeout=30.0,
    connect_timeout=5.0,
    retry=RetryOptions(max_attempts=3, base=0.2, cap=1.0),
)


class _Quiet:
    """A logger that drops everything: the CLI reports failures itself, as one line."""

    def __getattr__(self, _name: str) -> Callable[..., None]:
        return lambda *_args, **_kwargs: None


async def connect(args: argparse.Namespace) -> KubeClient:
    """A client for the cluster the connection flags select."""
    settings = await load_config(args.kubeconfig, context=args.context)
    if getattr(args, "master", None):
        settings = dataclasses.replace(settings, host=args.master.rstrip("/"))
    return KubeClient(settings, CLI_OPTIONS, logger=_Quiet())


def describe_error(exc: BaseException, host: str | None = None) -> str:
    """One line for a failure, saying what to fix where we can tell."""
    if isinstance(exc, CliError | ConfigError):
        return str(exc)
    if isinstance(exc, ApiConnectionError):
        where = f" at {host}" if host else ""
        detail = str(exc).split(": ", 1)[-1] if exc.path else str(exc)
        return f"cannot reach the API server{where}: {detail}"
    if isinstance(exc, Unauthorized):
        return f"unauthorized: the API server rejected the credentials ({exc.message})"
    if isinstance(exc, Forbidden):
        return exc.message or "forbidden"
    if isinstance(exc, NotFound) and "could not find the requested resource" in exc.message:
        return (
            f"the API server does not serve {exc.path or 'this resource'}: "
            "are Caldera's CRDs installed?"
        )
    if isinstance(exc, ApiError):
        return exc.message or str(exc)
    return f"{type(exc).__name__}: {exc}"


def run(args: argparse.Namespace, body: Callable[[KubeClient], Awaitable[int]]) -> int:
    """Connect, run `body`, close; any failure becomes one line and exit code 1. A command
    with ``-n`` left unset gets the kubeconfig context's namespace, else ``default``."""

    async def main() -> int:
        client = await connect(args)
        if "namespace" in args and args.namespace is None:
            args.namespace = client.settings.namespace or DEFAULT_NAMESPACE
        try:
            return await body(client)
        except (ApiError, ApiConnectionError, CliError) as exc:
            return fail(describe_error(exc, client.settings.host))
        finally:
            await client.close()

    try:
        return asyncio.run(main())
    except (ConfigError, CliError) as exc:
        return fail(describe_error(exc))


def listed_namespace(args: argparse.Namespace) -> str | None:
    """The namespace a list command reads: None (every namespace) with -A."""
    return None if args.all_namespaces else str(args.namespace)


def load_documents(path: str) -> list[Any]:
    """The YAML documents of the file ``path`` (``-``: standard input), empty ones left out;
    CliError, in one line, when it cannot be read or is not YAML."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None


def not_found(what: str, exc: NotFound) -> CliError:
    """The one-line error for a named object that does not exist."""
    if "could not find the requested resource" in exc.message:
        return CliError(describe_error(exc))
    return CliError(f"{what} not found")


def already_exists(what: str, _exc: AlreadyExists) -> CliError:
    """The one-line error for a name already taken."""
    return CliError(f"{what} already exists")


async def list_raw(
    client: KubeClient,
    kind: KindInfo[T],
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> tuple[list[T], dict[str, dict[str, Any]], str]:
    """Every object of `kind`: decoded models, the raw objects by uid (complete, for
    ``-o json|yaml``, with apiVersion and kind as kubectl shows them), and the list's
    resourceVersion (to watch from)."""
    path = resource_path(kind, namespace)
    items: list[T] = []
    raw: dict[str, dict[str, Any]] = {}
    continue_: str | None = None
    version = ""
    while True:
        query = list_query(
            label_selector=label_selector,
            field_selector=field_selector,
            limit=500,
            continue_=continue_,
        )
        data = await client.request("GET", path, params=query)
        page = kind.list_decoder.decode(data)
        items.extend(page.items)
        plain = msgspec.json.decode(data)
        for item in plain.get("items") or []:
            obj = _shown({"apiVersion": kind.api_version, "kind": kind.kind, **item})
            uid = (obj.get("metadata") or {}).get("uid", "")
            raw[uid] = obj
        version = page.metadata.resource_version
        continue_ = page.metadata.continue_
        if not continue_:
            return items, raw, version


async def get_raw(
    client: KubeClient, kind: KindInfo[T], name: str, *, namespace: str | None = None
) -> tuple[T, dict[str, Any]]:
    """One object: its model and its complete raw form."""
    data = await client.request("GET", resource_path(kind, namespace, name))
    return kind.decoder.decode(data), _shown(msgspec.json.decode(data))


async def get_object(
    client: KubeClient, kind: KindInfo[T], name: str, *, namespace: str | None = None
) -> T:
    """One object, or the one-line error naming it when it does not exist."""
    try:
        return await client.get(kind, name, namespace=namespace)
    except NotFound as exc:
        raise not_found(_named(kind, name, namespace), exc) from None


def _named(kind: KindInfo[Any], name: str, namespace: str | None) -> str:
    return f"{kind.kind.lower()} {namespace + '/' if namespace else ''}{name}"


def controller_ref(kind: KindInfo[Any], name: str, uid: str) -> OwnerReference:
    """The controller reference a Command's target and ownerReference carry."""
    return OwnerReference(
        api_version=kind.api_version, kind=kind.kind, name=name, uid=uid, controller=True
    )


async def show_objects(
    client: KubeClient,
    kind: KindInfo[T],
    output_format: str | None,
    *,
    name: str | None,
    namespace: str | None,
    table: Callable[[list[T]], Awaitable[str]],
) -> int:
    """What ``list`` and ``get`` commands print: one object (`name`) or every one of the
    namespace (None: all), sorted by namespace and name, as ``-o json|yaml`` (a kubectl List for
    a listing) or as the table `table` renders."""
    if name is None:
        objects, raw, _version = await list_raw(client, kind, namespace=namespace)
    else:
        try:
            one, shown = await get_raw(client, kind, name, namespace=namespace)
        except NotFound as exc:
            raise not_found(_named(kind, name, namespace), exc) from None
        objects, raw = [one], {_meta(one).uid: shown}
    objects.sort(key=lambda o: (_meta(o).namespace, _meta(o).name))
    if output_format in ("json", "yaml"):
        items = [raw[_meta(o).uid] for o in objects]
        document = items[0] if name is not None else output.as_list(items)
        sys.stdout.write(output.dump(document, output_format))
        return 0
    sys.stdout.write(await table(objects))
    return 0


def _meta(obj: Any) -> ObjectMeta:
    meta: ObjectMeta = obj.metadata
    return meta


def _shown(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as ``-o json|yaml`` shows it: without managedFields, as kubectl's default."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def command_body(
    namespace: str, action: str, target: OwnerReference, *, reason: str = "", message: str = ""
) -> dict[str, Any]:
    """A bus.volcano.sh Command as vcctl makes it: generateName ``<target>-<lower(action)>-``,
    a controller ownerRef to the target (blocking its deletion, as ``metav1.NewControllerRef``
    does), and ``target`` the same reference."""
    ref = {
        "apiVersion": target.api_version,
        "kind": target.kind,
        "name": target.name,
        "uid": target.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    body: dict[str, Any] = {
        "apiVersion": COMMAND.api_version,
        "kind": COMMAND.kind,
        "metadata": {
            "generateName": f"{target.name}-{action.lower()}-",
            "namespace": namespace,
            "ownerReferences": [ref],
        },
        "action": action,
        "target": ref,
    }
    if reason:
        body["reason"] = reason
    if message:
        body["message"] = message
    return body


async def create_command(
    client: KubeClient, namespace: str, action: str, target: OwnerReference
) -> str:
    """Create the Command; returns its generated name."""
    created = await client.create(
        COMMAND, command_body(namespace, action, target), namespace=namespace
    )
    return created.metadata.name
