"""Dynamic Resource Allocation in a session: which nodes can give a pod the devices its
ResourceClaims ask for, and which devices it gets (kube-scheduler's DynamicResources plugin,
which Volcano's predicates plugin embeds behind ``predicate.DynamicResourceAllocationEnable``;
here the predicates plugin runs this one under the same argument, docs/dra.md).

Per session:

- the inventory of devices (``scheduler.api.dra.inventory``), kept across sessions while the
  ResourceSlices are the same (``DraView.slices_version``);
- the devices taken: those of every allocated claim, then what this session allocates. A
  device is never taken twice: the allocator only picks free ones, and the allocate handler
  takes what the predicate found;
- the predicate: the pod's claims are known and allocatable by Caldera (``refusal``: an
  unsupported feature is a reason, never ignored), allocated claims are usable from the node
  (their ``nodeSelector``, at most 256 consumers), and the allocator finds devices for the
  others among those the node reaches. A failure names the claim and request; the first one of
  a job in a session is also noted with its node for the wait record;
- the allocate and deallocate handlers stage allocations and reservations in the session and
  drop them again: a statement that is discarded (a gang that does not fit) leaves nothing,
  and an evicted victim's claims free their devices once no one else uses them;
- at close, the claims of every pod bound get their writes (``ClaimPlan``): the allocation
  when the session made it, and the pod's ``reservedFor`` entry. The process writes them
  before the bind (``scheduler.claim_writer``).

Verdicts about a pod with claims read more than the pod and the node; the placer keys them by
``scheduler.api.dra.view.claims_class`` and keeps them for one session only
(``scheduler.actions.placer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Final

from caldera.api.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from caldera.api.dra import (
    RESERVED_FOR_MAX,
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from scheduler.api.dra.allocator import (
    Alternative,
    Candidate,
    Chosen,
    ClaimToAllocate,
    CounterKey,
    DeviceId,
    Failure,
    allocate,
    alternatives,
)
from scheduler.api.dra.cel import Selector, SelectorError, compile_selector, matches
from scheduler.api.dra.inventory import Inventory, build_inventory
from scheduler.api.dra.view import ClaimPlan, DraView, has_claims, pod_claims, refusal
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus
from scheduler.plugins.predicates import node_labels, term_matches
from scheduler.why import DETAIL

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_SELECTORS: dict[str, Selector | SelectorError] = {}  # compiled, by expression
_MAX_SELECTORS: Final = 4096


def compiled(expression: str) -> Selector:
    """The compiled selector (kept process-wide: expressions repeat across sessions), or the
    ``SelectorError`` raised again."""
    found = _SELECTORS.get(expression)
    if found is None:
        try:
            found = compile_selector(expression)
        except SelectorError as exc:
            found = exc
        if len(_SELECTORS) >= _MAX_SELECTORS:
            _SELECTORS.clear()
        _SELECTORS[expression] = found
    if isinstance(found, SelectorError):
        raise found
    return found


@dataclass(slots=True)
class ClaimUse:
    """A claim's state in the session: its devices when allocated, who uses it."""

    claim: ResourceClaim
    chosen: tuple[Chosen, ...] | None = None  # None: not allocated
    node: str | None = None  # the node its devices tie it to (a session allocation)
    selector: NodeSelector | None = None  # an allocation's nodeSelector (from its status)
    allocated_before: bool = False  # allocated in its status when the session began
    status_users: frozenset[str] = frozenset()  # reservedFor pod uids when the session began
    users: set[str] = field(default_factory=set)
    staged_by: str | None = None  # the task whose allocation of it this session made
    freed: bool = False  # its status allocation's devices were given back (victims gone)


def _node_name_selector(node: str) -> NodeSelector:
    requirement = NodeSelectorRequirement(key="metadata.name", operator="In", values=(node,))
    return NodeSelector(node_selector_terms=(NodeSelectorTerm(match_fields=(requirement,)),))


def _selects(selector: NodeSelector, node: NodeInfo) -> bool:
    labels = node_labels(node)
    return any(term_matches(t, labels, node.name) for t in selector.node_selector_terms)


