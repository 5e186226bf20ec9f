"""Tests of informers.store: keys, indexes, change results, relist diffs and handler dispatch."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from informers.store import (
    Delta,
    DeltaKind,
    HandlerFuncs,
    ResourceEventHandler,
    Store,
    dispatch,
    meta_namespace_key,
    split_key,
)


class Meta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    namespace: str | None = None
    resource_version: str | None = None
    uid: str | None = None
    labels: dict[str, str] = {}


class Pod(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    metadata: Meta
    node_name: str = ""


def pod(
    name: str,
    rv: str = "1",
    *,
    ns: str | None = "default",
    node: str = "",
    uid: str | None = None,
    labels: dict[str, str] | None = None,
) -> Pod:
    meta = Meta(
        name=name, namespace=ns, resource_version=rv, uid=uid or f"uid-{name}", labels=labels or {}
    )
    return Pod(metadata=meta, node_name=node)


def by_node(obj: Pod) -> Iterable[str]:
    return [obj.node_name] if obj.node_name else []


def by_labels(obj: Pod) -> Iterable[str]:
    return [f"{k}={v}" for k, v in obj.metadata.labels.items()]


def test_key_is_namespace_slash_name_or_name() -> None:
    """Namespaced objects key as ns/name, cluster-scoped ones as name, and keys split back."""
    assert meta_namespace_key(pod("a", ns="ns1")) == "ns1/a"
    assert meta_namespace_key(pod("node-1", ns=None)) == "node-1"
    assert meta_namespace_key(pod("node-1", ns="")) == "node-1"
    assert split_key("ns1/a") == ("ns1", "a")
    assert split_key("node-1") == (None, "node-1")
    with pytest.raises(ValueError, match="malformed"):
        split_key("a/b/c")


def test_key_requires_a_name() -> None:
    """An object without a name cannot be keyed."""
    with pytest.raises(ValueError, match=r"metadata\.name"):
        meta_namespace_key(pod(""))


def test_upsert_get_list_remove() -> None:
    """upsert returns the replaced object, remove the removed one; reads reflect both."""
    store: Store[Pod] = Store()
    a1, a2, b = pod("a", "1"), pod("a", "2"), pod("b", "3")
    assert store.upsert(a1) is None
    assert store.upsert(b) is None
    assert store.upsert(a2) is a1
    assert store.get("default/a") is a2
    assert store.list() == [a2, b]
    assert store.keys() == ["default/a", "default/b"]
    assert len(store) == 2
    assert "default/b" in store
    assert store.remove("default/b") is b
    assert store.remove("default/b") is None
    assert store.keys() == ["default/a"]


def test_resource_version_tracks_latest_change() -> None:
    """The store records the RV of each upsert, delete, bookmark and list, in arrival order."""
    store: Store[Pod] = Store()
    assert store.resource_version == ""
    store.upsert(pod("a", "7"))
    assert store.resource_version == "7"
    store.remove("default/a", resource_version="9")
    assert store.resource_version == "9"
    store.set_resource_version("12")
    assert store.resource_version == "12"
    store.replace([], "15")
    assert store.resource_version == "15"


def test_indexers_follow_update_and_delete() -> None:
    """An index moves a key between buckets on update, drops it on delete, and drops empty
    buckets."""
    store: Store[Pod] = Store()
    store.add_indexer("node", by_node)
    store.upsert(pod("a", "1", node="n1"))
    store.upsert(pod("b", "1", node="n1"))
    assert store.index_keys("node", "n1") == ["default/a", "default/b"]

    moved = pod("a", "2", node="n2")
    store.upsert(moved)
    assert store.index_keys("node", "n1") == ["default/b"]
    assert store.by_index("node", "n2") == [moved]

    store.remove("default/b")
    assert store.index_keys("node", "n1") == []
    assert store.index_values("node") == ["n2"]

    store.upsert(pod("a", "3"))  # unscheduled again: in no bucket
    assert store.index_values("node") == []


def test_multi_value_index_and_backfill() -> None:
    """An indexer added late indexes existing objects, and one object can sit in many buckets."""
    store: Store[Pod] = Store()
    a = pod("a", labels={"job": "j1", "task": "w"})
    b = pod("b", labels={"job": "j1", "task": "ps"})
    store.upsert(a)
    store.upsert(b)
    store.add_indexer("labels", by_labels)
    assert store.by_index("labels", "job=j1") == [a, b]
    assert store.by_index("labels", "task=ps") == [b]
    assert store.by_index("labels", "task=none") == []


def test_indexer_errors() -> None:
    """Duplicate indexer names are rejected and unknown index names raise KeyError."""
    store: Store[Pod] = Store()
    store.add_indexer("node", by_node)
    with pytest.raises(ValueError, match="already exists"):
        store.add_indexer("node", by_node)
    with pytest.raises(KeyError, match="no indexer"):
        store.by_index("nope", "x")


def test_raising_index_function_leaves_store_unchanged() -> None:
    """If an index function raises, neither the objects nor the other indexes change."""

    def picky(obj: Pod) -> Iterable[str]:
        if obj.node_name == "bad":
            raise RuntimeError("boom")
        return [obj.node_name]

    store: Store[Pod] = Store()
    store.add_indexer("node", by_node)
    store.add_indexer("picky", picky)
    good = pod("a", "1", node="n1")
    store.upsert(good)
    with pytest.raises(RuntimeError):
        store.upsert(pod("a", "2", node="bad"))
    with pytest.raises(RuntimeError):
        store.replace([pod("a", "3", node="bad")], "3")
    assert store.list() == [good]
    assert store.by_index("node", "n1") == [good]
    assert not store.has_synced


def test_replace_computes_the_diff() -> None:
    """replace yields ADDED, MODIFIED (RV changed), DELETED (missing, last state unknown) and
    nothing for unchanged objects."""
    store: Store[Pod] = Store()
    same, changed, gone = pod("same", "1"), pod("changed", "1"), pod("gone", "1")
    for obj in (same, changed, gone):
        store.upsert(obj)
    changed2, new = pod("changed", "5"), pod("new", "6")

    deltas = store.replace([pod("same", "1"), changed2, new], "10")

    assert deltas == [
        Delta(DeltaKind.MODIFIED, "default/changed", changed, changed2),
        Delta(DeltaKind.ADDED, "default/new", None, new),
        Delta(DeltaKind.DELETED, "default/gone", gone, None, final_state_unknown=True),
    ]
    assert store.get("default/same") is same  # unchanged: the stored instance is kept
    assert store.keys() == ["default/same", "default/changed", "default/new"]


def test_replace_reports_recreated_object_as_delete_then_add() -> None:
    """An object deleted and recreated under the same name while unwatched (new uid) shows as
    DELETED of the old one followed by ADDED of the new one."""
    store: Store[Pod] = Store()
    store.add_indexer("node", by_node)
    old = pod("a", "1", uid="u1", node="n1")
    store.upsert(old)
    new = pod("a", "4", uid="u2", node="n2")
    assert store.replace([new], "4") == [
        Delta(DeltaKind.DELETED, "default/a", old, None, final_state_unknown=True),
        Delta(DeltaKind.ADDED, "default/a", None, new),
    ]
    assert store.by_index("node", "n2") == [new]
    assert store.index_values("node") == ["n2"]


def test_has_synced_after_first_replace() -> None:
    """has_synced is False until the first replace, even if objects were upserted."""
    store: Store[Pod] = Store()
    store.upsert(pod("a"))
    synced_before = store.has_synced
    store.replace([], "1")
    # One assert over both reads: mypy would narrow the property and call the second unreachable.
    assert (synced_before, store.has_synced, len(store)) == (False, True, 0)


def test_delta_rejects_inconsistent_shapes() -> None:
    """A Delta's old/new presence must match its kind."""
    with pytest.raises(ValueError, match="ADDED"):
        Delta(DeltaKind.ADDED, "k", pod("a"), pod("a"))
    with pytest.raises(ValueError, match="DELETED"):
        Delta(DeltaKind.DELETED, "k", None, None)
    with pytest.raises(ValueError, match="final_state_unknown"):
        Delta(DeltaKind.ADDED, "k", None, pod("a"), final_state_unknown=True)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def on_add(self, obj: Pod) -> None:
        self.calls.append(("add", "", obj.metadata.name))

    def on_update(self, old: Pod, new: Pod) -> None:
        self.calls.append(("update", old.metadata.name, new.metadata.name))

    def on_delete(self, obj: Pod) -> None:
        self.calls.append(("delete", obj.metadata.name, ""))


