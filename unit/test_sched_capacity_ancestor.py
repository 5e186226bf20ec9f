"""capacity's ancestorReclaimLevel: the argument's checks, the design document's cases 1-11
(Volcano's docs/design/hierarchical-queue-on-capacity-plugin.md) as whole reclaim sessions, and
properties of the reclaimable decision on random queue trees.

The cases keep each topology and outcome of the design document. Where Caldera's leaf rule
differs from Volcano's (a victim's queue must keep its deserved amount once it has lost the
victim, docs/compatibility.md), the victim queue holds two pods where Volcano's holds one, so
that the leaf check passes and the ancestor check the case is about decides; where Caldera
caps a deserved amount at what the cluster holds, the cluster has room for the case's
deserved amounts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.resources import Resources
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import ConfError, parse_conf
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.capacity import CapacityPlugin
from scheduler.plugins.capacity_reclaim import (
    ancestor_at,
    apart_ancestors,
    share_ancestor_within,
    within_deserved,
)
from scheduler.plugins.queue_tree import QueueLimits
from scheduler.registry import ACTIONS, PLUGINS
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task, run_conf

A100 = "nvidia.com/a100"

CONF = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
  - name: conformance
- plugins:
  - name: predicates
  - name: capacity
    enableHierarchy: true
    arguments:
      ancestorReclaimLevel: {level}
  - name: nodeorder
"""


def q(name: str, parent: str = "", deserved: str = "", capability: str = "") -> QueueInfo:
    """A queue; amounts as ``cpu=2,memory=2Gi,a100=1`` (a100: nvidia.com/a100)."""

    def amounts(text: str) -> Resources | None:
        if not text:
            return None
        pairs = (item.split("=") for item in text.split(","))
        return Resources.from_list({A100 if k == "a100" else k: v for k, v in pairs})

    return QueueInfo(
        name,
        parent=parent,
        deserved=amounts(deserved) or Resources(),
        capability=amounts(capability),
    )


def pod(job: str, index: int, requests: str, node: str = "", priority: int = 0) -> TaskInfo:
    reqs = {A100 if k == "a100" else k: v for k, v in (i.split("=") for i in requests.split(","))}
    return make_task(
        job,
        index,
        reqs,
        priority=priority,
        pod_priority=priority,
        status=TaskStatus.RUNNING if node else TaskStatus.PENDING,
        node=node,
    )


def job(name: str, queue: str, tasks: Sequence[TaskInfo], phase: str = "Running") -> JobInfo:
    return make_job(name, tasks, queue=queue, min_available=1, phase=phase)


@dataclass(frozen=True)
class Case:
    """One scenario: the cluster, and per level the pods evicted (their queue and priority)
    and the job pipelined in their place."""

    build: Callable[[], ClusterInfo]
    outcomes: Mapping[int, Outcome]


def case1() -> ClusterInfo:
    """root -> q1 (a100 1) -> q11; root -> q2. q2 holds 4 a100, q11 wants 1."""
    queues = [q("root"), q("q1", "root", "a100=1"), q("q11", "q1"), q("q2", "root")]
    nodes = [make_node("n1", "16", "16Gi", extra={A100: "4"})]
    jobs = [
        job("pg1", "q2", [pod("pg1", 0, "cpu=1,memory=1Gi,a100=4", "n1")]),
        job("pg2", "q11", [pod("pg2", 0, "cpu=1,memory=1Gi,a100=1")], "Inqueue"),
    ]
    return make_cluster(nodes, jobs, queues)


def project_tree() -> list[QueueInfo]:
    return [
        q("root"),
        q("project1", "root", "a100=1", "a100=2"),
        q("project1-np", "project1", "a100=1", "a100=1"),
        q("project1-p", "project1"),
        q("project2", "root", "a100=3", "a100=4"),
        q("project2-np", "project2", "a100=3", "a100=3"),
        q("project2-p", "project2"),
    ]


