"""The command controller: Commands nobody else will run are removed, with an Event saying why.

A Command aimed at a Job is the job controller's, one aimed at a Queue the queue controller's;
each deletes it first and then runs it once. A Command with no target, or aimed at any other
kind, would otherwise stay forever and look pending to the user: this controller records a
Warning Event on it (visible with ``kubectl describe command``) and deletes it, touching nothing
else.
"""

from __future__ import annotations

import contextlib

from caldera.api.kinds import COMMAND
from caldera.api.meta import ObjectReference
from caldera.api.volcano import BATCH_API_VERSION, BUS_API_VERSION, SCHEDULING_API_VERSION, Command
from caldera.kube.errors import NotFound
from controllers.runtime import Controller, Result
from informers.store import HandlerFuncs, split_key

# (apiVersion, kind) of the targets another controller runs.
HANDLED_TARGETS = frozenset({(BATCH_API_VERSION, "Job"), (SCHEDULING_API_VERSION, "Queue")})


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

    def _maybe_enqueue(self, command: Command) -> None:
        if unhandled_reason(command) is not None:
            self.enqueue(command)

    async def reconcile(self, key: str) -> Result | None:
        command = self.commands.store.get(key)
        if command is None:
            return None
        reason = unhandled_reason(command)
        if reason is None:
            return None
        namespace, name = split_key(key)
        ref = ObjectReference(
            api_version=BUS_API_VERSION,
            kind="Command",
            namespace=namespace or "",
            name=name,
            uid=command.metadata.uid,
        )
        self.ctx.recorder.record(
            ref, "Warning", "UnknownTarget", f"Command {name} was removed: {reason}"
        )
        with contextlib.suppress(NotFound):
            await self.ctx.client.delete(
                COMMAND, name, namespace=namespace, uid=command.metadata.uid
            )
        self.log.info("removed a command no controller runs", reason=reason)
        return None
