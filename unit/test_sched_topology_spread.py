"""Pod topology spread in sessions: the predicates plugin filters by DoNotSchedule constraints,
nodeorder scores ScheduleAnyway ones, both claim exactly the pods with constraints as
cross-node; preempt counts victims as gone; and, over random clusters, no placement breaks a
DoNotSchedule constraint (a brute-force oracle replays the binds) and the decisions are the
same with the speed layer withheld."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.core import Pod, TopologySpreadConstraint
from caldera.api.meta import LabelSelector
from scheduler.api.topology_spread import CONSTRAINTS_NOT_MATCH
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.sched_fixtures import (
    binds,
    make_cluster,
    make_job,
    make_node,
    make_task,
    open_session,
    run,
    run_conf,
)

HOST = "kubernetes.io/hostname"


def zone_nodes(per_zone: Mapping[str, int], cpu: str = "4") -> list[NodeInfo]:
    """``n`` nodes per zone, named ``<zone>-<i>``."""
    return [
        make_node(f"{zone}-{i}", cpu, labels={"zone": zone, HOST: f"{zone}-{i}"})
        for zone, n in per_zone.items()
        for i in range(n)
    ]


def constraint(
    key: str = "zone", max_skew: int = 1, *, hard: bool = True, app: str = "web"
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable="DoNotSchedule" if hard else "ScheduleAnyway",
        label_selector=LabelSelector(match_labels={"app": app}),
    )


def shaped(
    task: TaskInfo, labels: Mapping[str, str], constraints: Sequence[TopologySpreadConstraint]
) -> TaskInfo:
    """The task with its pod labelled and constrained."""
    assert task.pod is not None
    pod: Pod = task.pod
    task.pod = msgspec.structs.replace(
        pod,
        metadata=msgspec.structs.replace(pod.metadata, labels=dict(labels)),
        spec=msgspec.structs.replace(pod.spec, topology_spread_constraints=tuple(constraints)),
    )
    return task


def spread_job(
    name: str,
    replicas: int,
    constraints: Sequence[TopologySpreadConstraint],
    *,
    app: str = "web",
    cpu: str = "1",
    min_available: int | None = None,
    priority: int = 0,
) -> JobInfo:
    tasks = [
        shaped(
            make_task(name, i, {"cpu": cpu}, priority=priority, pod_priority=priority),
            {"app": app},
            constraints,
        )
        for i in range(replicas)
    ]
    return make_job(name, tasks, min_available=min_available, priority=priority)


def zone_of(node: str) -> str:
    return node.rsplit("-", 1)[0]


def per_zone(placed: Mapping[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in placed.values():
        counts[zone_of(node)] = counts.get(zone_of(node), 0) + 1
    return counts


UNEVEN = {"a": 3, "b": 1, "c": 1}  # nodeorder alone puts 4/1/1 pods on these


def test_six_replicas_land_two_per_zone() -> None:
    """maxSkew 1 over three zones of three, one and one nodes: 2/2/2, where nodeorder alone
    (the filter switched off) spreads them over the nodes, 4/1/1."""
    cluster = make_cluster(zone_nodes(UNEVEN), [spread_job("j", 6, [constraint()])])
    assert per_zone(binds(run(cluster))) == {"a": 2, "b": 2, "c": 2}
    cluster = make_cluster(zone_nodes(UNEVEN), [spread_job("j", 6, [constraint()])])
    off = run(cluster, arguments={"predicates": {"predicate.PodTopologySpreadEnable": False}})
    assert per_zone(binds(off)) == {"a": 4, "b": 1, "c": 1}


def test_schedule_anyway_spreads_by_score() -> None:
    """The same job with ScheduleAnyway: nodeorder's batch score spreads it 2/2/2 too."""
    job = spread_job("j", 6, [constraint(hard=False)])
    cluster = make_cluster(zone_nodes(UNEVEN), [job])
    assert per_zone(binds(run(cluster))) == {"a": 2, "b": 2, "c": 2}
    job = spread_job("j", 6, [constraint(hard=False)])
    cluster = make_cluster(zone_nodes(UNEVEN), [job])
    plain = run(cluster, arguments={"nodeorder": {"podtopologyspread.weight": 0}})
    assert per_zone(binds(plain)) == {"a": 4, "b": 1, "c": 1}