def case2() -> ClusterInfo:
    """project2-p holds all 4 a100 (p4 of lower priority); project1-p wants 1."""
    one = "cpu=1,memory=1Gi,a100=1"
    jobs = [job(f"pg{i}", "project2-p", [pod(f"pg{i}", 0, one, "n1", 2)]) for i in (1, 2, 3)]
    jobs.append(job("pg4", "project2-p", [pod("pg4", 0, one, "n1", 1)]))
    jobs.append(job("pg5", "project1-p", [pod("pg5", 0, one)], "Pending"))
    nodes = [make_node("n1", "16", "16Gi", extra={A100: "4"})]
    return make_cluster(nodes, jobs, project_tree())


def case3() -> ClusterInfo:
    """project2-p holds 3 a100 (and waits for a 4th), project1-p holds 1; project2-np wants
    1: its sibling loses a pod, the cousin keeps its parent's deserved one."""
    one = "cpu=1,memory=1Gi,a100=1"
    jobs = [job(f"pg{i}", "project2-p", [pod(f"pg{i}", 0, one, "n1", 2)]) for i in (1, 2, 3)]
    jobs.append(job("pg4", "project2-p", [pod("pg4", 0, one)], "Inqueue"))
    jobs.append(job("pg5", "project1-p", [pod("pg5", 0, one, "n1")]))
    jobs.append(job("pg6", "project2-np", [pod("pg6", 0, one)], "Pending"))
    nodes = [make_node("n1", "16", "16Gi", extra={A100: "4"})]
    return make_cluster(nodes, jobs, project_tree())


def case4() -> ClusterInfo:
    """child1 holds its deserved a100 (its sibling's pod may not be preempted); child2, in
    the other parent, wants one."""
    queues = [
        q("root"),
        q("parent1", "root", "a100=1"),
        q("child1", "parent1", "a100=1"),
        q("child1-sibling", "parent1"),
        q("parent2", "root", "a100=1"),
        q("child2", "parent2", "a100=1"),
    ]
    one = "cpu=1,memory=1Gi,a100=1"
    kept = pod("pg3", 0, one, "n1")
    kept.preemptable = False
    jobs = [
        job("pg1", "child1", [pod("pg1", 0, one, "n1")]),
        job("pg3", "child1-sibling", [kept]),
        job("pg2", "child2", [pod("pg2", 0, one)], "Pending"),
    ]
    return make_cluster([make_node("n1", "8", "8Gi", extra={A100: "2"})], jobs, queues)


def levels_tree() -> ClusterInfo:
    """Cases 5-7: grand-a -> parent-a -> queue-a and grand-b -> parent-b -> queue-b; queue-b
    (deserved 1 cpu) holds the whole 2-cpu node, queue-a (deserved 2) wants 1 cpu. Without
    the cap at the cluster's size grand-b would deserve 3; it deserves the 2 the cluster has,
    and holds 2: at level 2 it may not lose a pod."""
    queues = [
        q("root"),
        q("grand-a", "root", "cpu=2,memory=2Gi", "cpu=4,memory=4Gi"),
        q("parent-a", "grand-a", "cpu=2,memory=2Gi", "cpu=2,memory=2Gi"),
        q("queue-a", "parent-a", "cpu=2,memory=2Gi", "cpu=2,memory=2Gi"),
        q("grand-b", "root", "cpu=3,memory=3Gi", "cpu=4,memory=4Gi"),
        q("parent-b", "grand-b", "cpu=1,memory=1Gi", "cpu=2,memory=2Gi"),
        q("queue-b", "parent-b", "cpu=1,memory=1Gi", "cpu=2,memory=2Gi"),
    ]
    one = "cpu=1,memory=1Gi"
    jobs = [
        job("victim", "queue-b", [pod("victim", 0, one, "n1"), pod("victim", 1, one, "n1")]),
        job("reclaimer", "queue-a", [pod("reclaimer", 0, one)], "Inqueue"),
    ]
    return make_cluster([make_node("n1", "2", "2Gi")], jobs, queues)


