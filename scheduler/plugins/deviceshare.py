"""deviceshare: GPU sharing with HAMi's device plugin (Volcano's pkg/scheduler/plugins/deviceshare
with pkg/scheduler/api/devices/nvidia/vgpu; docs/gpu-sharing.md).

With ``deviceshare.VGPUEnable`` each node whose ``volcano.sh/node-vgpu-register`` annotation
reads and whose allocatable has ``volcano.sh/vgpu-number``, ``-memory`` and ``-cores`` gets
a ledger of its cards (``scheduler.api.cards``): what its pods hold, read from their
``volcano.sh/vgpu-ids-new`` annotation, from the grants of binds in flight
(``ClusterInfo.device_grants``), or, for a pod bound without either (and for pods asking
plain ``nvidia.com/gpu``), fitted again in name order after the others.

- Predicate: a pod asking vGPU (its limits name ``volcano.sh/vgpu-number`` or
  ``-memory``) or whole GPUs must fit the node's cards; a node without a ledger passes (its
  resources decide, as in Volcano). The view: a pod whose requests fit the node's idle
  resources will be bound, so it must fit the cards as they are now (releasing pods
  included); one that fits only the future resources will be pipelined, so it fits the
  cards as they will be once the evicted pods have gone (a preemptor counts its victims'
  cards as free).
- Node order: with ``deviceshare.ScheduleWeight`` above 0, the fit's card score (binpack: the
  chosen cards' used memory after the pod, in percent; spread: 100 for each card the pod is
  the first on; see ``scheduler.api.cards``) rounded, times the weight.
- Allocate and deallocate events keep the ledgers as the session places, pipelines, evicts
  and undoes (a statement's discard gives back exactly what it took, so gangs placed whole or
  not at all leave the cards as they were).
- At close, each bind of a pod given vGPU cards carries Volcano's annotations
  (``caldera.api.vgpu.bind_annotations``) in ``SessionResult.bind_annotations``: the process
  sends them in the Binding, which the API server merges into the pod with the node.
- The wait record of a job whose vGPU pods found no node names the card that came closest:
  "node n1: card GPU-ab12 has 2000 MiB free, pod asks 8000".
- MIG: a node whose register annotation ends with a card in ``mig`` mode gets a MIG ledger
  (``scheduler.api.mig_cards``) with the geometries the device ConfigMap knows for its cards;
  pods are given MIG instances, written ``uuid[group-position]`` in the ids annotation, and
  read back from it; its refusals say why a MIG card refuses (no geometry known and why, the
  card's geometry has no free instance big enough). On MIG nodes the node class also carries
  the device configuration, so a new ConfigMap gives new verdicts.

Arguments (Volcano's names): ``deviceshare.VGPUEnable`` (false), ``deviceshare.SchedulePolicy``
("", binpack or spread), ``deviceshare.ScheduleWeight`` (0), ``deviceshare.NodeLockEnable``
(false: the process locks the node, ``caldera.api.vgpu.NODE_LOCK``),
``deviceshare.KnownGeometriesCMName``/``KnownGeometriesCMNamespace`` (the device ConfigMap,
``volcano-vgpu-device-config`` in ``kube-system``: the process reads it,
``scheduler.device_config``, into ``ClusterInfo.device_config``).
``deviceshare.GPUSharingEnable`` or ``GPUNumberEnable`` (false)
turns on the older ``volcano.sh/gpu-memory``/``gpu-number`` mode instead
(``scheduler.plugins.deviceshare_gpushare``); as in Volcano, the two together, or either with
``VGPUEnable``, are refused at start with an error naming them. ``AscendMindClusterVNPUEnable``
and ``AscendHAMiVNPUEnable`` set to true are refused with an error naming them: Caldera does not
implement those devices.

Speed: the predicate's and score's answers read the node's tasks and its register annotation
(its generation) and, of the pod, what ``PodAsk`` holds: that is the pod's node class
(``Speedups.node_class``), so node verdicts stay reused across sessions. One fit per pod
ask (with the pod's init requests), ledger version and view is worked out and shared by the
predicate, the score and the allocate event; a pod's vGPU limits are parsed once per distinct
set of container resources.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from typing import TYPE_CHECKING, Final

from caldera.api.core import Pod
from caldera.api.mig import NO_DEVICE_CONFIG, DeviceConfig
from caldera.api.resources import Resources
from caldera.api.vgpu import IDS as IDS_ANNOTATION
from caldera.api.vgpu import (
    MIG,
    PODGROUP_POLICY,
    REGISTER,
    VGPU_CORES,
    VGPU_MEMORY,
    VGPU_NUMBER,
    WHOLE_GPU,
    CardFilter,
    ContainerRequest,
    FormatError,
    NodeCards,
    bind_annotations,
    container_requests,
    decode_pod_devices,
    group_key,
    parse_register,
)
from caldera.api.vgpu import MODE as MODE_ANNOTATION
from scheduler.api.cards import (
    NO_CARD_FITS,
    POLICIES,
    Fit,
    Grant,
    Grants,
    Ledger,
    PodAsk,
    Refusal,
    beyond_idle,
    holder_state,
)
from scheduler.api.gpushare_cards import NUMBER, SHARING
from scheduler.api.mig_cards import NO_MIG_INSTANCE, MigLedger
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.plugins.deviceshare_gpushare import GpuShare
from scheduler.why import DETAIL

if TYPE_CHECKING:
    from scheduler.framework.session import Session

NAME: Final = "deviceshare"
_UNSUPPORTED: Final = (
    "deviceshare.AscendMindClusterVNPUEnable",
    "deviceshare.AscendHAMiVNPUEnable",
)
_NO_ASK: Final = PodAsk()
_SPREAD_GROUPS: Final = "spread"
# Refusals naming one card's figures, which tell a user more than a node-wide reason.
_CARD_REASONS: Final = (NO_CARD_FITS, NO_MIG_INSTANCE)


# Containers' vGPU requests by their resources (pods of one task have the same): parsed once,
# forgotten whole past a bound (only speed is lost).
_REQUESTS: dict[tuple[object, ...], tuple[ContainerRequest, ...]] = {}
_MAX_REQUESTS = 4096


def _requests_of(pod: Pod) -> tuple[ContainerRequest, ...]:
    key = tuple(
        (tuple(c.resources.limits.items()), tuple(c.resources.requests.items()))
        for c in pod.spec.containers
    )
    found = _REQUESTS.get(key)
    if found is None:
        if len(_REQUESTS) >= _MAX_REQUESTS:
            _REQUESTS.clear()
        found = _REQUESTS[key] = container_requests(pod)
    return found


def ask_of(task: TaskInfo) -> PodAsk:
    """What the task's pod asks of GPU cards (nothing, for a pod without one)."""
    pod = task.pod
    if pod is None:
        return _NO_ASK
    containers = _requests_of(pod)
    whole = 0 if containers else max(task.resreq.get(WHOLE_GPU), 0) // 1000
    if not containers and not whole:
        return _NO_ASK
    annotations = pod.metadata.annotations
    spread = annotations.get(PODGROUP_POLICY) == _SPREAD_GROUPS
    return PodAsk(
        containers=containers,
        whole=whole,
        mode=annotations.get(MODE_ANNOTATION),
        filter=CardFilter.of(annotations),
        group=group_key(pod) if spread else "",
    )


