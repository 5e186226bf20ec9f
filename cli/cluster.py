"""What the user commands (`caldera job|queue|pod`) share: the connection flags, the client, the
one-line error mapping, raw listing for ``-o json|yaml``, and Command creation.

Connection flags are vcctl's (``-k/--kubeconfig``, ``-s/--master``) plus kubectl's ``--context``;
the kubeconfig is found as kubectl finds it (flag, ``$KUBECONFIG``, ``~/.kube/config``, in-cluster).
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
from caldera.api.meta import OwnerReference
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
from cli.errors import fail

__all__ = [
    "CliError",
    "add_connection_args",
    "add_output_arg",
    "command_body",
    "connect",
    "create_command",
    "list_raw",
    "load_documents",
    "one_line",
    "run",
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


class CliError(Exception):
    """A failure to report as one line (the message says what is wrong and what to do)."""


class _Quiet:
    """A logger that drops everything: the CLI reports failures itself, as one line."""

    def __getattr__(self, _name: str) -> Callable[..., None]:
        return lambda *_args, **_kwargs: None


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """vcctl's -k/--kubeconfig and -s/--master, and kubectl's --context."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "-k",
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)",
    )
    group.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    group.add_argument(
        "-s", "--master", metavar="URL", help="API server address, overriding the kubeconfig's"
    )


def add_output_arg(parser: argparse.ArgumentParser, *, wide: bool = True) -> None:
    """-o/--output json|yaml (and wide for tables)."""
    choices = ["json", "yaml", "wide"] if wide else ["json", "yaml"]
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        metavar="FORMAT",
        help=f"output format: {'|'.join(choices)} (default: vcctl's table)",
    )


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


def one_line(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Decorate a command handler so that a CliError raised before connecting (a missing flag, a
    bad file) is reported as one line too."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except CliError as exc:
            return fail(str(exc))

    wrapped.__doc__ = handler.__doc__
    return wrapped


def run(args: argparse.Namespace, body: Callable[[KubeClient], Awaitable[int]]) -> int:
    """Connect, run `body`, close; any failure becomes one line and exit code 1."""

    async def main() -> int:
        client = await connect(args)
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


def usage(parser: argparse.ArgumentParser) -> int:
    """A command group given no subcommand: its help on stderr, exit code 2."""
    parser.print_help(sys.stderr)
    return 2
