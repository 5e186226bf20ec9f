"""The cronjob controller: starts the Volcano Jobs of ``batch.volcano.sh/v1alpha1`` CronJobs on
their schedules, as Volcano's pkg/controllers/cronjob does.

Keys are CronJob keys. A CronJob's own events queue it, and so does every event of a Job it
controls (its controller reference, kind CronJob): the Jobs are indexed by that owner, so a
reconcile reads them at once. The reconcile reads the cache, asks ``controllers.cronjob.plan``
what to do at ``ctx.clock()``, and writes, in this order:

1. finished Jobs beyond the history limits are deleted (a failure is a ``FailedDelete`` Warning;
   the next reconcile tries again);
2. with ``Replace``, the active Jobs are deleted; one that cannot be is an error (retried), and
   no new Job starts beside it;
3. the Job is created. Its name is deterministic, so a create after a stale cache read answers
   409: the Job found under that name is adopted when this CronJob controls it, and otherwise
   the time is given up with a ``ForeignJob`` Warning;
4. the status is written with a PUT of the status subresource carrying the cached
   resourceVersion, so a status computed from a stale CronJob is refused (409) and recomputed.

Then the key comes back just after the next scheduled time. Deletes carry the Job's UID as a
precondition and Background propagation; Events go on the CronJob.

A reference in ``status.active`` to a Job the cache does not have is checked with a GET before the
plan calls it stale: the cache may simply not have seen a Job created a moment ago.
"""

from __future__ import annotations

from typing import Final

import msgspec

from caldera.api.kinds import CRONJOB, JOB, reference
from caldera.api.meta import ObjectReference, controller_of
from caldera.api.names import go_quote
from caldera.api.volcano import BATCH_API_VERSION, CronJob, CronJobStatus, Job
from caldera.kube.errors import AlreadyExists, ApiError, NotFound
from controllers.cronjob.plan import Plan, consumed, finished, plan, started
from controllers.runtime import Controller, Result, controller_key, delete_child, enqueue_keys
from informers.store import HandlerFuncs, split_key

BY_CRONJOB: Final = "cronjob-controller/jobs-by-cronjob"


def _owner_key(job: Job) -> str | None:
    return controller_key(job.metadata, "CronJob", BATCH_API_VERSION)


def _controlled_by(job: Job, cronjob: CronJob) -> bool:
    ref = controller_of(job.metadata)
    return ref is not None and ref.kind == "CronJob" and ref.uid == cronjob.metadata.uid


class CronJobController(Controller):
    """Starts, replaces and cleans up the Jobs of CronJobs."""

    name = "cronjob"

    def setup(self) -> None:
        self.cronjobs = self.ctx.informers.informer(CRONJOB)
        self.jobs = self.ctx.informers.informer(JOB)
        self.jobs.add_indexer(BY_CRONJOB, lambda j: [k] if (k := _owner_key(j)) else [])
        on_cronjob: HandlerFuncs[CronJob] = HandlerFuncs(
            add=self.enqueue, update=lambda _old, new: self.enqueue(new), delete=self.enqueue
        )
        self.cronjobs.add_handler(on_cronjob)
        self.jobs.add_handler(enqueue_keys(self.queue, _owner_key))

    async def _jobs(self, key: str, cronjob: CronJob) -> list[Job]:
        """The Jobs ``cronjob`` controls: the cache's, plus active ones it has not seen yet."""
        jobs = [j for j in self.jobs.store.by_index(BY_CRONJOB, key) if _controlled_by(j, cronjob)]
        seen = {j.metadata.uid for j in jobs}
        for ref in cronjob.status.active:
            if ref.uid in seen:
                continue
            try:
                fresh = await self.ctx.client.get(JOB, ref.name, namespace=ref.namespace)
            except NotFound:
                continue
            if fresh.metadata.uid == ref.uid and _controlled_by(fresh, cronjob):
                jobs.append(fresh)
        return jobs

    async def reconcile(self, key: str) -> Result | None:
        namespace, _ = split_key(key)
        cronjob = self.cronjobs.store.get(key)
        if namespace is None or cronjob is None or cronjob.metadata.deletion_timestamp:
            return None
        todo = plan(cronjob, await self._jobs(key, cronjob), self.ctx.clock())
        involved = reference(CRONJOB, cronjob.metadata)
        for note in todo.notes:
            self.ctx.recorder.record(involved, note.type, note.reason, note.message)
        for job in todo.expire:
            await self._delete(job, involved)
        for job in todo.replace:
            if not await self._delete(job, involved):
                raise RuntimeError(f"could not replace job {namespace}/{job.metadata.name}")
        status = todo.status
        try:
            status = await self._start(cronjob, todo, involved)
        finally:
            if status != cronjob.status:
                await self._write_status(cronjob, status)
        return Result(requeue_after=todo.requeue_after)

    async def _start(
        self, cronjob: CronJob, todo: Plan, involved: ObjectReference
    ) -> CronJobStatus:
        """Create the planned Job; the status to write afterwards. Raises when the create fails
        for a reason a retry may fix (after the caller wrote the rest of the status)."""
        status = todo.status
        if todo.create is None or todo.scheduled is None:
            return status
        job = todo.create
        namespace, name = job.metadata.namespace, job.metadata.name
        try:
            created = await self.ctx.client.create(JOB, job, namespace=namespace)
        except AlreadyExists:
            try:
                existing = await self.ctx.client.get(JOB, name, namespace=namespace)
            except NotFound:
                raise RuntimeError(f"job {namespace}/{name} vanished after a conflict") from None
            if not _controlled_by(existing, cronjob):
                owner = controller_of(existing.metadata)
                self.ctx.recorder.record(
                    involved,
                    "Warning",
                    "ForeignJob",
                    f"Job {name} exists but is not owned by this CronJob "
                    f"(current owner: {owner.name if owner else 'none'})",
                )
                return consumed(status, todo.scheduled)  # the time cannot run: give it up
            if finished(existing):
                return consumed(status, todo.scheduled)
            self.log.info("adopted the job of this time, created before", job=name)
            return started(status, existing, todo.scheduled)
        except ApiError as exc:
            self.ctx.recorder.record(
                involved, "Warning", "FailedCreate", f"Failed to create job: {exc}"
            )
            raise
        self.ctx.recorder.record(
            involved,
            "Normal",
            "SuccessfulCreate",
            f"Created job {name} for CronJob {namespace}/{cronjob.metadata.name}",
        )
        self.log.info("started job", job=name, scheduled=todo.scheduled.isoformat())
        return started(status, created, todo.scheduled)

    async def _delete(self, job: Job, involved: ObjectReference) -> bool:
        """Delete ``job`` (gone already counts); False, with a Warning, when the API refuses."""
        name = job.metadata.name
        try:
            deleted = await delete_child(self.ctx.client, JOB, job.metadata)
        except ApiError as exc:
            self.ctx.recorder.record(
                involved, "Warning", "FailedDelete", f"Error deleting job {go_quote(name)}: {exc}"
            )
            return False
        if deleted:  # else gone, or replaced by another Job of that name: not ours to delete
            self.ctx.recorder.record(
                involved, "Normal", "SuccessfulDelete", f"Deleted job {go_quote(name)}"
            )
        return True

    async def _write_status(self, cronjob: CronJob, status: CronJobStatus) -> None:
        body = msgspec.structs.replace(cronjob, status=status)
        try:
            await self.ctx.client.update_status(CRONJOB, body, namespace=cronjob.metadata.namespace)
        except NotFound:
            return  # deleted meanwhile
