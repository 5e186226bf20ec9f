"""The job controller in virtual time: ``controllers/job/controller.py``'s reconcile with the
world in place of the API server, deciding with the very same pure functions.

Informer notifications become ``Request``\\ s (``controllers.job.events``) in the Job's inbox, as
in the controller; ``settle`` then reconciles every Job with requests, at the instant they came,
until none is left (the real controller reacts in milliseconds, which a scheduling period
dwarfs). A reconcile takes its batch in ``events_first`` order and, per request:

    apply_policies -> Decision (delayed: a timer on the timeline brings it back)
    plan(job, action, target) -> kill (kill_victims: marked out of sync, deleted, PodGroup
                                       deleted on full kills)
                              -> sync (PodGroup created or brought in line, plan_sync: pods
                                       created (controllers.job.pods.build_pod) and deleted)
    apply_plan -> the new status, written when status_changed

A SyncJob waits while a request that may carry a policy waits (``waits_for_events``: later in
the batch, or posted while the batch ran), and runs after them, as in the controller.

A finished Job with ``ttlSecondsAfterFinished`` is deleted when ``controllers.gc.ttl`` says so.

Left out, as they do not change where or when pods run: the job plugins' pod edits and objects
(svc, ssh, env, ...), PVCs, Events, the PodGroupPending warning, and Commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import msgspec

from caldera.api.core import Pod
from caldera.api.volcano import Action, Job, PodGroup
from controllers.gc.ttl import seconds_until_expiry
from controllers.job import events
from controllers.job.events import Request, events_first, plain_sync
from controllers.job.pods import (
    build_pod,
    build_podgroup,
    podgroup_drift,
    podgroup_name,
    priority_lookup,
)
from controllers.job.policy import Decision, DelayedActions, waits_for_events
from controllers.job.state import Plan, Step, apply_plan, kill_victims, plan
from controllers.job.status import PodCounts, count_pods, pod_task, status_changed
from controllers.job.sync import plan_sync
from simulator.timeline import Timeline
from simulator.world import World, key_of

MAX_RECONCILES_PER_INSTANT = 1000  # per Job; more means the controller would hot-loop


class ControllerLoopError(RuntimeError):
    """A Job kept being reconciled at one instant: the controller would never rest."""


@dataclass(frozen=True)
class _Timer:
    """A delayed action whose timeout has expired."""

    token: int


_Item = Request | _Timer
# A desired PodGroup and what it was built from: (spec, labels, annotations) objects, and
# (uid, PriorityClass values).
_Desired = tuple[tuple[object, ...], tuple[str, dict[str, int]], PodGroup]


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

    def __init__(self, world: World, timeline: Timeline) -> None:
        self.world = world
        self.timeline = timeline
        self.delayed = DelayedActions()
        self._inbox: dict[str, list[_Item]] = {}
        self._dirty: dict[str, None] = {}  # Job keys to reconcile, in the order they came
        # Each Job's desired PodGroup, with what it was built from (``_desired``).
        self._desired: dict[str, _Desired] = {}

    # ---- informer handlers ----------------------------------------------------------------------

    def _post(self, key: str, item: _Item) -> None:
        self._inbox.setdefault(key, []).append(item)
        self._dirty[key] = None

    def _post_request(self, request: Request | None) -> None:
        if request is not None:
            self._post(request.job_key, request)

    def job_added(self, job: Job) -> None:
        self._post_request(events.on_job_add(job))

    def job_updated(self, old: Job, new: Job) -> None:
        self._post_request(events.on_job_update(old, new))

    def job_deleted(self, job: Job) -> None:
        key = key_of(job)
        self.delayed.forget_job(key)
        self._desired.pop(key, None)
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
        self._post_request(events.on_pod_add(pod, *self._task_context(pod)))

    def pod_updated(self, old: Pod, new: Pod) -> None:
        self._post_request(events.on_pod_update(old, new, *self._task_context(new)))

    def pod_deleted(self, pod: Pod) -> None:
        self._post_request(events.on_pod_delete(pod, in_cache=True))

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        self._post_request(events.on_podgroup_update(old, new))

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
        items = events_first(self._inbox.pop(key, []))
        job = self.world.jobs.get(key)
        if job is None:
            return
        if not items:
            items = [Request(job.metadata.namespace, job.metadata.name)]
        index = 0
        while index < len(items):
            item = items[index]
            index += 1
            decision: Decision
            if isinstance(item, _Timer):
                entry = self.delayed.take(item.token)
                if entry is None:
                    continue  # cancelled meanwhile
                decision = entry.decision
            else:
                now, entry = self.delayed.resolve(job, item)
                if entry is not None and entry.decision.delay:
                    self._arm(key, entry.token, entry.decision.delay)
                if now is None:
                    continue
                decision = now
            if waits_for_events(decision, items[index:]):
                if not plain_sync(items[-1]):
                    items.append(Request(job.metadata.namespace, job.metadata.name))
                continue  # the batch's last item syncs, after the events before it
            if waits_for_events(decision, self._inbox.get(key, ())):
                self._post(key, Request(job.metadata.namespace, job.metadata.name))
                continue  # the waiting requests come next; the sync follows them
            job = self._execute(job, decision)
            if decision.action != Action.SYNC_JOB:
                self.delayed.on_action_ran(key, decision)

    def _arm(self, key: str, token: int, delay: float) -> None:
        def fire() -> None:
            self._post(key, _Timer(token))

        self.timeline.at(self.world.now + delay, fire)

    def _execute(self, job: Job, decision: Decision) -> Job:
        p = plan(job, decision.action, decision.target)
        if p.step is Step.NONE:
            return job
        key = key_of(job)
        pods = self.world.pods_of(key)
        counts = self._kill(job, p, pods) if p.kills else self._sync(job, pods)
        status = apply_plan(job, p, counts, self.world.datetime())
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
        priorities = dict(self.world.priorities())
        meta = job.metadata
        objects = (job.spec, meta.labels, meta.annotations)
        key = key_of(job)
        kept = self._desired.get(key)
        if (
            kept is not None
            and all(a is b for a, b in zip(kept[0], objects, strict=True))
            and kept[1] == (meta.uid, priorities)
        ):
            return kept[2]
        desired = build_podgroup(job, priority_lookup(priorities))
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
        deleted = [pod.metadata.name for pod in sync.delete if world.delete_pod(key_of(pod))]
        tasks = {t.name: t for t in job.spec.tasks}
        key = key_of(job)
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
