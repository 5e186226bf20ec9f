"""``caldera completion names RESOURCE``: the names shell completion offers, one a line.

The completion script calls it with the ``-n`` and connection flags already typed. It must stay
quiet: any failure (no cluster, no permission) prints nothing and exits 1, so a TAB press never
writes an error into the user's command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any, Final

from caldera.api.kinds import CRONJOB, JOB, NAMESPACE, QUEUE, KindInfo
from caldera.kube.client import KubeClient
from cli.cluster import run

KINDS: Final[dict[str, KindInfo[Any]]] = {
    "jobs": JOB,
    "queues": QUEUE,
    "cronjobs": CRONJOB,
    "namespaces": NAMESPACE,
}


def print_names(args: argparse.Namespace) -> int:
    kind = KINDS[args.resource]

    async def go(client: KubeClient) -> int:
        found = await client.list(kind, namespace=args.namespace if kind.namespaced else None)
        print("\n".join(sorted(item.metadata.name for item in found.items)))
        return 0

    # The one-line error of a failure goes nowhere: the exit code says it.
    with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
        return run(args, go)
