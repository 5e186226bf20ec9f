"""Tests for caldera.api.crdgen: the chart's CRDs match the models, are structural, and accept
Volcano's example manifests."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api import crdgen, limits, volcano
from unit.examples import EXAMPLES

OWN_KINDS = {"Job", "Queue", "PodGroup", "Command", "CronJob", "JobFlow", "JobTemplate"}

DOCUMENTS = {crd.info.kind: crdgen.crd_document(crd) for crd in crdgen.CRDS}


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = DOCUMENTS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema node at a dotted path; "[]" steps into array items, "{}" into map values."""
    node = schema
    for part in path.split("."):
        if part == "[]":
            node = node["items"]
        elif part == "{}":
            node = node["additionalProperties"]
        else:
            node = node["properties"][part]
    return node


# --- a validator for the subset of OpenAPI the generator emits ----------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _has_type(value: Any, type_name: str) -> bool:
    if isinstance(value, bool) and type_name != "boolean":
        return False
    return isinstance(value, _TYPES[type_name])


def validate(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Errors of `value` against `schema`, including fields the API server would prune.

    Covers what crdgen emits: type, properties, additionalProperties, items, required, enum,
    minimum, maximum, minLength, maxLength, pattern, minItems, maxItems, maxProperties,
    int-or-string and
    x-kubernetes-preserve-unknown-fields.
    """
    where = path or "<root>"
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{where}: {value!r} is neither an integer nor a string"]
        if (
            isinstance(value, str)
            and "pattern" in schema
            and not re.search(schema["pattern"], value)
        ):
            return [f"{where}: {value!r} does not match {schema['pattern']}"]
        return []
    if not _has_type(value, schema["type"]):
        return [f"{where}: {value!r} is not of type {schema['type']}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value} is less than {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{where}: {value} is greater than {schema['maximum']}")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: {value!r} is shorter than {schema['minLength']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: {value!r} is longer than {schema['maxLength']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{where}: fewer than {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{where}: more than {schema['maxItems']} items")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(f"{where}: more than {schema['maxProperties']} properties")
    if isinstance(value, list):
        for i, item in enumerate(value):
            errors += validate(schema["items"], item, f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{where}: required field {key!r} is missing")
        properties = schema.get("properties")
        for key, item in value.items():
            if properties is not None and key in properties:
                errors += validate(properties[key], item, f"{path}.{key}")
            elif "additionalProperties" in schema:
                errors += validate(schema["additionalProperties"], item, f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and properties is not None:
                errors.append(f"{path}.{key}: unknown field, the API server would prune it")
    return errors


def _examples() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if doc and doc.get("kind") in OWN_KINDS and "volcano.sh/" in doc["apiVersion"]:
                docs.append((f"{path.name}#{index}", doc))
    return docs


EXAMPLE_DOCS = _examples()


@pytest.mark.parametrize(("name", "doc"), EXAMPLE_DOCS, ids=[n for n, _ in EXAMPLE_DOCS])
def test_examples_validate_against_generated_schema(name: str, doc: dict[str, Any]) -> None:
    """Every Volcano example of a served kind passes the schema and loses no field to pruning.

    The invalid_jobs_* examples pass too: Volcano rejects them in the webhook, not the schema.
    """
    assert validate(_schema(doc["kind"]), doc) == []


REPOSITORY_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_repository_examples_validate_against_generated_schema() -> None:
    """Caldera's own examples (the JobFlow pipeline and its JobTemplates, the nightly CronJob,
    the jobs and the queue) pass the schemas and lose no field to pruning."""
    checked = []
    for path in sorted(REPOSITORY_EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc.get("kind") in OWN_KINDS:
                assert validate(_schema(doc["kind"]), doc) == [], path.name
                checked.append(doc["kind"])
    assert {"JobFlow", "JobTemplate", "CronJob", "Job", "Queue"} <= set(checked)


def _mutated(doc_name: str, path: list[str | int], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(dict(EXAMPLE_DOCS)[doc_name])
    node: Any = doc
    for step in path[:-1]:
        node = node[step]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


_DELETE = object()
JOB_EXAMPLE = "job.yaml#0"
QUEUE_EXAMPLE = "deployment_queue.yaml#0"


@pytest.mark.parametrize(
    ("doc_name", "path", "value", "error"),
    [
        (JOB_EXAMPLE, ["spec", "policies", 0, "event"], "PodExploded", "is not one of"),
        (JOB_EXAMPLE, ["spec", "tasks", 0, "replicas"], -1, "less than 0"),
        (JOB_EXAMPLE, ["spec", "tasks", 0, "name"], "Bad_Name", "does not match"),
        (JOB_EXAMPLE, ["spec", "tasks"], [], "fewer than 1 items"),
        (JOB_EXAMPLE, ["spec", "queue"], "x" * 254, "longer than 253"),
        (JOB_EXAMPLE, ["spec", "volumes"], [{"volumeClaimName": "a"}], "'mountPath' is missing"),
        (JOB_EXAMPLE, ["spec", "volumes"], [{"mountPath": "a:b"}], "does not match"),
        (JOB_EXAMPLE, ["spec", "tasks", 0, "topologyPolicy"], "numa", "is not one of"),
        (JOB_EXAMPLE, ["spec", "minAvailable"], "3", "not of type integer"),
        (JOB_EXAMPLE, ["spec", "maxRetries"], 3, "would prune it"),
        (QUEUE_EXAMPLE, ["spec", "weight"], 0, "less than 1"),
        (QUEUE_EXAMPLE, ["spec", "weight"], 65536, "greater than 65535"),
        (QUEUE_EXAMPLE, ["spec", "capability", "cpu"], "2 cores", "does not match"),
        (QUEUE_EXAMPLE, ["spec", "reclaimable"], "yes", "not of type boolean"),
        (QUEUE_EXAMPLE, ["status"], {"state": "Paused"}, "is not one of"),
    ],
)
def test_schema_rejects_invalid_values(
    doc_name: str, path: list[str | int], value: Any, error: str
) -> None:
    """The markers bite: a broken copy of an example fails with the expected error."""
    doc = _mutated(doc_name, path, value)
    errors = validate(_schema(doc["kind"]), doc)
    assert any(error in e for e in errors), errors


def test_pod_template_fields_are_kept_whole() -> None:
    """Unknown fields inside a pod template are preserved (the elastic-job example has one)."""
    doc = dict(EXAMPLE_DOCS)["kubecon-2019-china_task-priority_elastic-job.yaml#0"]
    assert "priorityClass" in doc["spec"]["tasks"][0]["template"]["spec"]
    assert validate(_schema("Job"), doc) == []
    assert _at(_schema("Job"), "spec.tasks.[].template") == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }


# --- the committed files ------------------------------------------------------------------------


def test_committed_crds_match_the_models(tmp_path: Path) -> None:
    """Regenerating into a temporary directory gives exactly the files in the chart."""
    crdgen.write(tmp_path)
    generated = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}
    committed = {
        name: (crdgen.DEFAULT_OUT / name).read_text(encoding="utf-8") for name in generated
    }
    assert generated == committed
    assert crdgen.check(crdgen.DEFAULT_OUT) == []


def test_check_reports_missing_stale_and_unknown_files(tmp_path: Path) -> None:
    """`check` names a missing file, a hand-edited one (with a diff) and a leftover one."""
    crdgen.write(tmp_path)
    (tmp_path / "bus.volcano.sh_commands.yaml").unlink()
    jobs = tmp_path / "batch.volcano.sh_jobs.yaml"
    jobs.write_text(jobs.read_text(encoding="utf-8").replace("default: 3", "default: 4"))
    (tmp_path / "config.volcano.sh_colocationconfigurations.yaml").write_text("{}")
    (tmp_path / "batch.volcano.sh_old.yaml").write_text("{}")
    problems = crdgen.check(tmp_path)
    assert len(problems) == 3
    jobs_problem, commands_problem, leftover_problem = problems
    assert "batch.volcano.sh_jobs.yaml: differs from the models" in jobs_problem
    assert "-                default: 4" in jobs_problem
    assert "+                default: 3" in jobs_problem
    assert "bus.volcano.sh_commands.yaml: missing" in commands_problem
    # a CRD of a group Caldera does not generate is not its business
    assert "batch.volcano.sh_old.yaml: not generated by crdgen" in leftover_problem


def test_main_check_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--check` exits 0 on matching files and 1, with the fix in the message, otherwise."""
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(c.file_name for c in crdgen.CRDS)
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "scheduling.volcano.sh_queues.yaml").write_text("stale\n")
    capsys.readouterr()
    assert crdgen.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "scheduling.volcano.sh_queues.yaml: differs from the models" in err
    assert "python -m caldera.api.crdgen" in err