def case8() -> ClusterInfo:
    """Two best-effort siblings under parent (deserved 4 cpu); a queue outside holds the
    other half of the 4-cpu node (its deserved). queue-a may reclaim only on parent's behalf,
    and parent would gain nothing from queue-b's pod."""
    queues = [
        q("root"),
        q("parent", "root", "cpu=4,memory=4Gi", "cpu=4,memory=4Gi"),
        q("queue-a", "parent"),
        q("queue-b", "parent"),
        q("other", "root", "cpu=2,memory=2Gi"),
    ]
    two = "cpu=2,memory=2Gi"
    jobs = [
        job("victim", "queue-b", [pod("victim", 0, two, "n1")]),
        job("other", "other", [pod("other", 0, two, "n1")]),
        job("reclaimer", "queue-a", [pod("reclaimer", 0, two)], "Inqueue"),
    ]
    return make_cluster([make_node("n1", "4", "4Gi")], jobs, queues)


def case9() -> ClusterInfo:
    """grand -> parent-a -> queue-a and grand -> parent-b -> queue-b, both leaves best effort.
    parent-a deserves 2 cpu here (Volcano's leaves it unset, so queue-a may not reclaim at
    all): queue-a reclaims on parent-a's behalf; at level 2 the leaves share grand and the
    best-effort gate spares queue-b's pods, at level 1 they do not."""
    queues = [
        q("root"),
        q("grand", "root", "cpu=4,memory=4Gi", "cpu=4,memory=4Gi"),
        q("parent-a", "grand", "cpu=2,memory=2Gi"),
        q("queue-a", "parent-a"),
        q("parent-b", "grand"),
        q("queue-b", "parent-b"),
    ]
    two = "cpu=2,memory=2Gi"
    jobs = [
        job("victim", "queue-b", [pod("victim", 0, two, "n1"), pod("victim", 1, two, "n1")]),
        job("reclaimer", "queue-a", [pod("reclaimer", 0, two)], "Inqueue"),
    ]
    return make_cluster([make_node("n1", "4", "4Gi")], jobs, queues)


def case10() -> ClusterInfo:
    """An unbalanced tree: grand -> parent-deep -> queue-deep, grand -> queue-shallow; both
    leaves best effort, queue-deep holds the node."""
    queues = [
        q("root"),
        q("grand", "root", "cpu=1,memory=1Gi", "cpu=2,memory=2Gi"),
        q("parent-deep", "grand", "cpu=1,memory=1Gi", "cpu=2,memory=2Gi"),
        q("queue-deep", "parent-deep"),
        q("queue-shallow", "grand"),
    ]
    two = "cpu=2,memory=2Gi"
    jobs = [
        job("victim", "queue-deep", [pod("victim", 0, two, "n1")]),
        job("reclaimer", "queue-shallow", [pod("reclaimer", 0, two)], "Inqueue"),
    ]
    return make_cluster([make_node("n1", "2", "2Gi")], jobs, queues)


def case11() -> ClusterInfo:
    """shallow-parent -> queue-shallow (a100 1) against deep-grand (2) -> deep-parent (1) ->
    queue-deep (1), which holds both a100: at level 2 deep-grand, at its deserved 2, keeps
    them."""
    queues = [
        q("root"),
        q("shallow-parent", "root", "a100=1"),
        q("queue-shallow", "shallow-parent", "a100=1"),
        q("deep-grand", "root", "a100=2"),
        q("deep-parent", "deep-grand", "a100=1"),
        q("queue-deep", "deep-parent", "a100=1"),
    ]
    one = "cpu=1,memory=1Gi,a100=1"
    jobs = [
        job("victim", "queue-deep", [pod("victim", 0, one, "n1"), pod("victim", 1, one, "n1")]),
        job("reclaimer", "queue-shallow", [pod("reclaimer", 0, one)], "Inqueue"),
    ]
    return make_cluster([make_node("n1", "4", "4Gi", extra={A100: "2"})], jobs, queues)


