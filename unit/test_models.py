"""Tests for the wire models in caldera.api (meta, volcano, flow, core) and the kinds registry."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from caldera.api import core, flow, kinds, volcano
from caldera.api.codec import WatchEventDecoder, encode
from caldera.api.duration import (
    DurationError,
    format_duration,
    format_duration_ns,
    parse_duration,
    parse_duration_ns,
)
from caldera.api.meta import (
    Condition,
    LabelSelector,
    ListMeta,
    ObjectList,
    ObjectMeta,
    OwnerReference,
    Status,
    WatchEventType,
    condition_is_true,
    controller_of,
    find_condition,
    format_micro_time,
    format_time,
    object_key,
    parse_time,
)
from unit.examples import EXAMPLES

OWN_KINDS = {"Job", "Queue", "PodGroup", "Command", "CronJob"}


def _example_documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if doc and doc.get("kind") in OWN_KINDS and "volcano.sh/" in doc["apiVersion"]:
                docs.append((f"{path.name}#{index}", doc))
    return docs


EXAMPLE_DOCS = _example_documents()


def _field_default(struct: msgspec.Struct, key: str) -> Any:
    """The model default of the field encoded as `key`, or NODEFAULT when there is no such field."""
    for f in msgspec.structs.fields(struct):
        if f.encode_name == key:
            if f.default_factory is not msgspec.NODEFAULT:
                return f.default_factory()
            return f.default
    return msgspec.NODEFAULT


def _child(value: Any, key: str) -> Any:
    if isinstance(value, msgspec.Struct):
        for f in msgspec.structs.fields(value):
            if f.encode_name == key:
                return getattr(value, f.name)
        return None
    if isinstance(value, dict):
        return value.get(key)
    return None


def lost_fields(original: Any, encoded: Any, decoded: Any, path: str = "") -> list[str]:
    """Keys and values of `original` missing from `encoded`.

    A key may be absent from `encoded` only when its value equals the model's default for it
    (encoding omits defaults; the API server restores CRD defaults). `decoded` is the model value
    at the same place, used to look those defaults up.
    """
    if isinstance(original, dict):
        if not isinstance(encoded, dict):
            return [f"{path}: {original!r} became {encoded!r}"]
        lost = []
        for key, value in original.items():
            where = f"{path}.{key}"
            if key in encoded:
                lost += lost_fields(value, encoded[key], _child(decoded, key), where)
                continue
            if isinstance(decoded, msgspec.Struct):
                default = _field_default(decoded, key)
                if default is not msgspec.NODEFAULT and msgspec.to_builtins(default) == value:
                    continue
            lost.append(f"{where}: {value!r} was dropped")
        return lost
    if isinstance(original, list):
        if not isinstance(encoded, list) or len(encoded) != len(original):
            return [f"{path}: {original!r} became {encoded!r}"]
        items = decoded if isinstance(decoded, tuple | list) else [None] * len(original)
        lost = []
        for i, (a, b, d) in enumerate(zip(original, encoded, items, strict=True)):
            lost += lost_fields(a, b, d, f"{path}[{i}]")
        return lost
    if original != encoded or type(original) is not type(encoded):
        return [f"{path}: {original!r} became {encoded!r}"]
    return []


@pytest.mark.parametrize(("name", "doc"), EXAMPLE_DOCS, ids=[n for n, _ in EXAMPLE_DOCS])
def test_example_manifests_round_trip(name: str, doc: dict[str, Any]) -> None:
    """Decoding a Volcano example and encoding it back loses no key or value."""
    info = kinds.kind_for(doc["apiVersion"], doc["kind"])
    obj = msgspec.convert(doc, info.type)
    encoded = json.loads(encode(obj))
    assert lost_fields(doc, encoded, obj) == []
    assert info.decoder.decode(encode(obj)) == obj


def test_examples_cover_the_own_kinds() -> None:
    """The example set exercises Jobs and Queues (so the round-trip test is not vacuous)."""
    found = {doc["kind"] for _, doc in EXAMPLE_DOCS}
    assert {"Job", "Queue"} <= found


def test_lost_fields_detects_a_dropped_field() -> None:
    """The round-trip checker itself reports unknown, changed and non-default dropped fields."""
    doc = {"spec": {"queue": "default", "bogus": 1, "maxRetry": 5}}
    job = msgspec.convert(doc, volcano.Job)
    encoded = json.loads(encode(job))
    assert lost_fields(doc, encoded, job) == [".spec.bogus: 1 was dropped"]
    assert lost_fields({"a": [1, 2]}, {"a": [1]}, None) == [".a: [1, 2] became [1]"]


# Every field of the own kinds set, with Volcano's JSON names, so a wrong rename drops a value.
FULL_OBJECTS: list[tuple[type[msgspec.Struct], dict[str, Any]]] = [
    (
        volcano.Job,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {
                "name": "j",
                "generateName": "j-",
                "namespace": "ns",
                "uid": "u1",
                "resourceVersion": "7",
                "generation": 2,
                "creationTimestamp": "2024-05-01T10:00:00Z",
                "deletionTimestamp": "2024-05-01T11:00:00Z",
                "deletionGracePeriodSeconds": 30,
                "labels": {"a": "b"},
                "annotations": {"c": "d"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "X",
                        "name": "x",
                        "uid": "u0",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "finalizers": ["f"],
            },
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": 2,
                "volumes": [
                    {
                        "mountPath": "/data",
                        "volumeClaimName": "pvc",
                        "volumeClaim": {"accessModes": ["ReadWriteOnce"]},
                    }
                ],
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": 4,
                        "minAvailable": 2,
                        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                        "policies": [{"event": "PodFailed", "action": "RestartTask"}],
                        "topologyPolicy": "best-effort",
                        "maxRetry": 5,
                        "dependsOn": {"name": ["ps"], "iteration": "all"},
                        "partitionPolicy": {
                            "totalPartitions": 2,
                            "partitionSize": 2,
                            "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
                            "minPartitions": 1,
                        },
                        "volumeClaimTemplates": [
                            {
                                "metadata": {
                                    "name": "scratch",
                                    "namespace": "ns",
                                    "labels": {"x": "y"},
                                    "annotations": {"z": "w"},
                                    "finalizers": ["g"],
                                },
                                "spec": {"resources": {"requests": {"storage": "1Gi"}}},
                            }
                        ],
                    }
                ],
                "policies": [
                    {
                        "action": "RestartJob",
                        "event": "PodEvicted",
                        "events": ["PodFailed"],
                        "exitCode": 3,
                        "timeout": "1m",
                    }
                ],
                "plugins": {"ssh": [], "svc": ["--disable-network-policy=true"]},
                "runningEstimate": "2h",
                "queue": "q1",
                "maxRetry": 7,
                "ttlSecondsAfterFinished": 60,
                "priorityClassName": "high",
                "minSuccess": 1,
                "networkTopology": {"mode": "soft", "highestTierName": "rack"},
            },
            "status": {
                "state": {
                    "phase": "Running",
                    "reason": "r",
                    "message": "m",
                    "lastTransitionTime": "2024-05-01T10:00:00Z",
                },
                "minAvailable": 2,
                "taskStatusCount": {"worker": {"phase": {"Running": 4}}},
                "pending": 1,
                "running": 4,
                "succeeded": 1,
                "failed": 1,
                "terminating": 1,
                "unknown": 1,
                "version": 3,
                "retryCount": 2,
                "runningDuration": "1m0s",
                "controlledResources": {"plugin-ssh": "ssh"},
                "conditions": [{"status": "Pending", "lastTransitionTime": "2024-05-01T09:00:00Z"}],
            },
        },
    ),
    (
        volcano.CronJob,
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "metadata": {"name": "c"},
            "spec": {
                "schedule": "*/5 * * * *",
                "timeZone": "Europe/Paris",
                "startingDeadlineSeconds": 30,
                "concurrencyPolicy": "Forbid",
                "suspend": True,
                "jobTemplate": {"metadata": {"labels": {"a": "b"}}, "spec": {"minAvailable": 1}},
                "successfulJobsHistoryLimit": 5,
                "failedJobsHistoryLimit": 0,
            },
            "status": {
                "active": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "namespace": "ns",
                        "name": "c-1",
                        "uid": "u",
                        "resourceVersion": "1",
                        "fieldPath": "spec",
                    }
                ],
                "lastScheduleTime": "2024-05-01T10:00:00Z",
                "lastSuccessfulTime": "2024-05-01T10:00:00Z",
            },
        },
    ),
    (
        volcano.Command,
        {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {"name": "j-abortjob-x", "namespace": "ns"},
            "action": "AbortJob",
            "target": {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": "j",
                "uid": "u",
                "controller": True,
                "blockOwnerDeletion": False,
            },
            "reason": "r",
            "message": "m",
        },
    ),
    (
        volcano.PodGroup,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg"},
            "spec": {
                "minMember": 3,
                "minTaskMember": {"worker": 2},
                "queue": "q1",
                "priorityClassName": "high",
                "minResources": {"cpu": "3", "memory": "1Gi", "nvidia.com/gpu": 2},
                "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
                "subGroupPolicy": [
                    {
                        "name": "sg",
                        "networkTopology": {"mode": "soft", "highestTierName": "rack"},
                        "subGroupSize": 2,
                        "minSubGroups": 1,
                        "labelSelector": {
                            "matchLabels": {"a": "b"},
                            "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}],
                        },
                        "matchLabelKeys": ["volcano.sh/task-spec"],
                    }
                ],
            },
            "status": {
                "phase": "Inqueue",
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "transitionID": "t",
                        "lastTransitionTime": "2024-05-01T10:00:00Z",
                        "reason": "NotEnoughResources",
                        "message": "1/3 tasks in gang unschedulable",
                    }
                ],
                "running": 1,
                "succeeded": 1,
                "failed": 1,
            },
        },
    ),
    (
        volcano.Queue,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {
                "weight": 4,
                "capability": {"cpu": 8},
                "reclaimable": False,
                "extendClusters": [{"name": "c", "weight": 1, "capacity": {"cpu": "1"}}],
                "guarantee": {"resource": {"cpu": "500m"}},
                "affinity": {
                    "nodeGroupAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": ["g1"],
                        "preferredDuringSchedulingIgnoredDuringExecution": ["g2"],
                    },
                    "nodeGroupAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": ["g3"],
                        "preferredDuringSchedulingIgnoredDuringExecution": ["g4"],
                    },
                },
                "type": "t",
                "parent": "root",
                "deserved": {"cpu": "4"},
                "priority": 1,
                "dequeueStrategy": "fifo",
            },
            "status": {
                "state": "Open",
                "unknown": 1,
                "pending": 1,
                "running": 1,
                "inqueue": 1,
                "completed": 1,
                "reservation": {"nodes": ["n1"], "resource": {"cpu": "1"}},
                "allocated": {"cpu": "2"},
                "conditions": [
                    {
                        "type": "InvalidSpec",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "reason": "InvalidSpec",
                        "message": "spec.weight: Invalid value: -1",
                    }
                ],
            },
        },
    ),
    (
        flow.JobTemplate,
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobTemplate",
            "metadata": {"name": "train"},
            "spec": {"minAvailable": 1, "queue": "q1"},
            "status": {"jobDependsOnList": ["pipe-train", "other-train"]},
        },
    ),
    (
        flow.JobFlow,
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobFlow",
            "metadata": {"name": "pipe"},
            "spec": {
                "flows": [
                    {
                        "name": "train",
                        "dependsOn": {
                            "targets": ["prep"],
                            "probe": {
                                "httpGetList": [
                                    {
                                        "taskName": "master",
                                        "path": "/ready",
                                        "port": 8080,
                                        "httpHeader": {"name": "X-A", "value": "b"},
                                    }
                                ],
                                "tcpSocketList": [{"taskName": "master", "port": 22}],
                                "taskStatusList": [{"taskName": "worker", "phase": "Running"}],
                            },
                        },
                        "patch": {"jobSpec": {"queue": "q2", "anything": {"kept": [1]}}},
                    }
                ],
                "jobRetainPolicy": "delete",
            },
            "status": {
                "pendingJobs": ["pipe-a"],
                "runningJobs": ["pipe-b"],
                "failedJobs": ["pipe-c"],
                "completedJobs": ["pipe-prep"],
                "terminatedJobs": ["pipe-d"],
                "unKnowJobs": ["pipe-e"],
                "jobStatusList": [
                    {
                        "name": "pipe-prep",
                        "state": "Completed",
                        "startTimestamp": "2024-05-01T10:00:00Z",
                        "endTimestamp": "2024-05-01T10:05:00Z",
                        "restartCount": 1,
                        "runningHistories": [
                            {
                                "startTimestamp": "2024-05-01T10:00:00Z",
                                "endTimestamp": "2024-05-01T10:05:00Z",
                                "state": "Running",
                            }
                        ],
                    }
                ],
                "conditions": {
                    "pipe-prep": {
                        "phase": "Completed",
                        "createTime": "2024-05-01T10:00:00Z",
                        "runningDuration": "5m0s",
                        "taskStatusCount": {"shard": {"phase": {"Succeeded": 1}}},
                    }
                },
                "state": {"phase": "Running"},
            },
        },
    ),
]


def _unset_fields(value: Any, path: str = "") -> list[str]:
    """Paths of struct fields still equal to their default, i.e. missing from a sample."""
    if isinstance(value, tuple):
        return [p for i, v in enumerate(value) for p in _unset_fields(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _unset_fields(v, f"{path}.{k}")]
    if not isinstance(value, msgspec.Struct):
        return []
    unset = []
    for f in msgspec.structs.fields(value):
        current = getattr(value, f.name)
        default = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
        if current == default and f.encode_name not in ("apiVersion", "kind"):
            unset.append(f"{path}.{f.encode_name}")
        else:
            unset += _unset_fields(current, f"{path}.{f.encode_name}")
    return unset


# Paths each sample may leave at their default: covered by another sample, or exclusive with a
# field it sets (highestTierAllowed vs highestTierName), or a default the encoder omits.
ALLOWED_DEFAULT: dict[type[msgspec.Struct], tuple[str, ...]] = {
    volcano.Job: (
        ".spec.tasks[0].policies[0].",
        ".spec.tasks[0].partitionPolicy.networkTopology.highestTierName",
        ".spec.networkTopology.highestTierAllowed",
    ),
    volcano.CronJob: (".metadata.", ".spec.jobTemplate.metadata.", ".spec.jobTemplate.spec."),
    volcano.Command: (".metadata.",),
    volcano.PodGroup: (
        ".metadata.",
        ".spec.networkTopology.highestTierName",
        ".spec.subGroupPolicy[0].networkTopology.highestTierAllowed",
    ),
    volcano.Queue: (".metadata.",),
    flow.JobTemplate: (".metadata.", ".spec."),
    flow.JobFlow: (".metadata.",),
}


@pytest.mark.parametrize(
    ("model", "sample"), FULL_OBJECTS, ids=[m.__name__ for m, _ in FULL_OBJECTS]
)
def test_full_objects_round_trip_exactly(
    model: type[msgspec.Struct], sample: dict[str, Any]
) -> None:
    """A sample setting every field with Volcano's JSON names decodes and encodes back unchanged."""
    obj = msgspec.json.decode(json.dumps(sample), type=model)
    unset = [p for p in _unset_fields(obj) if not p.startswith(ALLOWED_DEFAULT[model])]
    assert unset == []
    assert json.loads(encode(obj)) == sample