def test_rendered_yaml_has_no_aliases() -> None:
    """Shared marker objects are written out in full, not as YAML anchors."""
    for text in crdgen.generate().values():
        assert "&id" not in text
        assert "*id" not in text


# --- structure ----------------------------------------------------------------------------------


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")


@pytest.mark.parametrize("kind", list(DOCUMENTS))
def test_schemas_are_structural(kind: str) -> None:
    """No $ref, every node typed (int-or-string excepted), objects say what they hold."""
    text = yaml.safe_dump(DOCUMENTS[kind])
    assert "$ref" not in text
    problems = []
    for path, node in _nodes(_schema(kind)):
        if node.get("x-kubernetes-int-or-string"):
            if "type" in node or node.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
                problems.append(f"{path}: malformed int-or-string")
            continue
        if "type" not in node:
            problems.append(f"{path}: no type")
        elif node["type"] == "object":
            held = [
                k
                for k in (
                    "properties",
                    "additionalProperties",
                    "x-kubernetes-preserve-unknown-fields",
                )
                if k in node
            ]
            if path not in ("", ".metadata") and not held:
                problems.append(f"{path}: object without properties")
            if "properties" in node and "additionalProperties" in node:
                problems.append(f"{path}: both properties and additionalProperties")
        elif node["type"] == "array" and "items" not in node:
            problems.append(f"{path}: array without items")
        for name in node.get("required", ()):
            if name not in node.get("properties", {}):
                problems.append(f"{path}: required {name!r} is not a property")
    assert problems == []


