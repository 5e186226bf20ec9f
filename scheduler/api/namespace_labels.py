"""The namespaces' labels as of a session, and inter-pod affinity terms' ``namespaceSelector``
resolved against them, as kube-scheduler's InterPodAffinity does it
(``pkg/scheduler/framework/plugins/interpodaffinity``: ``mergeAffinityTermNamespacesIfNotEmpty``
lists the namespaces a non-empty selector matches and adds their names to the term's
``namespaces``; ``GetNamespaceLabelsSnapshot`` matches a placed pod's selector against the labels
of the incoming pod's namespace, which for an existing namespace is the same answer).

A term covers the union of its ``namespaces`` and the namespaces whose labels its selector
matches; ``namespaceSelector: {}`` covers every namespace, and a term with neither covers its
pod's own namespace (``scheduler.api.pod_affinity``). A label change is seen by the next
session: a ``NamespaceLabels`` is immutable, and the process makes a new one when a namespace's
labels change.

Purely computational. The cost is bounded: a selector is matched once against each namespace
and the answer kept for as long as the labels do not change (at most ``MAX_KEPT`` selectors,
then the kept answers are dropped), and a selector's size counts toward the pod's selector
bound (``pod_affinity.MAX_SELECTOR_ITEMS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from caldera.api.meta import LabelSelector
from caldera.api.selectors import matches

__all__ = ["MAX_KEPT", "LabelsByNamespace", "NamespaceLabels"]

# Distinct selectors whose answers are kept at once: enough for every template of a large
# cluster, small enough that a flood of distinct selectors cannot grow the process.
MAX_KEPT: Final = 4096


class NamespaceLabels:
    """The namespaces' labels (name -> labels) at one moment; ``select`` answers which of them
    a ``namespaceSelector`` matches, once per distinct selector."""

    __slots__ = ("_by_name", "_kept", "version")

    def __init__(self, by_name: Mapping[str, Mapping[str, str]], version: int = 0) -> None:
        self._by_name = dict(by_name)
        self._kept: dict[bytes, frozenset[str]] = {}
        # Moves on with every change of the labels the process saw (0: never told).
        self.version = version

    def __len__(self) -> int:
        return len(self._by_name)

    def labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels; None when the namespace is not known."""
        return self._by_name.get(namespace)

    def select(self, selector: LabelSelector) -> frozenset[str]:
        """The names of the namespaces whose labels ``selector`` matches (an empty selector
        matches every namespace known; the callers give ``{}`` its own meaning first)."""
        key = msgspec.json.encode(selector)
        hit = self._kept.get(key)
        if hit is None:
            if len(self._kept) >= MAX_KEPT:
                self._kept.clear()
            hit = self._kept[key] = frozenset(
                name for name, labels in self._by_name.items() if matches(selector, labels)
            )
        return hit


class LabelsByNamespace:
    """The namespaces' labels as the process's Namespace informer tells them; ``snapshot``
    is the immutable view a session reads, the same object until a label changes (so the
    selectors it resolved stay resolved across sessions)."""

    __slots__ = ("_labels", "_snapshot", "_version")

    def __init__(self) -> None:
        self._labels: dict[str, Mapping[str, str]] = {}
        self._version = 0
        self._snapshot: NamespaceLabels | None = None

    def seen(self, name: str, labels: Mapping[str, str]) -> bool:
        """The namespace ``name`` exists with ``labels``; whether that is news."""
        if self._labels.get(name) == labels:
            return False
        self._labels[name] = dict(labels)
        self._moved()
        return True

    def gone(self, name: str) -> bool:
        """The namespace ``name`` is gone; whether that is news."""
        if self._labels.pop(name, None) is None:
            return False
        self._moved()
        return True

    def _moved(self) -> None:
        self._version += 1
        self._snapshot = None

    def snapshot(self) -> NamespaceLabels:
        """The labels now, for a session."""
        if self._snapshot is None:
            self._snapshot = NamespaceLabels(self._labels, self._version)
        return self._snapshot
