"""The seed experiments (examples/experiments/, simulator/experiments.py): every claim's figure
comes from a simulation, each claim holds as experiment.yaml expects it, and the committed
summary docs/experiments.md is what ``make experiments`` writes from them now."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.experiments import EVALUATORS, ROOT, Finding, evaluate, markdown

DOCS = Path(__file__).resolve().parent.parent / "docs" / "experiments.md"


@pytest.fixture(scope="module")
def findings() -> list[Finding]:
    return [evaluate(name, ROOT / name) for name in EVALUATORS]


def test_every_experiment_directory_has_an_evaluator() -> None:
    assert sorted(p.name for p in ROOT.iterdir() if p.is_dir()) == sorted(EVALUATORS)


def test_every_seed_claim_holds(findings: list[Finding]) -> None:
    """gang completes all five jobs where pod by pod deadlocks; drf splits 60/60; weights 3:1
    give 6:2; binpack uses one node for sixteen pods and 20+4 for twenty-four; task-topology is
    33% faster from a network penalty the sweep finds; toleration holds a low preemptor off
    for exactly its toleration-seconds."""
    failed = {f.name: f.verdict for f in findings if not f.holds}
    assert failed == {}


def test_the_committed_summary_is_what_the_experiments_give_now(findings: list[Finding]) -> None:
    """docs/experiments.md is generated: a change to the simulator or the scheduler that moves
    a figure must come with `make experiments`."""
    assert DOCS.read_text() == markdown(findings)
