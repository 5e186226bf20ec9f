"""Tests of informers.interning: a cached pod equals the decoded one, its equal parts are shared
with other pods, unequal ones are not, and the tables keep what live pods use and no more."""

from __future__ import annotations

import copy
import gc
from typing import Any

import msgspec
import pytest

from caldera.api import core
from caldera.api.codec import encode
from caldera.api.kinds import POD
from caldera.api.meta import OwnerReference
from informers.factory import default_transforms
from informers.interning import PodInterner


def pod_json(
    name: str = "train-worker-0",
    *,
    namespace: str = "team-a",
    job: str = "train",
    index: int = 0,
    cpu: Any = "4",
    ready_at: str = "2026-11-22T10:00:30Z",
) -> dict[str, Any]:
    """A Running pod of a Volcano job, as the API server sends it (the parts that vary by pod:
    name, uid, index, IP, times)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": f"{1000 + index}",
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "labels": {"volcano.sh/job-name": job, "volcano.sh/task-index": str(index)},
            "annotations": {"scheduling.k8s.io/group-name": f"{job}-uid", "x": "y" * 40},
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"uid-{job}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"node-{index % 2}",
            "schedulerName": "volcano",
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.example.com/train:1",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                    "ports": [{"containerPort": 23456, "protocol": "TCP"}],
                }
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
            ],
            "volumes": [{"name": f"kube-api-access-{name}", "projected": {"sources": []}}],
            "restartPolicy": "OnFailure",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-11-22T10:00:01Z",
                },
                {"type": "Ready", "status": "True", "lastTransitionTime": ready_at},
            ],
            "podIP": f"10.244.0.{index + 2}",
            "startTime": "2026-11-22T10:00:01Z",
            "containerStatuses": [
                {
                    "name": "worker",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": ready_at}},
                    "lastState": {},
                    "containerID": f"containerd://{name}",
                }
            ],
        },
    }


def decode(body: dict[str, Any]) -> core.Pod:
    return POD.decoder.decode(msgspec.json.encode(body))


def everything_pod() -> dict[str, Any]:
    """A pod with every field the model keeps set, several of them to unusual values."""
    body = pod_json()
    body["metadata"]["deletionTimestamp"] = "2026-11-22T11:00:00Z"
    body["metadata"]["finalizers"] = ["example.com/keep"]
    body["spec"].update(
        {
            "priorityClassName": "high",
            "initContainers": [{"name": "sidecar", "restartPolicy": "Always"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "overhead": {"cpu": "100m"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
            },
            "schedulingGates": [{"name": "example.com/gate"}],
        }
    )
    body["status"].update(
        {
            "phase": "Failed",
            "reason": "Evicted",
            "initContainerStatuses": [
                {
                    "name": "sidecar",
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {
                        "terminated": {
                            "exitCode": 137,
                            "signal": 9,
                            "reason": "OOMKilled",
                            "finishedAt": "2026-11-22T10:30:00Z",
                        }
                    },
                    "restartCount": 3,
                }
            ],
        }
    )
    body["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "message": "evicted for a reason"}
    )
    return body


@pytest.mark.parametrize("body", [pod_json(), everything_pod(), {"metadata": {"name": "bare"}}])
def test_an_interned_pod_equals_the_decoded_one(body: dict[str, Any]) -> None:
    """The transform changes no value: the pod compares and encodes exactly as decoded."""
    pod = decode(body)
    interned = PodInterner()(pod)
    assert interned == pod
    assert encode(interned) == encode(pod)


def test_equal_parts_of_different_pods_are_one_object() -> None:
    """Two pods of a task, decoded from separate bytes, share their equal parts and strings."""
    interner = PodInterner()
    a = interner(decode(pod_json("train-worker-0", index=0)))
    b = interner(decode(pod_json("train-worker-1", index=1)))
    assert a.spec.containers is b.spec.containers
    assert a.spec.tolerations is b.spec.tolerations
    assert a.metadata.owner_references is b.metadata.owner_references
    assert a.status.container_statuses is b.status.container_statuses
    assert a.metadata.namespace is b.metadata.namespace
    assert a.spec.scheduler_name is b.spec.scheduler_name
    assert a.metadata.labels["volcano.sh/job-name"] is b.metadata.labels["volcano.sh/job-name"]
    assert a.status.conditions[1].type is b.status.conditions[1].type
    assert (
        a.status.conditions[1].last_transition_time is b.status.conditions[1].last_transition_time
    )
    # The same timestamp within one pod is one string too.
    assert a.status.start_time is a.status.conditions[0].last_transition_time
    # Absent dicts are one shared empty dict; labels stay the pod's own (the index differs).
    assert a.spec.node_selector is b.spec.overhead
    assert a.metadata.labels is not b.metadata.labels


@pytest.mark.parametrize("other_cpu", ["4.0", 4, 4.0, "4000m"])
def test_unequal_parts_are_never_conflated(other_cpu: Any) -> None:
    """Quantities Python finds equal (4 == 4.0) but the wire does not are kept apart."""
    interner = PodInterner()
    a = interner(decode(pod_json(cpu="4")))
    body = pod_json("train-worker-1", index=1, cpu=other_cpu)
    b = interner(decode(body))
    assert a.spec.containers is not b.spec.containers
    assert encode(b) == encode(decode(body))


def test_different_ready_times_keep_their_own_statuses_and_conditions() -> None:
    """Pods that became ready at different times share neither those conditions nor, where the
    time shows, anything holding it."""
    interner = PodInterner()
    a = interner(decode(pod_json(ready_at="2026-11-22T10:00:30Z")))
    b = interner(decode(pod_json("train-worker-1", index=1, ready_at="2026-11-22T10:00:31Z")))
    assert a.status.conditions[1].last_transition_time == "2026-11-22T10:00:30Z"
    assert b.status.conditions[1].last_transition_time == "2026-11-22T10:00:31Z"
    # startedAt is not kept, so the running statuses are still equal and shared.
    assert a.status.container_statuses is b.status.container_statuses


def test_a_value_one_live_pod_uses_survives_a_sweep() -> None:
    """A sweep keeps what even a single cached pod uses: the next equal pod shares it."""
    interner = PodInterner()
    a = interner(decode(pod_json(namespace="only-here", job="only-job")))
    gc.collect()
    interner.sweep()
    b = interner(decode(pod_json("only-job-worker-1", namespace="only-here", job="only-job")))
    assert b.metadata.namespace is a.metadata.namespace
    assert b.metadata.owner_references is a.metadata.owner_references
    assert b.spec.containers is a.spec.containers


def test_sweeps_drop_what_no_pod_uses_any_more() -> None:
    """Pods that left the cache leave nothing in the tables once swept."""
    interner = PodInterner()
    cached = [interner(decode(pod_json(f"p-{i}", namespace=f"ns-{i}", index=i))) for i in range(50)]
    in_use = interner.entries
    assert in_use >= 50  # a namespace each, at least
    del cached
    gc.collect()
    interner.sweep()
    # What may remain is held elsewhere (msgspec caches short dict keys it decoded).
    assert interner.entries <= 5


def test_tables_stay_bounded_as_pods_come_and_go() -> None:
    """However many distinct pods pass through, the tables hold about twice what live pods use:
    here one pod at a time, each with its own namespace, job, node and times."""
    interner = PodInterner(sweep_floor=64)
    for i in range(3000):
        body = pod_json(f"p-{i}", namespace=f"ns-{i}", job=f"job-{i}", index=i)
        body["status"]["conditions"][1]["lastTransitionTime"] = (
            f"2026-11-22T10:{i // 60 % 60:02}:{i % 60:02}Z"
        )
        interner(decode(body))
        assert interner.entries <= 3 * (2 * 64 + 40), i


def test_the_hard_limit_starts_a_table_over() -> None:
    """Past the hard limit a table starts over even if its entries look used; pods are unharmed."""
    interner = PodInterner(sweep_floor=4, hard_limit=8)
    kept = [interner(decode(pod_json(f"p-{i}", namespace=f"ns-{i}", index=i))) for i in range(40)]
    assert interner.entries <= 3 * (2 * 8 + 40)
    assert [p.metadata.namespace for p in kept] == [f"ns-{i}" for i in range(40)]


def test_limits_are_checked() -> None:
    """A sweep floor below 1 or above the hard limit is refused."""
    with pytest.raises(ValueError, match="sweep_floor"):
        PodInterner(sweep_floor=0)
    with pytest.raises(ValueError, match="sweep_floor"):
        PodInterner(sweep_floor=10, hard_limit=5)


def test_value_keyed_parts_are_hashable() -> None:
    """The parts shared by value must stay hashable: a dict field added to one of these models
    would make every pod fail the transform (key such a part by its encoding instead)."""
    running = core.ContainerState(running=core.ContainerStateRunning())
    terminated = core.ContainerState(
        terminated=core.ContainerStateTerminated(exit_code=1, signal=9, reason="r", finished_at="t")
    )
    waiting = core.ContainerState(waiting=core.ContainerStateWaiting(reason="r"))
    parts: list[object] = [
        (OwnerReference(api_version="v", kind="k", name="n", uid="u", controller=True),),
        (core.Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=1),),
        (core.PodSchedulingGate(name="g"),),
        tuple(
            core.ContainerStatus(name="c", state=s, last_state=terminated)
            for s in (running, waiting)
        ),
    ]
    for part in parts:
        hash(part)


def test_the_input_pod_is_left_as_it_was() -> None:
    """The transform builds a new pod; the decoded one is unchanged (it is frozen anyway)."""
    body = everything_pod()
    pod = decode(body)
    before = encode(pod)
    PodInterner()(pod)
    assert encode(pod) == before
    assert copy.deepcopy(body) == body


def test_factories_intern_pods_by_default() -> None:
    """Every informer factory gives its pod informer a new interner, and no other kind a
    transform."""
    transforms = default_transforms()
    assert set(transforms) == {POD}
    first, second = transforms[POD](), transforms[POD]()
    assert isinstance(first, PodInterner)
    assert first is not second
