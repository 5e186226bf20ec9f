"""Fixtures for every test: process-wide logging state is put back after each test; the
hypothesis profile.

``configure_logging`` (called when a test runs a process's entry point in-process) binds
structlog to the stream of that moment, which pytest closes after the test; later tests would
then log into a closed file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

# No per-example deadline: on a loaded 2-core machine a slow example is not a failure (speed
# goals are benchmarks, never timed tests).
settings.register_profile("caldera", deadline=None)
settings.load_profile("caldera")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
