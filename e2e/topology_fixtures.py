"""What the network-topology e2e tests share: 2 spines x 2 racks x 2 kwok nodes of 8 cpu for
the test, and Caldera's controllers (with the hypernode controller's label discovery) and
scheduler (with the network-topology-aware plugin) as processes (e2e/test_topology.py,
e2e/test_partitions.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import LABEL_DISCOVERY, NodeSpec
from e2e.conftest import Cluster
from scheduler.conf import DEFAULT_CONF

SCHEDULER_CONF = DEFAULT_CONF + "  - name: network-topology-aware\n"


@pytest.fixture(name="topology")
def topology_nodes(cluster: Cluster, namespace: str) -> Iterator[dict[str, tuple[str, str]]]:
    """2 spines x 2 racks x 2 nodes of 8 cpu, labelled for this test (node -> (rack, spine));
    deleted afterwards so that other tests' pods never land on them."""
    if cluster.plane is None:
        pytest.skip("creates and labels fake nodes")
    spec = NodeSpec(cpu="8", memory="64Gi", labels={"e2e-topology": namespace})
    where = cluster.plane.create_topology_nodes(2, 2, 2, spec, prefix=f"{namespace}-")
    yield where
    cluster.plane.kubectl("delete", "node", "--wait=false", "--ignore-not-found", *where)


def topology_processes(
    cluster: Cluster, tmp_path: Path, controllers: str
) -> Iterator[tuple[CalderaProcess, CalderaProcess]]:
    """The ``controllers`` (with the label discovery) and the scheduler, as processes not yet
    started; both must exit cleanly after the test."""
    discovery = tmp_path / "volcano-controller.conf"
    discovery.write_text(yaml.safe_dump(LABEL_DISCOVERY))
    conf = tmp_path / "scheduler.conf"
    conf.write_text(SCHEDULER_CONF)
    running = CalderaProcess(
        "controllers",
        [
            f"--controllers={controllers}",
            "--leader-elect=false",
            f"--network-topology-discovery={discovery}",
        ],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    scheduler = CalderaProcess(
        "scheduler",
        ["--leader-elect=false", "--schedule-period=0.5", f"--scheduler-conf={conf}"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    yield running, scheduler
    assert scheduler.stop() == 0, scheduler.log()[-3000:]
    assert running.stop() == 0, running.log()[-3000:]
