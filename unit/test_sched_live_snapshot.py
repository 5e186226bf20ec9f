"""The live snapshot equals a fresh one: after any sequence of cache changes and sessions,
``LiveSnapshot.update`` gives the ClusterInfo ``build_cluster`` derives from the same objects
(up to the order of tasks and jobs), and an idle update derives nothing.

Random sequences add, change and delete nodes, queues, PodGroups, pods, PriorityClasses,
ResourceQuotas and PodDisruptionBudgets, bind pods (first assumed, then seen bound), finish and
delete them, and run whole sessions (Volcano's configuration with preempt and reclaim) on the
live ClusterInfo, which change it as they plan. PodGroup g5 has a subGroupPolicy (partitions of
2 pods by each pod's ``part`` label), so its jobs are placed partition by partition.
``CALDERA_LIVE_SNAPSHOT_RUNS`` sets the number of sequences (CI: 150).
"""

from __future__ import annotations

import datetime as dt
import os
import random
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from caldera.api.core import (
    Container,
    Node,
    NodeStatus,
    Pod,
    PodDisruptionBudget,
    PodSpec,
    PodStatus,
    PriorityClass,
    ResourceQuota,
    ResourceRequirements,
)
from caldera.api.meta import Condition, ObjectMeta, ResourceList, format_time
from caldera.api.resources import Resources
from caldera.api.volcano import (
    KUBE_GROUP_NAME_KEY,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
    SubGroupPolicy,
)
from scheduler.actions.retry import Retries
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, TaskInfo
from scheduler.conf import parse_conf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.framework.status import with_findings
from scheduler.live_snapshot import CachedObjects, KeyedObjects, LiveSnapshot
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from scheduler.snapshot import build_cluster

RUNS = int(os.environ.get("CALDERA_LIVE_SNAPSHOT_RUNS", "150"))
STEPS = 40
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CONF = parse_conf(
    """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
""",
    actions=ACTIONS.keys(),
    plugins=PLUGINS.keys(),
)


# ---- canonical form -----------------------------------------------------------------------------


def _task(t: TaskInfo) -> tuple[object, ...]:
    return (
        t.uid,
        t.key,
        t.job,
        t.role,
        t.resreq,
        t.init_resreq,
        t.priority,
        t.status,
        t.node_name,
        t.preemptable,
        t.scheduled_at,
        t.fit_error,
        t.last_transaction,
        id(t.pod),
    )


def _job(j: JobInfo) -> tuple[object, ...]:
    return (
        j.namespace,
        j.name,
        j.queue,
        j.priority,
        j.min_available,
        tuple(sorted(j.min_task_member.items())),
        j.min_resources,
        j.creation,
        j.phase,
        id(j.podgroup),
        j.allocated,
        j.preemptable,
        frozenset(_task(t) for t in j.tasks.values()),
        frozenset((s, frozenset(b)) for s, b in j.by_status.items() if b),
        tuple(sorted(j.fit_errors.items())),
    )


def _node(n: NodeInfo) -> tuple[object, ...]:
    return (
        n.allocatable,
        id(n.node),
        n.used,
        n.releasing,
        n.pipelined,
        n.ready,
        n.unschedulable,
        n.max_pods,
        frozenset((k, t.uid, t.status, t.node_name) for k, t in n.tasks.items()),
    )


def canonical(c: ClusterInfo) -> dict[str, object]:
    """Everything a session reads of a ClusterInfo, without the order of its dicts."""
    return {
        "nodes": {name: _node(n) for name, n in c.nodes.items()},
        "jobs": {key: _job(j) for key, j in c.jobs.items()},
        "queues": {
            name: (
                q.weight,
                q.capability,
                q.guarantee,
                q.reclaimable,
                q.state,
                q.parent,
                q.deserved,
                id(q.queue),
            )
            for name, q in c.queues.items()
        },
        "classes": {name: id(pc) for name, pc in c.priority_classes.items()},
        "quotas": {ns: frozenset(map(id, qs)) for ns, qs in c.resource_quotas.items()},
        "budgets": {ns: frozenset(map(id, bs)) for ns, bs in c.disruption_budgets.items()},
        "now": c.now,
    }


_PARTITIONS = (
    SubGroupPolicy(name="part", sub_group_size=2, min_sub_groups=1, match_label_keys=("part",)),
)


