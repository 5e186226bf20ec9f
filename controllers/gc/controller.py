"""The gc controller: deletes finished Jobs once their ttlSecondsAfterFinished has passed.

The cache says when; just before deleting, a fresh GET checks again (the TTL may have been
changed or the Job restarted since the cache saw it), and the delete carries the Job's UID as a
precondition so a new Job of the same name is never deleted by mistake. Foreground propagation
removes the pods, PodGroup and other dependents before the Job itself disappears.
"""

from __future__ import annotations

from caldera.api.kinds import JOB
from caldera.api.volcano import Job
from caldera.kube.errors import Conflict, NotFound
from caldera.kube.requests import PropagationPolicy
from controllers.gc.ttl import seconds_until_expiry
from controllers.runtime import Controller, Result
from informers.store import HandlerFuncs, split_key


class GarbageCollector(Controller):
    name = "gc"

    def setup(self) -> None:
        self.jobs = self.ctx.informers.informer(JOB)
        handler: HandlerFuncs[Job] = HandlerFuncs(
            add=self._maybe_enqueue, update=lambda _old, new: self._maybe_enqueue(new)
        )
        self.jobs.add_handler(handler)

    def _maybe_enqueue(self, job: Job) -> None:
        if job.spec.ttl_seconds_after_finished is not None:
            self.enqueue(job)

    async def reconcile(self, key: str) -> Result | None:
        cached = self.jobs.store.get(key)
        if cached is None:
            return None
        remaining = seconds_until_expiry(cached, self.ctx.clock())
        if remaining is None:
            return None
        if remaining > 0:
            return Result(requeue_after=remaining)
        namespace, name = split_key(key)
        try:
            fresh = await self.ctx.client.get(JOB, name, namespace=namespace)
        except NotFound:
            return None
        remaining = seconds_until_expiry(fresh, self.ctx.clock())
        if remaining is None:
            return None
        if remaining > 0:
            return Result(requeue_after=remaining)
        try:
            await self.ctx.client.delete(
                JOB,
                name,
                namespace=namespace,
                uid=fresh.metadata.uid,
                propagation_policy=PropagationPolicy.FOREGROUND,
            )
        except (NotFound, Conflict):
            return None  # already gone, or replaced by a new Job of the same name
        self.log.info(
            "deleted finished job after its TTL", ttl=fresh.spec.ttl_seconds_after_finished
        )
        return None
