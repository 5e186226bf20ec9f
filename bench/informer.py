"""Informer cache benchmark: Caldera's pod watch path against kubernetes-asyncio's, same bytes.

What it prints, for N pods (default 50,000): decoded watch events per second and memory per
cached pod, for Caldera and for kubernetes-asyncio's own watch and models, with the ratios and
the goals of the issue (at most 2 KiB per cached pod, at least 20 times the decode rate).

Method.

1. Data. `make_watch_lines` builds N watch lines `{"type":"ADDED","object":{...}}\\n`, each a
   Running pod of a Volcano job as the API server serialises it: Volcano's labels and
   annotations, a controller ownerReference to the Job, managedFields for the job controller and
   the kubelet (generated from the object, as the API server's field manager records them), a
   PyTorch-style container (env, resources, ports, mounts), the service-account token volume the
   admission plugin adds, the default tolerations, and a full status (conditions, container
   status, IPs, QoS class). Names, uids, resourceVersions, nodes, IPs and times vary per pod; the
   generator is seeded, so every run sees the same bytes. All lines exist before anything is timed
   or measured.
2. The wire. Each line is one HTTP chunk, as the API server flushes one per event. Both paths read
   from a real `aiohttp.StreamReader` fed those chunks under aiohttp's flow control (the reader
   asks for more when it drops below its low-water mark), with each client's own read buffer
   size: aiohttp's default (64 KiB) for Caldera, 2 MiB for kubernetes-asyncio.
3. Caldera path: the real `informers.reflector.Reflector._watch` loop over the real
   `caldera.kube.watch.WatchStream` (which splits chunks into lines and decodes each with
   `POD.watch_decoder` into the slim `caldera.api.core.Pod`), applying events to a real
   `informers.store.Store` through `_apply`, with the transform every process's pod informer
   applies (`informers.factory.default_transforms`: `informers.interning.PodInterner`, which
   shares the parts equal across pods), a new one for each fill as in a new process. Only the
   HTTP request is replaced: the client's `watch` opens the stream on the fed reader.
   `--no-transform` caches the decoded pods as they are.
4. kubernetes-asyncio path: its real `kubernetes_asyncio.watch.Watch.stream` over the same kind of
   response (it reads line by line, `json.loads` the line, re-serialises the object and
   `ApiClient.deserialize`s it into a `V1Pod`), keeping `event["object"]` in a dict by
   namespace/name, which is the cache a kubernetes-asyncio informer would keep.
5. Speed: wall-clock time (`time.perf_counter`) to consume the whole stream into an empty cache,
   best of 3 runs (1 in smoke mode), garbage collector on as in production, `gc.collect()` first.
   Events per second is N over that time. The "in GC" column is the share of the best run spent
   in the cyclic garbage collector (`gc.callbacks`): it grows with the number of GC-tracked
   objects the cache holds, so it grows with N.
6. Memory: `tracemalloc` traced memory after the cache is filled minus before, after
   `gc.collect()`, divided by the number of cached pods. The lines are allocated before tracing
   starts and stay referenced, so only what the cache holds (objects, keys, dict slots, and the
   pod transform's tables, made during the fill) counts.
7. Also printed, as diagnosis aids: decode-only time per line (the decoder alone on up to the
   first 2,000 lines, no stream, no cache, no transform), and what each large part of a cached
   Caldera pod costs in memory (the traced size of 1,000 decoded and transformed pods minus that
   of the same pods without the part; a shared part costs next to nothing).

kubernetes-asyncio is slow enough that its runs on 50,000 pods would take many minutes on a
small machine; `--baseline-pods` (default: at most 5,000; 500 in smoke mode) runs it on the
first pods of the same data only, and the output says so. Memory per pod does not depend on N;
speed does, through the garbage collector, and for both paths: the goal's ratio compares
Caldera at N with kubernetes-asyncio at the smaller size, which flatters kubernetes-asyncio, and
Caldera is also shown at the baseline's size for the like-for-like ratio.

Run from the repository root: `.venv/bin/python bench/informer.py` (`--smoke` for CI, `--json`
for machine-readable output, `--pods N`, `--baseline-pods M`, `--runs R`, `--no-managed-fields`
to see how much the managedFields weigh, `--no-transform` to see what the sharing saves).
Benchmarks are not tests: the exit status is 0 even when a goal is missed; the output says MISS.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import math
import os
import platform
import random
import sys
import time
import tracemalloc
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata as importlib_metadata
from typing import Any, Final, cast

import aiohttp
import msgspec
import structlog
from kubernetes_asyncio import watch as k8s_watch
from kubernetes_asyncio.client import Configuration

from caldera.api import core
from caldera.api.kinds import POD, KindInfo
from caldera.api.names import pod_name
from caldera.kube.client import KubeClient
from caldera.kube.watch import WatchStream
from informers.factory import default_transforms
from informers.reflector import Reflector
from informers.store import Store

GOAL_BYTES_PER_POD: Final = 2048
GOAL_SPEEDUP: Final = 20.0
DEFAULT_PODS: Final = 50_000
SMOKE_PODS: Final = 2_000
DEFAULT_BASELINE_PODS: Final = 5_000
SMOKE_BASELINE_PODS: Final = 500
SEED: Final = 20261122
WARM_UP_EVENTS: Final = 20
BUSY_CPU_SHARE: Final = 0.9
CALDERA_READ_BUFSIZE: Final = 2**16  # aiohttp's default; KubeClient does not change it
K8S_READ_BUFSIZE: Final = 2**21  # kubernetes_asyncio.client.rest.RESTClientObject


# --- the data -----------------------------------------------------------------------------------

_EPOCH: Final = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
_WORKLOADS: Final = (
    # job name prefix, image, command
    (
        "llm-pretrain",
        "registry.example.com/ml/megatron-train:24.09-py3",
        ["torchrun", "--nnodes=$(WORLD_SIZE)", "--nproc-per-node=8", "pretrain_gpt.py"],
    ),
    (
        "resnet50",
        "registry.example.com/ml/pytorch-train:2.4.1-cuda12.4",
        ["python", "-m", "torch.distributed.run", "train_imagenet.py", "--arch=resnet50"],
    ),
    (
        "bert-finetune",
        "registry.example.com/ml/transformers:4.46.2-cuda12.4",
        ["python", "run_glue.py", "--model_name_or_path=bert-large-uncased"],
    ),
    (
        "mpi-hpl",
        "registry.example.com/hpc/hpl-mpi:2.3-openmpi4.1",
        ["/bin/sh", "-c", "mkdir -p /var/run/sshd; /usr/sbin/sshd -D"],
    ),
    (
        "xgb-sweep",
        "registry.example.com/ml/xgboost:2.1.2-cpu",
        ["python", "sweep.py", "--trials=64"],
    ),
)
_QUEUES: Final = ("default", "research", "production", "batch-low")
_JOB_SIZES: Final = (1, 2, 4, 4, 8, 8, 16, 32, 64)
_NAMESPACES: Final = 16
_NODES: Final = 1_000
# managedFields list-map keys, as the API server's structured-merge-diff schema declares them.
_LIST_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "containers": ("name",),
    "env": ("name",),
    "ports": ("containerPort", "protocol"),
    "volumeMounts": ("mountPath",),
    "volumes": ("name",),
    "ownerReferences": ("uid",),
    "conditions": ("type",),
    "podIPs": ("ip",),
    "hostIPs": ("ip",),
}


def _fields_v1(value: Any, *, depth: int = 0) -> dict[str, Any]:
    """The FieldsV1 set of `value`, as the field manager records it (keyed lists, `.` markers).

    `depth` 0 is the object and 1 its metadata/spec/status, which carry no `.` of their own.
    """
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {} if depth < 2 or not value else {".": {}}
    for key in sorted(value):
        child = value[key]
        if isinstance(child, list) and key in _LIST_KEYS and child:
            items: dict[str, Any] = {".": {}}
            for item in child:
                ident = json.dumps({k: item[k] for k in _LIST_KEYS[key]}, separators=(",", ":"))
                # an owner reference is atomic: its entry lists no fields
                items["k:" + ident] = {} if key == "ownerReferences" else _fields_v1(item, depth=9)
            out["f:" + key] = items
        else:
            out["f:" + key] = _fields_v1(child, depth=depth + 1)
    return out


def _time(rng: random.Random, start: dt.datetime, max_seconds: int) -> str:
    when = start + dt.timedelta(seconds=rng.randrange(max_seconds))
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(
    rng: random.Random,
    *,
    job: str,
    job_uid: str,
    namespace: str,
    queue: str,
    task: str,
    index: int,
    world: int,
    image: str,
    command: list[str],
    resource_version: int,
) -> dict[str, Any]:
    name = pod_name(job, task, index)
    created = _EPOCH + dt.timedelta(seconds=rng.randrange(86_400))
    t_created = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    t_scheduled = _time(rng, created, 5)
    t_started = _time(rng, created + dt.timedelta(seconds=5), 60)
    t_ready = _time(rng, created + dt.timedelta(seconds=65), 30)
    token = "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    gpu = "nvidia.com/gpu" if not image.endswith("-cpu") else None
    requests: dict[str, str] = {"cpu": rng.choice(("4", "8", "16")), "memory": "32Gi"}
    if gpu:
        requests[gpu] = rng.choice(("1", "4", "8"))
    limits = dict(requests)
    if rng.random() < 0.5:
        limits["cpu"] = str(2 * int(requests["cpu"]))  # Burstable
    node = rng.randrange(_NODES)
    host_ip = f"10.{node // 250}.{node % 250}.{rng.randrange(2, 250)}"
    pod_ip = f"10.244.{rng.randrange(256)}.{rng.randrange(2, 255)}"
    master = f"{job}-master-0.{job}" if world > 1 else "localhost"
    mounts: list[dict[str, Any]] = [
        {"name": f"{job}-svc", "mountPath": "/etc/volcano"},
        {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - a mount path, not a temp file
        {
            "name": f"kube-api-access-{token}",
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        },
    ]
    container = {
        "name": task,
        "image": image,
        "command": command,
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
        "env": [
            {"name": "MASTER_ADDR", "value": master},
            {"name": "MASTER_PORT", "value": "23456"},
            {"name": "WORLD_SIZE", "value": str(world)},
            {"name": "RANK", "value": str(index + (1 if task == "worker" else 0))},
            {"name": "VC_TASK_INDEX", "value": str(index)},
        ],
        "resources": {"limits": limits, "requests": requests},
        "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    spec: dict[str, Any] = {
        "volumes": [
            {"name": f"{job}-svc", "configMap": {"name": f"{job}-svc", "defaultMode": 420}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {
                "name": f"kube-api-access-{token}",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            },
        ],
        "containers": [container],
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "nodeName": f"node-{node:04d}",
        "hostname": name,
        "subdomain": job,
        "schedulerName": "volcano",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    labels = {
        "volcano.sh/job-name": job,
        "volcano.sh/job-namespace": namespace,
        "volcano.sh/queue-name": queue,
        "volcano.sh/task-index": str(index),
        "volcano.sh/task-spec": task,
    }
    annotations = {
        "scheduling.k8s.io/group-name": f"{job}-{job_uid}",
        "volcano.sh/job-name": job,
        "volcano.sh/job-retry-count": "0",
        "volcano.sh/job-version": "0",
        "volcano.sh/queue-name": queue,
        "volcano.sh/task-index": str(index),
        "volcano.sh/task-spec": task,
        "volcano.sh/template-uid": f"{job}-{task}",
    }
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": job,
        "uid": job_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [
            {
                "type": "PodReadyToStartContainers",
                "status": "True",
                "lastTransitionTime": t_started,
            },
            {"type": "Initialized", "status": "True", "lastTransitionTime": t_scheduled},
            {"type": "Ready", "status": "True", "lastTransitionTime": t_ready},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": t_ready},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t_scheduled},
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": t_scheduled,
        "containerStatuses": [
            {
                "name": task,
                "state": {"running": {"startedAt": t_started}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": image,
                "imageID": image.split(":")[0] + "@sha256:" + f"{rng.getrandbits(256):064x}",
                "containerID": f"containerd://{rng.getrandbits(256):064x}",
                "started": True,
                "volumeMounts": [
                    {**m, "recursiveReadOnly": "Disabled"} if m.get("readOnly") else m
                    for m in mounts
                ],
            }
        ],
        "qosClass": "Burstable" if limits != requests else "Guaranteed",
    }
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "resourceVersion": str(resource_version),
        "creationTimestamp": t_created,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [owner],
    }
    controller_fields = {
        "metadata": {k: metadata[k] for k in ("labels", "annotations", "ownerReferences")},
        "spec": {k: v for k, v in spec.items() if k not in ("priority", "nodeName")},
    }
    metadata["managedFields"] = [
        {
            "manager": "vc-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": t_created,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields_v1(controller_fields),
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": t_ready,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields_v1({"status": status}),
            "subresource": "status",
        },
    ]
    # Go struct order, as the API server writes it.
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": status}


def make_watch_lines(n: int, seed: int = SEED, *, managed_fields: bool = True) -> list[bytes]:
    """N `ADDED` watch lines for the pods of Volcano jobs, deterministic for a given seed."""
    rng = random.Random(seed)
    encoder = msgspec.json.Encoder()
    lines: list[bytes] = []
    resource_version = 48_213_000
    while len(lines) < n:
        prefix, image, command = rng.choice(_WORKLOADS)
        job = f"{prefix}-{rng.getrandbits(24):06x}"
        job_uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        namespace = f"team-{rng.randrange(_NAMESPACES):02d}"
        queue = rng.choice(_QUEUES)
        size = rng.choice(_JOB_SIZES)
        tasks = [("master", 0)] + [("worker", i) for i in range(size - 1)] if size > 1 else []
        for task, index in tasks or [("worker", 0)]:
            if len(lines) == n:
                break
            resource_version += rng.randrange(1, 7)
            pod = _pod(
                rng,
                job=job,
                job_uid=job_uid,
                namespace=namespace,
                queue=queue,
                task=task,
                index=index,
                world=size,
                image=image,
                command=command,
                resource_version=resource_version,
            )
            if not managed_fields:
                del pod["metadata"]["managedFields"]
            lines.append(encoder.encode({"type": "ADDED", "object": pod}) + b"\n")
    return lines


# --- the wire -----------------------------------------------------------------------------------


class _Feed:
    """Stands in for aiohttp's connection protocol: gives the reader the next chunks on demand.

    `aiohttp.StreamReader` calls `pause_reading` when its buffer passes the high-water mark and
    `resume_reading` when it drains below the low-water mark; a socket would then deliver more.
    """

    def __init__(self, chunks: Sequence[bytes], limit: int) -> None:
        self._chunks = chunks
        self._next = 0
        self._paused = False
        self._eof = False
        self.reader = aiohttp.StreamReader(cast(Any, self), limit, loop=asyncio.get_running_loop())
        self.resume_reading()

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self, resume_parser: bool = True) -> None:
        del resume_parser  # aiohttp's flag for its HTTP parser; there is none here
        self._paused = False
        while not self._paused and self._next < len(self._chunks):
            self.reader.feed_data(self._chunks[self._next])
            self._next += 1
        if self._next == len(self._chunks) and not self._eof:
            self._eof = True
            self.reader.feed_eof()


class _Response:
    """The slice of `aiohttp.ClientResponse` both watch implementations use."""

    def __init__(self, chunks: Sequence[bytes], limit: int) -> None:
        self.content = _Feed(chunks, limit).reader

    def close(self) -> None:
        return None

    def release(self) -> None:
        return None


class _WatchOnlyClient:
    """A `KubeClient` whose `watch` streams the given chunks instead of sending a request."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks
        self._log = structlog.get_logger("bench")

    def watch(self, kind: KindInfo[core.Pod], **_: object) -> WatchStream[core.Pod]:
        async def open_stream() -> aiohttp.ClientResponse:
            return cast(aiohttp.ClientResponse, _Response(self._chunks, CALDERA_READ_BUFSIZE))

        return WatchStream(open_stream, kind, "/api/v1/pods", 3600.0, self._log)