class DynamicResources:
    """One session's DRA state and callbacks (see the module docstring)."""

    def __init__(self, ssn: Session, view: DraView) -> None:
        self.ssn, self.view = ssn, view
        self.inventory: Inventory = ssn.incremental.memo_for_cluster(
            "dynamic-resources/inventory",
            view.slices_version,
            lambda: build_inventory(view.slices),
        )
        self.matches: dict[tuple[Alternative, DeviceId], bool] = {}
        self.taken: set[DeviceId] = set()
        self.counters: dict[CounterKey, Fraction] = dict(self.inventory.counters)
        self.uses: dict[str, ClaimUse] = {}
        self.searches: dict[tuple[str, str, int, int], list[list[Chosen]] | Failure] = {}
        self.reachable: dict[str, list[Candidate]] = {}
        self.noted: set[str] = set()  # jobs whose DRA failure the wait record has
        for key, claim in view.claims.items():
            allocation = claim.status.allocation
            if allocation is None:
                continue
            chosen = tuple(
                Chosen(r.request, (r.driver, r.pool, r.device)) for r in allocation.devices.results
            )
            users = frozenset(r.uid for r in claim.status.reserved_for)
            self.uses[key] = ClaimUse(
                claim,
                chosen,
                selector=allocation.node_selector,
                allocated_before=True,
                status_users=users,
                users=set(users),
            )
            self._take(chosen)

    # ---- devices ------------------------------------------------------------------------------

    def _take(self, chosen: tuple[Chosen, ...] | list[Chosen]) -> None:
        for c in chosen:
            self.taken.add(c.device)
            published = self.inventory.devices.get(c.device)
            if published is not None:
                for key, need in published.candidate.consumes:
                    self.counters[key] = self.counters.get(key, Fraction(0)) - need

    def _give_back(self, chosen: tuple[Chosen, ...]) -> None:
        for c in chosen:
            self.taken.discard(c.device)
            published = self.inventory.devices.get(c.device)
            if published is not None:
                for key, need in published.candidate.consumes:
                    self.counters[key] = self.counters.get(key, Fraction(0)) + need

    def _local(self, chosen: tuple[Chosen, ...] | list[Chosen]) -> bool:
        """Whether only the node's own verdicts read these devices: node-local devices that
        consume no counters (a counter set may be shared by devices of several nodes)."""
        devices = self.inventory.devices
        return all(
            c.device in self.inventory.node_of
            and not (c.device in devices and devices[c.device].candidate.consumes)
            for c in chosen
        )

    def _candidates(self, node: NodeInfo) -> list[Candidate]:
        found = self.reachable.get(node.name)
        if found is None:
            found = self.reachable[node.name] = self.inventory.reachable(
                node.name, lambda selector: _selects(selector, node)
            )
        return found

    def _matches(self, alternative: Alternative, candidate: Candidate) -> bool:
        key = (alternative, candidate.id)
        found = self.matches.get(key)
        if found is None:
            found = self.matches[key] = self._evaluate(alternative, candidate)
        return found

    def _evaluate(self, alternative: Alternative, candidate: Candidate) -> bool:
        device_class = self.view.classes.get(alternative.device_class)
        published = self.inventory.devices.get(candidate.id)
        if device_class is None or published is None:
            return False
        variables = published.variables()
        for selector in (*device_class.spec.selectors, *alternative.selectors):
            if selector.cel is not None and not matches(
                compiled(selector.cel.expression), variables
            ):
                return False
        return True

    # ---- claims -------------------------------------------------------------------------------

    def _check_claim(self, key: str, claim: ResourceClaim) -> str | None:
        """Why the unallocated claim cannot be allocated by Caldera at all (refused features,
        a missing class, a selector that does not compile); None when it can be."""
        name = claim.metadata.name
        refused = refusal(claim.spec.devices)
        if refused is not None:
            return f"claim {name!r}: {refused}"
        for options in alternatives(claim.spec.devices):
            missing = [a.device_class for a in options if a.device_class not in self.view.classes]
            if len(missing) == len(options):
                return f"claim {name!r}: DeviceClass {missing[0]!r} does not exist"
            for option in options:
                device_class = self.view.classes.get(option.device_class)
                selectors = (
                    *(device_class.spec.selectors if device_class else ()),
                    *option.selectors,
                )
                for selector in selectors:
                    if selector.cel is None:
                        return f"claim {name!r}: request {option.name!r} has a selector without cel"
                    try:
                        compiled(selector.cel.expression)
                    except SelectorError as exc:
                        return f"claim {name!r}: request {option.name!r}: {exc}"
        return None

    def _claims(self, task: TaskInfo) -> tuple[list[str], str | None]:
        """The pod's claim keys, or why they cannot be used (not made yet, missing, made for
        another pod, refused)."""
        pod = task.pod
        if pod is None:
            return [], None
        keys, why = pod_claims(pod)
        if why is not None:
            return [], why
        templates = {
            s.resource_claim_name
            for s in pod.status.resource_claim_statuses
            if s.resource_claim_name
        }
        for key in keys:
            claim = self.view.claims.get(key)
            if claim is None:
                return [], f"ResourceClaim {key!r} does not exist"
            if claim.metadata.name in templates and not any(
                o.controller and o.uid == pod.metadata.uid for o in claim.metadata.owner_references
            ):
                return [], f"ResourceClaim {key!r} was not made for this pod"
            if claim.metadata.deletion_timestamp is not None:
                return [], f"ResourceClaim {key!r} is being deleted"
            use = self.uses.get(key)
            if use is None or use.chosen is None:
                refused = self._check_claim(key, claim)
                if refused is not None:
                    return [], refused
        return keys, None

    def _usable_from(self, use: ClaimUse, node: NodeInfo) -> bool:
        if use.node is not None:
            return use.node == node.name
        if use.allocated_before:
            return use.selector is None or _selects(use.selector, node)
        return True  # a session allocation of devices every node reaches

    def search(self, task: TaskInfo, node: NodeInfo) -> list[list[Chosen]] | Failure | str | None:
        """The devices for the task's unallocated claims on the node; a reason string when its
        claims cannot be used there; None when it has nothing to allocate."""
        keys, why = self._claims(task)
        if why is not None:
            return why
        pending: list[ClaimToAllocate] = []
        for key in keys:
            use = self.uses.get(key)
            if use is not None and use.chosen is not None:
                name = use.claim.metadata.name
                if not self._usable_from(use, node):
                    return f"claim {name!r} is allocated to devices the node cannot reach"
                if task.uid not in use.users and len(use.users) >= RESERVED_FOR_MAX:
                    return f"claim {name!r} has {RESERVED_FOR_MAX} consumers already"
                continue
            claim = self.view.claims[key]
            pending.append(ClaimToAllocate(claim.metadata.name, claim.spec.devices))
        if not pending:
            return None
        # the node's generation: pods placed there took devices; the epoch: devices other
        # nodes reach too, or shared claims, changed
        cache_key = (task.uid, node.name, node.generation, self.view.epoch)
        found = self.searches.get(cache_key)
        if found is None:
            found = self.searches[cache_key] = allocate(
                pending,
                self._candidates(node),
                matches=self._matches,
                taken=self.taken,
                counters=self.counters,
            )
        return found

    # ---- callbacks ----------------------------------------------------------------------------

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        if not has_claims(task.pod):
            return None
        found = self.search(task, node)
        if found is None or isinstance(found, list):
            return None
        message = found if isinstance(found, str) else f"cannot allocate {found.message()}"
        if task.job not in self.noted:
            self.noted.add(task.job)
            self.ssn.note_wait(task.job, DETAIL, f"pod {task.name} on node {node.name}: {message}")
        return message

    def allocated(self, task: TaskInfo) -> None:
        if not has_claims(task.pod) or not task.node_name:
            return
        node = self.ssn.nodes.get(task.node_name)
        keys, why = self._claims(task)
        if node is None or why is not None:
            return
        found = self.search(task, node) if task.status != TaskStatus.RUNNING else None
        fresh = iter(found if isinstance(found, list) else ())
        shared = False
        for key in keys:
            use = self.uses.get(key)
            if use is None:
                use = self.uses[key] = ClaimUse(self.view.claims[key])
            if use.chosen is None:
                chosen = tuple(next(fresh, ()))
                if not chosen:
                    continue  # the predicate refused this node; nothing to stage
                use.chosen, use.staged_by = chosen, task.uid
                use.node = node.name if self._local(chosen) else None
                self._take(chosen)
                shared = shared or not self._local(chosen)
            elif use.freed:
                use.freed = False
                self._take(use.chosen)
                shared = True
            use.users.add(task.uid)
            shared = shared or not self._owned(use, task)
        if shared:
            self.view.epoch += 1

    def deallocated(self, task: TaskInfo) -> None:
        if not has_claims(task.pod):
            return
        keys, _why = self._claims(task)
        shared = False
        for key in keys:
            use = self.uses.get(key)
            if use is None or task.uid not in use.users:
                continue
            use.users.discard(task.uid)
            shared = shared or not self._owned(use, task)
            if use.staged_by == task.uid and use.chosen is not None:
                shared = shared or not self._local(use.chosen)
                self._give_back(use.chosen)
                use.chosen, use.staged_by, use.node = None, None, None
            elif (
                use.allocated_before
                and use.chosen is not None
                and not use.freed
                and not use.users
                and task.uid in use.status_users
            ):
                # the last consumer is evicted: its devices are free for a preemptor
                use.freed = True
                self._give_back(use.chosen)
                shared = True
        if shared:
            self.view.epoch += 1

    @staticmethod
    def _owned(use: ClaimUse, task: TaskInfo) -> bool:
        """A claim made for this pod alone (from a template): no other pod's verdicts read
        it."""
        pod_uid = task.pod.metadata.uid if task.pod is not None else ""
        return any(o.controller and o.uid == pod_uid for o in use.claim.metadata.owner_references)

    def plans(self) -> dict[str, tuple[ClaimPlan, ...]]:
        """The claim writes of every pod the session binds, by task uid."""
        found: dict[str, tuple[ClaimPlan, ...]] = {}
        for bind in self.ssn.result.binds:
            task = bind.task
            if not has_claims(task.pod) or task.pod is None:
                continue
            keys, why = self._claims(task)
            if why is not None:
                continue
            plans = []
            for key in keys:
                use = self.uses.get(key)
                if use is None or use.chosen is None:
                    # not allocated for it: the writer then refuses the bind ("deallocated")
                    plans.append(ClaimPlan(key, None))
                    continue
                allocation = None if use.allocated_before else self._allocation(use, bind.node)
                plans.append(ClaimPlan(key, allocation))
            found[task.uid] = tuple(plans)
        return found

    def _allocation(self, use: ClaimUse, node: str) -> AllocationResult:
        """The status.allocation of a claim this session allocated: its devices, the
        DeviceClasses' configuration and the claim's (as kube-scheduler copies them), and the
        nodes it may be used from."""
        assert use.chosen is not None
        results = tuple(
            DeviceRequestAllocationResult(
                request=c.request, driver=c.device[0], pool=c.device[1], device=c.device[2]
            )
            for c in use.chosen
        )
        config: list[DeviceAllocationConfiguration] = []
        classes_of = {
            a.name: a.device_class
            for options in alternatives(use.claim.spec.devices)
            for a in options
        }
        for request in dict.fromkeys(c.request for c in use.chosen):
            device_class = self.view.classes.get(classes_of.get(request, ""))
            for item in device_class.spec.config if device_class is not None else ():
                config.append(
                    DeviceAllocationConfiguration(
                        source="FromClass", requests=(request,), opaque=item.opaque
                    )
                )
        for claim_item in use.claim.spec.devices.config:
            config.append(
                DeviceAllocationConfiguration(
                    source="FromClaim", requests=claim_item.requests, opaque=claim_item.opaque
                )
            )
        everywhere = set(self.inventory.everywhere)
        selector = (
            None if all(c.device in everywhere for c in use.chosen) else (_node_name_selector(node))
        )
        return AllocationResult(
            devices=DeviceAllocationResult(results=results, config=tuple(config)),
            node_selector=selector,
        )


def session_dra(ssn: Session) -> DynamicResources | None:
    """The session's DRA state, when the snapshot has DRA objects."""
    view = ssn.cluster.dra
    return None if view is None else DynamicResources(ssn, view)
