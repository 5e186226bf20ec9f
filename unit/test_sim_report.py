"""``caldera simulate`` end to end at smoke size (cli/simulate.py, simulator/report.py): a
synthetic trace of 60 jobs on 10 nodes runs under the configured scheduler and both baselines;
the JSON holds every run and job, and the HTML report is one self-contained page with the
comparison, its plots (PNG data) and the job tables. This is the report CI builds."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import yaml

from cli.main import main
from simulator.results import Report
from simulator.synthetic import cluster_document, trace_document

JOBS, NODES = 60, 10
REPO = Path(__file__).resolve().parent.parent
LABELS = ("configured scheduler", "pod by pod (no gang, no queues)", "FIFO (no queues)")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the smoke trace's cluster file (YAML) and trace (JSON)."""
    tmp = tmp_path_factory.mktemp("simulate")
    (tmp / "cluster.yaml").write_text(yaml.safe_dump(cluster_document(NODES)))
    (tmp / "trace.json").write_bytes(msgspec.json.encode(trace_document(JOBS, NODES, seed=7)))
    return tmp


def test_simulate_writes_json_and_a_self_contained_html_report(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0; the table names every run; the JSON decodes to a Report with the three runs and
    every job; the HTML embeds its plots as PNG data and names every run and job."""
    tmp = simulated
    code = main(
        [
            "simulate",
            str(tmp / "cluster.yaml"),
            str(tmp / "trace.json"),
            "--json",
            str(tmp / "out.json"),
            "--html",
            str(tmp / "out.html"),
            "--gantt",
            "job-000001,job-000002",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert f"{JOBS} jobs on {NODES} nodes" in printed
    for label in LABELS:
        assert label in printed
    report = msgspec.json.decode((tmp / "out.json").read_bytes(), type=Report)
    assert [run.label for run in report.runs] == list(LABELS)
    for run in report.runs:
        assert len(run.jobs) == JOBS
        assert run.sessions > 0
        assert run.utilisation.times
    scheduler = report.runs[0]
    assert sum(1 for j in scheduler.jobs if j.phase == "Completed") == JOBS
    nodes = {f"gpu-{i}" for i in range(8)} | {"cpu-0", "cpu-1"}
    assert {p.node for j in scheduler.jobs for p in j.pods} <= nodes
    assert set(scheduler.queues) >= {"research", "training", "inference", "adhoc"}

    page = (tmp / "out.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page  # nothing to fetch
    assert "https://" not in page
    for heading in (
        "Runs side by side",
        "Cluster utilisation",
        "Queue shares",
        "Job wait times",
        "Gantt chart",
        "Why pods waited",
    ):
        assert f"<h2>{heading}</h2>" in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 4  # utilisation, queue shares, wait times, Gantt
    assert all(base64.b64decode(data).startswith(b"\x89PNG\r\n") for data in images)
    for label in LABELS:
        assert f"<h2>Jobs: {label}</h2>" in page
    assert "default/job-000000" in page


def test_simulate_refuses_a_bad_trace_naming_the_field(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace the cluster would refuse ends with one line naming the entry and the field."""
    tmp = simulated
    bad = {
        "jobs": [
            {
                "arrival": 0,
                "job": {
                    "kind": "Job",
                    "metadata": {"name": "x"},
                    "spec": {"minAvailable": 3, "tasks": [{"name": "w", "replicas": 1}]},
                },
            }
        ]
    }
    (tmp / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert main(["simulate", str(tmp / "cluster.yaml"), str(tmp / "bad.yaml")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("caldera: error: ")
    assert "bad.yaml.jobs[0]: job 'x' is refused: " in error
    assert "spec.minAvailable: job 'minAvailable' should not be greater than" in error


def test_simulate_refuses_unknown_baselines_and_missing_gantt_jobs(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp = simulated
    args = ["simulate", str(tmp / "cluster.yaml"), str(tmp / "trace.json")]
    assert main([*args, "--baselines", "random"]) == 1
    assert "--baselines: unknown random" in capsys.readouterr().err
    assert (
        main([*args, "--baselines", "none", "--html", str(tmp / "x.html"), "--gantt", "nope"]) == 1
    )
    assert "--gantt: the trace has no job 'nope'" in capsys.readouterr().err


def test_the_cli_imports_the_simulator_only_when_simulate_runs() -> None:
    """Building the parser (every command's start) imports neither the simulator nor
    matplotlib."""
    probe = (
        "import sys; from cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('simulator', 'matplotlib')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert found.stdout.strip() == "[]"
