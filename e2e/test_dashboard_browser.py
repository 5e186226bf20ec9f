"""``caldera dashboard`` in a real browser: headless Chromium (the distribution's package),
driven through the Chrome DevTools protocol, against the local control plane.

A Volcano Job is created in a queue of the test's own; the queue page shows it Pending with the
reason its PodGroup's wait record gives; the stand-in scheduler then admits and binds it, and
the same page, never reloaded, shows it Running (the live update, timed from the moment the API
server has the Running job); the link leads to the job's page. Screenshots of the overview, the
queue, the job and the nodes are written to the test's directory, and also to
``$CALDERA_SCREENSHOTS_DIR`` when set (``docs/images`` to refresh the documentation's).

Every page, its error pages included, passes an accessibility audit run in the page (a title,
landmarks, labelled controls, alt text, named links and buttons, header cells), and Tab reaches
each of its links and controls in reading order; the stylesheet's contrast is checked in
``unit/test_dashboard_contrast.py``.

Also without a browser: a user who may read one namespace only is told to use ``-n``, and
with it sees that namespace (queues and nodes left out, as the page says).

The browser test is skipped, saying why, when no Chromium is installed (``make browser``
installs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from caldera.api.kinds import JOB, PODGROUP, QUEUE
from caldera.api.meta import format_time
from caldera.api.volcano import Job
from caldera.api.why import WHY_ANNOTATION, bounded, encode_record
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.browser import AUDIT, Page, chromium, needs_chromium
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import free_port, run_kubectl
from e2e.cluster.identities import write_token_kubeconfig
from e2e.conftest import Cluster
from e2e.job_fixtures import job, job_controller, task  # noqa: F401 - fixtures
from e2e.standin_scheduler import standin_scheduler
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]


# The bound for a change to show on an open page, plus the probe's own period.
LIVE_BOUND = 2.0


@contextlib.contextmanager
def running_dashboard(kubeconfig: Path, log: Path, *args: str) -> Iterator[str]:
    """``caldera dashboard`` as a user runs it; yields its URL once it says it listens, and
    requires a clean exit when stopped."""
    port = free_port()
    exe = Path(sys.prefix) / "bin" / "caldera"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(exe), "dashboard", f"--kubeconfig={kubeconfig}", f"--port={port}", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            url = f"http://127.0.0.1:{port}/"
            deadline = time.monotonic() + 30
            while url not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            yield url
            status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            rss = next((line.split()[1] for line in status if line.startswith("VmRSS:")), "?")
            print(f"caldera dashboard's resident memory: {rss} kB")
        finally:
            proc.terminate()
            code = proc.wait(15)
    assert code == 0, log.read_text()


@pytest.fixture
def dashboard(cluster: Cluster, tmp_path: Path) -> Iterator[str]:
    """The admin's dashboard over every namespace."""
    with running_dashboard(cluster.kubeconfig, tmp_path / "dashboard.log") as url:
        yield url


@pytest.fixture
async def test_queue(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A queue of this test's own (queues are cluster-scoped), deleted after."""
    name = f"{namespace}-q"
    await kube.create(
        QUEUE,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {
                "weight": 1,
                "deserved": {"cpu": "4", "memory": "8Gi"},
                "capability": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"},
            },
        },
    )
    yield name
    with contextlib.suppress(NotFound):
        await kube.delete(QUEUE, name)


def _save(shot: Path) -> None:
    target = os.environ.get("CALDERA_SCREENSHOTS_DIR")
    if target:
        shutil.copy(shot, Path(target) / shot.name)


async def _watched_running(kube: KubeClient, namespace: str, name: str) -> float:
    """When (monotonic) a watch of the job first delivers it Running."""
    async with kube.watch(
        JOB, namespace=namespace, field_selector=f"metadata.name={name}"
    ) as events:
        async for event in events:
            obj = event.object
            if isinstance(obj, Job) and obj.status.state.phase == "Running":
                return time.monotonic()
    raise AssertionError("the watch ended before the job ran")


async def _phase_shown(page: Page, key: str) -> str:
    value = await page.js(
        f"(document.querySelector('tr[data-job={json.dumps(key)}] td.phase') || {{}}).textContent"
    )
    return value or ""


