"""Admission of Volcano Queues: defaulting (`mutate_queue`) and validation (`validate_queue`),
as Volcano's pkg/webhooks/admission/queues/ does.

Every message starts with the field it is about. Deliberate differences from Volcano:
- a guarantee must be within `deserved` only when the queue sets `deserved` (a queue of the
  proportion plugin sets guarantee alone);
- a parent named `root` that the cache does not hold yet is accepted: the scheduler creates root
  at start-up, so a fresh cluster can take queues before it;
- a parent chain that would form a cycle is refused;
- messages follow Volcano v1.13's wording after the field path (scripts match on it); rules
  Volcano added later (depth, self parent, hierarchical resources) use its newer wording, with
  amounts written as quantities. docs/webhook.md lists what remains different.

Functions over models and a `ClusterView`. An import-linter contract keeps this module free of I/O
(docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from caldera.api.fielderrors import invalid, quantity_errors
from caldera.api.meta import ResourceList
from caldera.api.quantity import QuantityError, format_milli
from caldera.api.resources import to_milli
from caldera.api.volcano import (
    DEFAULT_QUEUE,
    HIERARCHY_KEY,
    HIERARCHY_WEIGHTS_KEY,
    ROOT_QUEUE,
    Queue,
    QueueState,
)
from webhooks.admission import Operation, PatchOp, add, escape_pointer
from webhooks.view import ClusterView, queue_parent

__all__ = ["QueueRules", "mutate_queue", "validate_queue"]

_ALLOWED_STATES: Final = ("", QueueState.OPEN.value, QueueState.CLOSED.value)


@dataclass(frozen=True, slots=True)
class QueueRules:
    """The queue webhook's options (Volcano's flags of the same meaning)."""

    max_depth: int = 5
    """--max-queue-depth: levels below root a queue may sit at."""
    root_protection: bool = True
    """--enable-root-queue-protection: root's capability, deserved and guarantee are immutable."""


def mutate_queue(queue: Queue, *, has_spec: bool = True) -> list[PatchOp]:
    """The JSON patch that completes a new queue: reclaimable true, weight 1, and a legacy
    hierarchy annotation rooted at `root`."""
    ops: list[PatchOp] = []
    ann = queue.metadata.annotations
    hierarchy, weights = ann.get(HIERARCHY_KEY), ann.get(HIERARCHY_WEIGHTS_KEY)
    if hierarchy and weights and not hierarchy.startswith(ROOT_QUEUE):
        prefix = "/metadata/annotations/"
        ops.append(add(prefix + escape_pointer(HIERARCHY_KEY), f"{ROOT_QUEUE}/{hierarchy}"))
        ops.append(add(prefix + escape_pointer(HIERARCHY_WEIGHTS_KEY), f"1/{weights}"))
    if not has_spec:
        ops.append(add("/spec", {"reclaimable": True, "weight": 1}))
        return ops
    if queue.spec.reclaimable is None:
        ops.append(add("/spec/reclaimable", True))
    if queue.spec.weight == 0:
        ops.append(add("/spec/weight", 1))
    return ops


def _milli(resources: ResourceList) -> dict[str, int]:
    return {name: to_milli(name, value) for name, value in resources.items()}


def _exceeding(small: Mapping[str, int], big: Mapping[str, int]) -> list[str]:
    """Resources listed in both where `small` is greater than `big`."""
    return [r for r, v in small.items() if r in big and v > big[r]]


def _hierarchy_errors(queue: Queue, others: Iterable[Queue]) -> list[str]:
    ann = queue.metadata.annotations
    hierarchy, weights = ann.get(HIERARCHY_KEY), ann.get(HIERARCHY_WEIGHTS_KEY)
    if not hierarchy or not weights:
        return []
    path = f"metadata.annotations[{HIERARCHY_KEY}]"
    wpath = f"metadata.annotations[{HIERARCHY_WEIGHTS_KEY}]"
    paths, ws = hierarchy.split("/"), weights.split("/")
    if len(paths) != len(ws):
        detail = f"{HIERARCHY_KEY} must have the same length with {HIERARCHY_WEIGHTS_KEY}"
        return [invalid(path, hierarchy, detail)]
    for w in ws:
        try:
            value = float(w)
        except ValueError:
            # Go's strconv.ParseFloat error, as Volcano prints it.
            detail = f'{w} in the {weights} is invalid number: strconv.ParseFloat: parsing "{w}": '
            return [invalid(wpath, weights, detail + "invalid syntax")]
        if not value > 0:
            return [invalid(wpath, weights, f"{w} in the {weights} must be larger than 0")]
    for other in others:
        if other.metadata.name == queue.metadata.name:
            continue
        theirs = other.metadata.annotations.get(HIERARCHY_KEY)
        if not theirs:
            continue
        if theirs.startswith(hierarchy + "/") or hierarchy.startswith(theirs + "/"):
            return [
                f"{path}: {hierarchy} is not allowed to be in the sub path of {theirs} "
                f"of queue {other.metadata.name}"
            ]
    return []


