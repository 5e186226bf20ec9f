"""Tests of `cli.why`: what ``caldera job why`` says for each stage a job can wait at, in which
order, with stale and malformed scheduler records, and within its bounds; plus the command's
argument checks and the "Why" section of ``caldera job view``."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from caldera.api.core import (
    ContainerStatus,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
)
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import (
    BATCH_API_VERSION,
    Command,
    DependsOn,
    Job,
    JobCondition,
    JobSpec,
    JobState,
    JobStatus,
    LifecyclePolicy,
    PodGroup,
    PodGroupCondition,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueStatus,
    TaskSpec,
)
from caldera.api.why import WHY_ANNOTATION, WaitRecord, bounded, encode_record
from cli import output
from cli.main import main
from cli.why import MAX_POD_MESSAGES, Finding, explain, render_lines

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def ago(seconds: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- builders -----------------------------------------------------------------------------------


def make_job(
    phase: str = "Pending",
    *,
    tasks: tuple[TaskSpec, ...] = (TaskSpec(name="worker", replicas=3, min_available=3),),
    running: int = 0,
    queue: str = "team-a",
    conditions: tuple[JobCondition, ...] = (),
    policies: tuple[LifecyclePolicy, ...] = (),
) -> Job:
    return Job(
        metadata=ObjectMeta(name="train", namespace="ml", uid="uid-train"),
        spec=JobSpec(
            queue=queue,
            min_available=sum(t.min_available or 0 for t in tasks),
            tasks=tasks,
            policies=policies,
        ),
        status=JobStatus(
            state=JobState(phase=phase, last_transition_time=ago(30)),
            running=running,
            retry_count=1,
            conditions=conditions,
        ),
    )


def make_pg(
    phase: str = "Pending",
    *,
    record: WaitRecord | str | None = None,
    unschedulable: tuple[str, str] | None = None,
) -> PodGroup:
    annotations: dict[str, str] = {}
    if isinstance(record, WaitRecord):
        annotations[WHY_ANNOTATION] = encode_record(record)
    elif isinstance(record, str):
        annotations[WHY_ANNOTATION] = record
    conditions: tuple[Any, ...] = ()
    if unschedulable is not None:
        reason, message = unschedulable
        conditions = (
            PodGroupCondition(type="Unschedulable", status="True", reason=reason, message=message),
        )
    return PodGroup(
        metadata=ObjectMeta(name="train-uid-train", namespace="ml", annotations=annotations),
        spec=PodGroupSpec(queue="team-a", min_member=3),
        status=PodGroupStatus(phase=phase, conditions=conditions),
    )


def make_queue(state: str = "Open") -> Queue:
    return Queue(metadata=ObjectMeta(name="team-a"), status=QueueStatus(state=state))


def make_pod(
    name: str,
    phase: str = "Pending",
    *,
    ready: bool = True,
    unscheduled: str | None = None,
    node: str = "",
    deleting: bool = False,
) -> Pod:
    conditions: tuple[Any, ...] = ()
    if unscheduled is not None:
        conditions = (PodCondition(type="PodScheduled", status="False", message=unscheduled),)
    statuses = (ContainerStatus(name="c", ready=ready),) if phase == "Running" else ()
    return Pod(
        metadata=ObjectMeta(
            name=name, namespace="ml", deletion_timestamp=ago(1) if deleting else None
        ),
        spec=PodSpec(node_name=node or ("node-1" if phase != "Pending" else "")),
        status=PodStatus(phase=phase, conditions=conditions, container_statuses=statuses),
    )


def make_command(action: str = "AbortJob", target: str = "train") -> Command:
    return Command(
        metadata=ObjectMeta(
            name=f"{target}-{action.lower()}-x7k2p", namespace="ml", creation_timestamp=ago(40)
        ),
        action=action,
        target=OwnerReference(
            api_version=BATCH_API_VERSION, kind="Job", name=target, uid=f"uid-{target}"
        ),
    )


def record(
    stage: str, summary: str, details: list[str] | None = None, age: float = 12
) -> WaitRecord:
    return bounded(stage, summary, details or [], ago(age))


PS_WORKER = (
    TaskSpec(name="ps", replicas=2, min_available=2),
    TaskSpec(name="worker", replicas=2, min_available=2, depends_on=DependsOn(name=("ps",))),
)
ENQUEUE_SUMMARY = (
    "queue team-a has 6 of 8 cpu allocated and 4 cpu reserved by inqueue jobs; this job needs "
    "6 cpu at least; it enqueues when 4 cpu free up"
)
ALLOCATE_DETAIL = (
    "task worker (3 pods): 0/40 nodes are available: 31 Insufficient nvidia.com/gpu, 6 node(s) "
    "had untolerated taint {gpu: a100}, 3 node(s) didn't match Pod's node affinity/selector."
)


@dataclass
class Case:
    """One situation and the exact (stage, text, details) findings expected, in order."""

    job: Job
    expected: list[tuple[str, str, tuple[str, ...]]]
    podgroup: PodGroup | None = field(default_factory=make_pg)
    queue: Queue | None = field(default_factory=make_queue)
    pods: list[Pod] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)


def one(stage: str, text: str, *details: str) -> tuple[str, str, tuple[str, ...]]:
    return (stage, text, details)


NOTHING_INQUEUE = one(
    "unknown",
    "nothing found that holds the job: job Pending, PodGroup Inqueue, 0/4 minAvailable pods "
    "running (pods may be starting on their nodes)",
)
RESUME = "`caldera job resume -n ml -N train` resumes it"

CASES: dict[str, Case] = {
    "completed": Case(
        make_job("Completed"),
        [one("finished", "job finished: Completed")],
        queue=make_queue("Closed"),  # a finished job's closed queue does not matter
    ),
    "failed": Case(make_job("Failed"), [one("finished", "job finished: Failed")]),
    "terminated": Case(make_job("Terminated"), [one("finished", "job finished: Terminated")]),
    "terminating": Case(
        make_job("Terminating"),
        [one("finished", "job is finishing: Terminating (its pods are being deleted)")],
    ),
    "running all": Case(
        make_job("Running", running=3),
        [one("running", "not waiting: 3/3 pods running")],
        podgroup=make_pg("Running", record=record("allocate", "stale")),
    ),
    "running above minAvailable": Case(
        make_job(
            "Running",
            running=2,
            tasks=(TaskSpec(name="worker", replicas=4, min_available=2),),
        ),
        [one("running", "not waiting: 2/4 pods running (minAvailable 2)")],
    ),
    "restarting": Case(
        make_job("Restarting"),
        [
            one(
                "restarting",
                "job is restarting (retry 1 of 3): its pods are deleted, then created again",
            )
        ],
    ),
    "suspended by a Command, before a closed queue": Case(
        make_job(
            "Aborted",
            conditions=(
                JobCondition(status="Aborting", last_transition_time=ago(185)),
                JobCondition(status="Aborted", last_transition_time=ago(180)),
            ),
        ),
        [
            one(
                "suspended",
                "suspended by a Command (AbortJob) at 2026-05-01T11:56:55Z (3m5s ago); " + RESUME,
            )
        ],
        podgroup=None,
        queue=make_queue("Closed"),
    ),
    "suspended, a policy could have done it": Case(
        make_job("Aborting", policies=(LifecyclePolicy(event="PodEvicted", action="AbortJob"),)),
        [
            one(
                "suspended",
                "suspended by a Command or a policy of the job (AbortJob) at "
                "2026-05-01T11:59:30Z (30s ago); " + RESUME,
            )
        ],
    ),
    "a Command not yet executed": Case(
        make_job("Pending"),
        [
            one(
                "command",
                "Command train-abortjob-x7k2p (AbortJob), created 40s ago, has not been executed "
                "yet: the job controller (`caldera controllers`) runs it",
            ),
            one(
                "podgroup",
                "PodGroup train-uid-train is Pending: the scheduler has not admitted it "
                "(enqueued) yet and has not said why",
            ),
        ],
        commands=[make_command(), make_command(target="other")],
    ),
    "queue closed": Case(
        make_job(),
        [
            one(
                "queue",
                "queue team-a is Closed: no job in it is admitted until it is opened "
                "(`caldera queue operate -n team-a -a open`)",
            ),
            one(
                "podgroup",
                "PodGroup train-uid-train is Pending: the scheduler has not admitted it "
                "(enqueued) yet and has not said why",
            ),
        ],
        queue=make_queue("Closed"),
    ),
    "queue closing, the scheduler's queue record is not repeated": Case(
        make_job(),
        [
            one(
                "queue",
                "queue team-a is Closing: no job in it is admitted until it is opened "
                "(`caldera queue operate -n team-a -a open`)",
            ),
        ],
        podgroup=make_pg(record=record("queue", "queue team-a is Closing")),
        queue=make_queue("Closing"),
    ),
    "queue missing": Case(
        make_job(),
        [
            one(
                "queue",
                "queue team-a does not exist: no job in it is admitted until it is created "
                "(`caldera queue create -n team-a`)",
            ),
            one("enqueue", f"scheduler (as of 12s ago): {ENQUEUE_SUMMARY}"),
        ],
        podgroup=make_pg(record=record("enqueue", ENQUEUE_SUMMARY)),
        queue=None,
    ),
    "dependsOn all, one ps pod running": Case(
        make_job(tasks=PS_WORKER),
        [
            one(
                "dependsOn",
                "task worker waits for task ps (dependsOn, iteration all): 1/2 ps pods running",
            )
        ],
        podgroup=make_pg("Inqueue"),
        pods=[make_pod("train-ps-0", "Running"), make_pod("train-ps-1", node="node-2")],
    ),
    "dependsOn any of two, none ready, one running but not ready": Case(
        make_job(
            tasks=(
                TaskSpec(name="ps", replicas=1, min_available=1),
                TaskSpec(name="chief", replicas=1, min_available=1),
                TaskSpec(
                    name="worker",
                    replicas=2,
                    min_available=2,
                    depends_on=DependsOn(name=("ps", "chief"), iteration="any"),
                ),
            )
        ),
        [
            one(
                "dependsOn",
                "task worker waits for tasks ps, chief (dependsOn, iteration any): "
                "0/1 ps pods running (1 more running but not ready); 0/1 chief pods running",
            )
        ],
        podgroup=make_pg("Inqueue"),
        pods=[make_pod("train-ps-0", "Running", ready=False), make_pod("train-chief-0", node="n")],
    ),
    "dependsOn met: the controller creates the pods": Case(
        make_job(tasks=PS_WORKER),
        [NOTHING_INQUEUE],
        podgroup=make_pg("Inqueue"),
        pods=[make_pod("train-ps-0", "Succeeded"), make_pod("train-ps-1", "Running")],
    ),
    "dependsOn whose pods exist already": Case(
        make_job(tasks=PS_WORKER),
        [NOTHING_INQUEUE],
        podgroup=make_pg("Inqueue"),
        pods=[make_pod(f"train-worker-{i}", node="n") for i in range(2)],
    ),
    "enqueue record": Case(
        make_job(),
        [one("enqueue", f"scheduler (as of 12s ago): {ENQUEUE_SUMMARY}")],
        podgroup=make_pg(record=record("enqueue", ENQUEUE_SUMMARY)),
    ),
    "allocate record with details": Case(
        make_job(),
        [
            one(
                "allocate",
                "scheduler (as of 2m5s ago): 3 of 3 pods of the gang cannot be placed",
                ALLOCATE_DETAIL,
                "preemption: no victim qualified",
            )
        ],
        podgroup=make_pg(
            "Inqueue",
            record=record(
                "allocate",
                "3 of 3 pods of the gang cannot be placed",
                [ALLOCATE_DETAIL, "preemption: no victim qualified"],
                age=125,
            ),
        ),
    ),
    "none record": Case(
        make_job("Running", running=1),
        [
            one("none", "scheduler (as of 12s ago): the gang is placed: all 3 pods are bound"),
        ],
        podgroup=make_pg("Running", record=record("none", "all 3 pods are bound")),
    ),
    "record with a bad time": Case(
        make_job(),
        [one("enqueue", "scheduler (at an unknown time): held")],
        podgroup=make_pg(record=WaitRecord(stage="enqueue", summary="held", time="yesterday")),
    ),
    "record of an unknown stage": Case(
        make_job(),
        [one("unknown", "scheduler (as of 12s ago): something new")],
        podgroup=make_pg(record=record("backfill", "something new")),
    ),
    "stale enqueue record on an Inqueue PodGroup": Case(
        make_job(),
        [
            one(
                "stale",
                "the scheduler's last finding (enqueue: held at the gate) is from an earlier "
                "session: the PodGroup is now Inqueue",
            ),
            one(
                "podgroup",
                "PodGroup train-uid-train is Inqueue, unschedulable: NotEnoughResources: "
                "3/3 tasks in gang unschedulable",
            ),
        ],
        podgroup=make_pg(
            "Inqueue",
            record=record("enqueue", "held at the gate"),
            unschedulable=("NotEnoughResources", "3/3 tasks in gang unschedulable"),
        ),
    ),
    "stale allocate record on a Pending PodGroup": Case(
        make_job(),
        [
            one(
                "stale",
                "the scheduler's last finding (allocate: no node fits) is from an earlier "
                "session: the PodGroup is now Pending",
            ),
            one(
                "podgroup",
                "PodGroup train-uid-train is Pending: the scheduler has not admitted it "
                "(enqueued) yet and has not said why",
            ),
        ],
        podgroup=make_pg("", record=record("allocate", "no node fits")),
    ),
    "stale queue record once the queue is open": Case(
        make_job(),
        [
            one(
                "stale",
                "the scheduler's last finding (queue: queue team-a is Closed) is from an earlier "
                "session: the queue is open now",
            ),
            one(
                "podgroup",
                "PodGroup train-uid-train is Pending: the scheduler has not admitted it "
                "(enqueued) yet and has not said why",
            ),
        ],
        podgroup=make_pg(record=record("queue", "queue team-a is Closed")),
    ),
    "bad record JSON falls back to the condition": Case(
        make_job(),
        [
            one(
                "podgroup",
                "PodGroup train-uid-train is Pending, unschedulable: NotEnoughResources: "
                "queue resource quota insufficient",
            )
        ],
        podgroup=make_pg(
            record='{"stage": "enqueue", "summ',
            unschedulable=("NotEnoughResources", "queue  resource quota\ninsufficient"),
        ),
    ),
    "no PodGroup, job not processed": Case(
        make_job(""),
        [
            one(
                "podgroup",
                "no PodGroup yet: the job controller has not processed the job yet "
                "(is it running?)",
            )
        ],
        podgroup=None,
    ),
    "no PodGroup, job Pending": Case(
        make_job(),
        [
            one(
                "podgroup",
                "no PodGroup yet: the job controller has not created it (it creates the job's "
                "plugin resources and volumes first: see the job's events)",
            )
        ],
        podgroup=None,
    ),
    "pods not scheduled, grouped, without bound or deleted pods": Case(
        make_job(running=0),
        [
            one(
                "pods",
                "3 pods are not scheduled:",
                "2 pods: 0/4 nodes are available: 4 Insufficient cpu.",
                "1 pod: 0/4 nodes are available: 4 node(s) had untolerated taint.",
            )
        ],
        podgroup=make_pg("Inqueue"),
        pods=[
            make_pod("train-worker-0", unscheduled="0/4 nodes are available: 4 Insufficient cpu."),
            make_pod("train-worker-1", unscheduled="0/4 nodes are available:  4 Insufficient cpu."),
            make_pod(
                "train-worker-2",
                unscheduled="0/4 nodes are available: 4 node(s) had untolerated taint.",
            ),
            make_pod("train-worker-3", unscheduled="old message", node="node-1"),
            make_pod("train-worker-4", unscheduled="old message", deleting=True),
        ],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_explain_says_each_stage_in_order(case: Case) -> None:
    """Each situation gives exactly the expected findings, most decisive first."""
    got = explain(case.job, case.podgroup, case.queue, case.pods, NOW, commands=case.commands)
    assert [(f.stage, f.text, f.details) for f in got] == case.expected


def test_an_unreadable_queue_is_not_called_missing() -> None:
    """When the user may not read queues (cluster-scoped), nothing is said about the queue."""
    got = explain(
        make_job(),
        make_pg(record=record("enqueue", ENQUEUE_SUMMARY)),
        None,
        [],
        NOW,
        queue_readable=False,
    )
    assert [f.text for f in got] == [f"scheduler (as of 12s ago): {ENQUEUE_SUMMARY}"]


def test_all_that_apply_come_in_order_of_precedence() -> None:
    """A job in a closed queue, with a task waiting on dependsOn, a current scheduler record and
    unscheduled pods gets all four, in that order."""
    got = explain(
        make_job(tasks=PS_WORKER),
        make_pg("Inqueue", record=record("allocate", "2 of 4 pods cannot be placed")),
        make_queue("Closed"),
        [make_pod("train-ps-0", unscheduled="0/4 nodes are available: 4 Insufficient cpu.")],
        NOW,
    )
    assert [f.stage for f in got] == ["queue", "dependsOn", "allocate", "pods"]


def test_pod_messages_are_bounded() -> None:
    """More distinct PodScheduled messages than MAX_POD_MESSAGES: the most shared first, then
    one line summing up the rest."""
    pods = [
        make_pod(f"train-worker-{i}-{j}", unscheduled=f"reason {i}")
        for i in range(MAX_POD_MESSAGES + 2)
        for j in range(i + 1)
    ]
    [finding] = explain(make_job(), make_pg("Inqueue"), make_queue(), pods, NOW)
    assert finding.text == "15 pods are not scheduled:"
    assert finding.details == (
        "5 pods: reason 4",
        "4 pods: reason 3",
        "3 pods: reason 2",
        "... and 3 more pods with 2 other messages",
    )


def test_a_long_record_is_shown_as_the_scheduler_bounded_it() -> None:
    """The record's own bounds (caldera.api.why) hold in what is printed: at most MAX_DETAILS
    detail lines, the last one counting the cut ones."""
    details = [f"task t{i} (1 pods): 0/4 nodes are available" for i in range(20)]
    [finding] = explain(
        make_job(), make_pg("Inqueue", record=record("allocate", "x", details)), None, [], NOW
    )[1:]
    assert len(finding.details) == 8
    assert finding.details[-1] == "... and 13 more"


def test_render_lines_and_json_form() -> None:
    """Plain text indents detail lines under their finding; the JSON form keeps them apart."""
    findings = [Finding("allocate", "scheduler: x", ("a", "b")), Finding("pods", "y")]
    assert render_lines(findings) == ["scheduler: x", "  a", "  b", "y"]
    assert json.loads(json.dumps([f.as_dict() for f in findings])) == [
        {"stage": "allocate", "text": "scheduler: x", "details": ["a", "b"]},
        {"stage": "pods", "text": "y", "details": []},
    ]


def test_job_view_has_a_why_section() -> None:
    """``caldera job view`` prints the findings under "Why:", indented, before the pods."""
    job = make_job()
    lines = render_lines(explain(job, make_pg(record=record("enqueue", "held")), None, [], NOW))
    text = output.render_job_view(
        job, podgroup=make_pg(), pods=[], events=[], now=NOW, why=lines
    ).splitlines()
    start = text.index("Why:")
    assert text[start + 1 : text.index("Pods:")] == [
        "  queue team-a does not exist: no job in it is admitted until it is created "
        "(`caldera queue create -n team-a`)",
        "  scheduler (as of 12s ago): held",
    ]


def test_job_view_without_findings_has_no_why_section() -> None:
    text = output.render_job_view(make_job(), podgroup=None, pods=[], events=[], now=NOW)
    assert "Why:" not in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["job", "why"], "job name must be specified (NAME or -N NAME)"),
        (["job", "why", "a", "-N", "b"], "two job names given: a and -N b; give one"),
    ],
)
def test_why_needs_one_job_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing or doubly given name is one line on stderr and exit code 1, before connecting."""
    assert main(argv) == 1
    assert capsys.readouterr().err == f"caldera: error: {message}\n"


def test_why_refuses_wide_output(capsys: pytest.CaptureFixture[str]) -> None:
    """-o takes json or yaml only: a table format is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        main(["job", "why", "a", "-o", "wide"])
    assert exc.value.code == 2
    assert "invalid choice: 'wide'" in capsys.readouterr().err