@needs_chromium
async def test_a_job_goes_from_pending_to_running_on_an_open_page(
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    test_queue: str,
    job_controller: CalderaProcess,  # noqa: F811 - the fixture
    dashboard: str,
    tmp_path: Path,
) -> None:
    name = "train"
    key = f"{namespace}/{name}"
    body = job(name, [task("worker", 2, cpu="500m")], queue=test_queue)
    await kube.create(JOB, body, namespace=namespace)

    async def pending_podgroup() -> str | None:
        pgs = (await kube.list(PODGROUP, namespace=namespace)).items
        return pgs[0].metadata.name if pgs else None

    # What the scheduler writes on a PodGroup it cannot admit yet (its enqueue gate).
    pg_name = await eventually(pending_podgroup, what="the job's PodGroup")
    record = bounded(
        "enqueue",
        f"queue {test_queue} has no room: 1 of 4 cpu deserved is free, the job asks 1",
        [],
        format_time(dt.datetime.now(dt.UTC)),
    )
    await kube.patch(
        PODGROUP,
        pg_name,
        {"metadata": {"annotations": {WHY_ANNOTATION: encode_record(record)}}},
        namespace=namespace,
    )

    async with chromium(tmp_path / "profile") as page:
        queue_url = f"{dashboard}queues/{test_queue}"
        await page.goto(queue_url)
        await page.live()
        await eventually(
            lambda: page.js(f"document.body.textContent.includes('{test_queue} has no room')"),
            what="the wait record's reason on the queue page",
        )
        assert await _phase_shown(page, key) == "Pending"
        await page.js("window.__notReloaded = true")
        await page.screenshot(tmp_path / "dashboard-queue.png")
        _save(tmp_path / "dashboard-queue.png")

        # Admit and bind; time from the moment a watch sees the job Running (as the dashboard's
        # own informer does) to the moment the page shows it.
        api_running = asyncio.create_task(_watched_running(kube, namespace, name))
        page_running = 0.0
        try:
            async with standin_scheduler(kube, namespace, cluster.nodes):
                deadline = time.monotonic() + 45
                while not page_running:
                    assert time.monotonic() < deadline, "the page never showed the job Running"
                    if await _phase_shown(page, key) == "Running":
                        page_running = time.monotonic()
                    else:
                        await asyncio.sleep(0.02)
            latency = page_running - await asyncio.wait_for(api_running, 10)
        finally:
            api_running.cancel()
        print(f"live update: the page showed Running {latency:.2f}s after a watch saw it")
        assert latency < LIVE_BOUND
        assert await page.js("window.__notReloaded === true"), "the page was reloaded"

        # Follow the link to the job's page.
        await page.js(f"document.querySelector('a[href=\"/jobs/{namespace}/{name}\"]').click()")
        await eventually(
            lambda: page.js("document.getElementById('job-phase') !== null"),
            what="the job page",
        )
        assert await page.js("location.pathname") == f"/jobs/{namespace}/{name}"
        assert await page.js("document.getElementById('job-phase').textContent") == "Running"
        await page.live()
        pods = await page.js("document.body.textContent")
        assert f"{name}-worker-0" in pods
        assert f"{name}-worker-1" in pods
        await page.screenshot(tmp_path / "dashboard-job.png", height=1300)
        _save(tmp_path / "dashboard-job.png")

        assert "Out of date" in pods  # the enqueue record, the PodGroup admitted since

        # What the scheduler records for the two bound pods (the stand-in writes no status).
        await kube.patch_status(
            QUEUE, test_queue, {"status": {"allocated": {"cpu": "1", "memory": "128Mi"}}}
        )
        await page.goto(dashboard)
        row = await page.js(
            f"document.querySelector('tr[data-queue={json.dumps(test_queue)}]').textContent"
        )
        assert "1 allocated, 4 deserved, 8 capability" in row
        await page.screenshot(tmp_path / "dashboard-overview.png")
        _save(tmp_path / "dashboard-overview.png")


