"""Fencing on the real API server (the full run is ``bench/chaos.py --fencing``;
docs/reliability.md has its figures): the scheduler's leader, then the controllers', is paused
(SIGSTOP) past its Lease, the standby takes over and places a job, and the old leader resumes
just as a job arrives that fits only on a stale snapshot. Counted from the audit log, where each
replica is its own ServiceAccount: the old leader's writes after the takeover (none: its fence
closed at its last renewal plus the renew deadline) and the nodes over-committed (none). Short
Lease timings keep it to about a minute (``e2e.chaos.fencing.SHORT``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from caldera.api.kinds import CONFIGMAP, LEASE
from caldera.kube.client import KubeClient
from caldera.kube.fence import FencedError
from caldera.kube.leader import LeaderElector, LeadershipLostError, LeaseConfig
from e2e.chaos.fencing import SHORT, run_fencing, table
from e2e.cluster.control_plane import ControlPlane
from e2e.conftest import Cluster

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


async def test_a_leader_whose_lease_another_holds_stops_writing_at_its_next_round(
    cluster: Cluster, kube: KubeClient, namespace: str
) -> None:
    """In-process, on the real API server: an elector leads and writes; the Lease's holder is
    changed under it (an administrator's edit). Its next renewal round closes the fence at once,
    well before its renew deadline: the next write is dropped, and ``run`` ends."""
    config = LeaseConfig(
        namespace=namespace,
        name="fenced",
        identity="replica-a",
        lease_duration=12.0,
        renew_deadline=8.0,
        retry_period=0.5,
    )
    async with KubeClient.from_kubeconfig(cluster.kubeconfig) as client:
        lease_client = client.lease_client(config.call_timeout)
        elector = LeaderElector(lease_client, config)
        client.fence = elector.fence
        leading = asyncio.Event()

        async def lead() -> None:
            leading.set()
            await asyncio.Event().wait()

        running = asyncio.create_task(elector.run(lead))
        try:
            await asyncio.wait_for(leading.wait(), 15)
            await client.create(CONFIGMAP, config_map("while-leading"), namespace=namespace)
            await kube.patch(
                LEASE, "fenced", {"spec": {"holderIdentity": "intruder"}}, namespace=namespace
            )
            taken = time.monotonic()
            with pytest.raises(LeadershipLostError):
                await asyncio.wait_for(running, config.renew_deadline + 5)
            assert time.monotonic() - taken < config.renew_deadline / 2, "at the next round"
            with pytest.raises(FencedError):
                await client.create(CONFIGMAP, config_map("after"), namespace=namespace)
        finally:
            running.cancel()
            await lease_client.close()
    names = {c.metadata.name for c in (await kube.list(CONFIGMAP, namespace=namespace)).items}
    assert "while-leading" in names
    assert "after" not in names
    lease = await kube.get(LEASE, "fenced", namespace=namespace)
    assert lease.spec.holder_identity == "intruder", "the loser did not write the Lease back"


def config_map(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
