"""The conformance plugin: system-critical pods and pods in kube-system are never evicted
(Volcano's), neither by preempt nor by reclaim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduler.api.types import TaskInfo
from scheduler.framework.plugin import Arguments

if TYPE_CHECKING:
    from scheduler.framework.session import Session

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def evictable(task: TaskInfo) -> bool:
    """False for a pod of a system-critical PriorityClass or in kube-system."""
    if task.namespace == SYSTEM_NAMESPACE:
        return False
    pod = task.pod
    return pod is None or pod.spec.priority_class_name not in CRITICAL_CLASSES


def filter_victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
    return [t for t in candidates if evictable(t)]


class ConformancePlugin:
    """Keeps critical pods out of every victim list."""

    name = "conformance"

    def __init__(self, args: Arguments) -> None:
        self.args = args

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_preemptable_fn(self.name, filter_victims)
        ssn.add_reclaimable_fn(self.name, filter_victims)

    def on_session_close(self, ssn: Session) -> None:
        return None
