"""sla: waiting times from the annotation or the argument; jobs with one first, earlier
deadlines first; an overdue job is enqueued over the other gates and keeps a partly placed
gang; the session asks to run again at the next deadline."""

from __future__ import annotations

import datetime as dt

import pytest

from scheduler.api.types import ClusterInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.sla import WAITING_TIME_ANNOTATION, SlaPlugin, waiting_time
from unit.sched_fixtures import T0, add_job, cpu_cluster, run_conf

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
{first}- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}, {sla}]
- plugins: [{{name: overcommit}}, {{name: drf}}, {{name: predicates}}, {{name: proportion}},
            {{name: nodeorder}}]
"""


def session(cluster: ClusterInfo, sla: str = "{name: sla}", *, first: bool = False) -> Session:
    """A session with sla beside gang (``sla``), or alone in a first tier (``first``)."""
    text = CONF.format(
        sla="" if first else sla, first="- plugins: [{name: sla}]\n" if first else ""
    )
    return run_conf(cluster, text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("1h2m3s", 3723.0),
        ("500ms", 0.5),
        ("0s", None),
        ("-5m", None),
        ("soon", None),
        (None, None),
    ],
)
def test_waiting_time(text: str | None, seconds: float | None) -> None:
    """Go durations; nothing for a value that is absent, not positive or does not parse."""
    found = waiting_time(text)
    assert (found.total_seconds() if found is not None else None) == seconds


def test_bad_argument_names_the_plugin() -> None:
    """A bad plugin argument is an error naming the plugin and the key."""
    with pytest.raises(ValueError, match="plugin sla: argument sla-waiting-time"):
        SlaPlugin(Arguments("sla", {"sla-waiting-time": "often"}))
    with pytest.raises(ValueError, match="must be positive"):
        SlaPlugin(Arguments("sla", {"sla-waiting-time": "0s"}))


def test_jobs_with_a_waiting_time_go_first() -> None:
    """Room for one 4-cpu gang: without sla the older job goes first; with sla, the younger
    one, which has a waiting time, goes first (and sooner deadlines before later ones)."""
    cluster = cpu_cluster({"n0": "4"})
    old = add_job(cluster, "old", pending=4, min_available=4, phase="Inqueue")
    young = add_job(
        cluster,
        "young",
        pending=4,
        min_available=4,
        phase="Inqueue",
        annotations={WAITING_TIME_ANNOTATION: "10m"},
    )
    young.creation = T0 + dt.timedelta(minutes=1)
    ssn = session(cluster, sla="")
    assert {b.task.job for b in ssn.result.binds} == {old.key}

    cluster.now = T0 + dt.timedelta(minutes=5)
    for job in (old, young):
        for task in list(job.tasks.values()):
            if task.status != TaskStatus.PENDING:
                job.set_status(task, TaskStatus.PENDING)
                task.node_name = ""
    cluster.nodes["n0"].tasks.clear()
    cluster.nodes["n0"].used = cluster.nodes["n0"].used - cluster.nodes["n0"].used
    ssn = session(cluster)
    assert {b.task.job for b in ssn.result.binds} == {young.key}
    assert ssn.result.revisit_after is None  # nothing waits for a deadline


def test_overdue_job_is_enqueued_over_the_gates_and_holds_its_nodes() -> None:
    """Overcommit refuses a 16-cpu gang on 8 cpu and the session asks to run again at its
    deadline; once overdue, sla admits it over overcommit, and with sla in a tier before gang
    (whose reject would otherwise win) allocate keeps the pods it could place, so nothing
    smaller takes them."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    big = add_job(
        cluster,
        "big",
        pending=16,
        min_available=16,
        phase="Pending",
        min_resources={"cpu": "16"},
        annotations={WAITING_TIME_ANNOTATION: "1m"},
    )
    ssn = session(cluster)
    assert big.key not in ssn.result.podgroup_phase_inqueue
    assert ssn.result.revisit_after == pytest.approx(60)
    cluster.now = T0 + dt.timedelta(minutes=2)
    ssn = session(cluster)
    assert big.key in ssn.result.podgroup_phase_inqueue
    assert big.count(TaskStatus.ALLOCATED) == 0  # gang's reject wins in sla's tier
    big.phase = "Pending"
    ssn = session(cluster, first=True)
    assert big.key in ssn.result.podgroup_phase_inqueue
    assert big.count(TaskStatus.ALLOCATED) == 8  # kept for it, not bound
    assert ssn.result.binds == []


def test_argument_gives_every_job_a_waiting_time() -> None:
    """The plugin argument is the default; the annotation overrides it."""
    cluster = cpu_cluster({"n0": "4"})
    plain = add_job(cluster, "plain", pending=1)
    own = add_job(cluster, "own", pending=1, annotations={WAITING_TIME_ANNOTATION: "5s"})
    plugin = SlaPlugin(Arguments("sla", {"sla-waiting-time": "1h"}))
    assert plugin.deadline(plain) == plain.creation + dt.timedelta(hours=1)
    assert plugin.deadline(own) == own.creation + dt.timedelta(seconds=5)
