"""Tests of the CLI's pure parts: tables, ages, pod status, queue counts, the job view, JSON/YAML,
the Job `caldera job run` builds, and the completion tree."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from caldera.api.core import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Event,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
)
from caldera.api.duration import human_duration
from caldera.api.flow import FlowState, JobFlow, JobFlowStatus, JobTemplate, JobTemplateStatus
from caldera.api.meta import ObjectMeta, ObjectReference, OwnerReference, format_time
from caldera.api.volcano import (
    CronJob,
    CronJobSpec,
    CronJobStatus,
    Job,
    JobSpec,
    JobState,
    JobStatus,
    PodGroup,
    PodGroupCondition,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
    QueueStatus,
    TaskSpec,
    TaskState,
)
from caldera.kube.config import ConfigError
from caldera.kube.errors import ApiConnectionError, Forbidden, Invalid, NotFound, Unauthorized
from cli import flow, output
from cli.cluster import CliError, command_body, describe_error
from cli.completion import bash_script, completion_tree
from cli.job import (
    aligned_row,
    job_from_flags,
    job_podgroup,
    job_selected,
    parse_resources,
    related_events,
    table_widths,
)
from cli.main import build_parser
from cli.pod import select_pods

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def ago(**kwargs: float) -> str:
    return (NOW - dt.timedelta(**kwargs)).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- tables and ages --------------------------------------------------------------------------


def test_render_table_pads_each_column_to_its_widest_cell_plus_three() -> None:
    text = output.render_table(["Name", "N"], [["a", "10"], ["long-name", "2"]])
    assert text == "Name        N\na           10\nlong-name   2\n"


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (dt.timedelta(seconds=0), "0s"),
        (dt.timedelta(seconds=45), "45s"),
        (dt.timedelta(seconds=119), "119s"),
        (dt.timedelta(minutes=3, seconds=12), "3m12s"),
        (dt.timedelta(minutes=5), "5m"),
        (dt.timedelta(minutes=42), "42m"),
        (dt.timedelta(hours=5, minutes=3), "5h3m"),
        (dt.timedelta(hours=20), "20h"),
        (dt.timedelta(days=3, hours=4), "3d4h"),
        (dt.timedelta(days=3), "3d"),
        (dt.timedelta(days=40), "40d"),
        (dt.timedelta(days=800), "2y70d"),
        (dt.timedelta(days=365 * 9), "9y"),
        (dt.timedelta(seconds=-0.5), "0s"),
        (dt.timedelta(seconds=-30), "<invalid>"),
    ],
)
def test_ages_read_like_kubectl(delta: dt.timedelta, expected: str) -> None:
    assert human_duration(delta) == expected


def test_age_of_a_missing_or_bad_timestamp_is_unknown() -> None:
    assert output.format_age(None, NOW) == "<unknown>"
    assert output.format_age("yesterday", NOW) == "<unknown>"
    assert output.format_age(ago(minutes=90), NOW) == "90m"


def test_json_and_yaml_round_trip_and_json_uses_four_spaces() -> None:
    obj = output.as_list([{"kind": "Job", "metadata": {"name": "a"}}])
    text = output.dump(obj, "json")
    assert json.loads(text) == obj
    assert '\n    "kind": "List"' in text
    assert yaml.safe_load(output.dump(obj, "yaml")) == obj
    with pytest.raises(ValueError, match="unknown output format"):
        output.dump(obj, "xml")


# --- jobs -------------------------------------------------------------------------------------


def make_job(name: str = "train", **status: Any) -> Job:
    return Job(
        metadata=ObjectMeta(
            name=name,
            namespace="ml",
            uid=f"uid-{name}",
            creation_timestamp="2026-04-30T23:59:59Z",
            labels={"volcano.sh/job-type": "TensorFlow"} if name == "tf" else {},
        ),
        spec=JobSpec(
            queue="research",
            scheduler_name="volcano",
            min_available=3,
            tasks=(
                TaskSpec(
                    name="ps", replicas=1, template={"spec": {"containers": [{"image": "ps:1"}]}}
                ),
                TaskSpec(name="worker", replicas=2, min_available=2),
            ),
        ),
        status=JobStatus(
            state=JobState(phase=status.pop("phase", "Running")),
            min_available=3,
            task_status_count={"worker": TaskState(phase={"Running": 2})},
            **status,
        ),
    )


def test_job_row_has_vcctl_columns_in_order() -> None:
    job = make_job(pending=1, running=2, succeeded=3, failed=4, unknown=5, retry_count=6)
    assert output.job_row(job) == [
        "train", "2026-04-30", "Running", "Batch", "3", "3", "1", "2", "3", "4", "5", "6"
    ]  # fmt: skip
    assert output.job_row(make_job("tf"))[3] == "TensorFlow"
    assert output.job_row(job, all_namespaces=True)[:2] == ["ml", "train"]
    wide = output.job_row(job, wide=True, now=NOW)
    assert wide[-5:] == ["research", "volcano", "0", "0", "12h"]


def test_job_table_headers_and_empty_table() -> None:
    text = output.job_table([make_job()], all_namespaces=True)
    header = text.splitlines()[0].split()
    assert header == ["Namespace", *output.JOB_COLUMNS]
    assert output.job_table([]) == "No resources found\n"


# --- cronjobs ---------------------------------------------------------------------------------


def test_cronjob_rows_have_kubectls_columns() -> None:
    """NAME SCHEDULE SUSPEND ACTIVE LAST SCHEDULE AGE; <none> before the first schedule; wide
    adds the zone, the policy and the last success."""
    created = format_time(NOW - dt.timedelta(hours=12))
    cj = CronJob(
        metadata=ObjectMeta(name="nightly", namespace="ml", creation_timestamp=created),
        spec=CronJobSpec(schedule="0 2 * * *", time_zone="Europe/Paris"),
        status=CronJobStatus(
            active=(ObjectReference(name="nightly-1"),),
            last_schedule_time=format_time(NOW - dt.timedelta(minutes=5)),
        ),
    )
    assert output.cronjob_row(cj, now=NOW) == ["nightly", "0 2 * * *", "False", "1", "5m", "12h"]
    assert output.cronjob_row(cj, all_namespaces=True, now=NOW)[0] == "ml"
    assert output.cronjob_row(cj, wide=True, now=NOW)[-3:] == ["Europe/Paris", "Allow", "<none>"]
    fresh = CronJob(metadata=ObjectMeta(name="new", creation_timestamp=created))
    assert output.cronjob_row(fresh, now=NOW)[4] == "<none>"
    text = output.cronjob_table([cj], now=NOW)
    header = [h.strip() for h in text.splitlines()[0].split("   ") if h.strip()]
    assert header == ["NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
    assert output.cronjob_table([], now=NOW) == "No resources found\n"


def test_jobflow_and_jobtemplate_tables_have_vcctls_columns() -> None:
    """Name Namespace Phase Age for flows, Name Namespace for templates, byte for byte; wide
    counts each list of the flow's status and the Jobs a template made."""
    created = format_time(NOW - dt.timedelta(minutes=3))
    jf = JobFlow(
        metadata=ObjectMeta(name="pipeline", namespace="ml", creation_timestamp=created),
        status=JobFlowStatus(
            completed_jobs=("pipeline-a", "pipeline-b"),
            running_jobs=("pipeline-c",),
            state=FlowState(phase="Running"),
        ),
    )
    assert output.jobflow_table([jf], now=NOW) == (
        "Name       Namespace   Phase     Age\npipeline   ml          Running   3m\n"
    )
    assert output.jobflow_row(jf, wide=True, now=NOW)[4:] == ["0", "1", "2", "0", "0", "0"]
    assert output.jobflow_table([], now=NOW) == "No resources found\n"
    jt = JobTemplate(
        metadata=ObjectMeta(name="train", namespace="ml"),
        status=JobTemplateStatus(job_depends_on_list=("pipeline-train",)),
    )
    assert output.jobtemplate_table([jt]) == "Name    Namespace\ntrain   ml\n"
    assert output.jobtemplate_row(jt, wide=True) == ["train", "ml", "1"]
    assert output.jobtemplate_table([]) == "No resources found\n"


