"""The simulator models GPU cards: a node group carries HAMi's register annotation, the
deviceshare plugin places vGPU pods on cards, and the bind's annotations reach the simulated
pods, so later sessions count the cards their pods hold."""

from __future__ import annotations

from typing import Any

from caldera.api.vgpu import IDS, Card, decode_pod_devices, encode_register
from scheduler.conf import DEFAULT_CONF
from simulator.engine import Limits, Simulation
from unit.sim_fixtures import conf, entry, job, scenario

DEVICESHARE = DEFAULT_CONF + (
    "  - name: deviceshare\n"
    "    arguments: {deviceshare.VGPUEnable: true, deviceshare.SchedulePolicy: binpack}\n"
)


def vgpu_task(name: str, replicas: int, memory: int) -> dict[str, Any]:
    asked = {"cpu": "1", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)}
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": name,
                        "image": "busybox",
                        "resources": {"requests": asked, "limits": asked},
                    }
                ],
            }
        },
    }


def test_vgpu_pods_share_cards_across_sessions() -> None:
    """Three pods of 3000 MiB arriving a minute apart on one node of two 8000 MiB cards:
    binpack puts two on the first card and the third on the second (2000 MiB left on the
    first), each later session counting what the earlier binds wrote; a fourth of 6000 MiB
    waits (no card has 6000 MiB left)."""
    cards = [Card(i, f"GPU-{i}", 10, 8000, "NVIDIA-A100", True, "hami-core") for i in range(2)]
    totals = {"volcano.sh/vgpu-number": "20", "volcano.sh/vgpu-memory": "16000"}
    cluster = {
        "nodes": [
            {
                "name": "gpu",
                "resources": {
                    "cpu": "16",
                    "memory": "64Gi",
                    "volcano.sh/vgpu-cores": "200",
                    **totals,
                },
                "annotations": {"volcano.sh/node-vgpu-register": encode_register(cards)},
            }
        ]
    }
    entries = [
        entry(job(f"j{i}", vgpu_task("w", 1, 3000), minAvailable=1), arrival=60.0 * i, runTime="2h")
        for i in range(3)
    ]
    entries.append(entry(job("big", vgpu_task("w", 1, 6000), minAvailable=1), 300.0, runTime="1h"))
    sim = Simulation(
        scenario(*entries, cluster=cluster), conf=conf(DEVICESHARE), limits=Limits(until=900)
    )
    result = sim.run()
    held: dict[str, list[tuple[str, int]]] = {}
    for pod in sim.world.pods.items.values():
        devices = decode_pod_devices(pod.metadata.annotations.get(IDS, ""))
        held[pod.metadata.name] = [(d.uuid, d.memory) for c in devices for d in c]
    assert sorted(uuid for name, g in held.items() if name.startswith("j") for uuid, _ in g) == [
        "GPU-0",
        "GPU-0",
        "GPU-1",
    ]
    assert result.job("big").started is None
