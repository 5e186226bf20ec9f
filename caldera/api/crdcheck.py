"""Does a served CustomResourceDefinition keep every field Caldera writes? (pure)

Helm installs a chart's ``crds/`` only when they are missing and never upgrades them, so a
cluster that ran Volcano keeps Volcano's CRDs after Caldera's chart is installed. The API server
then prunes, silently, every field those schemas do not declare: a Job's
``tasks[].volumeClaimTemplates`` is dropped on create, and the Job runs without its volumes. The
controllers and the scheduler therefore compare, at start, the schema each CRD serves with the
one Caldera generates from its models (``caldera.api.crdgen``), and refuse to start, naming the
CRD and the fields, until the CRDs are applied (docs/migrating-from-volcano.md).

A field is kept when the served schema declares it, or when a node above it keeps unknown
fields (``x-kubernetes-preserve-unknown-fields``). Where Caldera's own schema keeps a node whole
(pod templates, PVC specs), nothing below it is asked for. Types, defaults and validation are
not compared: only what pruning would lose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from caldera.api.crdgen import CRDS, CrdDef, schema_for

__all__ = [
    "FIX",
    "CrdProblem",
    "check_served_crd",
    "definitions",
    "missing_fields",
    "served_schema",
]

PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
# How to fix it, in the one line a refusing process prints.
FIX: Final = (
    "apply Caldera's CRDs: kubectl apply --server-side --force-conflicts -f charts/caldera/crds/ "
    "(docs/migrating-from-volcano.md)"
)
_SHOWN: Final = 6  # fields named in a message; the rest are counted


@dataclass(frozen=True, slots=True)
class CrdProblem:
    """Why one served CRD cannot hold Caldera's objects."""

    crd: str  # "<plural>.<group>"
    missing: tuple[str, ...] = ()  # field paths the served schema would prune
    reason: str = ""  # set when the CRD or its version is not served at all

    def message(self) -> str:
        if self.reason:
            return f"CRD {self.crd} {self.reason}"
        shown = ", ".join(self.missing[:_SHOWN])
        more = len(self.missing) - _SHOWN
        if more > 0:
            shown += f" and {more} more"
        return (
            f"the served CRD {self.crd} lacks fields Caldera writes, which the API server would "
            f"drop silently: {shown}"
        )


def missing_fields(
    wanted: Mapping[str, Any], served: Mapping[str, Any], path: str = ""
) -> list[str]:
    """The paths (``spec.tasks[].volumeClaimTemplates``) of ``wanted``'s fields that ``served``
    would prune: declared in ``wanted``, neither declared in ``served`` nor under a node of
    ``served`` that keeps unknown fields."""
    if served.get(PRESERVE) is True:
        return []
    missing: list[str] = []
    served_properties: Mapping[str, Any] = served.get("properties") or {}
    for name, sub in (wanted.get("properties") or {}).items():
        where = f"{path}.{name}" if path else name
        served_sub = served_properties.get(name)
        if served_sub is None:
            missing.append(where)
        else:
            missing += missing_fields(sub, served_sub, where)
    items = wanted.get("items")
    if isinstance(items, Mapping):
        served_items = served.get("items")
        if isinstance(served_items, Mapping):
            missing += missing_fields(items, served_items, f"{path}[]")
        elif items.get("properties") or items.get(PRESERVE):
            missing.append(f"{path}[]")
    values = wanted.get("additionalProperties")
    if isinstance(values, Mapping):
        served_values = served.get("additionalProperties")
        if isinstance(served_values, Mapping):
            missing += missing_fields(values, served_values, f"{path}{{}}")
        elif served_values is not True:
            # A map the served schema declares without values: its keys are pruned.
            missing.append(f"{path}{{}}")
    return missing


def served_schema(crd: Mapping[str, Any], version: str) -> Mapping[str, Any] | None:
    """The openAPIV3Schema of ``version`` in a CustomResourceDefinition, if served."""
    for entry in crd.get("spec", {}).get("versions") or ():
        if entry.get("name") == version and entry.get("served", False):
            schema: Mapping[str, Any] = (entry.get("schema") or {}).get("openAPIV3Schema") or {}
            return schema
    return None


def check_served_crd(definition: CrdDef, served: Mapping[str, Any] | None) -> CrdProblem | None:
    """Compare a served CRD (None: not installed) with the one Caldera generates for
    ``definition``; None when every field survives."""
    info = definition.info
    if served is None:
        return CrdProblem(info.resource, reason="is not installed")
    schema = served_schema(served, info.version)
    if schema is None:
        return CrdProblem(info.resource, reason=f"does not serve version {info.version}")
    lost = missing_fields(schema_for(info.type), schema)
    return CrdProblem(info.resource, tuple(lost)) if lost else None


def definitions(resources: Sequence[str]) -> tuple[CrdDef, ...]:
    """Caldera's CRD definitions for ``<plural>.<group>`` names, in the order given."""
    by_name = {d.info.resource: d for d in CRDS}
    return tuple(by_name[name] for name in resources)