Outcome = tuple[tuple[tuple[str, int], ...], str]
NOTHING: Outcome = ((), "")


def one_from(queue: str, priority: int = 0, job: str = "ns/reclaimer") -> Outcome:
    """One pod of ``queue`` (of that priority) evicted, ``job`` pipelined."""
    return (((queue, priority),), job)


CASES = {
    # case1: q11 deserves nothing; at level 1 its parent q1 (deserved 1 a100) reclaims.
    "case1-parent-deserved-reclaims": Case(
        case1, {1: one_from("q2", job="ns/pg2"), 0: NOTHING, 2: one_from("q2", job="ns/pg2")}
    ),
    # case2: project2 holds 4 of its deserved 3: it gives up exactly one, the lowest priority.
    "case2-cousin-over-deserved-at-both": Case(
        case2, {1: one_from("project2-p", 1, "ns/pg5"), 0: NOTHING}
    ),
    # case3: the sibling loses a pod; the cousin's parent is at its deserved.
    "case3-sibling-first": Case(
        case3,
        {1: one_from("project2-p", 2, "ns/pg6"), 0: one_from("project2-p", 2, "ns/pg6")},
    ),
    # case4: the cousin holds exactly what it deserves.
    "case4-cousin-at-deserved": Case(case4, {1: NOTHING, 0: NOTHING}),
    # case5-7: level 0 and 1 reclaim, level 2 finds grand-b at its deserved.
    "case5-7-grandparent-gate": Case(
        levels_tree, {0: one_from("queue-b"), 1: one_from("queue-b"), 2: NOTHING}
    ),
    # case8: siblings under the reclaiming ancestor.
    "case8-best-effort-siblings": Case(case8, {1: NOTHING, 0: NOTHING, 2: NOTHING}),
    # case9: the best-effort gate under a shared grandparent (level 2), not at level 1.
    "case9-shared-grandparent-gate": Case(case9, {2: NOTHING, 1: one_from("queue-b"), 0: NOTHING}),
    # case10: unbalanced, shared grand: nothing at any level.
    "case10-unbalanced-shared-grand": Case(case10, {2: NOTHING, 1: NOTHING, 0: NOTHING}),
    # case11: unbalanced; the depth-2 ancestor (deep-grand) decides at level 2.
    "case11-unbalanced-depth-two": Case(
        case11, {2: NOTHING, 1: one_from("queue-deep"), 0: one_from("queue-deep")}
    ),
}


def outcome(cluster: ClusterInfo, level: int) -> Outcome:
    ssn = run_conf(cluster, CONF.format(level=level))
    evicted = tuple(
        sorted((cluster.jobs[e.task.job].queue, e.task.priority) for e in ssn.result.evictions)
    )
    pipelined = [j.key for j in cluster.jobs.values() if j.count(TaskStatus.PIPELINED)]
    assert len(pipelined) <= 1
    return evicted, pipelined[0] if pipelined else ""


@pytest.mark.parametrize(
    ("case", "level"),
    [
        pytest.param(name, level, id=f"{name}-L{level}")
        for name, c in CASES.items()
        for level in c.outcomes
    ],
)
def test_design_cases(case: str, level: int) -> None:
    """Each design case at its level, and at the others listed: the pods evicted and the job
    pipelined in their place."""
    scenario = CASES[case]
    assert outcome(scenario.build(), level) == scenario.outcomes[level]


# ---- the argument -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "1.5", '"1"', "true", "null", "[1]"])
def test_bad_levels_are_refused_at_load(value: str) -> None:
    """A negative, fractional, quoted, boolean, empty or list value (YAML) is refused when the
    configuration is loaded, naming the plugin and the argument."""
    with pytest.raises(ConfError, match="plugin capacity: argument ancestorReclaimLevel must be"):
        parse_conf(CONF.format(level=value), actions=ACTIONS, plugins=PLUGINS)


