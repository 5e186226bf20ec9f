"""reservation: a gang that has waited too long reserves the nodes where it would start
soonest, and smaller jobs may use them only where they do not delay it (backfill). A Caldera
addition: Volcano has no reservation (its ``sla`` plugin only raises a waiting job's order).
docs/reservations.md is the user's guide.

Off unless configured, in the first tier (its enqueue permit must come before the enqueue
gates' refusals, as sla's does):

```yaml
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: reservation, arguments: {wait: 15m, hold-limit: 2h}}]
```

The optional ``reservation-preempt`` action (``scheduler.actions.reservation_preempt``) ends a
long reservation's wait by reclaiming on its nodes.

Arguments (durations are Go durations such as ``90s`` or ``1h30m``):

- ``wait``: how long a gang waits before it may reserve, unless its PodGroup or its Queue
  says otherwise (annotation ``scheduling.caldera.dev/reserve-after``, job first); none by
  default: without it only gangs with an annotation or an sla waiting time reserve;
- ``sla-waiting-time`` (true): a PodGroup's sla waiting time
  (``volcano.sh/sla-waiting-time``, as the sla plugin reads it) counts as its threshold when
  it has no reserve-after annotation;
- ``min-wait`` (``1m``): no threshold is shorter (an annotation is the tenant's to write);
- ``hold-limit`` (``6h``): a reservation lets go this long after it was made, started or not
  (set it above the longest runtime of the cluster's jobs: the reserved nodes may take that
  long to drain);
- ``cooldown`` (``10m``): after that, how long before the gang may reserve again;
- ``max-reservations`` (4, at most 64): reservations held at once, one per queue at most;
- ``backfill-margin`` (``30s``): a pod whose known end comes this long before a reservation's
  expected start may use the held room;
- ``trust-declared-runtime`` (false): whether a job's declared runtime (annotation
  ``scheduling.caldera.dev/expected-runtime``) counts as known for backfill; without it only
  a pod's ``activeDeadlineSeconds`` (which the kubelet enforces) does. Declared runtimes
  always inform the expected start;
- ``min-remaining`` (``1m``): no running pod is expected to end sooner than this;
- ``node-weight`` (1000): the node score a reserved gang's pod gets on its reserved nodes;
- ``enqueue`` (true): a gang holding a reservation is admitted past the enqueue gates
  (a permit vote, as sla's), so that allocate tries it, once its expected start is at most
  ``admit-before`` (``1m``) away: admitted earlier, its whole minResources would count against
  the gates (overcommit's inqueue) and keep out the small jobs that could backfill.

Each session, at the first question the session asks the plugin (``ensure``: every plugin
has opened, so the job order is whole, and no pod has been placed yet):

1. the reservations are read from the plugin's memory on the live snapshot, or, for a job
   it has not seen (a restarted scheduler), from the PodGroup annotation
   ``scheduling.caldera.dev/reservation`` (``caldera.api.reservation``), held to what the
   plugin could have written (``read_back``: tenants can write it); one past its hold limit
   expires (an Event; the gang may reserve again after the cooldown);
2. in each queue, the first waiting gang in job order reserves when it has waited past its
   threshold and holds no reservation, up to ``max-reservations``;
3. each reservation is planned (``scheduler.plugins.reservation_plan``): on its nodes when
   the gang still packs there, else on the nodes where it would start soonest, among those
   that pass the gang's predicates and no other reservation holds. A running pod's expected
   end comes from its activeDeadlineSeconds, its job's declared runtime, the runtime learnt
   from finished pods of its queue and request (``learn_runtimes``, kept in the memory), or,
   unknown, as long again as it has run.

Then a predicate holds the planned room: on a reserved node, a pod of another job passes only
when ``admits`` does (its known end comes before the expected start, or it fits in what is
idle beyond the hold), unless its job's priority is higher than the gang's (a reservation is
just another preemptable claim: it never holds room from a higher-priority job). The gang's
own pods score ``node-weight`` more on its nodes. At the session's close a gang that is now
ready lets its reservation go; the others note why they wait ("reserved 2 nodes (n1, n2); 8
of 16 nvidia.com/gpu held; expected start in 12 min") and the record is written when it
changed. Node verdicts stay reusable across sessions: a pod's node class is the holds it is
subject to (``Speedups.node_class``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

import msgspec

from caldera.api.duration import DurationError, parse_duration
from caldera.api.meta import format_time, parse_time
from caldera.api.quantity import format_milli
from caldera.api.reservation import (
    EXPECTED_RUNTIME_ANNOTATION,
    MAX_NODES,
    RESERVATION_ANNOTATION,
    RESERVE_AFTER_ANNOTATION,
    ReservationRecord,
    decode_reservation,
    encode_reservation,
)
from caldera.api.resources import Resources
from scheduler.api.types import (
    ALLOCATED_STATUSES,
    PENDING_PHASES,
    JobInfo,
    NodeInfo,
    TaskInfo,
    TaskStatus,
)
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import ReservationFigure, Session
from scheduler.plugins.reservation_plan import (
    NodeRoom,
    Plan,
    Release,
    Runtimes,
    admits,
    backfills,
    earliest_plan,
    estimated_end,
    expected_end,
)
from scheduler.plugins.sla import job_waiting_time
from scheduler.why import DETAIL, amount

_WAITING_PHASES = PENDING_PHASES | {"Inqueue"}
HELD_REASON = "node(s) held for a waiting gang's reservation"
MAX_RESERVATIONS = 64
# Resources a why line is not told in when the gang asks for another (a GPU tells more).
_PLAIN = ("cpu", "memory", "pods", "ephemeral-storage")


def _duration(args: Arguments, key: str, default: str | None) -> float | None:
    """A Go duration argument in seconds (None: absent without a default); an error naming
    the plugin and key."""
    if key not in args.raw and default is None:
        return None
    text = args.string(key, default or "")
    try:
        seconds = parse_duration(text)
    except DurationError as exc:
        raise ValueError(f"plugin reservation: argument {key}: {exc}") from None
    if seconds < 0:
        raise ValueError(f"plugin reservation: argument {key} must not be negative, got {text!r}")
    return seconds


def _annotation_seconds(annotations: dict[str, str], key: str) -> float | None:
    """A positive Go duration annotation in seconds; None when absent or unusable."""
    text = annotations.get(key)
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except DurationError:
        return None
    return seconds if seconds > 0 else None


def _annotations(job: JobInfo) -> dict[str, str]:
    return job.podgroup.metadata.annotations if job.podgroup is not None else {}


def _started(task: TaskInfo) -> dt.datetime | None:
    """When the pod started (its status' startTime), if it says."""
    if task.pod is None or not task.pod.status.start_time:
        return None
    try:
        return parse_time(task.pod.status.start_time)
    except ValueError:
        return None


def _finished(task: TaskInfo) -> dt.datetime | None:
    """When the pod's last container finished, if every container says."""
    if task.pod is None or not task.pod.status.container_statuses:
        return None
    ends = []
    for status in task.pod.status.container_statuses:
        terminated = status.state.terminated
        if terminated is None or not terminated.finished_at:
            return None
        try:
            ends.append(parse_time(terminated.finished_at))
        except ValueError:
            return None
    return max(ends)


def _uid(job: JobInfo) -> str:
    return job.podgroup.metadata.uid if job.podgroup is not None else ""


def waiting(job: JobInfo) -> bool:
    """A gang that is not ready and has pods waiting for room, or whose pods are not all made
    yet (a Volcano Job's pods are made only once its PodGroup is Inqueue)."""
    if job.ready_task_num() >= job.min_available:
        return False
    pending = job.by_status.get(TaskStatus.PENDING)
    if pending is not None and any(not t.best_effort for t in pending.values()):
        return True
    return job.phase in _WAITING_PHASES and not job.min_resources.is_empty()


def gang_tasks(job: JobInfo) -> tuple[list[Resources], list[TaskInfo]]:
    """What the pods the gang needs placed to be ready request (as many as it lacks, its
    pending pods in name order), and those pods. Pods not made yet (a gang not admitted) are
    taken as pods of an equal share of its minResources over minMember."""
    pending = sorted(
        (t for t in job.tasks_in(TaskStatus.PENDING) if not t.best_effort), key=lambda t: t.key
    )
    lacking = max(job.min_available - job.ready_task_num(), 1)
    tasks = pending[:lacking]
    requests = [t.init_resreq.max(t.resreq) for t in tasks]
    if len(tasks) < lacking and not job.min_resources.is_empty():
        members = max(job.min_available, 1)
        share = Resources({n: a // members for n, a in job.min_resources.items() if a > 0})
        requests += [share] * (lacking - len(tasks))
    return requests, tasks


def duration_text(seconds: float) -> str:
    """``under 1 min``, ``12 min``, ``2 h 5 min``."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return "under 1 min"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def why_text(plan: Plan, held: Resources, count_in: str) -> str:
    """``reserved 2 nodes (n1, n2); 8 of 16 nvidia.com/gpu held; expected start in 12 min``."""
    nodes = plan.nodes
    listed = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
    need = plan.total()
    have = format_milli(held.get(count_in), count_in)
    of = f"{have} of {amount(count_in, need.get(count_in))} held"
    when = "now" if plan.start <= 0 else f"in {duration_text(plan.start)}"
    basis = "" if plan.known else " (estimated: some runtimes unknown)"
    return (
        f"reservation: reserved {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({listed}); "
        f"{of}; expected start {when}{basis}"
    )


def count_resource(request: Resources) -> str:
    """The resource a why line counts in: the first the gang asks for beyond the plain ones,
    else cpu."""
    extra = [n for n, a in sorted(request.items()) if a > 0 and n not in _PLAIN]
    return extra[0] if extra else "cpu"


@dataclass
class Held:
    """One reservation in this session: its record, its plan, and its gang."""

    job: JobInfo
    record: ReservationRecord
    plan: Plan
    new: bool = False
    # (node, held) pairs, the part of a pod's node class this reservation adds when it holds
    # room from the pod.
    holds: tuple[tuple[str, Resources], ...] = field(default=())


class _Lazy:
    """The nodes' rooms, built on first use: most sessions plan no reservation."""

    def __init__(self, build: Callable[[], dict[str, NodeRoom]]) -> None:
        self.build = build
        self.value: dict[str, NodeRoom] | None = None

    def get(self) -> dict[str, NodeRoom]:
        if self.value is None:
            self.value = self.build()
        return self.value


@dataclass
class Memory:
    """What the plugin keeps across sessions on the live snapshot: each job's record, with
    its PodGroup's uid (a PodGroup made again under the same name starts afresh)."""

    records: dict[str, tuple[str, ReservationRecord]] = field(default_factory=dict)
    runtimes: Runtimes = field(default_factory=Runtimes)


class ReservationPlugin:
    """Reservations with backfill for gangs that waited too long (see the module docstring)."""

    name = "reservation"

    def __init__(self, args: Arguments) -> None:
        self.wait = _duration(args, "wait", None)
        self.use_sla = args.boolean("sla-waiting-time", True)
        self.min_wait = _duration(args, "min-wait", "1m") or 0.0
        self.hold_limit = _duration(args, "hold-limit", "6h") or 0.0
        self.cooldown = _duration(args, "cooldown", "10m") or 0.0
        self.max_reservations = args.integer("max-reservations", 4)
        if not 0 <= self.max_reservations <= MAX_RESERVATIONS:
            raise ValueError(
                f"plugin reservation: argument max-reservations must be 0 to "
                f"{MAX_RESERVATIONS}, got {self.max_reservations}"
            )
        self.margin = _duration(args, "backfill-margin", "30s") or 0.0
        self.trust_declared = args.boolean("trust-declared-runtime", False)
        self.floor = _duration(args, "min-remaining", "1m") or 0.0
        self.node_weight = args.number("node-weight", 1000.0)
        self.enqueue = args.boolean("enqueue", True)
        self.admit_before = _duration(args, "admit-before", "1m") or 0.0
        self.held: list[Held] = []
        self.by_node: dict[str, Held] = {}
        self.by_job: dict[str, Held] = {}
        self.memory = Memory()
        self.decided = False
        # Events found when deciding, recorded at the session's close (a fixed point of it).
        self.events: list[tuple[JobInfo, str, str]] = []

    # ---- thresholds and runtimes ------------------------------------------------------------

    def threshold(self, ssn: Session, job: JobInfo) -> float | None:
        """Seconds a gang waits before it may reserve; None: it never does."""
        found = _annotation_seconds(_annotations(job), RESERVE_AFTER_ANNOTATION)
        if found is None and self.use_sla:
            sla = job_waiting_time(job, None)
            found = sla.total_seconds() if sla is not None else None
        if found is None:
            queue = ssn.queues.get(job.queue)
            if queue is not None and queue.queue is not None:
                found = _annotation_seconds(
                    queue.queue.metadata.annotations, RESERVE_AFTER_ANNOTATION
                )
        if found is None:
            found = self.wait
        return None if found is None else max(found, self.min_wait)

    def declared_runtime(self, job: JobInfo | None) -> float | None:
        return (
            None
            if job is None
            else _annotation_seconds(_annotations(job), EXPECTED_RUNTIME_ANNOTATION)
        )

    def known_runtime(self, task: TaskInfo, job: JobInfo | None) -> float | None:
        """How long the pod runs at most, as the backfill rule trusts it."""
        pod = task.pod
        deadline = pod.spec.active_deadline_seconds if pod is not None else None
        if deadline is not None and deadline > 0:
            return float(deadline)
        return self.declared_runtime(job) if self.trust_declared else None

    def release_of(self, ssn: Session, task: TaskInfo) -> Release:
        """When a task on a node frees its resources."""
        if task.status == TaskStatus.RELEASING:
            return Release(task.resreq, 0.0, True)
        job = ssn.jobs.get(task.job)
        limit = self.known_runtime(task, job)
        if limit is None:
            limit = self.declared_runtime(job)
        started = _started(task) or task.scheduled_at or ssn.now
        age = max((ssn.now - started).total_seconds(), 0.0)
        if limit is None and job is not None:
            estimate = self.memory.runtimes.estimate(job.queue, task.resreq)
            if estimate is not None:
                end = estimated_end(age=age, estimate=estimate, floor=self.floor)
                return Release(task.resreq, end, False)
        end, known = expected_end(age=age, limit=limit, floor=self.floor)
        return Release(task.resreq, end, known)

    def learn_runtimes(self, ssn: Session) -> None:
        """Learn from the finished pods in the snapshot how long pods of each queue and shape
        run (each pod once; the estimate of pods with no known runtime)."""
        runtimes = self.memory.runtimes
        for job in ssn.jobs.values():
            done = job.by_status.get(TaskStatus.SUCCEEDED)
            if not done:
                continue
            for task in done.values():
                if task.uid in runtimes.seen:
                    continue
                started, finished = _started(task), _finished(task)
                if started is not None and finished is not None:
                    seconds = (finished - started).total_seconds()
                    runtimes.learn(task.uid, job.queue, task.resreq, seconds)

    # ---- the session ------------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self.decided = False
        self._register(ssn)

    def ensure(self, ssn: Session) -> None:
        """Decide the session's reservations at the first question asked: once every plugin
        has opened (the job order is whole) and before any action has placed a pod (each
        placement is asked of the predicates first)."""
        if not self.decided:
            self.decided = True
            self._decide(ssn)

    def _decide(self, ssn: Session) -> None:
        now = ssn.now
        memory = ssn.cluster.plugin_memory.get(self.name)
        if not isinstance(memory, Memory):
            memory = ssn.cluster.plugin_memory[self.name] = Memory()
        self.memory = memory
        candidates = [j for j in ssn.incremental.unsettled_jobs() if waiting(j)]
        waiting_keys = {j.key for j in candidates}
        for key in [k for k in memory.records if k not in waiting_keys]:
            memory.records.pop(key)  # started, gone, or no longer waiting: the record goes
        records: dict[str, ReservationRecord] = {}
        for job in candidates:
            kept = memory.records.get(job.key)
            if kept is not None and kept[0] == _uid(job):
                records[job.key] = kept[1]
                continue
            found = self.read_back(ssn, job)
            if found is not None:
                records[job.key] = found
        rooms = _Lazy(lambda: self._rooms(ssn))
        taken: set[str] = set()
        jobs = {j.key: j for j in candidates}
        # Reservations held already, oldest first, keep their nodes while the gang packs there.
        for key, record in sorted(records.items(), key=lambda kv: (kv[1].since, kv[0])):
            job = jobs[key]
            if not record.nodes:
                if record.retry and now >= parse_time(record.retry):
                    records.pop(key)
                continue
            if record.expires and now >= parse_time(record.expires):
                records[key] = ReservationRecord(
                    retry=format_time(now + dt.timedelta(seconds=self.cooldown)), since=record.since
                )
                ssn.result.reservations_expired += 1
                self.events.append(
                    (
                        job,
                        "ReservationExpired",
                        f"reservation of {len(record.nodes)} nodes let go after "
                        f"{duration_text(self.hold_limit)} (hold-limit)",
                    )
                )
                continue
            if len(self.held) >= self.max_reservations:
                break
            self._plan(ssn, job, record, rooms, taken, new=False)
        # The first waiting gang of each queue reserves once it has waited past its threshold.
        by_queue: dict[str, list[JobInfo]] = {}
        for job in candidates:
            by_queue.setdefault(job.queue, []).append(job)
        order = ssn.job_order_key()
        held_queues = {h.job.queue for h in self.held}
        for queue in sorted(by_queue):
            if len(self.held) >= self.max_reservations:
                break
            head = min(by_queue[queue], key=order)
            if queue in held_queues or head.key in records:
                continue
            threshold = self.threshold(ssn, head)
            if threshold is None:
                continue
            waited = (now - head.creation).total_seconds()
            if waited < threshold:
                ssn.result.revisit(threshold - waited)
                continue
            since = format_time(now)
            record = ReservationRecord(
                since=since, expires=format_time(now + dt.timedelta(seconds=self.hold_limit))
            )
            self._plan(ssn, head, record, rooms, taken, new=True)
        # Every record is kept (one not planned this session, as when max-reservations is
        # reached, keeps its age); a held one as its plan left it.
        memory.records = {k: (_uid(jobs[k]), r) for k, r in records.items()}
        for h in self.held:
            memory.records[h.job.key] = (_uid(h.job), h.record)
            if h.record.expires:
                left = (parse_time(h.record.expires) - now).total_seconds()
                ssn.result.revisit(max(left, 0.0))

    def read_back(self, ssn: Session, job: JobInfo) -> ReservationRecord | None:
        """The record on the job's PodGroup, held to what this plugin could have written: the
        annotation is within a tenant's reach (the job controller copies a Job's annotations
        onto its PodGroup), so a record is taken only for a gang that could reserve by now,
        made no earlier than its threshold allowed and expiring within the hold limit."""
        found = decode_reservation(_annotations(job).get(RESERVATION_ANNOTATION))
        threshold = self.threshold(ssn, job)
        if found is None or threshold is None:
            return None
        earliest = job.creation + dt.timedelta(seconds=threshold)
        if ssn.now < earliest:
            return None
        try:
            since = max(parse_time(found.since), earliest) if found.since else earliest
            expires = since + dt.timedelta(seconds=self.hold_limit)
            if found.expires:
                expires = min(parse_time(found.expires), expires)
            retry = parse_time(found.retry) if found.retry else None
        except ValueError:
            return None
        latest_retry = expires + dt.timedelta(seconds=self.cooldown)
        return ReservationRecord(
            nodes=found.nodes,
            since=format_time(since),
            expires=format_time(expires),
            retry=format_time(min(retry, latest_retry)) if retry is not None else "",
        )

    def _rooms(self, ssn: Session) -> dict[str, NodeRoom]:
        """What each ready, schedulable node offers a gang (built once per session)."""
        self.learn_runtimes(ssn)
        rooms = {}
        for name, node in ssn.nodes.items():
            if not node.ready or node.unschedulable:
                continue
            releases = [
                self.release_of(ssn, t)
                for t in node.tasks.values()
                if t.status in ALLOCATED_STATUSES or t.status == TaskStatus.RELEASING
            ]
            rooms[name] = NodeRoom.of(name, node.idle - node.pipelined, releases)
        return rooms

    def _plan(
        self,
        ssn: Session,
        job: JobInfo,
        record: ReservationRecord,
        lazy_rooms: _Lazy,
        taken: set[str],
        *,
        new: bool,
    ) -> None:
        """Plan the gang on its nodes, or on the nodes where it starts soonest; hold them."""
        requests, tasks = gang_tasks(job)
        if not requests:
            return
        rooms = lazy_rooms.get()
        allowed = self._nodes_for(ssn, tasks, rooms, taken)
        plan = None
        if record.nodes and all(n in allowed for n in record.nodes):
            # A reservation keeps its nodes while the gang packs there: what frees up on them
            # is held, so moving would waste it.
            plan = earliest_plan(requests, [rooms[n] for n in record.nodes])
        if plan is None:
            plan = earliest_plan(requests, [rooms[n] for n in sorted(allowed)])
            if plan is None or len(plan.held) > MAX_NODES:
                return  # the gang packs nowhere (or too widely): nothing to hold
            record = msgspec.structs.replace(record, nodes=plan.nodes)
        held = Held(job=job, record=record, plan=plan, new=new)
        held.holds = tuple(sorted(plan.held.items()))
        self.held.append(held)
        self.by_job[job.key] = held
        for name in plan.held:
            self.by_node[name] = held
            taken.add(name)
        if new:
            self.events.append(
                (
                    job,
                    "Reserved",
                    f"reserved {len(plan.held)} nodes; "
                    f"expected start in {duration_text(plan.start)}",
                )
            )

    @staticmethod
    def _nodes_for(
        ssn: Session, tasks: Iterable[TaskInfo], rooms: dict[str, NodeRoom], taken: set[str]
    ) -> set[str]:
        """The nodes no other reservation holds where every role of the gang may run (every
        node no other holds, for a gang without pods yet)."""
        by_role: dict[str, TaskInfo] = {}
        for task in tasks:
            by_role.setdefault(task.role, task)
        return {
            name
            for name in rooms
            if name not in taken
            and all(ssn.predicate(t, ssn.nodes[name]) is None for t in by_role.values())
        }

    def _register(self, ssn: Session) -> None:
        by_node, by_job, margin = self.by_node, self.by_job, self.margin
        classes: dict[tuple[int, ...], Hashable] = {}

        ensure = self.ensure

        def exempt(held: Held, task: TaskInfo) -> bool:
            """The reservation does not hold room from this pod."""
            if task.job == held.job.key:
                return True
            job = ssn.jobs.get(task.job)
            if job is not None and job.priority > held.job.priority:
                return True  # never held from a higher-priority job
            return backfills(self.known_runtime(task, job), held.plan.start, margin)

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            ensure(ssn)
            held = by_node.get(node.name)
            if held is None or task.job == held.job.key:
                return None
            if exempt(held, task):
                return None  # the usual fit check decides, as without a reservation
            ok = admits(
                task.init_resreq.max(task.resreq),
                node.idle - node.pipelined,
                held.plan.held[node.name],
                end=None,
                start=held.plan.start,
                margin=margin,
            )
            return None if ok else HELD_REASON

        def node_order(task: TaskInfo, node: NodeInfo) -> float:
            ensure(ssn)
            held = by_node.get(node.name)
            return self.node_weight if held is not None and held.job.key == task.job else 0.0

        def node_class(task: TaskInfo) -> Hashable:
            ensure(ssn)
            own = by_job.get(task.job)
            if own is not None:
                return ("own", own.plan.nodes)
            subject = tuple(i for i, h in enumerate(self.held) if not exempt(h, task))
            found = classes.get(subject)
            if found is None:
                found = classes[subject] = tuple(self.held[i].holds for i in subject)
            return found

        def enqueueable(job: JobInfo) -> int:
            ensure(ssn)
            held = by_job.get(job.key)
            if not self.enqueue or held is None:
                return 0
            # Admitted only near its start: an admitted gang counts whole against the
            # enqueue gates (overcommit's inqueue), which would keep out the small jobs that
            # could backfill meanwhile.
            return 1 if held.plan.start <= self.admit_before else 0

        # Registered even with nothing held: node verdicts stay reusable through node_class.
        ssn.add_predicate_fn(self.name, predicate)
        ssn.add_node_order_fn(self.name, node_order)
        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_speedups(self.name, Speedups(node_class=node_class))

    def on_session_close(self, ssn: Session) -> None:
        self.ensure(ssn)
        for job, reason, message in self.events:
            ssn.record_event("PodGroup", job.namespace, job.name, "Normal", reason, message)
        self.events = []
        now = ssn.now
        memory = self.memory
        for held in self.held:
            job = held.job
            if job.ready_task_num() >= job.min_available:
                memory.records.pop(job.key, None)
                ssn.result.reservations_started += 1
                if RESERVATION_ANNOTATION in _annotations(job):
                    ssn.result.podgroup_annotations.setdefault(job.key, {})[
                        RESERVATION_ANNOTATION
                    ] = None
                continue
            need = held.plan.total()
            kept = Resources.sum(
                ssn.nodes[n].idle.max(Resources()).min(amount)
                for n, amount in held.plan.held.items()
                if n in ssn.nodes
            )
            if ssn.explain:
                ssn.note_wait(job.key, DETAIL, why_text(held.plan, kept, count_resource(need)))
            since = parse_time(held.record.since) if held.record.since else now
            ssn.result.reservations.append(
                ReservationFigure(
                    job=job.key,
                    queue=job.queue,
                    nodes=len(held.plan.held),
                    need=need,
                    held=kept,
                    age_seconds=max((now - since).total_seconds(), 0.0),
                    start_seconds=held.plan.start,
                )
            )
        # Write each waiting job's record where the PodGroup does not say it yet.
        for key, (_, record) in memory.records.items():
            found = ssn.jobs.get(key)
            if found is None:
                continue
            text = encode_reservation(record)
            if _annotations(found).get(RESERVATION_ANNOTATION) != text:
                ssn.result.podgroup_annotations.setdefault(key, {})[RESERVATION_ANNOTATION] = text
        self.held, self.by_node, self.by_job = [], {}, {}