def test_unset_fields_reports_missing_sample_fields() -> None:
    """The completeness check finds fields a sample leaves out."""
    job = volcano.Job(spec=volcano.JobSpec(min_available=1))
    assert ".spec.minAvailable" not in _unset_fields(job)
    assert ".spec.schedulerName" in _unset_fields(job)
    assert ".status" in _unset_fields(job)


@pytest.mark.parametrize("info", kinds.ALL_KINDS, ids=[i.kind for i in kinds.ALL_KINDS])
def test_empty_object_decodes_with_type_meta(info: kinds.KindInfo[Any]) -> None:
    """`{}` decodes for every kind, fills apiVersion and kind, and encodes only those two keys."""
    obj = info.decoder.decode(b"{}")
    assert (obj.api_version, obj.kind) == (info.api_version, info.kind)
    assert json.loads(encode(obj)) == {"apiVersion": info.api_version, "kind": info.kind}


def test_unknown_fields_are_skipped_and_partial_objects_decode() -> None:
    """A future field is ignored, and absent fields take the CRD or Go zero defaults."""
    job = volcano.JOB_DECODER.decode(
        b'{"spec":{"futureField":{"x":1},"tasks":[{"replicas":2}]},"status":{"state":{}}}'
    )
    assert job.spec.tasks[0].replicas == 2
    assert job.spec.tasks[0].min_available is None
    assert (job.spec.queue, job.spec.max_retry, job.spec.min_available) == ("default", 3, 0)
    assert job.status.state.phase == ""
    queue = volcano.QUEUE_DECODER.decode(b'{"metadata":{"name":"q"}}')
    assert (queue.spec.weight, queue.spec.reclaimable) == (1, None)
    assert queue.spec.dequeue_strategy == volcano.DequeueStrategy.TRAVERSE


