"""The shared entry of the three long-running processes: settings from flags and environment,
logging, the asyncio run, and start-up errors as one line."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from caldera.obs.logging import LogFormat, configure_logging
from caldera.process import StartupError
from caldera.settings import ProcessSettings, add_arguments, parse_settings
from cli.errors import fail

S = TypeVar("S", bound=ProcessSettings)


def register_process(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    settings_cls: type[S],
    run: Callable[[S], Coroutine[Any, Any, int]],
) -> None:
    """Add ``caldera <name>``, whose flags are ``settings_cls``'s fields and which runs ``run``."""
    parser = sub.add_parser(name, help=help, description=settings_cls.__doc__)
    add_arguments(parser, settings_cls)

    def main(args: argparse.Namespace) -> int:
        settings = parse_settings(settings_cls, args, os.environ)
        # validate() has checked log_format is one of LogFormat's values.
        configure_logging(
            component=name, level=settings.log_level, fmt=cast(LogFormat, settings.log_format)
        )
        try:
            return asyncio.run(run(settings))
        except StartupError as exc:
            return fail(str(exc))

    parser.set_defaults(handler=main)
