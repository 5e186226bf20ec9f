"""Job admission rules (Volcano's pkg/webhooks/admission/jobs/): one row per default and per
refusal."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.api.volcano import Job
from unit.webhook_fixtures import (
    container,
    job_dict,
    queue,
    task,
    three_task_job,
    to_job,
)
from webhooks.admission import apply_patch
from webhooks.jobs import mutate_job, validate_job_create, validate_job_update
from webhooks.view import StaticView

CLUSTER = StaticView(
    [
        queue("default"),
        queue("root", state="Open"),
        queue("closed", state="Closed"),
        queue("fresh", state=""),
        queue("parent"),
        queue("child", parent="parent"),
    ]
)


def admit(data: dict[str, Any]) -> str:
    return validate_job_create(to_job(data), CLUSTER)


def ops(data: dict[str, Any]) -> dict[str, Any]:
    return {op["path"]: op["value"] for op in mutate_job(to_job(data), scheduler_name="volcano")}


# --- defaults -----------------------------------------------------------------------------------


def test_valid_job_is_admitted() -> None:
    """The realistic three-task job passes every rule."""
    assert admit(three_task_job()) == ""


@pytest.mark.parametrize(
    ("spec", "path", "value"),
    [
        ({"queue": ""}, "/spec/queue", "default"),
        ({}, "/spec/schedulerName", "volcano"),
        ({"maxRetry": 0}, "/spec/maxRetry", 3),
        ({"tasks": [task(""), task("b")]}, "/spec/tasks/0/name", "default0"),
        ({"tasks": [task("a"), task("")]}, "/spec/tasks/1/name", "default1"),
        ({"tasks": [task("a", 4)]}, "/spec/tasks/0/minAvailable", 4),
        ({"tasks": [task("a")]}, "/spec/tasks/0/maxRetry", 3),
        (
            {"minAvailable": 0, "tasks": [task("a", 2), task("b", 3, minAvailable=1)]},
            "/spec/minAvailable",
            3,
        ),
        (
            {
                "tasks": [
                    task(
                        "a",
                        4,
                        partitionPolicy={
                            "totalPartitions": 2,
                            "partitionSize": 2,
                            "minPartitions": 1,
                        },
                    )
                ]
            },
            "/spec/tasks/0/minAvailable",
            2,
        ),
        ({"plugins": {"tensorflow": []}}, "/spec/plugins", {"tensorflow": [], "svc": []}),
        ({"plugins": {"pytorch": []}}, "/spec/plugins", {"pytorch": [], "svc": []}),
        ({"plugins": {"mxnet": []}}, "/spec/plugins", {"mxnet": [], "svc": []}),
        ({"plugins": {"ray": []}}, "/spec/plugins", {"ray": [], "svc": []}),
        (
            {"plugins": {"mpi": ["--port=2222"]}},
            "/spec/plugins",
            {"mpi": ["--port=2222"], "svc": [], "ssh": []},
        ),
    ],
)
def test_defaults(spec: dict[str, Any], path: str, value: Any) -> None:
    """Each of Volcano's job defaults is a JSON-patch `add` of the expected value."""
    assert ops(job_dict(**spec))[path] == value