def test_models_are_frozen() -> None:
    """Cache objects cannot be changed in place."""
    job = volcano.Job()
    with pytest.raises(AttributeError):
        job.spec = volcano.JobSpec()  # type: ignore[misc]
    replaced = msgspec.structs.replace(job.spec, queue="q")
    assert (replaced.queue, job.spec.queue) == ("q", "default")


JSON_NAMES = [
    (volcano.PodGroupCondition, "transition_id", "transitionID"),
    (volcano.JobSpec, "ttl_seconds_after_finished", "ttlSecondsAfterFinished"),
    (volcano.JobSpec, "min_available", "minAvailable"),
    (volcano.TaskSpec, "volume_claim_templates", "volumeClaimTemplates"),
    (volcano.Job, "api_version", "apiVersion"),
    (
        volcano.NodeGroupAffinity,
        "required_during_scheduling_ignored_during_execution",
        "requiredDuringSchedulingIgnoredDuringExecution",
    ),
    (ObjectMeta, "owner_references", "ownerReferences"),
    (flow.JobFlowStatus, "un_know_jobs", "unKnowJobs"),
    (flow.FlowCondition, "create_time", "createTime"),
    (flow.Probe, "http_get_list", "httpGetList"),
    (flow.Probe, "tcp_socket_list", "tcpSocketList"),
    (flow.HttpGet, "http_header", "httpHeader"),
    (flow.JobTemplateStatus, "job_depends_on_list", "jobDependsOnList"),
    (flow.JobFlowSpec, "job_retain_policy", "jobRetainPolicy"),
    (ListMeta, "continue_", "continue"),
    (core.PodStatus, "pod_ip", "podIP"),
    (core.ContainerPort, "host_ip", "hostIP"),
    (core.ServiceSpec, "cluster_ip", "clusterIP"),
    (core.ServiceSpec, "cluster_ips", "clusterIPs"),
    (core.NodeSpec, "provider_id", "providerID"),
    (core.LeaseSpec, "lease_duration_seconds", "leaseDurationSeconds"),
]