def test_flow_documents_keep_their_kind_and_fill_the_namespace(tmp_path: Path) -> None:
    """From a file holding templates and a flow, each command takes its kind (a document without
    a kind counts), fills a missing namespace, and notes what it skipped; a file without any
    is an error naming it."""
    path = tmp_path / "flow.yaml"
    path.write_text(
        "kind: JobTemplate\nmetadata: {name: a}\n---\n"
        "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata: {name: f, namespace: x}\n"
        "---\nmetadata: {name: g}\n"
    )
    jobflow, jobtemplate = flow.NOUNS
    flows, skipped = flow.documents(str(path), jobflow, None)
    # g names no namespace and no -n is given: the context's, filled in once connected.
    assert [(d["metadata"]["name"], d["metadata"].get("namespace"), d["kind"]) for d in flows] == [
        ("f", "x", "JobFlow"),
        ("g", None, "JobFlow"),
    ]
    assert skipped == ["skipped JobTemplate a: not a JobFlow"]
    templates, _ = flow.documents(str(path), jobtemplate, "ml")
    assert [(d["metadata"]["name"], d["metadata"]["namespace"]) for d in templates] == [
        ("a", "ml"),
        ("g", "ml"),
    ]
    only = tmp_path / "only.yaml"
    only.write_text("kind: Queue\nmetadata: {name: q}\n")
    with pytest.raises(CliError, match=r"only.yaml holds no JobFlow"):
        flow.documents(str(only), jobflow, None)