# --- the two paths ------------------------------------------------------------------------------


class CalderaPath:
    """Reflector watch loop + WatchStream + POD.watch_decoder + the pod transform + Store."""

    def __init__(self, lines: Sequence[bytes], *, transform: bool = True) -> None:
        self.lines = lines
        self.cache: Store[core.Pod] | None = None
        self.transform = transform
        self.name = "caldera (Pod, PodInterner, Store)" if transform else "caldera (Pod, Store)"

    async def fill(self) -> int:
        """Consume the whole stream into a new, empty store; return the number of cached pods."""
        store: Store[core.Pod] = Store()
        reflector = Reflector(
            client=cast(KubeClient, _WatchOnlyClient(self.lines)),
            kind=POD,
            store=store,
            handlers=[],
            transform=_pod_transform() if self.transform else None,
        )
        await reflector._watch()
        self.cache = store
        return len(store)

    def decode_one(self, line: bytes) -> object:
        return POD.watch_decoder.decode(line)

    async def close(self) -> None:
        self.cache = None


class KubernetesAsyncioPath:
    """kubernetes_asyncio.watch.Watch + V1Pod models, cached in a dict by namespace/name."""

    name = "kubernetes-asyncio (V1Pod, dict)"

    def __init__(self, lines: Sequence[bytes]) -> None:
        self.lines = lines
        self.cache: dict[str, Any] | None = None
        Configuration.get_default()  # created once per process, not per run
        self._decoder = k8s_watch.Watch(return_type="V1Pod")

    async def fill(self) -> int:
        """Consume the whole stream into a new, empty dict; return the number of cached pods."""
        lines = self.lines

        async def list_pod_for_all_namespaces(**_: object) -> _Response:
            return _Response(lines, K8S_READ_BUFSIZE)

        cache: dict[str, Any] = {}
        watch = k8s_watch.Watch(return_type="V1Pod")
        async with watch:
            async for event in watch.stream(list_pod_for_all_namespaces, timeout_seconds=300):
                pod = event["object"]
                key = f"{pod.metadata.namespace}/{pod.metadata.name}"
                if event["type"] == "DELETED":
                    cache.pop(key, None)
                else:
                    cache[key] = pod
        self.cache = cache
        return len(cache)

    def decode_one(self, line: bytes) -> object:
        """What `Watch` does with one line, without the stream and the cache."""
        return self._decoder.unmarshal_event(line, "V1Pod")

    async def close(self) -> None:
        self.cache = None
        await self._decoder.close()