@pytest.mark.parametrize(("model", "attr", "json_name"), JSON_NAMES)
def test_json_names(model: type[msgspec.Struct], attr: str, json_name: str) -> None:
    """Fields whose Kubernetes name is not plain camelCase are spelled as Kubernetes spells them."""
    names = {f.name: f.encode_name for f in msgspec.structs.fields(model)}
    assert names[attr] == json_name


ENUMS = [
    (
        volcano.JobPhase,
        "Pending Aborting Aborted Running Restarting Completing Completed Terminating Terminated "
        "Failed",
    ),
    (
        volcano.Event,
        "* PodFailed PodEvicted PodPending PodRunning Unknown TaskCompleted TaskFailed JobUpdated "
        "OutOfSync CommandIssued",
    ),
    (
        volcano.Action,
        "AbortJob RestartJob RestartTask RestartPod RestartPartition TerminateJob CompleteJob "
        "ResumeJob SyncJob EnqueueJob SyncQueue OpenQueue CloseQueue",
    ),
    (volcano.PodGroupPhase, "Pending Running Unknown Inqueue Completed"),
    (volcano.QueueState, "Open Closed Closing Unknown"),
    (volcano.NumaPolicy, "none best-effort restricted single-numa-node"),
    (volcano.ConcurrencyPolicy, "Allow Forbid Replace"),
    (volcano.DequeueStrategy, "fifo traverse"),
    (volcano.NetworkTopologyMode, "hard soft"),
    (flow.RetainPolicy, "retain delete"),
    (flow.FlowPhase, "Succeed Terminating Failed Running Pending"),
]


