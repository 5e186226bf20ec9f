"""The backfill action: pods without requests go to the best node passing the predicates."""

from __future__ import annotations

from caldera.api.core import Taint
from scheduler.actions.backfill import BackfillAction
from scheduler.api.types import TaskStatus
from scheduler.framework.session import Session
from unit.sched_fixtures import binds, make_cluster, make_job, make_node, make_task, run


def test_best_effort_pods_bind_where_predicates_pass() -> None:
    """A tainted node is avoided; the other takes the best-effort pods."""
    tainted = make_node("n0", taints=[Taint(key="k", value="v", effect="NoSchedule")])
    job = make_job("be", [make_task("be", i, {}) for i in range(2)])
    ssn = run(make_cluster([tainted, make_node("n1")], [job]))
    assert binds(ssn) == {"be-0": "n1", "be-1": "n1"}


def test_no_node_records_fit_error() -> None:
    """With every node full of pods, the pod waits with "Too many pods"."""
    full = make_node("n0", max_pods=1)
    other = make_task("x", 0, status=TaskStatus.RUNNING, node="n0")
    job = make_job("be", [make_task("be", 0, {})])
    ssn = run(make_cluster([full], [make_job("x", [other]), job]))
    assert ssn.result.binds == []
    assert ssn.jobs["ns/be"].fit_errors["uid-ns-be-0"] == (
        "0/1 nodes are available: 1 Too many pods."
    )


def test_pending_jobs_and_requesting_pods_are_left_alone() -> None:
    """backfill ignores Pending jobs and pods that request resources."""
    pending = make_job("p", [make_task("p", 0, {})], phase="Pending")
    requesting = make_job("r", 1)
    ssn = Session(make_cluster([make_node("n0")], [pending, requesting]), [])
    BackfillAction({}).execute(ssn)
    assert ssn.result.binds == []
