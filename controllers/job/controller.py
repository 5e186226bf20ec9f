"""The job controller: Volcano's Job lifecycle on the shared informer cache.

Events, not only state, drive a Volcano Job (a pod failing with exit code 3 may restart the job,
while the same pod seen Failed in a later resync must not restart it again). So the informer
handlers turn each change into a ``Request`` (pure: ``controllers.job.events``) and append it to
the Job's inbox; the Job's key goes on the work queue, which never hands one key to two workers,
so a Job's requests run one after another. ``reconcile(key)`` drains the inbox, deciding
with the pure modules the simulator's job controller (``simulator/controller.py``) runs too:

    Batch(inbox).decide(item) -> Turn: a timer to arm, a Decision to run now, or a sync to post
    execution(job, decision) -> nothing / hold / refuse / run plan(job, action):
                                kill pods / sync pods, plugins, PVCs, PodGroup
    status_after(...) -> the new status, written only when it changed

A key with an empty inbox (a resync, a retry) is a plain SyncJob, so the loop stays level-based:
whatever was missed, the next sync converges. All decisions are the pure modules' (inbox,
execution, events, policy, state, sync, status, bounds, pending, pods, plugins; ``created``
remembers the pods a reconcile created until the cache shows them); this module only reads the
cache and writes: Commands deleted, timers armed, pods, PodGroups, plugin objects and PVCs
made and removed, statuses and Events written, keys requeued.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from caldera.api.core import PersistentVolumeClaim, Pod, PodPhase, PriorityClass
from caldera.api.duration import format_duration
from caldera.api.fielderrors import unsupported
from caldera.api.kinds import (
    COMMAND,
    JOB,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    PVC,
)
from caldera.api.meta import controller_of
from caldera.api.ownership import clash_message, may_touch
from caldera.api.volcano import (
    CONTROLLER_OUT_OF_SYNC_KEY,
    JOB_NAME_KEY,
    POLICY_ACTIONS,
    Action,
    Command,
    Job,
    JobEventReason,
    PodGroup,
    job_reference,
)
from caldera.kube.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound
from controllers.job import events
from controllers.job.bounds import Blocker, hold_status
from controllers.job.created import CreatedPods
from controllers.job.events import Request
from controllers.job.execution import Course, execution, refusal_plan, status_after
from controllers.job.inbox import (
    Batch,
    CommandItem,
    FinishedBeforeJob,
    Item,
    Timer,
    command_item,
    waits_for_job,
)
from controllers.job.pending import pending_event
from controllers.job.plugin_objects import delete_objects, ensure_objects, job_label, own_key_pair
from controllers.job.plugins import PluginSet, build_plugins
from controllers.job.plugins.ssh import generate_key_pair
from controllers.job.pods import (
    build_job_volume_claim,
    build_pod,
    build_podgroup,
    invalid_pvc_name,
    job_volume_claim_name,
    podgroup_drift,
    podgroup_name,
    priority_lookup,
)
from controllers.job.policy import (
    TERMINATE,
    Decision,
    DelayedActions,
    on_failure,
    policy_problems,
)
from controllers.job.pvc_throttle import ClaimUnusableError, PvcCreator, claim_problem
from controllers.job.state import INVALID_NAME, INVALID_TEMPLATE, OVER_LIMITS, Plan, kill_victims
from controllers.job.status import (
    PodCounts,
    PodSlot,
    count_pods,
    pod_task,
    status_changed,
    volume_claim_resources,
)
from controllers.job.sync import plan_sync
from controllers.runtime import Controller, ControllerContext, Result
from informers.store import HandlerFuncs

POD_INDEX = "job"  # pods by "<namespace>/<job name>", for pods a Job controls
CLAIM_INDEX = "claim"  # Jobs by "<namespace>/<PVC name>" of the claims spec.volumes names
CREATE_CONCURRENCY = 20  # pod creations in flight per reconcile
HOLD_RECHECK = 30.0  # seconds between looks at a Job held by an object it does not own


class PodRejectedError(Exception):
    """The API server refused a pod of the Job as Invalid (422): its template is wrong, and
    creating it again can never succeed."""


def job_pod_key(pod: Pod) -> list[str]:
    """Index function: the Job a pod belongs to, if a Volcano Job controls it."""
    ref = events.job_owner(next((r for r in pod.metadata.owner_references if r.controller), None))
    if ref is None:
        return []
    name = pod.metadata.annotations.get(JOB_NAME_KEY) or ref.name
    return [f"{pod.metadata.namespace}/{name}"]


class JobController(Controller):
    name = "job"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._inbox: dict[str, list[Item]] = {}
        self._finished_before_job = FinishedBeforeJob()  # see `_pod_added`
        self._delayed = DelayedActions()
        self._timers: dict[int, asyncio.TimerHandle] = {}
        # key -> (resourceVersions our writes replaced, the Job our last write returned): until
        # the cache has seen our own status write, reconcile from what the write returned, not
        # a stale copy that would only earn a 409.
        self._written: dict[str, tuple[set[str], Job]] = {}
        self._created = CreatedPods()  # pods created, not yet in the cache
        # uid -> message of Jobs held over the bounds whose status the API server refused to
        # write (no CRD validation ratcheting before Kubernetes 1.30): their Event is told once.
        self._held_unwritten: dict[str, str] = {}
        # key -> (Event reason, message): what held the Job's pods back in this reconcile (an
        # object of a wanted name that is not the Job's own); see `_note_holds`.
        self._holds: dict[str, list[tuple[str, str]]] = {}
        self._held: set[str] = set()  # keys to look at again (see HOLD_RECHECK)
        self.pvcs = PvcCreator(
            ctx.client, qps=ctx.settings.pvc_create_qps, burst=ctx.settings.pvc_create_burst
        )

    # ---- wiring -----------------------------------------------------------------------------

    def setup(self) -> None:
        factory = self.ctx.informers
        self.jobs = factory.informer(JOB)
        self.pods = factory.informer(POD)
        self.podgroups = factory.informer(PODGROUP)
        self.commands = factory.informer(COMMAND)
        self.priority_classes = factory.informer(PRIORITY_CLASS)
        self.claims = factory.informer(PVC)
        self.pods.add_indexer(POD_INDEX, job_pod_key)
        self.jobs.add_indexer(CLAIM_INDEX, events.claim_keys)
        self.jobs.add_handler(
            _handlers(add=self._job_added, update=self._job_updated, delete=self._job_deleted)
        )
        self.pods.add_handler(
            _handlers(add=self._pod_added, update=self._pod_updated, delete=self._pod_deleted)
        )
        self.podgroups.add_handler(
            _handlers(update=self._podgroup_updated, delete=self._podgroup_deleted)
        )
        self.commands.add_handler(_handlers(add=self._command_added))
        self.claims.add_handler(_handlers(add=self._pvc_added, delete=self._pvc_deleted))

    def start(self, workers: int) -> None:
        self.pvcs.start()
        super().start(workers)

    async def shutdown(self, grace: float) -> bool:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        drained = await super().shutdown(grace)
        await self.pvcs.stop()
        return drained

    def _post(self, item: Item, key: str) -> None:
        self._inbox.setdefault(key, []).append(item)
        self.queue.add(key)

    def _post_request(self, request: Request | None) -> None:
        if request is not None:
            self._post(request, request.job_key)

    def _job_added(self, job: Job) -> None:
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        for name in self._finished_before_job.release(key):
            pod = self.pods.store.get(f"{job.metadata.namespace}/{name}")
            if pod is not None:
                self._post_request(events.on_pod_add(pod, *self._task_context(pod)))
        self._post_request(events.on_job_add(job))

    def _job_updated(self, old: Job, new: Job) -> None:
        self._post_request(events.on_job_update(old, new))

    def _job_deleted(self, job: Job) -> None:
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        for entry in self._delayed.forget_job(key):
            handle = self._timers.pop(entry.token, None)
            if handle is not None:
                handle.cancel()
        self._inbox.pop(key, None)
        self._created.forget(key)
        self._holds.pop(key, None)
        self._held.discard(key)
        self._held_unwritten.pop(job.metadata.uid, None)

    def _task_context(self, pod: Pod) -> tuple[list[Pod], int | None, int | None]:
        keys = job_pod_key(pod)
        if not keys:
            return [], None, None
        job = self.jobs.store.get(keys[0])
        task_name = pod_task(pod)
        task = next((t for t in job.spec.tasks if t.name == task_name), None) if job else None
        siblings = [
            p for p in self.pods.store.by_index(POD_INDEX, keys[0]) if pod_task(p) == task_name
        ]
        if task is None:
            return siblings, None, None
        return siblings, task.max_retry, task.replicas

    def _pod_added(self, pod: Pod) -> None:
        self._seen(pod)
        if pod.status.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            self._post_request(events.on_pod_add(pod))
            return
        siblings, max_retry, replicas = self._task_context(pod)
        keys = job_pod_key(pod)
        if waits_for_job(pod, replicas, keys):
            # The Job is not cached yet (the informers list in parallel at start): judge the
            # pod when it is, or TaskCompleted could not be told.
            self._finished_before_job.hold(keys[0], pod.metadata.name)
            return
        self._post_request(events.on_pod_add(pod, siblings, max_retry, replicas))

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        siblings, max_retry, replicas = self._task_context(new)
        self._post_request(events.on_pod_update(old, new, siblings, max_retry, replicas))

    def _pod_deleted(self, pod: Pod) -> None:
        self._seen(pod)
        self._post_request(events.on_pod_delete(pod, in_cache=True))

    def _seen(self, pod: Pod) -> None:
        for key in job_pod_key(pod):
            self._created.seen(key, pod)

    def _podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        pending = pending_event(old, new) if self.working else None
        if pending is not None:
            # Recorded here, on the change itself, not per reconcile: see controllers.job.pending.
            # Only by the leader: a standby sees the same change and would record it twice.
            job, message = pending
            self.ctx.recorder.record(job, "Warning", JobEventReason.POD_GROUP_PENDING, message)
        self._post_request(events.on_podgroup_update(old, new))

    def _podgroup_deleted(self, podgroup: PodGroup) -> None:
        owner = events.job_owner(controller_of(podgroup.metadata))
        job = self.jobs.store.get(f"{podgroup.metadata.namespace}/{owner.name}") if owner else None
        self._post_request(events.on_podgroup_delete(podgroup, job))

    def _pvc_added(self, pvc: PersistentVolumeClaim) -> None:
        ns, name = pvc.metadata.namespace, pvc.metadata.name
        jobs = self.jobs.store.by_index(CLAIM_INDEX, f"{ns}/{name}")
        for request in events.on_pvc_add(ns, name, jobs):
            self._post_request(request)

    def _pvc_deleted(self, pvc: PersistentVolumeClaim) -> None:
        # A pod held by a Terminating claim of its name (a deleted Job's) gets a fresh one now.
        job_name = pvc.metadata.labels.get(JOB_NAME_KEY)
        if job_name:
            self._post_request(Request(pvc.metadata.namespace, job_name))

    def _command_added(self, command: Command) -> None:
        item = command_item(command)
        if item is not None:
            self._post(item, item.request.job_key)

    # ---- reconcile --------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result | None:
        items = self._inbox.pop(key, [])
        job = self.jobs.store.get(key)
        if job is None:
            self._written.pop(key, None)
            return None
        superseded, latest = self._written.pop(key, (set(), job))
        if job.metadata.resource_version in superseded:
            job = latest
        else:
            superseded = set()
        batch = Batch(items, job)
        for item in batch:
            if isinstance(item, Timer):
                self._timers.pop(item.token, None)
            elif isinstance(item, CommandItem) and not await self._consume(item, job):
                continue
            turn = batch.decide(item, job, self._delayed, self._inbox.get(key, ()))
            if turn.armed is not None:
                self._arm(key, turn.armed.token, turn.armed.decision.delay or 0.0)
                self._event(
                    job,
                    "Normal",
                    JobEventReason.EXECUTE_ACTION,
                    f"Execute action {turn.armed.decision.action} after "
                    f"{format_duration(turn.armed.decision.delay or 0.0)}",
                )
            if turn.post_sync:
                # The waiting requests queued the key again; the sync follows them.
                self._inbox[key].append(Request(job.metadata.namespace, job.metadata.name))
            decision = turn.decision
            if decision is None:
                continue
            before = job.metadata.resource_version
            try:
                job = await self._execute(job, decision)
            except Exception as exc:
                limit = self.ctx.settings.max_requeue_num
                last = on_failure(self.queue.num_requeues(key), limit)
                if last is not None:
                    # Volcano records it as Normal; a Job ended by errors is a Warning here.
                    self._event(
                        job,
                        "Warning",
                        JobEventReason.EXECUTE_ACTION,
                        f"Job failed on action {decision.action} for retry limit reached: {exc}",
                    )
                    self.queue.forget(key)
                    job = await self._execute(job, last)
                    continue
                # Keep the unprocessed requests for the retry (after backoff).
                rest = batch.rest()
                if rest:
                    self._inbox.setdefault(key, [])[:0] = rest
                raise
            batch.ran(self._delayed, key, decision)
            if job.metadata.resource_version != before:
                superseded.add(before)
                self._written[key] = (superseded, job)
        if key in self._held:
            # No watch tells when a clashing object goes (Caldera does not cache them): look.
            self._held.discard(key)
            return Result(requeue_after=HOLD_RECHECK)
        return None

    def _arm(self, key: str, token: int, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._timers[token] = loop.call_later(delay, self._post, Timer(token), key)

    async def _consume(self, item: CommandItem, job: Job) -> bool:
        """Delete the Command first: whoever deletes it owns it, so it runs at most once."""
        try:
            await self.ctx.client.delete(COMMAND, item.name, namespace=item.namespace)
        except NotFound:
            return False
        if item.unknown_action:
            self._event(
                job,
                "Warning",
                JobEventReason.COMMAND_ISSUED,
                f"Command {item.name} has unknown action {item.unknown_action}; it was removed: "
                + unsupported("action", item.unknown_action, POLICY_ACTIONS),
            )
            return True
        self._event(
            job,
            "Normal",
            JobEventReason.COMMAND_ISSUED,
            f"Start to execute command {item.request.action}, and clean it up to make sure "
            "executed not more than once.",
        )
        return True

    def _event(self, job: Job, type_: str, reason: str, message: str) -> None:
        self.ctx.recorder.record(job_reference(job), type_, reason, message)

    def _job_pods(self, job: Job) -> list[Pod]:
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        # By name, the index also finds a deleted namesake's pods: only this Job's count.
        own = [
            pod
            for pod in self.pods.store.by_index(POD_INDEX, key)
            if may_touch(pod.metadata, job.metadata.uid)
        ]
        return self._created.merged(key, own)

    async def _execute(self, job: Job, decision: Decision) -> Job:
        course = execution(job, decision)
        if course.course is Course.NOTHING:
            return job
        if course.course is Course.HOLD and course.blocker is not None:
            return await self._hold_over_limits(job, course.blocker.message)
        if course.course is Course.REFUSE and course.blocker is not None:
            return await self._refuse(job, course.blocker)
        assert course.plan is not None
        try:
            return await self._run(job, decision, course.plan)
        except PodRejectedError as exc:
            return await self._refuse(job, Blocker(INVALID_TEMPLATE, str(exc)))

    async def _hold_over_limits(self, job: Job, problem: str) -> Job:
        """A Job over the bounds of caldera.api.limits (stored without the webhook) is held:
        no pod, PodGroup or plugin object; its status says why, with one Warning Event when it
        first does (controllers.job.bounds). Later syncs cost the bound check only."""
        status = hold_status(job.status, problem, self.ctx.clock())
        if status is job.status:
            return job
        try:
            written = await self.ctx.client.update_status(
                JOB, msgspec.structs.replace(job, status=status)
            )
        except Invalid:
            # An API server without CRD validation ratcheting (Kubernetes before 1.30) refuses
            # every write of an object its schema now refuses: held all the same, told once.
            if self._held_unwritten.get(job.metadata.uid) == problem:
                return job
            self._held_unwritten[job.metadata.uid] = problem
            written = job
        self._event(job, "Warning", OVER_LIMITS, problem)
        return written

    async def _refuse(self, job: Job, blocker: Blocker) -> Job:
        """A Job that can never run is terminated once, the fields named in an Event and in
        status.state, instead of failing every sync: one the svc plugin can name no Service
        after, or one whose pods the API server refuses (stored before the webhook checked it;
        not failing every pod create until the retry limit, docs/webhook.md). It runs once:
        the Job then leaves Pending/Running, and later reconciles only kill."""
        if blocker.reason == INVALID_NAME:
            reason = JobEventReason.PLUGIN_ERROR
            message = f"{blocker.message}; the job is terminated"
        else:
            reason = JobEventReason.FAILED_CREATE
            message = (
                "Error creating pods: the pod template is invalid: "
                f"{blocker.message}; the job is terminated"
            )
        self._event(job, "Warning", reason, message)
        return await self._run(job, TERMINATE, refusal_plan(job, blocker))

    async def _run(self, job: Job, decision: Decision, p: Plan) -> Job:
        if decision.action != Action.SYNC_JOB:
            self._event(
                job,
                "Normal",
                JobEventReason.EXECUTE_ACTION,
                f"Start to execute action {decision.action}",
            )
        pods = self._job_pods(job)
        controlled: dict[str, str] = {}
        released: list[str] = []
        if p.kills:
            counts, released = await self._kill(job, p, pods)
        else:
            counts, controlled = await self._sync(job, pods)
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        holds = self._holds.pop(key, [])
        if holds:
            self._held.add(key)  # looked at again (HOLD_RECHECK)
        problems = policy_problems(job)
        new_status, warnings = status_after(
            job,
            p,
            counts,
            self.ctx.clock(),
            problems=problems,
            controlled=controlled,
            released=released,
            holds=holds,
        )
        for reason, message in warnings:
            self._event(job, "Warning", reason, message)
        if not status_changed(job.status, new_status):
            return job
        try:
            written = await self.ctx.client.update_status(
                JOB, msgspec.structs.replace(job, status=new_status)
            )
        except Conflict:
            raise  # a newer Job is in flight; the retry reads it from the cache
        if problems and problems not in job.status.state.message:
            # Once: from now on the stored message carries it (a restart reads it back).
            self._event(job, "Warning", JobEventReason.INVALID_POLICY, problems)
        return written

    def _hold(self, job: Job, reason: str, message: str) -> None:
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        self._holds.setdefault(key, []).append((reason, message))

    # ---- kill -------------------------------------------------------------------------------

    async def _kill(self, job: Job, p: Plan, pods: list[Pod]) -> tuple[PodCounts, list[str]]:
        """Kill the plan's victims; with ``p.delete_podgroup`` also the plugins' objects and
        the PodGroup, once and only the Job's own (``controllers.job.plugin_objects``). Returns
        the counts and the controlledResources entries whose objects are now gone."""
        victims = kill_victims(p, pods)
        deleted = await self._delete_pods(job, victims)
        released: list[str] = []
        if p.delete_podgroup:
            plugins = build_plugins(job)
            if plugins.ok:
                released = await delete_objects(self.ctx.client, job, plugins)
            ns = job.metadata.namespace
            pg = self.podgroups.store.get(f"{ns}/{podgroup_name(job)}")
            # The cache is the record here: a PodGroup gone from it is not deleted again.
            if pg is not None and may_touch(pg.metadata, job.metadata.uid):
                with contextlib.suppress(NotFound, Conflict):
                    await self.ctx.client.delete(
                        PODGROUP, pg.metadata.name, namespace=ns, uid=pg.metadata.uid
                    )
        return count_pods(pods, deleted=deleted), released

    async def _delete_pods(self, job: Job, victims: Iterable[Pod]) -> list[str]:
        async def one(pod: Pod) -> str | None:
            ns, name = pod.metadata.namespace, pod.metadata.name
            try:
                # Marked first: events of a pod being killed are ignored (Volcano v1.14).
                # The uid makes the patch conditional: a replaced pod is not marked.
                mark = {
                    "uid": pod.metadata.uid,
                    "annotations": {CONTROLLER_OUT_OF_SYNC_KEY: "true"},
                }
                await self.ctx.client.patch(POD, name, {"metadata": mark}, namespace=ns)
                await self.ctx.client.delete(POD, name, namespace=ns, uid=pod.metadata.uid)
            except (NotFound, Conflict):
                return name  # gone already, or replaced: either way not ours to count
            except ApiError as exc:
                self._event(
                    job,
                    "Warning",
                    JobEventReason.FAILED_DELETE,
                    f"Error deleting pod {name}: {exc}",
                )
                raise
            return name

        results = await asyncio.gather(*(one(p) for p in victims))
        return [name for name in results if name]

    # ---- sync -------------------------------------------------------------------------------

    async def _sync(self, job: Job, pods: list[Pod]) -> tuple[PodCounts, dict[str, str]]:
        plugins = build_plugins(job)
        if not plugins.ok:
            self._event(
                job,
                "Warning",
                JobEventReason.PLUGIN_ERROR,
                f"Execute plugin when job add failed, err: {plugins.message}",
            )
            return count_pods(pods), {}
        plugins = await self._with_ssh_keys(job, plugins)
        clashes = await ensure_objects(self.ctx.client, job, plugins)
        if clashes or plugins.needs_ssh_key_pair:
            # A pod would mount, or resolve through, an object that is not the Job's own.
            for clash in clashes:
                self._hold(job, JobEventReason.PLUGIN_ERROR, clash)
            return count_pods(pods), plugins.controlled_resources(job)
        if not await self._ensure_job_volumes(job):
            return count_pods(pods), plugins.controlled_resources(job)
        pg = await self._ensure_podgroup(job)
        sync = plan_sync(job, pods, pg.status.phase if pg is not None else None)
        if sync.more:  # the rest of the missing pods on the next sync
            self.queue.add(f"{job.metadata.namespace}/{job.metadata.name}")
        deleted = await self._delete_pods(job, sync.delete)
        created = await self._create_pods(job, plugins, sync.create)
        controlled = {**plugins.controlled_resources(job), **volume_claim_resources(job)}
        return count_pods(pods, deleted=deleted, created=created), controlled

    async def _with_ssh_keys(self, job: Job, plugins: PluginSet) -> PluginSet:
        if not plugins.needs_ssh_key_pair:
            return plugins
        pair, clash = await own_key_pair(self.ctx.client, job)
        if clash:
            self._hold(job, JobEventReason.PLUGIN_ERROR, clash)
            return plugins  # without keys: the Secret is not the Job's, no pod is made
        if pair is None:
            pair = await asyncio.to_thread(generate_key_pair)
        return plugins.with_ssh_key_pair(pair)

    async def _ensure_job_volumes(self, job: Job) -> bool:
        """PVCs of job-level volumes: an existing claim must exist; a claim template gets a
        PVC named after the Job, written back into the spec. False while a claim is missing."""
        ns = job.metadata.namespace
        named: list[dict[str, Any]] = []
        changed = False
        for volume in job.spec.volumes:
            entry = msgspec.to_builtins(volume)
            name = volume.volume_claim_name
            if not name and volume.volume_claim is not None:
                name = job_volume_claim_name(job.metadata.name, volume.mount_path)
                pvc = build_job_volume_claim(job, name, volume.volume_claim)
                try:
                    await self.pvcs.ensure(f"{ns}/{job.metadata.name}", pvc)
                except ClaimUnusableError as exc:
                    self._hold(job, JobEventReason.PVC_ERROR, str(exc))
                    return False
                entry["volumeClaimName"] = name
                changed = True
            elif name:
                try:
                    await self.ctx.client.get(PVC, name, namespace=ns)
                except NotFound:
                    self._event(
                        job,
                        "Warning",
                        JobEventReason.PVC_ERROR,
                        f"Failed to create PVC, err: pvc {name} is not found, the job will be "
                        "in the Pending state until the PVC is created",
                    )
                    return False
            named.append(entry)
        if changed:
            # Volcano writes the generated claim names back, so later syncs reuse them.
            await self.ctx.client.patch(
                JOB, job.metadata.name, {"spec": {"volumes": named}}, namespace=ns
            )
        return True

    def _priorities(self) -> Mapping[str, int]:
        classes: list[PriorityClass] = self.priority_classes.store.list()
        return {pc.metadata.name: pc.value for pc in classes}

    async def _ensure_podgroup(self, job: Job) -> PodGroup | None:
        desired = build_podgroup(job, priority_lookup(self._priorities()))
        ns, name = job.metadata.namespace, desired.metadata.name
        current = self.podgroups.store.get(f"{ns}/{name}")
        if current is not None and not may_touch(current.metadata, job.metadata.uid):
            # Not patched, and no pod joins it (without a PodGroup of its own none is made).
            message = clash_message("PodGroup", name, job_label(job))
            self._hold(job, JobEventReason.POD_GROUP_ERROR, message)
            return None
        try:
            if current is None:
                return await self.ctx.client.create(PODGROUP, desired, namespace=ns)
            patch = podgroup_drift(current.spec, desired.spec)
            if patch:
                return await self.ctx.client.patch(PODGROUP, name, patch, namespace=ns)
        except AlreadyExists:
            return None  # the cache lags our own create; the next sync sees it
        except Invalid as exc:
            self._event(
                job,
                "Warning",
                JobEventReason.POD_GROUP_ERROR,
                f"Failed to create PodGroup, err: {exc}",
            )
            return None
        return current

    async def _create_pods(
        self, job: Job, plugins: PluginSet, slots: Iterable[PodSlot]
    ) -> list[PodSlot]:
        tasks = {t.name: t for t in job.spec.tasks}
        gate = asyncio.Semaphore(CREATE_CONCURRENCY)
        owner = f"{job.metadata.namespace}/{job.metadata.name}"

        async def one(slot: PodSlot) -> PodSlot | None:
            task = tasks[slot.task]
            planned = build_pod(job, task, slot.index)
            for pvc in planned.pvcs:
                problem = invalid_pvc_name(pvc["metadata"]["name"])
                if problem:
                    self._event(
                        job,
                        "Warning",
                        JobEventReason.PVC_ERROR,
                        f"pod {slot.name} held back: {problem}",
                    )
                    return None
            async with gate:
                try:
                    for pvc in planned.pvcs:
                        await self._ensure_claim(job, owner, pvc)
                    pod = plugins.on_pod_create(job, planned.pod, task.name, slot.index)
                    made = await self.ctx.client.create(POD, pod, namespace=job.metadata.namespace)
                    cached = self.pods.store.get(f"{made.metadata.namespace}/{made.metadata.name}")
                    if cached is None or cached.metadata.uid != made.metadata.uid:
                        self._created.remember(owner, made)  # until the watch brings it
                except AlreadyExists:
                    cached = self.pods.store.get(f"{job.metadata.namespace}/{slot.name}")
                    if cached is not None and not may_touch(cached.metadata, job.metadata.uid):
                        # A namesake's pod: counted as nobody's, reported (a deleted namesake
                        # Job's pod goes soon; its deletion brings the sync that makes ours).
                        message = clash_message("Pod", slot.name, job_label(job))
                        self._hold(job, JobEventReason.FAILED_CREATE, message)
                        return None
                    return slot
                except ClaimUnusableError as exc:
                    self._hold(job, JobEventReason.PVC_ERROR, f"pod {slot.name}: {exc}")
                    return None
                except Invalid as exc:
                    raise PodRejectedError(f"pod {slot.name}: {exc.message}") from exc
                except ApiError as exc:
                    self._event(
                        job,
                        "Warning",
                        JobEventReason.FAILED_CREATE,
                        f"Error creating pod {slot.name}: {exc}",
                    )
                    raise
            return slot

        results = await asyncio.gather(*(one(s) for s in slots))
        return [slot for slot in results if slot is not None]

    async def _ensure_claim(self, job: Job, owner: str, pvc: dict[str, Any]) -> None:
        """The pod's claim exists and is the Job's own and alive, or ClaimUnusableError. A
        cached claim is judged without a request; an unseen one goes to the PVC creator (whose
        409 path reads and judges it the same way)."""
        meta = pvc["metadata"]
        cached = self.claims.store.get(f"{meta['namespace']}/{meta['name']}")
        if cached is not None:
            problem = claim_problem(cached, job.metadata.uid)
            if problem is not None:
                raise problem
            return
        await self.pvcs.ensure(owner, pvc)


def _handlers(**funcs: Any) -> HandlerFuncs[Any]:
    handler: HandlerFuncs[Any] = HandlerFuncs(**funcs)
    return handler


__all__ = ["JobController", "job_pod_key"]
