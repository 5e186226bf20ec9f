"""The dashboard's pure cores: the overview (queue tree, bars, counts, nodes and GPUs), the job
list's filter and order, a job's page, which topics a change touches, and the formats."""

from __future__ import annotations

import datetime as dt
import random
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.core import Container, Event, EventType, NodeStatus, ResourceRequirements
from caldera.api.meta import Condition, ObjectMeta, ObjectReference
from caldera.api.topology import ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec
from caldera.api.volcano import JobPhase, PodGroupCondition, PodGroupStatus
from caldera.api.why import WHY_ANNOTATION
from dashboard import topics
from dashboard.format import age, amount
from dashboard.jobpage import MAX_PODS, build_job_page
from dashboard.jobs import (
    FilterError,
    JobFilter,
    job_rows,
    parse_filter,
    podgroups_by_job,
    wait_reason,
)
from dashboard.nodes import build_nodes
from dashboard.overview import build_overview, names_gpu, pod_request
from dashboard.topology import build_topology, job_hypernode
from unit.dashboard_objects import T0, job, node, pod, podgroup, queue, ts

NOW = T0 + dt.timedelta(hours=1)


# --- overview ------------------------------------------------------------------------------


def test_queues_form_a_tree_children_by_name_under_their_parent() -> None:
    """Children follow their parent one level deeper, by name; a queue whose parent is not
    cached is shown at the top level; a parent cycle does not hide or repeat a queue."""
    queues = [
        queue("root"),
        queue("b", parent="root"),
        queue("a", parent="root"),
        queue("a1", parent="a"),
        queue("lost", parent="gone"),
        queue("x", parent="y"),
        queue("y", parent="x"),
    ]
    rows = build_overview(queues, [], [], []).queues
    assert [(r.name, r.depth) for r in rows] == [
        ("lost", 0),
        ("root", 0),
        ("a", 1),
        ("a1", 2),
        ("b", 1),
        ("x", 0),
        ("y", 1),
    ]