@pytest.mark.parametrize(("enum_type", "values"), ENUMS, ids=[e.__name__ for e, _ in ENUMS])
def test_enum_values_match_volcano(enum_type: type[Any], values: str) -> None:
    """The string enums hold exactly the values Volcano's API types define."""
    assert {str(v) for v in enum_type} == set(values.split())


def test_policy_allow_lists() -> None:
    """The webhook allow-lists are the user-facing events and actions."""
    assert {str(e) for e in volcano.POLICY_EVENTS} == {
        "*",
        "PodFailed",
        "PodEvicted",
        "PodPending",
        "Unknown",
        "TaskCompleted",
        "TaskFailed",
        "JobUpdated",
    }
    assert volcano.Action.SYNC_JOB not in volcano.POLICY_ACTIONS
    assert len(volcano.POLICY_ACTIONS) == 8


@pytest.mark.parametrize(
    ("event", "events", "expected"),
    [
        ("PodFailed", (), ("PodFailed",)),
        ("", ("PodFailed", "PodEvicted"), ("PodFailed", "PodEvicted")),
        ("PodFailed", ("PodEvicted",), ("PodFailed", "PodEvicted")),
        ("PodFailed", ("PodFailed",), ("PodFailed",)),
        ("", (), ()),
    ],
)
def test_policy_events(event: str, events: tuple[str, ...], expected: tuple[str, ...]) -> None:
    """`event` and `events` are merged without duplicates."""
    policy = volcano.LifecyclePolicy(event=event, events=events)
    assert volcano.policy_events(policy) == expected


# --- core slices --------------------------------------------------------------------------------

POD_JSON = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "j-worker-0",
        "namespace": "ns",
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        "ownerReferences": [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": "j",
                "uid": "u",
                "controller": True,
            }
        ],
    },
    "spec": {
        "nodeName": "n1",
        "schedulerName": "volcano",
        "priority": 100,
        "priorityClassName": "high",
        "preemptionPolicy": "Never",
        "containers": [
            {
                "name": "c",
                "image": "nginx",
                "env": [{"name": "A", "value": "1"}],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 1}},
                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            }
        ],
        "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "namespaceSelector": {},
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["pod-template-hash"],
                    }
                ]
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 30,
                        "podAffinityTerm": {
                            "namespaces": ["other"],
                            "topologyKey": "zone",
                            "mismatchLabelKeys": ["tenant"],
                        },
                    }
                ]
            },
        },
        "tolerations": [
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "overhead": {"cpu": "100m"},
        "restartPolicy": "OnFailure",
        "hostname": "j-worker-0",
        "subdomain": "j",
        "schedulingGates": [{"name": "scheduling.volcano.sh/queue-allocation-gate"}],
    },
    "status": {
        "phase": "Failed",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z"}
        ],
        "startTime": "2024-05-01T10:00:00Z",
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.1",
        "containerStatuses": [
            {
                "name": "c",
                "restartCount": 1,
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
                "containerID": "containerd://abc",
            }
        ],
    },
}


def test_pod_slice_decodes_what_caldera_reads() -> None:
    """A full pod decodes into the slim model with the scheduler's and controller's fields."""
    pod = core.POD_DECODER.decode(json.dumps(POD_JSON))
    spec, status = pod.spec, pod.status
    assert (spec.node_name, spec.priority, spec.preemption_policy) == ("n1", 100, "Never")
    assert spec.containers[0].resources.requests == {"cpu": "500m", "memory": "1Gi"}
    assert spec.containers[0].resources.limits == {"cpu": 1}
    assert spec.containers[0].ports[0].host_port == 8080
    assert spec.init_containers[0].restart_policy == "Always"
    assert spec.affinity is not None
    assert spec.affinity.node_affinity is not None
    required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    assert required.node_selector_terms[0].match_expressions[0].values == ("a",)
    anti = spec.affinity.pod_anti_affinity
    assert anti is not None
    (term,) = anti.required_during_scheduling_ignored_during_execution
    assert term.label_selector == LabelSelector(match_labels={"app": "web"})
    assert term.namespace_selector == LabelSelector()
    assert (term.topology_key, term.match_label_keys) == (
        "kubernetes.io/hostname",
        ("pod-template-hash",),
    )
    assert spec.affinity.pod_affinity is not None
    (weighted,) = spec.affinity.pod_affinity.preferred_during_scheduling_ignored_during_execution
    assert weighted.weight == 30
    assert weighted.pod_affinity_term.label_selector is None
    assert weighted.pod_affinity_term.namespaces == ("other",)
    assert weighted.pod_affinity_term.mismatch_label_keys == ("tenant",)
    assert spec.tolerations[0].toleration_seconds == 300
    assert (spec.overhead, spec.restart_policy) == ({"cpu": "100m"}, "OnFailure")
    assert spec.scheduling_gates[0].name == volcano.QUEUE_ALLOCATION_GATE
    terminated = status.container_statuses[0].state.terminated
    assert terminated is not None
    assert terminated.exit_code == 137
    assert (status.phase, status.pod_ip, status.start_time) == (
        "Failed",
        "10.1.0.1",
        "2024-05-01T10:00:00Z",
    )
    assert condition_is_true(status.conditions, "PodScheduled")
    assert controller_of(pod.metadata) == OwnerReference(
        api_version="batch.volcano.sh/v1alpha1", kind="Job", name="j", uid="u", controller=True
    )


