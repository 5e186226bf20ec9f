"""Lifecycle policies: from a `Request` to an action (Volcano's `applyPolicies` and
`GetStateAction` in pkg/controllers/job/job_controller_util.go).

`apply_policies` is Volcano's ``applyPolicies`` plus ``GetStateAction``: a pure function from the
cached Job and a request to a `Decision` (the action, an optional delay, the action's target).

`DelayedActions` is the bookkeeping of actions delayed by a policy ``timeout``, per job and per
pod. It holds no timers: the I/O layer arms a timer for the token `DelayedActions.schedule`
returns (the job controller's ``loop.call_later`` puts the token in the Job's inbox and queues
the Job's key) and, when the timer fires, executes what `DelayedActions.take` returns (None:
cancelled meanwhile; nothing to do). A cancelled entry's timer may still fire harmlessly. Usage
per request::

    decision, entry = delayed.resolve(job, request)   # cancellations, then the policies
    if entry: arm_timer(entry.token, entry.decision.delay)
    if decision:                                       # not delayed: run now
        run(decision); delayed.on_action_ran(request.job_key, decision)

and on a timer: ``entry = delayed.take(token)``; if not None, run ``entry.decision`` and call
``on_action_ran`` likewise. ``forget_job`` drops a deleted Job's entries.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.duration import DurationError, parse_duration
from caldera.api.stored import policy_errors
from caldera.api.volcano import Action, Event, Job, LifecyclePolicy, policy_events
from controllers.job.events import Request, plain_sync
from controllers.job.state import JOB_TARGET, MAX_MESSAGE, Target, TargetKind

__all__ = [
    "INTERNAL_ACTIONS",
    "INTERNAL_EVENTS",
    "SYNC",
    "TERMINATE",
    "Decision",
    "DelayedAction",
    "DelayedActions",
    "apply_policies",
    "on_failure",
    "policy_problems",
    "policy_timeout",
    "target_of",
]

INTERNAL_EVENTS: Final = frozenset({Event.OUT_OF_SYNC, Event.COMMAND_ISSUED, Event.POD_RUNNING})
INTERNAL_ACTIONS: Final = frozenset(
    {Action.SYNC_JOB, Action.ENQUEUE_JOB, Action.SYNC_QUEUE, Action.OPEN_QUEUE, Action.CLOSE_QUEUE}
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The action to run, after ``delay`` seconds if set (None: now), on ``target``."""

    action: Action
    delay: float | None = None
    target: Target = JOB_TARGET


SYNC: Final = Decision(Action.SYNC_JOB)


def policy_timeout(policy: LifecyclePolicy) -> float | None:
    """The policy's timeout in seconds; None when unset or not a Go duration (the webhook rejects
    those; a bad stored value must not crash the controller)."""
    if policy.timeout is None:
        return None
    try:
        return max(parse_duration(policy.timeout), 0.0)
    except DurationError:
        return None


def target_of(action: Action, request: Request) -> tuple[Action, Target]:
    """Volcano's ``GetStateAction``: the target of a targeted restart.

    RestartTask targets the request's task, RestartPod the request's pod, RestartPartition the
    partition of the request's pod (``volcano.sh/partition-id``). A RestartPartition whose pod
    has no partition targets the pod's task (Volcano kills nothing then, and the failed pod
    stays failed). Without a task (or pod) in the request, they become RestartJob. Every other
    action targets the Job.
    """
    if action is Action.RESTART_PARTITION and request.task_name and request.partition_id:
        return action, Target.of_partition(request.task_name, request.partition_id)
    if action in (Action.RESTART_TASK, Action.RESTART_PARTITION) and request.task_name:
        return action, Target.of_task(request.task_name)
    if action is Action.RESTART_POD and request.pod_name:
        return action, Target.of_pod(request.task_name, request.pod_name)
    if action in (Action.RESTART_TASK, Action.RESTART_PARTITION, Action.RESTART_POD):
        return Action.RESTART_JOB, JOB_TARGET
    return action, JOB_TARGET


def _decision(action: Action, delay: float | None, request: Request) -> Decision:
    action, target = target_of(action, request)
    return Decision(action, delay or None, target)


def _to_action(raw: str) -> Action:
    try:
        return Action(raw)
    except ValueError:  # the webhook rejects these; a stored one behaves as a sync
        return Action.SYNC_JOB


