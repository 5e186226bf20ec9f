"""The seed experiments (examples/experiments/, simulator/experiments.py): every claim's figure
comes from a simulation, each claim holds as experiment.yaml expects it, and the committed
summary docs/experiments.md and report docs/experiments.html are what ``make experiments``
writes from them now."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
import yaml

from simulator.experiments import (
    EVALUATORS,
    ROOT,
    Finding,
    evaluate,
    html_page,
    load_spec,
    main,
    markdown,
    run_experiment,
)
from simulator.results import JobResult

DOCS = Path(__file__).resolve().parent.parent / "docs" / "experiments.md"
PAGE = DOCS.with_suffix(".html")
PNG = re.compile(r'src="data:image/png;base64,[^"]*"')
# The experiments run once for the module (about a minute of CPU, most of it the large-gangs
# trace's five runs), in the setup of whichever test asks first: more than the default bound
# on a loaded machine.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def findings() -> list[Finding]:
    return [evaluate(name, ROOT / name) for name in EVALUATORS]


def test_every_experiment_directory_has_an_evaluator() -> None:
    assert sorted(p.name for p in ROOT.iterdir() if p.is_dir()) == sorted(EVALUATORS)


def test_every_seed_claim_holds(findings: list[Finding]) -> None:
    """gang completes all five jobs where pod by pod deadlocks; drf splits 60/60; weights 3:1
    give 6:2; binpack uses one node for sixteen pods and 20+4 for twenty-four; binpack at weight
    10 starts a whole-node gang at once where spread one-GPU pods make it wait two hours;
    task-topology is 33% faster from a network penalty the sweep finds; toleration holds a low
    preemptor off for exactly its toleration-seconds."""
    failed = {f.name: f.verdict for f in findings if not f.holds}
    assert failed == {}


def test_the_committed_summary_is_what_the_experiments_give_now(findings: list[Finding]) -> None:
    """docs/experiments.md is generated: a change to the simulator or the scheduler that moves
    a figure must come with `make experiments`."""
    assert DOCS.read_text() == markdown(findings)


def test_the_committed_report_is_what_the_experiments_give_now(findings: list[Finding]) -> None:
    """docs/experiments.html likewise, every word and table of it; its plots are compared by
    place only, since their PNG bytes depend on matplotlib's version and fonts."""
    committed = PNG.sub('src="(plot)"', PAGE.read_text())
    assert committed.count('src="(plot)"') > 0
    assert committed == PNG.sub('src="(plot)"', html_page(findings))


def test_the_gang_notes_hold() -> None:
    """What the gang experiment's notes say of the pod-by-pod run: twelve pods fit, every job
    gets two or three, none gets six."""
    directory = ROOT / "gang"
    runs = run_experiment(directory, load_spec(directory))
    pod_by_pod = next(r for (label, _), r in runs.items() if label.startswith("pod by pod"))
    assert sorted(len(job.pods) for job in pod_by_pod.jobs) == [2, 2, 2, 3, 3]


def test_the_task_topology_notes_hold() -> None:
    """What the task-topology notes say of nodes of 8 cpu: with task-topology and binpack a job
    gets its two ps on one node and its workers elsewhere."""
    directory = ROOT / "task-topology"
    runs = run_experiment(directory, load_spec(directory))
    tight = runs[("task-topology + binpack, 3 nodes of 8 cpu", 0.0)]

    def split(job: JobResult) -> bool:
        ps = {p.node for p in job.pods if "-ps-" in p.pod}
        workers = {p.node for p in job.pods if "-worker-" in p.pod}
        return len(ps) == 1 and not ps & workers

    assert any(split(job) for job in tight.jobs)


def test_the_gpu_fragments_chart_run_is_the_charts_configuration() -> None:
    """The experiment's run of the chart's configuration runs what the chart installs."""
    chart = ROOT.parent.parent / "charts" / "caldera" / "values.yaml"
    installed = yaml.safe_load(yaml.safe_load(chart.read_text())["scheduler"]["conf"])
    assert yaml.safe_load((ROOT / "gpu-fragments" / "chart.yaml").read_text()) == installed


def test_the_gpu_fragments_notes_hold() -> None:
    """What the notes say of the chart's configuration: its one-GPU pods spread over every
    node, as the default's do, where binpack at weight 10 puts them on one."""
    directory = ROOT / "gpu-fragments"
    runs = run_experiment(directory, load_spec(directory))
    spread = {
        label: len({p.node for p in run.job("one-gpu").pods}) for (label, _), run in runs.items()
    }
    assert spread == {
        "binpack (weight 10)": 1,
        "the chart's configuration (binpack at weight 1)": 4,
        "binpack at weight 1 with the GPU": 4,
        "Volcano's default configuration": 4,
    }


def test_some_experiments_replace_no_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only`` prints its verdicts and writes nothing unless ``--out`` says where: a summary
    of one experiment must not replace docs/experiments.md, the summary of all."""
    monkeypatch.chdir(tmp_path)
    assert main(["--only", "binpack"]) == 0
    assert "binpack: the claim holds" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    out = tmp_path / "some"
    assert main(["--only", "binpack", "--out", str(out)]) == 0
    written = (out / "experiments.md").read_text()
    assert written.count('<a id="') == 1
    assert '<a id="binpack">' in written
    assert main(["--only", "nosuch"]) == 2


def test_the_large_gangs_sla_note_holds() -> None:
    """What the large-gangs notes say of the sla run: it decides exactly as today's (every job
    starts when it does without sla)."""
    directory = ROOT / "large-gangs"
    spec = load_spec(directory)
    chosen = tuple(r for r in spec.runs if r.label in ("no reservation (today)", "sla only"))
    runs = run_experiment(directory, msgspec.structs.replace(spec, runs=chosen))
    today, sla = (runs[(label, None)] for label in ("no reservation (today)", "sla only"))
    assert [(j.job, j.started) for j in sla.jobs] == [(j.job, j.started) for j in today.jobs]
    first = today.job("gang-00").wait
    assert first is not None
    assert first > 4 * 3600, "the first gang starves: it waits past the goal's bound"