def test_bars_show_allocated_deserved_and_capability_per_resource() -> None:
    """cpu, memory and GPUs first; the meter's scale is the capability, else the larger of
    deserved and allocated; allocated above deserved is flagged."""
    q = queue(
        "q",
        deserved={"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 2},
        capability={"cpu": "8"},
        allocated={"cpu": "6", "memory": "1Gi", "pods": "3", "example.com/fpga": "1"},
    )
    (row,) = build_overview([q], [], [], []).queues
    assert [b.resource for b in row.bars] == ["cpu", "memory", "nvidia.com/gpu", "example.com/fpga"]
    cpu, memory, gpu, _ = row.bars
    assert (cpu.allocated, cpu.deserved, cpu.capability, cpu.scale) == (6000, 4000, 8000, 8000)
    assert cpu.over_deserved
    assert not memory.over_deserved
    assert cpu.text == "6 allocated, 4 deserved, 8 capability"
    assert memory.text == "1Gi allocated, 8Gi deserved"
    assert (gpu.allocated, gpu.scale) == (0, 2000)


def test_a_malformed_quantity_is_left_out_not_a_crash() -> None:
    """A hand-edited quantity the API server let through shows as unset."""
    (row,) = build_overview([queue("q", deserved={"cpu": "lots"})], [], [], []).queues
    assert row.bars == ()


def test_running_and_pending_jobs_are_counted_per_queue() -> None:
    """A job's queue is spec.queue; a queue that jobs name but that is not cached still gets a
    row, marked as not existing."""
    jobs = [
        job("a", queue_name="q", phase="Pending"),
        job("b", queue_name="q", phase="Running"),
        job("c", queue_name="q", phase=""),
        job("d", queue_name="ghost", phase="Running"),
        job("e", queue_name="q", phase="Completed"),
    ]
    model = build_overview([queue("q")], jobs, [], [])
    q, ghost = model.queues
    assert (q.name, q.running, q.pending, q.exists) == ("q", 1, 2, True)
    assert (ghost.name, ghost.running, ghost.exists) == ("ghost", 1, False)
    assert (model.jobs, model.running, model.pending) == (5, 2, 2)


def test_nodes_and_gpus() -> None:
    """Allocatable sums over nodes; GPUs requested count bound pods that have not finished."""
    j = job("j")
    pods = [
        pod(j, 0, phase="Running", node="n0", gpus=2),
        pod(j, 1, phase="Pending", node="", gpus=4),  # not bound: not using any
        pod(j, 2, phase="Succeeded", node="n1", gpus=1),  # done: gave its GPU back
    ]
    nodes = [node("n0"), node("n1", ready=False), node("n2", unschedulable=True)]
    summary = build_overview([], [], nodes, pods).nodes
    assert (summary.count, summary.ready, summary.unschedulable) == (3, 2, 1)
    assert (summary.gpus, summary.gpus_requested) == (12, 2)
    assert dict(summary.allocatable) == {"cpu": "48", "memory": "192Gi", "nvidia.com/gpu": "12"}


def test_gpus_requested_count_what_the_kubelet_reserves() -> None:
    """A sidecar's GPU (an init container that keeps running) is held as long as the pod runs,
    so the overview counts it, as the nodes page does."""
    j = job("j")
    main = pod(j, 0, phase="Running", node="n0", gpus=1)
    sidecar = Container(
        name="side",
        restart_policy="Always",
        resources=ResourceRequirements(requests={"nvidia.com/gpu": "2"}),
    )
    with_sidecar = msgspec.structs.replace(
        main, spec=msgspec.structs.replace(main.spec, init_containers=(sidecar,))
    )
    summary = build_overview([], [], [node("n0")], [with_sidecar]).nodes
    assert summary.gpus_requested == 3


_AMOUNTS = st.dictionaries(st.sampled_from(["cpu", "nvidia.com/gpu"]), st.sampled_from(["1", "2"]))
_CONTAINERS = st.builds(
    lambda requests, limits, always: Container(
        name="c",
        restart_policy="Always" if always else "",
        resources=ResourceRequirements(requests=requests, limits=limits),
    ),
    _AMOUNTS,
    _AMOUNTS,
    st.booleans(),
)


@given(
    containers=st.lists(_CONTAINERS, min_size=1, max_size=3),
    init=st.lists(_CONTAINERS, max_size=2),
    overhead=_AMOUNTS,
)
def test_a_pod_skipped_as_naming_no_gpu_requests_none(
    containers: list[Container], init: list[Container], overhead: dict[str, str]
) -> None:
    """The overview adds up only the pods `names_gpu` picks: it must never skip one whose
    reserved amounts include a GPU."""
    base = pod(job("j"), 0, phase="Running", node="n0")
    spec = msgspec.structs.replace(
        base.spec, containers=tuple(containers), init_containers=tuple(init), overhead=overhead
    )
    p = msgspec.structs.replace(base, spec=spec)
    if pod_request(p).get("nvidia.com/gpu", 0) > 0:
        assert names_gpu(p)


# --- the job list --------------------------------------------------------------------------


def test_filter_accepts_names_and_any_case_of_a_phase() -> None:
    flt = parse_filter({"namespace": "team-a", "queue": "q1", "phase": "running", "x": "y"})
    assert flt == JobFilter(namespace="team-a", queue="q1", phase="Running")
    assert parse_filter({}) == JobFilter()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"phase": "Sleeping"}, "phase 'Sleeping' is not a job phase: one of Pending, Aborting,"),
        ({"namespace": "Team_A"}, "namespace 'Team_A' is not a valid name"),
        ({"queue": "a" * 300}, "is not a valid name"),
    ],
)
def test_a_bad_filter_says_what_is_allowed(params: dict[str, str], message: str) -> None:
    with pytest.raises(FilterError, match=re.escape(message)):
        parse_filter(params)


@given(
    st.dictionaries(st.sampled_from(["namespace", "queue", "phase", "label", "other"]), st.text())
)
def test_any_query_gives_a_filter_or_a_filter_error(params: dict[str, str]) -> None:
    """Whatever a URL carries, the answer is a filter or a clear FilterError, never a crash."""
    error, flt = "", JobFilter()
    try:
        flt = parse_filter(params)
    except FilterError as exc:
        error = str(exc)
    if error:
        assert len(error) < 400  # a bad value is cut, not echoed whole
    else:
        assert flt.phase in ("", *JobPhase)


