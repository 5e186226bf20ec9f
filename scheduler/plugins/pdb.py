"""pdb: preempt and reclaim never choose a victim whose eviction would break a
PodDisruptionBudget (Volcano's pdb plugin).

A budget covers the pods of its namespace that its selector matches (a budget without a
selector, or with an empty one, covers none here, as Volcano reads it). Its disruption controller
publishes how many covered pods may go now (``status.disruptionsAllowed``) and the pods whose
eviction it has already admitted (``status.disruptedPods``). Victims are judged in the
candidates' order, and each one taken spends one disruption of every budget covering it that
has not already counted it as disrupted; a candidate that would take a budget below zero is
refused. The pods the session has already evicted (for other preemptors; the budgets' status
cannot show them yet) have spent theirs first: several pods of one gang asking in turn cannot
each spend the same disruption. A budget whose status is older than its spec
(``observedGeneration`` behind ``generation``) allows no disruption, as the Eviction API
refuses then too.

Volcano spends a budget's disruption for every candidate it looks at, refused or not, so one
protected pod can make an unprotected neighbour covered by another budget look protected;
here only victims spend. The same budgets are checked again by the API server: evictions go
through the Eviction API, which answers 429 for a pod whose budget is spent, so without this
plugin preempt and reclaim choose victims whose eviction then fails and make no room.

Registered as preemptable and reclaimable functions: put pdb in the tier that decides
preemption (the first tier with a preemptable function; see ``scheduler.framework.session``),
as Volcano's session does; reclaim asks every tier. When the shuffle action is configured, the
same check screens the pods shuffle would evict (a victim-tasks screen: Volcano registers it as
one more victim function, whose pods shuffle would evict too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from caldera.api.core import PodDisruptionBudget
from caldera.api.selectors import is_empty, matches
from scheduler.api.types import TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session


def allowed_disruptions(budget: PodDisruptionBudget) -> int:
    """How many covered pods may go now; none while the status lags the spec."""
    if budget.status.observed_generation < budget.metadata.generation:
        return 0
    return budget.status.disruptions_allowed


def covers(budget: PodDisruptionBudget, labels: Mapping[str, str]) -> bool:
    """Whether the budget's selector matches a pod with ``labels`` (in its namespace)."""
    selector = budget.spec.selector
    return selector is not None and not is_empty(selector) and matches(selector, labels)


def victims_within_budgets(
    candidates: Sequence[TaskInfo],
    budgets: Mapping[str, Sequence[PodDisruptionBudget]],
    spent: Iterable[TaskInfo] = (),
) -> list[TaskInfo]:
    """The candidates that may go, in order, each spending its budgets, after ``spent`` (the
    pods already evicted in the session) have spent theirs (module docstring)."""
    left: dict[int, int] = {}  # by id of the budget: disruptions still allowed
    for task in spent:
        for budget in _spending(task, budgets):
            left[id(budget)] = left.get(id(budget), allowed_disruptions(budget)) - 1
    chosen: list[TaskInfo] = []
    for task in candidates:
        spending = _spending(task, budgets)
        for budget in spending:
            left.setdefault(id(budget), allowed_disruptions(budget))
        if all(left[id(budget)] > 0 for budget in spending):
            for budget in spending:
                left[id(budget)] -= 1
            chosen.append(task)
    return chosen


def _spending(
    task: TaskInfo, budgets: Mapping[str, Sequence[PodDisruptionBudget]]
) -> list[PodDisruptionBudget]:
    """The budgets evicting ``task`` spends a disruption of (none for a pod without labels,
    which no selector matches)."""
    pod = task.pod
    mine = budgets.get(task.namespace, ())
    if pod is None or not mine or not pod.metadata.labels:
        return []
    return [
        budget
        for budget in mine
        if task.name not in budget.status.disrupted_pods and covers(budget, pod.metadata.labels)
    ]


class PdbPlugin:
    """Keeps preempt and reclaim within the PodDisruptionBudgets."""

    name = "pdb"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.evicted: dict[str, TaskInfo] = {}  # by uid: pods evicted in this session

    def on_session_open(self, ssn: Session) -> None:
        # Registered even without budgets: which tier decides preemption must not depend on
        # whether a budget exists somewhere.
        budgets = ssn.cluster.disruption_budgets
        evicted: dict[str, TaskInfo] = {}
        self.evicted = evicted

        def within(candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            if not budgets:
                return list(candidates)
            return victims_within_budgets(candidates, budgets, evicted.values())

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            return within(candidates)

        # An eviction deallocates its task, now Releasing, and undoing it allocates the task
        # while still Releasing: so the plugin knows which pods this session evicts, which the
        # budgets' status cannot show yet.
        def allocated(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:
                evicted.pop(task.uid, None)

        def deallocated(task: TaskInfo) -> None:
            if task.status == TaskStatus.RELEASING:
                evicted[task.uid] = task

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        ssn.add_allocate_handler(self.name, allocated, deallocated)
        if "shuffle" in ssn.configured_actions:
            ssn.add_victim_tasks_screen(self.name, within)

    def on_session_close(self, ssn: Session) -> None:
        self.evicted = {}
