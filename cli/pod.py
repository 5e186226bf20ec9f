"""The handler of ``caldera pod list``: vcctl's pod listing (its flags are in `cli.commands`).

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
from cli.cluster import list_raw, listed_namespace, run
from cli.errors import CliError


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


def list_pods(args: argparse.Namespace) -> int:
    async def go(client: KubeClient) -> int:
        namespace = listed_namespace(args)
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