# --- queues -----------------------------------------------------------------------------------


def pg(queue: str, phase: str, name: str = "pg") -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace="ml", uid=f"uid-{name}"),
        spec=PodGroupSpec(queue=queue, min_member=2),
        status=PodGroupStatus(phase=phase),
    )


def test_queue_counts_come_from_podgroup_phases() -> None:
    groups = [
        pg("a", "Inqueue"),
        pg("a", "Running"),
        pg("a", "Running"),
        pg("a", ""),
        pg("a", "Pending"),
        pg("a", "Completed"),
        pg("b", "Unknown"),
        pg("b", "SomethingNew"),
    ]
    counts = output.queue_counts(groups)
    assert counts["a"] == output.QueueCounts(inqueue=1, pending=2, running=2, completed=1)
    assert counts["b"] == output.QueueCounts(unknown=1)


def test_queue_row_and_wide_shares() -> None:
    queue = Queue(
        metadata=ObjectMeta(name="research"),
        spec=QueueSpec(weight=4, parent="root"),
        status=QueueStatus(state="", allocated={"cpu": "2"}),
    )
    counts = output.QueueCounts(inqueue=1, pending=2, running=3, unknown=4, completed=5)
    assert output.queue_row(queue, counts) == [
        "research", "4", "Open", "root", "1", "2", "3", "4", "5"
    ]  # fmt: skip
    share = output.QueueShare(
        deserved={"cpu": "4", "memory": "1Gi"}, allocated={"cpu": "2"}, share=0.5
    )
    assert output.queue_row(queue, None, share=share, wide=True)[-3:] == [
        "cpu=4,memory=1Gi",
        "cpu=2",
        "0.50",
    ]
    assert output.queue_row(queue, None, wide=True)[-5:] == [
        "0", "traverse", "<unknown>", "cpu=2", "<unknown>"
    ]  # fmt: skip
    urgent = msgspec.structs.replace(
        queue, spec=msgspec.structs.replace(queue.spec, priority=5, dequeue_strategy="fifo")
    )
    assert output.queue_row(urgent, None, wide=True)[-5:-3] == ["5", "fifo"]
    table = output.queue_table([queue], {}, wide=True)
    assert table.splitlines()[0].split() == [*output.QUEUE_COLUMNS, *output.QUEUE_WIDE_COLUMNS]


# --- pods -------------------------------------------------------------------------------------


def pod(
    *statuses: ContainerStatus,
    phase: str = "Running",
    containers: int = 1,
    deleting: bool = False,
    init: tuple[ContainerStatus, ...] = (),
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name="p",
            namespace="ml",
            creation_timestamp=ago(minutes=5),
            deletion_timestamp=ago(seconds=1) if deleting else None,
            labels=labels or {},
            annotations=annotations or {},
        ),
        spec=PodSpec(
            containers=tuple(Container(name=f"c{i}") for i in range(containers)),
            init_containers=tuple(Container(name=s.name) for s in init),
            node_name="node-1",
        ),
        status=PodStatus(
            phase=phase,
            container_statuses=statuses,
            init_container_statuses=init,
            conditions=(PodCondition(type="Ready", status="True"),),
        ),
    )


RUNNING = ContainerState(running=ContainerStateRunning())