# ---- a random cache -----------------------------------------------------------------------------


class Cache:
    """The objects a scheduler's informers would hold, changed at random."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pods: KeyedObjects[Pod] = KeyedObjects()
        self.nodes: KeyedObjects[Node] = KeyedObjects()
        self.podgroups: KeyedObjects[PodGroup] = KeyedObjects()
        self.queues: KeyedObjects[Queue] = KeyedObjects()
        self.classes: KeyedObjects[PriorityClass] = KeyedObjects()
        self.quotas: KeyedObjects[ResourceQuota] = KeyedObjects()
        self.budgets: KeyedObjects[PodDisruptionBudget] = KeyedObjects()
        self.assumed: dict[str, str] = {}
        self.serial = 0
        self.live = LiveSnapshot()
        for q in ("default", "q1"):
            self.put_queue(q, 1)
        for i in range(3):
            self.put_node(f"n{i}", "4", ready=True)

    def next_uid(self) -> str:
        self.serial += 1
        return f"uid-{self.serial}"

    # each put notes the change, as the informer handlers do
    def put_queue(self, name: str, weight: int) -> None:
        deserved: ResourceList = {"cpu": str(self.rng.randint(0, 4))}
        q = Queue(metadata=ObjectMeta(name=name), spec=QueueSpec(weight=weight, deserved=deserved))
        self.queues.items[name] = q
        self.live.queue_changed(q)

    def put_node(self, name: str, cpu: str, *, ready: bool) -> None:
        node = Node(
            metadata=ObjectMeta(name=name, resource_version=str(self.serial)),
            status=NodeStatus(
                allocatable={"cpu": cpu, "memory": "16Gi", "pods": "110"},
                conditions=(Condition(type="Ready", status="True" if ready else "False"),),
            ),
        )
        self.serial += 1
        self.nodes.items[name] = node
        self.live.node_changed(node)

    def put_group(self, name: str, *, queue: str, min_member: int, phase: str, cls: str) -> None:
        pg = PodGroup(
            metadata=ObjectMeta(
                name=name, namespace="ns", creation_timestamp=format_time(T0), uid=name
            ),
            spec=PodGroupSpec(
                min_member=min_member,
                queue=queue,
                priority_class_name=cls,
                sub_group_policy=_PARTITIONS if name == "g5" else (),
            ),
            status=PodGroupStatus(phase=phase),
        )
        self.podgroups.items[f"ns/{name}"] = pg
        self.live.podgroup_changed(pg)

    def put_pod(self, pod: Pod) -> None:
        self.pods.items[f"ns/{pod.metadata.name}"] = pod
        self.live.pod_changed(pod)

    def new_pod(self, name: str, group: str) -> Pod:
        cpu = self.rng.choice(["500m", "1", "2"])
        return Pod(
            metadata=ObjectMeta(
                name=name,
                namespace="ns",
                uid=self.next_uid(),
                annotations={KUBE_GROUP_NAME_KEY: group} if group else {},
                # Derived from the name, not drawn: the random sequence stays as it was.
                labels={"part": str(int(name[1:]) % 3)} if name[1:].isdigit() else {},
            ),
            spec=PodSpec(
                scheduler_name=self.rng.choice(["volcano", "volcano", "default-scheduler"]),
                priority=self.rng.choice([None, 0, 10]),
                containers=(
                    Container(name="c", resources=ResourceRequirements(requests={"cpu": cpu})),
                ),
            ),
        )

    def delete(self, store: KeyedObjects[Any], key: str) -> None:
        obj = store.items.pop(key)
        if isinstance(obj, Pod):
            self.live.pod_changed(obj)
        elif isinstance(obj, Node):
            self.live.node_changed(obj)
        elif isinstance(obj, PodGroup):
            self.live.podgroup_changed(obj)
        elif isinstance(obj, Queue):
            self.live.queue_changed(obj)

    # ---- one random change ----------------------------------------------------------------

    def change_namespaced(self) -> None:
        """Put or delete a ResourceQuota or a PodDisruptionBudget."""
        rng = self.rng
        namespace, name = rng.choice(["ns", "other"]), rng.choice(["a", "b"])
        key = f"{namespace}/{name}"
        meta = ObjectMeta(name=name, namespace=namespace, resource_version=str(self.serial))
        self.serial += 1
        if rng.random() < 0.5:
            if key in self.quotas.items and rng.random() < 0.3:
                self.live.resource_quota_changed(self.quotas.items.pop(key))
            else:
                quota = ResourceQuota(metadata=meta)
                self.quotas.items[key] = quota
                self.live.resource_quota_changed(quota)
        elif key in self.budgets.items and rng.random() < 0.3:
            self.live.disruption_budget_changed(self.budgets.items.pop(key))
        else:
            budget = PodDisruptionBudget(metadata=meta)
            self.budgets.items[key] = budget
            self.live.disruption_budget_changed(budget)

    def change(self) -> None:
        rng = self.rng
        if rng.random() < 0.05:
            self.change_namespaced()
            return
        roll = rng.random()
        pods = list(self.pods.items.values())
        if roll < 0.08:
            name = f"n{rng.randint(0, 4)}"
            if name in self.nodes.items and rng.random() < 0.3:
                self.delete(self.nodes, name)
            else:
                self.put_node(name, rng.choice(["2", "4", "8"]), ready=rng.random() > 0.15)
        elif roll < 0.12:
            name = rng.choice(["default", "q1", "q2"])
            if name != "default" and name in self.queues.items and rng.random() < 0.3:
                self.delete(self.queues, name)
            else:
                self.put_queue(name, rng.randint(1, 3))
        elif roll < 0.14:
            name = rng.choice(["low", "high"])
            pc = PriorityClass(
                metadata=ObjectMeta(name=name, resource_version=str(self.serial)),
                value=rng.choice([0, 5, 100]),
            )
            self.serial += 1
            self.classes.items[name] = pc
            self.live.priority_class_changed(pc)
        elif roll < 0.30:
            name = f"g{rng.randint(0, 5)}"
            if f"ns/{name}" in self.podgroups.items and rng.random() < 0.2:
                self.delete(self.podgroups, f"ns/{name}")
            else:
                self.put_group(
                    name,
                    queue=rng.choice(["default", "q1", "q2"]),
                    min_member=rng.randint(0, 3),
                    phase=rng.choice(["", "Pending", "Inqueue", "Running"]),
                    cls=rng.choice(["", "low", "high"]),
                )
        elif roll < 0.34 and self.assumed:
            del self.assumed[rng.choice(sorted(self.assumed))]  # a bind failed: no pod event
        elif roll < 0.55 or not pods:
            name = f"p{rng.randint(0, 24)}"
            group = rng.choice(["", "g0", "g1", "g2", "g3", "g4", "g5"])
            self.put_pod(self.new_pod(name, group))
        else:
            self.change_pod(rng.choice(pods))

    def change_pod(self, pod: Pod) -> None:
        rng = self.rng
        roll = rng.random()
        key = f"ns/{pod.metadata.name}"
        if roll < 0.2:
            self.delete(self.pods, key)
            self.assumed.pop(pod.metadata.uid, None)
        elif roll < 0.5:
            node = self.assumed.pop(pod.metadata.uid, None) or rng.choice(["n0", "n1", "n2", "n9"])
            spec = msgspec.structs.replace(pod.spec, node_name=node)
            self.put_pod(msgspec.structs.replace(pod, spec=spec))
        elif roll < 0.8:
            phase = rng.choice(["Running", "Succeeded", "Failed", "Pending"])
            self.put_pod(msgspec.structs.replace(pod, status=PodStatus(phase=phase)))
        else:
            meta = msgspec.structs.replace(pod.metadata, deletion_timestamp=format_time(T0))
            self.put_pod(msgspec.structs.replace(pod, metadata=meta))

    def write_back(self, result: SessionResult) -> None:
        """Write a session's PodGroup statuses and why records into the cache, as the
        process does (so that later sessions find them unchanged, and settle jobs)."""
        for key in sorted(result.podgroup_status.keys() | result.podgroup_why.keys()):
            pg = self.podgroups.items.get(key)
            if pg is None:
                continue
            pg = with_findings(pg, result.podgroup_status.get(key), result.podgroup_why.get(key))
            meta = msgspec.structs.replace(pg.metadata, resource_version=str(self.serial))
            self.serial += 1
            self.podgroups.items[key] = pg = msgspec.structs.replace(pg, metadata=meta)
            self.live.podgroup_changed(pg)

    # ---- snapshots ----------------------------------------------------------------------------

    def cached_objects(self) -> CachedObjects:
        return CachedObjects(
            self.pods,
            self.nodes,
            self.podgroups,
            self.queues,
            self.classes,
            resource_quotas=self.quotas,
            disruption_budgets=self.budgets,
        )

    def live_cluster(self, now: dt.datetime) -> ClusterInfo:
        cluster, _ = self.live.update(self.cached_objects(), assumed=self.assumed, now=now)
        return cluster

    def fresh_cluster(self, now: dt.datetime) -> ClusterInfo:
        cluster, _ = build_cluster(
            pods=self.pods.list(),
            nodes=self.nodes.list(),
            podgroups=self.podgroups.list(),
            queues=self.queues.list(),
            priority_classes=self.classes.list(),
            resource_quotas=self.quotas.list(),
            disruption_budgets=self.budgets.list(),
            assumed=self.assumed,
            now=now,
        )
        return cluster

    def session(self, cluster: ClusterInfo, *, speedups: bool = True) -> SessionResult:
        """A whole session on the live ClusterInfo; its binds become assumed, as in the
        process (the cache sees them bound later, in ``change_pod``). ``speedups=False``
        withholds the incremental layer (``Session``)."""
        session = Session(cluster, CONF.tiers, speedups=speedups)
        try:
            result = run_session(session, CONF, REGISTRY)
        finally:
            self.live.after_session(session)
        for bind in result.binds:
            self.assumed[bind.task.uid] = bind.node
        return result


def sequences() -> Iterator[int]:
    yield from range(RUNS)


@pytest.mark.parametrize("chunk", range(3))
def test_live_equals_fresh_after_changes_and_sessions(chunk: int) -> None:
    """At every step the live snapshot equals a fresh build of the same objects, including
    right after sessions that changed it; a step without changes derives nothing again."""
    sessions = 0
    for seed in range(chunk, RUNS, 3):
        cache = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for _ in range(cache.rng.randint(0, 4)):
                cache.change()
            now = T0 + dt.timedelta(seconds=step)
            live = cache.live_cluster(now)
            assert canonical(live) == canonical(cache.fresh_cluster(now)), (
                f"seed {seed} step {step}"
            )
            if cache.rng.random() < 0.5:
                cache.session(live)
                sessions += 1
    assert sessions > len(range(chunk, RUNS, 3)) * STEPS // 4


def test_idle_update_derives_nothing() -> None:
    """Nothing changed and no session touched anything: no rebuild, the same objects."""
    cache = Cache(random.Random(7))  # noqa: S311 - seeded test data
    for _ in range(30):
        cache.change()
    first = cache.live_cluster(T0)
    jobs, nodes = dict(first.jobs), dict(first.nodes)
    rebuilds = cache.live.rebuilds
    again = cache.live_cluster(T0)
    assert again is first
    assert cache.live.rebuilds == rebuilds
    assert all(again.jobs[k] is j for k, j in jobs.items())
    assert all(again.nodes[k] is n for k, n in nodes.items())


def test_hypernode_tree_follows_hypernodes_and_node_labels() -> None:
    """The live snapshot resolves HyperNodes again when one changes, or, while there are
    HyperNodes, when a node's labels change; a node change that keeps its labels does not."""
    from caldera.api.core import Node as CoreNode
    from caldera.api.core import NodeStatus as CoreNodeStatus
    from caldera.api.meta import ObjectMeta as Meta
    from caldera.api.topology import HyperNode
    from scheduler.live_snapshot import CachedObjects, KeyedObjects, LiveSnapshot
    from unit.topology_fixtures import hypernode, labelled

    nodes: KeyedObjects[CoreNode] = KeyedObjects()
    hns: KeyedObjects[HyperNode] = KeyedObjects()
    for name, rack in (("a", "r0"), ("b", "r1")):
        nodes.items[name] = CoreNode(
            metadata=Meta(name=name, labels={"rack": rack}),
            status=CoreNodeStatus(allocatable={"cpu": "4"}),
        )
    objects = CachedObjects(
        KeyedObjects(), nodes, KeyedObjects(), KeyedObjects(), KeyedObjects(), hypernodes=hns
    )
    live = LiveSnapshot()
    cluster, _ = live.update(objects, assumed={})
    assert not cluster.hypernodes

    hns.items["r0"] = hypernode("r0", 1, [labelled("Node", {"rack": "r0"})])
    live.hypernode_changed(hns.items["r0"])
    cluster, _ = live.update(objects, assumed={})
    assert cluster.hypernodes.islands["r0"].nodes == {"a"}

    moved = CoreNode(
        metadata=Meta(name="b", labels={"rack": "r0"}),
        status=CoreNodeStatus(allocatable={"cpu": "4"}),
    )
    nodes.items["b"] = moved
    live.node_changed(moved)
    cluster, _ = live.update(objects, assumed={})
    assert cluster.hypernodes.islands["r0"].nodes == {"a", "b"}

    tree = cluster.hypernodes
    live.node_changed(moved)  # same labels: the tree is kept as it is
    cluster, _ = live.update(objects, assumed={})
    assert cluster.hypernodes is tree


