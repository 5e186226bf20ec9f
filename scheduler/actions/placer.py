"""The best node for a pending pod, found without looking at every node for every pod.

Pods with the same requests and scheduling constraints form a class; each class keeps its
nodes' verdicts (a score, or why the pod does not fit) in a heap, stamped with the node's
``generation``. The session logs every node whose tasks change (``Session.node_changes``), so
the next pod of a class looks again only at the nodes changed since the class last looked:
allocate, preempt and reclaim all place pods through a placer, and whatever the statements of
those actions do (allocate, pipeline, evict, discard) is seen by every class.

On the live snapshot the classes outlive the session (``scheduler.api.verdicts``): a class
seen in an earlier session looks again only at the nodes logged as changed since, so a
session over a mostly unchanged cluster evaluates a few nodes per class, not all of them.
Classes of job-local pods (below) and the placers over one HyperNode's nodes keep theirs for
one session.

This is exact as long as the configured plugins filter and score a node by the pod and that
node alone, which holds for the plugins in ``NODE_LOCAL_PLUGINS`` but for the pods one of
them names cross-node (``Session.cross_node``: inter-pod affinity and topology spread read
the pods of the node's whole topology domain): those are judged afresh on every node, with
the batch node scores added (``Session.batch_node_scores``); or, when only layered functions
claim them (``Session.cross_node_layered``: inter-pod affinity, topology spread), their
node-local verdicts come from their class as any pod's and only the nodes that fit are judged
again. In a cluster larger than Volcano's ``--minimum-feasible-nodes``, a cross-node pod's search
stops once enough nodes fit (Volcano's feasible-node sampling, ``scheduler.api.feasible_nodes``),
starting where the session's last such search stopped. With a plugin of
``JOB_LOCAL_PLUGINS`` (task-topology; both named by the incremental layer,
``scheduler.framework.incremental``) a class is further limited to one task of one job for
jobs that describe a topology; any other configured plugin makes the placer evaluate every
node for every pod, unless it names what else its verdicts read (``Speedups.node_class``,
nodegroup's queue affinity): that value joins the pod's class. A plugin whose verdict is cheap
enough to ask per class (``Speedups.node_overlay``: nodegroup) is applied on top of the rest of
the verdict, which the classes that differ only in its class share
(``scheduler.actions.verdict_split``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from caldera.api.resources import Resources
from scheduler.actions.verdict_split import Verdict, split
from scheduler.api.dra.view import claims_class
from scheduler.api.feasible_nodes import FeasibleNodes, search
from scheduler.api.fit import shortfall
from scheduler.api.task_topology import Topology
from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.api.verdicts import Candidates, NodeSetHeap, VerdictMemory
from scheduler.framework.incremental import JOB_LOCAL_PLUGINS, NODE_LOCAL_PLUGINS

if TYPE_CHECKING:
    from scheduler.framework.session import Session

NO_NODES = "no nodes available to schedule pods"


def fit_error_message(total_nodes: int, reasons: Iterable[list[str]]) -> str:
    """Kubernetes' "0/N nodes are available: <count> <reason>, ...." (sorted)."""
    counts: dict[str, int] = {}
    for node_reasons in reasons:
        for reason in node_reasons:
            counts[reason] = counts.get(reason, 0) + 1
    return fit_error_histogram(total_nodes, counts)


def fit_error_histogram(total_nodes: int, counts: Mapping[str, int]) -> str:
    """``fit_error_message`` from how many nodes give each reason."""
    if total_nodes == 0:
        return NO_NODES
    histogram = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    return f"0/{total_nodes} nodes are available: {histogram}."


def evaluate(ssn: Session, task: TaskInfo, node: NodeInfo) -> float | list[str]:
    """The node's score for the task, or why the task does not fit there (its init request
    must fit the node's future idle resources, then every predicate must pass)."""
    reasons = shortfall(task.init_resreq, node)
    if reasons:
        return reasons
    reason = ssn.predicate(task, node)
    if reason:
        return [reason]
    return ssn.node_score(task, node)