def test_pod_status_running_ready_with_restarts_ago() -> None:
    status = ContainerStatus(
        name="c0",
        ready=True,
        restart_count=2,
        state=RUNNING,
        last_state=ContainerState(
            terminated=ContainerStateTerminated(exit_code=1, finished_at=ago(minutes=3))
        ),
    )
    summary = output.pod_status(pod(status, containers=2), NOW)
    assert summary == output.PodStatusSummary("1/2", "Running", "2 (3m ago)")


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (
            ContainerState(waiting=ContainerStateWaiting(reason="ImagePullBackOff")),
            "ImagePullBackOff",
        ),
        (ContainerState(terminated=ContainerStateTerminated(reason="OOMKilled")), "OOMKilled"),
        (ContainerState(terminated=ContainerStateTerminated(exit_code=3)), "ExitCode:3"),
        (ContainerState(terminated=ContainerStateTerminated(signal=9)), "Signal:9"),
    ],
)
def test_pod_status_shows_the_container_reason(state: ContainerState, expected: str) -> None:
    summary = output.pod_status(pod(ContainerStatus(name="c0", state=state)), NOW)
    assert summary.status == expected
    assert summary.ready == "0/1"


def test_pod_status_terminating_init_and_pending() -> None:
    assert output.pod_status(pod(deleting=True), NOW).status == "Terminating"
    assert output.pod_status(pod(phase="Succeeded", deleting=True), NOW).status == "Succeeded"
    waiting = ContainerStatus(
        name="init", state=ContainerState(waiting=ContainerStateWaiting(reason="PodInitializing"))
    )
    assert output.pod_status(pod(init=(waiting,)), NOW).status == "Init:0/1"
    failed = ContainerStatus(
        name="init", state=ContainerState(terminated=ContainerStateTerminated(exit_code=2))
    )
    assert output.pod_status(pod(init=(failed,)), NOW).status == "Init:ExitCode:2"
    assert output.pod_status(pod(phase=""), NOW).status == "Pending"


def test_pod_rows_and_queue_filter() -> None:
    job_pod = pod(
        labels={
            "volcano.sh/job-name": "j",
            "volcano.sh/task-spec": "w",
            "volcano.sh/queue-name": "q",
        }
    )
    plain = pod(annotations={"scheduling.volcano.sh/queue-name": "q"})
    other = pod(labels={"volcano.sh/queue-name": "other"})
    assert output.pod_row(job_pod, NOW) == ["p", "0/1", "Running", "0", "5m"]
    assert output.pod_row(job_pod, NOW, all_namespaces=True, wide=True) == [
        "ml", "p", "0/1", "Running", "0", "5m", "j", "w", "q", "node-1", "<none>"
    ]  # fmt: skip
    assert select_pods([job_pod, plain, other], job="", queue="q") == [job_pod, plain]
    assert select_pods([job_pod], job="j", queue="q") == [job_pod]
    with pytest.raises(CliError, match="does not match the queue other"):
        select_pods([job_pod], job="j", queue="other")
    assert output.pod_table([], NOW) == "No resources found\n"


# --- job view ---------------------------------------------------------------------------------


def event(uid: str, kind: str, name: str, reason: str, message: str, minutes: float) -> Event:
    return Event(
        metadata=ObjectMeta(name=f"{name}.{reason}", namespace="ml"),
        involved_object=ObjectReference(kind=kind, name=name, uid=uid),
        reason=reason,
        message=message,
        type="Warning",
        last_timestamp=ago(minutes=minutes),
    )


def test_gang_status_prefers_the_condition_then_the_latest_event() -> None:
    group = pg("research", "Pending", name="train-uid")
    assert output.gang_status(None) is None
    assert output.gang_status(group) is None
    old = event("uid-train-uid", "PodGroup", "train-uid", "Unschedulable", "old news", 5)
    new = event(
        "uid-train-uid", "PodGroup", "train-uid", "Unschedulable", "3/3 tasks: 1 node(s) full", 1
    )
    assert output.gang_status(group, [old, new]) == "3/3 tasks: 1 node(s) full"
    stuck = PodGroup(
        metadata=group.metadata,
        spec=group.spec,
        status=PodGroupStatus(
            phase="Pending",
            conditions=(
                PodGroupCondition(
                    type="Unschedulable",
                    status="True",
                    reason="NotEnoughResources",
                    message="2/3 tasks in gang unschedulable",
                ),
            ),
        ),
    )
    assert output.gang_status(stuck, [new]) == "NotEnoughResources: 2/3 tasks in gang unschedulable"
    running = PodGroup(
        metadata=group.metadata,
        spec=group.spec,
        status=PodGroupStatus(phase="Running", conditions=stuck.status.conditions),
    )
    assert output.gang_status(running) is None