def test_label_filter_takes_equality_terms_and_says_what_is_wrong() -> None:
    flt = parse_filter({"label": "team=a, example.com/gpu , tier==gold,empty="})
    assert flt.labels == (("team", "a"), ("example.com/gpu", None), ("tier", "gold"), ("empty", ""))
    assert flt.label == "team=a,example.com/gpu,tier=gold,empty="
    labelled = job("a")
    labelled = msgspec.structs.replace(
        labelled,
        metadata=msgspec.structs.replace(
            labelled.metadata,
            labels={"team": "a", "example.com/gpu": "1", "tier": "gold", "empty": ""},
        ),
    )
    assert flt.matches(labelled)
    assert not flt.matches(job("b"))
    assert not parse_filter({"label": "team=b"}).matches(labelled)
    for text, message in [
        ("team=a b", "'a b' is not a label value"),
        ("-team=a", "'-team' is not a label key"),
        ("Bad_Prefix/x=1", "is not a label key"),
        (",".join(f"k{i}=v" for i in range(9)), "at most 8 terms"),
        ("k=" + "v" * 3000, "longer than 2000 characters"),
    ]:
        with pytest.raises(FilterError, match=re.escape(message)):
            parse_filter({"label": text})


def test_filter_matches_namespace_queue_and_phase() -> None:
    jobs = [
        job("a", namespace="n1", queue_name="q1", phase="Running"),
        job("b", namespace="n1", queue_name="q2", phase="Pending"),
        job("c", namespace="n2", queue_name="q1", phase=""),
    ]
    rows = job_rows(jobs, {}, {}, NOW, JobFilter(queue="q1", phase="Pending"))
    assert [r.name for r in rows] == ["c"]
    rows = job_rows(jobs, {}, {}, NOW, JobFilter(namespace="n1"))
    assert [r.name for r in rows] == ["b", "a"]


def test_pending_jobs_first_by_priority_then_age() -> None:
    """Pending before running before finished; among pending, the higher PriorityClass first,
    then the older job; the PodGroup's class wins over the job's."""
    jobs = [
        job("done", phase="Completed", created=0),
        job("run", phase="Running", created=1),
        job("old-low", created=2),
        job("new-high", created=9, priority_class="high"),
        job("new-low", created=5),
    ]
    pgs = podgroups_by_job([podgroup(j) for j in jobs])
    rows = job_rows(jobs, pgs, {"high": 1000}, NOW)
    assert [r.name for r in rows] == ["new-high", "old-low", "new-low", "run", "done"]
    assert (rows[0].priority, rows[0].waiting, rows[0].since_age) == (1000, True, "59m")