def fits_idle(request: Resources, node: NodeInfo) -> bool:
    """Whether ``request`` fits what the node has free right now."""
    alloc, used = node.allocatable, node.used
    return all(amount <= alloc.get(n) - used.get(n) for n, amount in request.items())


# One object per class key (``shared_class``), so that looking a class up finds its key by
# identity, without comparing requests; forgotten whole past a bound (only speed is lost).
_CLASS_KEYS: dict[tuple[object, ...], tuple[object, ...]] = {}
_MAX_CLASS_KEYS = 4096


def shared_class(task: TaskInfo) -> tuple[object, ...]:
    """The class key of a pod that is not job-local, one object for equal keys."""
    key = (task.init_resreq, task.resreq, task.signature, "", "")
    kept = _CLASS_KEYS.get(key)
    if kept is None:
        if len(_CLASS_KEYS) >= _MAX_CLASS_KEYS:
            _CLASS_KEYS.clear()
        kept = _CLASS_KEYS[key] = key
    return kept


def sampled_count(options: FeasibleNodes, all_nodes: int) -> int | None:
    """How many fitting nodes a cross-node task's search over ``all_nodes`` stops at, None
    when it looks at every node."""
    wanted = options.to_find(all_nodes)
    return wanted if wanted < all_nodes else None