def test_a_full_zone_leaves_the_extra_pods_pending_with_the_reason() -> None:
    """Zone c has room for one pod: once it holds it, a and b take one more each (skew 1),
    and the sixth pod would skew by 2 anywhere it fits: it waits with the reason."""
    nodes = [*zone_nodes({"a": 1, "b": 1}), *zone_nodes({"c": 1}, cpu="1")]
    job = spread_job("j", 6, [constraint()], min_available=3)
    ssn = run(make_cluster(nodes, [job]))
    assert per_zone(binds(ssn)) == {"a": 2, "b": 2, "c": 1}
    (waiting,) = job.tasks_in(TaskStatus.PENDING)
    assert f"2 {CONSTRAINTS_NOT_MATCH}" in waiting.fit_error
    assert "1 Insufficient cpu" in waiting.fit_error


def test_too_many_constraints_wait_with_the_field_named() -> None:
    many = [constraint(f"k{i}") for i in range(17)]
    job = spread_job("j", 1, many)
    ssn = run(make_cluster(zone_nodes({"a": 1}), [job]))
    assert binds(ssn) == {}
    (task,) = job.tasks.values()
    assert "spec.topologySpreadConstraints: Too many: 17" in task.fit_error


def test_cross_node_claims_exactly_the_pods_with_constraints() -> None:
    """Both plugins claim pods with constraints (either kind) and only those; for the others
    the filter passes and the batch scores are empty (their verdicts stay per node). A session
    none of whose pods has constraints registers no cross-node function at all."""
    plain = make_task("p", 0)
    hard = shaped(make_task("h", 0), {"app": "web"}, [constraint()])
    soft = shaped(make_task("s", 0), {"app": "web"}, [constraint(hard=False)])
    plain_only = make_cluster(zone_nodes({"a": 1, "b": 1}), [make_job("p", [plain])])
    none = open_session(
        plain_only,
        [PredicatesPlugin(Arguments("predicates", {}))],
        [NodeOrderPlugin(Arguments("nodeorder", {}))],
    )
    assert not none.has_cross_node
    cluster = make_cluster(
        zone_nodes({"a": 1, "b": 1}),
        [make_job("p", [make_task("p", 0)]), make_job("h", [hard, soft])],
    )
    ssn = open_session(
        cluster,
        [PredicatesPlugin(Arguments("predicates", {}))],
        [NodeOrderPlugin(Arguments("nodeorder", {}))],
    )
    assert not ssn.cross_node(plain)
    assert ssn.cross_node(hard)
    assert ssn.cross_node(soft)
    nodes = list(ssn.nodes.values())
    assert ssn.batch_node_scores(plain, nodes) == {}
    assert all(ssn.predicate(plain, n) is None for n in nodes)
    off = open_session(
        cluster,
        [PredicatesPlugin(Arguments("predicates", {"predicate.PodTopologySpreadEnable": False}))],
        [NodeOrderPlugin(Arguments("nodeorder", {"podtopologyspread.weight": 0}))],
    )
    assert not off.cross_node(hard)
    assert not off.cross_node(soft)


PREEMPT = """\
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


def test_preempt_counts_the_victims_as_gone() -> None:
    """A high-priority spread pod; zone a's node holds a low-priority pod of the same app,
    zone b's node is full of a high-priority pod of another app. Only evicting the victim in
    zone a makes room, and only with the victim gone does zone a pass the spread filter
    (1 + 1 - 0 > 1 with it)."""
    nodes = zone_nodes({"a": 1, "b": 1}, cpu="1")
    victim = shaped(
        make_task("low", 0, {"cpu": "1"}, status=TaskStatus.RUNNING, node="a-0"),
        {"app": "web"},
        [],
    )
    blocker = make_task("busy", 0, {"cpu": "1"}, status=TaskStatus.RUNNING, node="b-0")
    low = make_job("low", [victim], min_available=0, phase="Running")
    busy = make_job("busy", [blocker], priority=1000, phase="Running")
    high = spread_job("high", 1, [constraint()], priority=100)
    ssn = run_conf(make_cluster(nodes, [low, busy, high]), PREEMPT)
    assert [e.task.name for e in ssn.result.evictions] == ["low-0"]
    (task,) = high.tasks.values()
    assert (task.status, task.node_name) == (TaskStatus.PIPELINED, "a-0")


# --- over random clusters --------------------------------------------------------------------

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: overcommit}
  - {name: drf}
  - {name: predicates}
  - {name: proportion}
  - {name: nodeorder}
"""


# A random cluster as plain data: nodes (name, zone or "", cpu) and jobs (replicas, cpu, app,
# constraints as (key, maxSkew, hard, selected app, minDomains), minAvailable).
Kind = tuple[str, int, bool, str, int | None]
Data = tuple[list[tuple[str, str, str]], list[tuple[int, str, str, list[Kind], int]]]


