"""In-memory object store with named indexers, fed by a reflector.

The store is the informer cache: a dict from key to the latest known object plus any number of
named secondary indexes (pods by node, pods by job, podgroups by queue). It is a purely
computational structure with no I/O, no locks, no tasks and no awaits: every method runs to
completion inside one call, so under asyncio nothing can interleave with a half-applied change and
no lock is needed. It must only be used from the thread running the event loop that owns it.

Change methods (`upsert`, `remove`, `replace`) return what changed instead of calling handlers
themselves, so that the caller (the reflector) updates the store first and then notifies handlers
with `dispatch`: a handler that reads the store always sees the state the event describes.

Invariants:

- Objects are immutable values (frozen msgspec Structs). The store never mutates or copies them and
  callers must never mutate what it returns; handing out the stored instance is what makes reads
  free. Index values of an object are therefore a pure function of the object, so an index entry
  is removed by recomputing the index function over the old object (index functions must be
  deterministic and must not read anything but their argument).
- Every key in an index bucket is a key of the store, and every stored object is in exactly the
  buckets its index functions return. Index functions run before anything is changed, so one that
  raises leaves the store untouched.
- Empty buckets are dropped, so the indexes never outgrow the objects they point at.
- Iteration order is insertion order (dicts), so a given sequence of events always yields the same
  `list()` and `by_index()` order: the simulator and the scheduler depend on reproducibility.

Resource versions are opaque strings (Kubernetes forbids comparing them), so the store only
records the latest one it was told about; it never orders them.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

__all__ = [
    "Delta",
    "DeltaKind",
    "HandlerFuncs",
    "IndexFunc",
    "KubeObject",
    "ObjectMeta",
    "ResourceEventHandler",
    "Store",
    "dispatch",
    "meta_namespace_key",
    "split_key",
]


class ObjectMeta(Protocol):
    """The slice of `metadata` the store reads. Read-only, so frozen Struct fields satisfy it."""

    @property
    def name(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def resource_version(self) -> str | None: ...
    @property
    def uid(self) -> str | None: ...


class KubeObject(Protocol):
    """Any Kubernetes object model: something with a `metadata` as above."""

    @property
    def metadata(self) -> ObjectMeta: ...


T = TypeVar("T", bound=KubeObject)
T_contra = TypeVar("T_contra", bound=KubeObject, contravariant=True)

IndexFunc = Callable[[T], Iterable[str]]
"""Returns the index values of an object (none, one or several). Must be pure and deterministic."""


def meta_namespace_key(obj: KubeObject) -> str:
    """Return `namespace/name`, or `name` for a cluster-scoped object (client-go's key format).

    Raises `ValueError` for an object without a name: it cannot be stored under a stable key.
    """
    meta = obj.metadata
    if not meta.name:
        raise ValueError(f"object has no metadata.name: {obj!r}")
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def split_key(key: str) -> tuple[str | None, str]:
    """Split a key made by `meta_namespace_key` into `(namespace or None, name)`."""
    namespace, sep, name = key.partition("/")
    if not sep:
        return None, key
    if not namespace or not name or "/" in name:
        raise ValueError(f"malformed object key {key!r}")
    return namespace, name


class DeltaKind(enum.Enum):
    """What happened to one key."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Delta(Generic[T]):
    """One change to the store, as handlers should see it.

    `old` is None exactly for ADDED and `new` is None exactly for DELETED.
    `final_state_unknown` marks a DELETED found by a relist rather than seen on the watch:
    `old` is then the last object the store knew, which may be older than the deleted one
    (client-go's `DeletedFinalStateUnknown`).
    """

    kind: DeltaKind
    key: str
    old: T | None
    new: T | None
    final_state_unknown: bool = False

    def __post_init__(self) -> None:
        has_old, has_new = self.old is not None, self.new is not None
        expected = {
            DeltaKind.ADDED: (False, True),
            DeltaKind.MODIFIED: (True, True),
            DeltaKind.DELETED: (True, False),
        }[self.kind]
        if (has_old, has_new) != expected:
            raise ValueError(f"{self.kind.value} delta with old={self.old!r} new={self.new!r}")
        if self.final_state_unknown and self.kind is not DeltaKind.DELETED:
            raise ValueError("final_state_unknown only applies to DELETED deltas")


class ResourceEventHandler(Protocol[T_contra]):
    """Receives store changes. Implementations must be fast and synchronous: they run inline in
    the reflector's loop and should do nothing but enqueue keys (queue keys, not events).
    """

    def on_add(self, obj: T_contra) -> None: ...
    def on_update(self, old: T_contra, new: T_contra) -> None: ...
    def on_delete(self, obj: T_contra) -> None: ...


def _ignore(*_: object) -> None:
    return None


# Frozen but not slotted: ``HandlerFuncs[Pod](...)`` sets ``__orig_class__`` on the instance,
# which a slotted class refuses.
@dataclass(frozen=True)
class HandlerFuncs(Generic[T]):
    """A `ResourceEventHandler` built from plain functions; a missing one ignores its events."""

    add: Callable[[T], None] = _ignore
    update: Callable[[T, T], None] = _ignore
    delete: Callable[[T], None] = _ignore

    def on_add(self, obj: T) -> None:
        self.add(obj)

    def on_update(self, old: T, new: T) -> None:
        self.update(old, new)

    def on_delete(self, obj: T) -> None:
        self.delete(obj)


def dispatch(delta: Delta[T], handlers: Iterable[ResourceEventHandler[T]]) -> None:
    """Deliver one delta to every handler, in order.

    A failing handler must not starve the others of the event (they would miss it for good, as the
    store has already moved on), so all handlers are called and their exceptions are then raised
    together as one `ExceptionGroup` for the caller to log.
    """
    errors: list[Exception] = []
    for handler in handlers:
        try:
            if delta.new is None and delta.old is not None:
                handler.on_delete(delta.old)
            elif delta.old is None and delta.new is not None:
                handler.on_add(delta.new)
            elif delta.old is not None and delta.new is not None:
                handler.on_update(delta.old, delta.new)
        except Exception as e:  # one handler's bug must not hide the event from the others
            errors.append(e)
    if errors:
        raise ExceptionGroup(f"{len(errors)} event handler(s) failed on {delta.key}", errors)


class Store(Generic[T]):
    """Objects by key plus named indexes; see the module docstring for the invariants."""

    def __init__(self, *, key_func: Callable[[T], str] = meta_namespace_key) -> None:
        self._key_func = key_func
        self._items: dict[str, T] = {}
        self._index_funcs: dict[str, IndexFunc[T]] = {}
        # index name -> index value -> keys; the inner dict is an insertion-ordered set.
        self._indexes: dict[str, dict[str, dict[str, None]]] = {}
        self._has_synced = False
        self._resource_version = ""

    # --- reads -------------------------------------------------------------------------------

    def key_of(self, obj: T) -> str:
        """The key this store files `obj` under."""
        return self._key_func(obj)

    def get(self, key: str) -> T | None:
        """The object stored under `key`, or None."""
        return self._items.get(key)

    def list(self) -> builtins.list[T]:
        """A snapshot of all objects, in insertion order."""
        return builtins.list(self._items.values())

    def keys(self) -> builtins.list[str]:
        """A snapshot of all keys, in insertion order."""
        return builtins.list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def has_synced(self) -> bool:
        """True once the first full list has been stored (`replace` was called)."""
        return self._has_synced

    @property
    def resource_version(self) -> str:
        """The latest resource version recorded; "" before the first list."""
        return self._resource_version

    def set_resource_version(self, resource_version: str) -> None:
        """Record a resource version that came without an object change (a watch BOOKMARK)."""
        self._resource_version = resource_version

    # --- indexes -----------------------------------------------------------------------------

    def add_indexer(self, name: str, fn: IndexFunc[T]) -> None:
        """Add a named index, built at once over the current contents and kept up to date.

        Raises `ValueError` if an index with that name exists.
        """
        if name in self._index_funcs:
            raise ValueError(f"indexer {name!r} already exists")
        # Compute everything before registering, so a raising fn leaves no half-built index.
        index: dict[str, dict[str, None]] = {}
        for key, obj in self._items.items():
            for value in fn(obj):
                index.setdefault(value, {})[key] = None
        self._index_funcs[name] = fn
        self._indexes[name] = index

    def index_keys(self, name: str, value: str) -> builtins.list[str]:
        """Keys of the objects whose index `name` contains `value`. Raises `KeyError` if unknown."""
        return builtins.list(self._index(name).get(value, ()))

    def by_index(self, name: str, value: str) -> builtins.list[T]:
        """Objects whose index `name` contains `value`. Raises `KeyError` for an unknown index."""
        return [self._items[key] for key in self._index(name).get(value, ())]

    def index_values(self, name: str) -> builtins.list[str]:
        """All values with at least one object in index `name`."""
        return builtins.list(self._index(name))

    def _index(self, name: str) -> dict[str, dict[str, None]]:
        try:
            return self._indexes[name]
        except KeyError:
            raise KeyError(f"no indexer named {name!r}") from None

    def _index_values(self, obj: T) -> dict[str, frozenset[str]]:
        return {name: frozenset(fn(obj)) for name, fn in self._index_funcs.items()}

    def _reindex(
        self,
        key: str,
        old: dict[str, frozenset[str]] | None,
        new: dict[str, frozenset[str]] | None,
    ) -> None:
        for name, index in self._indexes.items():
            before = old[name] if old is not None else frozenset()
            after = new[name] if new is not None else frozenset()
            # Only touch the buckets that change: most updates (status) move no index value.
            for value in before - after:
                bucket = index[value]
                del bucket[key]
                if not bucket:
                    del index[value]
            for value in after - before:
                index.setdefault(value, {})[key] = None

    # --- changes -----------------------------------------------------------------------------

    def upsert(self, obj: T) -> T | None:
        """Store `obj` (from a watch ADDED or MODIFIED) and return the object it replaced, if any.

        The store does not judge whether this is news: comparing the returned object's resource
        version with the new one to suppress a repeated delivery is the caller's decision.
        """
        key = self._key_func(obj)
        new_values = self._index_values(obj)
        old = self._items.get(key)
        old_values = self._index_values(old) if old is not None else None
        self._items[key] = obj
        self._reindex(key, old_values, new_values)
        if obj.metadata.resource_version:
            self._resource_version = obj.metadata.resource_version
        return old

    def remove(self, key: str, *, resource_version: str | None = None) -> T | None:
        """Drop `key` (a watch DELETED) and return the object it held, or None if it was absent.

        `resource_version` is that of the DELETED event, recorded when given.
        """
        old = self._items.pop(key, None)
        if old is not None:
            self._reindex(key, self._index_values(old), None)
        if resource_version:
            self._resource_version = resource_version
        return old

    def replace(self, objs: Iterable[T], resource_version: str) -> builtins.list[Delta[T]]:
        """Make the contents exactly `objs` (a fresh LIST) and return the deltas that got there.

        - a key not stored before: ADDED;
        - a stored key whose resourceVersion differs: MODIFIED;
        - a stored key with the same resourceVersion: nothing (the stored instance is kept);
        - a stored key whose uid differs (deleted and recreated while we were not watching):
          DELETED of the old object with `final_state_unknown`, then ADDED of the new one, which is
          what a watch would have shown and what lets handlers see a new object is a new object;
        - a stored key missing from the list: DELETED with `final_state_unknown`, carrying the
          last known object (we never saw its final state).

        Deltas come in list order, then the deletions in store order. If a key appears twice in
        `objs` the last one wins. Marks the store synced and records `resource_version`.
        """
        fresh: dict[str, T] = {}
        for obj in objs:
            fresh[self._key_func(obj)] = obj
        # Index every fresh object before changing anything, so a raising index fn aborts cleanly.
        fresh_values = {key: self._index_values(obj) for key, obj in fresh.items()}

        deltas: builtins.list[Delta[T]] = []
        for key, new in fresh.items():
            old = self._items.get(key)
            if old is None:
                deltas.append(Delta(DeltaKind.ADDED, key, None, new))
            elif _differs(old.metadata.uid, new.metadata.uid):
                deltas.append(Delta(DeltaKind.DELETED, key, old, None, final_state_unknown=True))
                deltas.append(Delta(DeltaKind.ADDED, key, None, new))
            elif old.metadata.resource_version != new.metadata.resource_version:
                deltas.append(Delta(DeltaKind.MODIFIED, key, old, new))
            else:
                continue
            self._items[key] = new
            old_values = self._index_values(old) if old is not None else None
            self._reindex(key, old_values, fresh_values[key])

        for key in [key for key in self._items if key not in fresh]:
            old = self._items.pop(key)
            self._reindex(key, self._index_values(old), None)
            deltas.append(Delta(DeltaKind.DELETED, key, old, None, final_state_unknown=True))

        self._resource_version = resource_version
        self._has_synced = True
        return deltas


def _differs(a: str | None, b: str | None) -> bool:
    # An empty uid means "unknown" (a slim test model, say), not "different".
    return bool(a) and bool(b) and a != b
