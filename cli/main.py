"""The ``caldera`` command: one entry point per process, plus user commands.

The user commands' parsers are defined in `cli.commands` and import their handlers only when
they run; the three server commands are built from their settings classes only when one of them
is the command given (or for the whole tree, as shell completion and the chart tests need it).
So ``caldera job list --help`` loads argparse and little else. Errors a user can fix end as one
line and exit code 1 (2 for bad arguments), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Final

from caldera import __version__
from cli import commands
from cli.errors import CliError, fail

SERVER_COMMANDS: Final = (
    (
        "controllers",
        "run the job, queue, podgroup, command, gc, cronjob, jobflow, jobtemplate, hypernode and "
        "(when asked for) sharding controllers",
    ),
    ("scheduler", "run the gang scheduler"),
    ("webhook", "run the admission webhook (validates and defaults Volcano objects and pods)"),
)

# User commands whose parsers live with their handlers (module, command, aliases, help): built,
# like the server commands, only when given.
MODULE_COMMANDS: Final = (
    ("cli.flow", "jobflow", (), "create, list, get, describe and delete JobFlows (vcctl jobflow)"),
    (
        "cli.flow",
        "jobtemplate",
        (),
        "create, list, get, describe and delete JobTemplates (vcctl jobtemplate)",
    ),
    (
        "cli.hypernode",
        "hypernode",
        ("hn",),
        "show the HyperNode tree (network topology) with free resources per island",
    ),
    ("cli.node", "node", (), "show nodes with their GPU cards and what pods hold of them"),
)

# `caldera simulate`: its parser (cli.simulate) imports only argparse; the simulator itself is
# imported when the command runs.
SIMULATE_COMMAND: Final = (
    "simulate",
    "run a trace of jobs on a virtual cluster and compare schedulers (no cluster needed)",
)

ALL: Final = "*"
"""`build_parser`'s `command` for the whole tree, every server command's flags included."""


def _section(title: str, rows: Sequence[tuple[str, str]], width: int) -> str:
    return f"{title}:\n" + "".join(f"  {name.ljust(width)}  {help}\n" for name, help in rows)


def _epilog() -> str:
    lazy = tuple((name, help) for _, name, _, help in MODULE_COMMANDS)
    user = (*commands.USER_COMMANDS, *lazy, SIMULATE_COMMAND)
    width = max(len(name) for name, _ in (*user, *SERVER_COMMANDS))
    return (
        _section("user commands", user, width)
        + "\n"
        + _section("server commands (the processes the chart runs)", SERVER_COMMANDS, width)
        + "\nRun 'caldera COMMAND --help' for a command's flags."
    )


def build_parser(command: str = ALL) -> argparse.ArgumentParser:
    """The parser. `command` is the one given on the command line: a server command's flags
    (which need its settings class), and those of `MODULE_COMMANDS`, are built only when it
    is that one, or for `ALL`."""
    parser = argparse.ArgumentParser(
        prog="caldera",
        usage="caldera [-h] [--version] COMMAND ...",
        description="A batch system for machine learning on Kubernetes, speaking Volcano's API.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"caldera {__version__}")
    # No help per command here: the epilog lists them in two sections.
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog="caldera"
    )
    commands.register(sub)
    importlib.import_module("cli.simulate").register(sub)
    built: set[str] = set()
    for module, name, aliases, _ in MODULE_COMMANDS:
        if command in (ALL, name, *aliases) and module not in built:
            importlib.import_module(module).register(sub)
            built.add(module)
    for module, name, aliases, help in MODULE_COMMANDS:
        if module not in built:
            sub.add_parser(name, aliases=list(aliases), help=help)  # a name only, never parsed
    for name, help in SERVER_COMMANDS:
        if command in (ALL, name):
            importlib.import_module(f"cli.{name}").register(sub)
        else:
            sub.add_parser(name, help=help)  # a name only, never parsed
    # The epilog lists the commands; keep the subparsers' own list out of --help.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action._choices_actions.clear()
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command word of `argv` ("" if none): the first argument not a flag."""
    return next((a for a in argv if not a.startswith("-")), "")


def _exit_on_sigterm(_signum: int, _frame: object) -> None:
    # Until a process installs its own graceful handler (once its loop runs), SIGTERM during
    # start-up is a clean, quiet exit rather than Python's default death by signal.
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    from caldera.settings import SettingsError

    try:
        return handler(args)
    except SettingsError as exc:
        return fail(str(exc), code=2)
    except CliError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
