"""Preempt and reclaim rank the nodes to evict on with the batch node scores of a cross-node
pod (inter-pod affinity's, spread's ScheduleAnyway) added to the node score, as Volcano's
preempt does (``util.PrioritizeNodes`` with ``ssn.BatchNodeOrderFn``); a pod without such
scores is ranked as before (``scheduler.actions.room``)."""

from __future__ import annotations

from caldera.api.core import WeightedPodAffinityTerm
from scheduler.actions.preempt import PreemptAction
from scheduler.actions.reclaim import ReclaimAction
from scheduler.actions.room import batch_scores
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments, Plugin
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.plugins.proportion import ProportionPlugin
from unit.sched_fixtures import (
    StandInGang,
    StandInPriority,
    make_cluster,
    make_job,
    make_task,
    open_session,
)
from unit.test_plugin_pod_affinity import ZONE, node, shaped, term

NEAR_CACHE = WeightedPodAffinityTerm(weight=10, pod_affinity_term=term(ZONE, app="cache"))


def _running(job: str, index: int, node_name: str, labels: dict[str, str]) -> TaskInfo:
    task = make_task(job, index, {"cpu": "1"}, status=TaskStatus.RUNNING, node=node_name)
    return shaped(task, labels)


def _preemptor(*, near_cache: bool) -> TaskInfo:
    preferred = [NEAR_CACHE] if near_cache else []
    return shaped(make_task("high", 0, {"cpu": "1"}), {"app": "x"}, preferred=preferred)


def _preempt_cluster(high: TaskInfo) -> ClusterInfo:
    """n0 (zone a) and n1 (zone b), 2 cpu each, both full: n0 of two low pods, n1 of a low
    pod and a high-priority cache pod. Both nodes score the same; n0 comes first by name."""
    low = make_job(
        "low",
        [_running("low", 0, "n0", {}), _running("low", 1, "n0", {}), _running("low", 2, "n1", {})],
        priority=1,
        min_available=0,
        phase="Running",
    )
    cache = make_job(
        "cache", [_running("cache", 0, "n1", {"app": "cache"})], priority=10, phase="Running"
    )
    high_job = make_job("high", [high], priority=10)
    return make_cluster([node("n0", "a", "2"), node("n1", "b", "2")], [low, cache, high_job])


def _scoring_plugins() -> list[Plugin]:
    return [
        PredicatesPlugin(Arguments("predicates", {})),
        NodeOrderPlugin(Arguments("nodeorder", {})),
    ]


def _evicted_nodes(cluster: ClusterInfo, action: PreemptAction | ReclaimAction) -> list[str]:
    deciding: list[Plugin] = [StandInGang(), StandInPriority()]
    if isinstance(action, ReclaimAction):
        deciding = [StandInGang(), ProportionPlugin(Arguments("proportion", {}))]
    tiers = [deciding, _scoring_plugins()]
    ssn = open_session(cluster, *tiers)
    action.execute(ssn)
    return [e.task.node_name for e in ssn.result.evictions]


def test_preempt_evicts_where_the_preferred_affinity_scores() -> None:
    """The preemptor prefers a cache pod in its zone: preempt evicts on n1 (zone b, where the
    cache pod runs), not on n0, which the node score and the name alone would pick."""
    high = _preemptor(near_cache=True)
    assert _evicted_nodes(_preempt_cluster(high), PreemptAction()) == ["n1"]
    assert high.status == TaskStatus.PIPELINED
    assert high.node_name == "n1"


def test_preempt_without_batch_scores_walks_as_before() -> None:
    """The same preemptor without the preferred term: n0 first (equal scores, then name)."""
    high = _preemptor(near_cache=False)
    assert _evicted_nodes(_preempt_cluster(high), PreemptAction()) == ["n0"]
    assert high.node_name == "n0"


def _reclaim_cluster(new: TaskInfo) -> tuple[ClusterInfo, JobInfo]:
    """Queues rich and poor of equal weight over 4 cpu (2 deserved each): rich holds 3 (two
    pods on n0, one on n1), poor 1 (its cache pod on n1); poor's new pod may take one back."""
    hog = make_job(
        "hog",
        [_running("hog", 0, "n0", {}), _running("hog", 1, "n0", {}), _running("hog", 2, "n1", {})],
        queue="rich",
        min_available=0,
        phase="Running",
    )
    cache = make_job(
        "cache", [_running("cache", 0, "n1", {"app": "cache"})], queue="poor", phase="Running"
    )
    new_job = make_job("new", [new], queue="poor")
    cluster = make_cluster(
        [node("n0", "a", "2"), node("n1", "b", "2")],
        [hog, cache, new_job],
        [QueueInfo("rich"), QueueInfo("poor")],
    )
    return cluster, new_job


def test_reclaim_evicts_where_the_preferred_affinity_scores() -> None:
    """Reclaim shares the walk: the new pod preferring the cache pod's zone reclaims on n1;
    without the term, on n0."""
    near = shaped(make_task("new", 0, {"cpu": "1"}), {"app": "x"}, preferred=[NEAR_CACHE])
    cluster, _ = _reclaim_cluster(near)
    assert _evicted_nodes(cluster, ReclaimAction()) == ["n1"]
    assert near.node_name == "n1"
    plain = shaped(make_task("new", 0, {"cpu": "1"}), {"app": "x"})
    cluster, _ = _reclaim_cluster(plain)
    assert _evicted_nodes(cluster, ReclaimAction()) == ["n0"]
    assert plain.node_name == "n0"


def test_batch_scores_are_asked_for_cross_node_pods_only() -> None:
    """``batch_scores``: the preemptor with a preferred term gets n1 above n0; the low pods,
    which no term names, get none (their walk is as before)."""
    high = _preemptor(near_cache=True)
    ssn = open_session(
        _preempt_cluster(high), [StandInGang(), StandInPriority()], _scoring_plugins()
    )
    nodes = list(ssn.nodes.values())
    scores = batch_scores(ssn, high, nodes)
    assert scores.get("n1", 0.0) > scores.get("n0", 0.0)
    for task in ssn.jobs["ns/low"].tasks.values():
        assert batch_scores(ssn, task, nodes) == {}