def test_host_network_gets_cluster_first_with_host_net() -> None:
    """A hostNetwork pod without dnsPolicy gets ClusterFirstWithHostNet; one with it keeps it."""
    t = task("a")
    t["template"]["spec"]["hostNetwork"] = True
    kept = task("b")
    kept["template"]["spec"].update(hostNetwork=True, dnsPolicy="Default")
    patch = ops(job_dict(tasks=[t, kept]))
    assert patch["/spec/tasks/0/template/spec/dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "/spec/tasks/1/template/spec/dnsPolicy" not in patch


def test_user_plugins_and_values_are_never_overridden() -> None:
    """A job that sets every defaulted field, and svc/ssh itself, gets no patch at all."""
    data = job_dict(
        schedulerName="mine",
        maxRetry=5,
        minAvailable=1,
        plugins={"mpi": [], "svc": ["--disable-network-policy"], "ssh": []},
        tasks=[task("master", 1, minAvailable=1, maxRetry=1)],
    )
    assert ops(data) == {}


def test_job_without_tasks_gets_no_patch() -> None:
    """Validation refuses it; a patch under a missing /spec would only confuse the message."""
    assert mutate_job(Job(), scheduler_name="volcano") == []


# --- create rules -------------------------------------------------------------------------------

_LONG = "x" * 60


def _policies(*ps: dict[str, Any]) -> dict[str, Any]:
    return job_dict(tasks=[task("a", policies=list(ps))])


def _template(**spec: Any) -> dict[str, Any]:
    t = task("a")
    t["template"]["spec"].update(spec)
    return job_dict(tasks=[t])


def _volumes(*vs: dict[str, Any]) -> dict[str, Any]:
    return job_dict(volumes=list(vs))


CREATE_RULES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "minAvailable < 0",
        job_dict(minAvailable=-1),
        "spec.minAvailable",
        "job 'minAvailable' must be >= 0.",
    ),
    (
        "maxRetry < 0",
        job_dict(maxRetry=-1),
        "spec.maxRetry",
        "'maxRetry' cannot be less than zero.",
    ),
    (
        "ttl < 0",
        job_dict(ttlSecondsAfterFinished=-1),
        "spec.ttlSecondsAfterFinished",
        "'ttlSecondsAfterFinished' cannot be less than zero.",
    ),
    ("no task", job_dict(tasks=[]), "spec.tasks", "No task specified in job spec"),
    (
        "mpi master missing",
        job_dict(plugins={"mpi": []}, tasks=[task("worker")]),
        "spec.plugins.mpi",
        "The specified mpi master task was not found",
    ),
    (
        "mpi custom master missing",
        job_dict(plugins={"mpi": ["--master=head"]}, tasks=[task("master")]),
        "spec.plugins.mpi",
        "The specified mpi master task was not found",
    ),
    (
        "replicas < 0",
        job_dict(tasks=[task("a", -1)]),
        "spec.tasks[0].replicas",
        "'replicas' < 0 in task: a, job: train;",
    ),
    (
        "task minAvailable < 0",
        job_dict(tasks=[task("a", minAvailable=-1)]),
        "spec.tasks[0].minAvailable",
        "'minAvailable' < 0 in task: a, job: train;",
    ),
    (
        "task minAvailable > replicas",
        job_dict(tasks=[task("a", 2, minAvailable=3)]),
        "spec.tasks[0].minAvailable",
        "'minAvailable' is greater than 'replicas' in task: a, job: train;",
    ),
    (
        "task name not a label",
        job_dict(tasks=[task("Bad_Name")]),
        "spec.tasks[0].name",
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters",
    ),
    (
        "duplicate task",
        job_dict(tasks=[task("a"), task("a")]),
        "spec.tasks[1].name",
        "duplicated task name a;",
    ),
    (
        "task maxRetry < 0",
        job_dict(tasks=[task("a", maxRetry=-1)]),
        "spec.tasks[0].maxRetry",
        "'maxRetry' cannot be less than zero.",
    ),
    (
        "pod name too long",
        job_dict(name=_LONG, tasks=[task("worker", 10)]),
        "spec.tasks[0].name",
        f"create pod with name {_LONG}-worker-9 validate failed [name part must be no more than 63",
    ),
    (
        "job name not qualified",
        job_dict(name="-bad"),
        "metadata.name",
        "create job with name -bad validate failed",
    ),
    (
        "minAvailable > replicas",
        job_dict(minAvailable=5),
        "spec.minAvailable",
        "job 'minAvailable' should not be greater than total replicas in tasks;",
    ),
    (
        "minSuccess > replicas",
        job_dict(minSuccess=5),
        "spec.minSuccess",
        "job 'minSuccess' should not be greater than total replicas in tasks;",
    ),
    # policies
    (
        "event and exitCode",
        _policies({"event": "PodFailed", "exitCode": 1, "action": "AbortJob"}),
        "spec.tasks[0].policies[0]",
        "must not specify event and exitCode simultaneously",
    ),
    (
        "neither event nor exitCode",
        _policies({"action": "AbortJob"}),
        "spec.tasks[0].policies[0]",
        "either event and exitCode should be specified",
    ),
    (
        "invalid event",
        _policies({"event": "PodExploded", "action": "AbortJob"}),
        "spec.tasks[0].policies[0].event",
        'Invalid value: "PodExploded": invalid policy event',
    ),
    (
        "internal event",
        _policies({"event": "OutOfSync", "action": "AbortJob"}),
        "spec.tasks[0].policies[0].event",
        "invalid policy event",
    ),
    (
        "invalid action",
        _policies({"event": "PodFailed", "action": "Explode"}),
        "spec.tasks[0].policies[0].action",
        'Invalid value: "Explode": invalid policy action',
    ),
    (
        "internal action",
        _policies({"event": "PodFailed", "action": "SyncJob"}),
        "spec.tasks[0].policies[0].action",
        "invalid policy action",
    ),
    (
        "duplicate event",
        _policies(
            {"event": "PodFailed", "action": "AbortJob"},
            {"events": ["PodEvicted", "PodFailed"], "action": "RestartJob"},
        ),
        "spec.tasks[0].policies[1].event",
        "duplicate event PodFailed  across different policy",
    ),
    (
        "exit code 0",
        _policies({"exitCode": 0, "action": "AbortJob"}),
        "spec.tasks[0].policies[0].exitCode",
        "0 is not a valid error code",
    ),
    (
        "duplicate exit code",
        _policies({"exitCode": 3, "action": "AbortJob"}, {"exitCode": 3, "action": "RestartJob"}),
        "spec.tasks[0].policies[1].exitCode",
        "duplicate exitCode 3",
    ),
    (
        "star with others",
        _policies(
            {"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "RestartJob"}
        ),
        "spec.tasks[0].policies",
        "if there's * here, no other policy should be here",
    ),
    (
        "bad timeout",
        _policies({"event": "PodFailed", "action": "AbortJob", "timeout": "5 min"}),
        "spec.tasks[0].policies[0].timeout",
        "invalid duration",
    ),
    (
        "job-level policy",
        job_dict(policies=[{"event": "CommandIssued", "action": "AbortJob"}]),
        "spec.policies[0].event",
        "invalid policy event",
    ),
    (
        "policy hint",
        job_dict(policies=[{"event": "CommandIssued", "action": "AbortJob"}]),
        "spec.policies[0]",
        "valid events are [* PodFailed PodEvicted PodPending Unknown",
    ),
    # plugins
    (
        "unknown plugin",
        job_dict(plugins={"horovod": []}),
        "spec.plugins",
        "unable to find job plugin: horovod;",
    ),
    (
        "unknown plugin flag",
        job_dict(plugins={"svc": ["--nope"]}),
        "spec.plugins.svc",
        "flag provided but not defined: -nope",
    ),
    (
        "bad plugin port",
        job_dict(plugins={"tensorflow": ["--port=99999"]}),
        "spec.plugins.tensorflow",
        "must be a port between 1 and 65535",
    ),
    (
        "bad plugin bool",
        job_dict(plugins={"svc": ["--disable-network-policy=maybe"]}),
        "spec.plugins.svc",
        "invalid boolean value 'maybe'",
    ),
    (
        "ray without head task",
        job_dict(plugins={"ray": []}, tasks=[task("worker")]),
        "spec.plugins.ray",
        "job train doesn't have head task head;",
    ),
    (
        "ray ports clash",
        job_dict(plugins={"ray": ["--dashboardPort=6379"]}, tasks=[task("head", 1)]),
        "spec.plugins.ray",
        "flags --port and --dashboardPort both use port 6379",
    ),
    (
        "ray service name too long",
        job_dict("r" * 55, plugins={"ray": []}, tasks=[task("head", 1)]),
        "metadata.name",
        f"the ray plugin creates a Service {'r' * 55}-head-svc, and a Service name has at most "
        "63 characters",
    ),
    (
        "hcclrank roles clash",
        job_dict(plugins={"hcclrank": ["--worker=master"]}),
        "spec.plugins.hcclrank",
        "flags --master and --worker both name task 'master'",
    ),
    # volumes
    (
        "mountPath required",
        _volumes({"volumeClaimName": "pvc"}),
        "spec.volumes[0].mountPath",
        "mountPath is required;",
    ),
    (
        "duplicated mountPath",
        _volumes(
            {"mountPath": "/d", "volumeClaimName": "a"}, {"mountPath": "/d", "volumeClaimName": "b"}
        ),
        "spec.volumes[1].mountPath",
        "duplicated mountPath: /d;",
    ),
    (
        "no claim",
        _volumes({"mountPath": "/d"}),
        "spec.volumes[0]",
        "either VolumeClaim or VolumeClaimName must be specified;",
    ),
    (
        "both claims",
        _volumes({"mountPath": "/d", "volumeClaimName": "a", "volumeClaim": {"accessModes": []}}),
        "spec.volumes[0]",
        "conflict: If you want to use an existing PVC, just specify VolumeClaimName",
    ),
    (
        "bad claim name",
        _volumes({"mountPath": "/d", "volumeClaimName": "Bad"}),
        "spec.volumes[0].volumeClaimName",
        "invalid VolumeClaimName Bad",
    ),
    # queue
    (
        "queue missing",
        job_dict(queue="nope"),
        "spec.queue",
        'unable to find job queue: queue.scheduling.volcano.sh "nope" not found;',
    ),
    (
        "queue closed",
        job_dict(queue="closed"),
        "spec.queue",
        "can only submit job to queue with state `Open`, queue `closed` status is `Closed`;",
    ),
    ("root queue", job_dict(queue="root"), "spec.queue", "can not submit job to root queue;"),
    (
        "not a leaf",
        job_dict(queue="parent"),
        "spec.queue",
        "can only submit job to leaf queue, queue `parent` has 1 child queues;",
    ),
    # dependsOn
    (
        "cycle",
        job_dict(
            tasks=[task("a", dependsOn={"name": ["b"]}), task("b", dependsOn={"name": ["a"]})]
        ),
        "spec.tasks",
        "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);",
    ),
    (
        "self dependency",
        job_dict(tasks=[task("a", dependsOn={"name": ["a"]})]),
        "spec.tasks",
        "doesn't form a directed acyclic graph(DAG)",
    ),
    (
        "unknown dependency",
        job_dict(tasks=[task("a", dependsOn={"name": ["z"]})]),
        "spec.tasks[0].dependsOn.name",
        "task z is not a task of this job",
    ),
    (
        "bad iteration",
        job_dict(tasks=[task("a"), task("b", dependsOn={"name": ["a"], "iteration": "some"})]),
        "spec.tasks[1].dependsOn.iteration",
        'Unsupported value: "some"',
    ),
    # networkTopology
    (
        "tier exclusivity",
        job_dict(networkTopology={"highestTierAllowed": 1, "highestTierName": "x"}),
        "spec.networkTopology",
        "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
        "simultaneously",
    ),
    # template
    (
        "no containers",
        _template(containers=[]),
        "spec.task[0].template.spec.containers",
        "Required value",
    ),
    (
        "bad container name",
        _template(containers=[container("Main")]),
        "spec.task[0].template.spec.containers[0].name",
        'Invalid value: "Main"',
    ),
    (
        "duplicate container",
        _template(containers=[container("a"), container("a")]),
        "spec.task[0].template.spec.containers[1].name",
        'Duplicate value: "a"',
    ),
    (
        "bad quantity",
        _template(containers=[container(cpu="one")]),
        "spec.task[0].template.spec.containers[0].resources.requests[cpu]",
        "invalid quantity 'one'",
    ),
    (
        "negative request",
        _template(containers=[container(cpu="-1")]),
        "spec.task[0].template.spec.containers[0].resources.requests[cpu]",
        'spec.task[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0;",
    ),
    (
        "request above limit",
        _template(
            containers=[
                container(cpu="2")
                | {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}
            ]
        ),
        "spec.task[0].template.spec.containers[0].resources.requests",
        "must be less than or equal to cpu limit of 1",
    ),
    (
        "bad restartPolicy",
        _template(restartPolicy="Sometimes"),
        "spec.task[0].template.spec.restartPolicy",
        'Unsupported value: "Sometimes"',
    ),
    (
        "bad dnsPolicy",
        _template(dnsPolicy="Google"),
        "spec.task[0].template.spec.dnsPolicy",
        'Unsupported value: "Google"',
    ),
    (
        "numa non-integer cpu",
        job_dict(
            tasks=[
                task(
                    "a",
                    topologyPolicy="single-numa-node",
                    template={"spec": {"containers": [container(cpu="500m")]}},
                )
            ]
        ),
        "spec.task[0] container[0]",
        "the cpu request isn't an integer in spec.task[0] container[0].",
    ),
    (
        "bad topologyPolicy",
        job_dict(tasks=[task("a", topologyPolicy="all-numa")]),
        "spec.tasks[0].topologyPolicy",
        'Unsupported value: "all-numa"',
    ),
    # partitionPolicy (v1.14)
    (
        "partition product",
        job_dict(tasks=[task("a", 5, partitionPolicy={"totalPartitions": 2, "partitionSize": 2})]),
        "spec.tasks[0].replicas",
        "'Replicas' are not equal to TotalPartitions*PartitionSize in task: a, job: train;",
    ),
    (
        "partition size 0",
        job_dict(tasks=[task("a", 4, partitionPolicy={"totalPartitions": 2, "partitionSize": 0})]),
        "spec.tasks[0].partitionPolicy.partitionSize",
        "'PartitionSize' must be greater than 0 in task: a, job: train;",
    ),
    (
        "partition count 0",
        job_dict(tasks=[task("a", 4, partitionPolicy={"totalPartitions": 0, "partitionSize": 0})]),
        "spec.tasks[0].partitionPolicy.totalPartitions",
        "'TotalPartitions' must be greater than 0 in task: a, job: train;",
    ),
    (
        "partition minimum",
        job_dict(
            tasks=[
                task(
                    "a",
                    4,
                    minAvailable=3,
                    partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
                )
            ]
        ),
        "spec.tasks[0].minAvailable",
        "'MinAvailable' is not equal to MinPartitions*PartitionSize in task: a, job: train;",
    ),
    # Caldera volumeClaimTemplates
    (
        "vct bad name",
        job_dict(tasks=[task("a", volumeClaimTemplates=[{"metadata": {"name": "Data"}}])]),
        "spec.tasks[0].volumeClaimTemplates[0].metadata.name",
        "a lowercase RFC 1123 label",
    ),
    (
        "vct duplicate",
        job_dict(
            tasks=[
                task(
                    "a",
                    volumeClaimTemplates=[{"metadata": {"name": "d"}}, {"metadata": {"name": "d"}}],
                )
            ]
        ),
        "spec.tasks[0].volumeClaimTemplates[1].metadata.name",
        'Duplicate value: "d"',
    ),
    (
        "vct pvc name too long",
        job_dict(
            name="j" * 200,
            tasks=[task("t" * 63, 100, volumeClaimTemplates=[{"metadata": {"name": "d" * 63}}])],
        ),
        "spec.tasks[0].volumeClaimTemplates[0].metadata.name",
        "would be invalid: [must be no more than 253 characters]",
    ),
    (
        "vct bad storage",
        job_dict(
            tasks=[
                task(
                    "a",
                    volumeClaimTemplates=[
                        {
                            "metadata": {"name": "d"},
                            "spec": {"resources": {"requests": {"storage": "lots"}}},
                        }
                    ],
                )
            ]
        ),
        "spec.tasks[0].volumeClaimTemplates[0].spec.resources.requests[storage]",
        "invalid quantity 'lots'",
    ),
]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [pytest.param(d, f, m, id=name) for name, d, f, m in CREATE_RULES],
)
def test_create_rules(data: dict[str, Any], field: str, message: str) -> None:
    """Each create rule refuses its bad job with Volcano's message, after the field's path."""
    refusal = admit(data)
    assert message in refusal
    assert field in refusal


