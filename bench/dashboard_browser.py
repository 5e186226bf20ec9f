"""How soon the dashboard's pages are usable in a real browser over a large cache: issue 43's
figure (10,000 jobs, 1,000 nodes, 50 queues; the overview and a 1,000-job queue page usable in
under 1.5 s).

    python bench/dashboard_browser.py [--jobs N] [--nodes N] [--queues N] [--runs N] [--smoke]

The dashboard's aiohttp application serves the synthetic cache of bench/dashboard_pages.py on a
local port; headless Chromium (Debian's package, ``make browser``) opens each page afresh
``--runs`` times, and the page's own Navigation Timing says when it was usable: the document
parsed and its deferred scripts run (``domContentLoadedEventEnd``), and everything loaded
(``loadEventEnd``), both from the navigation's start; also the server's time from the page's
``Server-Timing``. Figures are medians; the first load of each page (template compilation) is
left out. Without Chromium the benchmark says so and exits 0. ``--smoke``: a 1,000-job cache,
one run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import socket
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # the test helpers (unit/, e2e/) are not on the path otherwise
    sys.path.insert(0, str(REPO))

from aiohttp import web  # noqa: E402

from dashboard.live import Hub  # noqa: E402
from dashboard.server import make_app  # noqa: E402
from e2e.browser import CHROMIUM, chromium  # noqa: E402
from unit.dashboard_objects import T0, synthetic_cache  # noqa: E402

GOAL_SECONDS: Final = 1.5
# The page's own timing, read once it has loaded: (usable, loaded, server) in milliseconds.
TIMING_JS: Final = """(() => {
  const n = performance.getEntriesByType('navigation')[0];
  const server = (n.serverTiming || []).reduce((sum, t) => sum + t.duration, 0);
  return [n.domContentLoadedEventEnd, n.loadEventEnd, server];
})()"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def measure(jobs: int, nodes: int, queues: int, runs: int) -> dict[str, list[float]]:
    """Per page: the median usable, loaded and server milliseconds."""
    cache = synthetic_cache(jobs=jobs, nodes=nodes, queues=queues)
    app = make_app(cache, Hub(), clock=lambda: T0 + dt.timedelta(hours=1))
    pages = {
        "overview": "/",
        f"queue q0 ({len(cache.jobs_in_queue('q0'))} jobs)": "/queues/q0",
        f"nodes ({len(cache.nodes.list())})": "/nodes",
    }
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    out: dict[str, list[float]] = {}
    try:
        # Chromium's helper processes may still write to the profile as it closes: whatever
        # they leave is not this benchmark's concern.
        with tempfile.TemporaryDirectory(
            prefix="dashboard-browser.", ignore_cleanup_errors=True
        ) as profile:
            async with chromium(Path(profile)) as page:
                for name, path in pages.items():
                    url = f"http://127.0.0.1:{port}{path}"
                    figures = []
                    for _ in range(runs + 1):  # the first compiles the templates: not counted
                        await page.goto("about:blank")
                        await page.goto(url)
                        await page.js("new Promise(r => setTimeout(r, 0))")  # loadEventEnd set
                        figures.append(await page.js(TIMING_JS))
                    out[name] = [statistics.median(f[i] for f in figures[1:]) for i in range(3)]
    finally:
        await runner.cleanup()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="1,000 jobs, one run")
    args = parser.parse_args()
    if not CHROMIUM:
        print("no chromium on PATH ('make browser' installs Debian's package): nothing measured")
        return 0
    if args.smoke:
        args.jobs, args.nodes, args.queues, args.runs = 1_000, 100, 10, 1
    print(f"{args.jobs:,} jobs, {args.nodes:,} nodes, {args.queues} queues; median of {args.runs}")
    figures = asyncio.run(measure(args.jobs, args.nodes, args.queues, args.runs))
    print(f"{'page':<28}{'usable ms':>12}{'loaded ms':>12}{'server ms':>12}   goal")
    for name, (usable, loaded, server) in figures.items():
        verdict = "met" if usable / 1000 < GOAL_SECONDS else "MISS"
        if args.smoke:
            verdict = "not judged (smoke)"
        row = f"{name:<28}{usable:>12.0f}{loaded:>12.0f}{server:>12.0f}"
        print(f"{row}   < {GOAL_SECONDS} s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
