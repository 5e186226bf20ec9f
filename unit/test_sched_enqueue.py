"""The enqueue action: Pending jobs become Inqueue in queue and job order, round robin, when
they have no minResources or the enqueueable votes allow them."""

from __future__ import annotations

from scheduler.actions.enqueue import EnqueueAction
from scheduler.api.types import JobInfo, QueueInfo
from scheduler.framework.session import Session
from unit.sched_fixtures import make_cluster, make_job, make_node


def _session(*jobs: JobInfo, queues: tuple[QueueInfo, ...] = ()) -> Session:
    return Session(make_cluster([make_node("n0")], list(jobs), queues), [])


def test_jobs_without_min_resources_are_admitted() -> None:
    """No minResources: admitted even when a plugin would refuse every job."""
    ssn = _session(make_job("a", 1, phase="Pending"))
    ssn.add_job_enqueueable_fn("no", lambda j: -1)
    EnqueueAction({}).execute(ssn)
    assert ssn.jobs["ns/a"].phase == "Inqueue"
    assert ssn.result.podgroup_phase_inqueue == ["ns/a"]


def test_a_reject_keeps_the_job_pending() -> None:
    """A job with minResources waits while a plugin rejects it; the others still go."""
    ssn = _session(
        make_job("big", 1, phase="Pending", min_resources={"cpu": "100"}),
        make_job("small", 1, phase="Pending", min_resources={"cpu": "1"}, created=1),
    )
    ssn.add_job_enqueueable_fn("cap", lambda j: 1 if j.min_resources.get("cpu") <= 1000 else -1)
    EnqueueAction({}).execute(ssn)
    assert ssn.jobs["ns/big"].phase == "Pending"
    assert ssn.jobs["ns/small"].phase == "Inqueue"
    assert ssn.result.podgroup_phase_inqueue == ["ns/small"]


def test_only_pending_jobs_are_considered() -> None:
    """Running and Inqueue jobs are left as they are and not reported."""
    ssn = _session(make_job("r", 1, phase="Running"), make_job("p", 1, phase=""))
    EnqueueAction({}).execute(ssn)
    assert ssn.jobs["ns/r"].phase == "Running"
    assert ssn.result.podgroup_phase_inqueue == ["ns/p"]


def test_order_is_round_robin_across_queues_and_by_job_order_within() -> None:
    """Each queue turn admits its first job in job order; enqueued callbacks see them in that
    order, so a budget goes to the first job of each queue before the second of any."""
    jobs = [
        make_job("a-late", 1, queue="qa", phase="Pending", min_resources={"cpu": "1"}, created=5),
        make_job("a-early", 1, queue="qa", phase="Pending", min_resources={"cpu": "1"}),
        make_job("b-1", 1, queue="qb", phase="Pending", min_resources={"cpu": "1"}, created=1),
        make_job("b-2", 1, queue="qb", phase="Pending", min_resources={"cpu": "1"}, created=2),
    ]
    ssn = _session(*jobs, queues=(QueueInfo("qa"), QueueInfo("qb")))
    seen: list[str] = []
    ssn.add_job_enqueueable_fn("budget", lambda j: 1 if len(seen) < 2 else -1)
    ssn.add_job_enqueued_fn("budget", lambda j: seen.append(j.name))
    ssn.add_queue_order_fn(
        "fair",
        lambda a, b: (
            sum(j.queue == a.name for j in ssn.jobs.values() if j.name in seen)
            - sum(j.queue == b.name for j in ssn.jobs.values() if j.name in seen)
        ),
    )
    EnqueueAction({}).execute(ssn)
    assert seen == ["a-early", "b-1"]


def test_jobs_of_unknown_queues_are_ignored() -> None:
    """A job whose queue is not in the snapshot stays Pending."""
    ssn = _session(make_job("a", 1, queue="nope", phase="Pending"))
    EnqueueAction({}).execute(ssn)
    assert ssn.jobs["ns/a"].phase == "Pending"
