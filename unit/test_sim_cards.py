"""The cards of a simulated run (simulator/cards.py): which card each pod used, how much of
the cards' memory was in use, and how many cards were partly used, over time."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.vgpu import ContainerDevice, encode_pod_devices
from simulator.cards import (
    CardSample,
    CardUse,
    capacity,
    card_needs,
    card_series,
    card_uses,
    time_average,
)
from simulator.experiments import ROOT, load_spec, main, with_variant
from simulator.loading import load_scenario
from simulator.results import JobResult, PodRun, RunResult, Series
from simulator.spec import SpecError

SHARING = ROOT / "gpu-sharing"


def devices(*cards: tuple[str, int]) -> str:
    return encode_pod_devices(
        (tuple(ContainerDevice(uuid, "NVIDIA", memory, 25) for uuid, memory in cards),)
    )


def run_of(*jobs: JobResult, end: float = 100.0) -> RunResult:
    return RunResult(
        mode="scheduler",
        label="t",
        end=end,
        jobs=list(jobs),
        utilisation=Series(),
        queues={},
        unschedulable={},
        capacity={},
    )


def test_a_shared_card_is_partly_used_until_its_pods_fill_it() -> None:
    """Two pods of 40 on one card of 80 (same node), a third on the same UUID of another node:
    the first card is partly used, then full, then partly used again when one pod ends."""
    job = JobResult(
        job="default/j",
        queue="default",
        arrival=0.0,
        pods=[
            PodRun(
                pod="a", attempt=1, node="n1", bound=0.0, ended=50.0, devices=devices(("G", 40))
            ),
            PodRun(pod="b", attempt=1, node="n1", bound=10.0, devices=devices(("G", 40))),
            PodRun(
                pod="c", attempt=1, node="n2", bound=10.0, ended=20.0, devices=devices(("G", 8))
            ),
        ],
    )
    series = card_series(card_uses(run_of(job)), 80)
    assert series == [
        CardSample(0.0, 40, 1, 1),
        CardSample(10.0, 88, 2, 1),
        CardSample(20.0, 80, 1, 0),
        CardSample(50.0, 40, 1, 1),
        CardSample(100.0, 0, 0, 0),
    ]
    assert time_average(series, 100.0, "partly") == pytest.approx(0.7)


def test_a_pod_without_sharing_holds_whole_cards_of_its_own() -> None:
    """Two one-card pods needing 20 each on one node hold two cards, each partly used; a pod of
    a job with no need (no GPU) holds none."""
    pods = [PodRun(pod=p, attempt=1, node="n1", bound=0.0, ended=10.0) for p in ("a", "b")]
    jobs = [
        JobResult(job="default/gpu", queue="q", arrival=0.0, pods=pods),
        JobResult(job="default/cpu", queue="q", arrival=0.0, pods=[pods[0]]),
    ]
    uses = card_uses(run_of(*jobs), {"default/gpu": (20,)})
    assert len({u.card for u in uses}) == 2
    assert card_series(uses, 80)[0] == CardSample(0.0, 40, 2, 2)
    assert card_uses(run_of(*jobs)) == []


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 80), st.integers(0, 50), st.integers(0, 50)),
        max_size=30,
    )
)
def test_the_series_matches_a_recount_at_every_sample(
    raw: list[tuple[int, int, int, int]],
) -> None:
    """Every sample equals counting the uses that hold at its time from scratch, and the
    series ends with every card free."""
    uses = [CardUse(("n", str(c)), m, float(a), float(a + d)) for c, m, a, d in raw]
    samples = card_series(uses, 80)
    for sample in samples:
        held: dict[tuple[str, str], int] = {}
        for use in uses:
            if use.start <= sample.time < use.end:
                held[use.card] = held.get(use.card, 0) + use.memory
        assert sample.memory == sum(held.values())
        assert sample.used == sum(1 for m in held.values() if m > 0)
        assert sample.partly == sum(1 for m in held.values() if 0 < m < 80)
    assert samples[-1].memory == 0
    assert [s.time for s in samples] == sorted({s.time for s in samples})


def test_the_experiment_cluster_and_needs() -> None:
    """The gpu-sharing cluster registers 400 cards of 80 GiB; its inference pods need 20 GiB
    of one card, its training pods 8 whole cards."""
    scenario = load_scenario(SHARING / "cluster.yaml", SHARING / "trace.yaml")
    size = capacity(scenario)
    assert (size.cards, size.memory, size.total) == (400, 81920, 400 * 81920)
    needs = card_needs(scenario)
    assert needs["default/inference-0"] == (20480,)
    assert needs["default/training-0"] == (81920,) * 8
    whole = load_scenario(SHARING / "cluster-whole.yaml", SHARING / "trace-whole.yaml")
    assert capacity(whole).cards == 0
    assert card_needs(whole) == {}


def test_the_variant_reads_the_larger_files() -> None:
    """--variant 1000 swaps every run's cluster and trace for the 1,000-node pair; an
    experiment without such files is an error naming the run."""
    spec = with_variant(SHARING, load_spec(SHARING), "1000")
    assert {(r.cluster, r.trace) for r in spec.runs} == {
        ("cluster-whole-1000.yaml", "trace-whole-1000.yaml"),
        ("cluster-1000.yaml", "trace-1000.yaml"),
    }
    large = load_scenario(SHARING / "cluster-1000.yaml", SHARING / "trace-1000.yaml")
    assert capacity(large).cards == 8000
    with pytest.raises(SpecError, match=r"run 'binpack \(weight 10\)' has no variant '1000'"):
        with_variant(ROOT / "binpack", load_spec(ROOT / "binpack"), "1000")
    with pytest.raises(SpecError, match="variant: letters, digits and _ only"):
        with_variant(SHARING, load_spec(SHARING), "../1000")


def test_the_variant_needs_only(tmp_path: Path) -> None:
    """A summary of every experiment is of the committed files: --variant needs --only."""
    assert main(["--variant", "1000", "--out", str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []
