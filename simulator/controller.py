"""The job controller in virtual time: ``controllers/job/controller.py``'s reconcile with the
world in place of the API server, deciding with the very same pure functions.

Informer notifications become ``Request``\\ s (``controllers.job.events``) in the Job's inbox, as
in the controller, and a Command on a Job (a trace's ``commands``) a ``CommandItem``
(``controllers.job.inbox``); ``settle`` then reconciles every Job with requests, at the instant
they came, until none is left (the real controller reacts in milliseconds, which a scheduling
period dwarfs). A reconcile drains its inbox as the controller does:

    Batch(inbox).decide(item) -> Turn: a delayed action (a timer on the timeline brings it
                                 back), a Decision to run now, or a sync to post after the
                                 requests that came meanwhile
    execution(job, decision)  -> nothing / hold (over the bounds) / refuse (TerminateJob) /
                                 run plan(job, action, target):
                                 kill (kill_victims: marked out of sync, deleted, PodGroup
                                       deleted on full kills)
                                 sync (PodGroup created or brought in line, plan_sync: pods
                                       created (controllers.job.pods.build_pod) and deleted;
                                       the rest of a big Job's pods on the next sync)
    status_after              -> the new status, written when status_changed

A finished pod seen before its Job waits for it (``FinishedBeforeJob``), a deleted PodGroup of a
Job that needs one brings a sync, and a finished Job with ``ttlSecondsAfterFinished`` is deleted
when ``controllers.gc.ttl`` says so.

Left out, as they do not change where or when pods run or cannot happen here: the job plugins'
pod edits and objects (svc, ssh, env, ...) and so what holds a Job back (objects not its own),
PVCs, Events and the PodGroupPending warning, and the retry limit on failed writes
(``policy.on_failure``: the world's writes do not fail).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import overload

import msgspec

from caldera.api.core import Pod, PodPhase
from caldera.api.meta import controller_of
from caldera.api.volcano import Command, Job, PodGroup
from controllers.gc.ttl import seconds_until_expiry
from controllers.job import events
from controllers.job.bounds import Blocker, hold_status, sync_blocker
from controllers.job.execution import Course, execution, status_after
from controllers.job.inbox import (
    Batch,
    FinishedBeforeJob,
    Item,
    Timer,
    command_item,
    waits_for_job,
)
from controllers.job.pods import (
    build_pod,
    build_podgroup,
    podgroup_drift,
    podgroup_name,
    priority_lookup,
)
from controllers.job.policy import Decision, DelayedActions, policy_problems
from controllers.job.state import Plan, kill_victims
from controllers.job.status import PodCounts, count_pods, pod_task, status_changed
from controllers.job.sync import plan_sync
from simulator.timeline import Timeline
from simulator.world import World, key_of

MAX_RECONCILES_PER_INSTANT = 1000  # per Job; more means the controller would hot-loop
_FINISHED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


class ControllerLoopError(RuntimeError):
    """A Job kept being reconciled at one instant: the controller would never rest."""


# A desired PodGroup and what it was built from: (spec, labels, annotations) objects, and
# (uid, PriorityClass values).
_Desired = tuple[tuple[object, object, object], tuple[str, Mapping[str, int]], PodGroup]
# What a Job's spec object calls for before any sync: (the spec, sync_blocker, policy_problems).
_Checked = tuple[object, Blocker | None, str]


class _Later(Sequence[Pod]):
    """The pods ``list_them`` lists, listed when first read: most pod events never read their
    task's other pods, and listing them costs a pass over the job's pods per event."""

    __slots__ = ("_list_them", "_pods")

    def __init__(self, list_them: Callable[[], list[Pod]]) -> None:
        self._list_them = list_them
        self._pods: list[Pod] | None = None

    def _listed(self) -> list[Pod]:
        if self._pods is None:
            self._pods = self._list_them()
        return self._pods

    @overload
    def __getitem__(self, index: int) -> Pod: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Pod]: ...

    def __getitem__(self, index: int | slice) -> Pod | Sequence[Pod]:
        return self._listed()[index]

    def __len__(self) -> int:
        return len(self._listed())

    def __iter__(self) -> Iterator[Pod]:
        return iter(self._listed())


class JobController:
    """See the module docstring. A ``simulator.world.Watcher``."""

    def __init__(self, world: World, timeline: Timeline, *, admitted: bool = False) -> None:
        """``admitted``: every Job the world gets passed the Job webhook's validation
        (``simulator.admission``, as a trace's do), which refuses each Job that
        ``sync_blocker`` or ``policy_problems`` would name: neither is asked again."""
        self.world = world
        self.timeline = timeline
        self.admitted = admitted
        self.delayed = DelayedActions()
        self._inbox: dict[str, list[Item]] = {}
        self._dirty: dict[str, None] = {}  # Job keys to reconcile, in the order they came
        self._finished_before_job = FinishedBeforeJob()
        # Each Job's desired PodGroup, with what it was built from (``_desired``).
        self._desired: dict[str, _Desired] = {}
        # Each Job's spec checks (``_checked``): status writes keep the spec object.
        self._checked: dict[str, _Checked] = {}

    # ---- informer handlers ----------------------------------------------------------------------

    def _post(self, key: str, item: Item) -> None:
        self._inbox.setdefault(key, []).append(item)
        self._dirty[key] = None

    def _post_request(self, request: events.Request | None) -> None:
        if request is not None:
            self._post(request.job_key, request)

    def job_added(self, job: Job) -> None:
        key = key_of(job)
        for name in self._finished_before_job.release(key):
            pod = self.world.pods.items.get(f"{job.metadata.namespace}/{name}")
            if pod is not None:
                self._post_request(events.on_pod_add(pod, *self._task_context(pod)))
        self._post_request(events.on_job_add(job))

    def job_updated(self, old: Job, new: Job) -> None:
        self._post_request(events.on_job_update(old, new))

    def job_deleted(self, job: Job) -> None:
        key = key_of(job)
        self.delayed.forget_job(key)
        self._desired.pop(key, None)
        self._checked.pop(key, None)
        self._inbox.pop(key, None)
        self._dirty.pop(key, None)

    def _task_context(self, pod: Pod) -> tuple[Sequence[Pod], int | None, int | None]:
        job_key = self.world.pod_job.get(key_of(pod), "")
        job = self.world.jobs.get(job_key)
        name = pod_task(pod)
        pods_of_task = self.world.pods_of_task
        siblings = _Later(lambda: pods_of_task(job_key, name))
        task = next((t for t in job.spec.tasks if t.name == name), None) if job else None
        if task is None:
            return siblings, None, None
        return siblings, task.max_retry, task.replicas

    def pod_added(self, pod: Pod) -> None:
        if pod.status.phase not in _FINISHED:
            self._post_request(events.on_pod_add(pod))
            return
        siblings, max_retry, replicas = self._task_context(pod)
        job_key = self.world.pod_job.get(key_of(pod))
        keys = [job_key] if job_key else []
        if waits_for_job(pod, replicas, keys):
            self._finished_before_job.hold(keys[0], pod.metadata.name)
            return
        self._post_request(events.on_pod_add(pod, siblings, max_retry, replicas))

    def pod_updated(self, old: Pod, new: Pod) -> None:
        self._post_request(events.on_pod_update(old, new, *self._task_context(new)))

    def pod_deleted(self, pod: Pod) -> None:
        self._post_request(events.on_pod_delete(pod, in_cache=True))

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        self._post_request(events.on_podgroup_update(old, new))

    def podgroup_deleted(self, podgroup: PodGroup) -> None:
        owner = events.job_owner(controller_of(podgroup.metadata))
        job = self.world.jobs.get(f"{podgroup.metadata.namespace}/{owner.name}") if owner else None
        self._post_request(events.on_podgroup_delete(podgroup, job))

    def command_added(self, command: Command) -> None:
        """A Command on a Job (the trace's ``commands``): consumed when its Job is reconciled."""
        item = command_item(command)
        if item is not None:
            self._post(item.request.job_key, item)

    # ---- reconciling ----------------------------------------------------------------------------

    def settle(self) -> int:
        """Reconcile every Job with requests, until none is left; the number of reconciles."""
        done = 0
        counts: dict[str, int] = {}
        while self._dirty:
            key = next(iter(self._dirty))
            del self._dirty[key]
            counts[key] = counts.get(key, 0) + 1
            if counts[key] > MAX_RECONCILES_PER_INSTANT:
                raise ControllerLoopError(f"job {key} was reconciled {counts[key]} times at once")
            self.reconcile(key)
            done += 1
        return done

    def reconcile(self, key: str) -> None:
        items = self._inbox.pop(key, [])
        job = self.world.jobs.get(key)
        if job is None:
            return
        batch = Batch(items, job)
        for item in batch:
            # A Command is deleted as it is taken (nobody else consumes it here).
            turn = batch.decide(item, job, self.delayed, self._inbox.get(key, ()))
            if turn.armed is not None:
                self._arm(key, turn.armed.token, turn.armed.decision.delay or 0.0)
            if turn.post_sync:
                self._post(key, events.Request(job.metadata.namespace, job.metadata.name))
            if turn.decision is None:
                continue
            job = self._execute(job, turn.decision)
            batch.ran(self.delayed, key, turn.decision)

    def _arm(self, key: str, token: int, delay: float) -> None:
        def fire() -> None:
            self._post(key, Timer(token))

        self.timeline.at(self.world.now + delay, fire)

    def _checks(self, job: Job) -> _Checked:
        """``sync_blocker`` and ``policy_problems`` of the Job, worked out again only when its
        spec object changed (status writes keep it)."""
        key = key_of(job)
        kept = self._checked.get(key)
        if kept is not None and kept[0] is job.spec:
            return kept
        checked = (job.spec, sync_blocker(job), policy_problems(job))
        self._checked[key] = checked
        return checked

    def _execute(self, job: Job, decision: Decision) -> Job:
        blocker, problems = (None, "") if self.admitted else self._checks(job)[1:]
        course = execution(job, decision, blocker)
        if course.course is Course.NOTHING:
            return job
        if course.course is Course.HOLD and course.blocker is not None:
            status = hold_status(job.status, course.blocker.message, self.world.datetime())
            if status is job.status:
                return job
            return self.world.write_job_status(key_of(job), status)
        assert course.plan is not None
        p = course.plan
        key = key_of(job)
        pods = self.world.pods_of(key)
        counts = self._kill(job, p, pods) if p.kills else self._sync(job, pods)
        status, _ = status_after(job, p, counts, self.world.datetime(), problems=problems)
        if not status_changed(job.status, status):
            return job
        written = self.world.write_job_status(key, status)
        self._watch_ttl(written)
        return written

    def _kill(self, job: Job, p: Plan, pods: list[Pod]) -> PodCounts:
        deleted = [
            pod.metadata.name
            for pod in kill_victims(p, pods)
            if self.world.delete_pod(key_of(pod), out_of_sync=True)
        ]
        if p.delete_podgroup:
            self.world.delete_podgroup(f"{job.metadata.namespace}/{podgroup_name(job)}")
        return count_pods(pods, deleted=deleted)

    def _desired_podgroup(self, job: Job) -> PodGroup:
        """``build_podgroup`` for the Job, built again only when what it reads changed: the
        Job's spec, uid, labels and annotations (status writes keep these very objects) and
        the PriorityClasses' values."""
        priorities = self.world.priorities()
        meta = job.metadata
        key = key_of(job)
        kept = self._desired.get(key)
        if kept is not None:
            (spec, labels, annotations), read, desired = kept
            if (
                spec is job.spec
                and labels is meta.labels
                and annotations is meta.annotations
                and read == (meta.uid, priorities)
            ):
                return desired
        desired = build_podgroup(job, priority_lookup(priorities))
        objects = (job.spec, meta.labels, meta.annotations)
        self._desired[key] = (objects, (meta.uid, priorities), desired)
        return desired

    def _sync(self, job: Job, pods: list[Pod]) -> PodCounts:
        world = self.world
        desired = self._desired_podgroup(job)
        pg_key = f"{job.metadata.namespace}/{desired.metadata.name}"
        current = world.podgroups.items.get(pg_key)
        if current is None:
            current = world.create_podgroup(desired)
        elif podgroup_drift(current.spec, desired.spec):
            current = world.replace_podgroup(msgspec.structs.replace(current, spec=desired.spec))
        sync = plan_sync(job, pods, current.status.phase)
        key = key_of(job)
        if sync.more:  # the rest of the missing pods on the next sync
            self._dirty[key] = None
        deleted = [pod.metadata.name for pod in sync.delete if world.delete_pod(key_of(pod))]
        tasks = {t.name: t for t in job.spec.tasks}
        for position, slot in enumerate(sync.create):
            world.create_pod(build_pod(job, tasks[slot.task], slot.index).pod, key, position)
        return count_pods(pods, deleted=deleted, created=sync.create)

    def _watch_ttl(self, job: Job) -> None:
        left = seconds_until_expiry(job, self.world.datetime())
        if left is None:
            return
        key = key_of(job)
        uid = job.metadata.uid

        def expire() -> None:
            current = self.world.jobs.get(key)
            if current is None or current.metadata.uid != uid:
                return
            remaining = seconds_until_expiry(current, self.world.datetime())
            if remaining is None:
                return
            if remaining > 0:
                self.timeline.at(self.world.now + remaining, expire)
                return
            self.world.delete_job(key)

        self.timeline.at(self.world.now + max(left, 0.0), expire)
