"""``caldera controllers``: the controllers process."""

from __future__ import annotations

import argparse

from caldera.settings import ControllersSettings
from cli.process import register_process
from controllers.manager import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_process(
        sub,
        "controllers",
        "run the job, queue, podgroup, command, gc, cronjob, jobflow, jobtemplate, hypernode and "
        "(when asked for) sharding controllers",
        ControllersSettings,
        run,
    )
