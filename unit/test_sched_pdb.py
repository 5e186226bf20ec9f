"""pdb: preempt and reclaim skip the pods whose PodDisruptionBudget has no disruption left and
take others; label selectors match as metav1.LabelSelector does."""

from __future__ import annotations

import msgspec
import pytest

from caldera.api.core import (
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
)
from caldera.api.meta import LabelSelector, LabelSelectorRequirement, ObjectMeta
from caldera.api.selectors import is_empty, matches
from scheduler.api.types import ClusterInfo, JobInfo, TaskInfo, TaskStatus
from scheduler.framework.session import Session
from scheduler.plugins.pdb import allowed_disruptions, victims_within_budgets
from scheduler.snapshot import by_namespace
from unit.sched_fixtures import add_job, cpu_cluster, run_conf


def req(key: str, operator: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key=key, operator=operator, values=values)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (LabelSelector(match_labels={"app": "db"}), {"app": "db", "x": "y"}, True),
        (LabelSelector(match_labels={"app": "db"}), {"app": "web"}, False),
        (LabelSelector(match_expressions=(req("tier", "In", "a", "b"),)), {"tier": "b"}, True),
        (LabelSelector(match_expressions=(req("tier", "NotIn", "a"),)), {}, True),
        (LabelSelector(match_expressions=(req("tier", "Exists"),)), {"tier": ""}, True),
        (LabelSelector(match_expressions=(req("tier", "DoesNotExist"),)), {"tier": "a"}, False),
        (LabelSelector(match_expressions=(req("tier", "In"),)), {"tier": "a"}, False),
        (LabelSelector(match_expressions=(req("tier", "Exists", "a"),)), {"tier": "a"}, False),
        (LabelSelector(match_expressions=(req("tier", "Gt", "1"),)), {"tier": "2"}, False),
    ],
)
def test_label_selector(selector: LabelSelector, labels: dict[str, str], expected: bool) -> None:
    """Every operator, and requirements Kubernetes refuses, which match nothing."""
    assert matches(selector, labels) is expected


def test_empty_selectors() -> None:
    assert is_empty(None)
    assert is_empty(LabelSelector())
    assert not is_empty(LabelSelector(match_labels={"a": "b"}))


def budget(
    name: str,
    app: str,
    allowed: int,
    *,
    disrupted: tuple[str, ...] = (),
    stale: bool = False,
    namespace: str = "ns",
) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace=namespace, generation=2),
        spec=PodDisruptionBudgetSpec(selector=LabelSelector(match_labels={"app": app})),
        status=PodDisruptionBudgetStatus(
            observed_generation=1 if stale else 2,
            disruptions_allowed=allowed,
            disrupted_pods=dict.fromkeys(disrupted, "2026-01-01T00:00:00Z"),
        ),
    )


def labelled(job: JobInfo, app: str) -> list[TaskInfo]:
    """Give the job's pods the label app=<app>; its tasks."""
    for task in job.tasks.values():
        assert task.pod is not None
        meta = msgspec.structs.replace(task.pod.metadata, labels={"app": app})
        task.pod = msgspec.structs.replace(task.pod, metadata=meta)
    return list(job.tasks.values())


def test_budgets_are_spent_victim_by_victim() -> None:
    """A budget allowing 1 lets one of its pods go; pods it already counts as disrupted are
    free; a stale budget allows nothing; unlabelled pods and other namespaces are free."""
    cluster = cpu_cluster({"n0": "8"})
    db = labelled(add_job(cluster, "db", running=3), "db")
    web = labelled(add_job(cluster, "web", running=2), "web")
    plain = list(add_job(cluster, "plain", running=1).tasks.values())
    other = labelled(add_job(cluster, "other", running=1, namespace="elsewhere"), "db")
    budgets = by_namespace(
        [budget("db", "db", 1, disrupted=(db[2].name,)), budget("web", "web", 5, stale=True)]
    )
    chosen = victims_within_budgets([*db, *web, *plain, *other], budgets)
    assert chosen == [db[0], db[2], *plain, *other]
    assert allowed_disruptions(budget("x", "x", 3, stale=True)) == 0


def session(cluster: ClusterInfo, budgets: list[PodDisruptionBudget]) -> Session:
    cluster.disruption_budgets = by_namespace(budgets)
    return run_conf(
        cluster,
        """\
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: pdb}]
- plugins: [{name: predicates}, {name: nodeorder}]
""",
    )


def test_preemption_skips_protected_pods_and_takes_others() -> None:
    """A high-priority gang of 3 on a full node: the protected low-priority job's pods stay,
    the unprotected job's go; with every pod protected nothing is evicted and the gang waits."""
    cluster = cpu_cluster({"n0": "4"})
    # minAvailable 0: gang lets every pod go, so only pdb tells the two jobs apart.
    protected = labelled(add_job(cluster, "protected", running=2, min_available=0), "db")
    free = labelled(add_job(cluster, "free", running=2, min_available=0), "batch")
    high = add_job(cluster, "urgent", pending=2, min_available=2, priority=100)
    ssn = session(cluster, [budget("db", "db", 0)])
    evicted = {e.task.name for e in ssn.result.evictions}
    assert evicted == {t.name for t in free}
    assert not evicted & {t.name for t in protected}
    assert high.count(TaskStatus.PIPELINED) == 2

    cluster = cpu_cluster({"n0": "4"})
    labelled(add_job(cluster, "protected", running=4, min_available=0), "db")
    high = add_job(cluster, "urgent", pending=2, min_available=2, priority=100)
    ssn = session(cluster, [budget("db", "db", 1)])
    assert ssn.result.evictions == []  # one disruption would not make room for the gang
    assert high.count(TaskStatus.PENDING) == 2