@st.composite
def clusters(draw: st.DrawFn) -> Data:
    """Nodes (name, zone, cpu) and jobs (replicas, cpu, app, constraints, minAvailable) as
    plain data, built into a fresh cluster per run."""
    zones = draw(st.integers(1, 3))
    nodes = [
        (f"z{z}-{i}", f"z{z}", draw(st.sampled_from(["1", "2", "3"])))
        for z in range(zones)
        for i in range(draw(st.integers(1, 3)))
    ]
    if draw(st.booleans()):
        nodes.append(("bare-0", "", "2"))  # without the zone label
    jobs: list[tuple[int, str, str, list[Kind], int]] = []
    for _ in range(draw(st.integers(1, 4))):
        replicas = draw(st.integers(1, 4))
        kinds = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["zone", HOST]),
                    st.integers(1, 2),
                    st.booleans(),
                    st.sampled_from(["web", "db"]),
                    st.sampled_from([None, 2, 4]),
                ),
                max_size=2,
                unique_by=lambda k: (k[0], k[2]),
            )
        )
        jobs.append(
            (
                replicas,
                draw(st.sampled_from(["500m", "1"])),
                draw(st.sampled_from(["web", "db"])),
                kinds,
                draw(st.integers(1, replicas)),
            )
        )
    return nodes, jobs


def build(data: Data) -> ClusterInfo:
    node_data, job_data = data
    nodes = [
        make_node(name, cpu, labels={HOST: name, **({"zone": zone} if zone else {})})
        for name, zone, cpu in node_data
    ]
    jobs = []
    for j, raw in enumerate(job_data):
        replicas, cpu, app, kinds, min_available = raw
        constraints = [
            TopologySpreadConstraint(
                max_skew=skew,
                topology_key=key,
                when_unsatisfiable="DoNotSchedule" if hard else "ScheduleAnyway",
                label_selector=LabelSelector(match_labels={"app": sel}),
                min_domains=min_domains if hard else None,
            )
            for key, skew, hard, sel, min_domains in kinds
        ]
        tasks = [
            shaped(make_task(f"j{j}", i, {"cpu": cpu}), {"app": app}, constraints)
            for i in range(replicas)
        ]
        jobs.append(make_job(f"j{j}", tasks, min_available=min_available, created=j))
    return make_cluster(nodes, jobs, [QueueInfo("default")])


def session(data: Data, *, speedups: bool, layered: bool = True) -> Session:
    """One session; ``layered=False`` judges every node afresh for the pods with constraints
    (the placer's plain cross-node path) instead of layering over their classes' verdicts."""
    conf = parse_conf(CONF, actions=ACTIONS.keys(), plugins=PLUGINS.keys())
    ssn = Session(build(data), conf.tiers, speedups=speedups)
    if not layered:
        ssn.cross_node_layered = lambda task: False  # type: ignore[method-assign]
    run_session(ssn, conf, REGISTRY)
    return ssn


def violated(cluster: ClusterInfo, pod: Pod, node_name: str, placed: list[tuple[Pod, str]]) -> bool:
    """Brute force, from the definition: would ``pod`` on ``node_name`` break a DoNotSchedule
    constraint, given the pods ``placed`` (pod, node) before it?"""
    labels_of = {
        name: (n.node.metadata.labels if n.node is not None else {})
        for name, n in cluster.nodes.items()
    }
    for c in pod.spec.topology_spread_constraints:
        if c.when_unsatisfiable != "DoNotSchedule":
            continue
        selector = c.label_selector
        assert selector is not None
        hard_keys = [
            k.topology_key
            for k in pod.spec.topology_spread_constraints
            if k.when_unsatisfiable == "DoNotSchedule"
        ]
        eligible = [n for n, labels in labels_of.items() if all(k in labels for k in hard_keys)]
        domains = {labels_of[n][c.topology_key]: 0 for n in eligible}
        for other, where in placed:
            if where in eligible and all(
                other.metadata.labels.get(k) == v for k, v in selector.match_labels.items()
            ):
                domains[labels_of[where][c.topology_key]] += 1
        mine = labels_of[node_name].get(c.topology_key)
        if mine is None:
            return True
        minimum = 0 if len(domains) < (c.min_domains or 1) else min(domains.values(), default=0)
        self_match = all(pod.metadata.labels.get(k) == v for k, v in selector.match_labels.items())
        if domains.get(mine, 0) + self_match - minimum > c.max_skew:
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_no_placement_breaks_a_hard_constraint_and_speedups_change_nothing(
    data: Data,
) -> None:
    """Every bind, replayed in order against the pods bound before it, keeps every
    DoNotSchedule constraint; the same binds and fit errors without the speed layer, and with
    every node judged afresh for the pods with constraints."""
    fast = session(data, speedups=True)
    fits = {t.uid: t.fit_error for job in fast.jobs.values() for t in job.tasks.values()}
    for other in (session(data, speedups=False), session(data, speedups=True, layered=False)):
        assert binds(fast) == binds(other)
        other_fits = {t.uid: t.fit_error for j in other.jobs.values() for t in j.tasks.values()}
        assert fits == other_fits
    placed: list[tuple[Pod, str]] = []
    for bind in fast.result.binds:
        pod = bind.task.pod
        assert pod is not None
        assert not violated(fast.cluster, pod, bind.node, placed), bind.task.name
        placed.append((pod, bind.node))


