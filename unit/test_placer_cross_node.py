"""The placer's cross-node tasks (``Session.cross_node``): a task whose verdict on a node reads
other nodes is judged afresh on every node each time, and the batch node scores
(``Session.batch_node_scores``) are added over the nodes that fit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.actions.placer import Placer
from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from unit.sched_fixtures import add_job, cpu_cluster, open_session


class Elsewhere:
    """Refuses the nodes in ``barred`` (state outside any node) for tasks it claims, and
    scores the rest by ``bonus`` in a batch."""

    name = "elsewhere"

    def __init__(self, claims: bool) -> None:
        self.claims = claims
        self.barred: set[str] = set()
        self.bonus: dict[str, float] = {}
        self.batches: list[list[str]] = []

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_predicate_fn(self.name, self.predicate)
        ssn.add_batch_node_order_fn(self.name, self.batch)
        ssn.add_cross_node_fn(self.name, lambda task: self.claims)

    def on_session_close(self, ssn: Session) -> None:
        return None

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        return "barred" if node.name in self.barred else None

    def batch(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> Mapping[str, float]:
        self.batches.append(sorted(n.name for n in nodes))
        return {n.name: self.bonus.get(n.name, 0.0) for n in nodes}


def setup(claims: bool) -> tuple[Session, Elsewhere, TaskInfo]:
    cluster = cpu_cluster({"n0": "4", "n1": "4", "n2": "4"})
    job = add_job(cluster, "j", pending=1)
    plugin = Elsewhere(claims)
    ssn = open_session(
        cluster,
        [PredicatesPlugin(Arguments("predicates", {})), plugin],
        [NodeOrderPlugin(Arguments("nodeorder", {}))],
    )
    return ssn, plugin, next(iter(job.tasks.values()))


def test_batch_scores_rank_the_nodes_of_a_cross_node_task() -> None:
    ssn, plugin, task = setup(claims=True)
    plugin.bonus = {"n2": 1000.0}
    best, cand = Placer(ssn).best(task)
    assert best == "n2"
    assert plugin.batches == [["n0", "n1", "n2"]]
    assert cand.scores["n2"] - cand.scores["n0"] == 1000.0


def test_a_cross_node_task_sees_changes_no_node_generation_records() -> None:
    ssn, plugin, task = setup(claims=True)
    placer = Placer(ssn)
    assert placer.best(task)[0] == "n0"
    plugin.barred = {"n0", "n1"}  # other pods moved: no node of the session changed
    best, cand = placer.best(task)
    assert best == "n2"
    assert sorted(cand.reasons) == ["n0", "n1"]
    assert placer.best_among(task, frozenset({"n0", "n1"})) is None


def test_other_tasks_get_no_batch_scores() -> None:
    ssn, plugin, task = setup(claims=False)
    plugin.bonus = {"n2": 1000.0}
    assert Placer(ssn).best(task)[0] == "n0"
    assert Placer(ssn).best_among(task, frozenset({"n1", "n2"})) == "n1"
    assert plugin.batches == []