def node_ledger(node: NodeInfo, config: DeviceConfig = NO_DEVICE_CONFIG) -> Ledger | None:
    """An empty ledger of the node's registered cards; None when it registers none that read
    or lacks the vGPU allocatable (Volcano's NewGPUDevices). A node in MIG mode gets a MIG
    ledger with the geometries ``config`` knows for its cards."""
    if node.node is None:
        return None
    text = node.node.metadata.annotations.get(REGISTER)
    if text is None:
        return None
    if any(node.allocatable.get(name) <= 0 for name in (VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES)):
        return None
    registered = _registered(text)
    if registered is not None and registered.mode == MIG:
        return MigLedger.of_mig(node.name, registered, config)
    return None if registered is None else Ledger.of(node.name, registered)


@functools.lru_cache(maxsize=8192)
def _registered(text: str) -> NodeCards | None:
    """The cards a register annotation names (read once per distinct text: nodes keep
    theirs from session to session)."""
    try:
        return parse_register(text)
    except FormatError:
        return None


def held_grants(ledger: Ledger, text: str) -> Grants | None:
    """The grants an ids annotation names on this node's cards; None when it names none."""
    positions = {card.uuid: i for i, card in enumerate(ledger.cards)}
    grants: list[tuple[Grant, ...]] = []
    for container in decode_pod_devices(text):
        found = [(positions[d.uuid], d.memory, d.cores) for d in container if d.uuid in positions]
        grants.append(tuple(found))
    return tuple(grants) if any(grants) else None