def test_dispatch_calls_the_matching_handler_method() -> None:
    """dispatch maps ADDED to on_add, MODIFIED to on_update(old, new), DELETED to on_delete(old)."""
    rec = Recorder()
    a, b = pod("a"), pod("b")
    handlers: list[ResourceEventHandler[Pod]] = [rec]
    dispatch(Delta(DeltaKind.ADDED, "default/a", None, a), handlers)
    dispatch(Delta(DeltaKind.MODIFIED, "default/a", a, b), handlers)
    dispatch(Delta(DeltaKind.DELETED, "default/b", b, None, final_state_unknown=True), handlers)
    assert rec.calls == [("add", "", "a"), ("update", "a", "b"), ("delete", "b", "")]


def test_dispatch_isolates_failing_handlers() -> None:
    """Every handler receives the event even if an earlier one raises; errors come back grouped."""

    def explode(obj: Pod) -> None:
        raise RuntimeError(obj.metadata.name)

    seen: list[str] = []
    handlers: list[ResourceEventHandler[Pod]] = [
        HandlerFuncs(add=explode),
        HandlerFuncs(add=lambda obj: seen.append(obj.metadata.name)),
    ]
    with pytest.raises(ExceptionGroup) as info:
        dispatch(Delta(DeltaKind.ADDED, "default/a", None, pod("a")), handlers)
    assert seen == ["a"]
    assert [str(e) for e in info.value.exceptions] == ["a"]