class Placer:
    """Finds the best node for a pod, reusing what is still valid from earlier pods."""

    def __init__(self, ssn: Session, nodes: Mapping[str, NodeInfo] | None = None) -> None:
        """``nodes``: only these of the session's nodes are candidates (a HyperNode's)."""
        self.ssn = ssn
        self.nodes = ssn.nodes if nodes is None else nodes
        self.log = ssn.node_changes
        configured = {opt.name for tier in ssn.tiers for opt in tier}
        # Other plugins keep verdicts reusable by naming what else they read (node classes).
        others = sorted(configured - NODE_LOCAL_PLUGINS - JOB_LOCAL_PLUGINS)
        self.node_classes = ssn.incremental.node_classes(others) if others else []
        self.reuse = self.node_classes is not None
        # Plugins whose verdicts are applied on top of the rest, kept per base class (the
        # class without theirs: scheduler.actions.verdict_split).
        overlay = {p for p in others if ssn.incremental.of(p).node_overlay} if self.reuse else set()
        self.split = split(*ssn.node_fns(), overlay) if overlay else None
        # Where the other plugins' node classes are in a class key (after its own part).
        self.base_positions = [i + 1 for i, p in enumerate(others) if p not in overlay]
        # base class key -> node -> (the generation it was judged at, its base verdict)
        self.bases: dict[tuple[object, ...], dict[str, tuple[int, Verdict]]] = {}
        self.per_task = bool(configured & JOB_LOCAL_PLUGINS)
        self._job_local: dict[str, bool] = {}  # job key -> its pods score per job and task
        self.classes: dict[tuple[object, ...], Candidates] = {}
        # Classes of pods that are not job-local live in the snapshot's verdict memory when
        # it has one (every node is a candidate): later sessions start from their verdicts.
        self.memory: VerdictMemory | None = (
            ssn.incremental.verdict_memory() if nodes is None else None
        )
        # How many fitting nodes a cross-node task's search stops at; None: it looks at all.
        self.sampled_count = sampled_count(ssn.feasible_nodes, len(self.nodes))
        self._names: list[str] = []

    def _is_job_local(self, key: str) -> bool:
        """Whether task-topology scores this job's pods (its PodGroup describes a topology)."""
        local = self._job_local.get(key)
        if local is None:
            job = self.ssn.jobs.get(key)
            pg = job.podgroup if job is not None else None
            local = (
                pg is not None and Topology.from_annotations(pg.metadata.annotations) is not None
            )
            self._job_local[key] = local
        return local

    def _evaluate(
        self,
        cand: Candidates,
        task: TaskInfo,
        node: NodeInfo,
        base: dict[str, tuple[int, Verdict]] | None,
    ) -> None:
        name = node.name
        verdict: float | list[str] | None = None
        seen = cand.seen.get(name)
        if seen is not None:
            verdict = cand.swap_back(name, node.generation)
            if verdict is None:
                cand.previous[name] = (seen, cand.verdict(name))
        if verdict is None:
            cand.seen[name] = node.generation
            if base is None:
                verdict = evaluate(self.ssn, task, node)
            else:
                verdict = self._split_verdict(base, task, node)
        if isinstance(verdict, list):
            cand.set_reasons(node.name, verdict)
            cand.scores.pop(node.name, None)
        else:
            cand.drop_reasons(node.name)
            cand.scores[node.name] = verdict
            heapq.heappush(cand.heap, (-verdict, node.name, node.generation))

    def _split_verdict(
        self, base: dict[str, tuple[int, Verdict]], task: TaskInfo, node: NodeInfo
    ) -> Verdict:
        """The node's verdict from its base class's, judged again only when the node changed
        since, with the overlay plugins' applied on top."""
        assert self.split is not None
        generation, kept = node.generation, base.get(node.name)
        if kept is not None and kept[0] == generation:
            part = kept[1]
        else:
            part = self.split.base(task, node)
            base[node.name] = (generation, part)
        return self.split.apply(part, task, node)

    def class_key(self, task: TaskInfo) -> tuple[object, ...]:
        """What makes pods equivalent here: requests and scheduling constraints, and, for a
        job-local pod, its job and task."""
        if self.per_task and self._is_job_local(task.job):
            key: tuple[object, ...] = (
                task.init_resreq,
                task.resreq,
                task.signature,
                task.job,
                task.role,
            )
        else:
            key = task.shared_class or shared_class(task)
            task.shared_class = key
        dra = self.ssn.cluster.dra
        if dra is not None and task.pod is not None and task.pod.spec.resource_claims:
            # DRA verdicts read the session's claims and devices too (claims_class)
            key = (key, claims_class(task.pod, dra))
        if self.node_classes:
            return (key, *[node_class(task) for node_class in self.node_classes])
        return key

    def _base(self, key: tuple[object, ...]) -> dict[str, tuple[int, Verdict]]:
        """The base verdicts of the class ``key`` (its own part, then the plugins' node
        classes), kept for its key without the overlay plugins' classes."""
        base_key = (key[0], *[key[i] for i in self.base_positions])
        found = self.bases.get(base_key)
        if found is None:
            found = self.bases[base_key] = {}
        return found

    def _class(self, task: TaskInfo) -> tuple[Candidates, dict[str, tuple[int, Verdict]] | None]:
        """The verdicts kept for ``task``'s class, as last brought up to date (in this session,
        or in an earlier one for a class from the verdict memory), and its base class's
        verdicts when the overlay plugins' are split off (``_base``)."""
        local = self.per_task and self._is_job_local(task.job)
        key = self.class_key(task)
        base = None if self.split is None else self._base(key)
        memory = self.memory
        if memory is None or local or (task.pod is not None and task.pod.spec.resource_claims):
            # a pod with claims: its verdicts live one session (DRA state is not the node's)
            return self.classes.get(key) or self.classes.setdefault(key, Candidates()), base
        cand = memory.classes.get(key)
        if cand is None:
            cand = memory.classes[key] = Candidates()
            cand.session, cand.between = memory.session, memory.end
        elif cand.session != memory.session:
            self._catch_up(cand, memory, task, base)
        return cand, base

    def _catch_up(
        self,
        cand: Candidates,
        memory: VerdictMemory,
        task: TaskInfo,
        base: dict[str, tuple[int, Verdict]] | None,
    ) -> None:
        """A class from an earlier session: look again at the nodes changed since (``task``
        is of the class), forget those gone; the session's own log is then read from its
        start."""
        nodes, seen = self.nodes, cand.seen
        for name in memory.changed_since(cand.between):
            node = nodes.get(name)
            if node is None:
                cand.forget(name)
            elif seen.get(name) != node.generation:
                self._evaluate(cand, task, node, base)
        cand.session, cand.between = memory.session, memory.end
        if cand.position > 0:  # -1 stays: the class has not looked at every node yet
            cand.position = 0
        cand.views.clear()
        cand.compact()

    def _fresh(self, task: TaskInfo, nodes: Iterable[NodeInfo]) -> Candidates:
        """Every one of ``nodes`` judged afresh for ``task``; for a cross-node task
        (``Session.cross_node``) the batch scores are added over the nodes that fit."""
        fresh = Candidates()
        for node in nodes:
            self._evaluate(fresh, task, node, None)
        if fresh.scores and self.ssn.has_cross_node and self.ssn.cross_node(task):
            nodes_by_name = self.nodes
            fitting = [nodes_by_name[name] for name in fresh.scores]
            extra = self.ssn.batch_node_scores(task, fitting)
            if extra:
                for name, score in extra.items():
                    if name in fresh.scores:
                        fresh.scores[name] += score
                fresh.heap = [
                    (-score, name, nodes_by_name[name].generation)
                    for name, score in fresh.scores.items()
                ]
                heapq.heapify(fresh.heap)
        return fresh

    def _layered(self, task: TaskInfo, names: frozenset[str] | None = None) -> Candidates:
        """A task cross-node by layered functions only (``Session.cross_node_layered``): its
        class's node-local verdicts, reused as any class's (taken with ``Session.node_local``
        set), then the nodes that fit (of ``names``, when given) judged again by every
        predicate and the batch scores added over those that still fit: what ``_fresh`` gives,
        with the node-local part looked at only where a node changed."""
        ssn = self.ssn
        ssn.node_local = True
        try:
            cand = self._local(task)
        finally:
            ssn.node_local = False
        nodes = self.nodes
        layered = Candidates()
        if names is None:
            layered.reasons = dict(cand.reasons)
            layered.reason_counts = dict(cand.reason_counts)
        else:
            for name in names:
                reasons = cand.reasons.get(name)
                if reasons is not None:
                    layered.set_reasons(name, reasons)
        fitting = []
        for name, score in cand.scores.items():
            node = nodes.get(name)
            if node is None or (names is not None and name not in names):
                continue
            reason = ssn.predicate(task, node)
            if reason:
                layered.set_reasons(name, [reason])
            else:
                layered.scores[name] = score
                fitting.append(node)
        return self._with_batch_scores(layered, task, fitting)

    def candidates(self, task: TaskInfo) -> Candidates:
        """The verdicts of every node for ``task``, brought up to date (for a cross-node task
        in a large cluster, of the nodes looked at until enough fit: ``_sampled``)."""
        cross_node = self.ssn.has_cross_node and self.ssn.cross_node(task)
        if cross_node and self.sampled_count is not None:
            return self._sampled(task, self.sampled_count)
        if not self.reuse:
            return self._fresh(task, self.nodes.values())
        if cross_node:
            if self.ssn.cross_node_layered(task):
                return self._layered(task)
            return self._fresh(task, self.nodes.values())
        return self._local(task)

    def _sampled(self, task: TaskInfo, wanted: int) -> Candidates:
        """Volcano's feasible-node sampling (``scheduler.api.feasible_nodes``) for a cross-node
        task: the nodes from the session's rotation onwards judged as ``_layered`` or
        ``_fresh`` would, until ``wanted`` fit; the batch scores are added over those. The
        same nodes are looked at with or without the speed layer (``reuse``)."""
        ssn, nodes = self.ssn, self.nodes
        found = Candidates()
        local: Candidates | None = None
        if self.reuse and ssn.cross_node_layered(task):
            ssn.node_local = True
            try:
                local = self._local(task)
            finally:
                ssn.node_local = False

        def fits(name: str) -> bool:
            node = nodes[name]
            if local is None:
                self._evaluate(found, task, node, None)
                return name in found.scores
            score = local.scores.get(name)
            if score is None:
                found.set_reasons(name, local.reasons.get(name) or [])
                return False
            reason = ssn.predicate(task, node)
            if reason:
                found.set_reasons(name, [reason])
                return False
            found.scores[name] = score
            return True

        fitting = search(self._node_names(), ssn.node_rotation, wanted, fits)
        return self._with_batch_scores(found, task, [nodes[n] for n in fitting])

    def _with_batch_scores(
        self, cand: Candidates, task: TaskInfo, fitting: list[NodeInfo]
    ) -> Candidates:
        """``cand`` with the batch scores of ``task`` over the nodes that fit added, and its
        heap built."""
        if fitting:
            for name, extra in self.ssn.batch_node_scores(task, fitting).items():
                if name in cand.scores:
                    cand.scores[name] += extra
        nodes = self.nodes
        cand.heap = [(-score, name, nodes[name].generation) for name, score in cand.scores.items()]
        heapq.heapify(cand.heap)
        return cand

    def _node_names(self) -> list[str]:
        """The candidate nodes' names in the session's order (the rotation's)."""
        if len(self._names) != len(self.nodes):
            self._names = list(self.nodes)
        return self._names

    def _local(self, task: TaskInfo) -> Candidates:
        """The verdicts of ``task``'s class, brought up to date."""
        cand, base = self._class(task)
        seen, nodes = cand.seen, self.nodes
        if cand.position < 0:
            for node in nodes.values():
                if seen.get(node.name) != node.generation:  # else seen by ``best_among``
                    self._evaluate(cand, task, node, base)
        else:
            for name in self.log[cand.position :]:
                changed = nodes.get(name)
                if changed is not None and seen.get(name) != changed.generation:
                    self._evaluate(cand, task, changed, base)
        cand.position = len(self.log)
        return cand

    def best_among(self, task: TaskInfo, names: frozenset[str]) -> str | None:
        """The best of the nodes ``names`` (a HyperNode's) for ``task`` (highest score, then
        name), or None when none fits. The class keeps a heap per node set, brought up to
        date from the change log as ``best``'s is, and the verdicts are the class's: a node
        is evaluated again only when it changed since the class last looked at it, whichever
        node set it was looked at for."""
        nodes = self.nodes
        if not self.reuse or (self.ssn.has_cross_node and self.ssn.cross_node(task)):
            if self.reuse and self.ssn.cross_node_layered(task):
                fresh = self._layered(task, names)
            else:
                fresh = self._fresh(task, (nodes[name] for name in names if name in nodes))
            ranked = [(-score, name) for name, score in fresh.scores.items()]
            return min(ranked)[1] if ranked else None
        cand, base = self._class(task)
        seen, scores, log = cand.seen, cand.scores, self.log
        view = cand.views.get(names)
        if view is None or len(log) - view.position > len(names):
            # New, or more changes to read than nodes to look at.
            view = cand.views[names] = NodeSetHeap()
            looked_at: Iterable[str] = names
        else:
            looked_at = (name for name in log[view.position :] if name in names)
        heap = view.heap
        for name in looked_at:
            node = nodes.get(name)
            if node is None:
                continue
            if seen.get(name) != node.generation:
                self._evaluate(cand, task, node, base)
            score = scores.get(name)
            if score is not None:
                heapq.heappush(heap, (-score, name, node.generation))
        view.position = len(log)
        while heap:
            _, name, generation = heap[0]
            if nodes[name].generation == generation:
                return name
            heapq.heappop(heap)
        return None

    def best(self, task: TaskInfo) -> tuple[str | None, Candidates]:
        """The best node for ``task`` (highest score, then name), or None when none fits."""
        cand = self.candidates(task)
        heap, nodes = cand.heap, self.nodes
        while heap:
            _, name, seen = heap[0]
            node = nodes.get(name)  # gone since an earlier session
            if node is not None and node.generation == seen:
                return name, cand
            heapq.heappop(heap)
        return None, cand
