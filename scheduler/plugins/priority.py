"""The priority plugin: higher-priority jobs and tasks first, and only lower-priority pods are
preempted (Volcano's).

- job order: the PodGroup's priority (from its PriorityClass), higher first;
- task order: the pod's priority, higher first;
- preemptable: a victim of another job when its job's priority is lower than the preemptor's
  job's; a victim of the same job when its own priority is lower than the preemptor's;
- job starving: a job is starving while fewer than minAvailable of its tasks are placed or
  pipelined.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scheduler.api.types import JobInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments

if TYPE_CHECKING:
    from scheduler.framework.session import Session


def _higher_first(left: int, right: int) -> int:
    return -1 if left > right else (1 if left < right else 0)


class PriorityPlugin:
    """Orders jobs and tasks by priority; lower priority may be preempted."""

    name = "priority"

    def __init__(self, args: Arguments) -> None:
        self.args = args

    def on_session_open(self, ssn: Session) -> None:
        jobs = ssn.jobs

        def job_order(left: JobInfo, right: JobInfo) -> int:
            return _higher_first(left.priority, right.priority)

        def task_order(left: TaskInfo, right: TaskInfo) -> int:
            return _higher_first(left.priority, right.priority)

        def preemptable(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            preemptor_job = jobs.get(preemptor.job)
            preemptor_priority = preemptor_job.priority if preemptor_job is not None else 0
            victims = []
            for victim in candidates:
                if victim.job != preemptor.job:
                    victim_job = jobs.get(victim.job)
                    victim_priority = victim_job.priority if victim_job is not None else 0
                    if victim_priority < preemptor_priority:
                        victims.append(victim)
                elif victim.priority < preemptor.priority:
                    victims.append(victim)
            return victims

        def may_give(preemptor: TaskInfo, job: JobInfo) -> bool:
            # Another job's tasks are victims only when that job's priority is lower.
            if job.key == preemptor.job:
                return True
            preemptor_job = jobs.get(preemptor.job)
            return job.priority < (preemptor_job.priority if preemptor_job is not None else 0)

        def starving(job: JobInfo) -> int:
            return 1 if job.is_starving() else -1

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_task_order_fn(self.name, task_order)
        ssn.add_preemptable_fn(self.name, preemptable)
        ssn.add_job_starving_fn(self.name, starving)
        ssn.add_speedups(
            self.name,
            Speedups(
                job_order_key=lambda job: -job.priority,
                task_order_key=lambda task: -task.priority,
                victim_screen=may_give,
            ),
        )

    def on_session_close(self, ssn: Session) -> None:
        return None
