"""A Job's inbox and one reconcile's drain of it, decided without I/O: what the job controller
(``controllers/job/controller.py``) and the simulator's (``simulator/controller.py``) both run.

Informer handlers post items to the Job's inbox: `Request`\\ s (``controllers.job.events``), a
`CommandItem` for a Command on the Job (`command_item`), a `Timer` when a delayed action's
timeout expires. A reconcile takes the inbox as a `Batch` (``events_first`` order; a plain sync
when empty) and asks `Batch.decide` about each item, which answers with a `Turn`:

- ``armed``: a delayed action the item scheduled; arm a timer that posts ``Timer(token)``;
- ``decision``: the action to run now (``controllers.job.execution`` says how), after which
  `Batch.ran` cancels what it supersedes; None: nothing runs for this item;
- ``post_sync``: a sync waits for the requests posted while the batch ran: post a plain sync.

A Command is consumed (deleted, or told unknown) by the I/O layer before `Batch.decide` sees it;
an unknown action only removes the Command. `FinishedBeforeJob` holds back the finished pods
seen before their Job (the informers list in parallel at start) until the Job is seen.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from caldera.api.core import Pod, PodPhase
from caldera.api.volcano import POLICY_ACTIONS, Action, Command, Job
from controllers.job import events
from controllers.job.events import Request, events_first, plain_sync
from controllers.job.policy import (
    SYNC,
    Decision,
    DelayedAction,
    DelayedActions,
    waits_for_events,
)

__all__ = [
    "Batch",
    "CommandItem",
    "FinishedBeforeJob",
    "Item",
    "Timer",
    "Turn",
    "command_item",
    "plain_sync_of",
    "waits_for_job",
]

_USER_ACTIONS = frozenset(str(a) for a in POLICY_ACTIONS)
_FINISHED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


@dataclass(frozen=True, slots=True)
class Timer:
    """A delayed action whose timeout has expired."""

    token: int


@dataclass(frozen=True, slots=True)
class CommandItem:
    """A Command to consume: deleted first, then its action runs once."""

    namespace: str
    name: str
    request: Request
    unknown_action: str = ""  # an action no Job runs: the Command is only removed


Item = Request | Timer | CommandItem


def command_item(command: Command) -> CommandItem | None:
    """The inbox item of a Command on a Job; None when it targets no Job."""
    request = events.on_command(command)
    if request is None:
        return None
    unknown = "" if command.action in _USER_ACTIONS else command.action or "(none)"
    return CommandItem(command.metadata.namespace, command.metadata.name, request, unknown)


def plain_sync_of(job: Job) -> Request:
    """A plain sync of `job`."""
    return Request(job.metadata.namespace, job.metadata.name)


def waits_for_job(pod: Pod, task_replicas: int | None, job_keys: Sequence[str]) -> bool:
    """Whether a pod just added must wait for its Job: it finished (its request needs the task's
    replicas to tell TaskCompleted) and it has a Job whose task the cache does not know yet."""
    return pod.status.phase in _FINISHED and task_replicas is None and bool(job_keys)


class FinishedBeforeJob:
    """Finished pods seen before their Job was cached, by Job key (see `waits_for_job`)."""

    def __init__(self) -> None:
        self._by_job: dict[str, set[str]] = {}

    def hold(self, job_key: str, pod_name: str) -> None:
        """Judge the pod when the Job is seen."""
        self._by_job.setdefault(job_key, set()).add(pod_name)

    def release(self, job_key: str) -> list[str]:
        """The Job is seen: its held pods' names, sorted, and forgotten."""
        return sorted(self._by_job.pop(job_key, ()))

    def __len__(self) -> int:
        return sum(len(names) for names in self._by_job.values())


@dataclass(frozen=True, slots=True)
class Turn:
    """What one item of a batch calls for (see the module docstring)."""

    decision: Decision | None = None
    armed: DelayedAction | None = None
    post_sync: bool = False


_NOTHING = Turn()
_SYNC = Turn(SYNC)


class Batch:
    """One reconcile's items, in the order they run: ``events_first`` (a plain sync when the
    inbox is empty), with a sync that waits for later items moved to the end."""

    __slots__ = ("_index", "items")

    def __init__(self, items: Sequence[Item], job: Job) -> None:
        self.items: list[Item] = events_first(items) or [plain_sync_of(job)]
        self._index = 0

    def __iter__(self) -> Iterator[Item]:
        while self._index < len(self.items):
            item = self.items[self._index]
            self._index += 1
            yield item

    def rest(self) -> list[Item]:
        """The items not yet taken (kept for the retry when an action failed)."""
        return self.items[self._index :]

    def decide(
        self, item: Item, job: Job, delayed: DelayedActions, posted: Sequence[object]
    ) -> Turn:
        """The `Turn` of `item` (just taken) for the cached `job`; ``posted``: the requests
        posted to the inbox since the batch was taken."""
        armed: DelayedAction | None = None
        if isinstance(item, Timer):
            entry = delayed.take(item.token)
            if entry is None:
                return _NOTHING  # cancelled meanwhile
            decision = entry.decision
        else:
            if isinstance(item, CommandItem) and item.unknown_action:
                return _NOTHING  # removed with a Warning Event; nothing else is touched
            request = item.request if isinstance(item, CommandItem) else item
            now, armed = delayed.resolve(job, request)
            if now is None:
                return Turn(armed=armed)
            decision = now
        if waits_for_events(decision, self.items[self._index :]):
            if not plain_sync(self.items[-1]):
                self.items.append(plain_sync_of(job))
            return Turn(armed=armed)  # the batch's last item syncs, after the events before it
        if waits_for_events(decision, posted):
            return Turn(armed=armed, post_sync=True)  # they come next; the sync follows them
        if decision is SYNC and armed is None:
            return _SYNC  # most items: one Turn for them all
        return Turn(decision, armed)

    @staticmethod
    def ran(delayed: DelayedActions, job_key: str, decision: Decision) -> None:
        """`decision` ran on the Job: the delayed actions it supersedes are cancelled."""
        if decision.action != Action.SYNC_JOB:
            delayed.on_action_ran(job_key, decision)
