"""The overcommit plugin: admit a job (enqueue it) only while the resources promised to
admitted jobs stay within the cluster's allocatable resources times ``overcommit-factor``
(default 1.2), as Volcano does.

At session open: idle = total allocatable * factor - what the nodes' tasks use; inqueue = the
minResources of Inqueue jobs, plus, for Running jobs whose placed tasks reach minMember, the part
of minResources not yet allocated. A job is enqueueable when inqueue + its minResources fits in
idle, compared on the resources its minResources names; an enqueued job's minResources joins
inqueue. A job without minResources is always admitted. A refusal records the Normal event
"resource in cluster is overused" on the PodGroup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from caldera.api.resources import Resources
from caldera.api.why import WaitStage
from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.why import gate_text

if TYPE_CHECKING:
    from scheduler.framework.session import Session

DEFAULT_FACTOR = 1.2
OVERUSED_MESSAGE = "resource in cluster is overused"


def _only(amounts: Resources, names: Resources) -> Resources:
    return Resources({n: amounts.get(n) for n, _ in names.items()})


_NOTHING = Resources()  # what a job that reserves nothing adds


def _reserved(job: JobInfo) -> Resources:
    """What an admitted job has reserved and not taken yet, in the resources its minResources
    names (empty when nothing)."""
    if job.min_resources.is_empty():
        return _NOTHING
    if job.phase == "Inqueue":
        return job.min_resources
    if (
        job.phase == "Running"
        and job.count(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED) >= job.min_available
    ):
        return _only(job.min_resources.sub_clamped(job.allocated), job.min_resources)
    return _NOTHING


def _whole_cluster(job: JobInfo) -> str:
    return ""


def _reservation(job: JobInfo) -> tuple[Resources]:
    return (_reserved(job),)


# Kept with the snapshot (``Incremental.memo_for_cluster``): the cluster's total times the
# factor.
_PROMISED = "overcommit.promised"


class OvercommitPlugin:
    """Gates enqueue on the cluster's (overcommitted) free resources."""

    name = "overcommit"

    def __init__(self, args: Arguments) -> None:
        self.factor = args.number("overcommit-factor", DEFAULT_FACTOR)
        if self.factor < 1.0:
            # Volcano: a factor below 1 is a mistake and falls back to the default.
            self.factor = DEFAULT_FACTOR
        self.promised = Resources()  # allocatable x factor
        self.idle = Resources()
        self.inqueue = Resources()

    def on_session_open(self, ssn: Session) -> None:
        used = ssn.cluster.total_used()
        total, factor = ssn.total_resource, self.factor
        # Kept with the snapshot while the cluster's total is the same (the scaling is exact
        # arithmetic, not cheap).
        self.promised = ssn.incremental.memo_for_cluster(
            _PROMISED, (total.items(), factor), lambda: total.scale(factor)
        )
        self.idle = self.promised - used
        # The reservations' sum is kept with the snapshot: only jobs that changed since the
        # last session are looked at again (``Incremental.job_sums``).
        self.inqueue = ssn.incremental.job_sums(self.name, _whole_cluster, _reservation, 1).total(
            ""
        )

        def enqueueable(job: JobInfo) -> int:
            need = job.min_resources
            if need.is_empty():
                return 1
            inqueue, idle = self.inqueue, self.idle
            if all(inqueue.get(n) + amount <= idle.get(n) for n, amount in need.items()):
                return 1
            ssn.record_event(
                "PodGroup", job.namespace, job.name, "Normal", "Unschedulable", OVERUSED_MESSAGE
            )
            promised = self.promised
            ssn.note_wait(
                job.key,
                WaitStage.ENQUEUE,
                gate_text(
                    holder=f"the cluster (allocatable x {self.factor:g}, overcommit)",
                    limit=promised,
                    allocated=promised - idle,
                    reserved=inqueue,
                    need=need,
                    freed_by=Resources(
                        {
                            n: inqueue.get(n) + amount - idle.get(n)
                            for n, amount in need.items()
                            if inqueue.get(n) + amount > idle.get(n)
                        }
                    ),
                ),
            )
            return -1

        def enqueued(job: JobInfo) -> None:
            if not job.min_resources.is_empty():
                self.inqueue = self.inqueue + job.min_resources

        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)

    def on_session_close(self, ssn: Session) -> None:
        return None
