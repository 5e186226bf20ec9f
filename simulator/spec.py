"""The simulator's input formats (docs/simulator.md): a cluster file (nodes, queues, priority
classes, namespace weights, timing) and a trace (Volcano Job manifests with an arrival time and
run times), decoded into a `Scenario` of the models the scheduler and the job controller read.

Decoding is strict: an unknown key, a wrong type, a bad quantity or duration, or a manifest the
admission webhook would refuse is a `SpecError` naming the file, the entry and the field. Jobs
and Queues are admitted by ``simulator.admission`` (the webhook's own rules).

A trace entry's run times come from ``runTime`` (one for every task, or one per task) or, for a
task without one, from the kwok annotations the local control plane's fake kubelet obeys
(``kwok.caldera.io/run-for`` and ``kwok.caldera.io/exit-code`` on the task's pod template), so a
manifest written for the e2e cluster runs unchanged. A task with neither runs until its Job
ends it (a parameter server, for example).

Pure: files are read by ``simulator.loading``, which hands the decoded documents here.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from caldera.api.core import Node, NodeSpec, NodeStatus, PriorityClass, Taint
from caldera.api.duration import DurationError, parse_duration
from caldera.api.meta import Condition, ObjectMeta
from caldera.api.quantity import QuantityError
from caldera.api.resources import Resources
from caldera.api.volcano import POLICY_ACTIONS, Action, Job, Queue
from simulator.admission import AdmissionError, admit_job, admit_queues, decode

RUN_FOR_KEY: Final = "kwok.caldera.io/run-for"
EXIT_CODE_KEY: Final = "kwok.caldera.io/exit-code"
DEFAULT_NAMESPACE: Final = "default"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"


class SpecError(ValueError):
    """A cluster file or trace the simulator refuses; the message names the place."""


class Progress(enum.StrEnum):
    """How a Job's pods use their run time."""

    POD = "pod"  # each pod runs its time from its own start (kwok's behaviour)
    GANG = "gang"  # pods progress only while the Job has minAvailable pods started


# ---- the files as written --------------------------------------------------------------------


class Strict(msgspec.Struct, forbid_unknown_fields=True, rename="camel", frozen=True, kw_only=True):
    """Base of the file formats: unknown keys are errors (a typo must not pass silently)."""


Seconds = float | str  # seconds, or a Go duration ("90s", "1h30m")


class NodeGroupSpec(Strict, frozen=True):
    name: str
    resources: dict[str, str | int | float]
    count: int = 1
    labels: dict[str, str] = {}
    # Node annotations, e.g. HAMi's volcano.sh/node-vgpu-register for the deviceshare plugin
    # (each node of the group gets the same: card UUIDs repeat across nodes, which the
    # scheduler, reading one node's cards at a time, does not mind).
    annotations: dict[str, str] = {}
    taints: tuple[dict[str, Any], ...] = ()


class TimingSpec(Strict, frozen=True):
    bind_delay: Seconds = 1.0
    termination_grace: Seconds = 0.0
    schedule_period: Seconds = 1.0


class ClusterSpec(Strict, frozen=True):
    nodes: tuple[NodeGroupSpec, ...]
    queues: tuple[dict[str, Any], ...] = ()
    priority_classes: tuple[dict[str, Any], ...] = ()
    namespace_weights: dict[str, int] = {}
    timing: TimingSpec = TimingSpec()
    scheduler_conf: str = ""


class FailureSpec(Strict, frozen=True):
    task: str
    after: Seconds
    index: int | None = None
    attempt: int = 1
    exit_code: int = 1


class CommandSpec(Strict, frozen=True):
    action: str
    after: Seconds


class NetworkSpec(Strict, frozen=True):
    between: tuple[str, str]
    penalty: float


class TraceJobSpec(Strict, frozen=True):
    arrival: Seconds = 0.0
    run_time: Seconds | dict[str, Seconds] | None = None
    progress: Progress = Progress.POD
    failures: tuple[FailureSpec, ...] = ()
    commands: tuple[CommandSpec, ...] = ()
    network: NetworkSpec | None = None
    copies: int = 1
    every: Seconds = 0.0
    job: dict[str, Any] | None = None
    file: str = ""


class TraceSpec(Strict, frozen=True):
    jobs: tuple[TraceJobSpec, ...]
    namespace: str = DEFAULT_NAMESPACE


# ---- what the simulator runs -----------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Delays of the parts the simulator stands in for (seconds)."""

    bind_delay: float = 1.0  # a bind to the pod running (image pull, kubelet start)
    termination_grace: float = 0.0  # a deleted pod holds its node this long
    schedule_period: float = 1.0  # sessions run at multiples of it


@dataclass(frozen=True)
class Failure:
    """Pod ``index`` of ``task`` (every pod when None), in its ``attempt``-th run, exits with
    ``exit_code`` after ``after`` seconds of progress."""

    task: str
    after: float
    index: int | None = None
    attempt: int = 1
    exit_code: int = 1

    def matches(self, task: str, index: int, attempt: int) -> bool:
        return (
            self.task == task
            and self.attempt == attempt
            and (self.index is None or self.index == index)
        )


@dataclass(frozen=True)
class JobCommand:
    """A Command (bus.volcano.sh) with ``action`` on the Job, ``after`` seconds from its
    arrival, as ``vcctl job suspend`` and the like create one."""

    action: Action
    after: float


@dataclass(frozen=True)
class Network:
    """Pods of ``between[0]`` and ``between[1]`` exchange data: a Job whose pairs of them all
    sit on different nodes progresses ``1 + penalty`` times slower; a share ``f`` of split
    pairs, ``1 + penalty * f`` times slower."""

    between: tuple[str, str]
    penalty: float


@dataclass(frozen=True)
class Workload:
    """How a Job's pods behave once running."""

    run_times: Mapping[str, float]  # by task; math.inf: runs until the Job ends it
    exit_codes: Mapping[str, int] = field(default_factory=dict)
    progress: Progress = Progress.POD
    failures: tuple[Failure, ...] = ()
    network: Network | None = None


@dataclass(frozen=True)
class Submission:
    """A Job that arrives at ``at`` (seconds from the start)."""

    at: float
    job: Job
    workload: Workload
    commands: tuple[JobCommand, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.job.metadata.namespace}/{self.job.metadata.name}"


@dataclass(frozen=True)
class Cluster:
    """The cluster file, decoded and admitted."""

    nodes: tuple[Node, ...]
    queues: tuple[Queue, ...]
    priority_classes: tuple[PriorityClass, ...] = ()
    namespace_weights: Mapping[str, int] = field(default_factory=dict)
    timing: Timing = Timing()
    scheduler_conf: str = ""  # a path relative to the cluster file, "" for none


@dataclass(frozen=True)
class Scenario:
    """A cluster and the Jobs that arrive, in arrival order."""

    cluster: Cluster
    jobs: tuple[Submission, ...]


# ---- decoding --------------------------------------------------------------------------------


def _strict(data: Any, model: type[Any], where: str) -> Any:
    try:
        return msgspec.convert(data, model)
    except msgspec.ValidationError as exc:
        raise SpecError(f"{where}: {exc}") from None


def seconds(value: Seconds, where: str) -> float:
    """A duration in seconds from a number or a Go duration string; never negative."""
    if isinstance(value, str):
        try:
            found = parse_duration(value)
        except DurationError as exc:
            raise SpecError(f"{where}: {exc}") from None
    else:
        found = float(value)
    if found < 0 or math.isnan(found):
        raise SpecError(f"{where}: must be a duration of 0 or more, got {value!r}")
    return found


def _node_group(group: NodeGroupSpec, where: str) -> list[Node]:
    if group.count < 1:
        raise SpecError(f"{where}.count: must be at least 1, got {group.count}")
    try:
        Resources.from_list(group.resources)
    except QuantityError as exc:
        raise SpecError(f"{where}.resources: {exc}") from None
    allocatable: dict[str, str | int | float] = {
        name: str(value) for name, value in group.resources.items()
    }
    allocatable.setdefault("pods", "110")
    taints = tuple(
        _admitted(decode, taint, Taint, f"{where}.taints[{i}]")
        for i, taint in enumerate(group.taints)
    )
    names = [group.name] if group.count == 1 else [f"{group.name}-{i}" for i in range(group.count)]
    return [
        Node(
            metadata=ObjectMeta(
                name=name,
                uid=f"node-{name}",
                labels={**group.labels, HOSTNAME_LABEL: name},
                annotations=dict(group.annotations),
            ),
            spec=NodeSpec(taints=taints),
            status=NodeStatus(
                capacity=allocatable,
                allocatable=allocatable,
                conditions=(Condition(type="Ready", status="True"),),
            ),
        )
        for name in names
    ]


