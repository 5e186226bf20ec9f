"""deviceshare's older GPU sharing mode in a session: GPU memory (``deviceshare.GPUSharingEnable``)
or whole GPU numbers (``deviceshare.GPUNumberEnable``); Volcano's
pkg/scheduler/api/devices/nvidia/gpushare, docs/gpu-sharing.md.

Each node whose capacity names ``volcano.sh/gpu-number`` and ``volcano.sh/gpu-memory`` gets a
ledger of its cards (``scheduler.api.gpushare_cards``): what its pods asking GPU memory or
cards (either, as Volcano's AddResource) hold, read from their ``volcano.sh/gpu-index``
annotation or from the grants of binds in flight (``ClusterInfo.device_grants``), or, for a
pod asking in the mode and bound without either, fitted again in name order after the others
(Volcano does not count such a pod: Caldera does, so no card is over-committed).

- Predicate: a pod asking in the mode (its limits' ``volcano.sh/gpu-memory``, or
  ``volcano.sh/gpu-number``, above 0) must fit the node's cards; a node without a ledger
  passes (its resources decide, as in Volcano). The view is the vGPU mode's: the cards as they
  are now for a pod that will be bound, as they will be once victims have gone for one that
  will be pipelined.
- No node score: Volcano scores 0 in this mode.
- Allocate and deallocate events keep the ledgers as the session places, pipelines, evicts and
  undoes.
- At close, each bind of a pod given cards carries ``volcano.sh/gpu-index`` and
  ``volcano.sh/predicate-time`` in ``SessionResult.bind_annotations``, sent in the Binding.
- The wait record of a job whose pods found no node names the card that came closest:
  "node n1: card 0 has 2000 gpu-memory free, pod asks 8000".

Difference from Volcano, on purpose: in the number mode a pod that also asks memory takes whole
cards (Volcano checks the number but then allocates one card by memory).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Final

from caldera.api.gpushare import (
    GPU_INDEX,
    ShareAsk,
    bind_annotations,
    node_cards,
    parse_gpu_index,
    pod_memory,
    pod_number,
)
from scheduler.api.cards import Refusal, beyond_idle, holder_state
from scheduler.api.gpushare_cards import NUMBER, ShareFit, ShareLedger
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus
from scheduler.framework.incremental import Speedups
from scheduler.why import DETAIL

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_NO_ASK: Final = ShareAsk()
_DONE: Final = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


def share_ask(task: TaskInfo) -> ShareAsk:
    """What the task's pod asks of GPU memory and cards (nothing, for a pod that asks none)."""
    pod = task.pod
    if pod is None:
        return _NO_ASK
    memory, number = pod_memory(pod), pod_number(pod)
    return ShareAsk(memory=memory, number=number) if memory or number else _NO_ASK


def _asks(ask: ShareAsk, mode: str) -> bool:
    """Whether the pod asks in the mode (a pod that asks in the other one is not placed on
    cards, though, bound with an index, it holds them: Volcano's AddResource)."""
    return (ask.number if mode == NUMBER else ask.memory) > 0


def share_ledger(node: NodeInfo, mode: str) -> ShareLedger | None:
    """An empty ledger of the node's cards; None when its capacity names none."""
    if node.node is None:
        return None
    cards = node_cards(node.node.status.capacity, node.node.metadata.annotations)
    return None if cards is None else ShareLedger(node.name, cards, mode)