BenchPath = CalderaPath | KubernetesAsyncioPath


# --- measuring ----------------------------------------------------------------------------------


@dataclass
class Figures:
    """What one path measured."""

    path: str
    pods: int
    runs: int
    best_seconds: float
    events_per_second: float
    gc_share: float  # of the best run's time, spent in the cyclic garbage collector
    cpu_share: float  # of the best run's time, this process was on a CPU
    bytes_per_pod: float
    decode_only_us: float


class _GcClock:
    """Time spent in the cyclic garbage collector while active (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> _GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


async def _best_time(path: BenchPath, runs: int) -> tuple[float, float, float]:
    """The best wall time of `runs` fills, and that run's shares of time in the GC and on a CPU.

    A CPU share well below 100% means other processes took the core: the figures are then
    pessimistic, and more so for the path that spends more of its time in the GC (memory-bound).
    """
    best, gc_share, cpu_share = math.inf, 0.0, 0.0
    for _ in range(runs):
        path.cache = None  # the previous run's cache must not weigh on this one's GC
        gc.collect()
        with _GcClock() as gc_clock:
            start, start_cpu = time.perf_counter(), time.process_time()
            count = await path.fill()
            elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        _check(path, count)
        if elapsed < best:
            best, gc_share, cpu_share = elapsed, gc_clock.seconds / elapsed, cpu / elapsed
    path.cache = None
    return best, gc_share, cpu_share


async def _bytes_per_pod(path: BenchPath) -> float:
    path.cache = None
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        count = await path.fill()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    _check(path, count)
    path.cache = None
    return (after - before) / count


def _check(path: BenchPath, count: int) -> None:
    if count != len(path.lines):
        raise RuntimeError(f"{path.name}: cache holds {count} pods, expected {len(path.lines)}")


def _decode_only_us(path: BenchPath, sample: int) -> float:
    lines = path.lines[:sample]
    gc.collect()
    start = time.perf_counter()
    for line in lines:
        path.decode_one(line)
    return (time.perf_counter() - start) / len(lines) * 1e6


async def measure(path: BenchPath, runs: int, decode_sample: int) -> Figures:
    """Best-of-`runs` fill time, memory per cached pod, and decode-only time of one path."""
    try:
        for line in path.lines[:WARM_UP_EVENTS]:  # imports, caches: not part of the steady state
            path.decode_one(line)
        best, gc_share, cpu_share = await _best_time(path, runs)
        per_pod = await _bytes_per_pod(path)
        gc.collect()
        decode_us = _decode_only_us(path, decode_sample)
    finally:
        await path.close()
    pods = len(path.lines)
    return Figures(
        path.name, pods, runs, best, pods / best, gc_share, cpu_share, per_pod, decode_us
    )


def _pod_transform() -> Any:
    """A new instance of the transform the factory gives every pod informer (None if none)."""
    make = default_transforms().get(POD)
    return make() if make is not None else None


def caldera_breakdown(lines: Sequence[bytes], *, transform: bool = True) -> dict[str, float]:
    """Traced bytes of a cached Caldera pod, and how much each part adds (diagnosis aid).

    Each part's figure is the whole pod's minus the same pod's without that part, so it counts
    exactly what dropping the part from the cache would save. The pods pass through the pod
    informer's transform, as cached pods do, so a part shared between pods costs little.
    """
    objects = [msgspec.json.decode(line)["object"] for line in lines]

    def traced(bodies: list[bytes]) -> float:
        shared = _pod_transform() if transform else None
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [POD.decoder.decode(body) for body in bodies]
            if shared is not None:
                kept = [shared(pod) for pod in kept]
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        return (after - before) / len(kept) - 8  # minus the list slot

    def without(section: str, field: str) -> list[bytes]:
        return [
            msgspec.json.encode({**o, section: {k: v for k, v in o[section].items() if k != field}})
            for o in objects
        ]

    whole = traced([msgspec.json.encode(o) for o in objects])
    parts = {"whole pod": whole}
    for section, field in _BREAKDOWN_FIELDS:
        parts[f"{section}.{field}"] = whole - traced(without(section, field))
    return parts


_BREAKDOWN_FIELDS: Final = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "ownerReferences"),
    ("spec", "volumes"),
    ("spec", "containers"),
    ("spec", "tolerations"),
    ("status", "conditions"),
    ("status", "containerStatuses"),
)


# --- report -------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model and versions of what was measured."""
    cpu = platform.processor() or platform.machine()
    mem_kib = 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kib = int(line.split()[1])
                    break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cores": cores,
        "memory_gib": round(mem_kib / 2**20, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
        "kubernetes_asyncio": importlib_metadata.version("kubernetes_asyncio"),
        "aiohttp": aiohttp.__version__,
    }


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(
    caldera: Figures,
    caldera_same_n: Figures | None,
    baseline: Figures,
    *,
    mach: dict[str, Any],
    event_bytes: float,
    managed_fields: bool,
    transform: bool,
    breakdown: dict[str, float],
) -> dict[str, Any]:
    """The figures, ratios and verdicts, as one JSON-able dict."""
    speedup = caldera.events_per_second / baseline.events_per_second
    same_n = caldera_same_n or caldera
    paths = [caldera] + ([caldera_same_n] if caldera_same_n else []) + [baseline]
    return {
        "machine": mach,
        "pods": caldera.pods,
        "baseline_pods": baseline.pods,
        "mean_event_bytes": round(event_bytes),
        "managed_fields": managed_fields,
        "transform": transform,
        "paths": [asdict(p) for p in paths],
        "speedup": speedup,
        "speedup_same_n": same_n.events_per_second / baseline.events_per_second,
        "decode_only_speedup": baseline.decode_only_us / caldera.decode_only_us,
        "memory_ratio": baseline.bytes_per_pod / caldera.bytes_per_pod,
        "goals": {
            "bytes_per_pod": {
                "goal": GOAL_BYTES_PER_POD,
                "value": caldera.bytes_per_pod,
                "result": _verdict(caldera.bytes_per_pod <= GOAL_BYTES_PER_POD),
            },
            "speedup": {
                "goal": GOAL_SPEEDUP,
                "value": speedup,
                "result": _verdict(speedup >= GOAL_SPEEDUP),
            },
        },
        "caldera_pod_bytes_by_part": breakdown,
    }


