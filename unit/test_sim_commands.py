"""A trace's ``commands`` (simulator/spec.py): a Command on a Job some time after its arrival,
run by the simulator's job controller as the real one runs a bus.volcano.sh Command."""

from __future__ import annotations

import pytest

from caldera.api.volcano import Action
from simulator.spec import JobCommand, SpecError
from unit.sim_fixtures import entry, job, run, scenario


def test_commands_are_read_after_the_arrival_of_each_copy() -> None:
    scene = scenario(
        entry(job("j"), 60, copies=2, every=30, commands=[{"action": "AbortJob", "after": "1m"}])
    )
    assert [(s.at, s.commands) for s in scene.jobs] == [
        (60.0, (JobCommand(Action.ABORT_JOB, 60.0),)),
        (90.0, (JobCommand(Action.ABORT_JOB, 60.0),)),
    ]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ({"action": "Dance", "after": 1}, r"commands\[0\]\.action: must be one of AbortJob"),
        ({"action": "AbortJob", "after": -1}, r"commands\[0\]\.after: must be a duration"),
        ({"action": "AbortJob"}, "missing required field `after`"),
    ],
)
def test_bad_commands_are_refused_naming_the_field(
    command: dict[str, object], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        scenario(entry(job("j"), commands=[command]))


def test_an_abort_command_ends_a_running_job_aborted_and_resume_runs_it_again() -> None:
    commands = [{"action": "AbortJob", "after": 100}, {"action": "ResumeJob", "after": 200}]
    result = run(scenario(entry(job("j"), runTime=600, commands=commands)))
    (record,) = result.jobs
    assert record.phases == [
        "Pending",
        "Running",
        "Aborting",
        "Aborted",
        "Restarting",
        "Pending",
        "Running",
        "Completed",
    ]
    assert record.restarts == 1
    assert [(p.attempt, p.outcome) for p in record.pods] == [(1, "Deleted"), (2, "Succeeded")]


def test_a_restart_command_counts_against_max_retry() -> None:
    commands = [{"action": "RestartJob", "after": 50}, {"action": "RestartJob", "after": 100}]
    result = run(scenario(entry(job("j", maxRetry=2), runTime=600, commands=commands)))
    (record,) = result.jobs
    assert record.phase == "Failed"
    assert record.phases[-2:] == ["Restarting", "Failed"]


def test_a_command_for_a_job_gone_is_not_made() -> None:
    late = [{"action": "AbortJob", "after": 5000}]
    result = run(scenario(entry(job("j", ttlSecondsAfterFinished=0), runTime=10, commands=late)))
    (record,) = result.jobs
    assert record.phase == "Completed"
    assert record.deleted is not None
