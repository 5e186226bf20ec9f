"""The queue controller: Queue state, OpenQueue/CloseQueue commands, hierarchy and metrics.

Keys. A Queue is cluster-scoped, so its key is its bare name; a Command is namespaced, so its key
is "namespace/name". One work queue carries both and the slash tells them apart.

Who may have a queue Command run (``controllers.queue.access``): a Command in a trusted namespace
(``--queue-command-namespaces``), or one whose stamped requester a SubjectAccessReview, asked
before the delete, allows to update the queue. Any other is deleted with a Warning Event
``CommandForbidden`` on it, and the queue is left alone. Volcano runs every queue Command.

Commands run at most once, as in Volcano: the controller deletes the Command first (with a UID
precondition, so of two workers or replicas only one wins), then records the action for the target
queue in memory and queues the queue's key. The queue's reconcile takes the action and applies it;
if that write fails, the action is put back and the key retried, so a transient error does not
lose a command. A process that dies between the delete and the write loses it, as Volcano does.
This in-memory hand-over is the one place where a reconcile gets more than a key: a command is an
edge ("close it now"), not a level.

Everything else is level-based: every Queue or PodGroup change queues the queue it concerns (and a
queue change also queues its children, which follow their parent), and ``controllers.queue.state``
decides the state from the cache. Writes carry the resourceVersion the decision was made from, so
a decision from a stale cache is refused (409) and retried once the cache has caught up, instead of
undoing a newer change. Order of writes: the closed-by-parent mark is set before the state that
depends on it and cleared after it, so a failure between the two writes never loses a reopening.

Objects stored without the webhook (``controllers.queue.badinput``): a Queue spec the webhook
would refuse gets an InvalidSpec condition and one Warning Event, and keeps working; a PodGroup
naming a missing queue gets an Unschedulable condition and one Warning Event after
``QUEUE_GRACE`` seconds (its queue may be on its way), removed once the queue exists.

The root and default queues are created when missing (at start and whenever one is deleted).
"""

from __future__ import annotations

import os
from typing import Any, Final

import msgspec

from caldera.api.authz import SUBJECT_ACCESS_REVIEW
from caldera.api.kinds import COMMAND, PODGROUP, QUEUE
from caldera.api.meta import ObjectMeta, ObjectReference, format_time, parse_time
from caldera.api.stored import UNKNOWN_TARGET, not_found, queue_spec_errors
from caldera.api.volcano import (
    CLOSED_BY_PARENT_KEY,
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    SCHEDULING_API_VERSION,
    Command,
    PodGroup,
    Queue,
    QueueSpec,
)
from caldera.kube.errors import AlreadyExists, Conflict, NotFound
from controllers.queue.access import FORBIDDEN, Ask, Refuse, access_answer, command_access
from controllers.queue.badinput import INVALID_SPEC, podgroup_conditions, queue_conditions
from controllers.queue.metrics import QueueMetrics, count_phases
from controllers.queue.state import (
    Action,
    current_state,
    decide,
    is_closed_by_parent,
    needs_root_parent,
    parent_name,
)
from controllers.runtime import Controller, ControllerContext, Result
from informers.store import HandlerFuncs, split_key

QUEUE_GRACE: Final = 5.0
"""Seconds a PodGroup waits for its queue to reach the cache before it is reported missing."""
BY_PARENT: Final = "queue-controller/queues-by-parent"
BY_QUEUE: Final = "queue-controller/podgroups-by-queue"
BUILTIN_QUEUES: Final = {
    ROOT_QUEUE: QueueSpec(weight=1, reclaimable=False),
    DEFAULT_QUEUE: QueueSpec(weight=1, reclaimable=True, parent=ROOT_QUEUE),
}
SUCCESS_MESSAGE: Final = {Action.OPEN: "Open queue succeed", Action.CLOSE: "Close queue succeed"}


def targets_queue(command: Command) -> bool:
    """Whether a Command is for this controller: its target is a scheduling.volcano.sh Queue."""
    target = command.target
    return (
        target is not None
        and target.api_version == SCHEDULING_API_VERSION
        and target.kind == QUEUE.kind
    )


def _queue_ref(name: str, uid: str = "") -> ObjectReference:
    return ObjectReference(api_version=QUEUE.api_version, kind=QUEUE.kind, name=name, uid=uid)


