"""The handlers of ``caldera job run|list|view|why|wait|suspend|resume|restart|delete``: vcctl's
job commands, and ``why`` and ``wait`` (their flags are in `cli.commands`).

Table columns are vcctl's (Volcano's pkg/cli/job/). Beyond vcctl: ``-o json|yaml|wide``,
``job list --watch`` (a new row each time a job's row changes, as ``kubectl get -w`` does),
``job view`` showing tasks, pods, the PodGroup, why the gang is unschedulable, and the events of
the job itself (those whose involvedObject is this Job, by uid, so a deleted job of the same name
shows none of its own), ``job why``, which reads the job, its pods, PodGroup, Queue and Commands
and prints what `cli.why` makes of them (also the "Why" section of ``job view``), and ``job wait``.

``job suspend``, ``resume`` and ``restart`` create a bus.volcano.sh Command (AbortJob, ResumeJob,
RestartJob) that the job controller consumes; ``job run`` names its single task ``default0``, the
name Volcano's webhook would give it, so the job is the same with or without the webhook.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from caldera.api.core import Event, Pod
from caldera.api.duration import DurationError, parse_duration
from caldera.api.jobspec import default_task_name
from caldera.api.kinds import COMMAND, JOB, POD, PODGROUP, QUEUE
from caldera.api.meta import WatchEventType, controller_of
from caldera.api.quantity import QuantityError, milli_value
from caldera.api.volcano import JOB_NAME_KEY, Action, Command, Job, JobPhase, PodGroup, Queue
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, Forbidden, Gone, NotFound, error_from_status
from caldera.kube.events import events_about
from cli import output, why
from cli.cluster import (
    already_exists,
    controller_ref,
    create_command,
    get_object,
    get_raw,
    list_raw,
    listed_namespace,
    load_documents,
    not_found,
    run,
)
from cli.commands import need_name
from cli.errors import CliError
from cli.pending import job_position, position_lines

DEFAULT_QUEUE = "default"
# A watch is re-opened after this long (the server ends it anyway); the table carries on.
WATCH_SECONDS = 300
# At most this many event LISTs at once for `job view` (one per object of the job).
EVENT_READS = 8


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
    name: str = args.name
    if not name:
        raise CliError("job name must be specified (-N NAME)")
    requests = parse_resources(args.requests, "--requests")
    limits = parse_resources(args.limits, "--limits")
    if args.min < 0 or args.replicas < 0:
        raise CliError("--min and --replicas must not be negative")
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"name": name, **({"namespace": args.namespace} if args.namespace else {})},
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
    """The Job in ``-f FILE``; -N and -n override its name and namespace (without either, the
    namespace is filled in once connected: the context's)."""
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
    if args.namespace or meta.get("namespace"):
        meta["namespace"] = args.namespace or meta["namespace"]
    if not meta.get("name") and not meta.get("generateName"):
        raise CliError("job name must be specified (-N NAME, or metadata.name in the file)")
    body["metadata"] = meta
    return body


def run_job(args: argparse.Namespace) -> int:
    body = job_from_file(args) if args.filename else job_from_flags(args)

    async def go(client: KubeClient) -> int:
        namespace = body["metadata"].setdefault("namespace", args.namespace)
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


def list_jobs(args: argparse.Namespace) -> int:
    wide = args.output == "wide"
    if args.watch and args.output in ("json", "yaml"):
        raise CliError("--watch prints table rows: use it without -o, or with -o wide")

    async def go(client: KubeClient) -> int:
        namespace = listed_namespace(args)
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
    (None if it does not exist or may not be read) and the Commands of its namespace."""

    pods: list[Pod]
    podgroup: PodGroup | None
    queue: Queue | None
    queue_readable: bool
    commands: list[Command]

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


async def job_context(client: KubeClient, job: Job) -> JobContext:
    """Read the job's pods, PodGroup, Queue and Commands at once."""
    namespace, name = job.metadata.namespace, job.metadata.name
    pods_result, pgs_result, queue, commands = await asyncio.gather(
        client.list(POD, namespace=namespace, label_selector=f"{JOB_NAME_KEY}={name}"),
        client.list(PODGROUP, namespace=namespace),
        _get_queue(client, job.spec.queue or DEFAULT_QUEUE),
        _commands(client, namespace),
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
    )


async def own_events(client: KubeClient, namespace: str, uids: list[str]) -> list[Event]:
    """The events whose involvedObject is one of `uids` (the job, its PodGroup, its pods),
    each read with a field selector: the namespace's other events are never fetched."""
    found = await events_about(client, namespace, uids, limit=asyncio.Semaphore(EVENT_READS))
    return related_events(found, set(uids))


def view_job(args: argparse.Namespace) -> int:
    name = need_name(args, "job", "-N")

    async def go(client: KubeClient) -> int:
        job, raw = await _get_job(client, args.namespace, name)
        if args.output in ("json", "yaml"):
            sys.stdout.write(output.dump(raw, args.output))
            return 0
        ctx = await job_context(client, job)
        uids = [job.metadata.uid, *(p.metadata.uid for p in ctx.pods)]
        if ctx.podgroup is not None:
            uids.append(ctx.podgroup.metadata.uid)
        events = await own_events(client, job.metadata.namespace, uids)
        position = None
        if ctx.podgroup is not None:
            position = await job_position(
                client, ctx.podgroup.metadata.namespace, ctx.podgroup.metadata.name
            )
        now = dt.datetime.now(dt.UTC)
        sys.stdout.write(
            output.render_job_view(
                job,
                podgroup=ctx.podgroup,
                pods=ctx.pods,
                events=events,
                now=now,
                why=why.render_lines(ctx.findings(job, now)),
                position=position_lines(position, now) if position is not None else (),
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


def why_job(args: argparse.Namespace) -> int:
    name = need_name(args, "job", "-N")

    async def go(client: KubeClient) -> int:
        job, _raw = await _get_job(client, args.namespace, name)
        ctx = await job_context(client, job)
        findings = ctx.findings(job, dt.datetime.now(dt.UTC))
        if args.output in ("json", "yaml"):
            sys.stdout.write(output.dump([f.as_dict() for f in findings], args.output))
        else:
            sys.stdout.write("".join(line + "\n" for line in why.render_lines(findings)))
        return 0

    return run(args, go)


# --- wait -------------------------------------------------------------------------------------

# Phases a job does not leave (Aborted does: a ResumeJob Command restarts it).
FINAL_PHASES: Final = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED})


def wanted_phase(text: str) -> JobPhase:
    """``--for``'s phase, in any case, with or without kubectl's ``jsonpath``-less
    ``phase=`` prefix; CliError lists the phases."""
    value = text.removeprefix("phase=").strip()
    for phase in JobPhase:
        if phase.value.lower() == value.lower():
            return phase
    raise CliError(f"--for: {text!r} is not a job phase ({', '.join(p.value for p in JobPhase)})")


def wait_seconds(text: str) -> float:
    """``--timeout``: a Go duration (``30s``, ``1m30s``) or plain seconds, not negative."""
    try:
        seconds = float(text) if text.replace(".", "", 1).isdigit() else parse_duration(text)
    except DurationError as exc:
        raise CliError(f"--timeout: {exc}") from None
    if seconds < 0:
        raise CliError(f"--timeout: {text} is negative")
    return seconds


def wait_verdict(job: Job, wanted: JobPhase) -> bool | None:
    """True when `job` is in `wanted`, False when it ended in another final phase (it cannot
    reach `wanted` any more), None while it may still."""
    phase = job.status.state.phase
    if phase == wanted:
        return True
    if phase in FINAL_PHASES:
        return False
    return None


def wait_job(args: argparse.Namespace) -> int:
    name = need_name(args, "job", "-N")
    wanted = wanted_phase(args.phase)
    seconds = wait_seconds(args.timeout)

    async def go(client: KubeClient) -> int:
        job = await get_object(client, JOB, name, namespace=args.namespace)
        where = f"job {args.namespace}/{name}"
        try:
            async with asyncio.timeout(seconds):
                job = await _until_decided(client, job, wanted)
        except TimeoutError:
            raise CliError(
                f"timed out after {args.timeout} waiting for {where} to be {wanted} "
                f"(it is {job.status.state.phase or 'Pending'})"
            ) from None
        if wait_verdict(job, wanted):
            print(f"{where} is {wanted}")
            return 0
        raise CliError(f"{where} ended {job.status.state.phase}: it will not be {wanted}")

    return run(args, go)


async def _until_decided(client: KubeClient, job: Job, wanted: JobPhase) -> Job:
    """Watch the job from `job`'s version until `wait_verdict` decides; the last Job seen."""
    version = job.metadata.resource_version
    while wait_verdict(job, wanted) is None:
        try:
            async with client.watch(
                JOB,
                namespace=job.metadata.namespace,
                field_selector=f"metadata.name={job.metadata.name}",
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
            ) as events:
                async for event in events:
                    if event.type == WatchEventType.ERROR:
                        raise error_from_status(event.object)  # type: ignore[arg-type]
                    if not isinstance(event.object, Job):
                        continue
                    version = event.object.metadata.resource_version or version
                    if event.type == WatchEventType.DELETED:
                        raise CliError(f"job {job.metadata.namespace}/{job.metadata.name} deleted")
                    if event.type != WatchEventType.BOOKMARK:
                        job = event.object
                        if wait_verdict(job, wanted) is not None:
                            return job
        except Gone:
            job = await get_object(client, JOB, job.metadata.name, namespace=job.metadata.namespace)
            version = job.metadata.resource_version
    return job


# --- suspend / resume / restart / delete ------------------------------------------------------


def _command_handler(action: Action, verb: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        name = need_name(args, "job", "-N")

        async def go(client: KubeClient) -> int:
            job = await get_object(client, JOB, name, namespace=args.namespace)
            target = controller_ref(JOB, job.metadata.name, job.metadata.uid)
            command = await create_command(client, args.namespace, action, target)
            print(f"{verb} job {name}: command {command} ({action}) created")
            return 0

        return run(args, go)

    return handler


suspend_job = _command_handler(Action.ABORT_JOB, "suspend")
resume_job = _command_handler(Action.RESUME_JOB, "resume")
restart_job = _command_handler(Action.RESTART_JOB, "restart")


def delete_job(args: argparse.Namespace) -> int:
    name = need_name(args, "job", "-N")

    async def go(client: KubeClient) -> int:
        try:
            await client.delete(JOB, name, namespace=args.namespace)
        except NotFound as exc:
            raise not_found(f"job {args.namespace}/{name}", exc) from None
        print(f"delete job {name} successfully")
        return 0

    return run(args, go)
