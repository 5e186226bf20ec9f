"""The ``caldera`` command: one entry point per process, plus user commands.

Each subcommand lives in its own module; this one only builds the parser and dispatches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from caldera import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="caldera",
        description="A batch system for machine learning on Kubernetes, speaking Volcano's API.",
    )
    parser.add_argument("--version", action="version", version=f"caldera {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
