"""The in-cluster dashboard (`caldera dashboard --in-cluster`, the chart's ``dashboard``
component) against the real API server: it reads with a ServiceAccount that has only the
chart's ClusterRole for it, and each user's token sees what that user's RBAC lets them list.

Two users, both ServiceAccounts with tokens from TokenRequest: one may list Volcano jobs and
pods in one namespace only, the other everywhere, and queues and nodes too. A job in each of
two namespaces. No token is a 401, a token the API server refuses is a 401, the first user sees
one job and is told queues and nodes are not shown, the second sees both. In Chromium (when
installed), the first signs in through the form, its pages and the sign-in page pass the
accessibility audit, and signing out ends it. The process runs here, not in a pod (the local
control plane has no kubelet), on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.browser import AUDIT, chromium, needs_chromium
from e2e.cluster.control_plane import free_port, run_kubectl
from e2e.cluster.identities import helm_binary, render_chart, write_token_kubeconfig
from e2e.conftest import Cluster
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

EXE = Path(sys.prefix) / "bin" / "caldera"


def _job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "queue": "default",
            "tasks": [
                {
                    "name": "main",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Accept": "text/html"})  # noqa: S310
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - 127.0.0.1
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.contextmanager
def _dashboard(kubeconfig: Path, log: Path) -> Iterator[str]:
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(EXE), "dashboard", "--in-cluster", "--address=127.0.0.1", f"--port={port}",
             f"--kubeconfig={kubeconfig}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}/"
            deadline = time.monotonic() + 60
            while url not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            code = proc.wait(15)
    assert code == 0, log.read_text()


def _account(admin: Path, namespace: str, name: str) -> str:
    run_kubectl(admin, "-n", namespace, "create", "serviceaccount", name)
    return run_kubectl(admin, "-n", namespace, "create", "token", name, "--duration=1h").strip()


@dataclass(frozen=True)
class InCluster:
    """The running in-cluster dashboard and its users' tokens."""

    url: str
    namespace: str
    other: str
    one: str
    every: str
    log: Path
    tokens: tuple[str, ...]


