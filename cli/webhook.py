"""``caldera webhook``: the webhook process."""

from __future__ import annotations

import argparse

from caldera.settings import WebhookSettings
from cli.process import register_process
from webhooks.server import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_process(
        sub,
        "webhook",
        "run the admission webhook (validates and defaults Volcano objects and pods)",
        WebhookSettings,
        run,
    )
