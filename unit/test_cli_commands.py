"""Tests of the CLI's command line: what `caldera job list --help` imports (a set, not a time),
the two help sections, every lazy handler resolving, names, the namespace of the kubeconfig
context, `job wait`'s arguments and verdict, `caldera version`'s report, and the completion
script completing object names."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import Job, JobPhase, JobState, JobStatus
from caldera.kube.config import load_kubeconfig
from cli.commands import need_name
from cli.completion import bash_script, completion_tree
from cli.errors import CliError
from cli.job import wait_seconds, wait_verdict, wanted_phase
from cli.main import SERVER_COMMANDS, build_parser
from cli.version import caldera_deployments, render_version

# What the user-facing path must not load: the API client stack, the servers, the scheduler.
HEAVY = (
    "kubernetes_asyncio",
    "aiohttp",
    "prometheus_client",
    "structlog",
    "scheduler",
    "controllers",
    "webhooks",
    "informers",
    "caldera.kube",
    "caldera.api.kinds",
    "msgspec",
    "yaml",
)


def modules_loaded_by(*argv: str) -> set[str]:
    """The modules `caldera ARGV` has imported when it exits, in a fresh interpreter."""
    code = (
        "import sys, json\n"
        "from cli.main import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return set(loaded)


def heavy(loaded: set[str]) -> set[str]:
    return {m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)}


@pytest.mark.parametrize(
    "argv",
    [
        ("job", "list", "--help"),
        ("--help",),
        ("queue", "get", "--help"),
        ("--version",),
        ("version", "--client"),
    ],
)
def test_help_imports_nothing_heavy(argv: tuple[str, ...]) -> None:
    loaded = modules_loaded_by(*argv)
    assert "cli.commands" in loaded  # the probe ran the real command line
    assert heavy(loaded) == set()


def test_a_server_command_still_builds_its_flags() -> None:
    """The scheduler's flags are parsed when it is the command (its modules load then)."""
    loaded = modules_loaded_by("scheduler", "--help")
    assert "scheduler.main" in loaded
    args = build_parser("scheduler").parse_args(["scheduler", "--schedule-period", "1s"])
    assert args.command == "scheduler"


def test_help_has_a_section_for_user_and_for_server_commands() -> None:
    text = build_parser("").format_help()
    user, server = text.split("user commands:")[1].split("server commands")
    for name in ("job", "queue", "cronjob", "pod", "version", "completion", "jobflow"):
        assert f"\n  {name} " in user
    for name, _help in SERVER_COMMANDS:
        assert f"\n  {name} " in server
        assert f"\n  {name} " not in user


def every_handler(parser: argparse.ArgumentParser) -> list[object]:
    found = [parser.get_default("handler")]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(every_handler(child))
    return found


def test_every_lazy_handler_names_a_function() -> None:
    names = [str(getattr(h, "__qualname__", "")) for h in every_handler(build_parser())]
    targets = [name for name in names if ":" in name]
    assert len(targets) >= 20
    for target in targets:
        module, _, name = target.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), target


def test_names_positional_or_flag_but_not_two() -> None:
    parser = build_parser()
    assert need_name(parser.parse_args(["job", "view", "a"]), "job", "-N") == "a"
    assert need_name(parser.parse_args(["job", "view", "-N", "a"]), "job", "-N") == "a"
    assert need_name(parser.parse_args(["queue", "get", "-n", "q"]), "queue", "-n") == "q"
    with pytest.raises(CliError, match="two job names given: a and -N b"):
        need_name(parser.parse_args(["job", "view", "a", "-N", "b"]), "job", "-N")
    with pytest.raises(CliError, match=r"job name must be specified \(NAME or -N NAME\)"):
        need_name(parser.parse_args(["job", "restart"]), "job", "-N")


def test_namespace_is_unset_until_the_context_says_and_a_is_all() -> None:
    args = build_parser().parse_args(["job", "list", "-A"])
    assert (args.namespace, args.all_namespaces) == (None, True)
    assert build_parser().parse_args(["pod", "list", "-n", "x"]).namespace == "x"


def write_config(path: Path, namespace: str | None) -> Path:
    context = {"cluster": "c", "user": "u"} | ({"namespace": namespace} if namespace else {})
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "team", "context": context},
                    {"name": "other", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "team",
            }
        )
    )
    return path


async def test_the_context_names_the_namespace(tmp_path: Path) -> None:
    path = write_config(tmp_path / "config", "research")
    assert (await load_kubeconfig(path, environ={}, home=tmp_path)).namespace == "research"
    other = await load_kubeconfig(path, context="other", environ={}, home=tmp_path)
    assert other.namespace == ""


# --- job wait ---------------------------------------------------------------------------------


def job_in(phase: str) -> Job:
    return Job(metadata=ObjectMeta(name="j"), status=JobStatus(state=JobState(phase=phase)))