def _ancestors(start: str, cluster: ClusterView, limit: int) -> tuple[list[str], bool]:
    """Names from `start` up the parent chain (at most `limit` + 2), and whether it loops."""
    chain: list[str] = []
    name = start
    while name and len(chain) <= limit + 1:
        if name in chain:
            return chain, True
        chain.append(name)
        q = cluster.queue(name)
        if q is None:
            break
        name = queue_parent(q)
    return chain, False


def _parent_errors(queue: Queue, cluster: ClusterView, rules: QueueRules) -> list[str]:
    name, parent = queue.metadata.name, queue_parent(queue)
    if not parent:
        return []
    if parent == name:
        return [f"spec.parent: queue {name} cannot use itself as parent"]
    parent_q = cluster.queue(parent)
    if parent_q is None:
        if parent == ROOT_QUEUE:
            return []
        return [
            f"spec.parent: failed to get parent queue of queue {name}: "
            f'queue.scheduling.volcano.sh "{parent}" not found'
        ]
    chain, loops = _ancestors(parent, cluster, rules.max_depth)
    if loops or name in chain:
        return [f"spec.parent: making {parent} the parent of {name} would form a cycle"]
    # The chain ends at root (depth 0) or at a queue whose own parent is root.
    depth = len(chain) if chain[-1] == ROOT_QUEUE else len(chain) + 1
    if depth > rules.max_depth:
        return [
            f"spec.parent: queue {name} exceeds the maximum allowed depth of {rules.max_depth} "
            f"(it would be at depth {depth})"
        ]
    siblings = [q for q in cluster.child_queues(parent) if q.metadata.name != name]
    allocated = {r: v for r, v in _milli_safe(parent_q.status.allocated).items() if v > 0}
    if not siblings and allocated:
        # Volcano counts allocated pods; any allocated resource means a job runs there.
        pods = allocated.get("pods", 0) // 1000
        return [
            f"spec.parent: queue {parent} cannot be the parent queue of queue {name} because it "
            f"has allocated Pods: {pods} (allocated resources {sorted(allocated)}; only leaf "
            "queues run jobs)"
        ]
    return []


def _milli_safe(resources: ResourceList) -> dict[str, int]:
    out = {}
    for name, value in resources.items():
        try:
            out[name] = to_milli(name, value)
        except QuantityError:
            continue
    return out


def _amounts(amounts: Mapping[str, int]) -> str:
    """``cpu 6, memory 4Gi``: amounts as quantities (Volcano prints its internal floats)."""
    return ", ".join(f"{r} {format_milli(v, r)}" for r, v in sorted(amounts.items())) or "none"


def _sum_errors(prefix: str, parent_q: Queue, children: Iterable[Queue]) -> list[str]:
    """Volcano's ``validateSiblingsSum`` and ``validateChildrenConstraints``: the children's
    guarantees and deserved amounts add up to at most the parent's, a resource the parent does
    not set counting as 0 (a parent without a guarantee has none to share out)."""

    def guarantee(q: Queue) -> ResourceList:
        return q.spec.guarantee.resource

    def deserved(q: Queue) -> ResourceList:
        return q.spec.deserved

    errors = []
    members = list(children)
    for field, of in (("guarantee.resource", guarantee), ("deserved", deserved)):
        limit = _milli_safe(of(parent_q))
        total: dict[str, int] = {}
        for child in members:
            for r, v in _milli_safe(of(child)).items():
                if r != "pods":  # Volcano counts pods apart, never against a limit
                    total[r] = total.get(r, 0) + v
        if any(v > limit.get(r, 0) for r, v in total.items()):
            name = field.split(".")[0]
            errors.append(
                f"spec.{field}: {prefix} {parent_q.metadata.name} validation failed: sum of "
                f"children's {name} ({_amounts(total)}) exceeds parent's {name} limit "
                f"({_amounts(limit)})"
            )
    return errors


