"""A short seeded chaos round in CI (the full run is ``bench/chaos.py``; docs/reliability.md has
its figures): 30 jobs of every shape while each Caldera process is killed once, the API server
restarts, etcd compacts, connections drop and pods are deleted; the processes run as the chart's
ServiceAccounts. Every invariant of the full run must hold: each job ends as its policies and
pods dictate, no duplicate pod, no orphan, counts equal to the pods, no gang partly bound, no
crash or unhandled exception, no right used beyond the roles, no secret in a log or Event."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.chaos.faults import FaultCounts
from e2e.chaos.run import ChaosConfig, run_chaos
from e2e.cluster.control_plane import ControlPlane

pytestmark = pytest.mark.e2e

SHORT = ChaosConfig(
    seed=7,
    jobs=30,
    window=45.0,
    faults=FaultCounts(
        kills_per_process=1,
        apiserver_restarts=1,
        compactions=1,
        drops=1,
        eviction_bursts=1,
        evictions_per_burst=5,
    ),
    settle_timeout=240.0,
    cleanup_timeout=150.0,
)


@pytest.mark.timeout(600)
async def test_a_short_chaos_round_keeps_every_invariant(
    plane: ControlPlane, crds: Path, tmp_path: Path
) -> None:
    report = await run_chaos(plane, SHORT, tmp_path)
    print("\n" + report.details() + "\n\n" + report.table())
    assert report.ok, report.details()
    assert report.kills == 3
    assert report.pods_seen > SHORT.jobs, "the jobs ran pods"
    assert report.rights, "the processes ran as their ServiceAccounts and were audited"