def print_table(result: dict[str, Any]) -> None:
    """The human-readable report."""
    mach = result["machine"]
    print(f"machine: {mach['cpu']}, {mach['cores']} cores, {mach['memory_gib']} GiB, {mach['os']}")
    print(
        f"versions: Python {mach['python']}, msgspec {mach['msgspec']}, "
        f"kubernetes-asyncio {mach['kubernetes_asyncio']}, aiohttp {mach['aiohttp']}"
    )
    print(
        f"data: N = {result['pods']:,} pods (Volcano job pods, Running), "
        f"mean watch event {result['mean_event_bytes']:,} bytes"
        + ("" if result["managed_fields"] else ", managedFields stripped")
        + ("" if result["transform"] else "; Caldera's pod transform off")
    )
    if result["baseline_pods"] != result["pods"]:
        print(
            f"kubernetes-asyncio measured on the first {result['baseline_pods']:,} pods only "
            f"(it is too slow for {result['pods']:,}); Caldera is shown for both sizes"
        )
    print()
    header = (
        f"{'path':34} {'pods':>7} {'runs':>4} {'events/s':>9} {'us/event':>9} {'in GC':>6} "
        f"{'on CPU':>6} {'decode-only us':>14} {'bytes/pod':>9}"
    )
    print(header)
    print("-" * len(header))
    for p in result["paths"]:
        print(
            f"{p['path']:34} {p['pods']:>7,} {p['runs']:>4} {p['events_per_second']:>9,.0f} "
            f"{1e6 / p['events_per_second']:>9.1f} {p['gc_share']:>6.0%} {p['cpu_share']:>6.0%} "
            f"{p['decode_only_us']:>14.1f} "
            f"{p['bytes_per_pod']:>9,.0f}"
        )
    print()
    print(
        f"decode rate ratio (stream + decode + cache): {result['speedup']:.1f}x"
        + (
            f" (at the same N, {result['baseline_pods']:,}: {result['speedup_same_n']:.1f}x)"
            if result["baseline_pods"] != result["pods"]
            else ""
        )
    )
    print(f"decode-only ratio: {result['decode_only_speedup']:.1f}x")
    busy = min(p["cpu_share"] for p in result["paths"])
    if busy < BUSY_CPU_SHARE:
        print(
            f"warning: the machine was busy (a timed run got {busy:.0%} of a CPU); "
            "the rates are pessimistic and their ratio unreliable"
        )
    print(f"memory ratio: kubernetes-asyncio uses {result['memory_ratio']:.1f}x more per pod")
    goals = result["goals"]
    mem, speed = goals["bytes_per_pod"], goals["speedup"]
    print(
        f"goal: <= {mem['goal']:,} bytes per cached pod:  "
        f"{mem['value']:>7,.0f} bytes  {mem['result']}"
    )
    print(
        f"goal: >= {speed['goal']:.0f}x kubernetes-asyncio's rate: "
        f"{speed['value']:>7.1f}x      {speed['result']}"
    )
    print()
    print("caldera cached pod, traced bytes (a part's figure is what the pod saves without it):")
    print("  " + ", ".join(f"{k} {v:,.0f}" for k, v in result["caldera_pod_bytes_by_part"].items()))


