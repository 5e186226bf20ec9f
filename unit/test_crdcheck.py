"""caldera.api.crdcheck: which of Caldera's fields a served CRD would prune, and the message a
refusing process prints. The served CRDs are Caldera's own (every field kept) and edited copies
(a field removed, a node that keeps unknown fields); e2e/test_migration.py checks Volcano's real
CRDs on an API server."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.crdcheck import CrdProblem, check_served_crd, definitions, missing_fields
from caldera.api.crdgen import CRDS, CrdDef, crd_document, schema_for
from unit.test_crdgen import _at as schema_node

JOBS = next(d for d in CRDS if d.info.plural == "jobs")


def _schema(doc: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _node(schema: dict[str, Any], path: list[str]) -> dict[str, Any]:
    """The schema node at ``path`` ("[]" steps into items, "{}" into map values)."""
    return schema_node(schema, ".".join(path)) if path else schema


def _property_paths(node: dict[str, Any], path: list[str]) -> Iterator[list[str]]:
    for name, sub in (node.get("properties") or {}).items():
        yield [*path, name]
        yield from _property_paths(sub, [*path, name])
    if isinstance(node.get("items"), dict):
        yield from _property_paths(node["items"], [*path, "[]"])
    if isinstance(node.get("additionalProperties"), dict):
        yield from _property_paths(node["additionalProperties"], [*path, "{}"])


def _dotted(path: list[str]) -> str:
    text = ""
    for step in path:
        text += step if step in ("[]", "{}") else (f".{step}" if text else step)
    return text


@pytest.mark.parametrize("definition", CRDS, ids=lambda d: d.info.resource)
def test_caldera_crds_keep_every_field(definition: CrdDef) -> None:
    """The CRDs the chart ships (generated from the models) pass their own check."""
    assert check_served_crd(definition, crd_document(definition)) is None


def test_volcano_task_schema_without_volume_claim_templates_is_named() -> None:
    """A jobs CRD whose task schema lacks volumeClaimTemplates (Volcano's) is refused, and the
    message names the CRD and the field."""
    served = crd_document(JOBS)
    task = _node(_schema(served), ["spec", "tasks", "[]"])
    del task["properties"]["volumeClaimTemplates"]
    problem = check_served_crd(JOBS, served)
    assert problem == CrdProblem("jobs.batch.volcano.sh", ("spec.tasks[].volumeClaimTemplates",))
    message = problem.message()
    assert "jobs.batch.volcano.sh" in message
    assert "spec.tasks[].volumeClaimTemplates" in message
    assert "drop silently" in message


def test_a_node_that_keeps_unknown_fields_keeps_everything_below() -> None:
    """Where the served schema preserves unknown fields, nothing under it is missing, however
    little it declares."""
    served = crd_document(JOBS)
    spec = _node(_schema(served), ["spec"])
    spec.clear()
    spec.update({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    assert check_served_crd(JOBS, served) is None


def test_caldera_nodes_kept_whole_ask_for_nothing_below() -> None:
    """Caldera keeps pod templates whole: a served template with a full (or any) schema of its
    own is not compared field by field."""
    served = crd_document(JOBS)
    template = _node(_schema(served), ["spec", "tasks", "[]", "template"])
    template.clear()
    template.update({"type": "object", "properties": {"metadata": {"type": "object"}}})
    assert check_served_crd(JOBS, served) is None


def test_map_values_without_a_schema_are_pruned() -> None:
    """A map (additionalProperties) served as a bare object loses its keys: reported as
    ``path{}``; served with any value schema, or ``true``, it keeps them."""
    plugins = {"type": "object", "additionalProperties": {"type": "array"}}
    wanted = {"type": "object", "properties": {"plugins": plugins}}
    bare = {"type": "object", "properties": {"plugins": {"type": "object"}}}
    assert missing_fields(wanted, bare) == ["plugins{}"]
    typed = {"type": "object", "properties": {"plugins": dict(plugins)}}
    assert missing_fields(wanted, typed) == []
    anything = {
        "type": "object",
        "properties": {"plugins": {"type": "object", "additionalProperties": True}},
    }
    assert missing_fields(wanted, anything) == []


@pytest.mark.parametrize(
    ("served", "reason"),
    [
        (None, "is not installed"),
        ({"spec": {"versions": [{"name": "v1beta1", "served": True}]}}, "v1alpha1"),
        ({"spec": {"versions": [{"name": "v1alpha1", "served": False}]}}, "v1alpha1"),
    ],
)
def test_missing_crd_or_version(served: dict[str, Any] | None, reason: str) -> None:
    """A CRD that is not installed, or does not serve the version Caldera uses, is a problem
    with a reason, not a list of fields."""
    problem = check_served_crd(JOBS, served)
    assert problem is not None
    assert problem.missing == ()
    assert reason in problem.message()
    assert problem.message().startswith("CRD jobs.batch.volcano.sh")


def test_long_lists_are_cut_in_the_message() -> None:
    """A message names six fields and counts the rest (an empty served spec misses them all)."""
    served = crd_document(JOBS)
    _node(_schema(served), ["spec"])["properties"] = {}
    problem = check_served_crd(JOBS, served)
    assert problem is not None
    assert len(problem.missing) > 6
    assert f"and {len(problem.missing) - 6} more" in problem.message()


def test_definitions_by_resource_name() -> None:
    """The processes name the CRDs they check by ``<plural>.<group>``."""
    assert [d.info.plural for d in definitions(("queues.scheduling.volcano.sh",))] == ["queues"]


_PATHS = [
    (definition, path)
    for definition in CRDS
    for path in _property_paths(schema_for(definition.info.type), [])
]


@given(st.sampled_from(_PATHS))
def test_removing_any_one_field_reports_exactly_that_field(
    case: tuple[CrdDef, list[str]],
) -> None:
    """Whatever single field a served schema lacks, the check reports that field and nothing
    else (the fields below it are not listed one by one)."""
    definition, path = case
    served = copy.deepcopy(crd_document(definition))
    parent = _node(_schema(served), path[:-1])
    del parent["properties"][path[-1]]
    problem = check_served_crd(definition, served)
    assert problem is not None
    assert problem.missing == (_dotted(path),)


def test_volcano_crds_and_the_migration_doc_agree() -> None:
    """Volcano v1.13's CRDs (the migration test's fixture) miss exactly the fields the table of
    docs/migrating-from-volcano.md lists, CRD by CRD."""
    repo = Path(__file__).resolve().parent.parent
    fixture = repo / "e2e" / "fixtures" / "volcano-v1.13" / "templates"
    doc = (repo / "docs" / "migrating-from-volcano.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+\.[\w.]+volcano\.sh)` \| (.+) \|$", doc, re.MULTILINE))
    assert set(rows) == {d.info.resource for d in CRDS}
    for definition in CRDS:
        path = fixture / f"crd-{definition.info.group}_{definition.info.plural}.yaml"
        listed = rows[definition.info.resource]
        if listed.startswith("not in Volcano v1.13"):  # a newer CRD (NodeShard, v1.14)
            assert not path.exists(), definition.info.resource
            continue
        if listed.startswith("not checked at start"):  # Numatopology: no process checks it
            continue
        problem = check_served_crd(definition, yaml.safe_load(path.read_text()))
        missing = problem.missing if problem is not None else ()
        if listed == "none":
            assert missing == (), definition.info.resource
        elif listed.startswith("the same, under "):
            prefix = listed.removeprefix("the same, under ").strip("`") + "."
            jobs = rows[JOBS.info.resource]
            assert missing == tuple(prefix + f for f in re.findall(r"`spec\.([^`]+)`", jobs)), (
                missing
            )
        else:
            assert missing == tuple(re.findall(r"`([^`]+)`", listed)), definition.info.resource
