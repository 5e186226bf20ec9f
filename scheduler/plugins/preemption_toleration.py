"""preemption-toleration: the victim's PriorityClass says who may preempt its pods, and when.

PFN's plugin, now in kubernetes-sigs/scheduler-plugins (``ExemptedFromPreemption``), as a
preemptable and reclaimable filter: it removes from the candidates every victim that tolerates
the preemptor, so preempt and reclaim both honour it.

The victim pod's PriorityClass (``spec.priorityClassName``, looked up in
``ClusterInfo.priority_classes``) carries the policy in annotations, in one of two key families:

    preemption-toleration.scheduling.x-k8s.io/    upstream; toleration-seconds default 0
    preemption-toleration.scheduling.sigs.k8s.io/ the plugin's first drafts; toleration-seconds
                                                  default forever

each with ``minimum-preemptable-priority`` (default: the class's value + 1) and
``toleration-seconds`` (negative: forever). A class carrying any x-k8s.io key is read in that
family only; otherwise any sigs.k8s.io key selects that family; a class with neither tolerates
nothing (the x-k8s.io defaults: preempted by any higher priority at once).

A victim tolerates (is exempt from) a preemptor when:
- the preemptor's preemptionPolicy is Never (the pod's, else its PriorityClass's): it preempts
  nobody;
- otherwise never if the preemptor's priority >= minimum-preemptable-priority;
- otherwise always if toleration-seconds is negative;
- otherwise while the victim has been scheduled (its PodScheduled condition's
  lastTransitionTime, ``TaskInfo.scheduled_at``) for less than toleration-seconds at the
  session's time; a victim with no PodScheduled=True time tolerates, as upstream.

The session takes the first tier that has victim filters and intersects its plugins' answers,
so configure this plugin in the same tier as the others (gang, priority, conformance).

No toleration at all when the victim has no PriorityClass name or its class is unknown, or when
an annotation is not a whole number in range (then a Warning Event ``PreemptionToleration`` on
the victim's Pod says which annotation is wrong, once per session).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from caldera.api.core import PriorityClass
from scheduler.api.types import JobInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

X_K8S_PREFIX = "preemption-toleration.scheduling.x-k8s.io/"
SIGS_K8S_PREFIX = "preemption-toleration.scheduling.sigs.k8s.io/"
MINIMUM_PREEMPTABLE_PRIORITY = "minimum-preemptable-priority"
TOLERATION_SECONDS = "toleration-seconds"
EVENT_REASON = "PreemptionToleration"
FOREVER = -1

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt(s, 10, n) accepts


class PolicyError(ValueError):
    """An annotation of a PriorityClass that is not a valid number."""


@dataclass(frozen=True)
class TolerationPolicy:
    """A PriorityClass's preemption toleration."""

    minimum_preemptable_priority: int
    toleration_seconds: int  # negative: forever


def _parse(annotations: dict[str, str], key: str, bounds: tuple[int, int]) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    if not _INTEGER.fullmatch(raw):
        raise PolicyError(f"annotation {key}={raw!r} is not a whole number")
    value = int(raw)
    if not bounds[0] <= value <= bounds[1]:
        raise PolicyError(f"annotation {key}={raw!r} is out of range")
    return value


def parse_policy(priority_class: PriorityClass) -> TolerationPolicy:
    """The class's policy (module docstring); raises ``PolicyError`` for a bad annotation."""
    annotations = priority_class.metadata.annotations
    if any(k.startswith(X_K8S_PREFIX) for k in annotations):
        prefix, default_seconds = X_K8S_PREFIX, 0
    elif any(k.startswith(SIGS_K8S_PREFIX) for k in annotations):
        prefix, default_seconds = SIGS_K8S_PREFIX, FOREVER
    else:
        prefix, default_seconds = X_K8S_PREFIX, 0
    minimum = _parse(annotations, prefix + MINIMUM_PREEMPTABLE_PRIORITY, _INT32)
    seconds = _parse(annotations, prefix + TOLERATION_SECONDS, _INT64)
    return TolerationPolicy(
        minimum_preemptable_priority=priority_class.value + 1 if minimum is None else minimum,
        toleration_seconds=default_seconds if seconds is None else seconds,
    )


def tolerates(
    policy: TolerationPolicy,
    *,
    preemptor_priority: int,
    scheduled_at: dt.datetime | None,
    now: dt.datetime,
) -> bool:
    """Whether a victim with ``policy`` is exempt from a preemptor that may preempt at all."""
    if preemptor_priority >= policy.minimum_preemptable_priority:
        return False
    if policy.toleration_seconds < 0:
        return True
    if scheduled_at is None:
        return True
    return scheduled_at + dt.timedelta(seconds=policy.toleration_seconds) > now


class PreemptionTolerationPlugin:
    """Filters preempt and reclaim victims by their PriorityClass's toleration policy."""

    name = "preemption-toleration"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self._policies: dict[str, TolerationPolicy | PolicyError] = {}
        self._reported: set[str] = set()

    def on_session_open(self, ssn: Session) -> None:
        self._policies = {}
        self._reported = set()

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            return self.victims(ssn, preemptor, candidates)

        def may_give(preemptor: TaskInfo, job: JobInfo) -> bool:
            return not self._never_preempts(ssn, preemptor)

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        ssn.add_speedups(self.name, Speedups(victim_screen=may_give))

    def on_session_close(self, ssn: Session) -> None:
        """Nothing to write."""

    def victims(
        self, ssn: Session, preemptor: TaskInfo, candidates: Sequence[TaskInfo]
    ) -> list[TaskInfo]:
        """The candidates that do not tolerate ``preemptor``."""
        if self._never_preempts(ssn, preemptor):
            return []
        chosen: list[TaskInfo] = []
        for victim in candidates:
            class_name = victim.pod.spec.priority_class_name if victim.pod is not None else ""
            policy = self._policy(ssn, class_name) if class_name else None
            if isinstance(policy, PolicyError):
                self._report(ssn, victim, class_name, policy)
                policy = None
            if policy is None or not tolerates(
                policy,
                preemptor_priority=preemptor.priority,
                scheduled_at=victim.scheduled_at,
                now=ssn.now,
            ):
                chosen.append(victim)
        return chosen

    def _policy(self, ssn: Session, class_name: str) -> TolerationPolicy | PolicyError | None:
        cached = self._policies.get(class_name)
        if cached is not None:
            return cached
        priority_class = ssn.cluster.priority_classes.get(class_name)
        if priority_class is None:
            return None  # unknown class: no toleration (upstream fails the node instead)
        try:
            policy: TolerationPolicy | PolicyError = parse_policy(priority_class)
        except PolicyError as err:
            policy = err
        self._policies[class_name] = policy
        return policy

    @staticmethod
    def _never_preempts(ssn: Session, preemptor: TaskInfo) -> bool:
        """preemptionPolicy Never, from the pod or else its PriorityClass (admission copies the
        class's into the pod; a pod decoded without it falls back to the class)."""
        pod = preemptor.pod
        if pod is None:
            return False
        policy = pod.spec.preemption_policy
        if policy is None:
            pc = ssn.cluster.priority_classes.get(pod.spec.priority_class_name)
            policy = pc.preemption_policy if pc is not None else None
        return policy == "Never"

    def _report(self, ssn: Session, victim: TaskInfo, class_name: str, error: PolicyError) -> None:
        if victim.key in self._reported:
            return
        self._reported.add(victim.key)
        ssn.record_event(
            "Pod",
            victim.namespace,
            victim.name,
            "Warning",
            EVENT_REASON,
            f"PriorityClass {class_name}: {error}; the pod does not tolerate preemption",
        )