phases = st.sampled_from(["", "Pending", "Running", "Completed", "Failed", "Restarting"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(phases, st.integers(0, 100), st.sampled_from(["", "high", "low", "none"])),
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)
def test_order_is_total_and_independent_of_the_cache_order(
    specs: list[tuple[str, int, str]], rng: random.Random
) -> None:
    """Every matching job appears once; pending ones first with priorities not increasing; and
    the same jobs in any cache order give the same list (a stable page)."""
    jobs = [
        job(f"j{i}", phase=phase, created=created, priority_class=pc)
        for i, (phase, created, pc) in enumerate(specs)
    ]
    priorities = {"high": 100, "low": -5}
    rows = job_rows(jobs, {}, priorities, NOW)
    assert sorted(r.name for r in rows) == sorted(j.metadata.name for j in jobs)
    waiting = [r.waiting for r in rows]
    assert waiting == sorted(waiting, reverse=True)
    pending = [r.priority for r in rows if r.waiting]
    assert pending == sorted(pending, reverse=True)
    shuffled = list(jobs)
    rng.shuffle(shuffled)
    assert job_rows(shuffled, {}, priorities, NOW) == rows


def test_why_a_job_waits() -> None:
    """The scheduler's record first; else the PodGroup's Unschedulable condition; else what
    stage the job is at; nothing for a job that does not wait."""
    j = job("j")
    assert wait_reason(j, podgroup(j, why="queue q is full")) == "queue q is full"
    assert wait_reason(j, None).startswith("no PodGroup yet")
    placed = podgroup(j, why="placed", stage="none")
    assert wait_reason(j, placed) == "waiting for the scheduler to admit its PodGroup"
    unschedulable = podgroup(j).__replace__(
        status=PodGroupStatus(
            phase="Inqueue",
            conditions=(
                PodGroupCondition(type="Unschedulable", status="True", message="0/4 nodes fit"),
            ),
        )
    )
    assert wait_reason(j, unschedulable) == "0/4 nodes fit"
    assert wait_reason(job("r", phase="Running"), podgroup(j, why="x")) == ""


# --- a job's page --------------------------------------------------------------------------


def _event(
    reason: str, at: float, message: str, *, kind: str = "Job", warning: bool = False
) -> Event:
    return Event(
        metadata=ObjectMeta(name=f"e-{reason}", namespace="team-a"),
        involved_object=ObjectReference(kind=kind, name="j"),
        reason=reason,
        message=message,
        type=EventType.WARNING if warning else EventType.NORMAL,
        count=2,
        last_timestamp=ts(at),
    )


def test_job_page_timeline_merges_phases_podgroup_and_events_in_time_order() -> None:
    j = job("j", phase="Running", created=0, conditions=(("Pending", 1), ("Running", 30)))
    pg = podgroup(j, phase="Running").__replace__(
        status=PodGroupStatus(
            phase="Running",
            conditions=(
                PodGroupCondition(type="Scheduled", status="True", last_transition_time=ts(20)),
            ),
        )
    )
    events = [
        _event("Scheduled", 25, "bound to n0", kind="Pod"),
        _event("FailedScheduling", 10, "0/4 nodes", kind="Pod", warning=True),
    ]
    page = build_job_page(j, pg, [pod(j, 0, phase="Running", node="n0")], events, NOW)
    assert [e.what for e in page.timeline] == [
        "created",
        "job Pending",
        "FailedScheduling (Pod/j)",
        "PodGroup Scheduled=True",
        "Scheduled (Pod/j)",
        "job Running",
    ]
    assert [e.warning for e in page.timeline] == [False, False, True, False, False, False]
    assert page.events is not None
    assert [e.reason for e in page.events] == ["FailedScheduling", "Scheduled"]
    assert page.pods[0].node == "n0"
    assert page.podgroup is not None
    assert page.waiting_for == ""


def test_job_page_without_events_or_podgroup_and_with_a_bad_record() -> None:
    """Events None (not readable) stays None; a hand-edited record is ignored, not a crash."""
    j = job("j")
    bad = podgroup(j)
    bad = bad.__replace__(
        metadata=bad.metadata.__replace__(annotations={WHY_ANNOTATION: "{not json"})
    )
    page = build_job_page(j, bad, [], None, NOW)
    assert page.events is None
    assert page.why is None
    assert build_job_page(j, None, [], [], NOW).podgroup is None


def test_a_record_from_before_admission_is_marked_stale_once_admitted() -> None:
    j = job("j")
    pending = build_job_page(j, podgroup(j, why="queue full"), [], [], NOW).why
    admitted = build_job_page(j, podgroup(j, phase="Inqueue", why="queue full"), [], [], NOW).why
    placing = podgroup(j, phase="Inqueue", why="0/4 nodes fit", stage="allocate")
    assert pending is not None
    assert not pending.stale
    assert admitted is not None
    assert admitted.stale
    allocating = build_job_page(j, placing, [], [], NOW).why
    assert allocating is not None
    assert not allocating.stale


def test_job_page_shows_a_bounded_number_of_pods() -> None:
    j = job("big", replicas=MAX_PODS + 7)
    page = build_job_page(j, None, [pod(j, i) for i in range(MAX_PODS + 7)], [], NOW)
    assert (len(page.pods), page.pods_hidden) == (MAX_PODS, 7)


# --- topics ----------------------------------------------------------------------------------


def test_topics_of_each_kind() -> None:
    j = job("j", namespace="n", queue_name="q")
    assert topics.job_topics(j) == {"overview", "jobs", "queue:q", "job:n/j"}
    assert topics.podgroup_topics(podgroup(j)) == {"jobs", "queue:q", "job:n/j"}
    assert topics.pod_topics(pod(j, 0)) == {"job:n/j"}
    assert topics.pod_topics(pod(j, 0, node="n0")) == {"job:n/j", "nodes"}
    assert topics.pod_topics(pod(j, 0, node="n0", gpus=1)) == {"job:n/j", "nodes", "overview"}
    assert topics.queue_topics(queue("q")) == {"overview", "queue:q"}


def test_a_node_heartbeat_touches_no_page() -> None:
    """Only what the overview shows counts: allocatable, cordon, condition statuses."""
    n = node("n")
    beat = n.__replace__(
        status=n.status.__replace__(
            conditions=(Condition(type="Ready", status="True", last_transition_time=ts(99)),)
        )
    )
    assert topics.node_topics(n, beat) == set()
    smaller = n.__replace__(status=NodeStatus(allocatable={"cpu": "1"}))
    assert topics.node_topics(n, smaller) == {"overview", "nodes"}
    assert topics.node_topics(None, n) == {"overview", "nodes", "topology"}
    relabelled = n.__replace__(metadata=n.metadata.__replace__(labels={"rack": "r1"}))
    assert topics.node_topics(n, relabelled) == {"topology"}


@pytest.mark.parametrize(
    ("topic", "valid"),
    [
        ("overview", True),
        ("jobs", True),
        ("nodes", True),
        ("topology", True),
        ("queue:q-1", True),
        ("job:team-a/train.v2", True),
        ("job:team-a", False),
        ("queue:", False),
        ("queue:Q", False),
        ("job:a/b/c", False),
        ("everything", False),
        ("overview\n", False),
    ],
)
def test_valid_topics(topic: str, valid: bool) -> None:
    assert topics.valid_topic(topic) is valid


# --- formats ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-5, "0s"), (0, "0s"), (119, "119s"), (150, "2m30s"), (600, "10m"), (3 * 3600, "3h"),
     (50 * 3600, "2d2h")],
)  # fmt: skip
def test_age(seconds: int, text: str) -> None:
    assert age(ts(0), T0 + dt.timedelta(seconds=seconds)) == text