class QueueController(Controller):
    """Reconciles Queues (by name) and queue Commands (by namespace/name)."""

    name = "queue"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.queue_metrics = QueueMetrics(ctx.registry)
        # Actions of deleted Commands waiting for their queue's reconcile (see module docstring).
        self._pending: dict[str, Action] = {}
        self.trusted = ctx.settings.trusted_command_namespaces(os.environ)

    def setup(self) -> None:
        self.queues = self.ctx.informers.informer(QUEUE)
        self.podgroups = self.ctx.informers.informer(PODGROUP)
        self.commands = self.ctx.informers.informer(COMMAND)
        self.queues.add_indexer(BY_PARENT, lambda q: [p] if (p := parent_name(q)) else [])
        self.podgroups.add_indexer(BY_QUEUE, lambda pg: [pg.spec.queue])
        on_queue: HandlerFuncs[Queue] = HandlerFuncs(
            add=self._queue_changed,
            update=lambda _old, new: self._queue_changed(new),
            delete=self._queue_changed,
        )
        on_podgroup: HandlerFuncs[PodGroup] = HandlerFuncs(
            add=self._podgroup_changed,
            update=self._podgroup_moved,
            delete=self._podgroup_changed,
        )
        on_command: HandlerFuncs[Command] = HandlerFuncs(
            add=self._command_seen, update=lambda _old, new: self._command_seen(new)
        )
        self.queues.add_handler(on_queue)
        self.podgroups.add_handler(on_podgroup)
        self.commands.add_handler(on_command)
        for name in BUILTIN_QUEUES:
            self.queue.add(name)

    # ---- handlers: keys only --------------------------------------------------------------

    def _queue_changed(self, queue: Queue) -> None:
        self.queue.add(queue.metadata.name)
        for child in self.queues.store.index_keys(BY_PARENT, queue.metadata.name):
            self.queue.add(child)

    def _podgroup_changed(self, pg: PodGroup) -> None:
        self.queue.add(pg.spec.queue)

    def _podgroup_moved(self, old: PodGroup, new: PodGroup) -> None:
        self.queue.add(new.spec.queue)
        if old.spec.queue != new.spec.queue:
            self.queue.add(old.spec.queue)

    def _command_seen(self, command: Command) -> None:
        if targets_queue(command):
            self.enqueue(command)

    # ---- reconcile --------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result | None:
        if "/" in key:
            await self._take_command(key)
            return None
        return await self._sync_queue(key)

    async def _take_command(self, key: str) -> None:
        command = self.commands.store.get(key)
        if command is None or command.target is None:
            return
        namespace, name = split_key(key)
        # Asked before the delete: a failed question raises and is retried, the Command kept.
        access = command_access(command, self.trusted)
        if isinstance(access, Ask):
            answer = await self.ctx.client.create(SUBJECT_ACCESS_REVIEW, access.review)
            access = access_answer(command, access.requester, answer.status)
        try:
            await self.ctx.client.delete(
                COMMAND, name, namespace=namespace, uid=command.metadata.uid
            )
        except (NotFound, Conflict):
            return  # someone else took it: each command runs at most once
        if isinstance(access, Refuse):
            ref = ObjectReference(
                api_version=command.api_version,
                kind=command.kind,
                namespace=namespace or "",
                name=name,
                uid=command.metadata.uid,
            )
            message = f"Command {name} was removed: {access.reason}"
            self.ctx.recorder.record(ref, "Warning", FORBIDDEN, message)
            self.log.warning("queue command refused", target=command.target.name, why=access.reason)
            return
        target = command.target.name
        cached = self.queues.store.get(target)
        involved = (
            _queue_ref(target, cached.metadata.uid)
            if cached is not None
            else ObjectReference(
                api_version=command.api_version,
                kind=command.kind,
                namespace=command.metadata.namespace,
                name=name,
                uid=command.metadata.uid,
            )
        )
        if cached is None:
            # Volcano drops it silently; the user is told which field named nothing.
            self.ctx.recorder.record(
                involved,
                "Warning",
                UNKNOWN_TARGET,
                f"Command {name} was removed: {not_found('target.name', target)}",
            )
            return
        if command.action not in (Action.OPEN, Action.CLOSE):
            self.ctx.recorder.record(
                involved,
                "Warning",
                command.action or "UnknownAction",
                f"Command {key} has unknown action {command.action!r}: "
                f"a queue accepts {Action.OPEN} or {Action.CLOSE}; the command was removed",
            )
            return
        self.log.info("command taken", action=command.action, target=target)
        self._pending[target] = Action(command.action)
        self.queue.add(target)

    async def _sync_queue(self, name: str) -> Result | None:
        queue = self.queues.store.get(name)
        groups = self.podgroups.store.by_index(BY_QUEUE, name)
        if queue is None:
            self._pending.pop(name, None)
            self.queue_metrics.forget(name)
            if name in BUILTIN_QUEUES:
                await self._create_builtin(name)
                return None
            return await self._mark_groups(groups, queue_exists=False)
        counts = count_phases(groups)
        self.queue_metrics.set(name, counts)
        if queue.metadata.deletion_timestamp:
            return None
        await self._mark_groups(groups, queue_exists=True)
        action = self._pending.pop(name, Action.SYNC)
        try:
            queue = await self._report_spec(queue)
            if needs_root_parent(queue):
                queue = await self._patch(queue, spec={"parent": ROOT_QUEUE})
            await self._converge(queue, action, sum(counts.values()))
        except Exception:
            if action is not Action.SYNC:
                self._pending.setdefault(name, action)
            raise
        return None

    async def _report_spec(self, queue: Queue) -> Queue:
        """A spec the webhook would refuse (stored without it) is named in the InvalidSpec
        condition and a Warning Event, once; the queue keeps working (the scheduler clamps the
        weight to 1..65535 and gives the guarantee even above the capability)."""
        errors = queue_spec_errors(queue.spec)
        conditions = queue_conditions(queue, errors, format_time(self.ctx.clock()))
        if conditions is None:
            return queue
        body = {
            "metadata": {"resourceVersion": queue.metadata.resource_version},
            "status": {"conditions": msgspec.to_builtins(conditions)},
        }
        written = await self.ctx.client.patch_status(QUEUE, queue.metadata.name, body)
        if errors:
            ref = _queue_ref(queue.metadata.name, queue.metadata.uid)
            self.ctx.recorder.record(ref, "Warning", INVALID_SPEC, "; ".join(errors))
        return written

    async def _mark_groups(self, groups: list[PodGroup], *, queue_exists: bool) -> Result | None:
        """PodGroups naming a missing queue get an Unschedulable condition and a Warning Event
        naming spec.queue, once; the condition goes when the queue exists. A PodGroup younger
        than ``QUEUE_GRACE`` is looked at again later: its queue may be on its way."""
        now = self.ctx.clock()
        wait: float | None = None
        for group in groups:
            if not queue_exists and group.metadata.creation_timestamp:
                age = (now - parse_time(group.metadata.creation_timestamp)).total_seconds()
                if age < QUEUE_GRACE:
                    left = QUEUE_GRACE - age
                    wait = left if wait is None else min(wait, left)
                    continue
            conditions = podgroup_conditions(group, queue_exists=queue_exists, now=format_time(now))
            if conditions is None:
                continue
            meta = group.metadata
            body = {
                "metadata": {"resourceVersion": meta.resource_version},
                "status": {"conditions": msgspec.to_builtins(conditions)},
            }
            try:
                # No status subresource on PodGroups; the resourceVersion guards the scheduler's
                # own writes.
                await self.ctx.client.patch(PODGROUP, meta.name, body, namespace=meta.namespace)
            except NotFound:
                continue
            if not queue_exists:
                ref = ObjectReference(
                    api_version=PODGROUP.api_version,
                    kind=PODGROUP.kind,
                    namespace=meta.namespace,
                    name=meta.name,
                    uid=meta.uid,
                )
                message = not_found("spec.queue", group.spec.queue)
                self.ctx.recorder.record(ref, "Warning", "Unschedulable", message)
        return Result(requeue_after=wait) if wait is not None else None

    async def _converge(self, queue: Queue, action: Action, podgroups: int) -> None:
        name = queue.metadata.name
        parent = parent_name(queue)
        parent_queue = self.queues.store.get(parent) if parent else None
        marked = is_closed_by_parent(queue)
        decision = decide(
            name=name,
            current=current_state(queue),
            action=action,
            podgroups=podgroups,
            parent_state=current_state(parent_queue) if parent_queue is not None else None,
            closed_by_parent=marked,
        )
        ref = _queue_ref(name, queue.metadata.uid)
        if decision.refusal:
            self.ctx.recorder.record(ref, "Warning", action.value, decision.refusal)
        if decision.closed_by_parent and not marked:
            queue = await self._patch(queue, annotations={CLOSED_BY_PARENT_KEY: "true"})
        if queue.status.state != decision.state:
            queue = await self._patch(queue, state=decision.state.value)
            self.log.info("queue state changed", state=decision.state.value, action=action.value)
        if marked and not decision.closed_by_parent:
            await self._patch(queue, annotations={CLOSED_BY_PARENT_KEY: None})
        if action is not Action.SYNC and not decision.refusal:
            self.ctx.recorder.record(ref, "Normal", action.value, SUCCESS_MESSAGE[action])

    async def _patch(
        self,
        queue: Queue,
        *,
        spec: dict[str, Any] | None = None,
        annotations: dict[str, str | None] | None = None,
        state: str | None = None,
    ) -> Queue:
        """A merge patch that applies only to the version the decision was made from (409 when
        the queue changed since). ``state`` goes through the status subresource."""
        meta: dict[str, Any] = {"resourceVersion": queue.metadata.resource_version}
        if annotations is not None:
            meta["annotations"] = annotations
        body: dict[str, Any] = {"metadata": meta}
        if state is not None:
            body["status"] = {"state": state}
            return await self.ctx.client.patch_status(QUEUE, queue.metadata.name, body)
        if spec is not None:
            body["spec"] = spec
        return await self.ctx.client.patch(QUEUE, queue.metadata.name, body)

    async def _create_builtin(self, name: str) -> None:
        body = Queue(metadata=ObjectMeta(name=name), spec=BUILTIN_QUEUES[name])
        try:
            await self.ctx.client.create(QUEUE, body)
        except AlreadyExists:
            return  # the cache had not seen it yet
        self.log.info("created missing queue", queue=name)