def test_pod_slice_keeps_nothing_unread() -> None:
    """What no code reads is not decoded: volumes, hostname, subdomain, host IP, container ids.

    Every cached pod would carry them (docs/benchmarks.md, "Informer cache: pods"); a field
    added back to the pod models has to be added here too, on purpose.
    """
    pod = core.POD_DECODER.decode(json.dumps(POD_JSON))
    kept = json.loads(encode(pod))
    assert sorted(kept["spec"]) == [
        "affinity",
        "containers",
        "initContainers",
        "nodeName",
        "nodeSelector",
        "overhead",
        "preemptionPolicy",
        "priority",
        "priorityClassName",
        "restartPolicy",
        "schedulerName",
        "schedulingGates",
        "tolerations",
    ]
    assert sorted(kept["status"]) == [
        "conditions",
        "containerStatuses",
        "phase",
        "podIP",
        "startTime",
    ]
    assert kept["spec"]["containers"][0] == {
        "name": "c",
        "image": "nginx",
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 1}},
        "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
    }
    assert kept["status"]["containerStatuses"] == [
        {
            "name": "c",
            "restartCount": 1,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
        }
    ]


CORE_SAMPLES: list[tuple[kinds.KindInfo[Any], dict[str, Any], str, Any]] = [
    (
        kinds.NODE,
        {
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "8", "pods": "110"},
                "capacity": {"cpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        "spec.taints[0].effect",
        "NoSchedule",
    ),
    (
        kinds.PRIORITY_CLASS,
        {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"},
        "value",
        1000,
    ),
    (
        kinds.LEASE,
        {
            "metadata": {"name": "caldera-scheduler", "namespace": "kube-system"},
            "spec": {
                "holderIdentity": "a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-05-01T10:00:00.000000Z",
                "renewTime": "2024-05-01T10:00:05.123456Z",
                "leaseTransitions": 2,
            },
        },
        "spec.renew_time",
        "2024-05-01T10:00:05.123456Z",
    ),
    (
        kinds.EVENT,
        {
            "metadata": {"name": "j.1", "namespace": "ns"},
            "involvedObject": {"kind": "Job", "name": "j", "namespace": "ns", "uid": "u"},
            "reason": "ExecuteAction",
            "message": "m",
            "type": "Normal",
            "count": 2,
            "firstTimestamp": "2024-05-01T10:00:00Z",
            "lastTimestamp": "2024-05-01T10:01:00Z",
            "source": {"component": "caldera-controllers"},
            "reportingComponent": "caldera-controllers",
        },
        "involved_object.name",
        "j",
    ),
    (
        kinds.PVC,
        {
            "metadata": {"name": "scratch-j-worker-0"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
            "status": {"phase": "Bound"},
        },
        "spec.resources.requests",
        {"storage": "1Gi"},
    ),
    (
        kinds.SERVICE,
        {"metadata": {"name": "j"}, "spec": {"clusterIP": "None", "selector": {"a": "b"}}},
        "spec.cluster_ip",
        "None",
    ),
    (
        kinds.CONFIGMAP,
        {"metadata": {"name": "c"}, "data": {"hosts": "a\nb"}},
        "data",
        {"hosts": "a\nb"},
    ),
    (
        kinds.SECRET,
        {"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}},
        "type",
        "Opaque",
    ),
    (
        kinds.NAMESPACE,
        {"metadata": {"name": "ns", "annotations": {"scheduling.volcano.sh/queue-name": "q"}}},
        "metadata.annotations",
        {"scheduling.volcano.sh/queue-name": "q"},
    ),
]


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if part.endswith("]"):
            name, index = part[:-1].split("[")
            obj = getattr(obj, name)[int(index)]
        else:
            obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(
    ("info", "sample", "path", "expected"), CORE_SAMPLES, ids=[s[0].kind for s in CORE_SAMPLES]
)
def test_core_slices(
    info: kinds.KindInfo[Any], sample: dict[str, Any], path: str, expected: Any
) -> None:
    """Each core slice decodes the field Caldera reads and round-trips what it models."""
    obj = info.decoder.decode(json.dumps(sample))
    assert _get(obj, path) == expected
    assert lost_fields(sample, json.loads(encode(obj)), obj) == []


# --- list and watch envelopes -------------------------------------------------------------------


def test_list_items_get_type_meta() -> None:
    """LIST items come without apiVersion/kind; decoding fills them and keeps the list metadata."""
    body = (
        b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"c"},'
        b'"items":[{"metadata":{"name":"p"}}]}'
    )
    pods = kinds.POD.list_decoder.decode(body)
    assert isinstance(pods, ObjectList)
    assert (pods.metadata.resource_version, pods.metadata.continue_) == ("42", "c")
    assert (pods.items[0].kind, pods.items[0].api_version, pods.items[0].metadata.name) == (
        "Pod",
        "v1",
        "p",
    )


GONE = {
    "type": "ERROR",
    "object": {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version: 1 (5)",
        "reason": "Expired",
        "code": 410,
    },
}


@pytest.mark.parametrize(
    ("info", "line", "event_type", "expected_class"),
    [
        (kinds.POD, {"type": "ADDED", "object": {"metadata": {"name": "p"}}}, "ADDED", core.Pod),
        (kinds.JOB, {"type": "DELETED", "object": {"kind": "Job"}}, "DELETED", volcano.Job),
        (
            kinds.QUEUE,
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
            "BOOKMARK",
            volcano.Queue,
        ),
        # Pod.status is a struct: the typed decode fails on Status's string status.
        (kinds.POD, GONE, "ERROR", Status),
        # ConfigMap has no status field: the typed decode succeeds and must be redone.
        (kinds.CONFIGMAP, GONE, "ERROR", Status),
    ],
)
def test_watch_event_decoder(
    info: kinds.KindInfo[Any], line: dict[str, Any], event_type: str, expected_class: type[Any]
) -> None:
    """Watch lines decode into the kind, and ERROR lines into a Status with its code."""
    event = info.watch_decoder.decode(json.dumps(line).encode())
    assert event.type == event_type
    assert isinstance(event.object, expected_class)
    if isinstance(event.object, Status):
        assert (event.object.code, event.object.reason) == (410, "Expired")
        assert event.type == WatchEventType.ERROR


def test_watch_event_decoder_rejects_bad_lines() -> None:
    """A malformed line, or a wrongly typed non-ERROR object, raises instead of passing silently."""
    decoder = WatchEventDecoder(core.Pod)
    with pytest.raises(msgspec.DecodeError):
        decoder.decode(b'{"type": "ADDED", "object": {')
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(b'{"type": "ADDED", "object": {"spec": []}}')


# --- helpers ------------------------------------------------------------------------------------


def test_object_key_and_conditions() -> None:
    """Keys are namespace/name or name; conditions are found by type."""
    assert object_key(core.Pod(metadata=ObjectMeta(name="p", namespace="ns"))) == "ns/p"
    assert object_key(core.Node(metadata=ObjectMeta(name="n"))) == "n"
    conditions = (Condition(type="Ready", status="False"), Condition(type="X", status="True"))
    assert find_condition(conditions, "X") is conditions[1]
    assert find_condition(conditions, "Y") is None
    assert not condition_is_true(conditions, "Ready")
    assert condition_is_true(conditions, "X")
    assert controller_of(ObjectMeta(owner_references=(OwnerReference(name="x"),))) is None


VALID_DURATIONS = [
    ("0", 0.0),
    ("+0", 0.0),
    ("-0", 0.0),
    ("5s", 5.0),
    ("30s", 30.0),
    ("1478s", 1478.0),
    ("-5s", -5.0),
    ("+5s", 5.0),
    ("-0s", 0.0),
    ("1m", 60.0),
    ("1h", 3600.0),
    ("2h45m", 9900.0),
    ("1h30m10s", 5410.0),
    ("5.0s", 5.0),
    ("5.6s", 5.6),
    ("5.s", 5.0),
    (".5s", 0.5),
    ("1.0s", 1.0),
    ("1.004s", 1.004),
    ("100.00100s", 100.001),
    ("10ns", 1e-8),
    ("11us", 1.1e-5),
    ("12\u00b5s", 1.2e-5),
    ("12\u03bcs", 1.2e-5),
    ("13ms", 0.013),
    ("1.5h", 5400.0),
    ("3h30m", 12600.0),
    ("10.5s4m", 250.5),
    ("-2m3.4s", -123.4),
    ("1h2m3s4ms5us6ns", 3723.004005006),
    ("39h9m14.425s", 140954.425),
    ("52763797000ns", 52.763797),
    ("0.3333333333333333333h", 1200.0),
    ("9223372036854775807ns", 9223372036.854775807),
    ("-9223372036854775808ns", -9223372036.854775808),
]


@pytest.mark.parametrize(("text", "seconds"), VALID_DURATIONS)
def test_parse_duration(text: str, seconds: float) -> None:
    """Go's time.ParseDuration accepts these (cases from Go's own tests), with these values."""
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12, abs=1e-12)


INVALID_DURATIONS = [
    ("", "empty"),
    ("3", "missing unit"),
    ("-", "empty"),
    ("s", "expected a number"),
    (".", "at least one digit"),
    ("-.", "at least one digit"),
    (".s", "at least one digit"),
    ("+.s", "at least one digit"),
    ("1d", "unknown unit 'd'"),
    ("1.1.1s", "missing unit"),
    ("3000000h", "out of range"),
    ("9223372036854775808ns", "out of range"),
    ("9223372036s854ms775us808ns", "out of range"),
    ("1 s", "unknown unit ' s'"),
    ("1s ", "unknown unit 's '"),
]


@pytest.mark.parametrize(("text", "why"), INVALID_DURATIONS)
def test_parse_duration_rejects(text: str, why: str) -> None:
    """Go rejects these; the error names the input and what is wrong."""
    with pytest.raises(DurationError, match=why) as info:
        parse_duration(text)
    assert repr(text) in str(info.value)


SECOND = 10**9


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1100, "1.1\u00b5s"),
        (2_200_000, "2.2ms"),
        (3_300_000_000, "3.3s"),
        (-4_500_000_000, "-4.5s"),
        (60 * SECOND, "1m0s"),
        (4 * 60 * SECOND + 5_001_000_000, "4m5.001s"),
        ((5 * 3600 + 6 * 60 + 7) * SECOND + 1_000_000, "5h6m7.001s"),
        (8 * 3600 * SECOND + 1, "8h0m0.000000001s"),
        ((1 << 63) - 1, "2562047h47m16.854775807s"),
        (-(1 << 63), "-2562047h47m16.854775808s"),
    ],
)
def test_format_duration_ns(ns: int, text: str) -> None:
    """Durations print as Go's Duration.String prints them (cases from Go's own tests)."""
    assert format_duration_ns(ns) == text
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0, "0s"), (1.5, "1.5s"), (90.0, "1m30s"), (0.0005, "500\u00b5s")]
)
def test_format_duration_seconds(seconds: float, text: str) -> None:
    """The float-seconds wrapper rounds to whole nanoseconds."""
    assert format_duration(seconds) == text


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_format_then_parse_duration(ns: int) -> None:
    """Parsing a formatted duration gives the same nanoseconds back, over Go's whole range."""
    assert parse_duration_ns(format_duration_ns(ns)) == ns


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T10:00:00Z", dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)),
        ("2024-05-01T10:00:00.123456Z", dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=dt.UTC)),
        ("2024-05-01T12:00:00+02:00", dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)),
    ],
)
def test_parse_time(text: str, expected: dt.datetime) -> None:
    """RFC 3339 timestamps parse into aware datetimes."""
    assert parse_time(text) == expected


