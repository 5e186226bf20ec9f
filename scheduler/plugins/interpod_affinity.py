"""Inter-pod affinity in a session: what the predicates plugin's filter (``predicate.
PodAffinityEnable``) and the nodeorder plugin's batch score (``podaffinity.weight``) share.

The semantics are kube-scheduler's (``scheduler.api.pod_affinity``); this module ties them to
a session: one ``AffinityIndex`` per session, shared by both plugins (``open_state``), built
from the pods on the session's nodes on first use and kept current through the session's
allocate handler (allocated and pipelined pods count at once, evicted ones stop counting, a
discarded statement undoes both).

The placer reuses node verdicts across pods and sessions for pods whose verdicts read only
the pod and the node. A pod's inter-pod verdict reads other nodes' pods when the pod has
terms, or when some pod with terms (placed, or pending in this session) has a term naming it:
``cross_node`` says so for exactly those pods, and for every other pod the filter passes on
every node and the score is 0, so their reused verdicts stay exact. The claim is layered
(``Session.add_layered_cross_node_fn``): while the session asks for node-local verdicts
(``Session.node_local``) the filter passes (the score is a batch score, asked only over the
nodes that fit), so the placer takes a claimed pod's node-local verdicts from its class and
judges only the nodes that fit with the filter, whose counts the index keeps per domain. When
no pod of the session has a term, nothing is registered at all: a cluster without inter-pod
affinity pays one look per job that changed and per node that changed since the last session.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from caldera.api.core import Affinity
from scheduler.api.namespace_labels import NamespaceLabels
from scheduler.api.pod_affinity import (
    AffinityIndex,
    Judge,
    Member,
    PodTerms,
    has_pod_affinity,
    normalise,
    pod_terms,
    project,
)
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

# Where a pod on a node holds no place for inter-pod affinity (kube-scheduler counts the
# pods its cache has on the node; a pod being deleted is gone for Caldera's session).
_NOT_COUNTED = frozenset(
    {TaskStatus.RELEASING, TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.PENDING}
)
_JOB_MAP = "pod-affinity-tasks"
_NODE_MEMO = "pod-affinity-nodes"
_EMPTY: Mapping[str, str] = {}
_AFFINITY = operator.attrgetter("pod.spec.affinity")

# Whether the claim is layered (``claim_cross_node``); off only to compare decisions in tests.
LAYERED = True

_states: weakref.WeakKeyDictionary[Session, InterPodAffinity | None] = weakref.WeakKeyDictionary()


def _no_session() -> Session | None:
    return None


def node_labels(node: NodeInfo | None) -> Mapping[str, str]:
    if node is None or node.node is None:
        return _EMPTY
    return node.node.metadata.labels


def _pod_labels(task: TaskInfo) -> Mapping[str, str]:
    return task.pod.metadata.labels if task.pod is not None else _EMPTY


def _tasks_with_terms(tasks: Mapping[str, TaskInfo]) -> tuple[TaskInfo, ...]:
    # Asked of every pod of a job that changed and of every node that changed, in clusters
    # where most pods have no affinity at all: first whether any has one, without a Python
    # call per pod (an Affinity is true, None false).
    try:
        if not any(map(_AFFINITY, tasks.values())):
            return ()
    except AttributeError:  # a task without a pod
        pass
    return tuple(
        t
        for t in tasks.values()
        if t.pod is not None and t.pod.spec.affinity is not None and has_pod_affinity(t.pod)
    )


def _node_tasks_with_terms(ssn: Session) -> list[TaskInfo]:
    """The tasks with terms on the session's nodes, looked for again only on the nodes whose
    tasks changed since the last session (by their generation)."""
    nodes = ssn.nodes
    if not ssn.incremental.enabled:
        return [t for node in nodes.values() for t in _tasks_with_terms(node.tasks)]
    kept = ssn.cluster.derived.get(_NODE_MEMO)
    memo: dict[str, tuple[int, tuple[TaskInfo, ...]]] = kept[1] if kept is not None else {}
    found: list[TaskInfo] = []
    for name, node in nodes.items():
        hit = memo.get(name)
        if hit is None or hit[0] != node.generation:
            hit = memo[name] = (node.generation, _tasks_with_terms(node.tasks))
        if hit[1]:
            found.extend(hit[1])
    if len(memo) != len(nodes):  # nodes gone
        memo = {name: memo[name] for name in nodes}
    ssn.cluster.derived[_NODE_MEMO] = (None, memo)
    return found


def open_state(ssn: Session, plugin: str) -> InterPodAffinity | None:
    """The session's inter-pod affinity state, shared by the plugins asking; None when no
    pod of the session has an inter-pod term (then nothing needs judging)."""
    if ssn in _states:
        return _states[ssn]
    jobs = ssn.incremental.job_map(_JOB_MAP, lambda job: _tasks_with_terms(job.tasks), None)
    with_terms: dict[str, TaskInfo] = {}
    for tasks in jobs.values.values():
        for task in tasks:
            with_terms[task.key] = task
    for task in _node_tasks_with_terms(ssn):
        with_terms[task.key] = task
    state = (
        InterPodAffinity(ssn.nodes, list(with_terms.values()), ssn.cluster.namespace_labels)
        if with_terms
        else None
    )
    _states[ssn] = state
    if state is not None:
        state.session = weakref.ref(ssn)
        ssn.add_allocate_handler(plugin, state.allocated, state.deallocated)
    return state


def claim_cross_node(ssn: Session, plugin: str, state: InterPodAffinity) -> None:
    """Register the state's cross-node claim for ``plugin``: layered (``LAYERED``), so that
    the placer takes a claimed pod's node-local verdicts from its class and judges only the
    nodes that fit; else judged afresh on every node."""
    if LAYERED:
        ssn.add_layered_cross_node_fn(plugin, state.cross_node)
    else:
        ssn.add_cross_node_fn(plugin, state.cross_node)


class InterPodAffinity:
    """One session's inter-pod affinity: the filter, the batch score and the cross-node
    claim, over an index built on first use."""

    def __init__(
        self,
        nodes: Mapping[str, NodeInfo],
        with_terms: Sequence[TaskInfo],
        namespaces: NamespaceLabels | None = None,
    ) -> None:
        # The session's nodes, not the session: the state lives as long as the session does
        # (``_states`` forgets it with the session, which a reference back would prevent).
        self.nodes = nodes
        # The namespaces' labels as of the session (None: not known), which resolve the
        # terms' namespaceSelectors: once per pod template per session (``terms``).
        self.namespaces = namespaces
        self._index: AffinityIndex | None = None
        # Each pod with terms' terms, by (namespace, the Affinity's identity): pods of one
        # template share their Affinity (the informer cache interns equal values). The
        # Affinity is kept alongside, so that its identity is not reused within the session.
        self._terms: dict[tuple[str, int, bool], tuple[Affinity, PodTerms | None]] = {}
        self._claimed: dict[str, bool] = {}  # by task key
        self._judges: dict[str, Judge] = {}  # by task key, for the pods judged cross-node
        self._claimed_class: dict[tuple[str, frozenset[tuple[str, str]]], bool] = {}
        self._term_sets = [
            terms
            for task in with_terms
            if (terms := self.terms(task, placed=task.status not in _NOT_COUNTED)) is not None
        ]
        # The label keys those terms read: pods equal on them are claimed alike.
        self._label_keys = sorted({key for terms in self._term_sets for key in terms.label_keys()})
        # The session (weakly: ``_states`` forgets the state with it), for ``node_local``.
        self.session: Callable[[], Session | None] = _no_session

    def terms(self, task: TaskInfo, *, placed: bool = False) -> PodTerms | None:
        pod = task.pod
        if pod is None or pod.spec.affinity is None:
            return None
        affinity = pod.spec.affinity
        key = (task.namespace, id(affinity), placed)
        hit = self._terms.get(key)
        if hit is None:
            hit = self._terms[key] = (
                affinity,
                pod_terms(pod, placed=placed, namespaces=self.namespaces),
            )
        return hit[1]

    @property
    def index(self) -> AffinityIndex:
        if self._index is None:
            index = AffinityIndex()
            for node in self.nodes.values():
                for task in node.tasks.values():
                    if task.status not in _NOT_COUNTED:
                        index.add(task.key, self._member(task, node))
            self._index = index
        return self._index

    def _member(self, task: TaskInfo, node: NodeInfo | None) -> Member:
        return Member(
            task.namespace, _pod_labels(task), node_labels(node), self.terms(task, placed=True)
        )

    # ---- allocate handler -------------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        """A task allocated or pipelined on its node (or an eviction undone): it counts."""
        if self._index is not None and task.node_name:
            self._index.add(task.key, self._member(task, self.nodes.get(task.node_name)))

    def deallocated(self, task: TaskInfo) -> None:
        """A task taken back or evicted: it no longer counts."""
        if self._index is not None:
            self._index.remove(task.key)

    # ---- callbacks ----------------------------------------------------------------------------

    def cross_node(self, task: TaskInfo) -> bool:
        """Whether the task's inter-pod verdict reads other nodes: it has terms, or a pod of
        the session with terms names it."""
        claimed = self._claimed.get(task.key)
        if claimed is None:
            claimed = self._claimed[task.key] = self._claims(task)
        return claimed

    def _claims(self, task: TaskInfo) -> bool:
        if has_pod_affinity(task.pod):
            return True
        seen = project(_pod_labels(task), self._label_keys)
        key = (task.namespace, seen)
        claimed = self._claimed_class.get(key)
        if claimed is None:
            labels = dict(seen)
            claimed = self._claimed_class[key] = any(
                term.matches(task.namespace, labels)
                for terms in self._term_sets
                for term in terms.all_terms()
            )
        return claimed

    def _judge(self, task: TaskInfo) -> Judge:
        judge = self._judges.get(task.key)
        if judge is None:
            judge = self._judges[task.key] = self.index.judge(
                task.namespace, _pod_labels(task), self.terms(task)
            )
        return judge

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """kube-scheduler's InterPodAffinity filter (``scheduler.api.pod_affinity``); passes
        while the session asks for node-local verdicts (``Session.node_local``)."""
        if not self.cross_node(task):
            return None
        ssn = self.session()
        if ssn is not None and ssn.node_local:
            return None
        node_object = node.node
        return self._judge(task).reason(
            node_object.metadata.labels if node_object is not None else _EMPTY
        )

    def scores(self, task: TaskInfo, nodes: Sequence[NodeInfo], weight: float) -> dict[str, float]:
        """kube-scheduler's InterPodAffinity scores over ``nodes``, normalised to 0-100,
        times ``weight``; empty when every node scores 0."""
        if not nodes or not self.cross_node(task):
            return {}
        raw = self._judge(task).raw_scores((node.name, node_labels(node)) for node in nodes)
        if raw is None:
            return {}
        return {name: score * weight for name, score in normalise(raw).items() if score}