def test_a_tenant_is_told_to_watch_its_namespace(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """A user who may read Jobs, PodGroups, pods and Events in one namespace only: without -n
    the dashboard says what to do and exits 1; with -n it serves that namespace and says that
    queues and nodes are left out."""
    admin = cluster.kubeconfig
    run_kubectl(admin, "-n", namespace, "create", "serviceaccount", "tenant")
    run_kubectl(
        admin, "-n", namespace, "create", "role", "reader", "--verb=get,list,watch",
        "--resource=jobs.batch.volcano.sh,podgroups.scheduling.volcano.sh,pods,events",
    )  # fmt: skip
    run_kubectl(
        admin, "-n", namespace, "create", "rolebinding", "tenant", "--role=reader",
        f"--serviceaccount={namespace}:tenant",
    )  # fmt: skip
    token = run_kubectl(admin, "-n", namespace, "create", "token", "tenant", "--duration=1h")
    tenant = write_token_kubeconfig(
        admin, tmp_path / "tenant.kubeconfig", user="tenant", token=token.strip()
    )

    exe = Path(sys.prefix) / "bin" / "caldera"
    refused = subprocess.run(
        [str(exe), "dashboard", f"--kubeconfig={tenant}", "--port=0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert refused.stderr == (
        "caldera: error: you may not list jobs in every namespace; run "
        "'caldera dashboard -n NAMESPACE' to watch a namespace you may read\n"
    )

    log = tmp_path / "tenant-dashboard.log"
    with running_dashboard(tenant, log, "-n", namespace) as url:
        assert "note: you may not list queues, nodes, priorityclasses" in log.read_text()
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - http://127.0.0.1
            page = response.read().decode()
        assert f"Watching namespace <strong>{namespace}</strong> only." in page
        assert "does not let you list queues, nodes, priorityclasses" in page


# Each focusable element, named as the audit compares them.
FOCUSABLE = """[...document.querySelectorAll(
    "a[href], button, input:not([type=hidden]), select, textarea")]
  .filter((el) => !el.disabled && el.getClientRects().length > 0)
  .map((el) => el.outerHTML.slice(0, 120))"""


async def _tab_order(page: Page, count: int) -> list[str]:
    """What the keyboard reaches: Tab pressed `count` times from the top of the page."""
    await page.js("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
    reached = []
    for _ in range(count):
        for kind in ("rawKeyDown", "keyUp"):
            await page.call(
                "Input.dispatchKeyEvent", type=kind, key="Tab", code="Tab",
                windowsVirtualKeyCode=9, nativeVirtualKeyCode=9,
            )  # fmt: skip
        reached.append(await page.js("document.activeElement.outerHTML.slice(0, 120)"))
    return reached


@needs_chromium
async def test_every_page_is_accessible(
    kube: KubeClient, namespace: str, test_queue: str, dashboard: str, tmp_path: Path
) -> None:
    """Every page, its error pages included, passes the audit, and the keyboard reaches each
    of its links and controls with Tab, in the order they are read."""
    name = "a11y"
    await kube.create(
        JOB, job(name, [task("worker", 1, cpu="100m")], queue=test_queue), namespace=namespace
    )
    await eventually(
        lambda: _reachable(f"{dashboard}jobs/{namespace}/{name}"), what="the job in the cache"
    )
    pages = {
        "overview": "",
        "jobs": f"jobs?namespace={namespace}",
        "queue": f"queues/{test_queue}",
        "job": f"jobs/{namespace}/{name}",
        "nodes": "nodes",
        "topology": "topology",
        "a bad filter (400)": "jobs?phase=Sleeping",
        "a missing job (404)": f"jobs/{namespace}/nothing",
    }
    async with chromium(tmp_path / "profile") as page:
        for what, path in pages.items():
            await page.goto(dashboard + path)
            assert await page.js(AUDIT) == [], what
            focusable: list[str] = await page.js(FOCUSABLE)
            assert focusable, what
            if what == "nodes":  # before Tab leaves a focus ring on it
                await page.screenshot(tmp_path / "dashboard-nodes.png")
                _save(tmp_path / "dashboard-nodes.png")
            assert await _tab_order(page, len(focusable)) == focusable, what


async def _reachable(url: str) -> bool | None:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status == 200 or None
