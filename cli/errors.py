"""How the CLI reports a problem: one line on stderr, a non-zero exit, never a traceback."""

from __future__ import annotations

import sys


class CliError(Exception):
    """A failure to report as one line (the message says what is wrong and what to do)."""


def fail(message: str, code: int = 1) -> int:
    print(f"caldera: error: {message}", file=sys.stderr)
    return code
