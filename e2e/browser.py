"""Headless Chromium driven over the Chrome DevTools protocol: the distribution's package, a
fresh profile, one tab, and only the calls the dashboard's browser test and benchmark need
(e2e/test_dashboard_browser.py, bench/dashboard_browser.py)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.cluster.control_plane import free_port
from e2e.waiting import eventually

CHROMIUM = os.environ.get("CALDERA_CHROMIUM") or shutil.which("chromium") or ""
needs_chromium = pytest.mark.skipif(
    not CHROMIUM, reason="no chromium on PATH: 'make browser' installs Debian's package"
)

WINDOW = (1200, 760)


class Page:
    """One browser tab, driven over its DevTools WebSocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        await self._ws.send_json({"id": ident, "method": method, "params": params})
        async with asyncio.timeout(30):
            while True:
                message = await self._ws.receive_json()
                if message.get("id") == ident:  # events (no id) are not needed
                    if "error" in message:
                        raise AssertionError(f"{method}: {message['error']}")
                    result: dict[str, Any] = message["result"]
                    return result

    async def js(self, expression: str) -> Any:
        answer = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)
        await eventually(lambda: self._loaded(url), timeout=15, interval=0.05, what=f"{url} loaded")

    async def _loaded(self, url: str) -> bool:
        return bool(
            await self.js(
                f"location.href === {json.dumps(url)} && document.readyState === 'complete'"
            )
        )

    async def live(self) -> None:
        """Wait until the page's live stream is open (its updates are then delivered)."""
        await eventually(
            lambda: self.js("document.body.dataset.live === 'open'"),
            timeout=10,
            interval=0.05,
            what="the page's live stream",
        )

    async def screenshot(self, path: Path, *, height: int | None = None) -> None:
        """The viewport, or the page's top `height` pixels (for a page longer than it)."""
        params: dict[str, Any] = {"format": "png"}
        if height is not None:
            full = await self.js("document.documentElement.scrollHeight")
            clip = {"x": 0, "y": 0, "width": WINDOW[0], "height": min(full, height), "scale": 1}
            params.update(captureBeyondViewport=True, clip=clip)
        shot = await self.call("Page.captureScreenshot", **params)
        path.write_bytes(base64.b64decode(shot["data"]))  # noqa: ASYNC240 - a small local file


@contextlib.asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[Page]:
    """Headless Chromium with a fresh profile, and its first tab."""
    port = free_port()
    argv = [
        CHROMIUM,
        "--headless=new",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--remote-debugging-port={port}",
        f"--user-data-dir={profile}",
        "about:blank",
    ]
    if os.geteuid() == 0:
        argv.insert(1, "--no-sandbox")  # Chromium refuses its sandbox to root (CI containers)
    # Popen returns once the process is forked: nothing here waits on it.
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: ASYNC220
    try:
        async with aiohttp.ClientSession() as session:

            async def tab() -> str | None:
                try:
                    async with session.get(f"http://127.0.0.1:{port}/json/list") as r:
                        targets = await r.json()
                except aiohttp.ClientError:
                    return None
                return next(
                    (t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"), None
                )

            url = await eventually(tab, timeout=20, what="Chromium's DevTools endpoint")
            async with session.ws_connect(url, max_msg_size=64 * 1024 * 1024) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                yield page
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# What every page must have, checked in the page itself: a title and language, the banner,
# navigation and main landmarks (one main, one h1), a name for every form control (its label,
# or aria-label/-labelledby), alt text on every image, a name for every button and link, links
# that are links (an href, not taken out of the tab order), and header cells in every table.
AUDIT = """(() => {
  const problems = [];
  const short = (el) => el.outerHTML.slice(0, 90);
  if (!document.title.trim()) problems.push("no <title>");
  if (!document.documentElement.lang) problems.push("no lang on <html>");
  for (const [sel, role] of [["header", "banner"], ["nav", "navigation"], ["main", "main"]]) {
    if (!document.querySelector(`${sel}, [role=${role}]`)) problems.push(`no ${role} landmark`);
  }
  if (document.querySelectorAll("main").length !== 1) problems.push("not one <main>");
  if (document.querySelectorAll("h1").length !== 1) problems.push("not one <h1>");
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
    const byLabel = [...(el.labels || [])].map((l) => l.textContent.trim()).join("");
    const byAria = (el.getAttribute("aria-label") || "").trim()
      || (el.getAttribute("aria-labelledby") || "").split(/\\s+/).filter(Boolean)
           .map((id) => (document.getElementById(id) || {}).textContent || "").join("").trim();
    if (!byLabel && !byAria) problems.push(`form control without a label: ${short(el)}`);
  }
  for (const img of document.querySelectorAll("img, [role=img]")) {
    if (!img.hasAttribute("alt") && !img.getAttribute("aria-label")) {
      problems.push(`image without alt: ${short(img)}`);
    }
  }
  for (const b of document.querySelectorAll("button")) {
    if (!b.textContent.trim() && !b.getAttribute("aria-label")) {
      problems.push(`unnamed button: ${short(b)}`);
    }
  }
  for (const a of document.querySelectorAll("a")) {
    if (!a.hasAttribute("href")) problems.push(`link without href: ${short(a)}`);
    if (a.tabIndex < 0) problems.push(`link out of the tab order: ${short(a)}`);
    if (!a.textContent.trim() && !a.getAttribute("aria-label")) {
      problems.push(`unnamed link: ${short(a)}`);
    }
  }
  for (const t of document.querySelectorAll("table")) {
    if (!t.querySelector("th")) problems.push(`table without header cells: ${short(t)}`);
  }
  for (const m of document.querySelectorAll("meter, progress")) {
    if (!m.getAttribute("aria-label") && !(m.labels && m.labels.length)) {
      problems.push(`unnamed meter: ${short(m)}`);
    }
  }
  return problems;
})()"""