# --- property: replace makes the store equal the list, and its deltas explain the change ---------

# A small key space so that old and new lists overlap a lot; uid and node derive from the version
# so that equal (key, rv) means an equal object, as in Kubernetes.
_objects = st.builds(
    lambda name, rv, recreated: pod(
        name, str(rv), uid=f"{name}-{int(recreated)}", node=f"n{rv % 3}" if rv % 4 else ""
    ),
    st.sampled_from("abcdef"),
    st.integers(min_value=1, max_value=4),
    st.booleans(),
)


def _contents(objs: Iterable[Pod]) -> dict[str, Pod]:
    return {meta_namespace_key(obj): obj for obj in objs}


@given(old=st.lists(_objects, max_size=8), new=st.lists(_objects, max_size=8))
def test_replace_property(old: list[Pod], new: list[Pod]) -> None:
    """After replace the store equals the list, indexes match a rebuild, and applying the deltas
    to the old contents yields the new contents."""
    store: Store[Pod] = Store()
    store.add_indexer("node", by_node)
    for obj in old:
        store.upsert(obj)
    before = dict(zip(store.keys(), store.list(), strict=True))

    deltas = store.replace(new, "100")

    expected = _contents(new)
    assert dict(zip(store.keys(), store.list(), strict=True)) == expected

    rebuilt: dict[str, set[str]] = {}
    for key, obj in expected.items():
        for value in by_node(obj):
            rebuilt.setdefault(value, set()).add(key)
    assert {v: set(store.index_keys("node", v)) for v in store.index_values("node")} == rebuilt

    applied = dict(before)
    for delta in deltas:
        if delta.kind is DeltaKind.ADDED:
            assert delta.key not in applied
            assert delta.new is not None
            applied[delta.key] = delta.new
        elif delta.kind is DeltaKind.MODIFIED:
            assert applied[delta.key] == delta.old
            assert delta.new is not None
            assert (
                delta.new.metadata.resource_version != applied[delta.key].metadata.resource_version
            )
            applied[delta.key] = delta.new
        else:
            assert applied.pop(delta.key) == delta.old
    assert applied == expected

    # Nothing is reported for objects that did not change.
    unchanged = {k for k, v in expected.items() if before.get(k) == v}
    assert not unchanged & {d.key for d in deltas}


def test_handler_funcs_can_be_subscripted_at_the_call() -> None:
    """``HandlerFuncs[T](...)`` works as well as the annotated form."""
    seen: list[Pod] = []
    handler = HandlerFuncs[Pod](add=seen.append)
    handler.on_add(pod("x"))
    handler.on_update(pod("a"), pod("b"))
    assert [p.metadata.name for p in seen] == ["x"]
