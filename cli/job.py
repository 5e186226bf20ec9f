"""``caldera job run|list|view|why|suspend|resume|delete``: vcctl's job commands, and ``why``.

Flags, defaults and table columns are vcctl's (Volcano's pkg/cli/job/). Beyond vcctl:
``-o json|yaml|wide``, ``job list --watch`` (a new row each time a job's row changes, as
``kubectl get -w`` does), ``job view`` showing tasks, pods, the PodGroup, why the gang is
unschedulable, and the events of the job, its PodGroup and its pods, and ``job why``, which
reads the job, its pods, PodGroup, Queue and Commands and prints what `cli.why` makes of them
(also the "Why" section of ``job view``).

``job suspend`` and ``job resume`` create a bus.volcano.sh Command (AbortJob / ResumeJob) that the
job controller consumes; ``job run`` names its single task ``default0``, the name Volcano's
webhook would give it, so the job is the same with or without the webhook.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from caldera.api.core import Event, Pod
from caldera.api.jobspec import default_task_name
from caldera.api.kinds import COMMAND, EVENT, JOB, POD, PODGROUP, QUEUE
from caldera.api.meta import OwnerReference, WatchEventType, controller_of
from caldera.api.quantity import QuantityError, milli_value
from caldera.api.volcano import JOB_NAME_KEY, Action, Command, Job, PodGroup, Queue
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, Forbidden, Gone, NotFound, error_from_status
from cli import output, why
from cli.cluster import (
    CliError,
    add_connection_args,
    add_output_arg,
    already_exists,
    create_command,
    get_raw,
    list_raw,
    load_documents,
    not_found,
    one_line,
    run,
    usage,
)

DEFAULT_NAMESPACE = "default"
DEFAULT_QUEUE = "default"
DEFAULT_RESOURCES = "cpu=1000m,memory=100Mi"
# A watch is re-opened after this long (the server ends it anyway); the table carries on.
WATCH_SECONDS = 300


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera job`` and its subcommands."""
    job = sub.add_parser(
        "job",
        help="run, list, view, suspend, resume and delete Volcano jobs (vcctl job)",
        description="Volcano jobs, with vcctl's commands, flags and columns.",
    )
    job.set_defaults(handler=lambda _args: usage(job))
    cmds = job.add_subparsers(dest="job_command", metavar="COMMAND")

    p = cmds.add_parser("run", help="run a job", description="Create a job from flags or a file.")
    p.add_argument("-i", "--image", default="busybox", help="the container image of the job")
    p.add_argument("-n", "--namespace", help=f"the namespace of the job ({DEFAULT_NAMESPACE})")
    p.add_argument("-N", "--name", default="", help="the name of the job")
    p.add_argument(
        "-m", "--min", type=int, default=1, help="the minimal available tasks of the job"
    )
    p.add_argument("-r", "--replicas", type=int, default=1, help="the total tasks of the job")
    p.add_argument(
        "-R", "--requests", default=DEFAULT_RESOURCES, help="the resource requests of each task"
    )
    p.add_argument(
        "-L", "--limits", default=DEFAULT_RESOURCES, help="the resource limits of each task"
    )
    p.add_argument("-S", "--scheduler", default="volcano", help="the scheduler of the job")
    p.add_argument("-f", "--filename", help="a YAML file with the job ('-' for stdin)")
    add_connection_args(p)
    p.set_defaults(handler=_run)

    p = cmds.add_parser("list", help="list jobs", description="List jobs with vcctl's columns.")
    _namespace_arg(p)
    p.add_argument("-q", "--queue", default="", help="only jobs in this queue")
    p.add_argument("-S", "--scheduler", default="", help="only jobs with this scheduler")
    p.add_argument("--all-namespaces", action="store_true", help="list jobs in all namespaces")
    p.add_argument("--selector", default="", help="only jobs whose name contains this text")
    p.add_argument(
        "-w", "--watch", action="store_true", help="after the table, print a row for every change"
    )
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_list)

    p = cmds.add_parser(
        "view",
        help="show a job: spec, status, tasks, pods, events",
        description="Show a job, its tasks, pods and PodGroup, why its gang is unschedulable, "
        "and its events.",
    )
    _namespace_arg(p)
    _name_arg(p)
    add_output_arg(p, wide=False)
    add_connection_args(p)
    p.set_defaults(handler=_view)

    p = cmds.add_parser(
        "why",
        help="say why a job waits, stage by stage",
        description="Say in plain words why a job waits: finished or running, suspended, its "
        "queue closed, dependsOn not met, what the scheduler found in its last session (held at "
        "the enqueue gate, pods that cannot be placed), and the pods' scheduling messages.",
    )
    p.add_argument("job", nargs="?", default="", metavar="NAME", help="the name of the job")
    _namespace_arg(p)
    _name_arg(p)
    add_output_arg(p, wide=False)
    add_connection_args(p)
    p.set_defaults(handler=_why)

    for name, action, text in (
        ("suspend", Action.ABORT_JOB, "suspend (abort) a job: its pods are deleted"),
        ("resume", Action.RESUME_JOB, "resume a suspended job"),
    ):
        p = cmds.add_parser(
            name, help=text, description=f"{text.capitalize()}, through a {action} Command."
        )
        _namespace_arg(p)
        _name_arg(p)
        add_connection_args(p)
        p.set_defaults(handler=_command_handler(action, name))

    p = cmds.add_parser("delete", help="delete a job", description="Delete a job.")
    _namespace_arg(p)
    _name_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_delete)