@pytest.mark.parametrize("text", ["2024-05-01T10:00:00", "yesterday", ""])
def test_parse_time_rejects(text: str) -> None:
    """Timestamps without a zone, or not timestamps at all, are rejected with the input named."""
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_time(text)


def test_format_time() -> None:
    """metav1.Time has whole seconds in UTC; MicroTime has microseconds."""
    when = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert format_time(when) == "2024-05-01T10:00:00Z"
    assert format_micro_time(when) == "2024-05-01T10:00:00.123456Z"
    assert parse_time(format_micro_time(when)) == when


# --- kinds --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "namespace", "name", "subresource", "path"),
    [
        (kinds.POD, None, None, None, "/api/v1/pods"),
        (kinds.POD, "ns", None, None, "/api/v1/namespaces/ns/pods"),
        (kinds.POD, "ns", "p", "binding", "/api/v1/namespaces/ns/pods/p/binding"),
        (kinds.POD, "ns", "p", "eviction", "/api/v1/namespaces/ns/pods/p/eviction"),
        (kinds.NODE, None, "n1", None, "/api/v1/nodes/n1"),
        (
            kinds.JOB,
            "ns",
            "name",
            "status",
            "/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs/name/status",
        ),
        (kinds.JOB, None, None, None, "/apis/batch.volcano.sh/v1alpha1/jobs"),
        (
            kinds.QUEUE,
            None,
            "default",
            "status",
            "/apis/scheduling.volcano.sh/v1beta1/queues/default/status",
        ),
        (
            kinds.PODGROUP,
            "ns",
            "pg",
            None,
            "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/pg",
        ),
        (kinds.COMMAND, "ns", None, None, "/apis/bus.volcano.sh/v1alpha1/namespaces/ns/commands"),
        (
            kinds.PRIORITY_CLASS,
            None,
            "high",
            None,
            "/apis/scheduling.k8s.io/v1/priorityclasses/high",
        ),
        (
            kinds.LEASE,
            "kube-system",
            "l",
            None,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
        ),
        (kinds.EVENT, "ns", None, None, "/api/v1/namespaces/ns/events"),
        (kinds.PVC, "ns", "a/b", None, "/api/v1/namespaces/ns/persistentvolumeclaims/a%2Fb"),
    ],
)
def test_resource_path(
    info: kinds.KindInfo[Any],
    namespace: str | None,
    name: str | None,
    subresource: str | None,
    path: str,
) -> None:
    """API paths follow the API server's layout for core and group kinds."""
    assert kinds.resource_path(info, namespace, name, subresource) == path


