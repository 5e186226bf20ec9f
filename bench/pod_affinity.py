"""The scheduler's own cost of inter-pod affinity: scheduler_perf's shapes in one session,
in-process (no API server), beside plain pods of the same shape in the same run.

    .venv/bin/python bench/pod_affinity.py                 # 500 and 1,000 nodes
    .venv/bin/python bench/pod_affinity.py --nodes 2000    # one size
    .venv/bin/python bench/pod_affinity.py --smoke         # CI: 50 nodes

Cases, as bench/scheduler_perf.py's (nodes of 4 cpu / 32Gi labelled with their hostname and
``topology.kubernetes.io/zone: zone1``; pods of 100m / 500Mi, each its own PodGroup of one):
``affinity`` (N pods already placed, N more to place, all with required affinity to
``color: blue`` over the zone), ``anti-affinity`` (N/5 placed, 2N/5 to place, required
anti-affinity to ``color: green`` over the hostname), and ``plain`` (the same pods without
terms). Caldera's bench configuration (bench/scheduler.py's ``FULL_CONF``: with binpack, preempt
and reclaim). Prints the session's CPU seconds and milliseconds per pod placed.

The affinity pods are placed four ways side by side (``--path``, repeatable): ``fresh``, each
judged afresh on every node (the layered path off, every node looked at: the scheduler before
issue 47's layered path); ``layered``, node-local verdicts from the pod's class and only the
nodes that fit judged on affinity, every node looked at; ``sampled``, layered with Volcano's
feasible-node sampling at its defaults (what ``caldera scheduler`` does: 10% of 5,000 nodes);
``plain``, the same pods without terms. Nothing here is a test: it exits 1 only when pods were
left unplaced.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:
    sys.path.insert(0, str(REPO))

import msgspec  # noqa: E402

from caldera.api.core import (  # noqa: E402
    Affinity,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
)
from caldera.api.meta import LabelSelector  # noqa: E402
from scheduler.api.feasible_nodes import FeasibleNodes  # noqa: E402
from scheduler.api.types import ClusterInfo, TaskInfo, TaskStatus  # noqa: E402
from scheduler.conf import parse_conf  # noqa: E402
from scheduler.framework.runner import run_session  # noqa: E402
from scheduler.framework.session import Session  # noqa: E402
from scheduler.plugins import interpod_affinity  # noqa: E402
from scheduler.registry import REGISTRY  # noqa: E402
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task  # noqa: E402

CONF: Final = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
"""
HOST: Final = "kubernetes.io/hostname"
ZONE: Final = "topology.kubernetes.io/zone"
REQUESTS: Final = {"cpu": "100m", "memory": "500Mi"}
PATHS: Final = ("fresh", "layered", "sampled", "plain")
EVERY_NODE: Final = FeasibleNodes(percentage_nodes_to_find=100)


def shaped(task: TaskInfo, kind: str) -> TaskInfo:
    """``task`` with scheduler_perf's labels and terms for ``kind``."""
    color, key = ("blue", ZONE) if kind == "affinity" else ("green", HOST)
    term = PodAffinityTerm(
        label_selector=LabelSelector(match_labels={"color": color}), topology_key=key
    )
    affinity: Affinity | None = None
    if kind == "affinity":
        affinity = Affinity(
            pod_affinity=PodAffinity(required_during_scheduling_ignored_during_execution=(term,))
        )
    elif kind == "anti-affinity":
        affinity = Affinity(
            pod_anti_affinity=PodAntiAffinity(
                required_during_scheduling_ignored_during_execution=(term,)
            )
        )
    pod = task.pod
    assert pod is not None
    task.pod = msgspec.structs.replace(
        pod,
        metadata=msgspec.structs.replace(pod.metadata, labels={"color": color}),
        spec=msgspec.structs.replace(pod.spec, affinity=affinity),
    )
    return task


def build(nodes: int, kind: str, placed: int, pending: int) -> ClusterInfo:
    node_infos = [
        make_node(f"n{i}", "4", "32Gi", labels={HOST: f"n{i}", ZONE: "zone1"}) for i in range(nodes)
    ]
    jobs = []
    for i in range(placed):
        task = make_task(f"init{i}", 0, REQUESTS, status=TaskStatus.RUNNING, node=f"n{i % nodes}")
        jobs.append(make_job(f"init{i}", [shaped(task, kind)]))
    for i in range(pending):
        task = make_task(f"m{i}", 0, REQUESTS)
        jobs.append(make_job(f"m{i}", [shaped(task, kind)], created=i))
    return make_cluster(node_infos, jobs)


def measure(nodes: int, path: str, shape: str, placed: int, pending: int) -> bool:
    """One session placing ``pending`` pods of ``shape`` (``plain``: without terms) along
    ``path``; prints its CPU time."""
    conf = parse_conf(CONF, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    cluster = build(nodes, "plain" if path == "plain" else shape, placed, pending)
    kept = interpod_affinity.LAYERED
    interpod_affinity.LAYERED = path != "fresh"
    try:
        started = time.process_time()
        ssn = Session(cluster, conf.tiers)
        ssn.feasible_nodes = FeasibleNodes() if path == "sampled" else EVERY_NODE
        result = run_session(ssn, conf, REGISTRY)
        cpu = time.process_time() - started
    finally:
        interpod_affinity.LAYERED = kept
    binds = len(result.binds)
    per_pod = 1000 * cpu / max(binds, 1)
    print(
        f"  {shape:>13} {path:>8}  {nodes:>6,} nodes  {placed:>6,} + {pending:>6,} pods  "
        f"session {cpu:6.2f} s CPU  {per_pod:7.2f} ms a pod",
        flush=True,
    )
    return binds == pending


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, action="append", help="repeatable")
    parser.add_argument("--smoke", action="store_true", help="50 nodes (CI)")
    parser.add_argument("--path", choices=PATHS, action="append", help="repeatable; all")
    parser.add_argument("--case", choices=("affinity", "anti-affinity"), action="append")
    parser.add_argument("--pending", type=int, help="pods to place (default: the case's)")
    args = parser.parse_args()
    sizes = [50] if args.smoke else (args.nodes or [500, 1000])
    cases = args.case or ["affinity", "anti-affinity"]
    ok = True
    for nodes in sizes:
        for shape, placed, pending in (
            ("affinity", nodes, min(nodes, 500)),
            ("anti-affinity", nodes // 5, 2 * nodes // 5),
        ):
            if shape not in cases:
                continue
            for path in args.path or PATHS:
                ok = measure(nodes, path, shape, placed, args.pending or pending) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