def _decisions(result: SessionResult, cluster: ClusterInfo) -> tuple[object, ...]:
    """What a session decided and reported: binds and evictions with their nodes, PodGroup
    statuses, the fit errors and pods' messages, Events, jobs not ready, queue figures and
    shares."""
    return (
        [(b.task.uid, b.node) for b in result.binds],
        [(e.task.uid, e.reason) for e in result.evictions],
        sorted((key, msgspec.json.encode(s)) for key, s in result.podgroup_status.items()),
        sorted((key, sorted(j.fit_errors.items())) for key, j in cluster.jobs.items()),
        sorted(result.unschedulable.items()),
        sorted(repr(e) for e in result.events),
        sorted(result.unready_jobs),
        sorted(result.queue_deserved.items()),
        sorted(result.queue_allocated.items()),
        sorted((k, repr(f)) for k, f in result.queue_figures.items()),
        sorted(result.job_share.items()),
        sorted(result.namespace_share.items()),
    )


def _forget(cluster: ClusterInfo) -> None:
    """Make the next session start from nothing carried over: no node verdicts, job memos,
    job sums or settled jobs."""
    cluster.verdicts = None
    for job in cluster.jobs.values():
        job.memo.clear()
    cluster.job_sums.clear()
    cluster.job_maps.clear()
    cluster.settled = None


