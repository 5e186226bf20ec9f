"""What the numa-aware plugin keeps from one session to the next: each node's layout while its
Numatopology object stays the same, and each pod template's facts.

Kept with the snapshot (``Incremental.memo_for_cluster``), so that a session reads again only
the Numatopology objects the informer replaced, and works out a pod's facts once per task
template (the pods of one task share their containers), not once per pod. Only speed depends
on it: a layout is reused only for the very object it was read from, a pod's facts only for
equal containers and policy.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from caldera.api.core import Container, Pod
from caldera.api.numatopology import Numatopology
from caldera.api.volcano import KUBE_GROUP_NAME_KEY, TASK_SPEC_KEY
from scheduler.plugins.numa_policy import NodeNuma, PodNuma, node_numa, pod_numa, pod_policy

# Templates, pod facts and node shapes kept at most, each (a new one past this forgets them
# all: only speed is lost).
MAX_TEMPLATES = 4096


@dataclass(frozen=True, slots=True)
class NodeLayout:
    """A node's layout, read from ``source``, and the number of its shape (nodes of one
    shape place a pod alike: ``NodeNuma.shape``)."""

    source: Numatopology
    layout: NodeNuma
    shape: int


@dataclass(frozen=True, slots=True, eq=False)
class PodFacts:
    """A pod's facts and their number, one object per distinct facts while the memo keeps
    them (equal only to itself, hashed by identity, and a number never given twice: cheap
    keys)."""

    facts: PodNuma
    number: int


@dataclass(slots=True)
class _Template:
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    policy: str
    facts: PodFacts


@dataclass
class NumaMemo:
    """The layouts and pod facts kept across sessions (see the module docstring)."""

    layouts: dict[str, NodeLayout] = field(default_factory=dict)
    shapes: dict[Hashable, int] = field(default_factory=dict)
    numbers: dict[PodNuma, PodFacts] = field(default_factory=dict)
    templates: dict[tuple[str, str, str], _Template] = field(default_factory=dict)
    counted: int = 0  # pod facts and node shapes numbered so far

    def refresh_layouts(self, topologies: Mapping[str, Numatopology]) -> dict[str, NodeLayout]:
        """Each node's layout from its Numatopology (none for one that cannot be read), read
        again only for an object not seen last time; the nodes gone are forgotten."""
        kept, layouts = self.layouts, {}
        for name, topology in topologies.items():
            found = kept.get(name)
            if found is None or found.source is not topology:
                layout = node_numa(topology)
                if layout is None:
                    continue
                found = NodeLayout(topology, layout, self._shape_number(layout.shape()))
            layouts[name] = found
        self.layouts = layouts
        return layouts

    def _shape_number(self, shape: Hashable) -> int:
        """The shape's number, one per distinct shape while kept; never given twice."""
        found = self.shapes.get(shape)
        if found is None:
            if len(self.shapes) >= MAX_TEMPLATES:
                self.shapes.clear()  # the count goes on: layouts kept keep distinct numbers
            found = self.shapes[shape] = self.counted
            self.counted += 1
        return found

    def number(self, facts: PodNuma) -> PodFacts:
        """``facts`` with its number, one object per distinct value."""
        found = self.numbers.get(facts)
        if found is None:
            if len(self.numbers) >= MAX_TEMPLATES:
                self.numbers.clear()  # the count goes on: a number is never given twice
            found = self.numbers[facts] = PodFacts(facts, self.counted)
            self.counted += 1
        return found

    def pod_facts(self, pod: Pod) -> PodFacts:
        """The pod's facts (``pod_numa``), worked out once per task template: a pod of the
        same PodGroup and task as an earlier one, with equal containers and policy, shares
        its facts."""
        notes = pod.metadata.annotations
        group = notes.get(KUBE_GROUP_NAME_KEY)
        if group is None:
            return self.number(pod_numa(pod))
        spec, policy = pod.spec, pod_policy(pod)
        key = (pod.metadata.namespace, group, notes.get(TASK_SPEC_KEY, ""))
        kept = self.templates.get(key)
        if (
            kept is not None
            and kept.policy == policy
            and kept.containers == spec.containers
            and kept.init_containers == spec.init_containers
        ):
            return kept.facts
        facts = self.number(pod_numa(pod))
        if len(self.templates) >= MAX_TEMPLATES:
            self.templates.clear()
        self.templates[key] = _Template(spec.containers, spec.init_containers, policy, facts)
        return facts