class GpuShare:
    """One session's cards in the memory or the number mode (see the module docstring)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.ledgers: dict[str, ShareLedger] = {}
        self.where: dict[str, str] = {}  # pod uid -> the node whose ledger holds it
        self.asks: dict[str, ShareAsk] = {}
        self.refusals: dict[ShareAsk, Refusal] = {}

    def ask(self, task: TaskInfo) -> ShareAsk:
        found = self.asks.get(task.uid)
        if found is None:
            found = self.asks[task.uid] = share_ask(task)
        return found

    def open(self, ssn: Session, plugin: str) -> None:
        mode, ledgers, where, refusals = self.mode, self.ledgers, self.where, self.refusals
        for name, node in ssn.nodes.items():
            ledger = share_ledger(node, mode)
            if ledger is not None:
                ledgers[name] = ledger
                self._fill(ledger, node, ssn.cluster.device_grants)
        # A fit is a function of the ask and the ledger's state (its version); the view one of
        # the pod's requests and the node's state (its generation, unique in the process).
        fits: dict[tuple[ShareAsk, str, int, bool], ShareFit | Refusal] = {}
        views: dict[tuple[str, int], bool] = {}

        def ledger_for(node: NodeInfo) -> ShareLedger | None:
            ledger = ledgers.get(node.name)
            if ledger is None or ssn.nodes.get(node.name) is node:
                return ledger
            # A copy of a node (preempt's "without these victims"): its own tasks only.
            copy = ShareLedger(ledger.node, ledger.cards, ledger.mode)
            for task in node.tasks.values():
                holder = ledger.holders.get(task.uid)
                if holder is not None:
                    copy.take(task.uid, holder.positions, holder.memory, holder.state)
            return copy

        def fit_on(ask: ShareAsk, ledger: ShareLedger, future: bool) -> ShareFit | Refusal:
            key = (ask, ledger.node, ledger.version, future)
            found = fits.get(key)
            if found is None:
                found = fits[key] = ledger.fit(ask, future=future)
            return found

        def future_view(task: TaskInfo, node: NodeInfo) -> bool:
            """Whether the pod would be pipelined here: its requests fit only the future."""
            key = (task.uid, node.generation)
            found = views.get(key)
            if found is None:
                found = views[key] = beyond_idle(task, node)
            return found

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            ask = self.ask(task)
            if not _asks(ask, mode):
                return None
            ledger = ledger_for(node)
            if ledger is None:
                return None
            future = future_view(task, node)
            if ssn.nodes.get(node.name) is node:
                found = fit_on(ask, ledger, future)
            else:  # a copy: no version of its own
                found = ledger.fit(ask, future=future)
            if isinstance(found, Refusal):
                if ssn.explain:
                    refusals.setdefault(ask, found)
                return found.reason
            return None

        def allocated(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:  # an eviction undone
                ledger = ledgers.get(where.get(task.uid, ""))
                if ledger is not None:
                    ledger.mark(task.uid, "held")
                return
            self._release(task.uid)
            ledger = ledgers.get(task.node_name)
            ask = self.ask(task)
            if ledger is None or not _asks(ask, mode):
                return
            # The node holds the task already: fit it against the ledger as it was.
            found = fit_on(ask, ledger, task.status == TaskStatus.PIPELINED)
            if isinstance(found, ShareFit):
                ledger.take(task.uid, found.positions, ask.memory, holder_state(task))
                where[task.uid] = task.node_name

        def deallocated(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:  # evicted: its cards free up later
                ledger = ledgers.get(where.get(task.uid, ""))
                if ledger is not None:
                    ledger.mark(task.uid, "releasing")
                return
            self._release(task.uid)

        def node_class(task: TaskInfo) -> Hashable:
            ask = self.ask(task)
            return ask if _asks(ask, mode) else None

        ssn.add_predicate_fn(plugin, predicate)
        if ledgers:
            ssn.add_allocate_handler(plugin, allocated, deallocated)
        ssn.add_speedups(plugin, Speedups(node_class=node_class))

    def _release(self, uid: str) -> None:
        node = self.where.pop(uid, None)
        if node is not None:
            self.ledgers[node].release(uid)

    def _fill(self, ledger: ShareLedger, node: NodeInfo, in_flight: dict[str, str]) -> None:
        """Count what the node's pods hold: named cards first, then the others fitted in name
        order (pods bound without an index)."""
        unnamed: list[tuple[str, TaskInfo, ShareAsk]] = []
        for task in node.tasks.values():
            if task.pod is None or task.status in _DONE:
                continue
            ask = self.ask(task)
            text = task.pod.metadata.annotations.get(GPU_INDEX) or in_flight.get(task.uid)
            ids = parse_gpu_index(text) if text else None
            positions = ledger.positions_of(ids) if ids and (ask.memory or ask.number) else ()
            if positions:
                ledger.take(task.uid, positions, ask.memory, holder_state(task))
                self.where[task.uid] = node.name
            elif _asks(ask, self.mode):
                unnamed.append((task.key, task, ask))
        for _, task, ask in sorted(unnamed, key=lambda u: u[0]):
            found = ledger.fit(ask)
            if isinstance(found, ShareFit):
                ledger.take(task.uid, found.positions, ask.memory, holder_state(task))
                self.where[task.uid] = node.name

    def close(self, ssn: Session) -> None:
        stamp = _unix_nanos(ssn)
        for bind in ssn.result.binds:
            uid = bind.task.uid
            node = self.where.get(uid)
            if node != bind.node:
                continue
            ledger = self.ledgers[node]
            positions = ledger.holders[uid].positions
            ids = (ledger.cards.ids[p] for p in positions)
            ssn.result.bind_annotations[uid] = bind_annotations(ids, stamp)
        if ssn.explain and self.refusals:
            for job in ssn.jobs.values():
                for uid in job.fit_errors:
                    kept = self.refusals.get(self.asks.get(uid, _NO_ASK))
                    if uid in job.tasks and kept is not None:
                        ssn.note_wait(job.key, DETAIL, kept.detail)
                        break


def _unix_nanos(ssn: Session) -> int:
    now = ssn.now
    return int(now.timestamp()) * 1_000_000_000 + now.microsecond * 1000