def test_levels_are_accepted_and_default_to_zero() -> None:
    conf = parse_conf(CONF.format(level=3), actions=ACTIONS, plugins=PLUGINS)
    [capacity] = [o for tier in conf.tiers for o in tier if o.name == "capacity"]
    assert CapacityPlugin(Arguments("capacity", capacity.arguments)).level == 3
    assert CapacityPlugin(Arguments("capacity", {})).level == 0


def test_flat_queues_ignore_the_level() -> None:
    """Without enableHierarchy there are no ancestors: the level changes nothing."""
    cluster = levels_tree()
    switches = {"enableHierarchy": False}
    ssn = Session(cluster, [[PluginOption("capacity", {"ancestorReclaimLevel": 2}, switches)]])
    plugin = CapacityPlugin(Arguments("capacity", {"ancestorReclaimLevel": 2}))
    plugin.on_session_open(ssn)
    victims = cluster.jobs["ns/victim"].tasks.values()
    reclaimer = next(iter(cluster.jobs["ns/reclaimer"].tasks_in(TaskStatus.PENDING)))
    assert len(plugin.reclaimable(reclaimer, list(victims))) == 1


# ---- the helpers ------------------------------------------------------------------------------


def limits(name: str, *ancestors: str) -> QueueLimits:
    empty = Resources()
    return QueueLimits(
        name, ancestors[-1] if ancestors else "", ancestors, (), empty, empty, empty, empty
    )


def test_depths_count_from_the_parent_and_skip_root() -> None:
    deep = limits("queue-deep", "root", "grand", "parent-deep")
    shallow = limits("queue-shallow", "root", "grand")
    assert [ancestor_at(deep, d) for d in (1, 2, 3, 4)] == ["parent-deep", "grand", None, None]
    # Unbalanced: grand is deep's grandparent and shallow's parent; they share it within 2.
    assert share_ancestor_within(deep, shallow, 2)
    assert not share_ancestor_within(deep, shallow, 1)
    # Only the victim's ancestors apart from the reclaimer's at the same depth are checked.
    assert apart_ancestors(shallow, deep, 2) == ["parent-deep", "grand"]
    assert apart_ancestors(deep, shallow, 2) == ["grand"]
    cousin = limits("c", "root", "grand", "parent-c")
    assert apart_ancestors(deep, cousin, 3) == ["parent-c"]


# ---- properties on random trees ---------------------------------------------------------------


@st.composite
def reclaim_trees(draw: st.DrawFn) -> tuple[ClusterInfo, str, list[TaskInfo]]:
    """A random tree of depth up to 4 under root, every queue with a random deserved cpu (or
    none), leaves holding random 1-cpu pods that fill the nodes, and one pending pod in a
    random leaf: (cluster, the reclaimer's queue, the candidates)."""
    names = ["root"]
    parents: dict[str, str] = {}
    for i in range(draw(st.integers(3, 9))):
        name = f"q{i}"
        parents[name] = draw(st.sampled_from(names))
        names.append(name)
    leaves = [n for n in names[1:] if n not in parents.values()]
    queues = [QueueInfo("root")]
    for name in names[1:]:
        amount = draw(st.one_of(st.none(), st.integers(1, 8)))
        deserved = Resources.from_list({"cpu": str(amount)}) if amount else Resources()
        queues.append(QueueInfo(name, parent=parents[name], deserved=deserved))
    reclaimer_queue = draw(st.sampled_from(leaves))
    jobs, candidates = [], []
    for leaf in leaves:
        held = draw(st.integers(0, 4))
        tasks = [
            make_task(f"j-{leaf}", i, {"cpu": "1"}, status=TaskStatus.RUNNING, node="n0")
            for i in range(held)
        ]
        if leaf == reclaimer_queue:
            tasks.append(make_task(f"j-{leaf}", held, {"cpu": "1"}))
        else:
            candidates.extend(tasks)
        jobs.append(make_job(f"j-{leaf}", tasks, queue=leaf, min_available=0))
    total = sum(len(j.tasks) for j in jobs)
    cluster = make_cluster([make_node("n0", str(total), None)], jobs, queues)
    order = draw(st.permutations(candidates))
    return cluster, reclaimer_queue, list(order)


