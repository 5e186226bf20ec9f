"""The large-gangs trace (simulator/gang_mix.py): seeded and reproducible, the shapes and
loads it promises, a document the simulator admits, and parameters checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from simulator.gang_mix import (
    GANG_MIN,
    GANG_PODS,
    GPU,
    LONGEST,
    NODE_GPUS,
    SMALL_MIN,
    MixParams,
    cluster_document,
    dump,
    main,
    trace_document,
)
from simulator.loading import load_scenario
from simulator.spec import SpecError, parse_cluster, parse_trace


def _gpus(entry: dict[str, object]) -> tuple[int, int]:
    """(pods, GPUs per pod) of a trace entry."""
    spec = entry["job"]["spec"]  # type: ignore[index]
    task = spec["tasks"][0]
    container = task["template"]["spec"]["containers"][0]
    return task["replicas"], int(container["resources"]["requests"][GPU])


def test_the_same_seed_gives_the_same_trace() -> None:
    params = MixParams(hours=2)
    assert trace_document(params) == trace_document(MixParams(hours=2))
    assert trace_document(params) != trace_document(MixParams(hours=2, seed=46))


def test_shapes_run_times_and_order() -> None:
    jobs = trace_document(MixParams(hours=24))["jobs"]
    arrivals = [e["arrival"] for e in jobs]
    assert arrivals == sorted(arrivals)
    assert arrivals[0] >= 0
    assert arrivals[-1] < 24 * 3600
    for entry in jobs:
        name = entry["job"]["metadata"]["name"]
        pods, gpus = _gpus(entry)
        assert entry["job"]["spec"]["minAvailable"] == pods
        if name.startswith("gang-"):
            assert (pods, gpus) in {(p, NODE_GPUS) for p in GANG_PODS}
            assert GANG_MIN <= entry["runTime"] <= LONGEST
        else:
            assert name.startswith("small-")
            assert pods == 1
            assert gpus in (1, 2)
            assert SMALL_MIN <= entry["runTime"] <= LONGEST
        assert "annotations" not in entry["job"]["metadata"]


def test_the_loads_come_near_what_was_asked() -> None:
    """Over a week the drawn GPU-hours come within a tenth of the expected demand."""
    params = MixParams(hours=24 * 7, small_load=0.6, gang_load=0.3)
    capacity = params.nodes * NODE_GPUS * params.hours * 3600
    asked = {"small": 0.0, "gang": 0.0}
    for entry in trace_document(params)["jobs"]:
        pods, gpus = _gpus(entry)
        kind = entry["job"]["metadata"]["name"].split("-")[0]
        asked[kind] += pods * gpus * entry["runTime"]
    assert asked["small"] / capacity == pytest.approx(0.6, rel=0.1)
    assert asked["gang"] / capacity == pytest.approx(0.3, rel=0.1)


def test_declared_run_times_as_an_annotation() -> None:
    key = "example.com/runtime"
    for entry in trace_document(MixParams(hours=2, runtime_annotation=key))["jobs"]:
        assert entry["job"]["metadata"]["annotations"] == {key: f"{entry['runTime']}s"}


def test_the_simulator_admits_the_documents() -> None:
    params = MixParams(hours=1)
    cluster = parse_cluster(cluster_document(params.nodes), source="cluster")
    assert sum(int(n.status.allocatable[GPU]) for n in cluster.nodes) == params.nodes * 8
    text = dump(trace_document(params))
    jobs = parse_trace(json.loads(text), source="trace", queues=cluster.queues, read=lambda _: {})
    assert len(jobs) == len(trace_document(params)["jobs"]) > 0


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"nodes": 4}, "nodes"),
        ({"hours": 0}, "hours"),
        ({"small_load": 3}, "small_load"),
        ({"gang_load": -1}, "gang_load"),
    ],
)
def test_bad_parameters_are_named(fields: dict[str, float], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        MixParams(**fields)  # type: ignore[arg-type]


def test_main_writes_the_trace(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    assert main([str(out), "--hours", "1", "--seed", "7"]) == 0
    assert json.loads(out.read_text()) == trace_document(MixParams(hours=1, seed=7))
    assert main([str(out), "--nodes", "2"]) == 2


def test_a_json_trace_is_read_as_json(tmp_path: Path) -> None:
    """The simulator reads ``*.json`` with the JSON parser; a bad one names the file."""
    params = MixParams(hours=1)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster_document(params.nodes)))
    trace = tmp_path / "trace.json"
    trace.write_text(dump(trace_document(params)))
    scene = load_scenario(tmp_path / "cluster.yaml", trace)
    assert len(scene.jobs) == len(trace_document(params)["jobs"])
    trace.write_text('{"jobs": [')
    with pytest.raises(SpecError, match=r"trace\.json: not valid JSON"):
        load_scenario(tmp_path / "cluster.yaml", trace)


EXPERIMENT = Path(__file__).resolve().parent.parent / "examples" / "experiments" / "large-gangs"


def test_the_experiments_files_are_the_generators_output() -> None:
    """examples/experiments/large-gangs holds what the generator writes with its defaults (and
    the declared runtimes for trace-runtimes.json): regenerate them, never edit them."""
    params = MixParams()
    assert (EXPERIMENT / "trace.json").read_text() == dump(trace_document(params))
    declared = MixParams(runtime_annotation="scheduling.caldera.dev/expected-runtime")
    assert (EXPERIMENT / "trace-runtimes.json").read_text() == dump(trace_document(declared))
    cluster = yaml.safe_load((EXPERIMENT / "cluster.yaml").read_text())
    assert cluster == cluster_document(params.nodes)
