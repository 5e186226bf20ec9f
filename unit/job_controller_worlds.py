"""The two job controllers, each on its own ``simulator.world.World``, driven by the same steps:
the simulator's (``simulator/controller.py``) and the real one (``controllers/job/controller.py``,
its informer caches fed by the world, its API client writing to it), so that a test can hold
their decisions equal (unit/test_job_controller_parity.py).

A step stands in for what the job controller does not do itself: a Job arrives, the scheduler
admits its PodGroup (Inqueue), a pod runs, succeeds, fails with an exit code or is evicted, a
Command is issued, time passes (delayed actions come due), the controller restarts (a new one
lists the world, pods before Jobs, as its informers may). After each step the controller
reconciles until it rests, as both do in the simulator.

The log of a side is what its controller decided, as the world saw it: each Job status written
(the whole status), each pod created, marked out of sync and deleted, each PodGroup created and
deleted, with the virtual time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import msgspec

from caldera.api.core import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodPhase,
)
from caldera.api.kinds import COMMAND, JOB, POD, PODGROUP
from caldera.api.meta import ObjectMeta, ObjectReference, OwnerReference
from caldera.api.volcano import (
    BATCH_API_VERSION,
    CONTROLLER_OUT_OF_SYNC_KEY,
    JOB_NAME_KEY,
    Command,
    Job,
    PodGroup,
    PodGroupStatus,
)
from caldera.kube.errors import NotFound
from controllers.job.controller import JobController as RealController
from controllers.job.inbox import Timer
from simulator.admission import admit_job, scheduler_queues
from simulator.controller import JobController as SimController
from simulator.timeline import Timeline
from simulator.world import World, key_of
from unit.offline_controllers import offline_context

# ---- steps ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrive:
    """A Job is stored: admitted by the Job webhook, or (``webhook`` False) as it is, as one
    stored before the webhook checked it."""

    manifest: Mapping[str, Any]
    webhook: bool = True


@dataclass(frozen=True)
class Admit:
    """Every PodGroup still Pending becomes Inqueue (the scheduler's enqueue)."""


@dataclass(frozen=True)
class Run:
    pod: str


@dataclass(frozen=True)
class Succeed:
    pod: str


@dataclass(frozen=True)
class Fail:
    pod: str
    exit_code: int = 1


@dataclass(frozen=True)
class Evict:
    pod: str


@dataclass(frozen=True)
class Issue:
    """A Command with ``action`` on Job ``job``."""

    job: str
    action: str


@dataclass(frozen=True)
class Wait:
    seconds: float


@dataclass(frozen=True)
class Restart:
    """A new controller, whose informers list the world: pods first, then Jobs."""


Step = Arrive | Admit | Run | Succeed | Fail | Evict | Issue | Wait | Restart
NAMESPACE = "default"


# ---- the world's side of the steps -----------------------------------------------------------


def _job(step: Arrive) -> Job:
    manifest = step.manifest
    document = {**manifest, "metadata": {"namespace": NAMESPACE, **manifest["metadata"]}}
    if not step.webhook:
        return msgspec.convert(document, Job)
    return admit_job(document, scheduler_queues(), "step")


def _pod_change(world: World, step: Run | Succeed | Fail) -> None:
    pod = world.pods.items.get(f"{NAMESPACE}/{step.pod}")
    if pod is None or pod.metadata.deletion_timestamp is not None:
        return
    if pod.status.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
        return  # a finished pod does not run again (restartPolicy Never)
    spec = pod.spec if pod.spec.node_name else msgspec.structs.replace(pod.spec, node_name="n1")
    if isinstance(step, Run):
        status = msgspec.structs.replace(pod.status, phase=PodPhase.RUNNING)
    else:
        code = 0 if isinstance(step, Succeed) else step.exit_code
        phase = PodPhase.SUCCEEDED if isinstance(step, Succeed) else PodPhase.FAILED
        ended = ContainerStatus(
            name="c", state=ContainerState(terminated=ContainerStateTerminated(exit_code=code))
        )
        status = msgspec.structs.replace(pod.status, phase=phase, container_statuses=(ended,))
    world.replace_pod(msgspec.structs.replace(pod, spec=spec, status=status))


def _admit(world: World) -> None:
    for pg in list(world.podgroups.items.values()):
        if pg.status.phase in ("", "Pending"):
            world.replace_podgroup(
                msgspec.structs.replace(pg, status=PodGroupStatus(phase="Inqueue"))
            )


def _command(world: World, step: Issue, serial: int) -> Command | None:
    job = world.jobs.get(f"{NAMESPACE}/{step.job}")
    if job is None:
        return None
    target = OwnerReference(
        api_version=BATCH_API_VERSION, kind="Job", name=step.job, uid=job.metadata.uid
    )
    name = f"{step.job}-command-{serial}"
    meta = ObjectMeta(namespace=NAMESPACE, name=name, uid=f"command-{serial}")
    return Command(metadata=meta, action=step.action, target=target)


class Log:
    """A ``simulator.world.Watcher`` writing down what the controller decided (see the module)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.entries: list[tuple[Any, ...]] = []

    def _note(self, *entry: Any) -> None:
        self.entries.append((self.world.now, *entry))

    def job_added(self, job: Job) -> None:
        pass

    def job_updated(self, old: Job, new: Job) -> None:
        if old.status != new.status:
            self._note("status", new.metadata.name, msgspec.to_builtins(new.status))

    def job_deleted(self, job: Job) -> None:
        self._note("job deleted", job.metadata.name)

    def pod_added(self, pod: Pod) -> None:
        self._note("pod created", pod.metadata.name, pod.metadata.annotations)

    def pod_updated(self, old: Pod, new: Pod) -> None:
        mark = CONTROLLER_OUT_OF_SYNC_KEY
        if new.metadata.annotations.get(mark) and not old.metadata.annotations.get(mark):
            self._note("pod marked out of sync", new.metadata.name)

    def pod_deleted(self, pod: Pod) -> None:
        self._note("pod deleted", pod.metadata.name)

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        if old.spec != new.spec:
            self._note("podgroup changed", new.metadata.name, msgspec.to_builtins(new.spec))

    def podgroup_deleted(self, podgroup: PodGroup) -> None:
        self._note("podgroup deleted", podgroup.metadata.name)


class Side(Protocol):
    """One job controller on its world."""

    world: World
    log: Log

    def play(self, steps: Sequence[Step]) -> list[tuple[Any, ...]]: ...


class _Side:
    """The steps on a world; the controller's part is the subclass's."""

    def __init__(self) -> None:
        self.world = World(nodes=(), queues=scheduler_queues())
        self.timeline = Timeline()
        self.log = Log(self.world)
        self._commands = 0

    def play(self, steps: Sequence[Step]) -> list[tuple[Any, ...]]:
        return asyncio.run(self._play(steps))

    async def _play(self, steps: Sequence[Step]) -> list[tuple[Any, ...]]:
        for step in steps:
            await self._step(step)
            await self.settle()
        return self.log.entries

    async def _step(self, step: Step) -> None:
        world = self.world
        if isinstance(step, Arrive):
            world.create_job(_job(step))
        elif isinstance(step, Admit):
            _admit(world)
        elif isinstance(step, Run | Succeed | Fail):
            _pod_change(world, step)
        elif isinstance(step, Evict):
            world.delete_pod(f"{NAMESPACE}/{step.pod}")
        elif isinstance(step, Issue):
            self._commands += 1
            command = _command(world, step, self._commands)
            if command is not None:
                self.command(command)
        elif isinstance(step, Wait):
            until = world.now + step.seconds
            while (due := self.timeline.next_time()) is not None and due <= until:
                world.now = due
                self.timeline.run_due(due)
                await self.settle()
            world.now = until
        else:
            self.restart()

    def command(self, command: Command) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    async def settle(self) -> None:
        raise NotImplementedError


class SimSide(_Side):
    """The simulator's job controller."""

    def __init__(self) -> None:
        super().__init__()
        self.controller = SimController(self.world, self.timeline)
        self.world.watchers = [self.controller, self.log]

    def command(self, command: Command) -> None:
        self.controller.command_added(command)

    def restart(self) -> None:
        self.timeline = Timeline()  # the old controller's timers die with it
        self.controller = SimController(self.world, self.timeline)
        self.world.watchers = [self.controller, self.log]
        for pod in self.world.pods.items.values():
            self.controller.pod_added(pod)
        for job in self.world.jobs.values():
            self.controller.job_added(job)

    async def settle(self) -> None:
        self.controller.settle()


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(self, involved: ObjectReference, type_: str, reason: str, message: str) -> None:
        self.events.append((involved.name, type_, reason, message))


class _Client:
    """The API client of the real controller, writing to the world (what the job controller
    calls when it has no plugins, no volumes)."""

    def __init__(self, side: RealSide) -> None:
        self.side = side

    async def create(self, kind: Any, obj: Any, *, namespace: str) -> Any:
        world = self.side.world
        if kind is POD:
            manifest = obj if isinstance(obj, Mapping) else msgspec.to_builtins(obj)
            job_key = f"{namespace}/{manifest['metadata']['annotations'][JOB_NAME_KEY]}"
            self.side.created += 1
            return world.create_pod(manifest, job_key, self.side.created)
        assert kind is PODGROUP
        made = world.create_podgroup(obj)
        self.side.podgroups().upsert(made)  # the world tells nobody of a PodGroup created
        return made

    async def patch(self, kind: Any, name: str, patch: Any, *, namespace: str) -> Any:
        world = self.side.world
        key = f"{namespace}/{name}"
        if kind is POD:
            pod = world.pods.items.get(key)
            if pod is None or pod.metadata.uid != patch["metadata"]["uid"]:
                raise NotFound(404, "NotFound", "gone")
            annotations = {**pod.metadata.annotations, **patch["metadata"]["annotations"]}
            meta = msgspec.structs.replace(pod.metadata, annotations=annotations)
            return world.replace_pod(msgspec.structs.replace(pod, metadata=meta))
        assert kind is PODGROUP
        pg = world.podgroups.items[key]
        spec = {**msgspec.to_builtins(pg.spec), **patch.get("spec", {})}
        new = msgspec.structs.replace(pg, spec=msgspec.convert(spec, type(pg.spec)))
        return world.replace_podgroup(new)

    async def delete(self, kind: Any, name: str, *, namespace: str, uid: str = "") -> None:
        world = self.side.world
        key = f"{namespace}/{name}"
        if kind is COMMAND:
            return
        if kind is POD:
            if not world.delete_pod(key):
                raise NotFound(404, "NotFound", "gone")
            return
        assert kind is PODGROUP
        world.delete_podgroup(key)

    async def update_status(self, kind: Any, job: Job) -> Job:
        assert kind is JOB
        return self.side.world.write_job_status(key_of(job), job.status)


class _Informers:
    """The real controller's informer caches and handlers, fed by the world."""

    def __init__(self, controller: RealController) -> None:
        self.c = controller

    def job_added(self, job: Job) -> None:
        self.c.jobs.store.upsert(job)
        self.c._job_added(job)

    def job_updated(self, old: Job, new: Job) -> None:
        self.c.jobs.store.upsert(new)
        self.c._job_updated(old, new)

    def job_deleted(self, job: Job) -> None:
        self.c.jobs.store.remove(key_of(job))
        self.c._job_deleted(job)

    def pod_added(self, pod: Pod) -> None:
        self.c.pods.store.upsert(pod)
        self.c._pod_added(pod)

    def pod_updated(self, old: Pod, new: Pod) -> None:
        self.c.pods.store.upsert(new)
        self.c._pod_updated(old, new)

    def pod_deleted(self, pod: Pod) -> None:
        self.c.pods.store.remove(key_of(pod))
        self.c._pod_deleted(pod)

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        self.c.podgroups.store.upsert(new)
        self.c._podgroup_updated(old, new)

    def podgroup_deleted(self, podgroup: PodGroup) -> None:
        self.c.podgroups.store.remove(key_of(podgroup))
        self.c._podgroup_deleted(podgroup)


class RealSide(_Side):
    """The job controller of ``controllers/job/controller.py``, its timers on the timeline."""

    def __init__(self) -> None:
        super().__init__()
        self.created = 0
        self.recorder = _Recorder()
        self.controller = self._controller()
        self.world.watchers = [_Informers(self.controller), self.log]

    def _controller(self) -> RealController:
        offline = offline_context(recorder=self.recorder, clock=self.world.datetime)
        ctx = dataclasses.replace(offline, client=cast(Any, _Client(self)))
        controller = RealController(ctx)
        controller.setup()

        def arm(key: str, token: int, delay: float) -> None:
            # The controller's loop.call_later, in virtual time.
            self.timeline.at(self.world.now + delay, lambda: controller._post(Timer(token), key))

        controller._arm = arm  # type: ignore[method-assign]
        return controller

    def podgroups(self) -> Any:
        return self.controller.podgroups.store

    def command(self, command: Command) -> None:
        self.controller._command_added(command)

    def restart(self) -> None:
        self.timeline = Timeline()
        self.controller = self._controller()
        informers = _Informers(self.controller)
        self.world.watchers = [informers, self.log]
        for pg in self.world.podgroups.items.values():
            self.podgroups().upsert(pg)
        for pod in self.world.pods.items.values():
            informers.pod_added(pod)
        for job in self.world.jobs.values():
            informers.job_added(job)

    async def settle(self) -> None:
        queue = self.controller.queue
        while len(queue):
            key = await queue.get()
            try:
                await self.controller.reconcile(key)
            finally:
                queue.done(key)


def both(steps: Sequence[Step]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The logs of the real controller and of the simulator's for the same steps."""
    return RealSide().play(steps), SimSide().play(steps)