def test_job_view_shows_tasks_podgroup_reason_pods_and_events() -> None:
    job = make_job(phase="Pending")
    group = PodGroup(
        metadata=ObjectMeta(
            name="train-uid-train",
            uid="pg-uid",
            owner_references=(OwnerReference(uid="uid-train", controller=True),),
        ),
        spec=PodGroupSpec(queue="research", min_member=3),
        status=PodGroupStatus(phase="Pending"),
    )
    events = [
        event(
            "pg-uid",
            "PodGroup",
            "train-uid-train",
            "Unschedulable",
            "0/3 tasks in gang unschedulable",
            1,
        ),
        event("uid-train", "Job", "train", "CommandIssued", "Start to execute command AbortJob", 2),
    ]
    text = output.render_job_view(job, podgroup=group, pods=[pod()], events=events, now=NOW)
    lines = text.splitlines()
    assert "Name:          train" in lines
    assert "Phase:         Pending" in lines
    assert "Unschedulable: 0/3 tasks in gang unschedulable" in lines
    tasks = lines[lines.index("Tasks:") + 1 : lines.index("PodGroup:")]
    assert [row.split() for row in tasks] == [
        ["Name", "Replicas", "Min", "Pending", "Running", "Succeeded", "Failed", "Image"],
        ["ps", "1", "1", "0", "0", "0", "0", "ps:1"],
        ["worker", "2", "2", "0", "2", "0", "0", "<none>"],
    ]
    assert lines[lines.index("Pods:") + 2].split() == ["p", "0/1", "Running", "0", "node-1", "5m"]
    event_lines = lines[lines.index("Events:") + 2 :]
    # oldest first
    assert "CommandIssued" in event_lines[0]
    assert "job/train" in event_lines[0]
    assert "podgroup/train-uid-train" in event_lines[1]


def test_job_view_without_podgroup_pods_or_events() -> None:
    text = output.render_job_view(make_job(), podgroup=None, pods=[], events=[], now=NOW)
    for section in ("PodGroup:", "Pods:", "Events:"):
        assert f"{section}\n  <none>" in text
    assert "Unschedulable" not in text


# --- job run and commands ---------------------------------------------------------------------


def run_args(**overrides: Any) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(["job", "run", "-N", "demo"])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def test_job_run_builds_vcctls_job() -> None:
    body = job_from_flags(run_args(replicas=3, min=2, image="busybox:1.36"))
    # Without -n the namespace is the kubeconfig context's, filled in once connected.
    assert body["metadata"] == {"name": "demo"}
    assert job_from_flags(run_args(namespace="team"))["metadata"]["namespace"] == "team"
    spec = body["spec"]
    assert (spec["minAvailable"], spec["schedulerName"]) == (2, "volcano")
    [task] = spec["tasks"]
    assert (task["name"], task["replicas"]) == ("default0", 3)
    [container] = task["template"]["spec"]["containers"]
    assert container["image"] == "busybox:1.36"
    resources = {"cpu": "1000m", "memory": "100Mi"}
    assert container["resources"] == {"requests": resources, "limits": resources}
    assert task["template"]["spec"]["restartPolicy"] == "Never"


def test_job_run_rejects_bad_flags() -> None:
    with pytest.raises(CliError, match="job name must be specified"):
        job_from_flags(run_args(name=""))
    with pytest.raises(CliError, match="--requests: 'cpu' is not NAME=QUANTITY"):
        parse_resources("cpu", "--requests")
    with pytest.raises(CliError, match="--limits: cpu=lots"):
        parse_resources("cpu=lots", "--limits")
    assert parse_resources(" cpu=2, nvidia.com/gpu=1 ,", "-R") == {
        "cpu": "2",
        "nvidia.com/gpu": "1",
    }