def held_fit(ledger: Ledger, text: str) -> Fit | None:
    """What an ids annotation names on this node's cards, as a fit; None when it names none."""
    if isinstance(ledger, MigLedger):
        return ledger.held_fit(text)
    grants = held_grants(ledger, text)
    return None if grants is None else Fit(grants, 0.0)


class DeviceSharePlugin:
    """Shares GPU cards between pods as Volcano's deviceshare does with HAMi."""

    name = NAME

    def __init__(self, arguments: Arguments) -> None:
        self.vgpu = arguments.boolean("deviceshare.VGPUEnable", False)
        self.node_lock = arguments.boolean("deviceshare.NodeLockEnable", False)
        self.policy = arguments.string("deviceshare.SchedulePolicy", "")
        self.weight = arguments.integer("deviceshare.ScheduleWeight", 0)
        arguments.string("deviceshare.KnownGeometriesCMName", "volcano-vgpu-device-config")
        arguments.string("deviceshare.KnownGeometriesCMNamespace", "kube-system")
        if self.policy not in POLICIES:
            raise ValueError(
                f"plugin {NAME}: argument deviceshare.SchedulePolicy must be binpack or "
                f"spread, got {self.policy!r}"
            )
        for key in _UNSUPPORTED:
            if arguments.boolean(key, False):
                raise ValueError(f"plugin {NAME}: argument {key} names devices Caldera lacks")
        self.gpushare = _gpushare(arguments, self.vgpu)
        self.ledgers: dict[str, Ledger] = {}
        self.where: dict[str, str] = {}  # pod uid -> the node whose ledger holds it
        self.asks: dict[str, PodAsk] = {}
        self.refusals: dict[PodAsk, Refusal] = {}

    def on_session_open(self, ssn: Session) -> None:
        if self.gpushare is not None:
            self.gpushare.open(ssn, self.name)
            return
        if not self.vgpu:
            # Off (Volcano's default): every node passes. Registered all the same, with a
            # node class that adds nothing, so the placer keeps reusing node verdicts.
            ssn.add_predicate_fn(self.name, lambda _task, _node: None)
            ssn.add_speedups(self.name, Speedups(node_class=lambda _task: None))
            return
        asks, ledgers, where = self.asks, self.ledgers, self.where
        for name, node in ssn.nodes.items():
            ledger = node_ledger(node, ssn.cluster.device_config)
            if ledger is not None:
                ledgers[name] = ledger
                self._fill(ledger, node, ssn.cluster.device_grants, asks, where)
        # Each distinct (ask, init requests) gets a small number, cheap to hash. A fit is a
        # function of the ask and the ledger's state (its version), the view one of the
        # requests and the node's state (its generation, unique in the process): the
        # predicate, the score and the allocate event share them.
        fits: dict[tuple[int, str, int, bool], Fit | Refusal] = {}
        views: dict[tuple[int, int], bool] = {}
        numbers: dict[tuple[PodAsk, Resources], int] = {}
        numbered: dict[str, int] = {}  # task uid -> its number
        refusals = self.refusals  # the one a user reads, per ask

        def ask(task: TaskInfo) -> PodAsk:
            found = asks.get(task.uid)
            if found is None:
                found = asks[task.uid] = ask_of(task)
            return found

        def number(task: TaskInfo) -> int:
            found = numbered.get(task.uid)
            if found is None:
                key = (ask(task), task.init_resreq)
                found = numbered[task.uid] = numbers.setdefault(key, len(numbers))
            return found

        def ledger_for(node: NodeInfo) -> Ledger | None:
            ledger = ledgers.get(node.name)
            if ledger is None or ssn.nodes.get(node.name) is node:
                return ledger
            # A copy of a node (preempt's "without these victims"): its own tasks only.
            return ledger.copy_with(task.uid for task in node.tasks.values())

        def fit(task: TaskInfo, node: NodeInfo, future: bool) -> Fit | Refusal | None:
            pod_ask = ask(task)
            if not pod_ask.asks:
                return None
            ledger = ledger_for(node)
            if ledger is None:
                return None
            if ssn.nodes.get(node.name) is not node:  # a copy: no version of its own
                return ledger.fit(pod_ask, self.policy, future=future)
            return fit_on(task, ledger, future)

        def fit_on(task: TaskInfo, ledger: Ledger, future: bool) -> Fit | Refusal:
            key = (number(task), ledger.node, ledger.version, future)
            found = fits.get(key)
            if found is None:
                found = fits[key] = ledger.fit(ask(task), self.policy, future=future)
            return found

        def future_view(task: TaskInfo, node: NodeInfo) -> bool:
            """Whether the pod would be pipelined here: its requests fit only the future."""
            key = (number(task), node.generation)
            found = views.get(key)
            if found is None:
                found = views[key] = beyond_idle(task, node)
            return found

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            found = fit(task, node, future_view(task, node))
            if isinstance(found, Refusal):
                if ssn.explain:
                    kept = refusals.get(ask(task))
                    # A card's own figures tell a user more than a node-wide reason.
                    if kept is None or (
                        kept.reason not in _CARD_REASONS and found.reason in _CARD_REASONS
                    ):
                        refusals[ask(task)] = found
                return found.reason
            return None

        def score(task: TaskInfo, node: NodeInfo) -> float:
            if self.weight <= 0:
                return 0.0
            found = fit(task, node, future_view(task, node))
            if not isinstance(found, Fit):
                return 0.0
            return math.floor(found.score + 0.5) * self.weight

        def allocated(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:  # an eviction undone
                ledger = ledgers.get(where.get(task.uid, ""))
                if ledger is not None:
                    ledger.mark(task.uid, "held")
                return
            self._release(task.uid)
            ledger = ledgers.get(task.node_name)
            node = ssn.nodes.get(task.node_name)
            if ledger is None or node is None:
                return
            pipelined = task.status == TaskStatus.PIPELINED
            # The node holds the task already: fit it against the ledger as it was.
            found = fit_on(task, ledger, pipelined)
            if isinstance(found, Fit):
                ledger.take_fit(task.uid, found, ask(task).group, holder_state(task))
                where[task.uid] = task.node_name

        def deallocated(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:  # evicted: its cards free up later
                ledger = ledgers.get(where.get(task.uid, ""))
                if ledger is not None:
                    ledger.mark(task.uid, "releasing")
                return
            self._release(task.uid)

        ssn.add_predicate_fn(self.name, predicate)
        ssn.add_node_order_fn(self.name, score)
        if ledgers:
            ssn.add_allocate_handler(self.name, allocated, deallocated)

        # MIG nodes' answers also depend on the geometries read: a new ConfigMap, new verdicts.
        config = ssn.cluster.device_config
        mig = any(isinstance(ledger, MigLedger) for ledger in ledgers.values())

        def node_class(task: TaskInfo) -> Hashable:
            pod_ask = ask(task)
            if not pod_ask.asks:
                return None
            return (pod_ask, config) if mig else pod_ask

        ssn.add_speedups(self.name, Speedups(node_class=node_class))

    def _release(self, uid: str) -> None:
        node = self.where.pop(uid, None)
        if node is not None:
            self.ledgers[node].release(uid)

    def _fill(
        self,
        ledger: Ledger,
        node: NodeInfo,
        in_flight: dict[str, str],
        asks: dict[str, PodAsk],
        where: dict[str, str],
    ) -> None:
        """Count what the node's pods hold: named grants first, then the others fitted in name
        order (pods bound without annotations, whole-GPU pods)."""
        unnamed: list[tuple[str, TaskInfo, PodAsk]] = []
        for task in node.tasks.values():
            pod_ask = asks.get(task.uid)
            if pod_ask is None:
                pod_ask = asks[task.uid] = ask_of(task)
            if not pod_ask.asks or task.pod is None:
                continue
            text = task.pod.metadata.annotations.get(IDS_ANNOTATION) or in_flight.get(task.uid)
            held = held_fit(ledger, text) if text and pod_ask.containers else None
            if held is None:
                unnamed.append((task.key, task, pod_ask))
                continue
            ledger.take_fit(task.uid, held, pod_ask.group, holder_state(task))
            where[task.uid] = node.name
        for _, task, pod_ask in sorted(unnamed, key=lambda u: u[0]):
            found = ledger.fit(pod_ask, self.policy)
            if isinstance(found, Fit):
                ledger.take_fit(task.uid, found, pod_ask.group, holder_state(task))
                where[task.uid] = node.name

    def on_session_close(self, ssn: Session) -> None:
        if self.gpushare is not None:
            self.gpushare.close(ssn)
            return
        if not self.vgpu:
            return
        stamp = int(ssn.now.timestamp())
        for bind in ssn.result.binds:
            uid = bind.task.uid
            node = self.where.get(uid)
            if node != bind.node or not self.asks.get(uid, _NO_ASK).containers:
                continue
            devices = self.ledgers[node].devices_of(uid)
            ssn.result.bind_annotations[uid] = bind_annotations(node, devices, stamp)
        if ssn.explain and self.refusals:
            self._explain(ssn)
        if ssn.explain:
            for name, ledger in self.ledgers.items():
                for i, card in enumerate(ledger.cards):
                    pods, memory, cores = ledger.use(i, future=False)
                    ssn.result.gpu_cards[(name, card.uuid)] = (card.memory, memory, cores, pods)

    def _explain(self, ssn: Session) -> None:
        """The closest card's figures in the wait record of jobs whose vGPU pods wait."""
        for job in ssn.jobs.values():
            if not job.fit_errors:
                continue
            for uid in job.fit_errors:
                task = job.tasks.get(uid)
                kept = self.refusals.get(self.asks.get(uid, _NO_ASK)) if task else None
                if kept is not None:
                    ssn.note_wait(job.key, DETAIL, kept.detail)
                    break


def _gpushare(arguments: Arguments, vgpu: bool) -> GpuShare | None:
    """The older GPU memory or number mode when configured; Volcano's conflicts refused."""
    sharing = arguments.boolean("deviceshare.GPUSharingEnable", False)
    number = arguments.boolean("deviceshare.GPUNumberEnable", False)
    if sharing and number:
        raise ValueError(
            f"plugin {NAME}: arguments deviceshare.GPUSharingEnable and "
            "deviceshare.GPUNumberEnable cannot both be true"
        )
    if (sharing or number) and vgpu:
        key = "deviceshare.GPUSharingEnable" if sharing else "deviceshare.GPUNumberEnable"
        raise ValueError(
            f"plugin {NAME}: argument {key} cannot be true with deviceshare.VGPUEnable"
        )
    if sharing:
        return GpuShare(SHARING)
    return GpuShare(NUMBER) if number else None