def _namespace_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-n", "--namespace", default=DEFAULT_NAMESPACE, help="the namespace of the job (default)"
    )


def _name_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-N", "--name", default="", help="the name of the job")


def _need_name(args: argparse.Namespace) -> str:
    name: str = args.name
    if not name:
        raise CliError("job name must be specified (-N NAME)")
    return name


# --- run --------------------------------------------------------------------------------------


def parse_resources(text: str, flag: str) -> dict[str, str]:
    """``cpu=1000m,memory=100Mi`` as a resource list; CliError names the bad entry."""
    resources: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise CliError(f"{flag}: {item!r} is not NAME=QUANTITY")
        try:
            milli_value(value.strip())
        except QuantityError as exc:
            raise CliError(f"{flag}: {key.strip()}={value.strip()}: {exc}") from None
        resources[key.strip()] = value.strip()
    return resources


def job_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The Job `vcctl job run` builds: one task of `replicas` pods of one container."""
    name = _need_name(args)
    requests = parse_resources(args.requests, "--requests")
    limits = parse_resources(args.limits, "--limits")
    if args.min < 0 or args.replicas < 0:
        raise CliError("--min and --replicas must not be negative")
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"name": name, "namespace": args.namespace or DEFAULT_NAMESPACE},
        "spec": {
            "minAvailable": args.min,
            "schedulerName": args.scheduler,
            "tasks": [
                {
                    "name": default_task_name(0),
                    "replicas": args.replicas,
                    "template": {
                        "metadata": {"name": name, "labels": {JOB_NAME_KEY: name}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": name,
                                    "image": args.image,
                                    "imagePullPolicy": "IfNotPresent",
                                    "resources": {"requests": requests, "limits": limits},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def job_from_file(args: argparse.Namespace) -> dict[str, Any]:
    """The Job in ``-f FILE``; -N and -n override its name and namespace."""
    path: str = args.filename
    docs = load_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise CliError(f"{path} does not hold a Job")
    body: dict[str, Any] = docs[0]
    if (
        body.get("kind", JOB.kind) != JOB.kind
        or body.get("apiVersion", JOB.api_version) != JOB.api_version
    ):
        raise CliError(
            f"{path} holds a {body.get('kind')} of {body.get('apiVersion')}, "
            f"not a Job of {JOB.api_version}"
        )
    body = {**body, "apiVersion": JOB.api_version, "kind": JOB.kind}
    meta = dict(body.get("metadata") or {})
    if args.name:
        meta["name"] = args.name
    meta["namespace"] = args.namespace or meta.get("namespace") or DEFAULT_NAMESPACE
    if not meta.get("name") and not meta.get("generateName"):
        raise CliError("job name must be specified (-N NAME, or metadata.name in the file)")
    body["metadata"] = meta
    return body


@one_line
def _run(args: argparse.Namespace) -> int:
    body = job_from_file(args) if args.filename else job_from_flags(args)
    namespace = body["metadata"]["namespace"]

    async def go(client: KubeClient) -> int:
        try:
            job = await client.create(JOB, body, namespace=namespace)
        except AlreadyExists as exc:
            raise already_exists(f"job {namespace}/{body['metadata'].get('name')}", exc) from None
        print(f"run job {job.metadata.name} successfully")
        return 0

    return run(args, go)


# --- list -------------------------------------------------------------------------------------


def job_selected(job: Job, args: argparse.Namespace) -> bool:
    """vcctl's client-side filters: queue, scheduler, name substring."""
    if args.queue and job.spec.queue != args.queue:
        return False
    if args.scheduler and job.spec.scheduler_name != args.scheduler:
        return False
    return args.selector in job.metadata.name