def test_command_body_is_vcctls() -> None:
    target = OwnerReference(api_version="batch.volcano.sh/v1alpha1", kind="Job", name="j", uid="u1")
    body = command_body("ml", "AbortJob", target)
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "j",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert body["metadata"] == {
        "generateName": "j-abortjob-",
        "namespace": "ml",
        "ownerReferences": [ref],
    }
    assert body["target"] == ref
    assert body["action"] == "AbortJob"


# --- completion -------------------------------------------------------------------------------


def test_completion_tree_covers_every_command_and_choice() -> None:
    tree = completion_tree(build_parser())
    assert {"job", "queue", "cronjob", "jobflow", "jobtemplate", "pod", "completion"} <= set(
        tree[""].commands
    )
    assert tree["cronjob"].commands == ["list", "get", "suspend", "resume"]
    for noun in ("jobflow", "jobtemplate"):
        assert tree[noun].commands == ["create", "list", "get", "describe", "delete"]
    assert tree["job"].commands == [
        "run",
        "list",
        "view",
        "why",
        "wait",
        "suspend",
        "resume",
        "restart",
        "delete",
    ]
    assert {"-n", "-q", "-S", "-A", "--all-namespaces", "--selector", "-w", "-o"} <= set(
        tree["job list"].options
    )
    assert "--context" in tree["job list"].options
    assert tree["job list"].choices["-o"] == ["json", "yaml", "wide"]
    assert tree["queue create"].choices["--state"] == ["Open", "Closed"]
    script = bash_script(build_parser())
    assert "complete -o default -F _caldera_complete caldera" in script
    assert "'job list') echo" in script


# --- job list filters and watch rows, job view lookups, error lines ---------------------------


def test_job_filters_are_vcctls() -> None:
    args = build_parser().parse_args(["job", "list", "-q", "research", "--selector", "rai"])
    assert job_selected(make_job("train"), args)
    assert not job_selected(make_job("tf"), args)
    args.queue = "other"
    assert not job_selected(make_job("train"), args)
    args = build_parser().parse_args(["job", "list", "-S", "kube"])
    assert not job_selected(make_job("train"), args)


def test_watch_rows_line_up_with_the_table() -> None:
    text = output.render_table(["Name", "Phase", "N"], [["a", "Pending", "1"]])
    widths = table_widths(text)
    assert widths == [7, 10, 4]
    assert aligned_row(["longer", "Running", "2"], widths) == "longer Running   2"
    assert text.splitlines()[1] == aligned_row(["a", "Pending", "1"], widths)


def test_job_podgroup_and_related_events() -> None:
    job = make_job("train")
    owned = PodGroup(
        metadata=ObjectMeta(
            name="x",
            uid="pg1",
            owner_references=(OwnerReference(uid="uid-train", controller=True),),
        )
    )
    by_name = PodGroup(metadata=ObjectMeta(name="train-uid-train", uid="pg2"))
    assert job_podgroup(job, [by_name, owned]) is owned
    assert job_podgroup(job, [by_name]) is by_name
    assert job_podgroup(job, [pg("q", "Running")]) is None
    mine = event("pg1", "PodGroup", "x", "Unschedulable", "m", 1)
    other = event("zzz", "Pod", "y", "Scheduled", "m", 1)
    assert related_events([mine, other], {"pg1"}) == [mine]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (CliError("job default/x not found"), "job default/x not found"),
        (ConfigError("kubeconfig /x not found"), "kubeconfig /x not found"),
        (
            ApiConnectionError("cannot connect: refused", sent=False, method="GET", path="/api"),
            "cannot reach the API server at https://h:6443: cannot connect: refused",
        ),
        (
            Forbidden(403, "Forbidden", 'jobs is forbidden: User "u" cannot list'),
            'jobs is forbidden: User "u" cannot list',
        ),
        (
            Unauthorized(401, "Unauthorized", "Unauthorized"),
            "unauthorized: the API server rejected the credentials (Unauthorized)",
        ),
        (
            NotFound(
                404, "NotFound", "the server could not find the requested resource", path="/apis/x"
            ),
            "the API server does not serve /apis/x: are Caldera's CRDs installed?",
        ),
        (
            Invalid(422, "Invalid", 'Job.batch "x" is invalid: spec.tasks: Required value'),
            'Job.batch "x" is invalid: spec.tasks: Required value',
        ),
    ],
)
def test_errors_become_one_line(error: BaseException, expected: str) -> None:
    line = describe_error(error, "https://h:6443")
    assert line == expected
    assert "\n" not in line