def _admitted(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except AdmissionError as exc:
        raise SpecError(str(exc)) from None


def _queue_manifest(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A Queue manifest from one of ``queues``: a manifest as is, or the short form (``name``
    and the spec's fields, with ``guarantee`` as a resource list)."""
    if "metadata" in entry or "spec" in entry:
        return dict(entry)
    short = dict(entry)
    name = short.pop("name", None)
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}.name: a queue needs a name")
    if "guarantee" in short:
        short["guarantee"] = {"resource": short["guarantee"]}
    return {"metadata": {"name": name}, "spec": short}


def _priority_class_manifest(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A PriorityClass manifest as is, or the short form: ``name``, ``annotations`` and the
    class's own fields (value, globalDefault, preemptionPolicy, description)."""
    if "metadata" in entry:
        return dict(entry)
    short = dict(entry)
    name = short.pop("name", None)
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}.name: a priority class needs a name")
    annotations = short.pop("annotations", {})
    return {"metadata": {"name": name, "annotations": annotations}, **short}


def parse_cluster(data: Any, *, source: str) -> Cluster:
    """The cluster file's decoded document as a `Cluster`."""
    spec: ClusterSpec = _strict(data, ClusterSpec, source)
    if not spec.nodes:
        raise SpecError(f"{source}.nodes: a cluster needs at least one node group")
    nodes: list[Node] = []
    for i, group in enumerate(spec.nodes):
        nodes += _node_group(group, f"{source}.nodes[{i}]")
    names = [n.metadata.name for n in nodes]
    if len(set(names)) != len(names):
        raise SpecError(f"{source}.nodes: node group names give two nodes the same name")
    queues = _admitted(
        admit_queues,
        [
            (f"{source}.queues[{i}]", _queue_manifest(q, f"{source}.queues[{i}]"))
            for i, q in enumerate(spec.queues)
        ],
    )
    classes = tuple(
        _admitted(
            decode,
            _priority_class_manifest(pc, f"{source}.priorityClasses[{i}]"),
            PriorityClass,
            f"{source}.priorityClasses[{i}]",
        )
        for i, pc in enumerate(spec.priority_classes)
    )
    for namespace, weight in spec.namespace_weights.items():
        if weight < 1:
            raise SpecError(f"{source}.namespaceWeights.{namespace}: must be at least 1")
    timing = Timing(
        bind_delay=seconds(spec.timing.bind_delay, f"{source}.timing.bindDelay"),
        termination_grace=seconds(
            spec.timing.termination_grace, f"{source}.timing.terminationGrace"
        ),
        schedule_period=seconds(spec.timing.schedule_period, f"{source}.timing.schedulePeriod"),
    )
    if timing.schedule_period <= 0:
        raise SpecError(f"{source}.timing.schedulePeriod: must be more than 0")
    return Cluster(
        nodes=tuple(nodes),
        queues=tuple(queues),
        priority_classes=classes,
        namespace_weights=dict(spec.namespace_weights),
        timing=timing,
        scheduler_conf=spec.scheduler_conf,
    )


# ---- the trace -------------------------------------------------------------------------------


def _template_annotations(job: Job, task: str) -> Mapping[str, str]:
    for t in job.spec.tasks:
        if t.name == task:
            meta = (t.template or {}).get("metadata") or {}
            annotations = meta.get("annotations") or {}
            return annotations if isinstance(annotations, dict) else {}
    return {}


def _workload(entry: TraceJobSpec, job: Job, where: str) -> Workload:
    tasks = [t.name for t in job.spec.tasks]
    given: dict[str, float] = {}
    if isinstance(entry.run_time, dict):
        for task, value in entry.run_time.items():
            if task not in tasks:
                raise SpecError(f"{where}.runTime.{task}: the job has no task {task!r}")
            given[task] = seconds(value, f"{where}.runTime.{task}")
    elif entry.run_time is not None:
        given = dict.fromkeys(tasks, seconds(entry.run_time, f"{where}.runTime"))
    run_times: dict[str, float] = {}
    exit_codes: dict[str, int] = {}
    for task in tasks:
        annotations = _template_annotations(job, task)
        code = annotations.get(EXIT_CODE_KEY)
        if code is not None:
            try:
                exit_codes[task] = int(code)
            except ValueError:
                raise SpecError(
                    f"{where}: task {task}: {EXIT_CODE_KEY} must be an integer, got {code!r}"
                ) from None
        if task in given:
            run_times[task] = given[task]
        elif code is not None:  # kwok: finish after run-for (default 0) with the exit code
            run_for = annotations.get(RUN_FOR_KEY, "0s")
            run_times[task] = seconds(run_for, f"{where}: task {task}: {RUN_FOR_KEY}")
        else:
            run_times[task] = math.inf
    failures = []
    for i, failure in enumerate(entry.failures):
        place = f"{where}.failures[{i}]"
        if failure.task not in tasks:
            raise SpecError(f"{place}.task: the job has no task {failure.task!r}")
        if failure.attempt < 1:
            raise SpecError(f"{place}.attempt: runs count from 1, got {failure.attempt}")
        failures.append(
            Failure(
                task=failure.task,
                after=seconds(failure.after, f"{place}.after"),
                index=failure.index,
                attempt=failure.attempt,
                exit_code=failure.exit_code,
            )
        )
    network = None
    if entry.network is not None:
        for task in entry.network.between:
            if task not in tasks:
                raise SpecError(f"{where}.network.between: the job has no task {task!r}")
        if entry.network.penalty < 0:
            raise SpecError(f"{where}.network.penalty: must be 0 or more")
        if entry.progress is not Progress.GANG:
            raise SpecError(f"{where}.network: needs progress: gang (the Job's pace is shared)")
        network = Network(entry.network.between, entry.network.penalty)
    return Workload(run_times, exit_codes, entry.progress, tuple(failures), network)


def _commands(entry: TraceJobSpec, where: str) -> tuple[JobCommand, ...]:
    """The entry's Commands; an action no Job runs is refused (the controller would only
    remove such a Command)."""
    found = []
    names = ", ".join(POLICY_ACTIONS)
    for i, command in enumerate(entry.commands):
        place = f"{where}.commands[{i}]"
        if command.action not in POLICY_ACTIONS:
            raise SpecError(f"{place}.action: must be one of {names}, got {command.action!r}")
        found.append(JobCommand(Action(command.action), seconds(command.after, f"{place}.after")))
    return tuple(found)


ReadDocument = Callable[[str], Any]


def _manifest(entry: TraceJobSpec, read: ReadDocument, where: str) -> dict[str, Any]:
    if (entry.job is None) == (not entry.file):
        raise SpecError(f"{where}: give either job (a manifest) or file (a manifest's path)")
    if entry.job is not None:
        return dict(entry.job)
    document = read(entry.file)
    if not isinstance(document, dict):
        raise SpecError(f"{where}.file: {entry.file} does not hold one Job manifest")
    return document


def _priority_class_errors(job: Job, classes: Collection[str]) -> list[str]:
    """The PriorityClasses the Job's pods name that the cluster lacks (the API server would
    refuse the pods)."""
    named = [("spec.priorityClassName", job.spec.priority_class_name)]
    for i, task in enumerate(job.spec.tasks):
        spec = (task.template or {}).get("spec") or {}
        named.append(
            (f"spec.tasks[{i}].template.spec.priorityClassName", spec.get("priorityClassName", ""))
        )
    return [
        f"{path}: no PriorityClass {name!r} in the cluster file"
        for path, name in named
        if name and name not in classes
    ]


def parse_trace(
    data: Any,
    *,
    source: str,
    queues: Sequence[Queue],
    priority_classes: Collection[str] = (),
    read: ReadDocument,
) -> tuple[Submission, ...]:
    """The trace's decoded document as Submissions in arrival order (ties keep the trace's
    order). ``read`` returns the decoded document of a ``file`` entry; ``priority_classes``
    names the cluster's PriorityClasses."""
    spec: TraceSpec = _strict(data, TraceSpec, source)
    found: list[tuple[float, int, Submission]] = []
    names: dict[str, str] = {}
    for i, entry in enumerate(spec.jobs):
        where = f"{source}.jobs[{i}]"
        manifest = _manifest(entry, read, where)
        meta = dict(manifest.get("metadata") or {})
        meta.setdefault("namespace", spec.namespace)
        arrival = seconds(entry.arrival, f"{where}.arrival")
        every = seconds(entry.every, f"{where}.every")
        commands = _commands(entry, where)
        if entry.copies < 1:
            raise SpecError(f"{where}.copies: must be at least 1, got {entry.copies}")
        for copy in range(entry.copies):
            copy_meta = dict(meta)
            if entry.copies > 1:
                copy_meta["name"] = f"{meta.get('name', '')}-{copy}"
            document = {**manifest, "metadata": copy_meta}
            job = _admitted(admit_job, document, queues, where)
            missing = _priority_class_errors(job, priority_classes)
            if missing:
                raise SpecError(f"{where}: job {job.metadata.name!r}: {'; '.join(missing)}")
            key = f"{job.metadata.namespace}/{job.metadata.name}"
            if key in names:
                raise SpecError(f"{where}: job {key} is also {names[key]}; names must be unique")
            names[key] = where
            at = arrival + copy * every
            submission = Submission(at, job, _workload(entry, job, where), commands)
            found.append((submission.at, len(found), submission))
    found.sort(key=lambda item: (item[0], item[1]))
    return tuple(s for _, _, s in found)