@pytest.mark.parametrize("chunk", range(3))
def test_carried_state_decides_as_fresh_state(chunk: int) -> None:
    """Sessions that start from what earlier sessions kept (the live snapshot's node verdicts,
    what plugins derived from unchanged jobs) decide and report exactly as sessions that
    derive everything again, over the same random changes: two caches from one seed, one
    forgetting before every session; their sessions' decisions feed back into the caches,
    so a single different decision would show at that session."""
    remembered = memos = trailed = settled = 0
    for seed in range(chunk, RUNS, 3):
        kept = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        plain = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for cache in (kept, plain):
                for _ in range(cache.rng.randint(0, 4)):
                    cache.change()
            now = T0 + dt.timedelta(seconds=step)
            with_memory = kept.live_cluster(now)
            without = plain.live_cluster(now)
            _forget(without)
            assert with_memory.verdicts is not None
            remembered += len(with_memory.verdicts.classes)
            memos += sum(len(job.memo) for job in with_memory.jobs.values())
            trailed += sum(1 for s in with_memory.job_sums.values() if s.position is not None)
            settled += len(with_memory.settled.phases) if with_memory.settled else 0
            assert with_memory.total_allocatable() == without.total_allocatable()
            plain.rng.random()  # as ``kept``'s draw below: the two sequences stay one
            if kept.rng.random() < 0.5:
                kept_result, plain_result = kept.session(with_memory), plain.session(without)
                got = _decisions(kept_result, with_memory)
                assert got == _decisions(plain_result, without), f"seed {seed} step {step}"
                kept.write_back(kept_result)
                plain.write_back(plain_result)
    assert remembered > 0
    assert memos > 0
    assert trailed > 0  # sums that read the snapshot's trail of changed jobs
    assert settled > 0  # jobs the sessions' passes skipped