def test_wait_arguments() -> None:
    assert wanted_phase("completed") is JobPhase.COMPLETED
    assert wanted_phase("phase=Running") is JobPhase.RUNNING
    with pytest.raises(CliError, match=r"--for: 'Done' is not a job phase \(Pending, "):
        wanted_phase("Done")
    assert wait_seconds("1m30s") == 90
    assert wait_seconds("2.5") == 2.5
    assert wait_seconds("0") == 0
    with pytest.raises(CliError, match="--timeout: "):
        wait_seconds("soon")
    with pytest.raises(CliError, match="--timeout: -1s is negative"):
        wait_seconds("-1s")


@pytest.mark.parametrize(
    ("phase", "wanted", "verdict"),
    [
        ("Completed", JobPhase.COMPLETED, True),
        ("Running", JobPhase.COMPLETED, None),
        ("", JobPhase.COMPLETED, None),
        ("Failed", JobPhase.COMPLETED, False),
        ("Completed", JobPhase.RUNNING, False),
        ("Aborted", JobPhase.COMPLETED, None),  # a ResumeJob Command may still run it
        ("Running", JobPhase.RUNNING, True),
    ],
)
def test_wait_verdict(phase: str, wanted: JobPhase, verdict: bool | None) -> None:
    assert wait_verdict(job_in(phase), wanted) is verdict


# --- version ----------------------------------------------------------------------------------


def test_version_report() -> None:
    listing = {
        "items": [
            {
                "metadata": {
                    "namespace": "caldera-system",
                    "name": "caldera-scheduler",
                    "labels": {
                        "app.kubernetes.io/component": "scheduler",
                        "app.kubernetes.io/version": "0.1.0",
                    },
                },
                "spec": {"template": {"spec": {"containers": [{"image": "caldera:0.1.0"}]}}},
            }
        ]
    }
    found = caldera_deployments(listing)
    assert found == [
        {
            "namespace": "caldera-system",
            "name": "caldera-scheduler",
            "component": "scheduler",
            "version": "0.1.0",
            "image": "caldera:0.1.0",
        }
    ]
    text = render_version({"client": "0.1.0", "kubernetes": "v1.36.3", "caldera": found})
    assert text.splitlines() == [
        "Client Version: 0.1.0",
        "Kubernetes Version: v1.36.3",
        "Caldera Server Version: 0.1.0 (scheduler in caldera-system, image caldera:0.1.0)",
    ]
    assert render_version({"client": "0.1.0"}) == "Client Version: 0.1.0\n"
    none = render_version({"client": "0.1.0", "kubernetes": "v1", "caldera": []})
    assert none.splitlines()[-1].startswith("Caldera Server Version: none found")
    denied = render_version({"client": "0.1.0", "kubernetes": "v1", "calderaError": "forbidden"})
    assert denied.splitlines()[-1] == "Caldera Server Version: unknown (forbidden)"


# --- completion of object names ---------------------------------------------------------------


def test_completion_tree_knows_which_arguments_are_names() -> None:
    tree = completion_tree(build_parser())
    assert tree["job view"].names == {"NAME": "jobs", "-N": "jobs", "--name": "jobs"} | {
        "-n": "namespaces",
        "--namespace": "namespaces",
    }
    assert tree["queue get"].names["-n"] == "queues"
    assert tree["pod list"].names["-q"] == "queues"


def complete(script: Path, bindir: Path, *words: str) -> list[str]:
    """COMPREPLY of the completion script for `words` (the last one being completed)."""
    line = " ".join(words)
    driver = (
        f"source {script}\n"
        f"COMP_WORDS=(caldera {line})\n"
        f"COMP_CWORD={len(words)}\n"
        "_caldera_complete\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", driver], capture_output=True, text=True, env=env, check=True, timeout=30
    )
    return [w for w in done.stdout.splitlines() if w]


def test_completion_script_asks_for_names_with_the_namespace(tmp_path: Path) -> None:
    """The script runs `caldera completion names RESOURCE` with the -n typed; a stand-in
    `caldera` on PATH records the call and answers two names."""
    script = tmp_path / "complete.bash"
    script.write_text(bash_script(build_parser()))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    stub = bindir / "caldera"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho train-a\necho train-b\necho eval\n')
    stub.chmod(0o755)
    assert complete(script, bindir, "job", "view", "-n", "team", "tr") == ["train-a", "train-b"]
    assert complete(script, bindir, "job", "wait", "-N", "") == ["train-a", "train-b", "eval"]
    assert complete(script, bindir, "queue", "get", "-n", "e") == ["eval"]
    assert calls.read_text().splitlines() == [
        "completion names jobs -n team",
        "completion names jobs",
        "completion names queues",
    ]
    # Not a name: subcommands and flags complete as before, without asking the cluster.
    assert complete(script, bindir, "job", "res") == ["resume", "restart"]
    assert len(calls.read_text().splitlines()) == 3
