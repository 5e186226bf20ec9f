"""``caldera jobflow|jobtemplate create|list|get|describe|delete``: vcctl's jobflow and
jobtemplate commands (Volcano's pkg/cli/jobflow and pkg/cli/jobtemplate).

Flags, defaults, columns and lines are vcctl's: ``create -f FILE`` creates each document of the
file (in its namespace; without one, ``-n``'s or the kubeconfig context's, else ``default``) and
prints ``Created JobFlow: ns/name``; ``list`` (``-n``; ``-A/--all-namespaces``) and ``get -N
NAME`` print ``Name Namespace Phase Age`` (JobTemplate: ``Name Namespace``); ``describe``
prints the object (or every object of the namespace without ``-N``) as YAML, or JSON with ``-o
json``, without managedFields; ``delete -N NAME -n NS`` or ``delete -f FILE``.

Beyond vcctl: a document of another kind in the file is skipped with a note, so one file holding
a flow and its templates (examples/jobflow-pipeline.yaml) serves both commands; a document that
cannot be created or deleted is reported on stderr and the command exits 1 (vcctl prints the
failure and exits 0); ``get`` takes the name as an argument too; ``list`` and ``get`` take ``-o
json|yaml|wide`` (wide: how many Jobs are in each of the flow's lists, how many a template made),
and ``jobtemplate list`` takes ``-A/--all-namespaces``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from caldera.api.kinds import JOBFLOW, JOBTEMPLATE, KindInfo
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError, NotFound
from cli import output
from cli.cluster import (
    describe_error,
    get_raw,
    list_raw,
    load_documents,
    not_found,
    run,
)
from cli.commands import add_connection_args, add_namespace_args, add_output_arg, usage
from cli.errors import CliError

DEFAULT_NAMESPACE = "default"
Table = Callable[[Sequence[Any], bool, dt.datetime], str]


@dataclass(frozen=True)
class _Noun:
    """What differs between the two command groups."""

    command: str  # "jobflow"
    kind: KindInfo[Any]
    words: str  # how vcctl's messages name it: "jobflow", "job template"
    table: Table


NOUNS = (
    _Noun(
        "jobflow",
        JOBFLOW,
        "jobflow",
        lambda items, wide, now: output.jobflow_table(items, wide=wide, now=now),
    ),
    _Noun(
        "jobtemplate",
        JOBTEMPLATE,
        "job template",
        lambda items, wide, _now: output.jobtemplate_table(items, wide=wide),
    ),
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera jobflow`` and ``caldera jobtemplate`` and their subcommands."""
    for noun in NOUNS:
        _register(sub, noun)


def _register(sub: argparse._SubParsersAction[argparse.ArgumentParser], noun: _Noun) -> None:
    kind = noun.kind.kind
    group = sub.add_parser(
        noun.command,
        help=f"create, list, get, describe and delete {kind}s (vcctl {noun.command})",
        description=f"Volcano {kind}s ({noun.kind.group}), with vcctl's commands and flags.",
    )
    group.set_defaults(handler=lambda _args: usage(group))
    cmds = group.add_subparsers(dest=f"{noun.command}_command", metavar="COMMAND")

    p = cmds.add_parser("create", help=f"create {kind}s", description=f"Create {kind}s.")
    _file_arg(p, required=True)
    p.add_argument(
        "-n",
        "--namespace",
        help="the namespace of documents that name none (default: the kubeconfig context's, "
        "else default)",
    )
    add_connection_args(p)
    p.set_defaults(handler=_create(noun))

    p = cmds.add_parser("list", help=f"list {kind}s", description=f"List {kind}s.")
    add_namespace_args(p, f"{noun.words}s", all_namespaces=True)
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_lister(noun))

    p = cmds.add_parser("get", help=f"show one {kind}", description=f"Show one {kind}.")
    p.add_argument("object", nargs="?", default="", metavar="NAME", help=f"the {noun.words}")
    _name_args(p, noun)
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_getter(noun))

    p = cmds.add_parser(
        "describe",
        help=f"print a {kind} (or all of a namespace) as YAML or JSON",
        description=f"Print a {kind}, or every {kind} of the namespace without -N.",
    )
    _name_args(p, noun)
    p.add_argument(
        "-o",
        "--format",
        default="yaml",
        choices=["yaml", "json"],
        metavar="FORMAT",
        help="yaml (default) or json",
    )
    add_connection_args(p)
    p.set_defaults(handler=_describer(noun))

    p = cmds.add_parser(
        "delete",
        help=f"delete a {kind} (-N) or those of a file (-f)",
        description=f"Delete a {kind}, or each {kind} of a file.",
    )
    _name_args(p, noun)
    _file_arg(p, required=False)
    add_connection_args(p)
    p.set_defaults(handler=_deleter(noun))


def _name_args(p: argparse.ArgumentParser, noun: _Noun) -> None:
    p.add_argument("-N", "--name", default="", help=f"the name of the {noun.words}")
    add_namespace_args(p, noun.words)


