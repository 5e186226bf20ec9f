"""The simulator against the real system: the cross-check trace (e2e/crosscheck/, 20 Volcano Jobs
in three waves on 8 nodes of 4 cpu) is simulated, then run on a control plane of its own with
kwok nodes, ``caldera scheduler`` (the trace's configuration) and ``caldera controllers``
(the job controller). Both must agree, for every job:

- where its pods went, up to which node is which: for each run of the job's pods (the first
  pods, the pods a restart created again...), which of its pods shared a node;
- the phases it went through and the one it ended in.

Run times and exit codes are kwok's annotations on the pod templates, which the simulator reads
as run times. The real run starts each wave once the previous one has ended (the trace spaces
the waves further apart than the simulator needs), so each wave meets an empty cluster in both.
The control plane is the test's own, so that no other test's nodes or pods count in the
scheduler's view (proportion and overcommit divide the whole cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api.kinds import JOB, NAMESPACE, POD
from caldera.api.volcano import JOB_NAME_KEY, Job
from caldera.kube.client import ClientOptions, KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import ControlPlane, NodeSpec
from e2e.conftest import own_plane
from e2e.waiting import eventually
from simulator.engine import Simulation
from simulator.loading import load_conf, load_scenario
from simulator.results import RunResult

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parent / "crosscheck"
ENDED = frozenset({"Completed", "Failed", "Aborted", "Terminated"})
NAMESPACE_NAME = "crosscheck"

# job -> {run of its pods (1 = first) -> the sets of its pods that shared a node}
Placements = dict[str, dict[int, frozenset[frozenset[str]]]]


def placements(runs: Iterable[tuple[str, int, str, str]]) -> Placements:
    """From (job, run, pod, node) to each job's pods grouped by node, per run."""
    grouped: dict[str, dict[int, dict[str, set[str]]]] = defaultdict(lambda: defaultdict(dict))
    for job, attempt, pod, node in runs:
        grouped[job][attempt].setdefault(node, set()).add(pod)
    return {
        job: {a: frozenset(frozenset(pods) for pods in nodes.values()) for a, nodes in by.items()}
        for job, by in grouped.items()
    }


def simulated_placements(result: RunResult) -> Placements:
    return placements(
        (job.job.split("/", 1)[1], pod.attempt, pod.pod, pod.node)
        for job in result.jobs
        for pod in job.pods
    )


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of the test's own: 8 kwok nodes of 4 cpu and Caldera's CRDs."""
    directory = tmp_path_factory.mktemp("crosscheck")
    with own_plane(directory, "starts a control plane of its own") as own:
        own.create_nodes(8, NodeSpec(cpu="4", memory="32Gi", pods="110"), prefix="xc-")
        yield own


@contextlib.asynccontextmanager
async def watched_binds(
    kube: KubeClient, namespace: str, into: list[tuple[str, int, str, str]]
) -> AsyncIterator[None]:
    """Record (job, run, pod, node) for every pod bound while the block runs; a pod's run is
    how many pods of its name had been created by then."""
    created: dict[str, list[str]] = defaultdict(list)  # pod name -> uids, in creation order
    bound: set[str] = set()
    async with kube.watch(POD, namespace=namespace, allow_watch_bookmarks=False) as events:

        async def pump() -> None:
            async for event in events:
                pod: Any = event.object
                meta = pod.metadata
                if meta.uid not in created[meta.name]:
                    created[meta.name].append(meta.uid)
                if pod.spec.node_name and meta.uid not in bound:
                    bound.add(meta.uid)
                    attempt = created[meta.name].index(meta.uid) + 1
                    job = meta.annotations.get(JOB_NAME_KEY, "")
                    into.append((job, attempt, meta.name, pod.spec.node_name))

        runner = asyncio.create_task(pump())
        try:
            yield
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner


def waves() -> list[list[dict[str, Any]]]:
    """The trace's manifests as written, grouped by arrival time, in order."""
    document = yaml.safe_load((DATA / "trace.yaml").read_text())
    grouped: dict[float, list[dict[str, Any]]] = {}
    for entry in document["jobs"]:
        grouped.setdefault(float(entry["arrival"]), []).append(entry["job"])
    return [grouped[at] for at in sorted(grouped)]


async def test_the_simulator_places_and_ends_jobs_as_the_real_system_does(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """Same pods sharing nodes per job and run, same phases entered, same final phase."""
    scenario = load_scenario(DATA / "cluster.yaml", DATA / "trace.yaml")
    conf_text = (DATA / "scheduler.yaml").read_text()
    simulated = Simulation(scenario, conf=load_conf(conf_text, "scheduler.yaml")).run()
    arrivals = sorted({s.at for s in scenario.jobs})
    for start, following in itertools.pairwise(arrivals):
        ends = [j.finished for j in simulated.jobs if j.arrival == start]
        assert all(e is not None and e < following for e in ends), "waves overlap in the trace"

    conf = tmp_path / "scheduler.yaml"
    conf.write_text(conf_text)
    scheduler = CalderaProcess(
        "scheduler",
        ["--leader-elect=false", "--schedule-period=1", f"--scheduler-conf={conf}"],
        kubeconfig=plane.kubeconfig,
        log_dir=tmp_path,
    )
    controllers = CalderaProcess(
        "controllers",
        ["--controllers=job", "--leader-elect=false"],
        kubeconfig=plane.kubeconfig,
        log_dir=tmp_path,
    )
    binds: list[tuple[str, int, str, str]] = []
    options = ClientOptions(qps=1000, burst=1000)
    try:
        async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
            await kube.create(NAMESPACE, {"metadata": {"name": NAMESPACE_NAME}})
            await eventually(lambda: _ready(scheduler, controllers), timeout=60, what="readiness")
            async with watched_binds(kube, NAMESPACE_NAME, binds):
                for wave in waves():
                    for manifest in wave:
                        await kube.create(JOB, manifest, namespace=NAMESPACE_NAME)
                    await _wave_ended(kube, [m["metadata"]["name"] for m in wave])
                await asyncio.sleep(1)  # the last binds' events
            jobs = {
                j.metadata.name: j for j in (await kube.list(JOB, namespace=NAMESPACE_NAME)).items
            }
    finally:
        logs = []
        for proc in (scheduler, controllers):
            if proc.stop() != 0:
                logs.append(proc.log()[-3000:])
        assert not logs, "\n".join(logs)

    real_phases = {name: (j.status.state.phase, _entered(j)) for name, j in jobs.items()}
    sim_phases = {j.job.split("/", 1)[1]: (j.phase, frozenset(j.phases)) for j in simulated.jobs}
    assert real_phases == sim_phases
    assert placements(binds) == simulated_placements(simulated)


def _entered(job: Job) -> frozenset[str]:
    """The phases a Job entered (its conditions keep one per phase)."""
    return frozenset(c.status for c in job.status.conditions)


async def _ready(*procs: CalderaProcess) -> bool:
    return all(proc.get("/readyz")[0] == 200 for proc in procs)


async def _wave_ended(kube: KubeClient, names: list[str]) -> None:
    """Wait until every job of a wave has ended."""

    async def ended() -> bool:
        items = (await kube.list(JOB, namespace=NAMESPACE_NAME)).items
        phases = {j.metadata.name: j.status.state.phase for j in items}
        return all(phases.get(n) in ENDED for n in names)

    await eventually(ended, timeout=60, interval=0.5, what=f"the wave of {names[0]} to end")