def test_structure_check_can_fail() -> None:
    """The walker reaches nested nodes, so an untyped one would be reported."""
    paths = [p for p, _ in _nodes(_schema("Queue"))]
    assert ".spec.capability{}" in paths
    assert ".spec.extendClusters[].capacity{}" in paths


# Volcano's config/crd/volcano/bases: scope, short names, status subresource, printer columns.
CRD_FACTS: list[tuple[str, str, str, list[str] | None, dict[str, Any] | None]] = [
    ("Job", "jobs.batch.volcano.sh", "Namespaced", ["vcjob", "vj"], {"status": {}}),
    ("CronJob", "cronjobs.batch.volcano.sh", "Namespaced", ["cronvcjob", "cronvj"], {"status": {}}),
    ("Command", "commands.bus.volcano.sh", "Namespaced", None, None),
    ("PodGroup", "podgroups.scheduling.volcano.sh", "Namespaced", ["pg", "podgroup-v1beta1"], {}),
    ("Queue", "queues.scheduling.volcano.sh", "Cluster", ["q", "queue-v1beta1"], {"status": {}}),
    ("JobFlow", "jobflows.flow.volcano.sh", "Namespaced", ["jf"], {"status": {}}),
    ("JobTemplate", "jobtemplates.flow.volcano.sh", "Namespaced", ["jt"], {"status": {}}),
]


@pytest.mark.parametrize(("kind", "name", "scope", "short_names", "subresources"), CRD_FACTS)
def test_crd_names_scope_and_subresources(
    kind: str, name: str, scope: str, short_names: list[str] | None, subresources: Any
) -> None:
    """Each CRD has Volcano's name, scope, short names and status subresource (or lack of it)."""
    doc = DOCUMENTS[kind]
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["metadata"]["name"] == name
    assert doc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert doc["spec"]["scope"] == scope
    assert doc["spec"]["names"].get("shortNames") == short_names
    assert doc["spec"]["names"]["listKind"] == f"{kind}List"
    version = doc["spec"]["versions"][0]
    assert (version["served"], version["storage"]) == (True, True)
    assert version.get("subresources") == subresources