@one_line
def _list(args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else args.namespace
    wide = args.output == "wide"
    if args.watch and args.output in ("json", "yaml"):
        raise CliError("--watch prints table rows: use it without -o, or with -o wide")

    async def go(client: KubeClient) -> int:
        jobs, raw, version = await list_raw(client, JOB, namespace=namespace)
        shown = sorted(
            (j for j in jobs if job_selected(j, args)),
            key=lambda j: (j.metadata.namespace, j.metadata.name),
        )
        if args.output in ("json", "yaml"):
            sys.stdout.write(
                output.dump(output.as_list([raw[j.metadata.uid] for j in shown]), args.output)
            )
            return 0
        now = dt.datetime.now(dt.UTC)
        headers = output.job_headers(all_namespaces=args.all_namespaces, wide=wide)
        rows = [
            output.job_row(j, all_namespaces=args.all_namespaces, wide=wide, now=now) for j in shown
        ]
        if not args.watch:
            sys.stdout.write(
                output.job_table(shown, all_namespaces=args.all_namespaces, wide=wide, now=now)
            )
            return 0
        table = output.render_table(headers, rows)
        sys.stdout.write(table)
        sys.stdout.flush()
        widths = table_widths(table)
        last = {j.metadata.uid: r for j, r in zip(shown, rows, strict=True)}
        await _watch(client, args, namespace, version, widths, last)
        return 0

    return run(args, go)


def table_widths(table: str) -> list[int]:
    """Column widths of a rendered table, from its header line."""
    header = table.split("\n", 1)[0]
    widths, start = [], 0
    for i, ch in enumerate(header):
        if i > 0 and ch != " " and header[i - 1] == " ":
            widths.append(i - start)
            start = i
    widths.append(len(header) - start + output.COLUMN_GAP)
    return widths


def aligned_row(row: list[str], widths: list[int]) -> str:
    """A row padded to `widths`, so watch rows line up with the table printed first."""
    return "".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()


async def _watch(
    client: KubeClient,
    args: argparse.Namespace,
    namespace: str | None,
    version: str,
    widths: list[int],
    last: dict[str, list[str]],
) -> None:
    """Print a row each time a selected job's row changes, until interrupted."""
    wide = args.output == "wide"

    def show(job: Job) -> None:
        row = output.job_row(
            job, all_namespaces=args.all_namespaces, wide=wide, now=dt.datetime.now(dt.UTC)
        )
        if last.get(job.metadata.uid) != row:
            last[job.metadata.uid] = row
            print(aligned_row(row, widths), flush=True)

    while True:
        try:
            async with client.watch(
                JOB, namespace=namespace, resource_version=version, timeout_seconds=WATCH_SECONDS
            ) as events:
                async for event in events:
                    if event.type == WatchEventType.ERROR:
                        raise error_from_status(event.object)  # type: ignore[arg-type]
                    job = event.object
                    if not isinstance(job, Job):
                        continue
                    version = job.metadata.resource_version or version
                    if event.type == WatchEventType.BOOKMARK or not job_selected(job, args):
                        continue
                    if event.type == WatchEventType.DELETED:
                        last.pop(job.metadata.uid, None)
                    else:
                        show(job)
        except Gone:
            # History compacted: list again, show what changed meanwhile, watch from there.
            jobs, _raw, version = await list_raw(client, JOB, namespace=namespace)
            for job in jobs:
                if job_selected(job, args):
                    show(job)


# --- view -------------------------------------------------------------------------------------


def job_podgroup(job: Job, podgroups: list[PodGroup]) -> PodGroup | None:
    """The job's PodGroup: the one it controls (``<job>-<uid>``)."""
    for pg in podgroups:
        ref = controller_of(pg.metadata)
        if ref is not None and ref.uid == job.metadata.uid:
            return pg
    wanted = f"{job.metadata.name}-{job.metadata.uid}"
    return next((pg for pg in podgroups if pg.metadata.name == wanted), None)


def related_events(events: list[Event], uids: set[str]) -> list[Event]:
    """Events about the job, its PodGroup or its pods."""
    return [e for e in events if e.involved_object.uid in uids]


@dataclass(frozen=True)
class JobContext:
    """What the view and the why of a job read besides the Job: its pods, PodGroup, Queue
    (None if it does not exist or may not be read), the Commands of its namespace, and events
    (view only)."""

    pods: list[Pod]
    podgroup: PodGroup | None
    queue: Queue | None
    queue_readable: bool
    commands: list[Command]
    events: list[Event]

    def findings(self, job: Job, now: dt.datetime) -> list[why.Finding]:
        return why.explain(
            job,
            self.podgroup,
            self.queue,
            self.pods,
            now,
            commands=self.commands,
            queue_readable=self.queue_readable,
        )


async def _get_queue(client: KubeClient, name: str) -> Queue | Forbidden | None:
    """The queue; None if it does not exist; Forbidden if the user may not read queues (they
    are cluster-scoped: a namespace's user often may not)."""
    try:
        return await client.get(QUEUE, name)
    except Forbidden as exc:
        return exc
    except NotFound as exc:
        if "could not find the requested resource" in exc.message:
            raise not_found(f"queue {name}", exc) from None  # no Queue CRD: say so
        return None


async def _commands(client: KubeClient, namespace: str) -> list[Command]:
    """The namespace's Commands; none if the user may not list them (a hint, not essential)."""
    try:
        return list((await client.list(COMMAND, namespace=namespace)).items)
    except Forbidden:
        return []


async def _no_events() -> list[Event]:
    return []


async def job_context(client: KubeClient, job: Job, *, events: bool) -> JobContext:
    """Read the job's pods, PodGroup, Queue, Commands (and events) at once."""
    namespace, name = job.metadata.namespace, job.metadata.name

    async def listed_events() -> list[Event]:
        return list((await client.list(EVENT, namespace=namespace)).items)

    pods_result, pgs_result, queue, commands, event_items = await asyncio.gather(
        client.list(POD, namespace=namespace, label_selector=f"{JOB_NAME_KEY}={name}"),
        client.list(PODGROUP, namespace=namespace),
        _get_queue(client, job.spec.queue or DEFAULT_QUEUE),
        _commands(client, namespace),
        listed_events() if events else _no_events(),
    )
    pods: list[Pod] = [
        p
        for p in pods_result.items
        if (ref := controller_of(p.metadata)) is None or ref.uid == job.metadata.uid
    ]
    return JobContext(
        pods=pods,
        podgroup=job_podgroup(job, list(pgs_result.items)),
        queue=None if isinstance(queue, Forbidden) else queue,
        queue_readable=not isinstance(queue, Forbidden),
        commands=commands,
        events=event_items,
    )


@one_line
def _view(args: argparse.Namespace) -> int:
    name = _need_name(args)

    async def go(client: KubeClient) -> int:
        job, raw = await _get_job(client, args.namespace, name)
        if args.output in ("json", "yaml"):
            sys.stdout.write(output.dump(raw, args.output))
            return 0
        ctx = await job_context(client, job, events=True)
        uids = {job.metadata.uid, *(p.metadata.uid for p in ctx.pods)}
        if ctx.podgroup is not None:
            uids.add(ctx.podgroup.metadata.uid)
        now = dt.datetime.now(dt.UTC)
        sys.stdout.write(
            output.render_job_view(
                job,
                podgroup=ctx.podgroup,
                pods=ctx.pods,
                events=related_events(ctx.events, uids),
                now=now,
                why=why.render_lines(ctx.findings(job, now)),
            )
        )
        return 0

    return run(args, go)


async def _get_job(client: KubeClient, namespace: str, name: str) -> tuple[Job, dict[str, Any]]:
    try:
        return await get_raw(client, JOB, name, namespace=namespace)
    except NotFound as exc:
        raise not_found(f"job {namespace}/{name}", exc) from None


# --- why --------------------------------------------------------------------------------------


@one_line
def _why(args: argparse.Namespace) -> int:
    if args.job and args.name and args.job != args.name:
        raise CliError(f"two job names given: {args.job} and -N {args.name}; give one")
    name: str = args.job or args.name
    if not name:
        raise CliError("job name must be specified (NAME or -N NAME)")

    async def go(client: KubeClient) -> int:
        job, _raw = await _get_job(client, args.namespace, name)
        ctx = await job_context(client, job, events=False)
        findings = ctx.findings(job, dt.datetime.now(dt.UTC))
        if args.output in ("json", "yaml"):
            sys.stdout.write(output.dump([f.as_dict() for f in findings], args.output))
        else:
            sys.stdout.write("".join(line + "\n" for line in why.render_lines(findings)))
        return 0

    return run(args, go)


# --- suspend / resume / delete ----------------------------------------------------------------


def _command_handler(action: Action, verb: str) -> Callable[[argparse.Namespace], int]:
    @one_line
    def handler(args: argparse.Namespace) -> int:
        name = _need_name(args)

        async def go(client: KubeClient) -> int:
            try:
                job = await client.get(JOB, name, namespace=args.namespace)
            except NotFound as exc:
                raise not_found(f"job {args.namespace}/{name}", exc) from None
            target = OwnerReference(
                api_version=JOB.api_version,
                kind=JOB.kind,
                name=job.metadata.name,
                uid=job.metadata.uid,
                controller=True,
            )
            command = await create_command(client, args.namespace, action, target)
            print(f"{verb} job {name}: command {command} ({action}) created")
            return 0

        return run(args, go)

    return handler


@one_line
def _delete(args: argparse.Namespace) -> int:
    name = _need_name(args)

    async def go(client: KubeClient) -> int:
        try:
            await client.delete(JOB, name, namespace=args.namespace)
        except NotFound as exc:
            raise not_found(f"job {args.namespace}/{name}", exc) from None
        print(f"delete job {name} successfully")
        return 0

    return run(args, go)
