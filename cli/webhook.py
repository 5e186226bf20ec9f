"""``caldera webhook``: the admission webhook process."""

from __future__ import annotations

import argparse
import asyncio
import os

from caldera.obs.logging import configure_logging
from caldera.process import StartupError
from caldera.settings import WebhookSettings, add_arguments, parse_settings
from cli.errors import fail
from webhooks.server import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "webhook",
        help="run the admission webhook (validates and defaults jobs, queues, podgroups, pods)",
        description=WebhookSettings.__doc__,
    )
    add_arguments(parser, WebhookSettings)
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    settings = parse_settings(WebhookSettings, args, os.environ)
    configure_logging(component="webhook", level=settings.log_level, fmt=settings.log_format)  # type: ignore[arg-type]
    try:
        return asyncio.run(run(settings))
    except StartupError as exc:
        return fail(str(exc))