@pytest.mark.parametrize(
    ("info", "namespace", "name", "subresource", "message"),
    [
        (kinds.QUEUE, "ns", "q", None, "cluster-scoped"),
        (kinds.JOB, None, "j", None, "namespaced"),
        (kinds.JOB, "ns", None, "status", "needs an object name"),
    ],
)
def test_resource_path_rejects(
    info: kinds.KindInfo[Any],
    namespace: str | None,
    name: str | None,
    subresource: str | None,
    message: str,
) -> None:
    """Impossible paths raise with a message that says why."""
    with pytest.raises(ValueError, match=message):
        kinds.resource_path(info, namespace, name, subresource)


def test_kind_lookup() -> None:
    """Kinds are found by apiVersion and kind, or by model type; unknown ones raise KeyError."""
    assert kinds.kind_for("batch.volcano.sh/v1alpha1", "Job") is kinds.JOB
    assert kinds.kind_for("v1", "Pod") is kinds.POD
    assert kinds.kind_of(volcano.Queue) is kinds.QUEUE
    assert kinds.QUEUE.resource == "queues.scheduling.volcano.sh"
    assert kinds.POD.resource == "pods"
    with pytest.raises(KeyError, match="not registered"):
        kinds.kind_for("apps/v1", "Deployment")
    with pytest.raises(KeyError, match="not a registered kind"):
        kinds.kind_of(ObjectMeta)
