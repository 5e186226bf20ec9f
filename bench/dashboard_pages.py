"""Server time of the dashboard's pages over a synthetic cache, and the memory that cache and
the server hold: issue 43's figures (10,000 jobs, 1,000 nodes, 50 queues; a 1,000-job queue).

    python bench/dashboard_pages.py [--jobs N] [--nodes N] [--queues N] [--runs N] [--smoke]

Each figure is the median of N renders through the aiohttp application (routing, the pure view
model, Jinja2), as the page's ``Server-Timing`` header reports them, beside the whole request
through the test client (the client's reading included). Memory is the process's peak RSS
after building the cache and rendering. Goals: each page under 0.5 s of server time; the
process under 300 MiB. ``--smoke`` renders a 1,000-job cache once.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
# `make bench-smoke` runs `python bench/dashboard_pages.py`: the test helpers (unit/) are not
# on the path by themselves.
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from dashboard.live import Hub  # noqa: E402
from dashboard.server import make_app  # noqa: E402
from unit.dashboard_objects import T0, synthetic_cache  # noqa: E402

GOAL_SECONDS: Final = 0.5
GOAL_MIB: Final = 300


async def measure(jobs: int, nodes: int, queues: int, runs: int) -> dict[str, tuple[float, float]]:
    """Per page: (median server milliseconds, median request milliseconds)."""
    cache = synthetic_cache(jobs=jobs, nodes=nodes, queues=queues)
    app = make_app(cache, Hub(), clock=lambda: T0 + dt.timedelta(hours=1))
    pages = {
        "overview": "/",
        f"queue q0 ({len(cache.jobs_in_queue('q0'))} jobs)": "/queues/q0",
        "job list, one namespace": "/jobs?namespace=ns-3",
        "job page": "/jobs/ns-0/job-0",
        f"nodes ({len(cache.nodes.list())})": "/nodes",
    }
    out: dict[str, tuple[float, float]] = {}
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        for name, path in pages.items():
            server, whole = [], []
            for _ in range(runs + 1):  # the first compiles the templates: not counted
                start = time.perf_counter()
                response = await client.get(path)
                await response.read()
                assert response.status == 200, f"{path}: {response.status}"
                whole.append((time.perf_counter() - start) * 1000)
                timing = response.headers["Server-Timing"]
                server.append(float(timing.split("dur=")[1]))
            out[name] = (statistics.median(server[1:]), statistics.median(whole[1:]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--smoke", action="store_true", help="1,000 jobs, one render each")
    args = parser.parse_args(argv)
    jobs, runs = (1_000, 1) if args.smoke else (args.jobs, max(1, args.runs))
    figures = asyncio.run(measure(jobs, args.nodes, args.queues, runs))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"dashboard pages: {jobs} jobs, {args.nodes} nodes, {args.queues} queues (median of {runs})"
    )
    worst = 0.0
    for name, (server, whole) in figures.items():
        worst = max(worst, whole)
        print(f"  {name:<32} server {server:7.1f} ms   request {whole:7.1f} ms")
    verdict = "ok" if worst < GOAL_SECONDS * 1000 and rss < GOAL_MIB else "MISS"
    goals = f"< {GOAL_SECONDS * 1000:.0f} ms, < {GOAL_MIB} MiB"
    print(f"  peak RSS {rss:.0f} MiB; goals: {goals}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
