"""The conformance plugin: critical pods and kube-system pods are never victims."""

from __future__ import annotations

from scheduler.api.types import TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.conformance import ConformancePlugin
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task


def test_critical_and_system_pods_are_filtered_out() -> None:
    """Of four running pods only the ordinary one may be preempted or reclaimed."""
    run_ = TaskStatus.RUNNING
    tasks = [
        make_task("a", 0, status=run_, node="n0"),
        make_task("a", 1, priority_class="system-cluster-critical", status=run_, node="n0"),
        make_task("a", 2, priority_class="system-node-critical", status=run_, node="n0"),
        make_task("s", 0, namespace="kube-system", status=run_, node="n0"),
    ]
    jobs = [make_job("a", tasks[:3]), make_job("s", tasks[3:], namespace="kube-system")]
    ssn = Session(make_cluster([make_node("n0", "8")], jobs), [])
    ConformancePlugin(Arguments("conformance", {})).on_session_open(ssn)
    preemptor = make_task("b", 0)
    assert [t.name for t in ssn.preemptable(preemptor, tasks)] == ["a-0"]
    assert [t.name for t in ssn.reclaimable(preemptor, tasks)] == ["a-0"]


def test_other_priority_classes_are_evictable() -> None:
    """A user-defined high class is not protected."""
    task = make_task("a", 0, priority_class="high", status=TaskStatus.RUNNING, node="n0")
    ssn = Session(make_cluster([make_node("n0")], [make_job("a", [task])]), [])
    ConformancePlugin(Arguments("conformance", {})).on_session_open(ssn)
    assert ssn.preemptable(make_task("b", 0), [task]) == [task]