def test_node_totals_follow_changes_and_sessions() -> None:
    """The totals the live snapshot keeps (the ready nodes' allocatable, what the nodes' tasks
    use) equal fresh sums after any changes (nodes added, made not ready, removed; pods bound,
    ended, deleted) and sessions (which change nodes as they plan)."""
    for seed in range(40):
        cache = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for _ in range(cache.rng.randint(0, 4)):
                cache.change()
            live = cache.live_cluster(T0)
            ready = Resources.sum(n.allocatable for n in live.nodes.values() if n.ready)
            used = Resources.sum(n.used for n in live.nodes.values())
            assert (live.ready_allocatable, live.nodes_used) == (ready, used), (
                f"seed {seed} step {step}"
            )
            if cache.rng.random() < 0.5:
                cache.session(live)


def test_fit_error_forgets_a_node_gone_between_sessions() -> None:
    """A pod that fits nowhere, a node removed, the next session: its fit error counts the
    nodes there are, not the remembered verdict about the node that went."""
    cache = Cache(random.Random(0))  # noqa: S311 - seeded test data
    cache.put_group("big", queue="default", min_member=1, phase="Inqueue", cls="")
    pod = cache.new_pod("huge", "big")
    requests = ResourceRequirements(requests={"cpu": "6"})  # each node has 4
    container = msgspec.structs.replace(pod.spec.containers[0], resources=requests)
    spec = msgspec.structs.replace(pod.spec, scheduler_name="volcano", containers=(container,))
    cache.put_pod(msgspec.structs.replace(pod, spec=spec))
    messages = []
    for step in range(2):
        cluster = cache.live_cluster(T0 + dt.timedelta(seconds=step))
        cache.session(cluster)
        messages.append(dict(cluster.jobs["ns/big"].fit_errors))
        if step == 0:
            cache.delete(cache.nodes, "n2")
    assert list(messages[0].values()) == ["0/3 nodes are available: 3 Insufficient cpu."]
    assert list(messages[1].values()) == ["0/2 nodes are available: 2 Insufficient cpu."]