def _match(policies: Sequence[LifecyclePolicy], request: Request) -> Decision | None:
    event = request.event
    for policy in policies:
        events = policy_events(policy)
        if events and event is not None and (event in events or Event.ANY in events):
            timeout = policy_timeout(policy)
            if event is Event.POD_PENDING and timeout is None:
                continue  # PodPending only matches a policy with a timeout
            return _decision(_to_action(policy.action), timeout, request)
        if (
            policy.exit_code is not None
            and request.exit_code is not None
            and policy.exit_code == request.exit_code
        ):
            return _decision(_to_action(policy.action), policy_timeout(policy), request)
    return None


def apply_policies(job: Job, request: Request) -> Decision:
    """The action for `request` on the cached `job` (Volcano's `applyPolicies`), first rule that
    applies:

    1. a Command's action is used as is;
    2. no event, or an internal event (OutOfSync, CommandIssued, PodRunning) → SyncJob;
    3. a request for another Job with the same name (``job_uid`` differs) or from a pod of an
       older run (``job_version`` < status.version) → SyncJob;
    4. the policies of the request's task, then the Job's, first match wins: the event is in
       ``events | {event}`` or the policy has ``*`` (PodPending needs a policy with a timeout),
       or the policy's exitCode equals the request's; the policy's timeout becomes the delay;
    5. otherwise SyncJob.
    """
    if request.action is not None:
        return _decision(request.action, None, request)
    if request.event is None or request.event in INTERNAL_EVENTS:
        return SYNC
    if request.job_uid and request.job_uid != job.metadata.uid:
        return SYNC
    if request.job_version is not None and request.job_version < job.status.version:
        return SYNC
    if request.task_name:
        for task in job.spec.tasks:
            if task.name == request.task_name:
                found = _match(task.policies, request)
                if found is not None:
                    return found
                break
    return _match(job.spec.policies, request) or SYNC


def policy_problems(job: Job) -> str:
    """The Job's policies that no controller runs (stored without the webhook), as one message;
    such a policy acts as SyncJob, as in Volcano. "" when there is none."""
    errors = policy_errors(job.spec)
    if not errors:
        return ""
    return ("; ".join(errors) + "; the policy is ignored")[:MAX_MESSAGE]


TERMINATE: Final = Decision(Action.TERMINATE_JOB)


def on_failure(requeues: int, limit: int) -> Decision | None:
    """Volcano's ``handleJobError``: the action for a Job whose action failed again after its
    key was requeued ``requeues`` times: TerminateJob once that reaches ``limit``
    (``--max-requeue-num``; negative: never), else None (the key is retried after backoff)."""
    return TERMINATE if 0 <= limit <= requeues else None


# --- delayed actions ----------------------------------------------------------------------------


def waits_for_events(decision: Decision, waiting: Sequence[object]) -> bool:
    """Whether a SyncJob must wait for ``waiting``: the requests after it in its batch, or
    those posted while its batch ran.

    A sync judges the Job by the pods as the cache holds them now, which may already show a pod
    whose request is still to come: later in the batch (a lagging controller drains a pod's
    PodPending, whose policy is a sync, with the PodFailed that followed it), or posted to the
    next batch during this batch's writes. Judged first, both pods of an ``exitCode: 3 ->
    AbortJob`` task seen Failed end the Job Failed, not Aborted. So a sync waits while a request
    that may carry a policy waits; one sync runs after them.
    """
    return decision.action == Action.SYNC_JOB and any(not plain_sync(i) for i in waiting)


@dataclass(frozen=True, slots=True)
class DelayedAction:
    """A pending delayed action: its timer ``token``, the request that caused it and the
    decision to run when the delay expires."""

    token: int
    request: Request
    decision: Decision

    @property
    def job_key(self) -> str:
        """The Job's cache key."""
        return self.request.job_key