def test_age_of_nothing_or_garbage_is_blank() -> None:
    assert age(None, T0) == ""
    assert age("yesterday", T0) == ""


@pytest.mark.parametrize(
    ("milli", "resource", "text"),
    [(1500, "cpu", "1.5"), (4000, "nvidia.com/gpu", "4"), (250, "cpu", "0.25"),
     (64 * 1024**3 * 1000, "memory", "64Gi"), (1536 * 1024**2 * 1000, "memory", "1.5Gi")],
)  # fmt: skip
def test_amount(milli: int, resource: str, text: str) -> None:
    assert amount(milli, resource) == text


# --- the nodes page ------------------------------------------------------------------------


def test_nodes_sum_what_bound_unfinished_pods_request_and_who_holds_the_gpus() -> None:
    a, b = job("a"), job("b", namespace="team-b")
    pods = [
        pod(a, 0, phase="Running", node="n0", gpus=2),
        pod(a, 1, phase="Pending", node="n0", gpus=1),  # bound, not started: it holds them
        pod(b, 0, phase="Running", node="n0"),
        pod(b, 1, phase="Succeeded", node="n0", gpus=4),  # finished: holds nothing
        pod(b, 2, phase="Pending"),  # not bound
    ]
    with_init = pods[2]
    init = Container(name="init", resources=ResourceRequirements(requests={"cpu": "3"}))
    pods[2] = msgspec.structs.replace(
        with_init, spec=msgspec.structs.replace(with_init.spec, init_containers=(init,))
    )
    page = build_nodes([node("n1", gpus=0), node("n0", gpus=4)], pods)
    n0, n1 = page.rows
    assert (n0.name, n1.name) == ("n0", "n1")
    assert n0.pods == 3
    usage = {u.resource: u for u in n0.usage}
    assert usage["cpu"].requested == 1000 + 1000 + 3000  # the init container's 3 beat its 1
    assert usage["cpu"].text == "5 of 16"
    assert usage["nvidia.com/gpu"].text == "3 of 4"
    assert (n0.gpus, n0.gpus_used) == (4, 3)
    assert [(p.name, p.job, p.gpus) for p in n0.gpu_pods] == [
        ("a-worker-0", "a", 2),
        ("a-worker-1", "a", 1),
    ]
    assert (n1.gpus, n1.gpus_used, n1.pods, n1.gpu_pods) == (0, 0, 0, ())
    assert (page.gpus, page.gpus_used, page.partial) == (4, 3, False)


