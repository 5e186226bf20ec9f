"""The ``caldera`` command: one entry point per process, plus user commands.

Each subcommand lives in its own module with a ``register(subparsers)`` function; this module
only builds the parser and dispatches. Errors a user can fix end as one line and exit code 1
(2 for bad arguments), never a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from caldera import __version__
from caldera.settings import SettingsError
from cli import (
    completion,
    controllers,
    cronjob,
    hypernode,
    job,
    pod,
    queue,
    scheduler,
    webhook,
)
from cli.errors import fail


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="caldera",
        description="A batch system for machine learning on Kubernetes, speaking Volcano's API.",
    )
    parser.add_argument("--version", action="version", version=f"caldera {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    controllers.register(sub)
    scheduler.register(sub)
    webhook.register(sub)
    job.register(sub)
    queue.register(sub)
    cronjob.register(sub)
    hypernode.register(sub)
    pod.register(sub)
    completion.register(sub)
    return parser


def _exit_on_sigterm(_signum: int, _frame: object) -> None:
    # Until a process installs its own graceful handler (once its loop runs), SIGTERM during
    # start-up is a clean, quiet exit rather than Python's default death by signal.
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except SettingsError as exc:
        return fail(str(exc), code=2)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
