"""``caldera controllers``: the controller process."""

from __future__ import annotations

import argparse
import asyncio
import os

from caldera.obs.logging import configure_logging
from caldera.process import StartupError
from caldera.settings import ControllersSettings, add_arguments, parse_settings
from cli.errors import fail
from controllers.manager import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "controllers",
        help="run the job, queue, podgroup, command and gc controllers",
        description=ControllersSettings.__doc__,
    )
    add_arguments(parser, ControllersSettings)
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    settings = parse_settings(ControllersSettings, args, os.environ)
    configure_logging(component="controllers", level=settings.log_level, fmt=settings.log_format)  # type: ignore[arg-type]
    try:
        return asyncio.run(run(settings))
    except StartupError as exc:
        return fail(str(exc))
