"""The example of docs/architecture.md, "Writing a plugin": jobs in rank order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.api.types import JobInfo
from scheduler.framework.plugin import Arguments

if TYPE_CHECKING:
    from scheduler.framework.session import Session

RANK = "example.caldera.io/rank"


def rank(job: JobInfo, annotation: str) -> int | None:
    """The whole number in the job's PodGroup annotation; None without one."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    text = annotations.get(annotation, "")
    return int(text) if text.removeprefix("-").isdigit() else None


class RankPlugin:
    """Jobs with a lower rank first, ranked jobs before unranked ones; no opinion between
    jobs of equal rank (the next plugin, then creation time, decides)."""

    name = "example-rank"

    def __init__(self, args: Arguments) -> None:
        self.annotation = args.string("annotation", RANK)

    def on_session_open(self, ssn: Session) -> None:
        def job_order(left: JobInfo, right: JobInfo) -> int:
            a, b = rank(left, self.annotation), rank(right, self.annotation)
            if a == b:
                return 0
            if a is None or b is None:
                return 1 if a is None else -1
            return -1 if a < b else 1

        ssn.add_job_order_fn(self.name, job_order)

    def on_session_close(self, ssn: Session) -> None:
        return None