def test_the_oracle_can_fail() -> None:
    """The oracle catches a placement that breaks the skew: a second pod in a zone while the
    other zone has none."""
    cluster = make_cluster(zone_nodes({"a": 1, "b": 1}), [])
    pod = shaped(make_task("j", 0), {"app": "web"}, [constraint()]).pod
    assert pod is not None
    assert violated(cluster, pod, "a-0", [(pod, "a-0")])
    assert not violated(cluster, pod, "b-0", [(pod, "a-0")])


def test_a_job_templates_constraints_reach_its_pods_unchanged() -> None:
    """The job controller copies the template's topologySpreadConstraints into each pod as
    written, and the pod model reads them back (the scheduler's view of the pod)."""
    from caldera.api.core import POD_DECODER
    from caldera.api.meta import ObjectMeta
    from caldera.api.volcano import Job, JobSpec, TaskSpec
    from controllers.job.pods import build_pod

    written = [
        {
            "maxSkew": 2,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            "minDomains": 3,
            "nodeAffinityPolicy": "Ignore",
            "nodeTaintsPolicy": "Honor",
            "matchLabelKeys": ["pod-template-hash"],
        }
    ]
    template = {
        "metadata": {"labels": {"app": "w"}},
        "spec": {"topologySpreadConstraints": written, "containers": [{"name": "c"}]},
    }
    task = TaskSpec(name="w", replicas=2, template=template)
    job = Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="u"),
        spec=JobSpec(tasks=(task,), min_available=2),
    )
    body = build_pod(job, task, 1).pod
    assert body["spec"]["topologySpreadConstraints"] == written
    pod = POD_DECODER.decode(msgspec.json.encode(body))
    (read,) = pod.spec.topology_spread_constraints
    assert (read.max_skew, read.min_domains, read.node_taints_policy) == (2, 3, "Honor")
    assert read.match_label_keys == ("pod-template-hash",)
    assert msgspec.json.decode(msgspec.json.encode(pod.spec.topology_spread_constraints)) == written


def test_a_task_is_layered_only_when_every_claim_is() -> None:
    """Pods with constraints are layered (their class's node-local verdicts reused) while
    only the spread functions claim them; another plugin's plain cross-node claim on the same
    pod sends it to the placer's afresh path; and the filter passes in node-local mode."""
    spread_pod = shaped(make_task("h", 0), {"app": "web"}, [constraint()])
    plain = make_task("p", 0)
    cluster = make_cluster(zone_nodes({"a": 1, "b": 1}), [make_job("h", [spread_pod])])
    predicates = PredicatesPlugin(Arguments("predicates", {}))
    ssn = open_session(cluster, [predicates], [NodeOrderPlugin(Arguments("nodeorder", {}))])
    assert ssn.cross_node_layered(spread_pod)
    assert not ssn.cross_node_layered(plain)
    ssn.nodes["a-0"].add_task(
        shaped(make_task("x", 0, status=TaskStatus.RUNNING, node="a-0"), {"app": "web"}, [])
    )
    ssn.node_changes.append("a-0")
    assert ssn.predicate(spread_pod, ssn.nodes["a-0"]) == CONSTRAINTS_NOT_MATCH
    ssn.node_local = True
    assert ssn.predicate(spread_pod, ssn.nodes["a-0"]) is None
    ssn.node_local = False
    ssn.add_cross_node_fn("other", lambda task: task is spread_pod)
    assert ssn.cross_node(spread_pod)
    assert not ssn.cross_node_layered(spread_pod)
