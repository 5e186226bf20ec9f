"""How long the user-facing CLI takes to answer ``caldera job list --help``, beside the baseline
of building every command eagerly (what ``cli.main`` did before its handlers and server commands
were imported lazily: the API client, kubernetes-asyncio, aiohttp, the three processes).

    python bench/cli_startup.py [--runs N] [--smoke]

Each figure is the median wall time of N fresh interpreters (``python -c``, the console script's
work without its wrapper), both measured in the same run on the same machine, alternating, so a
busy machine slows both alike. Goal: under 0.3 s. ``--smoke`` runs each once (a few seconds).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Final

GOAL_SECONDS: Final = 0.3
ARGV: Final = ["job", "list", "--help"]

# The command as a user runs it.
LAZY: Final = (
    "import sys\nfrom cli.main import main\n"
    f"try:\n    main({ARGV!r})\nexcept SystemExit:\n    pass\n"
)
# The baseline: every command's parser built with every module imported, as before.
EAGER: Final = (
    "import cli.controllers, cli.scheduler, cli.webhook, cli.job, cli.queue, cli.cronjob, "
    "cli.pod, cli.version\nfrom cli.main import build_parser\n"
    f"try:\n    build_parser().parse_args({ARGV!r})\nexcept SystemExit:\n    pass\n"
)


def once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(runs: int) -> tuple[float, float]:
    """Median seconds of (lazy, eager) over `runs` alternating pairs."""
    lazy, eager = [], []
    for _ in range(runs):
        lazy.append(once(LAZY))
        eager.append(once(EAGER))
    return statistics.median(lazy), statistics.median(eager)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="interpreters per figure (15)")
    parser.add_argument("--smoke", action="store_true", help="one run each: a few seconds")
    args = parser.parse_args(argv)
    runs = 1 if args.smoke else max(1, args.runs)
    lazy, eager = measure(runs)
    verdict = "ok" if lazy < GOAL_SECONDS else "MISS"
    print(f"caldera {' '.join(ARGV)} (median of {runs})")
    print(f"  lazy imports (now):        {lazy:6.3f} s   goal < {GOAL_SECONDS} s: {verdict}")
    print(f"  eager imports (baseline):  {eager:6.3f} s   ({eager / lazy:.1f}x slower)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