@pytest.fixture
def incluster(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[InCluster]:
    """The dashboard's account (the chart's ClusterRole), the two users, a job in each of two
    namespaces, and `caldera dashboard --in-cluster` running; everything removed after, and
    no token in the dashboard's log."""
    admin = cluster.kubeconfig
    other = f"{namespace}-b"
    run_kubectl(admin, "create", "namespace", other)
    made: list[tuple[str, ...]] = [("namespace", other)]
    try:
        # The dashboard's own account, with exactly the chart's ClusterRole for it.
        values = tmp_path / "values.yaml"
        values.write_text(
            yaml.safe_dump({"dashboard": {"enabled": True, "networkPolicy": {"enabled": False}}})
        )
        objects = render_chart(helm_binary(), values, release="e2e", namespace=namespace)
        role = next(
            o for o in objects
            if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-dashboard")
        )  # fmt: skip
        role["metadata"]["name"] = f"{namespace}-dashboard"
        run_kubectl(admin, "apply", "-f", "-", input=json.dumps(role))
        made.append(("clusterrole", role["metadata"]["name"]))
        dash_token = _account(admin, namespace, "dashboard")
        run_kubectl(
            admin, "create", "clusterrolebinding", f"{namespace}-dashboard",
            f"--clusterrole={namespace}-dashboard", f"--serviceaccount={namespace}:dashboard",
        )  # fmt: skip
        made.append(("clusterrolebinding", f"{namespace}-dashboard"))

        # The users: one may read jobs and pods in `namespace` only, one everywhere.
        run_kubectl(
            admin, "create", "clusterrole", f"{namespace}-reader", "--verb=get,list,watch",
            "--resource=jobs.batch.volcano.sh,pods,queues.scheduling.volcano.sh,nodes,"
            "hypernodes.topology.volcano.sh",
        )  # fmt: skip
        made.append(("clusterrole", f"{namespace}-reader"))
        one = _account(admin, namespace, "one")
        run_kubectl(
            admin, "-n", namespace, "create", "rolebinding", "one",
            f"--clusterrole={namespace}-reader", f"--serviceaccount={namespace}:one",
        )  # fmt: skip
        every = _account(admin, namespace, "every")
        run_kubectl(
            admin, "create", "clusterrolebinding", f"{namespace}-every",
            f"--clusterrole={namespace}-reader", f"--serviceaccount={namespace}:every",
        )  # fmt: skip
        made.append(("clusterrolebinding", f"{namespace}-every"))

        run_kubectl(admin, "apply", "-f", "-", input=json.dumps(_job("job-mine", namespace)))
        run_kubectl(admin, "apply", "-f", "-", input=json.dumps(_job("job-theirs", other)))

        kubeconfig = write_token_kubeconfig(
            admin, tmp_path / "dashboard.kubeconfig", user="dashboard", token=dash_token
        )
        log = tmp_path / "dashboard.log"
        with _dashboard(kubeconfig, log) as url:
            yield InCluster(url, namespace, other, one, every, log, (dash_token, one, every))
        for token in (dash_token, one, every):
            assert token not in log.read_text()  # no token is ever logged
    finally:
        for kind, name in reversed(made):
            run_kubectl(admin, "delete", kind, name, "--wait=false", "--ignore-not-found")


def test_each_token_sees_what_its_rbac_allows(incluster: InCluster) -> None:
    url, one, every, other = incluster.url, incluster.one, incluster.every, incluster.other
    assert _get(url + "healthz") == (200, "ok\n")
    status, page = _get(url + "jobs")
    assert status == 401
    assert '<label for="token">' in page
    assert _get(url + "jobs", "not-a-token")[0] == 401

    status, page = _get(url + "jobs", one)
    assert status == 200, page
    assert f"system:serviceaccount:{incluster.namespace}:one" in page
    assert "job-mine" in page
    assert "job-theirs" not in page
    assert _get(url + f"jobs/{other}/job-theirs", one)[0] == 404
    overview = _get(url, one)[1]
    assert "Your access does not let you list hypernodes, nodes, queues" in overview

    status, page = _get(url + "jobs", every)
    assert status == 200, page
    assert "job-mine" in page
    assert "job-theirs" in page
    assert _get(url + f"jobs/{other}/job-theirs", every)[0] == 200
    assert "does not let you list" not in _get(url, every)[1]
    assert _get(url + "nodes", every)[0] == 200
    assert _get(url + "topology", every)[0] == 200
    assert _get(url + "nodes", one)[0] == 403


@needs_chromium
async def test_signing_in_in_a_browser(incluster: InCluster, tmp_path: Path) -> None:
    """In Chromium: the sign-in page passes the accessibility audit; the form takes the token,
    the browser keeps the cookie (HttpOnly: no script sees it) and sends it, the user's pages
    pass the audit too, and signing out ends it."""
    url = incluster.url
    async with chromium(tmp_path / "profile") as page:
        await page.goto(url + "jobs")
        assert await page.js("document.title") == "Sign in · Caldera"
        assert await page.js(AUDIT) == []
        await page.js(
            f"document.getElementById('token').value = {json.dumps(incluster.one)};"
            "document.querySelector('form.login').submit()"
        )
        await eventually(
            lambda: page.js(
                "!!document.body && document.body.textContent.includes('Signed in as')"
            ),
            what="the signed-in page",
        )
        assert await page.js("location.pathname") == "/"
        assert await page.js("document.cookie") == ""  # HttpOnly
        await page.goto(url + "jobs")
        text = await page.js("document.body.textContent")
        assert "job-mine" in text
        assert "job-theirs" not in text
        assert await page.js(AUDIT) == []
        await page.js("document.querySelector('form[action=\"/logout\"]').submit()")
        await eventually(
            lambda: page.js("location.pathname === '/login'"), what="the sign-in page again"
        )
        await page.goto(url + "jobs")
        assert "Signed in as" not in await page.js("document.body.textContent")
