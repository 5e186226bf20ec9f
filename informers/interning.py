"""Sharing the equal parts of cached pods (hash-consing), so the pod cache stays small.

Every process caches every pod of the cluster, and most of a decoded pod repeats what other pods
hold: the pods of one task have equal containers, tolerations, owner references and container
statuses, and strings such as "True", "Running", a namespace, a node, a queue or a timestamp recur
in many pods. msgspec decodes each occurrence into a new object. `PodInterner` is the pod
informer's transform (client-go's ``SetTransform``): it returns a pod equal to the one it is
given, in which each such part is one instance shared with every other pod holding an equal one,
so the cache pays for it once. What a Volcano job's pod still holds alone is its name, uid,
resourceVersion and IP, its label and annotation dicts (the task index differs), its conditions
(their transition times differ) and the structs holding all that (docs/benchmarks.md,
"Informer cache: pods").

Soundness:

- The result equals (``==``) its input; only identity differs, and no code compares cached
  parts by identity.
- What is shared is immutable: frozen Structs, tuples, strings. The exceptions are dicts inside
  shared parts (a container's resource lists, a node selector, an overhead, the raw pod
  (anti-)affinity) and the one empty dict standing for every absent label, annotation, node
  selector and overhead: model dicts are read-only by contract (`caldera.api.meta`: copy
  before changing), and sharing makes that contract essential, since a change would show in
  every pod sharing the dict. Labels and annotations are fresh dicts per pod (only their
  strings are shared).
- The tables hold what cached pods use, not what they once used. Strings, tuples and dicts
  cannot be weakly referenced, so each table is swept instead: when it has doubled since its
  last sweep, the entries only the table still refers to (by `sys.getrefcount`, against a
  probe entry measured the same way) are dropped. A table is thus at most about twice the live
  distinct values, the sweeps cost O(1) per new entry amortized, and a pod decoded long after
  another still shares that pod's timestamps and names. Should reference counts not tell
  (another interpreter), a table past `hard_limit` entries starts over; a dropped
  value stays alive as long as pods use it, and an equal value seen later gets a new instance.
- Strings are shared through these tables rather than `sys.intern`: interned strings were
  immortal in the CPython 3.12 releases before the fix of python/cpython#113993 (backported in
  August 2024), so interning unbounded values such as timestamps would leak there.

Keys: strings, and the parts without dicts (owner references, tolerations, scheduling gates,
container statuses), key their table by value; Python's ``1 == 1.0 == True`` does not matter
there because each of their fields decodes to one type. The parts holding dicts (containers,
node selector, overhead, affinity, topology spread constraints) are keyed by their JSON
encoding, which is exact: a quantity of 1 and one of "1" or 1.0 stay apart.

A purely computational object with no I/O; one per informer (its tables are its state), used
from the event loop's thread only.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from typing import Any, Final, TypeVar

import msgspec

from caldera.api.core import Pod, PodCondition, PodSpec, PodStatus
from caldera.api.meta import ObjectMeta

__all__ = ["HARD_LIMIT", "SWEEP_FLOOR", "PodInterner"]

SWEEP_FLOOR: Final = 4096
"""A table is not swept below this many entries: a few hundred KB at most, not worth a pass."""
HARD_LIMIT: Final = 1 << 20
"""Entries past which a table starts over even after a sweep (see the module docstring)."""

_K = TypeVar("_K", bound=Hashable)
_replace = msgspec.structs.replace
# The instances a pod decoded without metadata, spec or status holds (msgspec shares them).
_POD_DEFAULTS: Final = {f.name: f.default for f in msgspec.structs.fields(Pod)}
_DEFAULT_META: Final = _POD_DEFAULTS["metadata"]
_DEFAULT_SPEC: Final = _POD_DEFAULTS["spec"]
_DEFAULT_STATUS: Final = _POD_DEFAULTS["status"]


class PodInterner:
    """The pod informer's transform: returns the pod with its parts shared (see the module
    docstring). Call it on every pod before it enters the cache."""

    __slots__ = (
        "_empty",
        "_encode",
        "_encoded",
        "_encoded_limit",
        "_floor",
        "_hard_limit",
        "_strings",
        "_strings_limit",
        "_values",
        "_values_limit",
    )

    def __init__(self, *, sweep_floor: int = SWEEP_FLOOR, hard_limit: int = HARD_LIMIT) -> None:
        if not 1 <= sweep_floor <= hard_limit:
            raise ValueError(
                f"need 1 <= sweep_floor <= hard_limit, not {sweep_floor}, {hard_limit}"
            )
        self._floor, self._hard_limit = sweep_floor, hard_limit
        # Keyed by the value itself (strings, hashable tuples) or by its JSON encoding.
        self._strings: dict[str, str] = {}
        self._values: dict[Hashable, Any] = {}
        self._encoded: dict[bytes, Any] = {}
        self._strings_limit = self._values_limit = self._encoded_limit = sweep_floor
        self._empty: dict[str, Any] = {}
        self._encode = msgspec.json.Encoder().encode

    @property
    def entries(self) -> int:
        """How many values the tables hold now."""
        return len(self._strings) + len(self._values) + len(self._encoded)

    def sweep(self) -> None:
        """Drop now every entry no object outside the tables uses. Tables are swept as they
        grow anyway; this is for tests."""
        self._strings, self._strings_limit = self._swept(self._strings)
        self._values, self._values_limit = self._swept(self._values)
        self._encoded, self._encoded_limit = self._swept(self._encoded)

    def __call__(self, pod: Pod) -> Pod:
        if len(self._strings) > self._strings_limit:
            self._strings, self._strings_limit = self._swept(self._strings)
        if len(self._values) > self._values_limit:
            self._values, self._values_limit = self._swept(self._values)
        if len(self._encoded) > self._encoded_limit:
            self._encoded, self._encoded_limit = self._swept(self._encoded)
        metadata, spec, status = pod.metadata, pod.spec, pod.status
        # A part the pod lacks is the model's default instance: left as it is, it holds
        # nothing to share and keeps encoding as absent.
        return _replace(
            pod,
            metadata=metadata if metadata is _DEFAULT_META else self._metadata(metadata),
            spec=spec if spec is _DEFAULT_SPEC else self._spec(spec),
            status=status if status is _DEFAULT_STATUS else self._status(status),
        )

    # Bound methods as locals in what follows: one C call per lookup rather than a Python call
    # (a pod makes about 40). `x and s(x, x)` leaves "" and None as they are (singletons).

    def _metadata(self, meta: ObjectMeta) -> ObjectMeta:
        s, v = self._strings.setdefault, self._values.setdefault
        namespace, created, refs = meta.namespace, meta.creation_timestamp, meta.owner_references
        return _replace(
            meta,
            namespace=namespace and s(namespace, namespace),
            creation_timestamp=created and s(created, created),
            labels=self._strings_dict(meta.labels),
            annotations=self._strings_dict(meta.annotations),
            owner_references=refs and v(refs, refs),
        )

    def _spec(self, spec: PodSpec) -> PodSpec:
        s, v, e = self._strings.setdefault, self._values.setdefault, self._encoded.setdefault
        encode, empty = self._encode, self._empty
        node, scheduler = spec.node_name, spec.scheduler_name
        priority_class, preemption, restart = (
            spec.priority_class_name,
            spec.preemption_policy,
            spec.restart_policy,
        )
        containers, init_containers = spec.containers, spec.init_containers
        selector, overhead, affinity = spec.node_selector, spec.overhead, spec.affinity
        tolerations, gates = spec.tolerations, spec.scheduling_gates
        spread = spec.topology_spread_constraints
        return _replace(
            spec,
            node_name=node and s(node, node),
            scheduler_name=scheduler and s(scheduler, scheduler),
            priority_class_name=priority_class and s(priority_class, priority_class),
            preemption_policy=preemption and s(preemption, preemption),
            restart_policy=restart and s(restart, restart),
            containers=containers and e(encode(containers), containers),
            init_containers=init_containers and e(encode(init_containers), init_containers),
            node_selector=e(encode(selector), selector) if selector else empty,
            overhead=e(encode(overhead), overhead) if overhead else empty,
            affinity=affinity and e(encode(affinity), affinity),
            tolerations=tolerations and v(tolerations, tolerations),
            scheduling_gates=gates and v(gates, gates),
            topology_spread_constraints=spread and e(encode(spread), spread),
        )

    def _status(self, status: PodStatus) -> PodStatus:
        s, v = self._strings.setdefault, self._values.setdefault
        phase, reason, started = status.phase, status.reason, status.start_time
        statuses, init_statuses = status.container_statuses, status.init_container_statuses
        return _replace(
            status,
            phase=phase and s(phase, phase),
            reason=reason and s(reason, reason),
            start_time=started and s(started, started),
            # A condition's transition time is mostly its pod's own, so conditions are rebuilt
            # from shared strings rather than shared whole.
            conditions=tuple(self._condition(c) for c in status.conditions),
            container_statuses=statuses and v(statuses, statuses),
            init_container_statuses=init_statuses and v(init_statuses, init_statuses),
        )

    def _swept(self, table: dict[_K, Any]) -> tuple[dict[_K, Any], int]:
        """`table` without the entries only it refers to, and the size at which to sweep next."""
        counts = _refcounts(table)  # before anything else refers to the values
        pairs = zip(table.items(), counts, strict=True)
        kept = {k: x for (k, x), n in pairs if n > _unused(k, x)}
        if len(kept) > self._hard_limit:
            kept = {}
        return kept, max(self._floor, 2 * len(kept))

    def _strings_dict(self, d: Mapping[str, str]) -> dict[str, str]:
        if not d:
            return self._empty
        s = self._strings.setdefault
        return {s(k, k): s(x, x) for k, x in d.items()}

    def _condition(self, c: PodCondition) -> PodCondition:
        s = self._strings.setdefault
        type_, status, message, when = c.type, c.status, c.message, c.last_transition_time
        return _replace(
            c,
            type=type_ and s(type_, type_),
            status=status and s(status, status),
            message=message and s(message, message),
            last_transition_time=when and s(when, when),
        )


def _refcounts(table: dict[Any, Any]) -> list[int]:
    """The reference count of each value of `table`, in order (`_unused` measures the same way)."""
    getrefcount = sys.getrefcount
    return [getrefcount(x) for x in table.values()]


def _probe_count(same: bool) -> int:
    probe = object()
    table = {probe: probe} if same else {b"": probe}
    del probe  # only the table refers to it now, as to an unused entry
    return _refcounts(table)[0]


# What `_refcounts` reports for a value nothing but its table refers to: the table's references
# (two when the value is its own key), the comprehension's and getrefcount's. Measured once, so
# it follows the interpreter rather than a constant that a new CPython could change.
_UNUSED_OWN_KEY: Final = _probe_count(same=True)
_UNUSED_OTHER_KEY: Final = _probe_count(same=False)


def _unused(key: object, value: object) -> int:
    return _UNUSED_OWN_KEY if key is value else _UNUSED_OTHER_KEY