async def run(
    pods: int,
    baseline_pods: int,
    runs: int,
    *,
    managed_fields: bool,
    transform: bool,
    breakdown_sample: int,
) -> dict[str, Any]:
    """Generate the data, measure both paths, and return the report."""
    lines = make_watch_lines(pods, managed_fields=managed_fields)
    event_bytes = sum(len(line) for line in lines) / len(lines)
    decode_sample = min(baseline_pods, 2_000)
    caldera = await measure(CalderaPath(lines, transform=transform), runs, decode_sample)
    caldera_same_n = None
    if baseline_pods < pods:
        caldera_same_n = await measure(
            CalderaPath(lines[:baseline_pods], transform=transform), runs, decode_sample
        )
    baseline = await measure(KubernetesAsyncioPath(lines[:baseline_pods]), runs, decode_sample)
    breakdown = caldera_breakdown(lines[:breakdown_sample], transform=transform)
    return report(
        caldera,
        caldera_same_n,
        baseline,
        mach=machine(),
        event_bytes=event_bytes,
        managed_fields=managed_fields,
        transform=transform,
        breakdown=breakdown,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Informer cache benchmark: Caldera vs kubernetes-asyncio (see the docstring)."
    )
    parser.add_argument("--pods", type=int, default=DEFAULT_PODS, help="pods in the cache (N)")
    parser.add_argument(
        "--baseline-pods",
        type=int,
        default=None,
        help=f"pods for the kubernetes-asyncio path (default: N, at most {DEFAULT_BASELINE_PODS:,};"
        f" {SMOKE_BASELINE_PODS} with --smoke)",
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs per path, best counts")
    parser.add_argument(
        "--smoke", action="store_true", help=f"{SMOKE_PODS:,} pods, one run: a few seconds (CI)"
    )
    parser.add_argument(
        "--no-managed-fields",
        action="store_true",
        help="strip metadata.managedFields from the events (sensitivity check)",
    )
    parser.add_argument(
        "--no-transform",
        action="store_true",
        help="cache Caldera's decoded pods as they are, without the pod informer's transform",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    pods: int = SMOKE_PODS if args.smoke else args.pods
    runs: int = 1 if args.smoke else args.runs
    if pods < 1 or runs < 1:
        parser.error("--pods and --runs must be at least 1")
    default_baseline = SMOKE_BASELINE_PODS if args.smoke else DEFAULT_BASELINE_PODS
    baseline_pods: int = args.baseline_pods or min(pods, default_baseline)
    baseline_pods = max(1, min(baseline_pods, pods))
    result = asyncio.run(
        run(
            pods,
            baseline_pods,
            runs,
            managed_fields=not args.no_managed_fields,
            transform=not args.no_transform,
            breakdown_sample=200 if args.smoke else 1_000,
        )
    )
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
