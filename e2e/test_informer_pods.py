"""The pod informer against the real API server: what it caches equals a fresh LIST, and the
pods' equal parts are shared, whether they came from a LIST (of one page or several) or the
watch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import POD
from caldera.kube.client import KubeClient
from e2e.waiting import eventually
from informers.factory import SharedInformer, SharedInformerFactory
from informers.interning import PodInterner
from informers.reflector import Reflector
from informers.store import Store

pytestmark = pytest.mark.e2e


def _pod(name: str, image: str = "busybox:1.36") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "interning"}},
        # No scheduler has this name: the pods stay Pending, untouched by anything else.
        "spec": {
            "schedulerName": "e2e-nobody",
            "containers": [
                {"name": "main", "image": image, "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


async def _cached(informer: SharedInformer[Pod], names: set[str]) -> bool:
    return {p.metadata.name for p in informer.store.list()} >= names


async def _cache_equals_list(kube: KubeClient, informer: SharedInformer[Pod], ns: str) -> bool:
    listed = {p.metadata.name: p for p in (await kube.list(POD, namespace=ns)).items}
    cached = {p.metadata.name: p for p in informer.store.list()}
    return listed == cached


async def test_cached_pods_equal_the_api_and_share_equal_parts(
    kube: KubeClient, namespace: str
) -> None:
    """Pods listed at start and pods seen on the watch are cached equal to what a LIST returns,
    and pods with the same container spec hold one shared containers tuple."""
    for name in ("listed-0", "listed-1"):
        await kube.create(POD, _pod(name), namespace=namespace)
    factory = SharedInformerFactory(kube, namespace=namespace)
    informer = factory.informer(POD)
    factory.start()
    try:
        await asyncio.wait_for(factory.wait_for_sync(), 30)
        await kube.create(POD, _pod("watched-0"), namespace=namespace)
        await kube.create(POD, _pod("other-0", image="busybox:1.37"), namespace=namespace)
        names = {"listed-0", "listed-1", "watched-0", "other-0"}
        await eventually(lambda: _cached(informer, names), timeout=30, what="4 pods")
        await eventually(
            lambda: _cache_equals_list(kube, informer, namespace),
            timeout=30,
            what="the cache to equal a fresh LIST",
        )
        pods = {p.metadata.name: p for p in informer.store.list()}
    finally:
        await factory.stop()
    same = pods["listed-0"].spec.containers
    assert pods["listed-1"].spec.containers is same, "shared between listed pods"
    assert pods["watched-0"].spec.containers is same, "shared between listed and watched pods"
    assert pods["other-0"].spec.containers is not same
    assert pods["other-0"].spec.containers[0].image == "busybox:1.37"
    assert pods["watched-0"].metadata.namespace is pods["listed-0"].metadata.namespace


async def test_a_factory_without_transforms_caches_pods_as_decoded(
    kube: KubeClient, namespace: str
) -> None:
    """`transforms={}` turns the sharing off: equal parts of two pods stay two objects."""
    for name in ("plain-0", "plain-1"):
        await kube.create(POD, _pod(name), namespace=namespace)
    factory = SharedInformerFactory(kube, namespace=namespace, transforms={})
    informer = factory.informer(POD)
    factory.start()
    try:
        await asyncio.wait_for(factory.wait_for_sync(), 30)
        pods = {p.metadata.name: p for p in informer.store.list()}
    finally:
        await factory.stop()
    assert pods["plain-0"].spec.containers == pods["plain-1"].spec.containers
    assert pods["plain-0"].spec.containers is not pods["plain-1"].spec.containers


async def test_a_relist_in_pages_is_transformed_whole(kube: KubeClient, namespace: str) -> None:
    """A LIST of several pages is transformed a page at a time: every pod is cached, equal to
    the API's, with the parts equal across pages shared."""
    for i in range(5):
        await kube.create(POD, _pod(f"paged-{i}"), namespace=namespace)
    store: Store[Pod] = Store()
    reflector = Reflector(
        client=kube,
        kind=POD,
        store=store,
        handlers=[],
        namespace=namespace,
        page_size=2,
        transform=PodInterner(),
    )
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.wait_synced(), 30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    listed = {p.metadata.name: p for p in (await kube.list(POD, namespace=namespace)).items}
    cached = {p.metadata.name: p for p in store.list()}
    assert cached == listed
    assert len({id(p.spec.containers) for p in cached.values()}) == 1