def test_a_node_over_its_allocatable_is_marked_and_bad_quantities_do_not_break_it() -> None:
    a = job("a")
    busy = [pod(a, i, phase="Running", node="n0", gpus=1) for i in range(6)]
    bad = msgspec.structs.replace(
        node("n0", gpus=4),
        status=msgspec.structs.replace(
            node("n0").status, allocatable={"cpu": "lots", "nvidia.com/gpu": "4"}
        ),
    )
    (row,) = build_nodes([bad], busy).rows
    usage = {u.resource: u for u in row.usage}
    assert usage["nvidia.com/gpu"].over
    assert usage["cpu"].text == "6 of 0"  # the unreadable allocatable counts as none


# --- the topology page ---------------------------------------------------------------------


def _hypernode(name: str, tier: int, members: list[tuple[str, str]]) -> HyperNode:
    return HyperNode(
        metadata=ObjectMeta(name=name),
        spec=HyperNodeSpec(
            tier=tier,
            tier_name="rack" if tier == 1 else "spine",
            members=tuple(
                MemberSpec(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=m)))
                for kind, m in members
            ),
        ),
    )


def test_topology_is_a_tree_with_members_nodes_and_gpus() -> None:
    nodes = [node("n0", gpus=8), node("n1", gpus=8), node("n2", gpus=0), node("lost")]
    hypernodes = [
        _hypernode("rack-b", 1, [("Node", "n2")]),
        _hypernode("rack-a", 1, [("Node", "n0"), ("Node", "n1")]),
        _hypernode("spine", 2, [("HyperNode", "rack-a"), ("HyperNode", "rack-b")]),
        _hypernode("loop-1", 1, [("HyperNode", "loop-2")]),
        _hypernode("loop-2", 1, [("HyperNode", "loop-1")]),
    ]
    page = build_topology(hypernodes, nodes)
    shown = [(r.name, r.depth, r.nodes, r.gpus) for r in page.rows]
    assert shown[:3] == [("spine", 0, 3, 16), ("rack-a", 1, 2, 16), ("rack-b", 1, 1, 0)]
    assert {r.name for r in page.rows} == {h.metadata.name for h in hypernodes}  # the cycle too
    assert page.rows[1].members == ("n0", "n1")
    assert page.rows[0].children == ("rack-a", "rack-b")
    assert page.unplaced == 1  # "lost"
    assert page.tiers == (1, 2)
    assert any("cycle" in p for p in page.problems)
    assert build_topology([], nodes).rows == ()


def test_a_jobs_hypernode_is_the_lowest_holding_all_its_bound_pods() -> None:
    nodes = [node("n0"), node("n1"), node("n2")]
    hypernodes = [
        _hypernode("rack-a", 1, [("Node", "n0"), ("Node", "n1")]),
        _hypernode("rack-b", 1, [("Node", "n2")]),
        _hypernode("spine", 2, [("HyperNode", "rack-a"), ("HyperNode", "rack-b")]),
    ]
    assert job_hypernode(hypernodes, nodes, ["n0", "n1", ""]) == "rack-a"
    assert job_hypernode(hypernodes, nodes, ["n0", "n2"]) == "spine"
    assert job_hypernode(hypernodes, nodes, ["", ""]) is None  # not bound yet
    assert job_hypernode(hypernodes, nodes, ["elsewhere"]) is None
    assert job_hypernode([], nodes, ["n0"]) is None