def _sized_pod(cache: Cache, name: str, group: str, cpu: str) -> Pod:
    pod = cache.new_pod(name, group)
    container = msgspec.structs.replace(
        pod.spec.containers[0], resources=ResourceRequirements(requests={"cpu": cpu})
    )
    spec = msgspec.structs.replace(
        pod.spec, scheduler_name="volcano", priority=0, containers=(container,)
    )
    return msgspec.structs.replace(pod, spec=spec)


def _add_stuck_gang(cache: Cache) -> None:
    """A queue "default" and in it the gang "stuck": two 6-cpu pods (each node has 4 cpu)."""
    cache.queues.items["default"] = Queue(
        metadata=ObjectMeta(name="default"), spec=QueueSpec(weight=1)
    )
    cache.live.queue_changed(cache.queues.items["default"])
    cache.put_group("stuck", queue="default", min_member=2, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "stuck-0", "stuck", "6"))  # each node has 4 cpu
    cache.put_pod(_sized_pod(cache, "stuck-1", "stuck", "6"))


def test_waiting_job_is_set_right_in_place() -> None:
    """A gang whose first pod fits nowhere waits with a fit error and no statement touched
    it, and one whose pods a statement placed and then discarded: the next update keeps
    their JobInfos and tasks, and, after their PodGroups' statuses are written back, still
    keeps them, each time equal to a fresh build (no fit error, no last placement, what its
    running pod holds as allocated). A job a committed statement bound, and a PodGroup whose
    spec changed, are derived anew."""
    cache = Cache(random.Random(0))  # noqa: S311 - seeded test data
    _add_stuck_gang(cache)
    cache.put_group("tried", queue="default", min_member=3, phase="Inqueue", cls="")
    running = _sized_pod(cache, "tried-0", "tried", "1")
    cache.put_pod(
        msgspec.structs.replace(
            running,
            spec=msgspec.structs.replace(running.spec, node_name="n0"),
            status=PodStatus(phase="Running"),
        )
    )
    cache.put_pod(_sized_pod(cache, "tried-1", "tried", "1"))  # fits; the third does not
    cache.put_pod(_sized_pod(cache, "tried-2", "tried", "6"))
    cache.put_group("fits", queue="default", min_member=1, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "fits-0", "fits", "1"))

    now = T0
    cluster = cache.live_cluster(now)
    result = cache.session(cluster)
    stuck, tried, fits = (cluster.jobs[f"ns/{name}"] for name in ("stuck", "tried", "fits"))
    assert stuck.fit_errors
    assert tried.fit_errors
    assert any(t.last_transaction for t in tried.tasks.values())  # placed, then discarded
    assert [b.task.job for b in result.binds] == ["ns/fits"]
    kept = {job.key: dict(job.tasks) for job in (stuck, tried)}

    cluster = cache.live_cluster(now)
    for job in (stuck, tried):
        assert cluster.jobs[job.key] is job  # set right in place
        assert all(job.tasks[uid] is task for uid, task in kept[job.key].items())
        assert not job.fit_errors
        assert all(not t.fit_error and t.last_transaction is None for t in job.tasks.values())
    assert tried.allocated == Resources({"cpu": 1000})  # the running pod's, as add_task sums
    assert cluster.jobs["ns/fits"] is not fits  # its statement was committed
    assert canonical(cluster) == canonical(cache.fresh_cluster(now))

    result = cache.session(cluster)
    assert {"ns/stuck", "ns/tried"} <= result.podgroup_status.keys()  # conditions written
    cache.write_back(result)
    cluster = cache.live_cluster(now)
    for job in (stuck, tried):
        assert cluster.jobs[job.key] is job
        assert job.podgroup is cache.podgroups.items[job.key]
    assert canonical(cluster) == canonical(cache.fresh_cluster(now))

    cache.put_group("stuck", queue="default", min_member=1, phase="Inqueue", cls="")
    cluster = cache.live_cluster(now)
    assert cluster.jobs["ns/stuck"] is not stuck
    assert cluster.jobs["ns/stuck"].min_available == 1
    assert canonical(cluster) == canonical(cache.fresh_cluster(now))