def opened(cluster: ClusterInfo, level: int) -> CapacityPlugin:
    args = {"ancestorReclaimLevel": level}
    ssn = Session(cluster, [[PluginOption("capacity", args, {"enableHierarchy": True})]])
    plugin = CapacityPlugin(Arguments("capacity", args))
    plugin.on_session_open(ssn)
    return plugin


def reclaimer_of(cluster: ClusterInfo, queue: str) -> TaskInfo:
    return next(iter(cluster.jobs[f"ns/j-{queue}"].tasks_in(TaskStatus.PENDING)))


def victims_at(
    cluster: ClusterInfo, reclaimer_queue: str, candidates: Sequence[TaskInfo], level: int
) -> list[str]:
    plugin = opened(cluster, level)
    reclaimer = reclaimer_of(cluster, reclaimer_queue)
    return [t.name for t in plugin.reclaimable(reclaimer, candidates)]


@settings(max_examples=150, deadline=None)
@given(reclaim_trees(), st.integers(0, 3))
def test_a_higher_level_never_adds_a_victim(
    case: tuple[ClusterInfo, str, list[TaskInfo]], level: int
) -> None:
    """Each candidate alone: reclaimable at level L+1 implies reclaimable at level L (every
    check of L is made at L+1, and more)."""
    cluster, reclaimer_queue, candidates = case
    for candidate in candidates:
        higher = victims_at(cluster, reclaimer_queue, [candidate], level + 1)
        lower = victims_at(cluster, reclaimer_queue, [candidate], level)
        assert set(higher) <= set(lower)


@settings(max_examples=150, deadline=None)
@given(reclaim_trees())
def test_siblings_are_judged_alike_at_every_level(
    case: tuple[ClusterInfo, str, list[TaskInfo]],
) -> None:
    """When the reclaimer's queue may reclaim on its own (it deserves cpu and stays within it),
    victims in its sibling queues are judged the same at levels 0 to 3: the two share every
    ancestor, so no ancestor is checked."""
    cluster, reclaimer_queue, candidates = case
    attr = opened(cluster, 0).attrs[reclaimer_queue]
    request = reclaimer_of(cluster, reclaimer_queue).resreq
    if not within_deserved(attr.allocated, request, attr.limits.deserved):
        return  # it may reclaim only on an ancestor's behalf, which the level decides
    parent = cluster.queues[reclaimer_queue].parent
    siblings = [t for t in candidates if cluster.queues[cluster.jobs[t.job].queue].parent == parent]
    # How many pods each sibling loses: at a level above 0 the candidates are judged in victim
    # order, so which of a queue's equal pods go may differ, not how many.
    outcomes = {
        tuple(
            sorted(
                Counter(
                    v.rsplit("-", 1)[0]
                    for v in victims_at(cluster, reclaimer_queue, siblings, level)
                ).items()
            )
        )
        for level in range(4)
    }
    assert len(outcomes) == 1


# ---- whole sessions settle --------------------------------------------------------------------


@st.composite
def mixed_trees(draw: st.DrawFn) -> tuple[list[QueueInfo], int]:
    """root -> 2 teams that deserve cpu -> 2 projects each, some of which deserve cpu and some
    nothing (best effort), on 2 or 3 nodes of 4 cpu."""
    nodes = draw(st.integers(2, 3))
    total = nodes * 4
    team_a = draw(st.integers(1, total - 1))
    queues = [
        QueueInfo("root"),
        q("team-a", "root", f"cpu={team_a}"),
        q("team-b", "root", f"cpu={total - team_a}"),
    ]
    for project in ("a1", "a2", "b1", "b2"):
        amount = draw(st.one_of(st.none(), st.integers(1, 4)))
        queues.append(q(project, f"team-{project[0]}", f"cpu={amount}" if amount else ""))
    return queues, nodes


