"""``caldera scheduler``: the scheduler process."""

from __future__ import annotations

import argparse

from caldera.settings import SchedulerSettings
from cli.process import register_process
from scheduler.main import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_process(
        sub,
        "scheduler",
        "run the gang scheduler",
        SchedulerSettings,
        run,
    )
