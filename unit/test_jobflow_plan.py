"""What the jobflow controller plans for one JobFlow at one instant (controllers.jobflow.plan)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.flow import (
    Flow,
    FlowDependsOn,
    FlowJobStatus,
    FlowState,
    JobFlow,
    JobFlowSpec,
    JobFlowStatus,
    JobRunningHistory,
    JobTemplate,
    Probe,
    TcpSocket,
)
from caldera.api.meta import ObjectMeta, OwnerReference, format_time
from caldera.api.volcano import Job, JobSpec, JobState, JobStatus, TaskSpec, TaskState
from controllers.jobflow.plan import Plan, controlled_by, flow_job_keys, plan

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
CREATED = "2026-03-01T11:00:00Z"
STEPS = ("preprocess", "train", "evaluate")


def jobflow(
    *flows: Flow, phase: str = "", retain: str = "", history: Sequence[FlowJobStatus] = ()
) -> JobFlow:
    if not flows:
        flows = (
            Flow(name="preprocess"),
            Flow(name="train", depends_on=FlowDependsOn(targets=("preprocess",))),
            Flow(name="evaluate", depends_on=FlowDependsOn(targets=("train",))),
        )
    return JobFlow(
        metadata=ObjectMeta(name="pipe", namespace="ml", uid="jf-uid"),
        spec=JobFlowSpec(flows=flows, job_retain_policy=retain),
        status=JobFlowStatus(state=FlowState(phase=phase), job_status_list=tuple(history)),
    )


def template(name: str) -> JobTemplate:
    return JobTemplate(
        metadata=ObjectMeta(name=name, namespace="ml", labels={"kept": "no"}),
        spec=JobSpec(queue="q1", min_available=1, tasks=(TaskSpec(name=name, replicas=1),)),
    )


TEMPLATES = {name: template(name) for name in (*STEPS, "a", "b", "c", "d", "x")}


def job(step: str, phase: str = "Running", *, owner: str = "jf-uid", **status: object) -> Job:
    ref = OwnerReference(
        api_version="flow.volcano.sh/v1alpha1", kind="JobFlow", name="pipe", uid=owner
    )
    return Job(
        metadata=ObjectMeta(
            name=f"pipe-{step}",
            namespace="ml",
            uid=f"{step}-uid",
            creation_timestamp=CREATED,
            owner_references=(msgspec.structs.replace(ref, controller=True),),
        ),
        status=JobStatus(state=JobState(phase=phase), **status),  # type: ignore[arg-type]
    )


def created(p: Plan) -> list[str]:
    return [j.metadata.name for j in p.create]


def reasons(p: Plan) -> list[str]:
    return [n.reason for n in p.notes]


def test_a_new_flow_creates_its_first_step_as_volcano_names_and_labels_it() -> None:
    """Only the step without targets starts: ``<flow>-<step>`` with the template's spec, the
    createdBy labels and annotations (``<ns>.<name>``) and a controller reference."""
    p = plan(jobflow(), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-preprocess"]
    made = p.create[0]
    created_by = {
        "volcano.sh/createdByJobTemplate": "ml.preprocess",
        "volcano.sh/createdByJobFlow": "ml.pipe",
    }
    assert made.metadata.labels == created_by
    assert made.metadata.annotations == created_by
    assert made.metadata.namespace == "ml"
    assert made.spec == TEMPLATES["preprocess"].spec
    (ref,) = made.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid) == (
        "flow.volcano.sh/v1alpha1",
        "JobFlow",
        "pipe",
        "jf-uid",
    )
    assert ref.controller
    assert ref.block_owner_deletion
    assert controlled_by(made, jobflow())
    assert p.status is not None
    assert p.status.state.phase == "Pending"
    assert p.transition is None


def test_a_step_starts_when_every_target_completed() -> None:
    """train starts after preprocess completed, evaluate not yet; a Running target is not
    enough; with two targets both must have completed."""
    running = plan(jobflow(), [job("preprocess", "Running")], TEMPLATES, NOW)
    assert created(running) == []
    done = plan(jobflow(), [job("preprocess", "Completed")], TEMPLATES, NOW)
    assert created(done) == ["pipe-train"]
    fan_in = jobflow(
        Flow(name="a"), Flow(name="b"), Flow(name="c", depends_on=FlowDependsOn(targets=("a", "b")))
    )
    one = plan(fan_in, [job("a", "Completed"), job("b", "Running")], TEMPLATES, NOW)
    assert created(one) == []
    both = plan(fan_in, [job("a", "Completed"), job("b", "Completed")], TEMPLATES, NOW)
    assert created(both) == ["pipe-c"]


def test_independent_steps_start_together_in_flow_order() -> None:
    """Flows without targets all start in the first reconcile, in the order of spec.flows."""
    p = plan(jobflow(Flow(name="b"), Flow(name="a"), Flow(name="d")), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-b", "pipe-a", "pipe-d"]


def test_probes_are_not_waited_for() -> None:
    """A flow whose dependsOn has only a probe starts at once, as in Volcano (probes are not
    implemented there either)."""
    probe = Probe(tcp_socket_list=(TcpSocket(task_name="t", port=80),))
    p = plan(jobflow(Flow(name="a", depends_on=FlowDependsOn(probe=probe))), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-a"]


def test_a_missing_template_is_reported_and_waited_for() -> None:
    """No JobTemplate of the flow's name: a Warning, nothing created, the other steps go on."""
    p = plan(jobflow(Flow(name="ghost"), Flow(name="a")), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-a"]
    (note,) = p.notes
    assert (note.type, note.reason) == ("Warning", "MissingJobTemplate")
    assert "jobtemplate 'ghost' not found in namespace 'ml'" in note.message


def test_a_job_of_another_owner_under_a_step_name_blocks_that_step() -> None:
    """A Job named like a step but controlled by someone else is not the step's Job: it is not
    recreated, not counted, and does not satisfy the steps waiting for it."""
    foreign = job("preprocess", "Completed", owner="other-uid")
    p = plan(jobflow(), [foreign], TEMPLATES, NOW)
    assert created(p) == []
    assert reasons(p) == ["ForeignJob"]
    assert p.status is not None
    assert p.status.completed_jobs == ()


def test_repeated_flow_names_make_one_job() -> None:
    """Volcano allows a name twice; its Job is created once, when either entry may start."""
    flows = (
        Flow(name="a", depends_on=FlowDependsOn(targets=("b",))),
        Flow(name="a"),
        Flow(name="b"),
    )
    p = plan(jobflow(*flows), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-a", "pipe-b"]


def test_status_lists_jobs_by_phase_as_volcano() -> None:
    """Pending/Running/Failed/Completed/Terminated lists; Aborted and Restarting are unknown;
    Completing and Terminating are in no list; conditions and jobStatusList per Job."""
    flows = tuple(Flow(name=n) for n in "abcdefgh")
    jobs = [
        job("a", "Pending"),
        job("b", "Running", running_duration="1m30s", retry_count=2),
        job("c", "Completed"),
        job("d", "Failed"),
        job("e", "Terminated"),
        job("f", "Aborted"),
        job("g", "Completing"),
        job("h", "Restarting", task_status_count={"t": TaskState(phase={"Running": 1})}),
    ]
    p = plan(jobflow(*flows, phase="Running"), jobs, {}, NOW)
    s = p.status
    assert s is not None
    assert s.pending_jobs == ("pipe-a",)
    assert s.running_jobs == ("pipe-b",)
    assert s.completed_jobs == ("pipe-c",)
    assert s.failed_jobs == ("pipe-d",)
    assert s.terminated_jobs == ("pipe-e",)
    assert s.un_know_jobs == ("pipe-f", "pipe-h")
    assert sorted(s.conditions) == [f"pipe-{n}" for n in "abcdefgh"]
    b = s.conditions["pipe-b"]
    assert (b.phase, b.create_time, b.running_duration) == ("Running", CREATED, "1m30s")
    assert s.conditions["pipe-h"].task_status_count == {"t": TaskState(phase={"Running": 1})}
    entry = s.job_status_list[1]
    assert (entry.name, entry.state, entry.restart_count) == ("pipe-b", "Running", 2)
    assert (entry.start_timestamp, entry.end_timestamp) == (CREATED, "2026-03-01T11:01:30Z")
    assert entry.running_histories == (
        JobRunningHistory(start_timestamp=format_time(NOW), state="Running"),
    )
    assert s.state.phase == "Failed"


def test_running_histories_close_on_a_phase_change_and_keep_gone_jobs() -> None:
    """A phase change closes the last history entry at now and opens one; an unchanged phase
    leaves it; an entry for a Job that is gone stays in jobStatusList."""
    earlier = "2026-03-01T11:30:00Z"
    history = (
        FlowJobStatus(
            name="pipe-preprocess",
            state="Running",
            running_histories=(JobRunningHistory(start_timestamp=earlier, state="Running"),),
        ),
        FlowJobStatus(name="pipe-old", state="Completed"),
    )
    p = plan(jobflow(phase="Running", history=history), [job("preprocess", "Completed")], {}, NOW)
    assert p.status is not None
    first, gone = p.status.job_status_list
    assert first.running_histories == (
        JobRunningHistory(start_timestamp=earlier, end_timestamp=format_time(NOW), state="Running"),
        JobRunningHistory(start_timestamp=format_time(NOW), state="Completed"),
    )
    assert gone == history[1]
    same = plan(jobflow(phase="Running", history=history), [job("preprocess")], {}, NOW)
    assert same.status is not None
    assert same.status.job_status_list[0].running_histories == history[0].running_histories


def test_phases_follow_volcanos_state_machine() -> None:
    """Pending while nothing runs; Running once a Job runs or completed; Succeed when every
    step completed (in one look from Pending); Failed on a Failed or Terminated Job."""
    assert plan(jobflow(), [job("preprocess", "Pending")], TEMPLATES, NOW).status.state == (  # type: ignore[union-attr]
        FlowState(phase="Pending")
    )
    running = plan(jobflow(), [job("preprocess")], TEMPLATES, NOW)
    assert running.status is not None
    assert running.status.state.phase == "Running"
    assert running.transition is None
    all_done = [job(s, "Completed") for s in STEPS]
    done = plan(jobflow(), all_done, TEMPLATES, NOW)
    assert done.status is not None
    assert done.status.state.phase == "Succeed"
    assert done.transition is not None
    assert done.transition.phase == "Succeed"
    assert done.transition.note.reason == "Succeeded"
    for phase in ("Failed", "Terminated"):
        failed = plan(
            jobflow(phase="Running"), [job("preprocess", "Completed"), job("train", phase)], {}, NOW
        )
        assert failed.status is not None
        assert failed.status.state.phase == "Failed"
        assert failed.transition is not None
        assert failed.transition.note.type == "Warning"
        assert "pipe-train" in failed.transition.note.message


def test_a_failed_flow_creates_nothing_and_keeps_its_lists_current() -> None:
    """A failed step stops the flow: no later step starts even if its targets completed; the
    Job lists still follow the Jobs (a branch running beside the failure finishing)."""
    flows = (
        Flow(name="a"),
        Flow(name="b"),
        Flow(name="c", depends_on=FlowDependsOn(targets=("a",))),
    )
    jobs = [job("a", "Completed"), job("b", "Failed")]
    p = plan(jobflow(*flows, phase="Failed"), jobs, TEMPLATES, NOW)
    assert created(p) == []
    assert p.status is not None
    assert (p.status.completed_jobs, p.status.failed_jobs) == (("pipe-a",), ("pipe-b",))
    assert p.status.state.phase == "Failed"
    assert p.transition is None


def test_a_succeeded_flow_deletes_its_jobs_only_with_the_delete_policy() -> None:
    """Succeed + delete: every Job it controls (not those being deleted, not others') is deleted
    and the status is left as it was; Succeed + retain keeps them and creates nothing."""
    jobs = [
        job("preprocess", "Completed"),
        job("train", "Completed"),
        job("evaluate", "Completed", owner="someone-else"),
        msgspec.structs.replace(
            job("extra", "Completed"),
            metadata=msgspec.structs.replace(
                job("extra").metadata, deletion_timestamp="2026-03-01T11:59:00Z"
            ),
        ),
    ]
    deleting = plan(jobflow(phase="Succeed", retain="delete"), jobs, TEMPLATES, NOW)
    assert [j.metadata.name for j in deleting.delete] == ["pipe-preprocess", "pipe-train"]
    assert (deleting.create, deleting.status, deleting.notes) == ((), None, ())
    kept = plan(jobflow(phase="Succeed", retain="retain"), jobs[:2], TEMPLATES, NOW)
    assert (kept.create, kept.delete) == ((), ())
    assert kept.status is not None
    assert kept.status.state.phase == "Succeed"


def test_a_stored_cycle_is_reported() -> None:
    """A cycle or an undefined target (stored without the webhook) is a Warning naming it; the
    flows outside it still run."""
    flows = (
        Flow(name="a", depends_on=FlowDependsOn(targets=("b",))),
        Flow(name="b", depends_on=FlowDependsOn(targets=("a",))),
        Flow(name="c", depends_on=FlowDependsOn(targets=("x",))),
        Flow(name="d"),
    )
    p = plan(jobflow(*flows), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-d"]
    messages = [n.message for n in p.notes if n.reason == "InvalidFlow"]
    assert any("'x' is not defined" in m for m in messages)
    assert any("cycle (a -> b -> a)" in m for m in messages)


def test_an_unchanged_status_is_not_written() -> None:
    """Planning again over the status just planned, with the same Jobs, writes nothing."""
    jobs = [job("preprocess", "Completed"), job("train", "Running")]
    first = plan(jobflow(phase="Running"), jobs, TEMPLATES, NOW)
    assert first.status is not None
    again_flow = msgspec.structs.replace(jobflow(), status=first.status)
    later = NOW + dt.timedelta(minutes=5)
    again = plan(again_flow, jobs, TEMPLATES, later)
    assert again.status is None
    assert again.create == ()


def test_a_completed_step_whose_job_is_gone_is_not_run_again() -> None:
    """A Job deleted after it completed (a TTL) is remembered by jobStatusList: it is not
    created again, the steps waiting for it start, and it counts for Succeed."""
    history = (FlowJobStatus(name="pipe-preprocess", state="Completed"),)
    p = plan(jobflow(phase="Running", history=history), [], TEMPLATES, NOW)
    assert created(p) == ["pipe-train"]
    gone = (
        *history,
        FlowJobStatus(name="pipe-train", state="Completed"),
        FlowJobStatus(name="pipe-evaluate", state="Running"),
    )
    last = plan(jobflow(phase="Running", history=gone), [job("evaluate", "Completed")], {}, NOW)
    assert created(last) == []
    assert last.status is not None
    assert last.status.state.phase == "Succeed"
    assert last.status.completed_jobs == ("pipe-evaluate",)  # the lists hold what exists
    failed_then_gone = (FlowJobStatus(name="pipe-preprocess", state="Failed"),)
    again = plan(jobflow(phase="Running", history=failed_then_gone), [], TEMPLATES, NOW)
    assert created(again) == ["pipe-preprocess"]


def test_an_unknown_phase_is_derived_again() -> None:
    """A phase no controller writes is read as Pending."""
    p = plan(jobflow(phase="Weird"), [job("preprocess")], TEMPLATES, NOW)
    assert p.status is not None
    assert p.status.state.phase == "Running"


# --- the dependency order, as a property --------------------------------------------------------


@st.composite
def dags(draw: st.DrawFn) -> tuple[Flow, ...]:
    """Flows s0..sN whose targets name only earlier flows, listed in a shuffled order."""
    n = draw(st.integers(1, 7))
    flows = []
    for i in range(n):
        targets = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        depends = FlowDependsOn(targets=tuple(f"s{t}" for t in targets)) if targets else None
        flows.append(Flow(name=f"s{i}", depends_on=depends))
    return tuple(draw(st.permutations(flows)))


def _run(flows: tuple[Flow, ...], data: st.DataObject, fail: str | None) -> tuple[list[str], str]:
    """Plan, create, finish some running Jobs, delete some completed ones (as a TTL would),
    repeat: the creation order and the final phase. Each Job is created once, after its targets
    completed."""
    templates = {f.name: template(f.name) for f in flows}
    targets = {f.name: f.depends_on.targets if f.depends_on else () for f in flows}
    flow = jobflow(*flows)
    jobs: dict[str, Job] = {}
    order: list[str] = []
    completed: set[str] = set()
    for _ in range(4 * len(flows) + 4):
        p = plan(flow, list(jobs.values()), templates, NOW)
        for made in p.create:
            step = made.metadata.name.removeprefix("pipe-")
            assert set(targets[step]) <= completed
            assert step not in order
            jobs[made.metadata.name] = msgspec.structs.replace(
                made, status=JobStatus(state=JobState(phase="Running"))
            )
            order.append(step)
        if p.status is not None:
            flow = msgspec.structs.replace(flow, status=p.status)
        done = sorted(n for n, j in jobs.items() if j.status.state.phase == "Completed")
        for name in data.draw(st.lists(st.sampled_from(done), unique=True)) if done else []:
            del jobs[name]  # a TTL: the flow must neither run it again nor wait for it forever
        running = sorted(n for n, j in jobs.items() if j.status.state.phase == "Running")
        for name in (
            data.draw(st.lists(st.sampled_from(running), min_size=1, unique=True))
            if running
            else []
        ):
            phase = "Failed" if name == f"pipe-{fail}" else "Completed"
            jobs[name] = msgspec.structs.replace(
                jobs[name], status=JobStatus(state=JobState(phase=phase))
            )
        completed.update(
            n.removeprefix("pipe-") for n, j in jobs.items() if j.status.state.phase == "Completed"
        )
        if flow.status.state.phase in ("Succeed", "Failed") and p.status is None:
            break
    return order, flow.status.state.phase


@settings(max_examples=200, deadline=None)
@given(dags(), st.data())
def test_jobs_start_in_dependency_order_and_the_flow_succeeds(
    flows: tuple[Flow, ...], data: st.DataObject
) -> None:
    """Whatever the DAG and however Jobs finish, every step starts once, after its targets
    completed; the flow ends Succeed."""
    order, phase = _run(flows, data, fail=None)
    assert sorted(order) == sorted(f.name for f in flows)
    assert phase == "Succeed"


@settings(max_examples=200, deadline=None)
@given(dags(), st.data())
def test_a_failed_step_stops_the_flow(flows: tuple[Flow, ...], data: st.DataObject) -> None:
    """When one step fails, the flow ends Failed and no step waiting on it (directly or not)
    ever starts."""
    fail = data.draw(st.sampled_from([f.name for f in flows]))
    order, phase = _run(flows, data, fail=fail)
    assert phase == "Failed"
    targets = {f.name: f.depends_on.targets if f.depends_on else () for f in flows}
    below = {fail}
    changed = True
    while changed:
        changed = False
        for name, ts in targets.items():
            if name not in below and below & set(ts):
                below.add(name)
                changed = True
    assert not (below - {fail}) & set(order)


def test_a_tenants_namesake_of_a_completed_step_neither_undoes_nor_blocks_it() -> None:
    """The step's own Job completed and went (a TTL); a tenant then made a Job of its name: the
    step stays done (the next starts, the flow can succeed), the tenant's Job is neither
    counted, deleted nor reported as blocking."""
    history = (FlowJobStatus(name="pipe-preprocess", state="Completed"),)
    tenants = job("preprocess", "Running", owner="tenant-uid")
    p = plan(jobflow(phase="Running", history=history), [tenants], TEMPLATES, NOW)
    assert created(p) == ["pipe-train"]
    assert reasons(p) == []
    assert p.status is None  # unchanged: the tenant's running Job is not listed
    done = (
        *history,
        FlowJobStatus(name="pipe-train", state="Completed"),
        FlowJobStatus(name="pipe-evaluate", state="Completed"),
    )
    last = plan(jobflow(phase="Running", history=done), [tenants], TEMPLATES, NOW)
    assert last.status is not None
    assert last.status.state.phase == "Succeed"
    deleting = plan(jobflow(phase="Succeed", retain="delete", history=done), [tenants], {}, NOW)
    assert deleting.delete == ()


def test_every_step_name_is_a_key_the_flow_is_queued_by() -> None:
    """Any Job under a step's name queues the flow (another's going lets the step start)."""
    assert flow_job_keys(jobflow()) == ["ml/pipe-evaluate", "ml/pipe-preprocess", "ml/pipe-train"]