def test_pipelined_job_is_derived_again() -> None:
    """A job the session pipelined (its pod waits for a terminating pod's resources, and the
    statement is kept, neither committed nor discarded) is derived again whole: its task
    must not stay pipelined in the next session's snapshot."""
    cache = Cache(random.Random(0))  # noqa: S311 - seeded test data
    cache.queues.items["default"] = Queue(
        metadata=ObjectMeta(name="default"), spec=QueueSpec(weight=1)
    )
    cache.live.queue_changed(cache.queues.items["default"])
    for name in ("n1", "n2"):
        cache.delete(cache.nodes, name)
    leaving = _sized_pod(cache, "leaving", "", "4")  # all of n0, being deleted
    cache.put_pod(
        msgspec.structs.replace(
            leaving,
            metadata=msgspec.structs.replace(leaving.metadata, deletion_timestamp=format_time(T0)),
            spec=msgspec.structs.replace(leaving.spec, node_name="n0"),
            status=PodStatus(phase="Running"),
        )
    )
    cache.put_group("later", queue="default", min_member=1, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "later-0", "later", "2"))
    cluster = cache.live_cluster(T0)
    result = cache.session(cluster)
    later = cluster.jobs["ns/later"]
    assert not result.binds
    assert [t.status.value for t in later.tasks.values()] == ["Pipelined"]
    cluster = cache.live_cluster(T0)
    assert cluster.jobs["ns/later"] is not later
    assert canonical(cluster) == canonical(cache.fresh_cluster(T0))


def _gang_backlog(seed: int) -> Cache:
    """Three 4-cpu nodes, n2 half taken by a running pod; a gang of three 3-cpu pods that
    places two and then finds no node, every session, while n2 stays as it is."""
    cache = Cache(random.Random(seed))  # noqa: S311 - seeded test data
    cache.queues.items["default"] = Queue(
        metadata=ObjectMeta(name="default"), spec=QueueSpec(weight=1)
    )
    cache.live.queue_changed(cache.queues.items["default"])
    cache.put_pod(_running(_sized_pod(cache, "holder", "", "2"), "n2"))
    cache.put_group("gang", queue="default", min_member=3, phase="Inqueue", cls="")
    for i in range(3):
        cache.put_pod(_sized_pod(cache, f"gang-{i}", "gang", "3"))
    return cache


