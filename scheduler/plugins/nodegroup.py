"""nodegroup: a queue's pods go to the node groups its ``spec.affinity`` names (Volcano's
plugin, pkg/scheduler/plugins/nodegroup).

A node's group is its label ``volcano.sh/nodegroup-name``. A queue's
``spec.affinity.nodeGroupAffinity`` and ``nodeGroupAntiAffinity`` each list groups
``requiredDuringSchedulingIgnoredDuringExecution`` and
``preferredDuringSchedulingIgnoredDuringExecution``.

Predicate, as Volcano decides it (every rejection is unresolvable: evicting pods cannot help):

- a node without the label fits only with ``strict: false`` and a queue without affinity
  ("node group label not found");
- a labelled node never fits a queue without affinity ("node group affinity not specified");
- a labelled node fits when its group is required or preferred, and not required-anti;
  preferred-anti lets it fit whatever the rest says ("node does not satisfy the node group
  affinity");
- the queue's annotation ``volcano.sh/nodegroup-resource-limits`` (JSON: group -> resource
  list) caps what the queue's allocated pods may request in each group it names, in the
  resources it names ("node group resource limit exceeded"); an annotation that does not parse
  rejects every node for the queue ("node group resource limit annotation invalid").

Score: 100 for a required group, plus 50 for a preferred one (with ``enablePreferredOrder``:
50 * (n - i) / n for the i-th of n preferred groups); -1 for a preferred-anti group; 0 for a
node without the label.

Arguments: ``strict`` (true), ``enablePreferredOrder`` (false); the plugin switch
``enableHierarchy`` (false): a queue without ``spec.affinity`` takes that of its nearest
ancestor that has one (``spec.parent``, ``root`` when empty).

Speed: the plugin's verdicts depend on the pod, the node, and its queue's affinity and
limits state only, which it offers as a node class (``Speedups.node_class``), so the placer
keeps reusing node verdicts with it configured. Its verdict is an overlay
(``Speedups.node_overlay``): queues of different affinities split pods into classes, and these
share the rest of each node's verdict, their own applied on top
(``scheduler.actions.verdict_split``).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from caldera.api.quantity import QuantityError
from caldera.api.resources import Resources
from caldera.api.volcano import NODEGROUP_NAME_KEY, NODEGROUP_RESOURCE_LIMITS_KEY, QueueAffinity
from scheduler.api.types import ALLOCATED_STATUSES, NodeInfo, QueueInfo, TaskInfo
from scheduler.framework.incremental import NodeClassFn, Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import NodeOrderFn, PredicateFn, Session

HIERARCHY_SWITCH = "enableHierarchy"
ROOT_QUEUE = "root"
BASE_SCORE = 100.0
# Volcano's reasons (pkg/scheduler/plugins/nodegroup/errors.go).
AFFINITY_NOT_FOUND = "node group affinity not specified"
LABEL_NOT_FOUND = "node group label not found"
UNSATISFIED = "node does not satisfy the node group affinity"
LIMIT_INVALID = "node group resource limit annotation invalid"
LIMIT_EXCEEDED = "node group resource limit exceeded"
JOB_NOT_FOUND = "job not found in session"


@dataclass(frozen=True, slots=True)
class GroupAffinity:
    """A queue's node-group affinity, as sets (hashable: it is part of a node class)."""

    required: frozenset[str] = frozenset()
    preferred: tuple[str, ...] = ()  # in the queue's order (enablePreferredOrder reads it)
    anti_required: frozenset[str] = frozenset()
    anti_preferred: frozenset[str] = frozenset()

    @classmethod
    def of(cls, affinity: QueueAffinity) -> GroupAffinity:
        pro, anti = affinity.node_group_affinity, affinity.node_group_anti_affinity
        preferred: dict[str, None] = {}
        if pro is not None:
            preferred = dict.fromkeys(pro.preferred_during_scheduling_ignored_during_execution)
        return cls(
            required=frozenset(pro.required_during_scheduling_ignored_during_execution)
            if pro is not None
            else frozenset(),
            preferred=tuple(preferred),
            anti_required=frozenset(anti.required_during_scheduling_ignored_during_execution)
            if anti is not None
            else frozenset(),
            anti_preferred=frozenset(anti.preferred_during_scheduling_ignored_during_execution)
            if anti is not None
            else frozenset(),
        )

    def is_empty(self) -> bool:
        return not (self.required or self.preferred or self.anti_required or self.anti_preferred)

    def allows(self, group: str) -> bool:
        """Volcano's queueGroupAffinity.predicate: anti-required overrides affinity, and
        anti-preferred (checked last) lets the group in again."""
        allowed = group in self.required or group in self.preferred
        if group in self.anti_required:
            allowed = False
        if group in self.anti_preferred:
            allowed = True
        return allowed

    def score(self, group: str, preferred_order: bool) -> float:
        """Volcano's queueGroupAffinity.score."""
        score = BASE_SCORE if group in self.required else 0.0
        if group in self.preferred:
            if preferred_order:
                n = len(self.preferred)
                score += 0.5 * BASE_SCORE * (n - self.preferred.index(group)) / n
            else:
                score += 0.5 * BASE_SCORE
        if group in self.anti_preferred:
            score = -1.0
        return score


