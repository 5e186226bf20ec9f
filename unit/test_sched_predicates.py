"""The predicates plugin and the resource check: which nodes a pod may use, with Kubernetes'
reasons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from caldera.api.core import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from caldera.api.resources import Resources
from scheduler.api.fit import insufficient_resources, shortfall
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.predicates import PredicatesPlugin
from unit.sched_fixtures import (
    binds,
    expr,
    make_cluster,
    make_job,
    make_node,
    make_task,
    run,
)

UNTOLERATED = "node(s) had untolerated taint {dedicated: gpu}"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
GPU_TAINT = Taint(key="dedicated", value="gpu", effect="NoSchedule")


def _verdict(task: TaskInfo, node: NodeInfo, others: Sequence[TaskInfo] = ()) -> str | None:
    jobs = [make_job("t", [task])]
    if others:
        jobs.append(make_job("o", list(others)))
    ssn = Session(make_cluster([node], jobs), [])
    PredicatesPlugin(Arguments("predicates", {})).on_session_open(ssn)
    return ssn.predicate(task, ssn.nodes[node.name])


def _pod(**fields: Any) -> TaskInfo:
    return make_task("t", 0, **fields)


@pytest.mark.parametrize(
    ("tolerations", "effect", "expected"),
    [
        ((), "NoSchedule", UNTOLERATED),
        ((), "NoExecute", UNTOLERATED),
        ((), "PreferNoSchedule", None),
        ((Toleration(key="dedicated", operator="Equal", value="gpu"),), "NoSchedule", None),
        ((Toleration(key="dedicated", value="cpu"),), "NoSchedule", UNTOLERATED),
        ((Toleration(key="dedicated", operator="Exists"),), "NoSchedule", None),
        ((Toleration(operator="Exists"),), "NoExecute", None),
        (
            (Toleration(key="dedicated", operator="Exists", effect="NoExecute"),),
            "NoSchedule",
            UNTOLERATED,
        ),
        (
            (Toleration(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"),),
            "NoSchedule",
            None,
        ),
    ],
)
def test_taints_and_tolerations(
    tolerations: tuple[Toleration, ...], effect: str, expected: str | None
) -> None:
    """NoSchedule and NoExecute taints need a matching toleration (Equal compares values,
    Exists ignores them, an empty key with Exists tolerates all, effects must agree)."""
    node = make_node("n0", taints=[Taint(key="dedicated", value="gpu", effect=effect)])
    assert _verdict(_pod(tolerations=tolerations), node) == expected


@pytest.mark.parametrize(
    ("selector", "terms", "expected"),
    [
        ({"zone": "a"}, None, None),
        ({"zone": "b"}, None, AFFINITY),
        ({"missing": "x"}, None, AFFINITY),
        (None, [expr("zone", "In", "a", "c")], None),
        (None, [expr("zone", "In", "c")], AFFINITY),
        (None, [expr("zone", "NotIn", "c")], None),
        (None, [expr("absent", "NotIn", "c")], None),
        (None, [expr("zone", "Exists")], None),
        (None, [expr("zone", "DoesNotExist")], AFFINITY),
        (None, [expr("absent", "DoesNotExist")], None),
        (None, [expr("cores", "Gt", "8")], None),
        (None, [expr("cores", "Gt", "16")], AFFINITY),
        (None, [expr("cores", "Lt", "17")], None),
        (None, [expr("zone", "Gt", "1")], AFFINITY),  # not a number
        (None, [expr("zone", "In", "c"), expr("zone", "In", "a")], None),  # terms are ORed
        (None, [NodeSelectorTerm()], AFFINITY),  # an empty term matches nothing
        (
            None,
            [
                NodeSelectorTerm(
                    match_expressions=(
                        NodeSelectorRequirement(key="zone", operator="In", values=("a",)),
                        NodeSelectorRequirement(key="cores", operator="Lt", values=("4",)),
                    )
                )
            ],
            AFFINITY,  # expressions of one term are ANDed
        ),
        (
            None,
            [
                NodeSelectorTerm(
                    match_fields=(
                        NodeSelectorRequirement(key="metadata.name", operator="In", values=("n0",)),
                    )
                )
            ],
            None,
        ),
        (
            None,
            [
                NodeSelectorTerm(
                    match_fields=(
                        NodeSelectorRequirement(
                            key="metadata.name", operator="NotIn", values=("n0",)
                        ),
                    )
                )
            ],
            AFFINITY,
        ),
        ({"zone": "a"}, [expr("zone", "In", "b")], AFFINITY),  # both must hold
    ],
)
def test_node_selector_and_required_affinity(
    selector: Mapping[str, str] | None, terms: list[NodeSelectorTerm] | None, expected: str | None
) -> None:
    """nodeSelector and required node affinity, every operator and matchFields."""
    node = make_node("n0", labels={"zone": "a", "cores": "16"})
    assert _verdict(_pod(node_selector=selector, required=terms), node) == expected


def test_host_port_conflict() -> None:
    """A host port another pod on the node holds is refused; other ports are fine."""
    holder = make_task("o", 0, host_ports=[8080], status=TaskStatus.RUNNING, node="n0")
    clash = _verdict(_pod(host_ports=[8080]), make_node("n0"), [holder])
    assert clash == "node(s) didn't have free ports for the requested pod ports"
    holder = make_task("o", 0, host_ports=[8080], status=TaskStatus.RUNNING, node="n0")
    assert _verdict(_pod(host_ports=[9090]), make_node("n0"), [holder]) is None


def test_unschedulable_not_ready_and_pod_count() -> None:
    """Cordoned nodes, nodes that are not ready and full nodes are refused."""
    assert _verdict(_pod(), make_node("n0", unschedulable=True)) == "node(s) were unschedulable"
    tolerant = _pod(
        tolerations=(Toleration(key="node.kubernetes.io/unschedulable", operator="Exists"),)
    )
    assert _verdict(tolerant, make_node("n0", unschedulable=True)) is None
    assert _verdict(_pod(), make_node("n0", ready=False)) == "node(s) were not ready"
    other = make_task("o", 0, status=TaskStatus.RUNNING, node="n0")
    assert _verdict(_pod(), make_node("n0", max_pods=1), [other]) == "Too many pods"


def test_resources_with_extended_ones() -> None:
    """Each short resource is named, GPUs included; a node without GPUs has none."""
    request = Resources.from_list({"cpu": "2", "nvidia.com/gpu": "1", "memory": "1Gi"})
    assert insufficient_resources(request, Resources.from_list({"cpu": "1", "memory": "2Gi"})) == [
        "Insufficient cpu",
        "Insufficient nvidia.com/gpu",
    ]
    node = make_node("n0", "4", extra={"nvidia.com/gpu": "2"})
    assert shortfall(request, node) == []
    node.used = Resources.from_list({"nvidia.com/gpu": "2"})
    assert shortfall(request, node) == ["Insufficient nvidia.com/gpu"]
    node.releasing = Resources.from_list({"nvidia.com/gpu": "1"})
    assert shortfall(request, node) == []  # fits once the releasing GPU is free


def test_gpu_pods_go_to_gpu_nodes() -> None:
    """Allocation puts a GPU pod on the node that has GPUs left."""
    gpu_task = make_task("g", 0, {"cpu": "1", "nvidia.com/gpu": "1"})
    nodes = [make_node("a"), make_node("b", extra={"nvidia.com/gpu": "1"})]
    ssn = run(make_cluster(nodes, [make_job("g", [gpu_task])]))
    assert binds(ssn) == {"g-0": "b"}


def test_taint_reason_names_the_taint() -> None:
    """The reason quotes key and value as kube-scheduler does."""
    assert _verdict(_pod(), make_node("n0", taints=[GPU_TAINT])) == UNTOLERATED


def test_filters_can_be_switched_off() -> None:
    """Volcano's predicate.*Enable arguments turn the taint, affinity and port filters off."""
    args = {
        "predicate.TaintTolerationEnable": "false",
        "predicate.NodeAffinityEnable": False,
        "predicate.NodePortsEnable": False,
    }
    holder = make_task("o", 0, host_ports=[80], status=TaskStatus.RUNNING, node="n0")
    task = _pod(node_selector={"zone": "x"}, host_ports=[80])
    node = make_node("n0", taints=[GPU_TAINT])
    ssn = Session(make_cluster([node], [make_job("t", [task]), make_job("o", [holder])]), [])
    PredicatesPlugin(Arguments("predicates", args)).on_session_open(ssn)
    assert ssn.predicate(task, node) is None
    assert _verdict(_pod(node_selector={"zone": "x"}), make_node("n0")) == AFFINITY
