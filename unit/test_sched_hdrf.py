"""hdrf: drf with ``enableHierarchy`` orders queues by their place in the tree of
``volcano.sh/hierarchy`` annotations (Volcano's hierarchical DRF) and votes on reclaim; Volcano's
own test cases (pkg/scheduler/plugins/drf/hdrf_test.go) give the same allocations here."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from caldera.api.volcano import HIERARCHY_KEY, HIERARCHY_WEIGHTS_KEY, Queue, QueueSpec
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskStatus
from scheduler.plugins.hdrf import HdrfTree, parse_weight, path_of
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task
from unit.test_sched_nodegroup import placed, run

HDRF_CONF = """\
actions: "enqueue, allocate"
tiers:
- plugins: [{name: drf, enableHierarchy: true}, {name: proportion}]
"""


def hqueue(name: str, hierarchy: str, weights: str) -> QueueInfo:
    notes = {HIERARCHY_KEY: hierarchy, HIERARCHY_WEIGHTS_KEY: weights}
    return QueueInfo(
        name, queue=Queue(metadata=ObjectMeta(name=name, annotations=notes), spec=QueueSpec())
    )


def pending_job(name: str, queue: str, count: int, cpu: str, memory: str) -> JobInfo:
    tasks = [make_task(name, i, {"cpu": cpu, "memory": memory}) for i in range(count)]
    return make_job(name, tasks, queue=queue, min_available=0)


def held(ssn_placed: dict[str, str], job: str) -> int:
    return sum(1 for pod in ssn_placed if pod.startswith(f"{job}-"))


def test_volcano_rescaling_case() -> None:
    """Volcano's "rescaling test": sci (cpu and memory pods), eng/dev (cpu pods) and eng/prod
    (memory pods) on 10 cpu / 10G: five pods each."""
    cluster: ClusterInfo = make_cluster(
        [make_node("n", "10", "10G", max_pods=50)],
        [
            pending_job("pg1", "root-sci", 10, "1", "1G"),
            pending_job("pg21", "root-eng-dev", 10, "1", "0"),
            pending_job("pg22", "root-eng-prod", 10, "0", "1G"),
        ],
        [
            hqueue("root-sci", "root/sci", "100/50"),
            hqueue("root-eng-dev", "root/eng/dev", "100/50/50"),
            hqueue("root-eng-prod", "root/eng/prod", "100/50/50"),
        ],
    )
    where = placed(run(cluster, HDRF_CONF))
    assert {job: held(where, job) for job in ("pg1", "pg21", "pg22")} == {
        "pg1": 5,
        "pg21": 5,
        "pg22": 5,
    }


def test_volcano_blocking_nodes_case() -> None:
    """Volcano's "blocking nodes test": once cpu runs out, the memory-only jobs share what is
    left: 10, 10, 10 cpu pods and 15, 15 memory pods on 30 cpu / 30G."""
    cluster = make_cluster(
        [make_node("n", "30", "30G", max_pods=500)],
        [
            pending_job("pg1", "root-pg1", 30, "1", "0"),
            pending_job("pg2", "root-pg2", 30, "1", "0"),
            pending_job("pg31", "root-pg3-pg31", 30, "1", "0"),
            pending_job("pg32", "root-pg3-pg31", 30, "0", "1G"),
            pending_job("pg4", "root-pg4", 30, "0", "1G"),
        ],
        [
            hqueue("root-pg1", "root/pg1", "100/25"),
            hqueue("root-pg2", "root/pg2", "100/25"),
            hqueue("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
            hqueue("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
            hqueue("root-pg4", "root/pg4", "100/25"),
        ],
    )
    where = placed(run(cluster, HDRF_CONF))
    assert {job: held(where, job) for job in ("pg1", "pg2", "pg31", "pg32", "pg4")} == {
        "pg1": 10,
        "pg2": 10,
        "pg31": 10,
        "pg32": 15,
        "pg4": 15,
    }


@pytest.mark.parametrize(
    ("text", "weight"),
    [("2.5", 2.5), ("0.5", 1.0), ("x", 1.0), ("nan", 1.0), ("inf", 1.0), ("", 1.0)],
)
def test_weights_below_one_or_not_numbers_count_one(text: str, weight: float) -> None:
    """A level's weight below 1, or not a finite number, counts 1."""
    assert parse_weight(text) == weight


def test_path_levels_and_missing_weights() -> None:
    """The root is not a level; a level without a weight counts 1."""
    assert path_of("root/eng/dev", "1/4") == [("eng", 4.0), ("dev", 1.0)]
    assert path_of("", "") == []