def _file_arg(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument(
        "-f",
        "--file",
        required=required,
        help="a YAML file of one or more documents ('-' for stdin)",
    )


Bodies = list[dict[str, Any]]


def documents(path: str, noun: _Noun, namespace: str | None) -> tuple[Bodies, list[str]]:
    """The documents of ``path`` that are ``noun``'s kind (a document without a kind counts),
    each with its namespace filled in (with `namespace`; left out when both are None, for the
    context's once connected); and a note for each document skipped."""
    kind = noun.kind
    bodies: Bodies = []
    skipped: list[str] = []
    for i, doc in enumerate(load_documents(path)):
        if not isinstance(doc, dict):
            raise CliError(f"{path}: document {i + 1} is not an object")
        name = (doc.get("metadata") or {}).get("name", "")
        if doc.get("kind", kind.kind) != kind.kind:
            skipped.append(f"skipped {doc.get('kind')} {name}: not a {kind.kind}")
            continue
        meta = dict(doc.get("metadata") or {})
        if meta.get("namespace") or namespace:
            meta["namespace"] = meta.get("namespace") or namespace
        bodies.append({**doc, "apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta})
    if not bodies:
        raise CliError(f"{path} holds no {kind.kind}")
    return bodies, skipped


Act = Callable[[KubeClient, dict[str, Any]], Awaitable[None]]


def _each(args: argparse.Namespace, noun: _Noun, verb: str, act: Act) -> int:
    """``act`` on each document of ``args.file``: vcctl's line per document; exit code 1 when
    any failed."""
    bodies, skipped = documents(args.file, noun, getattr(args, "namespace", None))
    for note in skipped:
        print(note, file=sys.stderr)
    kind = noun.kind.kind

    async def go(client: KubeClient) -> int:
        failed = 0
        for body in bodies:
            # Documents that name no namespace, with no -n: the context's (known now).
            body["metadata"].setdefault("namespace", args.namespace or DEFAULT_NAMESPACE)
            where = f"{body['metadata']['namespace']}/{body['metadata'].get('name', '')}"
            try:
                await act(client, body)
            except ApiError as exc:
                failed += 1
                print(f"Failed to {verb} {kind}: {describe_error(exc)}", file=sys.stderr)
                continue
            print(f"{verb.capitalize()}d {kind}: {where}")
        return 1 if failed else 0

    return run(args, go)


def _create(noun: _Noun) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        async def create(client: KubeClient, body: dict[str, Any]) -> None:
            await client.create(noun.kind, body, namespace=body["metadata"]["namespace"])

        return _each(args, noun, "create", create)

    return handler


def _deleter(noun: _Noun) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        async def delete(client: KubeClient, body: dict[str, Any]) -> None:
            meta = body["metadata"]
            await client.delete(noun.kind, meta.get("name", ""), namespace=meta["namespace"])

        if args.file:
            return _each(args, noun, "delete", delete)
        if not args.name:
            raise CliError(f"{noun.words} name must be specified")

        async def go(client: KubeClient) -> int:
            try:
                await client.delete(noun.kind, args.name, namespace=args.namespace)
            except NotFound as exc:
                raise not_found(f"{noun.words} {args.namespace}/{args.name}", exc) from None
            print(f"Deleted {noun.kind.kind}: {args.namespace}/{args.name}")
            return 0

        return run(args, go)

    return handler


async def _objects(
    client: KubeClient, noun: _Noun, namespace: str | None, name: str | None
) -> tuple[list[Any], list[dict[str, Any]]]:
    """The objects (one when ``name`` is given), sorted, and their raw forms."""
    if name is None:
        items, raw, _version = await list_raw(client, noun.kind, namespace=namespace)
    else:
        try:
            item, one = await get_raw(client, noun.kind, name, namespace=namespace)
        except NotFound as exc:
            raise not_found(f"{noun.words} {namespace}/{name}", exc) from None
        items, raw = [item], {item.metadata.uid: one}
    items.sort(key=lambda o: (o.metadata.namespace, o.metadata.name))
    return items, [raw[o.metadata.uid] for o in items]


def _shower(noun: _Noun, args: argparse.Namespace, name: str | None) -> int:
    async def go(client: KubeClient) -> int:
        # args.namespace is known once connected (the context's when -n is not given).
        namespace = None if name is None and args.all_namespaces else args.namespace
        items, raw = await _objects(client, noun, namespace, name)
        if args.output in ("json", "yaml"):
            shown = raw[0] if name is not None else output.as_list(raw)
            sys.stdout.write(output.dump(shown, args.output))
            return 0
        now = dt.datetime.now(dt.UTC)
        sys.stdout.write(noun.table(items, args.output == "wide", now))
        return 0

    return run(args, go)


def _lister(noun: _Noun) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        return _shower(noun, args, None)

    return handler


def _getter(noun: _Noun) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        name: str = args.name or args.object
        if not name:
            raise CliError(f"name is mandatory to get the particular {noun.words} details")
        return _shower(noun, args, name)

    return handler


def _describer(noun: _Noun) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        async def go(client: KubeClient) -> int:
            _, raw = await _objects(client, noun, args.namespace, args.name or None)
            if not raw:
                print(output.NO_RESOURCES)
                return 0
            sys.stdout.write("\n\n".join(output.dump(obj, args.format) for obj in raw))
            return 0

        return run(args, go)

    return handler
