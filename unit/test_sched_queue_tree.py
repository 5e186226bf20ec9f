"""The capacity plugin's queue limits (scheduler/plugins/queue_tree.py): table-driven cases of
deserved, capability and real capability, flat and hierarchical, and hypothesis invariants
over random trees."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.resources import Resources
from scheduler.plugins.queue_tree import ROOT, TOP, QueueTerms, queue_tree


def cpu(amount: int) -> Resources:
    return Resources({"cpu": amount * 1000})


def res(cpu_: int, gpu: int | None = None) -> Resources:
    amounts = {"cpu": cpu_ * 1000}
    if gpu is not None:
        amounts["nvidia.com/gpu"] = gpu * 1000
    return Resources(amounts)


TOTAL = res(16, 4)


def terms(name: str, parent: str = "", **kw: Resources | None) -> QueueTerms:
    return QueueTerms(name=name, parent=parent, **kw)  # type: ignore[arg-type]


def test_flat_real_capability_reserves_every_guarantee() -> None:
    """Without hierarchy: total minus all guarantees plus the queue's own, under its
    capability; deserved held to that, raised to the guarantee."""
    tree = queue_tree(
        [
            terms("a", deserved=cpu(10), guarantee=cpu(4)),
            terms("b", deserved=cpu(12), capability=cpu(6)),
            terms("c", guarantee=cpu(2)),
        ],
        TOTAL,
        hierarchy=False,
    )
    a, b, c = (tree.limits[n] for n in "abc")
    assert a.real_capability == res(14, 4)  # 16 - 6 + 4
    assert b.real_capability == res(6, 4)  # 16 - 6, capped at 6
    assert c.real_capability == res(12, 4)
    assert a.deserved == cpu(10)
    assert b.deserved == cpu(6)  # 12 held to the real capability
    assert c.deserved == cpu(2)  # nothing deserved: the guarantee
    assert a.parent == b.parent == TOP
    assert a.ancestors == ()


def test_tree_inherits_capability_and_reserves_sibling_guarantees() -> None:
    """With hierarchy: a child inherits what it does not set and is held to its parent's;
    real capability is the parent's minus the parent's children's guarantees, plus its own."""
    tree = queue_tree(
        [
            terms(ROOT),
            terms("org", deserved=cpu(16), capability=res(12, 2), guarantee=cpu(4)),
            terms("team-a", parent="org", deserved=cpu(8), guarantee=cpu(3)),
            terms("team-b", parent="org", deserved=cpu(8), capability=cpu(20)),
            terms("default"),
        ],
        TOTAL,
        hierarchy=True,
    )
    limits = tree.limits
    assert limits[ROOT].real_capability == TOTAL
    assert limits["org"].parent == ROOT
    assert limits["org"].ancestors == (ROOT,)
    assert limits["team-a"].ancestors == (ROOT, "org")
    assert limits["org"].real_capability == res(12, 2)  # 16 - 4 + 4, capped at 12
    assert limits["team-a"].capability == res(12, 2)  # inherited
    assert limits["team-b"].capability == res(12, 2)  # 20 held to the parent's 12
    assert limits["team-a"].real_capability == res(12, 2)  # 12 - 3 + 3
    assert limits["team-b"].real_capability == res(9, 2)  # 12 - 3
    assert limits["team-b"].deserved == cpu(8)
    assert limits["org"].deserved == cpu(12)  # 16 held to what it may hold
    assert limits["default"].real_capability == res(12, 4)  # 16 - org's guarantee
    assert not limits["org"].leaf
    assert limits["team-a"].leaf
    assert limits[ROOT].children == ("default", "org")


def test_parent_deserves_what_its_children_do_when_unset() -> None:
    """A parent that sets no deserved of a resource deserves the sum of its children's; a
    child is held to its parent's deserved where the parent sets one."""
    tree = queue_tree(
        [
            terms(ROOT),
            terms("org"),
            terms("a", parent="org", deserved=res(3, 1)),
            terms("b", parent="org", deserved=cpu(2), guarantee=cpu(4)),
            terms("capped", deserved=cpu(5)),
            terms("child", parent="capped", deserved=cpu(7)),
        ],
        TOTAL,
        hierarchy=True,
    )
    assert tree.limits["b"].deserved == cpu(4)  # raised to the guarantee
    assert tree.limits["org"].deserved == res(7, 1)  # 3 + 4, and a's gpu
    assert tree.limits[ROOT].deserved == res(12, 1)  # org's 7 and capped's 5
    assert tree.limits["child"].deserved == cpu(5)  # held to its parent's 5


def test_detached_queues_and_their_descendants() -> None:
    """A missing parent or a loop detaches the queue and everything below it; the rest of the
    tree is unaffected."""
    tree = queue_tree(
        [
            terms(ROOT),
            terms("orphan", parent="gone"),
            terms("grandchild", parent="orphan"),
            terms("x", parent="y"),
            terms("y", parent="x"),
            terms("fine", deserved=cpu(1)),
        ],
        TOTAL,
        hierarchy=True,
    )
    assert tree.detached["orphan"] == "its parent queue gone does not exist"
    assert tree.detached["grandchild"] == (
        "its ancestor queue orphan is detached: its parent queue gone does not exist"
    )
    assert tree.detached["x"] == "its parent chain is a loop (x, y)"
    assert tree.detached["y"] == tree.detached["x"]
    assert set(tree.limits) == {ROOT, "fine"}


def test_without_root_queue_the_top_is_the_parent() -> None:
    """Queues that name root while no root queue exists hang under the cluster itself."""
    tree = queue_tree([terms("a", deserved=cpu(2))], TOTAL, hierarchy=True)
    assert tree.limits["a"].parent == TOP
    assert tree.limits["a"].real_capability == TOTAL