def own_affinity(queue: QueueInfo) -> GroupAffinity | None:
    """The queue's own affinity; None when its spec has none (an empty ``affinity: {}`` is an
    affinity, with no groups, as in Volcano)."""
    if queue.queue is None or queue.queue.spec.affinity is None:
        return None
    return GroupAffinity.of(queue.queue.spec.affinity)


def resolve_affinities(
    queues: Mapping[str, QueueInfo], hierarchy: bool
) -> dict[str, GroupAffinity | None]:
    """Each queue's affinity; with ``hierarchy``, a queue without one takes its nearest
    ancestor's (a parent that does not exist, or a cycle, ends the walk)."""
    own = {name: own_affinity(queue) for name, queue in queues.items()}
    if not hierarchy:
        return own
    resolved: dict[str, GroupAffinity | None] = {}
    for name in queues:
        found, seen, current = own[name], {name}, name
        while found is None and current != ROOT_QUEUE:
            parent = queues[current].parent or ROOT_QUEUE
            if parent in seen or parent not in queues:
                break
            seen.add(parent)
            found, current = own[parent], parent
        resolved[name] = found
    return resolved


def parse_limits(raw: str) -> dict[str, Resources]:
    """The annotation ``volcano.sh/nodegroup-resource-limits``: a JSON object of group ->
    resource list. Raises ValueError naming the annotation and what is wrong."""
    try:
        decoded = json.loads(raw)
    except ValueError as err:
        raise ValueError(f"annotation {NODEGROUP_RESOURCE_LIMITS_KEY}: {err}") from None
    if not isinstance(decoded, dict):
        raise ValueError(
            f"annotation {NODEGROUP_RESOURCE_LIMITS_KEY}: must be an object of node group to "
            "resource list"
        )
    limits: dict[str, Resources] = {}
    for group, listed in decoded.items():
        if not isinstance(listed, dict) or not all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in listed.values()
        ):
            raise ValueError(
                f"annotation {NODEGROUP_RESOURCE_LIMITS_KEY}: group {group!r} must map "
                "resource names to quantities"
            )
        try:
            limits[group] = Resources.from_list(listed)
        except QuantityError as err:
            raise ValueError(
                f"annotation {NODEGROUP_RESOURCE_LIMITS_KEY}: group {group!r}: {err}"
            ) from None
    return limits


def exceeded_names(used: Resources, limit: Resources) -> list[str]:
    """The resources ``limit`` names that ``used`` goes beyond."""
    return [name for name, cap in limit.items() if used.get(name) > cap]


def node_group(node: NodeInfo) -> str | None:
    if node.node is None:
        return None
    return node.node.metadata.labels.get(NODEGROUP_NAME_KEY)


@dataclass(slots=True)
class QueueLimits:
    """A queue's node-group limits and what its allocated pods request in each limited group,
    kept current by the allocate handler."""

    limits: dict[str, Resources]
    allocated: dict[str, Resources]

    def add(self, group: str, request: Resources) -> None:
        if group in self.limits:
            self.allocated[group] = self.allocated.get(group, Resources()) + request

    def sub(self, group: str, request: Resources) -> None:
        if group in self.allocated:
            self.allocated[group] = self.allocated[group] - request

    def fits(self, group: str, request: Resources) -> bool:
        limit = self.limits.get(group)
        if limit is None:
            return True
        used = self.allocated.get(group, Resources()) + request
        return not exceeded_names(used, limit)

    def state(self) -> Hashable:
        return tuple(sorted(self.allocated.items()))


class NodeGroupPlugin:
    """Keeps a queue's pods on (or off) the node groups its affinity names."""

    name = "nodegroup"

    def __init__(self, arguments: Arguments) -> None:
        self.strict = arguments.boolean("strict", True)
        self.preferred_order = arguments.boolean("enablePreferredOrder", False)
        self.affinity: dict[str, GroupAffinity | None] = {}
        self.limits: dict[str, QueueLimits] = {}
        self.invalid: dict[str, str] = {}  # queue -> why its limits annotation is invalid

    def on_session_open(self, ssn: Session) -> None:
        hierarchy = ssn.plugin_switch(self.name, HIERARCHY_SWITCH, False)
        self.affinity = resolve_affinities(ssn.queues, hierarchy)
        self._read_limits(ssn)
        ssn.add_predicate_fn(self.name, self.predicate_of(ssn))
        ssn.add_node_order_fn(self.name, self.score_of(ssn))
        if self.limits:
            ssn.add_allocate_handler(
                self.name,
                lambda task: self._track(ssn, task, +1),
                lambda task: self._track(ssn, task, -1),
            )
        # Its predicate and score are a few lookups: asked again per class on top of the
        # rest of a verdict, which the classes of the queues' affinities then share.
        ssn.add_speedups(self.name, Speedups(node_class=self.node_class_of(ssn), node_overlay=True))

    def on_session_close(self, ssn: Session) -> None:
        self.affinity, self.limits, self.invalid = {}, {}, {}

    def _read_limits(self, ssn: Session) -> None:
        """Parse the queues' limit annotations and sum what each limited queue's allocated
        pods request per group (only those queues: no walk when no queue has limits)."""
        for name, queue in ssn.queues.items():
            if queue.queue is None:
                continue
            raw = queue.queue.metadata.annotations.get(NODEGROUP_RESOURCE_LIMITS_KEY, "")
            if not raw:
                continue
            try:
                self.limits[name] = QueueLimits(parse_limits(raw), {})
            except ValueError as err:
                # Volcano logs it; the pods' fit errors name it (LIMIT_INVALID).
                self.invalid[name] = str(err)
        if not self.limits:
            return
        for job in ssn.jobs.values():
            kept = self.limits.get(job.queue)
            if kept is None:
                continue
            for task in job.tasks_in(*ALLOCATED_STATUSES):
                group = self._group_of(ssn, task)
                if group is not None:
                    kept.add(group, task.resreq)

    def _group_of(self, ssn: Session, task: TaskInfo) -> str | None:
        node = ssn.nodes.get(task.node_name) if task.node_name else None
        return None if node is None else node_group(node)

    def _track(self, ssn: Session, task: TaskInfo, sign: int) -> None:
        job = ssn.jobs.get(task.job)
        kept = self.limits.get(job.queue) if job is not None else None
        group = self._group_of(ssn, task) if kept is not None else None
        if kept is None or group is None:
            return
        if sign > 0:
            kept.add(group, task.resreq)
        else:
            kept.sub(group, task.resreq)

    def predicate_of(self, ssn: Session) -> PredicateFn:
        jobs, affinity, limits, invalid = ssn.jobs, self.affinity, self.limits, self.invalid
        strict = self.strict

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            job = jobs.get(task.job)
            if job is None:
                return JOB_NOT_FOUND
            queue = job.queue
            if queue in invalid:
                return LIMIT_INVALID
            wanted = affinity.get(queue)
            unset = wanted is None or wanted.is_empty()
            group = node_group(node)
            if group is None:
                return None if not strict and unset else LABEL_NOT_FOUND
            if wanted is None or unset:
                return AFFINITY_NOT_FOUND
            if not wanted.allows(group):
                return UNSATISFIED
            kept = limits.get(queue)
            if kept is not None and not kept.fits(group, task.resreq):
                return LIMIT_EXCEEDED
            return None

        return predicate

    def score_of(self, ssn: Session) -> NodeOrderFn:
        jobs, affinity, preferred_order = ssn.jobs, self.affinity, self.preferred_order

        def score(task: TaskInfo, node: NodeInfo) -> float:
            group = node_group(node)
            job = jobs.get(task.job)
            if group is None or job is None:
                return 0.0
            wanted = affinity.get(job.queue)
            return 0.0 if wanted is None else wanted.score(group, preferred_order)

        return score

    def node_class_of(self, ssn: Session) -> NodeClassFn:
        """What the verdicts read beyond the pod and the node: the queue's affinity, whether
        its limits are invalid, and its limited groups' allocations (which the allocate
        handler changes, so a new allocation in a limited group makes a new class)."""
        jobs, affinity, limits, invalid = ssn.jobs, self.affinity, self.limits, self.invalid

        def node_class(task: TaskInfo) -> Hashable:
            job = jobs.get(task.job)
            if job is None:
                return task.job  # the predicate rejects every node for it
            queue = job.queue
            kept = limits.get(queue)
            if kept is None and queue not in invalid:
                return affinity.get(queue)
            return (affinity.get(queue), queue in invalid, queue, kept and kept.state())

        return node_class
