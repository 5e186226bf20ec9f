"""The informer against the real API server: every change seen once and in order, and the cache
converges after a cut watch (API server restart) and after a 410 (etcd history compacted)."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry

from caldera.api.core import ConfigMap
from caldera.api.kinds import CONFIGMAP
from caldera.api.meta import ObjectMeta
from caldera.kube.client import KubeClient
from e2e.cluster.control_plane import ControlPlane
from e2e.waiting import eventually
from informers.factory import SharedInformerFactory
from informers.metrics import InformerMetrics
from informers.reflector import Reflector
from informers.store import Store

pytestmark = pytest.mark.e2e


ROOT_CA = "kube-root-ca.crt"  # published into every namespace by kube-controller-manager


class Recorder:
    """A handler that records (event, name, resourceVersion) in delivery order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []

    def _add(self, what: str, obj: ConfigMap) -> None:
        self.events.append((what, obj.metadata.name or "", int(obj.metadata.resource_version or 0)))

    def on_add(self, obj: ConfigMap) -> None:
        self._add("add", obj)

    def on_update(self, old: ConfigMap, new: ConfigMap) -> None:
        self._add("update", new)

    def on_delete(self, obj: ConfigMap) -> None:
        self._add("delete", obj)


def _cm(name: str, value: str = "0") -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name), data={"v": value})


async def _bounded(n: int, coros: list[object]) -> None:
    sem = asyncio.Semaphore(n)

    async def one(c: object) -> None:
        async with sem:
            await c  # type: ignore[misc]

    await asyncio.gather(*(one(c) for c in coros))


async def _store_equals_list(kube: KubeClient, store: Store[ConfigMap], namespace: str) -> bool:
    listed = await kube.list(CONFIGMAP, namespace=namespace)
    want = {(c.metadata.name, c.metadata.resource_version) for c in listed.items}
    have = {(c.metadata.name, c.metadata.resource_version) for c in store.list()}
    return want == have


async def test_every_change_of_1000_objects_seen_once_in_order(
    kube: KubeClient, namespace: str
) -> None:
    """Creates, updates and deletes of 1,000 objects reach the handler in resourceVersion order,
    each exactly once."""
    registry = CollectorRegistry()
    factory = SharedInformerFactory(kube, registry=registry, namespace=namespace)
    informer = factory.informer(CONFIGMAP)
    assert factory.informer(CONFIGMAP) is informer, "one informer per kind"
    recorder = Recorder()
    informer.add_handler(recorder)
    factory.start()
    try:
        await asyncio.wait_for(factory.wait_for_sync(), 30)
        names = [f"cm-{i:04d}" for i in range(1000)]
        started = time.monotonic()
        await _bounded(20, [kube.create(CONFIGMAP, _cm(n), namespace=namespace) for n in names])
        patch = {"data": {"v": "1"}}
        await _bounded(20, [kube.patch(CONFIGMAP, n, patch, namespace=namespace) for n in names])
        await _bounded(20, [kube.delete(CONFIGMAP, n, namespace=namespace) for n in names])
        elapsed = time.monotonic() - started

        def complete() -> bool:
            deletes = sum(1 for e in recorder.events if e[0] == "delete")
            left = [o for o in informer.store.list() if (o.metadata.name or "").startswith("cm-")]
            return deletes >= 1000 and not left

        await eventually(lambda: _value(complete()), timeout=60, what="all 3,000 events")
    finally:
        await factory.stop()
    # The namespace's default objects (kube-root-ca.crt) are not ours.
    ours = [e for e in recorder.events if e[1].startswith("cm-")]
    assert len(ours) == 3000, f"3,000 events, got {len(ours)} ({elapsed:.1f}s of writes)"
    versions = [e[2] for e in ours]
    assert versions == sorted(versions), "delivered in resourceVersion order"
    assert len(set(versions)) == 3000, "none delivered twice"
    for name in names[::97]:
        assert [e[0] for e in ours if e[1] == name] == ["add", "update", "delete"]
    events = registry.get_sample_value(
        "caldera_informer_events_total", {"resource": "configmaps", "type": "DELETED"}
    )
    assert events is not None
    assert events >= 1000


