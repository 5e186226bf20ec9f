"""``caldera pod list``: vcctl's pod listing.

Without filters it lists the pods of Volcano jobs (label ``volcano.sh/job-name`` present); ``-j``
those of one job; ``-q`` those of one queue, jobs' pods (label ``volcano.sh/queue-name``) and other
workloads' pods (annotation ``scheduling.volcano.sh/queue-name``) alike. With both ``-j`` and
``-q``, a job whose pods are in another queue is an error, as in vcctl. Columns are vcctl's
(Name, Ready, Status, Restart, Age, computed as kubectl does); ``-o wide`` adds job, task, queue,
node and IP.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from caldera.api.core import Pod
from caldera.api.kinds import POD
from caldera.api.volcano import JOB_NAME_KEY, QUEUE_NAME_KEY
from caldera.kube.client import KubeClient
from cli import output
from cli.cluster import (
    CliError,
    add_connection_args,
    add_output_arg,
    list_raw,
    one_line,
    run,
    usage,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera pod`` and ``caldera pod list``."""
    pod = sub.add_parser(
        "pod",
        help="list the pods of Volcano jobs and queues (vcctl pod)",
        description="Pods of Volcano jobs and queues.",
    )
    pod.set_defaults(handler=lambda _args: usage(pod))
    cmds = pod.add_subparsers(dest="pod_command", metavar="COMMAND")
    p = cmds.add_parser(
        "list", help="list pods", description="List the pods of jobs (all jobs, one job, a queue)."
    )
    p.add_argument("-n", "--namespace", default="default", help="the namespace of the pods")
    p.add_argument("-j", "--job", default="", help="only the pods of this job")
    p.add_argument("-q", "--queue", default="", help="only the pods of this queue")
    p.add_argument("--all-namespaces", action="store_true", help="list pods in all namespaces")
    add_output_arg(p)
    add_connection_args(p)
    p.set_defaults(handler=_list)


def label_selector(job: str) -> str:
    """The server-side selector: one job's pods, or every job's pods, or all pods for -q."""
    return f"{JOB_NAME_KEY}={job}" if job else JOB_NAME_KEY


def select_pods(pods: list[Pod], *, job: str, queue: str) -> list[Pod]:
    """vcctl's filtering after the LIST; raises CliError when -j's pods are in another queue."""
    if job:
        if queue and any(p.metadata.labels.get(QUEUE_NAME_KEY, queue) != queue for p in pods):
            raise CliError(f"the input vcjob {job} does not match the queue {queue}")
        return pods
    if queue:
        return [p for p in pods if output.pod_queue(p) == queue]
    return pods


@one_line
def _list(args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else args.namespace

    async def go(client: KubeClient) -> int:
        selector = None if args.queue and not args.job else label_selector(args.job)
        pods, raw, _version = await list_raw(
            client, POD, namespace=namespace, label_selector=selector
        )
        shown = sorted(
            select_pods(pods, job=args.job, queue=args.queue),
            key=lambda p: (p.metadata.namespace, p.metadata.name),
        )
        if args.output in ("json", "yaml"):
            items = [raw[p.metadata.uid] for p in shown]
            sys.stdout.write(output.dump(output.as_list(items), args.output))
            return 0
        sys.stdout.write(
            output.pod_table(
                shown,
                dt.datetime.now(dt.UTC),
                all_namespaces=args.all_namespaces,
                wide=args.output == "wide",
            )
        )
        return 0

    return run(args, go)
