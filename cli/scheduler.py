"""``caldera scheduler``: the scheduler process."""

from __future__ import annotations

import argparse
import asyncio
import os

from caldera.obs.logging import configure_logging
from caldera.process import StartupError
from caldera.settings import SchedulerSettings, add_arguments, parse_settings
from cli.errors import fail
from scheduler.main import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "scheduler",
        help="run the gang scheduler",
        description=SchedulerSettings.__doc__,
    )
    add_arguments(parser, SchedulerSettings)
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    settings = parse_settings(SchedulerSettings, args, os.environ)
    configure_logging(component="scheduler", level=settings.log_level, fmt=settings.log_format)  # type: ignore[arg-type]
    try:
        return asyncio.run(run(settings))
    except StartupError as exc:
        return fail(str(exc))
