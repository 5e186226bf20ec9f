"""Inter-pod affinity in sessions: the predicates plugin's filter, nodeorder's batch score, the
cross-node claim's contract, and a property against a brute-force oracle written here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caldera.api.core import (
    Affinity,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    WeightedPodAffinityTerm,
)
from caldera.api.meta import LabelSelector
from scheduler.actions.preempt import PreemptAction
from scheduler.api.pod_affinity import AFFINITY_MISMATCH, ANTI_AFFINITY_MISMATCH
from scheduler.api.types import ClusterInfo, NodeInfo, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.plugin import Arguments, CallbackKind, PluginOption
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from unit.sched_fixtures import (
    DEFAULT_PLUGINS,
    REGISTRY,
    StandInGang,
    StandInPriority,
    binds,
    make_cluster,
    make_job,
    make_node,
    make_task,
    open_session,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str, cpu: str = "8") -> NodeInfo:
    return make_node(name, cpu, "16Gi", labels={HOST: name, ZONE: zone})


def term(key: str, **match: str) -> PodAffinityTerm:
    return PodAffinityTerm(label_selector=LabelSelector(match_labels=match), topology_key=key)


def shaped(
    task: TaskInfo,
    labels: Mapping[str, str],
    *,
    required: Sequence[PodAffinityTerm] = (),
    anti: Sequence[PodAffinityTerm] = (),
    preferred: Sequence[WeightedPodAffinityTerm] = (),
) -> TaskInfo:
    """``task`` with its pod given ``labels`` and inter-pod terms."""
    pod = task.pod
    assert pod is not None
    affinity = None
    if required or anti or preferred:
        affinity = Affinity(
            pod_affinity=PodAffinity(
                required_during_scheduling_ignored_during_execution=tuple(required),
                preferred_during_scheduling_ignored_during_execution=tuple(preferred),
            ),
            pod_anti_affinity=PodAntiAffinity(
                required_during_scheduling_ignored_during_execution=tuple(anti)
            ),
        )
    task.pod = msgspec.structs.replace(
        pod,
        metadata=msgspec.structs.replace(pod.metadata, labels=dict(labels)),
        spec=msgspec.structs.replace(pod.spec, affinity=affinity),
    )
    return task


def session(
    cluster: ClusterInfo,
    *,
    speedups: bool = True,
    arguments: Mapping[str, Mapping[str, object]] | None = None,
) -> Session:
    args = arguments or {}
    conf = SchedulerConf(
        actions=("enqueue", "allocate", "backfill"),
        tiers=tuple(
            tuple(PluginOption(p, dict(args.get(p, {}))) for p in tier) for tier in DEFAULT_PLUGINS
        ),
    )
    ssn = Session(cluster, conf.tiers, speedups=speedups)
    run_session(ssn, conf, REGISTRY)
    return ssn


def one_per_host(replicas: int, nodes: Sequence[NodeInfo]) -> ClusterInfo:
    tasks = [
        shaped(make_task("web", i), {"app": "web"}, anti=[term(HOST, app="web")])
        for i in range(replicas)
    ]
    return make_cluster(nodes, [make_job("web", tasks, min_available=1)])


def test_required_anti_affinity_spreads_replicas_one_per_node() -> None:
    cluster = one_per_host(4, [node("n0", "a"), node("n1", "a"), node("n2", "b")])
    ssn = session(cluster)
    placed = binds(ssn)
    assert len(placed) == 3
    assert sorted(placed.values()) == ["n0", "n1", "n2"]
    (error,) = ssn.jobs["ns/web"].fit_errors.values()
    assert error == f"0/3 nodes are available: 3 {ANTI_AFFINITY_MISMATCH}."


def test_anti_affinity_switched_off_packs_them() -> None:
    cluster = one_per_host(4, [node("n0", "a"), node("n1", "a"), node("n2", "b")])
    ssn = session(cluster, arguments={"predicates": {"predicate.PodAffinityEnable": False}})
    assert len(binds(ssn)) == 4


def test_required_affinity_lands_in_the_zone_of_the_pod_it_names() -> None:
    cache = make_task("cache", 0, status=TaskStatus.RUNNING, node="b1")
    shaped(cache, {"app": "cache"})
    nodes = [node("a0", "a", "64"), node("a1", "a", "64"), node("b0", "b", "2"), node("b1", "b")]
    web = shaped(make_task("web", 0), {"app": "web"}, required=[term(ZONE, app="cache")])
    cluster = make_cluster(nodes, [make_job("cache", [cache]), make_job("web", [web])])
    # Resources alone would pick a roomy zone-a node.
    assert binds(session(cluster))["web-0"] in ("b0", "b1")


def test_required_affinity_to_nothing_waits_with_kube_schedulers_reason() -> None:
    web = shaped(make_task("web", 0), {"app": "web"}, required=[term(ZONE, app="cache")])
    cluster = make_cluster([node("a0", "a"), node("b0", "b")], [make_job("web", [web])])
    ssn = session(cluster)
    assert binds(ssn) == {}
    assert (
        ssn.jobs["ns/web"].fit_errors[web.uid] == f"0/2 nodes are available: 2 {AFFINITY_MISMATCH}."
    )


def test_preferred_affinity_outweighs_resources() -> None:
    cache = shaped(make_task("cache", 0, status=TaskStatus.RUNNING, node="b0"), {"app": "cache"})
    web = shaped(
        make_task("web", 0),
        {"app": "web"},
        preferred=[WeightedPodAffinityTerm(weight=50, pod_affinity_term=term(ZONE, app="cache"))],
    )
    nodes = [node("a0", "a", "64"), node("b0", "b", "8")]
    cluster = make_cluster(nodes, [make_job("cache", [cache]), make_job("web", [web])])
    assert binds(session(cluster)) == {"web-0": "b0"}
    cache2 = shaped(make_task("cache", 0, status=TaskStatus.RUNNING, node="b0"), {"app": "cache"})
    web2 = shaped(
        make_task("web", 0),
        {"app": "web"},
        preferred=[WeightedPodAffinityTerm(weight=50, pod_affinity_term=term(ZONE, app="cache"))],
    )
    unweighted = make_cluster(
        [node("a0", "a", "64"), node("b0", "b", "8")],
        [make_job("cache", [cache2]), make_job("web", [web2])],
    )
    off = session(unweighted, arguments={"nodeorder": {"podaffinity.weight": 0}})
    assert binds(off) == {"web-0": "a0"}


def plugins_session(cluster: ClusterInfo, *, inter_pod: bool = True) -> Session:
    predicates = {} if inter_pod else {"predicate.PodAffinityEnable": False}
    nodeorder = {} if inter_pod else {"podaffinity.weight": 0}
    return open_session(
        cluster,
        [
            PredicatesPlugin(Arguments("predicates", predicates)),
            NodeOrderPlugin(Arguments("nodeorder", nodeorder)),
        ],
    )


def test_a_cluster_without_terms_registers_nothing() -> None:
    """Nothing more than with inter-pod affinity switched off (topology spread registers
    its own functions either way)."""
    kinds = (
        CallbackKind.PREDICATE,
        CallbackKind.CROSS_NODE,
        CallbackKind.BATCH_NODE_ORDER,
        CallbackKind.ALLOCATE_HANDLER,
    )

    def registered(inter_pod: bool) -> list[int]:
        cluster = make_cluster([node("n0", "a")], [make_job("j", [make_task("j", 0)])])
        ssn = plugins_session(cluster, inter_pod=inter_pod)
        return [len(ssn._registered(kind)) for kind in kinds]

    assert registered(True) == registered(False)


def test_pods_no_term_names_pass_everywhere_and_score_nothing() -> None:
    """The cross-node contract: a pod the claim leaves out has its verdicts reused."""
    guard = shaped(
        make_task("guard", 0, status=TaskStatus.RUNNING, node="n0"),
        {"app": "guard"},
        anti=[term(HOST, app="web")],
    )
    web = shaped(make_task("web", 0), {"app": "web"})
    other = shaped(make_task("other", 0), {"app": "db"})
    cluster = make_cluster(
        [node("n0", "a"), node("n1", "a")],
        [make_job("guard", [guard]), make_job("web", [web]), make_job("other", [other])],
    )
    ssn = plugins_session(cluster)
    assert (ssn.cross_node(web), ssn.cross_node(other), ssn.cross_node(guard)) == (
        True,
        False,
        True,
    )
    nodes = list(ssn.nodes.values())
    assert [ssn.predicate(other, n) for n in nodes] == [None, None]
    assert ssn.batch_node_scores(other, nodes) == {}
    assert ssn.predicate(web, ssn.nodes["n0"]) is not None
    assert ssn.predicate(web, ssn.nodes["n1"]) is None


def test_allocations_and_discards_in_the_session_count_at_once() -> None:
    cluster = one_per_host(2, [node("n0", "a"), node("n1", "a")])
    ssn = plugins_session(cluster)
    first, second = sorted(ssn.jobs["ns/web"].tasks.values(), key=lambda t: t.name)
    n0 = ssn.nodes["n0"]
    assert ssn.predicate(second, n0) is None
    stmt = ssn.statement()
    stmt.allocate(first, "n0")
    assert ssn.predicate(second, n0) == ANTI_AFFINITY_MISMATCH
    stmt.discard()
    assert ssn.predicate(second, n0) is None


# ---- property: no placed pod breaks a required term; speedups change nothing ------------------

APPS = ("web", "db", "cache")
KEYS = (HOST, ZONE)
TERMS = st.builds(lambda key, app: term(key, app=app), st.sampled_from(KEYS), st.sampled_from(APPS))
POD = st.fixed_dictionaries(
    {
        "app": st.sampled_from(APPS),
        "namespace": st.sampled_from(("ns", "ns2")),
        "required": st.lists(TERMS, max_size=1),
        "anti": st.lists(TERMS, max_size=2),
        "running_on": st.none() | st.integers(0, 5),
    }
)


def build(spec: list[dict[str, object]], zones: list[str]) -> ClusterInfo:
    nodes = [node(f"n{i}", zone, "4") for i, zone in enumerate(zones)]
    jobs = []
    for i, p in enumerate(spec):
        at = p["running_on"]
        running = isinstance(at, int) and at < len(nodes)
        namespace = str(p["namespace"])
        task = make_task(
            f"j{i}",
            0,
            {"cpu": "1"},
            namespace=namespace,
            status=TaskStatus.RUNNING if running else TaskStatus.PENDING,
            node=f"n{at}" if running else "",
        )
        shaped(
            task,
            {"app": str(p["app"])},
            required=p["required"],  # type: ignore[arg-type]
            anti=p["anti"],  # type: ignore[arg-type]
        )
        jobs.append(make_job(f"j{i}", [task], namespace=namespace, created=i))
    return make_cluster(nodes, jobs)


def violations(ssn: Session, placed_now: set[str]) -> list[str]:
    """Brute force over the final placement: a pod placed in the session whose required
    affinity has no matching pod in a term's domain, or a pair of pods (one placed in the
    session) in one domain of a required anti-affinity term of either naming the other."""
    where = {
        t.key: (t, ssn.nodes[t.node_name])
        for n in ssn.nodes.values()
        for t in n.tasks.values()
        if t.status not in (TaskStatus.RELEASING, TaskStatus.PENDING)
    }

    def label(n: NodeInfo, key: str) -> str | None:
        assert n.node is not None
        return n.node.metadata.labels.get(key)

    def names(term_: PodAffinityTerm, owner: TaskInfo, other: TaskInfo) -> bool:
        spaces = term_.namespaces or (owner.namespace,)
        assert term_.label_selector is not None
        assert other.pod is not None
        wanted = term_.label_selector.match_labels.items()
        return other.namespace in spaces and wanted <= other.pod.metadata.labels.items()

    def terms(t: TaskInfo) -> tuple[tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
        a = t.pod.spec.affinity if t.pod is not None else None
        if a is None or a.pod_affinity is None or a.pod_anti_affinity is None:
            return (), ()
        return (
            a.pod_affinity.required_during_scheduling_ignored_during_execution,
            a.pod_anti_affinity.required_during_scheduling_ignored_during_execution,
        )

    found = []
    for key in placed_now:
        task, at = where[key]
        required, _ = terms(task)
        for t in required:
            value = label(at, t.topology_key)
            if value is None or not any(
                names(t, task, other) and label(n, t.topology_key) == value
                for other, n in where.values()
            ):
                found.append(f"{key} affinity {t.topology_key}")
    for key_a, (a, node_a) in where.items():
        for key_b, (b, node_b) in where.items():
            if key_a == key_b or not ({key_a, key_b} & placed_now):
                continue
            for t in terms(a)[1]:
                value = label(node_a, t.topology_key)
                if value is not None and value == label(node_b, t.topology_key) and names(t, a, b):
                    found.append(f"{key_a} anti-affinity to {key_b}")
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(POD, min_size=1, max_size=9),
    st.lists(st.sampled_from(("a", "b")), min_size=1, max_size=5),
)
def test_sessions_break_no_required_term_and_speedups_change_nothing(
    spec: list[dict[str, object]], zones: list[str]
) -> None:
    outcomes = []
    for speedups in (True, False):
        ssn = session(build(spec, zones), speedups=speedups)
        placed_now = {b.task.key for b in ssn.result.binds}
        assert violations(ssn, placed_now) == []
        outcomes.append(binds(ssn))
    assert outcomes[0] == outcomes[1]


def test_preempt_evicts_the_pod_whose_domain_the_preemptor_refuses() -> None:
    """The preemptor fits n0's free cpu, but its anti-affinity refuses the low-priority web
    pod there (the only node): preempt evicts that pod and pipelines it there."""
    low_web = shaped(
        make_task("low", 0, {"cpu": "1"}, status=TaskStatus.RUNNING, node="n0"), {"app": "web"}
    )
    # Victims go in victim order (the lower task priority first) until the predicates pass.
    low_db = shaped(
        make_task("low", 1, {"cpu": "1"}, priority=5, status=TaskStatus.RUNNING, node="n0"),
        {"app": "db"},
    )
    high = shaped(make_task("high", 0, {"cpu": "1"}), {"app": "x"}, anti=[term(HOST, app="web")])
    low = make_job("low", [low_web, low_db], priority=1, min_available=0)
    cluster = make_cluster([node("n0", "a", "4")], [low, make_job("high", [high], priority=10)])
    ssn = open_session(
        cluster,
        [StandInGang(), StandInPriority()],
        [
            PredicatesPlugin(Arguments("predicates", {})),
            NodeOrderPlugin(Arguments("nodeorder", {})),
        ],
    )
    PreemptAction().execute(ssn)
    assert [e.task.name for e in ssn.result.evictions] == ["low-0"]
    assert high.status == TaskStatus.PIPELINED
    assert high.node_name == "n0"