async def _value(v: bool) -> bool:
    return v


async def test_watch_resumes_after_api_server_restart(
    kube: KubeClient, namespace: str, plane: ControlPlane
) -> None:
    """After the API server restarts, the informer resumes, sees exactly the changes made since,
    and its cache equals a fresh LIST."""
    for i in range(5):
        await kube.create(CONFIGMAP, _cm(f"before-{i}"), namespace=namespace)
    registry = CollectorRegistry()
    factory = SharedInformerFactory(kube, registry=registry, namespace=namespace)
    informer = factory.informer(CONFIGMAP)
    recorder = Recorder()
    informer.add_handler(recorder)
    factory.start()
    try:
        await asyncio.wait_for(factory.wait_for_sync(), 30)
        seen_before = len(recorder.events)
        await asyncio.to_thread(plane.restart, "kube-apiserver")
        await kube.create(CONFIGMAP, _cm("after-0"), namespace=namespace)
        await kube.patch(CONFIGMAP, "before-0", {"data": {"v": "9"}}, namespace=namespace)
        await kube.delete(CONFIGMAP, "before-1", namespace=namespace)
        await eventually(
            lambda: _store_equals_list(kube, informer.store, namespace),
            timeout=60,
            what="the cache to equal a fresh LIST",
        )
        await asyncio.sleep(0.5)  # any duplicate delivery would show up by now
    finally:
        await factory.stop()
    # kube-controller-manager may publish the namespace's kube-root-ca.crt at any time: not ours.
    missed = [(e[0], e[1]) for e in recorder.events[seen_before:] if e[1] != ROOT_CA]
    assert missed == [("add", "after-0"), ("update", "before-0"), ("delete", "before-1")]
    restarts = registry.get_sample_value(
        "caldera_informer_watch_restarts_total", {"resource": "configmaps"}
    )
    assert restarts is not None
    assert restarts >= 1, "the cut watch was noticed"


async def test_relist_after_410_delivers_exactly_the_difference(
    kube: KubeClient, namespace: str, plane: ControlPlane
) -> None:
    """A reflector resuming from a compacted resourceVersion gets 410, lists again, and its
    handlers get exactly the adds, updates and deletes it missed."""
    for name in ("keep", "change", "remove"):
        await kube.create(CONFIGMAP, _cm(name), namespace=namespace)
    store: Store[ConfigMap] = Store()
    recorder = Recorder()
    registry = CollectorRegistry()
    metrics = InformerMetrics(registry)
    reflector = Reflector(
        client=kube,
        kind=CONFIGMAP,
        store=store,
        handlers=[recorder],
        namespace=namespace,
        metrics=metrics,
    )
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(reflector.wait_synced(), 30)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    seen_before = len(recorder.events)

    await kube.create(CONFIGMAP, _cm("new"), namespace=namespace)
    await kube.patch(CONFIGMAP, "change", {"data": {"v": "2"}}, namespace=namespace)
    await kube.delete(CONFIGMAP, "remove", namespace=namespace)
    # Make the store's resourceVersion fall out of history: later writes, compaction, and a
    # restart so that the API server's watch cache cannot serve the old version either.
    for i in range(3):
        await kube.create(CONFIGMAP, _cm(f"filler-{i}"), namespace=namespace)
    await asyncio.to_thread(plane.compact_etcd)
    await asyncio.to_thread(plane.restart, "kube-apiserver")

    task = asyncio.create_task(reflector.run())
    try:
        await eventually(
            lambda: _store_equals_list(kube, store, namespace), timeout=30, what="convergence"
        )
        await asyncio.sleep(0.5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    missed = sorted((e[0], e[1]) for e in recorder.events[seen_before:] if e[1] != ROOT_CA)
    expected = sorted(
        [("add", "new"), ("update", "change"), ("delete", "remove")]
        + [("add", f"filler-{i}") for i in range(3)]
    )
    assert missed == expected
    relists = registry.get_sample_value(
        "caldera_informer_relists_total", {"resource": "configmaps"}
    )
    assert relists == 1, "the 410 was answered by one relist"
