"""The command controller: Commands nobody else will run are removed, with an Event saying why.

A Command aimed at a Job is the job controller's, one aimed at a Queue the queue controller's;
each deletes it first and then runs it once. A Command with no target, or aimed at any other
kind, would otherwise stay forever and look pending to the user: this controller records a
Warning Event on it (visible with ``kubectl describe command``) and deletes it, touching nothing
else.

A Command aimed at a Job that does not exist is removed the same way (Volcano deletes it without
a word), once it is older than ``TARGET_GRACE`` seconds: a Job applied together with its Command
can reach this process's cache a moment after it.
"""

from __future__ import annotations

import contextlib
from typing import Final

from caldera.api.kinds import COMMAND, JOB
from caldera.api.meta import ObjectReference, parse_time
from caldera.api.stored import UNKNOWN_TARGET, command_target_error
from caldera.api.volcano import BATCH_API_VERSION, BUS_API_VERSION, SCHEDULING_API_VERSION, Command
from caldera.kube.errors import NotFound
from controllers.runtime import Controller, Result
from informers.store import HandlerFuncs, split_key

# (apiVersion, kind) of the targets another controller runs.
HANDLED_TARGETS = frozenset({(BATCH_API_VERSION, "Job"), (SCHEDULING_API_VERSION, "Queue")})
TARGET_GRACE: Final = 5.0
"""Seconds a Command for a Job not (yet) in the cache waits before it is removed."""


def unhandled_reason(command: Command) -> str | None:
    """Why no controller will run ``command``, or None when one will (pure)."""
    target = command.target
    if target is None or not target.kind or not target.name:
        return "it names no target; set target to the Job or Queue it is for"
    if (target.api_version, target.kind) not in HANDLED_TARGETS:
        return (
            f"its target {target.kind} ({target.api_version or 'no apiVersion'}) is neither a "
            f"{BATCH_API_VERSION} Job nor a {SCHEDULING_API_VERSION} Queue"
        )
    return None


class CommandController(Controller):
    name = "command"

    def setup(self) -> None:
        self.commands = self.ctx.informers.informer(COMMAND)
        handler: HandlerFuncs[Command] = HandlerFuncs(
            add=self._maybe_enqueue, update=lambda _old, new: self._maybe_enqueue(new)
        )
        self.commands.add_handler(handler)
        self.jobs = self.ctx.informers.informer(JOB)

    def _maybe_enqueue(self, command: Command) -> None:
        target = command.target
        if unhandled_reason(command) is not None or (
            target is not None and (target.api_version, target.kind) == (BATCH_API_VERSION, "Job")
        ):
            self.enqueue(command)

    def _missing_job(self, command: Command) -> tuple[str | None, float]:
        """(why the Command's Job target is missing, or None; seconds left of its grace)."""
        target = command.target
        if target is None or (target.api_version, target.kind) != (BATCH_API_VERSION, "Job"):
            return None, 0.0
        if self.jobs.store.get(f"{command.metadata.namespace}/{target.name}") is not None:
            return None, 0.0
        created = command.metadata.creation_timestamp
        now = self.ctx.clock()
        age = (now - parse_time(created)).total_seconds() if created else TARGET_GRACE
        why = command_target_error(target.name, exists=False, age=age, grace=TARGET_GRACE)
        return why, max(TARGET_GRACE - age, 0.0)

    async def reconcile(self, key: str) -> Result | None:
        command = self.commands.store.get(key)
        if command is None:
            return None
        reason = unhandled_reason(command)
        if reason is None:
            reason, wait = self._missing_job(command)
            if reason is None:
                # The job controller runs it; a missing Job is looked for again after the grace.
                return Result(requeue_after=wait) if wait else None
        namespace, name = split_key(key)
        ref = ObjectReference(
            api_version=BUS_API_VERSION,
            kind="Command",
            namespace=namespace or "",
            name=name,
            uid=command.metadata.uid,
        )
        self.ctx.recorder.record(
            ref, "Warning", UNKNOWN_TARGET, f"Command {name} was removed: {reason}"
        )
        with contextlib.suppress(NotFound):
            await self.ctx.client.delete(
                COMMAND, name, namespace=namespace, uid=command.metadata.uid
            )
        self.log.info("removed a command no controller runs", reason=reason)
        return None