PRINTER_COLUMNS = {
    "Job": [
        ("STATUS", "string", ".status.state.phase", 0),
        ("minAvailable", "integer", ".status.minAvailable", 0),
        ("RUNNINGS", "integer", ".status.running", 0),
        ("AGE", "date", ".metadata.creationTimestamp", 0),
        ("QUEUE", "string", ".spec.queue", 1),
    ],
    "PodGroup": [
        ("STATUS", "string", ".status.phase", 0),
        ("minMember", "integer", ".spec.minMember", 0),
        ("RUNNINGS", "integer", ".status.running", 0),
        ("AGE", "date", ".metadata.creationTimestamp", 0),
        ("QUEUE", "string", ".spec.queue", 1),
    ],
    "Queue": [("PARENT", "string", ".spec.parent", 0)],
    "Command": [],
    "CronJob": [],
    "JobFlow": [
        ("Status", "string", ".status.state.phase", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ],
    "JobTemplate": [],
}


@pytest.mark.parametrize("kind", list(PRINTER_COLUMNS))
def test_printer_columns(kind: str) -> None:
    """Printer columns are Volcano's, and each points at a field the schema has."""
    columns = DOCUMENTS[kind]["spec"]["versions"][0].get("additionalPrinterColumns", [])
    got = [(c["name"], c["type"], c["jsonPath"], c.get("priority", 0)) for c in columns]
    assert got == PRINTER_COLUMNS[kind]
    for _, type_, json_path, _ in got:
        if json_path.startswith(".metadata."):
            continue
        node = _at(_schema(kind), json_path.lstrip("."))
        assert node["type"] == type_


MARKERS = [
    ("Job", "spec.queue", {"default": "default", "maxLength": 253}),
    ("Job", "spec.maxRetry", {"default": 3, "minimum": 0, "format": "int32"}),
    ("Job", "spec.minAvailable", {"minimum": 0}),
    ("Job", "spec.schedulerName", {"maxLength": 63}),
    ("Job", "spec.ttlSecondsAfterFinished", {"minimum": 0}),
    ("Job", "spec.minSuccess", {"minimum": 1}),
    ("Job", "spec.priorityClassName", {"maxLength": 253}),
    ("Job", "spec.tasks", {"minItems": 1}),
    ("Job", "spec.tasks.[].name", {"maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}),
    ("Job", "spec.tasks.[].replicas", {"minimum": 0}),
    ("Job", "spec.tasks.[].minAvailable", {"minimum": 0}),
    ("Job", "spec.tasks.[].maxRetry", {"minimum": 0}),
    ("Job", "spec.tasks.[]", {"type": "object"}),
    ("Job", "spec.tasks.[].topologyPolicy", {"enum": [str(v) for v in volcano.NumaPolicy]}),
    ("Job", "spec.tasks.[].partitionPolicy", {"required": ["partitionSize", "totalPartitions"]}),
    ("Job", "spec.tasks.[].partitionPolicy.minPartitions", {"default": 0, "minimum": 0}),
    ("Job", "spec.tasks.[].partitionPolicy.totalPartitions", {"minimum": 1}),
    (
        "Job",
        "spec.tasks.[].volumeClaimTemplates.[].spec",
        {"x-kubernetes-preserve-unknown-fields": True},
    ),
    ("Job", "spec.volumes.[]", {"required": ["mountPath"]}),
    ("Job", "spec.volumes.[].mountPath", {"minLength": 1, "pattern": "^[^:]+$"}),
    ("Job", "spec.volumes.[].volumeClaimName", {"maxLength": 253}),
    ("Job", "spec.volumes.[].volumeClaim", {"x-kubernetes-preserve-unknown-fields": True}),
    ("Job", "spec.policies.[].event", {"enum": [str(v) for v in volcano.Event]}),
    ("Job", "spec.policies.[].events.[]", {"enum": [str(v) for v in volcano.Event]}),
    ("Job", "spec.networkTopology.mode", {"default": "hard", "enum": ["hard", "soft"]}),
    ("Job", "spec.networkTopology.highestTierAllowed", {"minimum": 0}),
    (
        "Job",
        "spec.plugins.{}",
        {"type": "array", "items": {"type": "string", "maxLength": limits.MAX_PLUGIN_ARG_LENGTH}},
    ),
    # caldera.api.limits: the bounds the webhook and the job controller enforce too.
    ("Job", "spec.tasks", {"maxItems": limits.MAX_TASKS, "minItems": 1}),
    ("Job", "spec.tasks.[].replicas", {"minimum": 0, "maximum": limits.MAX_TASK_REPLICAS}),
    ("Job", "spec.minAvailable", {"maximum": limits.MAX_JOB_REPLICAS}),
    ("Job", "spec.policies", {"maxItems": limits.MAX_POLICIES}),
    ("Job", "spec.plugins", {"maxProperties": limits.MAX_PLUGINS}),
    ("CronJob", "spec.jobTemplate.spec.tasks.[].replicas", {"maximum": limits.MAX_TASK_REPLICAS}),
    ("JobTemplate", "spec.tasks", {"maxItems": limits.MAX_TASKS}),
    ("PodGroup", "spec.minMember", {"maximum": limits.MAX_JOB_REPLICAS}),
    ("PodGroup", "spec.minTaskMember.{}", {"maximum": limits.MAX_TASK_REPLICAS}),
    ("JobFlow", "spec.flows", {"maxItems": limits.MAX_FLOWS}),
    ("Job", "status.state.phase", {"enum": [str(v) for v in volcano.JobPhase]}),
    ("Job", "status.state.lastTransitionTime", {"format": "date-time"}),
    ("Job", "status.conditions.[]", {"required": ["status"]}),
    ("Job", "status.taskStatusCount.{}.phase.{}", {"type": "integer"}),
    ("Job", "status.retryCount", {"minimum": 0}),
    ("CronJob", "spec", {"required": ["jobTemplate", "schedule"]}),
    (
        "CronJob",
        "spec.concurrencyPolicy",
        {"default": "Allow", "enum": ["Allow", "Forbid", "Replace"]},
    ),
    ("CronJob", "spec.suspend", {"default": False}),
    ("CronJob", "spec.successfulJobsHistoryLimit", {"default": 3, "minimum": 0}),
    ("CronJob", "spec.failedJobsHistoryLimit", {"default": 1, "minimum": 0}),
    ("CronJob", "spec.startingDeadlineSeconds", {"minimum": 0, "format": "int64"}),
    ("CronJob", "spec.jobTemplate.spec.queue", {"default": "default"}),
    ("Command", "target", {"required": ["apiVersion", "kind", "name", "uid"]}),
    ("JobFlow", "spec.flows.[]", {"required": ["name"]}),
    ("JobFlow", "spec.flows.[].name", {"minLength": 1, "type": "string"}),
    ("JobFlow", "spec.jobRetainPolicy", {"enum": ["retain", "delete"]}),
    ("JobFlow", "spec.flows.[].dependsOn.targets", {"type": "array", "items": {"type": "string"}}),
    (
        "JobFlow",
        "spec.flows.[].dependsOn.probe.httpGetList.[].port",
        {"minimum": 0, "maximum": 65535},
    ),
    (
        "JobFlow",
        "spec.flows.[].dependsOn.probe.httpGetList.[].httpHeader",
        {"required": ["name", "value"]},
    ),
    ("JobFlow", "spec.flows.[].dependsOn.probe.tcpSocketList.[]", {"required": ["port"]}),
    ("JobFlow", "spec.flows.[].dependsOn.probe.taskStatusList.[].phase", {"type": "string"}),
    ("JobFlow", "spec.flows.[].patch", {"x-kubernetes-preserve-unknown-fields": True}),
    ("JobFlow", "status.state.phase", {"type": "string", "enum": None}),
    ("JobFlow", "status.unKnowJobs", {"type": "array"}),
    ("JobFlow", "status.conditions.{}.createTime", {"format": "date-time"}),
    ("JobFlow", "status.conditions.{}.taskStatusCount.{}.phase.{}", {"format": "int32"}),
    ("JobFlow", "status.jobStatusList.[].runningHistories.[].state", {"type": "string"}),
    ("JobFlow", "status.jobStatusList.[].restartCount", {"format": "int32"}),
    ("JobTemplate", "spec.maxRetry", {"default": 3, "minimum": 0}),
    ("JobTemplate", "spec.tasks", {"minItems": 1}),
    ("JobTemplate", "status.jobDependsOnList", {"type": "array", "items": {"type": "string"}}),
    ("PodGroup", "spec.queue", {"default": "default"}),
    ("PodGroup", "spec.minMember", {"minimum": 0}),
    ("PodGroup", "spec.minResources.{}", {"x-kubernetes-int-or-string": True}),
    ("PodGroup", "spec.subGroupPolicy.[].subGroupSize", {"default": 1, "minimum": 1}),
    ("PodGroup", "status.phase", {"enum": [str(v) for v in volcano.PodGroupPhase]}),
    ("PodGroup", "status.conditions.[].transitionID", {"type": "string"}),
    ("Queue", "spec.weight", {"default": 1, "minimum": 1, "maximum": 65535}),
    ("Queue", "spec.dequeueStrategy", {"default": "traverse", "enum": ["fifo", "traverse"]}),
    ("Queue", "spec.priority", {"minimum": 0}),
    ("Queue", "spec.reclaimable", {"type": "boolean"}),
    (
        "Queue",
        "spec.capability.{}",
        {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": crdgen.QUANTITY_PATTERN},
    ),
    ("Queue", "status.state", {"enum": ["Open", "Closed", "Closing", "Unknown"]}),
    ("Queue", "status.allocated.{}", {"x-kubernetes-int-or-string": True}),
]


@pytest.mark.parametrize(("kind", "path", "expected"), MARKERS)
def test_markers(kind: str, path: str, expected: dict[str, Any]) -> None:
    """Defaults, bounds, patterns, enums and required lists are Volcano's CRDs'."""
    node = _at(_schema(kind), path)
    assert {key: node.get(key) for key in expected} == expected


ALL_DEFAULTS = {
    ("Job", ".spec.maxRetry", 3),
    ("Job", ".spec.queue", "default"),
    ("Job", ".spec.networkTopology.mode", "hard"),
    ("Job", ".spec.tasks[].partitionPolicy.minPartitions", 0),
    ("Job", ".spec.tasks[].partitionPolicy.networkTopology.mode", "hard"),
    ("CronJob", ".spec.concurrencyPolicy", "Allow"),
    ("CronJob", ".spec.suspend", False),
    ("CronJob", ".spec.successfulJobsHistoryLimit", 3),
    ("CronJob", ".spec.failedJobsHistoryLimit", 1),
    ("CronJob", ".spec.jobTemplate.spec.maxRetry", 3),
    ("CronJob", ".spec.jobTemplate.spec.queue", "default"),
    ("CronJob", ".spec.jobTemplate.spec.networkTopology.mode", "hard"),
    ("CronJob", ".spec.jobTemplate.spec.tasks[].partitionPolicy.minPartitions", 0),
    ("CronJob", ".spec.jobTemplate.spec.tasks[].partitionPolicy.networkTopology.mode", "hard"),
    # A JobTemplate's spec is a Job's, with the Job CRD's defaults (Volcano's JobTemplate CRD has
    # no queue default; a Job made from the template gets the same "default" either way).
    ("JobTemplate", ".spec.maxRetry", 3),
    ("JobTemplate", ".spec.queue", "default"),
    ("JobTemplate", ".spec.networkTopology.mode", "hard"),
    ("JobTemplate", ".spec.tasks[].partitionPolicy.minPartitions", 0),
    ("JobTemplate", ".spec.tasks[].partitionPolicy.networkTopology.mode", "hard"),
    ("PodGroup", ".spec.queue", "default"),
    ("PodGroup", ".spec.networkTopology.mode", "hard"),
    ("PodGroup", ".spec.subGroupPolicy[].subGroupSize", 1),
    ("PodGroup", ".spec.subGroupPolicy[].minSubGroups", 0),
    ("PodGroup", ".spec.subGroupPolicy[].networkTopology.mode", "hard"),
    ("Queue", ".spec.weight", 1),
    ("Queue", ".spec.dequeueStrategy", "traverse"),
}


def test_no_defaults_beyond_the_listed_ones() -> None:
    """A CRD default changes every stored object, so each one must be deliberate (and Volcano's)."""
    found = {
        (kind, path, node["default"])
        for kind in DOCUMENTS
        for path, node in _nodes(_schema(kind))
        if "default" in node
    }
    assert found == ALL_DEFAULTS
