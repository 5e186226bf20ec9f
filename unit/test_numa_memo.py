"""numa-aware's memo across sessions (scheduler.plugins.numa_memo): a layout is reused only for
the object it was read from, a pod's facts only for equal containers and policy of the same
task template, and a fact number is never given to two different facts."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import Pod, PodSpec
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import KUBE_GROUP_NAME_KEY, TASK_SPEC_KEY
from scheduler.plugins import numa_memo
from scheduler.plugins.numa_memo import NumaMemo
from scheduler.plugins.numa_policy import SINGLE_NUMA_NODE, node_numa, pod_numa
from unit.test_sched_numa_aware import container, pod, topology


def in_task(made: Pod, task: str = "worker", group: str = "pg") -> Pod:
    notes = {**made.metadata.annotations, KUBE_GROUP_NAME_KEY: group, TASK_SPEC_KEY: task}
    return msgspec.structs.replace(
        made, metadata=msgspec.structs.replace(made.metadata, annotations=notes)
    )


def test_a_layout_is_read_again_only_for_a_new_object() -> None:
    memo = NumaMemo()
    first = {"a": topology("a"), "b": topology("b", free="0-3")}
    read = memo.refresh_layouts(first)
    assert read["a"].layout == node_numa(first["a"])
    assert read["a"].shape == read["b"].shape  # the free CPUs are not the shape
    again = memo.refresh_layouts(first)
    assert again["a"] is read["a"]
    assert again["b"] is read["b"]
    changed = {"a": topology("a", free="4-7")}  # b gone, a replaced by the informer
    moved = memo.refresh_layouts(changed)
    assert set(moved) == {"a"}
    assert moved["a"].layout.free == frozenset(range(4, 8))


def test_an_unreadable_numatopology_has_no_layout() -> None:
    memo = NumaMemo()
    assert memo.refresh_layouts({"a": topology("a", free="0-x")}) == {}


def test_pods_of_one_template_share_their_facts() -> None:
    memo = NumaMemo()
    first = in_task(pod(container("2"), policy=SINGLE_NUMA_NODE))
    second = in_task(pod(container("2"), policy=SINGLE_NUMA_NODE))
    assert memo.pod_facts(first) is memo.pod_facts(second)
    assert memo.pod_facts(first).facts == pod_numa(first)


def test_a_template_with_other_containers_or_policy_gets_its_own_facts() -> None:
    memo = NumaMemo()
    kept = memo.pod_facts(in_task(pod(container("2"), policy=SINGLE_NUMA_NODE)))
    bigger = in_task(pod(container("4"), policy=SINGLE_NUMA_NODE))
    other_policy = in_task(pod(container("2"), policy="restricted"))
    not_guaranteed = in_task(pod(container("2", limits=False), policy=SINGLE_NUMA_NODE))
    for changed in (bigger, other_policy, not_guaranteed):
        found = memo.pod_facts(changed)
        assert found.facts == pod_numa(changed) != kept.facts
        assert found.number != kept.number


def test_a_pod_outside_a_podgroup_is_read_alone() -> None:
    memo = NumaMemo()
    alone = Pod(metadata=ObjectMeta(name="p", namespace="ns"), spec=PodSpec())
    assert memo.pod_facts(alone).facts == pod_numa(alone)
    assert memo.templates == {}


@given(st.lists(st.sampled_from(["1", "2", "3", "500m"]), min_size=1, max_size=40))
def test_numbers_name_one_fact_each_even_past_the_bound(cpus: list[str]) -> None:
    memo = NumaMemo()
    original = numa_memo.MAX_TEMPLATES
    numa_memo.MAX_TEMPLATES = 2  # forget often
    try:
        named: dict[int, object] = {}
        for i, cpu in enumerate(cpus):
            made = in_task(pod(container(cpu), policy=SINGLE_NUMA_NODE), task=str(i % 3))
            found = memo.pod_facts(made)
            assert found.facts == pod_numa(made)
            assert named.setdefault(found.number, found.facts) == found.facts
    finally:
        numa_memo.MAX_TEMPLATES = original


def test_shape_numbers_stay_distinct_past_the_bound() -> None:
    memo = NumaMemo()
    original = numa_memo.MAX_TEMPLATES
    numa_memo.MAX_TEMPLATES = 1  # every new shape forgets the others
    try:
        first = memo.refresh_layouts({"a": topology("a", per_node=4)})
        both = memo.refresh_layouts({"a": first["a"].source, "b": topology("b", per_node=2)})
    finally:
        numa_memo.MAX_TEMPLATES = original
    assert both["a"] is first["a"]
    assert both["a"].shape != both["b"].shape