def test_resources_the_cluster_lacks_are_not_deserved() -> None:
    """Deserving a resource no node has leaves nothing to deserve (unless guaranteed)."""
    tree = queue_tree(
        [terms("a", deserved=Resources({"example.com/fpga": 2000}))], TOTAL, hierarchy=False
    )
    assert tree.limits["a"].deserved.is_empty()


# ---- invariants over random trees -------------------------------------------------------------

NAMES = [ROOT, "q1", "q2", "q3", "q4", "q5", "q6", "q7"]


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[QueueTerms], Resources, bool]:
    hierarchy = draw(st.booleans())
    count = draw(st.integers(1, len(NAMES)))
    names = NAMES[:count]
    amount = st.integers(0, 20_000)
    listed: list[QueueTerms] = []
    for index, name in enumerate(names):
        # A parent among the earlier queues (a tree), sometimes a missing one.
        choices = ["", *names[:index]] if name != ROOT else [""]
        parent = draw(st.sampled_from([*choices, "missing"] if index else choices))
        capability = draw(st.one_of(st.none(), st.builds(lambda c: Resources({"cpu": c}), amount)))
        listed.append(
            QueueTerms(
                name=name,
                parent=parent,
                deserved=Resources({"cpu": draw(amount)}),
                guarantee=Resources({"cpu": draw(st.integers(0, 4_000))}),
                capability=capability,
            )
        )
    total = Resources({"cpu": draw(st.integers(0, 60_000))})
    return listed, total, hierarchy


@given(trees())
def test_tree_invariants(case: tuple[list[QueueTerms], Resources, bool]) -> None:
    """For every attached queue: the guarantee is deserved; capability never exceeds the
    parent's; real capability never exceeds the capability, nor the parent's real capability
    when the parent's children's guarantees fit in it; deserved stays within the real
    capability and the parent's deserved when the guarantee does; every queue is either
    attached under the top or detached; the input order does not matter."""
    listed, total, hierarchy = case
    tree = queue_tree(listed, total, hierarchy=hierarchy)
    by_name = {t.name: t for t in listed}
    assert set(tree.limits) | set(tree.detached) == set(by_name)
    assert not set(tree.limits) & set(tree.detached)
    for name, limits in tree.limits.items():
        term = by_name[name]
        g = term.guarantee.get("cpu")
        assert limits.deserved.get("cpu") >= g
        if "cpu" in limits.capability:
            assert limits.real_capability.get("cpu") <= limits.capability.get("cpu")
        if limits.parent == TOP:
            assert limits.ancestors == ()
            continue
        parent = tree.limits[limits.parent]
        assert limits.ancestors == (*parent.ancestors, parent.name)
        if "cpu" in parent.capability:
            assert limits.capability.get("cpu") <= parent.capability.get("cpu")
        siblings = sum(by_name[c].guarantee.get("cpu") for c in parent.children)
        if siblings <= parent.real_capability.get("cpu"):
            assert limits.real_capability.get("cpu") <= parent.real_capability.get("cpu")
            assert limits.real_capability.get("cpu") >= g or "cpu" in limits.capability
        if g <= limits.real_capability.get("cpu"):
            assert limits.deserved.get("cpu") <= limits.real_capability.get("cpu")
        if "cpu" in parent.deserved and g <= parent.deserved.get("cpu"):
            assert limits.deserved.get("cpu") <= parent.deserved.get("cpu")
    shuffled = list(listed)
    random.Random(len(listed)).shuffle(shuffled)  # noqa: S311 - test data
    again = queue_tree(shuffled, total, hierarchy=hierarchy)
    assert dict(again.limits) == dict(tree.limits)
    assert dict(again.detached) == dict(tree.detached)


@given(trees())
def test_valid_specs_keep_their_deserved(case: tuple[list[QueueTerms], Resources, bool]) -> None:
    """Where the specs obey the webhook's rules (guarantees within deserved, children's
    deserved within the parent's, everything within the cluster), every queue deserves
    exactly what its spec says."""
    listed, _, hierarchy = case
    # Make the specs valid: no capability, deserved >= guarantee, a cluster large enough,
    # and (with hierarchy) each parent deserving at least its children's sum.
    fixed = [
        QueueTerms(
            name=t.name,
            parent=t.parent if t.parent != "missing" else "",
            deserved=t.deserved.max(t.guarantee),
            guarantee=t.guarantee,
        )
        for t in listed
    ]
    if hierarchy:
        by_name = {t.name: t for t in fixed}
        for name in reversed([t.name for t in fixed]):  # children come after their parents
            t = by_name[name]
            parent = t.parent or ROOT
            if t.name != ROOT and parent in by_name:
                p = by_name[parent]
                by_name[parent] = QueueTerms(
                    name=p.name,
                    parent=p.parent,
                    deserved=p.deserved + t.deserved,
                    guarantee=p.guarantee,
                )
        fixed = [by_name[t.name] for t in fixed]
    total = Resources({"cpu": 10**9})
    tree = queue_tree(fixed, total, hierarchy=hierarchy)
    for term in fixed:
        if term.name in tree.limits:
            expected = term.deserved.get("cpu")
            assert tree.limits[term.name].deserved.get("cpu") == expected, term.name


@pytest.mark.parametrize("hierarchy", [False, True])
def test_empty_input(hierarchy: bool) -> None:
    """No queues: no limits, nothing detached."""
    tree = queue_tree([], TOTAL, hierarchy=hierarchy)
    assert not tree.limits
    assert not tree.detached