def _running(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(
        pod,
        spec=msgspec.structs.replace(pod.spec, node_name=node),
        status=PodStatus(phase="Running"),
    )


def test_replayed_failed_turns_decide_as_turns_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gang that places two pods and finds no node for the third, session after session:
    its turn is replayed while nothing it reads changed, and every session, replayed or not,
    decides and reports exactly as sessions that run every turn (fit errors, pods'
    messages, statuses, Events), while small pods land on the nodes (n2's reasons change, and
    so the fit error; n0's and n1's scores), another queue's job shrinks the gang's queue's
    share, the gang's minMember drops to two or the holder finishes (then the gang fits), at
    random."""
    replays: list[bool] = []
    replay = Retries.replay

    def counted(self: Retries, *args: Any) -> bool:
        replays.append(replay(self, *args))
        return replays[-1]

    monkeypatch.setattr(Retries, "replay", counted)
    for seed in range(16):
        _replay_sequence(seed)
    # Turns replayed (the plain side has no verdict memory: none there), and turns run.
    assert sum(replays) > len(replays) // 4
    assert not all(replays)


def _replay_sequence(seed: int) -> None:
    kept, plain = _gang_backlog(seed), _gang_backlog(seed)
    rng = random.Random(seed)  # noqa: S311 - seeded test data
    for step in range(12):
        roll = rng.random()
        for cache in (kept, plain):
            if roll < 0.3:
                node = ("n2", "n2", "n0", "n1")[step % 4]  # n0 and n1 keep fitting a gang pod
                cache.put_pod(_running(_sized_pod(cache, f"small-{step}", "", "500m"), node))
            elif roll < 0.4 and "ns/holder" in cache.pods.items:
                cache.delete(cache.pods, "ns/holder")
            elif roll < 0.45:
                # The gang asks for two pods now (its tasks and nodes are as they were).
                cache.put_group("gang", queue="default", min_member=2, phase="Inqueue", cls="")
            elif roll < 0.5 and "ns/rival" not in cache.podgroups.items:
                # A job of another queue, too big to fit: the queues' deserved shares change,
                # and the gang's queue can take two of its pods, not three.
                cache.put_group("rival", queue="q1", min_member=1, phase="Inqueue", cls="")
                cache.put_pod(_sized_pod(cache, "rival-0", "rival", "6"))
        now = T0 + dt.timedelta(seconds=step)
        with_memory, without = kept.live_cluster(now), plain.live_cluster(now)
        _forget(without)
        kept_result, plain_result = kept.session(with_memory), plain.session(without)
        assert _decisions(kept_result, with_memory) == _decisions(plain_result, without), (
            f"seed {seed} step {step}"
        )
        kept.write_back(kept_result)
        plain.write_back(plain_result)


def test_turns_replay_only_with_a_memory_and_known_plugins() -> None:
    """Replays need the live snapshot's verdict memory and a configuration of
    ``REPLAY_PLUGINS``: a snapshot built afresh, or a plugin whose functions may read more
    (sla reads the clock), makes every turn run."""
    from scheduler.actions.placer import Placer

    cache = _gang_backlog(0)
    live = cache.live_cluster(T0)
    assert Retries.of(Session(live, CONF.tiers), Placer(Session(live, CONF.tiers))) is not None
    fresh = cache.fresh_cluster(T0)
    assert Retries.of(Session(fresh, CONF.tiers), Placer(Session(fresh, CONF.tiers))) is None
    with_sla = parse_conf(
        """\
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: sla}]
""",
        actions=ACTIONS.keys(),
        plugins=PLUGINS.keys(),
    )
    ssn = Session(live, with_sla.tiers)
    assert Retries.of(ssn, Placer(ssn)) is None


def test_a_change_told_as_no_news_is_derived_all_the_same() -> None:
    """``podgroup_changed(news=False)`` (the simulator's phase-keeping status writes) does not
    make ``has_news`` true, yet the next update takes the new PodGroup, as a fresh build."""
    cache = Cache(random.Random(3))  # noqa: S311 - seeded test data
    _add_stuck_gang(cache)
    cluster = cache.live_cluster(T0)
    result = cache.session(cluster)
    status = result.podgroup_status["ns/stuck"]  # its Unschedulable condition
    assert status.phase == "Inqueue"
    assert not cache.live.has_news({})
    pg = msgspec.structs.replace(cache.podgroups.items["ns/stuck"], status=status)
    cache.podgroups.items["ns/stuck"] = pg
    cache.live.podgroup_changed(pg, news=False)
    assert not cache.live.has_news({})
    cluster = cache.live_cluster(T0)
    assert cluster.jobs["ns/stuck"].podgroup is pg
    assert canonical(cluster) == canonical(cache.fresh_cluster(T0))
    cache.live.podgroup_changed(pg)
    assert cache.live.has_news({})
