"""The scheduler process's read of deviceshare's device ConfigMap (scheduler.device_config),
against a fake API server: the source from the configuration, geometries read, a missing or
malformed ConfigMap a reason and never an exception, reads at most every REFRESH_SECONDS."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from caldera.api.mig import CONFIG_KEY
from scheduler.conf import parse_conf
from scheduler.device_config import REFRESH_SECONDS, DeviceConfigReader, config_source
from scheduler.registry import REGISTRY
from unit.test_kube_protocol import FakeApiServer, Sleeps, make_client, reply, status

GEOMETRIES = """
nvidia:
  knownMigGeometries:
  - models: [A30]
    allowedGeometries:
    - group: group1
      geometries: [{name: 1g.6gb, memory: 6144, count: 4}]
"""


def configmap(text: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-vgpu-device-config", "namespace": "kube-system"},
        "data": {CONFIG_KEY: text},
    }


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    fake = FakeApiServer()
    await fake.start()
    yield fake
    await fake.stop()


def test_the_source_comes_from_deviceshares_arguments() -> None:
    """Volcano's defaults, its argument names, and none without VGPUEnable."""

    def source(arguments: str) -> tuple[str, str] | None:
        text = f"""
actions: "allocate"
tiers:
- plugins:
  - name: deviceshare
    arguments: {{{arguments}}}
"""
        parsed = parse_conf(text, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
        return config_source(parsed)

    assert source("deviceshare.VGPUEnable: true") == ("kube-system", "volcano-vgpu-device-config")
    assert source(
        "deviceshare.VGPUEnable: true, deviceshare.KnownGeometriesCMName: mine,"
        " deviceshare.KnownGeometriesCMNamespace: gpu"
    ) == ("gpu", "mine")
    assert source("deviceshare.VGPUEnable: false") is None


async def test_geometries_are_read_and_read_again_only_when_due(server: FakeApiServer) -> None:
    """A good ConfigMap gives its geometries; a second call within REFRESH_SECONDS sends no
    request; a later one does."""
    server.handlers = [reply(200, configmap(GEOMETRIES))]
    client = make_client(server.port, Sleeps(), CollectorRegistry())
    try:
        reader = DeviceConfigReader(client)
        source = ("kube-system", "volcano-vgpu-device-config")
        assert await reader.refresh(source, 100.0)
        assert reader.config.geometries_for("NVIDIA-A30")[0].group == "group1"
        assert reader.config.problem == ""
        assert not await reader.refresh(source, 100.0 + REFRESH_SECONDS / 2)
        assert len(server.seen) == 1
        assert (
            server.seen[0][1]
            == "/api/v1/namespaces/kube-system/configmaps/volcano-vgpu-device-config"
        )
        assert not await reader.refresh(source, 100.0 + REFRESH_SECONDS)  # read, unchanged
        assert len(server.seen) == 2
        assert await reader.refresh(None, 200.0)  # no longer configured
        assert reader.config.known == ()
    finally:
        await client.close()


async def test_missing_or_malformed_configmaps_give_a_reason(server: FakeApiServer) -> None:
    """404 and a field that does not read each leave no geometry and say why."""
    bad = "nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: 7}]}"
    server.handlers = [
        reply(404, status(404, "NotFound", "configmaps not found")),
        reply(200, configmap(bad)),
        reply(403, status(403, "Forbidden", "no")),
    ]
    client = make_client(server.port, Sleeps(), CollectorRegistry())
    try:
        reader = DeviceConfigReader(client)
        source = ("kube-system", "cm")
        assert await reader.refresh(source, 0.0)
        assert reader.config.problem == "ConfigMap kube-system/cm not found"
        assert await reader.refresh(source, REFRESH_SECONDS)
        assert "allowedGeometries: must be a list" in reader.config.problem
        assert reader.config.known == ()
        assert await reader.refresh(source, 2 * REFRESH_SECONDS)
        assert "403" in reader.config.problem
    finally:
        await client.close()