def test_fresh_queue_without_state_counts_as_open() -> None:
    """A queue the queue controller has not opened yet takes jobs (documented difference)."""
    assert admit(job_dict(queue="fresh")) == ""


def test_template_volume_overrides_claim_template() -> None:
    """A claim template named like a template volume makes no PVC, so its length is not checked."""
    t = task("t" * 63, 100, volumeClaimTemplates=[{"metadata": {"name": "data"}}])
    t["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    assert admit(job_dict(name="j" * 63, tasks=[t])).count("would be invalid") == 0


def test_fragments_accumulate() -> None:
    """Independent problems are all reported in one message, in Volcano's `;` style."""
    refusal = admit(job_dict(queue="nope", plugins={"horovod": []}, tasks=[task("a", -1)]))
    assert refusal.count(";") == 4  # replicas, minAvailable vs total, plugin, queue


def test_mutated_job_passes_validation() -> None:
    """Defaulting then validating a job with unnamed tasks admits it (the API server's order)."""
    data = job_dict(minAvailable=0, plugins={"mpi": []}, tasks=[task("master", 1), task("", 3)])
    assert "a lowercase RFC 1123 label" in admit(data)
    patched = apply_patch(data, mutate_job(to_job(data), scheduler_name="volcano"))
    assert admit(patched) == ""
    assert patched["spec"]["minAvailable"] == 4


# --- update rules -------------------------------------------------------------------------------


def _update(change: dict[str, Any], old: dict[str, Any] | None = None) -> str:
    before = old or job_dict(minAvailable=2, tasks=[task("a", 2, minAvailable=2)])
    after = job_dict(**{**before["spec"], **change})
    return validate_job_update(to_job(before), to_job(after))


@pytest.mark.parametrize(
    "change",
    [
        {"minAvailable": 1},
        {"priorityClassName": "high"},
        {"tasks": [task("a", 5, minAvailable=3)]},
        {"minAvailable": 4, "tasks": [task("a", 4, minAvailable=4)]},
    ],
)
def test_update_whitelist(change: dict[str, Any]) -> None:
    """Scaling fields and priorityClassName may change."""
    assert _update(change) == ""


def test_update_ignores_controller_filled_claim_name() -> None:
    """volumeClaimName filled in by the controller for a volumeClaim volume is not a change."""
    vol = {"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}
    before = job_dict(minAvailable=2, volumes=[vol])
    assert _update({"volumes": [{**vol, "volumeClaimName": "train-pvc"}]}, before) == ""


UPDATE_RULES: list[tuple[str, dict[str, Any], str]] = [
    (
        "replicas < 0",
        {"tasks": [task("a", -1, minAvailable=0)]},
        "spec.tasks[0].replicas: 'replicas' must be >= 0 in task: a",
    ),
    (
        "minAvailable < 0",
        {"tasks": [task("a", 2, minAvailable=-1)]},
        "spec.tasks[0].minAvailable: 'minAvailable' must be >= 0 in task: a",
    ),
    (
        "minAvailable > replicas",
        {"tasks": [task("a", 2, minAvailable=3)]},
        "spec.tasks[0].minAvailable: 'minAvailable' must be <= 'replicas' in task: a",
    ),
    (
        "job minAvailable > total",
        {"minAvailable": 9},
        "spec.minAvailable: job 'minAvailable' must not be greater than total replicas",
    ),
    (
        "job minAvailable < 0",
        {"minAvailable": -1},
        "spec.minAvailable: job 'minAvailable' must be >= 0",
    ),
    (
        "add task",
        {"tasks": [task("a", 2, minAvailable=2), task("b")]},
        "spec.tasks: job updates may not add or remove tasks",
    ),
    (
        "change queue",
        {"queue": "other"},
        "job updates may not change fields other than `minAvailable`, "
        "`tasks[*].replicas under spec` and `PriorityClassName` (changed: spec.queue)",
    ),
    (
        "change template",
        {"tasks": [task("a", 2, minAvailable=2, template={"spec": {}})]},
        "(changed: spec.tasks[0].template)",
    ),
    ("change plugins", {"plugins": {"env": []}}, "(changed: spec.plugins)"),
]
PARTITIONED = {"totalPartitions": 2, "partitionSize": 2}


def test_update_scales_a_partitioned_task_by_whole_partitions() -> None:
    """Volcano checks the partition policy on update too: replicas stay a whole number of
    partitions (the policy itself may not change)."""
    before = job_dict(
        minAvailable=2, tasks=[task("a", 4, minAvailable=2, partitionPolicy=PARTITIONED)]
    )
    grown = {"tasks": [task("a", 6, minAvailable=2, partitionPolicy=PARTITIONED)]}
    assert _update(grown, before) == (
        "spec.tasks[0].replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize "
        "in task: a, job: train"
    )
    kept = {"tasks": [task("a", 4, minAvailable=3, partitionPolicy=PARTITIONED)]}
    assert _update(kept, before) == ""


@pytest.mark.parametrize(
    ("change", "message"), [pytest.param(c, m, id=n) for n, c, m in UPDATE_RULES]
)
def test_update_rules(change: dict[str, Any], message: str) -> None:
    """Each update rule refuses its change with its message, naming the field."""
    assert message in _update(change)


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        ({"ray": ["--headContainer="]}, "spec.plugins.ray: plugin ray: flag --headContainer"),
        ({"tensorflow": ["--ps=worker"]}, "flags --ps and --worker both name task 'worker'"),
        ({"ssh": ["--ssh-public-key=abc"]}, "flag --ssh-public-key needs --ssh-private-key"),
    ],
)
def test_plugin_arguments_as_the_controller_reads_them(
    plugins: dict[str, list[str]], message: str
) -> None:
    """Plugin arguments are refused where the job controller's parser would fail on them."""
    assert message in admit(job_dict(plugins=plugins))


def test_private_key_is_never_echoed() -> None:
    """A private key pasted as a positional argument is redacted from the refusal."""
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret\n-----END RSA PRIVATE KEY-----"
    refusal = admit(job_dict(plugins={"ssh": [key]}))
    assert "spec.plugins.ssh" in refusal
    assert "MIIsecret" not in refusal