def test_saturated_subtree_goes_last_and_weights_divide_shares() -> None:
    """A queue whose jobs hold all they ask goes after a demanding one; between demanding
    queues, the lower share / weight goes first."""
    tree = HdrfTree(Resources.from_list({"cpu": "20"}))
    tree.add_job(
        "a", [("a", 1.0)], Resources.from_list({"cpu": "2"}), Resources.from_list({"cpu": "2"})
    )
    tree.add_job(
        "b", [("b", 1.0)], Resources.from_list({"cpu": "4"}), Resources.from_list({"cpu": "8"})
    )
    tree.add_job(
        "c", [("c", 4.0)], Resources.from_list({"cpu": "6"}), Resources.from_list({"cpu": "9"})
    )
    assert tree.compare(["b"], ["a"]) < 0  # a is saturated
    assert tree.compare(["c"], ["b"]) < 0  # 0.3 / 4 < 0.2 / 1
    assert tree.compare(["b"], ["missing"]) == 0
    tree.change("b", Resources.from_list({"cpu": "8"}), Resources.from_list({"cpu": "4"}), +1)
    assert tree.compare(["c"], ["b"]) < 0  # b is saturated now
    assert tree.compare(["b"], ["c"]) > 0


def test_level_weights_share_the_cluster() -> None:
    """Without a queue plugin, hdrf alone orders the queues: root/a of weight 1 and root/b of
    weight 3 take 8 cpu as 2 and 6; drf without the switch gives no queue order at all."""

    def build() -> ClusterInfo:
        return make_cluster(
            [make_node("n", "8", "8Gi", max_pods=50)],
            [pending_job("ja", "qa", 8, "1", "0"), pending_job("jb", "qb", 8, "1", "0")],
            [hqueue("qa", "root/a", "1/1"), hqueue("qb", "root/b", "1/3")],
        )

    alone = """\
actions: "enqueue, allocate"
tiers:
- plugins: [{name: drf%s}]
"""
    where = placed(run(build(), alone % ", enableHierarchy: true"))
    assert (held(where, "ja"), held(where, "jb")) == (2, 6)
    where = placed(run(build(), alone % ""))
    assert (held(where, "ja"), held(where, "jb")) != (2, 6)


@pytest.mark.parametrize(("weight", "evicted"), [("1", True), ("10", False)])
def test_reclaim_takes_only_from_queues_above_the_reclaimers_weighted_share(
    weight: str, evicted: bool
) -> None:
    """qa holds all 8 cpu; qb (weight 1) asks for one. With qa of weight 1, qa's share after
    the loss (7/8) is above qb's after the gain (1/8): a victim. With weight 10, qa's weighted
    share (7/80) is below qb's: no victim, though nothing else forbids the eviction."""
    conf = """\
actions: "enqueue, allocate, reclaim"
tiers:
- plugins: [{name: gang}, {name: drf, enableHierarchy: true}]
"""
    cluster = make_cluster(
        [make_node("n", "8", "8Gi", max_pods=50)],
        [pending_job("jb", "qb", 1, "1", "0")],
        [hqueue("qa", "root/a", f"1/{weight}"), hqueue("qb", "root/b", "1/1")],
    )
    running = [make_task("ja", i, {"cpu": "1", "memory": "0"}, node="n") for i in range(8)]
    for task in running:
        task.status = TaskStatus.RUNNING
    job = make_job("ja", running, queue="qa", min_available=1, phase="Running")
    cluster.jobs[job.key] = job
    for task in running:
        cluster.nodes["n"].add_task(task)
    evictions = run(cluster, conf).result.evictions
    assert bool(evictions) is evicted
    assert all(e.task.job == "ns/ja" for e in evictions)


_PATHS = [[("a", 1.0)], [("a", 1.0), ("x", 2.0)], [("b", 3.0)], []]


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(1, 8)), min_size=1),
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3), st.booleans())),
)
def test_kept_tree_equals_a_tree_built_afresh(
    jobs: list[tuple[int, int, int]], changes: list[tuple[int, int, bool]]
) -> None:
    """After any allocations and releases, the tree kept by ``change`` (marking, deriving on
    read) orders queues as a tree built from scratch with the final allocations."""
    total = Resources.from_list({"cpu": "12", "memory": "12"})
    held = {i: Resources.from_list({"cpu": str(c)}) for i, (_, c, _) in enumerate(jobs)}
    asks = {
        i: Resources.from_list({"cpu": str(r), "memory": "1"}) for i, (_, _, r) in enumerate(jobs)
    }
    kept = HdrfTree(total)
    for i, (path, _, _) in enumerate(jobs):
        kept.add_job(str(i), _PATHS[path], held[i], asks[i])
    for index, amount, gain in changes:
        i = index % len(jobs)
        delta = Resources.from_list({"cpu": str(amount), "memory": str(amount % 2)})
        if not gain and not delta.less_equal(held[i]):
            continue
        held[i] = held[i] + delta if gain else held[i] - delta
        kept.change(str(i), held[i], delta, 1 if gain else -1)
        kept.compare(["a"], ["b"])  # reads, so later changes start from derived figures
    fresh = HdrfTree(total)
    for i, (path, _, _) in enumerate(jobs):
        fresh.add_job(str(i), _PATHS[path], held[i], asks[i])
    for left in (["a"], ["a", "x"], ["b"], []):
        for right in (["a"], ["a", "x"], ["b"], []):
            assert kept.compare(left, right) == fresh.compare(left, right)