def advance(cluster: ClusterInfo) -> None:
    """A moment after a session: evicted pods come back pending, pipelined ones run."""
    for job in cluster.jobs.values():
        for task in list(job.tasks.values()):
            job.remove_task(task)
            if task.status == TaskStatus.RELEASING:
                task.status, task.node_name = TaskStatus.PENDING, ""
            elif task.status in (TaskStatus.PIPELINED, TaskStatus.BINDING, TaskStatus.BOUND):
                task.status = TaskStatus.RUNNING
            task.last_transaction, task.fit_error = None, ""
            job.add_task(task)
        job.fit_errors.clear()
        job.phase = "Running"
    for name, node in list(cluster.nodes.items()):
        cluster.nodes[name] = type(node)(name, node.allocatable, node=node.node)
    for job in cluster.jobs.values():
        for task in job.tasks_in(TaskStatus.RUNNING):
            cluster.nodes[task.node_name].add_task(task)


@settings(max_examples=25, deadline=None)
@given(mixed_trees(), st.permutations(["a1", "a2", "b1", "b2"]), st.integers(1, 2))
def test_reclaim_settles_at_any_level(
    case: tuple[list[QueueInfo], int], arrival: list[str], level: int
) -> None:
    """Greedy jobs arriving one per session in projects that deserve cpu or nothing: at levels
    1 and 2 reclaim stops moving pods within a few sessions (Volcano's level lets two queues of
    one reclaiming ancestor take a pod back and forth: Caldera takes pods for an ancestor only
    from outside its branch)."""
    queues, nodes = case
    cluster = make_cluster([make_node(f"n{i}", "4", None) for i in range(nodes)], [], queues)
    for project in arrival:
        tasks = [make_task(f"j-{project}", i, {"cpu": "1"}) for i in range(4 * nodes)]
        cluster.jobs[f"ns/j-{project}"] = make_job(
            f"j-{project}", tasks, queue=project, min_available=1, phase="Inqueue"
        )
        run_conf(cluster, CONF.format(level=level))
        advance(cluster)
    evictions = []
    for _ in range(8):
        evictions.append(len(run_conf(cluster, CONF.format(level=level)).result.evictions))
        advance(cluster)
    assert evictions[-3:] == [0, 0, 0], evictions


def test_siblings_do_not_take_a_pod_back_and_forth() -> None:
    """parent (deserved 4 of 6 cpu) -> x and y (deserved 1 each; x holds 1 and wants another,
    y holds 2); other (deserved 2) holds 3. parent, at 3, may reclaim for either child. Were
    the pod taken from the sibling (nearer in victim order), y would take it back the next
    session, and x the one after, for ever, while other kept its extra cpu. Taken from other,
    parent reaches its deserved 4 and nothing moves any more."""
    queues = [
        q("root"),
        q("parent", "root", "cpu=4"),
        q("x", "parent", "cpu=1"),
        q("y", "parent", "cpu=1"),
        q("other", "root", "cpu=2"),
    ]

    def holding(name: str, running: int, pending: int) -> JobInfo:
        one = {"cpu": "1"}
        tasks = [
            make_task(name, i, one, status=TaskStatus.RUNNING, node="n0") for i in range(running)
        ]
        tasks += [make_task(name, running + i, one) for i in range(pending)]
        return make_job(name, tasks, queue=name, min_available=1, phase="Running")

    jobs = [holding("x", 1, 1), holding("y", 2, 0), holding("other", 3, 0)]
    cluster = make_cluster([make_node("n0", "6", None)], jobs, queues)
    evicted = []
    for _ in range(4):
        ssn = run_conf(cluster, CONF.format(level=1))
        evicted.append(sorted(cluster.jobs[e.task.job].queue for e in ssn.result.evictions))
        advance(cluster)
    assert evicted == [["other"], [], [], []]
    held = {j.queue: j.count(TaskStatus.RUNNING) for j in cluster.jobs.values()}
    assert held == {"x": 2, "y": 2, "other": 2}
