"""Fencing on the real API server (the full run is ``bench/chaos.py --fencing``;
docs/reliability.md has its figures): the scheduler's leader, then the controllers', is paused
(SIGSTOP) past its Lease, the standby takes over and places a job, and the old leader resumes
just as a job arrives that fits only on a stale snapshot. Counted from the audit log, where each
replica is its own ServiceAccount: the old leader's writes after the takeover (none: its fence
closed at its last renewal plus the renew deadline) and the nodes over-committed (none). Short
Lease timings keep it to about a minute (``e2e.chaos.fencing.SHORT``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.chaos.fencing import SHORT, run_fencing, table
from e2e.cluster.control_plane import ControlPlane

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(300)
async def test_a_paused_leader_makes_no_write_after_losing_its_lease(
    plane: ControlPlane, crds: Path, tmp_path: Path
) -> None:
    rounds = await run_fencing(plane, SHORT, tmp_path)
    print("\n" + table(rounds))
    assert [r.target for r in rounds] == ["scheduler", "controllers"]
    for result in rounds:
        assert result.takeover is not None, f"the {result.target} standby took the Lease"
        assert result.writes_after == [], table(rounds)
        assert result.overcommitted == [], table(rounds)
        assert result.old_leader_lost, f"the old {result.target} leader exited on its lost Lease"