def _hierarchy_resource_errors(queue: Queue, cluster: ClusterView) -> list[str]:
    """Volcano's ``validateHierarchicalQueueResources``, with its messages after the field."""
    name, parent = queue.metadata.name, queue_parent(queue)
    errors: list[str] = []
    capability = _milli(queue.spec.capability)
    # Child capability <= the nearest ancestor's capability, per resource.
    chain, _ = _ancestors(parent, cluster, 64)
    for resource, value in capability.items():
        for ancestor in chain:
            aq = cluster.queue(ancestor)
            if aq is None or resource not in aq.spec.capability:
                continue
            limit = _milli_safe(aq.spec.capability).get(resource)
            if limit is not None and value > limit:
                errors.append(
                    f"spec.capability.{resource}: queue {name} capability[{resource}]="
                    f"{format_milli(value, resource)} exceeds its ancestor's capability="
                    f"{format_milli(limit, resource)}"
                )
            break
    # The siblings' (this queue's included) guarantee and deserved within the parent's; root's
    # children are not held to root's (root is the cluster).
    parent_q = cluster.queue(parent) if parent and parent != ROOT_QUEUE else None
    if parent_q is not None:
        siblings = [q for q in cluster.child_queues(parent) if q.metadata.name != name]
        errors += _sum_errors("parent queue", parent_q, [*siblings, queue])
    # As a parent: its capability covers its whole subtree, and its guarantee and deserved
    # cover its children's.
    children = [c for c in cluster.child_queues(name) if c.metadata.name != name]
    if capability:
        subtree_max: dict[str, int] = {}
        stack, seen = [name], {name}
        while stack:
            for child in cluster.child_queues(stack.pop()):
                cname = child.metadata.name
                if cname in seen:
                    continue
                seen.add(cname)
                stack.append(cname)
                for r, v in _milli_safe(child.spec.capability).items():
                    subtree_max[r] = max(subtree_max.get(r, v), v)
        for r, limit in capability.items():
            if r in subtree_max and limit < subtree_max[r]:
                errors.append(
                    f"spec.capability.{r}: queue {name} capability[{r}]="
                    f"{format_milli(limit, r)} is smaller than its descendants' max capability="
                    f"{format_milli(subtree_max[r], r)}"
                )
    if children:
        errors += _sum_errors("queue", queue, children)
    return errors


def _validate_create_update(
    queue: Queue, old: Queue | None, cluster: ClusterView, rules: QueueRules
) -> list[str]:
    spec = queue.spec
    lists = (
        ("spec.capability", spec.capability),
        ("spec.deserved", spec.deserved),
        ("spec.guarantee.resource", spec.guarantee.resource),
    )
    # Volcano's queue webhook only parses these, and names an entry `spec.capability.cpu`.
    errors = [
        e for path, res in lists for e in quantity_errors(path, res, container=False, dotted=True)
    ]
    if spec.weight <= 0:
        errors.append(
            invalid("spec.weight", spec.weight, "queue weight must be a positive integer")
        )
    if queue.status.state not in _ALLOWED_STATES:
        errors.append(
            invalid("status.state", queue.status.state, "queue state must be in [Open Closed]")
        )
    errors += _hierarchy_errors(queue, cluster.queues())
    if errors:
        return errors  # the resource checks below need valid quantities
    guarantee, deserved = _milli(spec.guarantee.resource), _milli(spec.deserved)
    capability = _milli(spec.capability)
    # Volcano v1.13's wording (validateResourceOfQueue), which scripts match on.
    for r in _exceeding(deserved, capability):
        errors.append(
            invalid(
                f"spec.deserved.{r}",
                spec.deserved[r],
                "deserved should less equal than capability",
            )
        )
    for r in _exceeding(guarantee, capability):
        errors.append(
            invalid(
                f"spec.guarantee.resource.{r}",
                spec.guarantee.resource[r],
                "guarantee should less equal than capability",
            )
        )
    if deserved:
        for r, v in guarantee.items():
            if r not in deserved or v > deserved[r]:
                errors.append(
                    invalid(
                        f"spec.guarantee.resource.{r}",
                        spec.guarantee.resource[r],
                        "guarantee should less equal than deserved",
                    )
                )
    name = queue.metadata.name
    if old is not None and name == ROOT_QUEUE and rules.root_protection:
        for field, a, b in (
            ("capability", old.spec.capability, spec.capability),
            ("deserved", old.spec.deserved, spec.deserved),
            ("guarantee", old.spec.guarantee, spec.guarantee),
        ):
            if a != b:
                errors.append(
                    f"spec.{field}: root queue's resource attributes (capability, deserved, "
                    "guarantee) cannot be modified"
                )
    if name != ROOT_QUEUE and (old is None or queue_parent(old) != queue_parent(queue)):
        errors += _parent_errors(queue, cluster, rules)
    if not errors and name != ROOT_QUEUE:
        errors += _hierarchy_resource_errors(queue, cluster)
    return errors


def validate_queue(
    operation: str,
    queue: Queue | None,
    old: Queue | None,
    *,
    cluster: ClusterView,
    rules: QueueRules,
) -> str:
    """Why a queue change is refused, or "" when it is admitted.

    `queue` is the new object (CREATE, UPDATE), `old` the stored one (UPDATE, DELETE).
    """
    if operation == Operation.DELETE:
        if old is None:
            return ""
        name = old.metadata.name
        if name in (DEFAULT_QUEUE, ROOT_QUEUE):
            return f"`{name}` queue can not be deleted"
        children = cluster.child_queues(name)
        if children:
            shown = ", ".join(sorted(c.metadata.name for c in children))
            return (
                f"queue {name} can not be deleted because it has {len(children)} child queues: "
                f"{shown}"
            )
        return ""
    if queue is None:
        return ""
    return "; ".join(_validate_create_update(queue, old, cluster, rules))
