"""Queue admission gates (Volcano v1.15 SchedulingGatesQueueAdmission) in the scheduler's pure
core: a pod held only by the queue admission gate is ungated when its queue takes it and never
placed while gated; capacity holds room for the pods it let through until they are placed, so
others of the queue do not overtake them; other scheduling gates hold a pod untouched."""

from __future__ import annotations

import msgspec

from caldera.api.core import PodSchedulingGate
from caldera.api.resources import Resources
from caldera.api.volcano import QUEUE_ALLOCATION_GATE
from caldera.api.why import WaitStage
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskInfo
from scheduler.conf import parse_conf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.registry import REGISTRY
from unit.sched_fixtures import cpu, make_cluster, make_job, make_node, make_task

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: capacity
  - name: nodeorder
"""

OTHER_GATE = "example.com/wait"


def gated(
    task: TaskInfo, *, opted_in: bool = True, gates: tuple[str, ...] = (QUEUE_ALLOCATION_GATE,)
) -> TaskInfo:
    """``task`` with its pod opted in (the annotation) and held by ``gates``."""
    assert task.pod is not None
    meta = task.pod.metadata
    annotations = {QUEUE_ALLOCATION_GATE: "true"} if opted_in else {}
    spec = msgspec.structs.replace(
        task.pod.spec, scheduling_gates=tuple(PodSchedulingGate(name=g) for g in gates)
    )
    task.pod = msgspec.structs.replace(
        task.pod,
        metadata=msgspec.structs.replace(meta, annotations={**meta.annotations, **annotations}),
        spec=spec,
    )
    return task


def job_of(name: str, tasks: list[TaskInfo], *, created: int = 0, minimum: int = 1) -> JobInfo:
    return make_job(name, tasks, queue="q", min_available=minimum, created=created)


def cluster(jobs: list[JobInfo], *, node_cpu: str = "8", capability: str = "2") -> ClusterInfo:
    queue = QueueInfo("q", capability=cpu(capability), deserved=cpu(capability))
    return make_cluster([make_node("n0", node_cpu)], jobs, [queue, QueueInfo("root")])


def session(snapshot: ClusterInfo, *, feature: bool = True) -> Session:
    conf = parse_conf(CONF, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    ssn = Session(snapshot, conf.tiers)
    ssn.queue_admission_gates = feature
    run_session(ssn, conf, REGISTRY)
    return ssn


def ungated(ssn: Session) -> list[str]:
    return sorted(t.name for t in ssn.result.ungate)


def bound(ssn: Session) -> list[str]:
    return sorted(b.task.name for b in ssn.result.binds)


def test_the_queue_ungates_what_it_can_take_and_places_nothing_gated() -> None:
    """Three gated 1-cpu pods in a queue of capability 2: two are ungated (the room held for
    the first counts against the second and third), none bound this session; the job's wait
    record names the queue."""
    ssn = session(
        cluster([job_of("a", [gated(make_task("a", i, {"cpu": "1"})) for i in range(3)])])
    )
    assert ungated(ssn) == ["a-0", "a-1"]
    assert bound(ssn) == []
    record = ssn.result.podgroup_why["ns/a"]
    assert (record.stage, record.summary) == (
        WaitStage.ALLOCATE,
        "queue admission gate: queue q at capability",
    )


def test_ungated_pods_are_placed_and_the_rest_stay_gated() -> None:
    """The next session: the two ungated pods hold the queue's room and are placed; the third
    keeps its gate."""
    tasks = [make_task("a", 0, {"cpu": "1"}), make_task("a", 1, {"cpu": "1"})]
    for task in tasks:
        gated(task, gates=())  # opted in, gate already removed
    tasks.append(gated(make_task("a", 2, {"cpu": "1"})))
    ssn = session(cluster([job_of("a", tasks)]))
    assert bound(ssn) == ["a-0", "a-1"]
    assert ungated(ssn) == []


def test_feature_off_keeps_every_gate() -> None:
    """Without SchedulingGatesQueueAdmission no gate is removed; gated pods are still never
    placed, and a pod without a gate is."""
    tasks = [gated(make_task("a", 0, {"cpu": "1"})), make_task("a", 1, {"cpu": "1"})]
    ssn = session(cluster([job_of("a", tasks)]), feature=False)
    assert ungated(ssn) == []
    assert bound(ssn) == ["a-1"]


def test_another_gate_holds_the_pod_untouched() -> None:
    """A pod with another controller's gate too is neither ungated nor placed; one with only
    another gate is not placed (Kubernetes would refuse the bind)."""
    both = gated(make_task("a", 0, {"cpu": "1"}), gates=(QUEUE_ALLOCATION_GATE, OTHER_GATE))
    other = gated(make_task("a", 1, {"cpu": "1"}), gates=(OTHER_GATE,))
    ssn = session(cluster([job_of("a", [both, other])]))
    assert ungated(ssn) == []
    assert bound(ssn) == []


def test_a_gate_without_the_annotation_stays() -> None:
    """The gate alone (the pod did not opt in): the queue takes the pod, but the scheduler
    removes no gate it was not asked to manage (Volcano's)."""
    task = gated(make_task("a", 0, {"cpu": "1"}), opted_in=False)
    ssn = session(cluster([job_of("a", [task])]))
    assert ungated(ssn) == []
    assert bound(ssn) == []


def waiting_for_a_node(job: str, count: int) -> list[TaskInfo]:
    """Ungated, opted-in pods that fit no node (their node selector names none yet)."""
    tasks = [make_task(job, i, {"cpu": "1"}, node_selector={"pool": "new"}) for i in range(count)]
    return [gated(t, gates=()) for t in tasks]


def test_ungated_pods_hold_their_room_against_later_pods() -> None:
    """Two ungated pods wait for a node an autoscaler adds; with the feature on, a later pod
    of the queue may not take their room (Volcano's reserved cache); with it off, it may."""
    waiting = job_of("a", waiting_for_a_node("a", 2))
    later = job_of("b", [make_task("b", 0, {"cpu": "1"})], created=1)
    assert bound(session(cluster([waiting, later]))) == []
    waiting = job_of("a", waiting_for_a_node("a", 2))
    later = job_of("b", [make_task("b", 0, {"cpu": "1"})], created=1)
    assert bound(session(cluster([waiting, later]), feature=False)) == ["b-0"]


def test_an_undone_placement_holds_its_room_again() -> None:
    """A gang of two ungated pods, one of which fits no node: its first pod is placed, the
    second finds no node, the placement is undone, and both pods hold their room again, so a
    later pod of the queue (capability 2) is refused."""
    first = gated(make_task("a", 0, {"cpu": "1"}), gates=())
    second = waiting_for_a_node("a", 2)[1]
    later = job_of("b", [make_task("b", 0, {"cpu": "1"})], created=1)
    ssn = session(cluster([job_of("a", [first, second], minimum=2), later]))
    assert bound(ssn) == []
    assert ssn.jobs["ns/a"].fit_errors  # the second pod was tried, and found no node


def test_best_effort_gated_pods_are_ungated_by_backfill() -> None:
    """A pod that requests nothing needs no room in its queue: backfill removes its gate."""
    task = make_task("a", 0, {})
    task = gated(task)
    ssn = session(cluster([job_of("a", [task])]))
    assert ungated(ssn) == ["a-0"]
    assert bound(ssn) == []
    assert task.resreq == Resources()


def test_ungated_pods_beyond_the_capability_do_not_hold_each_other_out() -> None:
    """Three opted-in pods that never had the gate (created while the webhook did not give
    it) in a queue of capability 2: the oldest two hold the room and are placed; the third is
    not held for, so the queue is not stuck (Volcano would hold all three, and place none)."""
    tasks = [gated(make_task("a", i, {"cpu": "1"}), gates=()) for i in range(3)]
    ssn = session(cluster([job_of("a", tasks)]))
    assert bound(ssn) == ["a-0", "a-1"]