class DelayedActions:
    """Delayed actions per job and per pod, and the rules that cancel them (as Volcano's):

    - a ``PodRunning`` event cancels the delayed PodFailed and PodEvicted actions of that pod;
    - an event showing that a pod left Pending (PodRunning, PodFailed, PodEvicted,
      TaskCompleted) cancels the delayed PodPending action of the pod with that UID;
    - once a non-internal action has run, the other delayed actions of its scope are cancelled:
      all of the Job's for a Job-wide action, the task's for RestartTask, the partition's for
      RestartPartition (Volcano's per-partition cancellation), the pod's for RestartPod.

    Entries are keyed by (job, pod name, event): a second request with the same key while one is
    pending keeps the first, so a timeout counts from the first occurrence. No timers, no clock,
    no I/O: every method returns what it scheduled or cancelled.
    """

    _LEFT_PENDING: Final = frozenset(
        {Event.POD_RUNNING, Event.POD_FAILED, Event.POD_EVICTED, Event.TASK_COMPLETED}
    )

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        self._by_token: dict[int, DelayedAction] = {}
        self._by_key: dict[tuple[str, str, Event | None], int] = {}

    def __len__(self) -> int:
        return len(self._by_token)

    def pending(self, job_key: str) -> tuple[DelayedAction, ...]:
        """The Job's pending delayed actions, oldest first."""
        return tuple(a for a in self._by_token.values() if a.job_key == job_key)

    def schedule(self, request: Request, decision: Decision) -> DelayedAction | None:
        """Record a delayed action; return it (schedule its token after ``decision.delay``), or
        None when the same job, pod and event already has one pending."""
        key = (request.job_key, request.pod_name, request.event)
        if key in self._by_key:
            return None
        entry = DelayedAction(next(self._tokens), request, decision)
        self._by_token[entry.token] = entry
        self._by_key[key] = entry.token
        return entry

    def resolve(self, job: Job, request: Request) -> tuple[Decision | None, DelayedAction | None]:
        """A request through the cancellation rules and the policies: (the decision to run
        now, None when a policy delays it; the delayed action this request scheduled, for
        which the caller arms a timer, None when it scheduled none)."""
        self.on_request(request)
        decision = apply_policies(job, request)
        if not decision.delay:
            return decision, None
        return None, self.schedule(request, decision)

    def take(self, token: int) -> DelayedAction | None:
        """The timer of `token` fired: remove and return its action, None if it was cancelled."""
        entry = self._by_token.pop(token, None)
        if entry is not None:
            self._by_key.pop(self._key(entry), None)
        return entry

    def on_request(self, request: Request) -> tuple[DelayedAction, ...]:
        """Apply the per-pod cancellation rules for a new request; return what was cancelled."""
        event = request.event

        def cancelled(a: DelayedAction) -> bool:
            if a.job_key != request.job_key:
                return False
            if (
                event is Event.POD_RUNNING
                and request.pod_name
                and a.request.pod_name == request.pod_name
                and a.request.event in (Event.POD_FAILED, Event.POD_EVICTED)
            ):
                return True
            return (
                event in self._LEFT_PENDING
                and bool(request.pod_uid)
                and a.request.event is Event.POD_PENDING
                and a.request.pod_uid == request.pod_uid
            )

        return self._cancel(cancelled)

    def on_action_ran(self, job_key: str, decision: Decision) -> tuple[DelayedAction, ...]:
        """A non-internal action ran: cancel the other delayed actions of its scope and return
        them. Internal actions (SyncJob, ...) cancel nothing."""
        if decision.action in INTERNAL_ACTIONS:
            return ()
        target = decision.target

        def in_scope(a: DelayedAction) -> bool:
            if a.job_key != job_key:
                return False
            if target.kind is TargetKind.TASK:
                return a.request.task_name == target.task
            if target.kind is TargetKind.PARTITION:
                return (
                    a.request.task_name == target.task
                    and a.request.partition_id == target.partition
                )
            if target.kind is TargetKind.POD:
                return a.request.pod_name == target.pod
            return True

        return self._cancel(in_scope)

    def forget_job(self, job_key: str) -> tuple[DelayedAction, ...]:
        """Drop every delayed action of a Job (it was deleted); return them."""
        return self._cancel(lambda a: a.job_key == job_key)

    @staticmethod
    def _key(entry: DelayedAction) -> tuple[str, str, Event | None]:
        return (entry.job_key, entry.request.pod_name, entry.request.event)

    def _cancel(self, predicate: Callable[[DelayedAction], bool]) -> tuple[DelayedAction, ...]:
        gone = tuple(a for a in self._by_token.values() if predicate(a))
        for entry in gone:
            del self._by_token[entry.token]
            self._by_key.pop(self._key(entry), None)
        return gone
