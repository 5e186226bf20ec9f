"""The user commands' command line: every group, subcommand and flag of ``caldera job|queue|
cronjob|pod|version|dashboard``, in one place, importing nothing but argparse.

Handlers are named as ``"module:function"`` and imported only when their command runs, so
``caldera job list --help`` (and shell completion) never loads the API client, the models or
the scheduler. The argument blocks the commands share (namespace, name, output, connection) are
defined once here. vcctl's flags are kept (``-n`` namespace and ``-N`` name for jobs, ``-n`` name
for queues); beyond vcctl: ``-A/--all-namespaces``, a namespace that defaults to the kubeconfig
context's, and names as positional arguments where vcctl has none.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Final, TypeAlias

from cli.errors import CliError

__all__ = [
    "COMPLETES",
    "DEFAULT_NAMESPACE",
    "USER_COMMANDS",
    "lazy",
    "need_name",
    "register",
    "usage",
]

Handler = Callable[[argparse.Namespace], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

DEFAULT_NAMESPACE: Final = "default"
"""The namespace when neither ``-n`` nor the kubeconfig context names one (kubectl's rule)."""
DEFAULT_RESOURCES: Final = "cpu=1000m,memory=100Mi"
COMPLETES: Final = "completes"
"""The attribute an argparse action carries when its value is the name of an object of a
resource ("jobs", "queues", ...): shell completion asks the cluster for those names."""

USER_COMMANDS: Final = (
    ("job", "run, list, view, wait for, suspend, resume, restart and delete Volcano jobs"),
    ("queue", "create, delete, open, close, list and get queues (vcctl queue)"),
    ("cronjob", "list, get, suspend and resume Volcano CronJobs"),
    ("pod", "list the pods of Volcano jobs and queues (vcctl pod)"),
    ("version", "print the client's version and the cluster's (Kubernetes, Caldera)"),
    ("dashboard", "serve the web dashboard on 127.0.0.1 with your own kubeconfig (read-only)"),
    ("completion", "print a shell completion script (bash or zsh)"),
)


def lazy(target: str) -> Handler:
    """A handler that imports ``module:function`` when the command runs, and calls it."""
    module, _, name = target.partition(":")

    def handler(args: argparse.Namespace) -> int:
        function: Handler = getattr(importlib.import_module(module), name)
        return function(args)

    handler.__qualname__ = target
    return handler


def usage(parser: argparse.ArgumentParser) -> int:
    """A command group given no subcommand: its help on stderr, exit code 2."""
    parser.print_help(sys.stderr)
    return 2


def need_name(args: argparse.Namespace, what: str, flag: str) -> str:
    """The object's name from NAME or the name flag; a one-line error (exit 1) without one."""
    positional: str = getattr(args, "object_name", "") or ""
    flagged: str = args.name or ""
    if positional and flagged and positional != flagged:
        raise CliError(f"two {what} names given: {positional} and {flag} {flagged}; give one")
    name = positional or flagged
    if not name:
        raise CliError(f"{what} name must be specified (NAME or {flag} NAME)")
    return name


# --- the shared argument blocks --------------------------------------------------------------


def _completes(action: argparse.Action, resource: str) -> None:
    setattr(action, COMPLETES, resource)


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """vcctl's -k/--kubeconfig and -s/--master, and kubectl's --context."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "-k",
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)",
    )
    group.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    group.add_argument(
        "-s", "--master", metavar="URL", help="API server address, overriding the kubeconfig's"
    )


def add_output_arg(parser: argparse.ArgumentParser, *, wide: bool = True) -> None:
    """-o/--output json|yaml (and wide for tables)."""
    choices = ["json", "yaml", "wide"] if wide else ["json", "yaml"]
    parser.add_argument(
        "-o",
        "--output",
        choices=choices,
        metavar="FORMAT",
        help=f"output format: {'|'.join(choices)} (default: vcctl's table)",
    )


def add_namespace_args(
    parser: argparse.ArgumentParser, what: str, *, all_namespaces: bool = False
) -> None:
    """``-n/--namespace`` (unset: the kubeconfig context's namespace, else ``default``), and
    ``-A/--all-namespaces`` on list commands."""
    action = parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help=f"the namespace of the {what} (default: the kubeconfig context's, else default)",
    )
    _completes(action, "namespaces")
    if all_namespaces:
        parser.add_argument(
            "-A",
            "--all-namespaces",
            action="store_true",
            help=f"{what} of every namespace (a NAMESPACE column is added)",
        )


def add_name_args(
    parser: argparse.ArgumentParser, what: str, resource: str, *, flag: str = "-N"
) -> None:
    """The object's name: NAME, or vcctl's flag (``-N`` for jobs, ``-n`` for queues)."""
    _completes(
        parser.add_argument(
            "object_name", nargs="?", default="", metavar="NAME", help=f"the name of the {what}"
        ),
        resource,
    )
    _completes(
        parser.add_argument(flag, "--name", default="", help=f"the name of the {what}"), resource
    )


def _subcommand(
    cmds: Subparsers,
    name: str,
    help: str,
    handler: str,
    *,
    description: str | None = None,
) -> argparse.ArgumentParser:
    parser = cmds.add_parser(
        name, help=help, description=description or f"{help[:1].upper()}{help[1:]}."
    )
    parser.set_defaults(handler=lazy(handler))
    return parser


def _group(sub: Subparsers, name: str, description: str) -> Subparsers:
    help = dict(USER_COMMANDS)[name]
    parser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(handler=lambda _args: usage(parser))
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND")


def _finish(cmds: Subparsers) -> None:
    """The connection flags of every subcommand, after its own flags in --help."""
    for parser in cmds.choices.values():
        add_connection_args(parser)


# --- the groups -----------------------------------------------------------------------------


def _job(sub: Subparsers) -> None:
    cmds = _group(sub, "job", "Volcano jobs, with vcctl's commands, flags and columns.")

    p = _subcommand(
        cmds,
        "run",
        "run a job",
        "cli.job:run_job",
        description="Create a job from flags or a file.",
    )
    p.add_argument("-i", "--image", default="busybox", help="the container image of the job")
    add_namespace_args(p, "job")
    p.add_argument("-N", "--name", default="", help="the name of the job")
    p.add_argument(
        "-m", "--min", type=int, default=1, help="the minimal available tasks of the job"
    )
    p.add_argument("-r", "--replicas", type=int, default=1, help="the total tasks of the job")
    p.add_argument(
        "-R", "--requests", default=DEFAULT_RESOURCES, help="the resource requests of each task"
    )
    p.add_argument(
        "-L", "--limits", default=DEFAULT_RESOURCES, help="the resource limits of each task"
    )
    p.add_argument("-S", "--scheduler", default="volcano", help="the scheduler of the job")
    p.add_argument("-f", "--filename", help="a YAML file with the job ('-' for stdin)")

    p = _subcommand(
        cmds,
        "list",
        "list jobs",
        "cli.job:list_jobs",
        description="List jobs with vcctl's columns.",
    )
    add_namespace_args(p, "jobs", all_namespaces=True)
    p.add_argument("-q", "--queue", default="", help="only jobs in this queue")
    p.add_argument("-S", "--scheduler", default="", help="only jobs with this scheduler")
    p.add_argument("--selector", default="", help="only jobs whose name contains this text")
    p.add_argument(
        "-w", "--watch", action="store_true", help="after the table, print a row for every change"
    )
    add_output_arg(p)

    p = _subcommand(
        cmds,
        "view",
        "show a job: spec, status, tasks, pods, events",
        "cli.job:view_job",
        description="Show a job, its tasks, pods and PodGroup, why its gang is unschedulable, "
        "and the events of the job itself.",
    )
    add_namespace_args(p, "job")
    add_name_args(p, "job", "jobs")
    add_output_arg(p, wide=False)

    p = _subcommand(
        cmds,
        "why",
        "say why a job waits, stage by stage",
        "cli.job:why_job",
        description="Say in plain words why a job waits: finished or running, suspended, its "
        "queue closed, dependsOn not met, what the scheduler found in its last session (held at "
        "the enqueue gate, pods that cannot be placed), and the pods' scheduling messages.",
    )
    add_namespace_args(p, "job")
    add_name_args(p, "job", "jobs")
    add_output_arg(p, wide=False)

    p = _subcommand(
        cmds,
        "wait",
        "wait until a job reaches a phase",
        "cli.job:wait_job",
        description="Wait until the job's phase is the one given (kubectl wait's exit codes: 0 "
        "when reached, 1 on timeout or when the job ends in another final phase).",
    )
    add_namespace_args(p, "job")
    add_name_args(p, "job", "jobs")
    p.add_argument(
        "--for",
        dest="phase",
        default="Completed",
        metavar="PHASE",
        help="the phase to wait for: Completed (default), Running, Failed, Aborted, ...",
    )
    p.add_argument(
        "--timeout",
        default="30s",
        help="how long to wait, a Go duration (30s, 5m, 1h30m) or seconds; 0 checks once",
    )

    for verb, text in (
        ("suspend", "suspend (abort) a job: its pods are deleted (an AbortJob Command)"),
        ("resume", "resume a suspended job (a ResumeJob Command)"),
        ("restart", "restart a job: its pods are recreated, its version bumped (RestartJob)"),
    ):
        p = _subcommand(cmds, verb, text, f"cli.job:{verb}_job")
        add_namespace_args(p, "job")
        add_name_args(p, "job", "jobs")

    p = _subcommand(cmds, "delete", "delete a job", "cli.job:delete_job")
    add_namespace_args(p, "job")
    add_name_args(p, "job", "jobs")
    _finish(cmds)


def _queue(sub: Subparsers) -> None:
    cmds = _group(sub, "queue", "Volcano queues, with vcctl's commands, flags and columns.")

    p = _subcommand(cmds, "create", "create a queue", "cli.queue:create_queue")
    p.add_argument("-n", "--name", default="test", help="the name of the queue (test)")
    p.add_argument("-w", "--weight", type=int, default=1, help="the weight of the queue (1)")
    p.add_argument(
        "-S", "--state", default="Open", choices=["Open", "Closed"], help="the state (Open)"
    )

    p = _subcommand(cmds, "delete", "delete a queue", "cli.queue:delete_queue")
    add_name_args(p, "queue", "queues", flag="-n")

    p = _subcommand(
        cmds,
        "operate",
        "open, close or re-weight a queue",
        "cli.queue:operate_queue",
        description="open and close create an OpenQueue / CloseQueue Command; update sets the "
        "weight. The queue controller runs the Command only for those who may update the queue "
        "(the webhook checks and stamps the creator), or when it sits in a namespace the "
        "controllers trust with queue Commands (--namespace: the release namespace by default).",
    )
    add_name_args(p, "queue", "queues", flag="-n")
    p.add_argument("-a", "--action", default="", help="open, close or update")
    p.add_argument(
        "--namespace",
        dest="command_namespace",
        default="default",
        metavar="NAMESPACE",
        help="the namespace of the Command open and close create (default: default, as vcctl; "
        "-n is the queue's name)",
    )
    p.add_argument("-w", "--weight", type=int, default=0, help="the new weight (update)")

    p = _subcommand(
        cmds,
        "list",
        "list queues",
        "cli.queue:list_queues",
        description="List queues with PodGroup counts per phase.",
    )
    add_output_arg(p)

    p = _subcommand(cmds, "get", "show one queue", "cli.queue:get_queue")
    add_name_args(p, "queue", "queues", flag="-n")
    add_output_arg(p)

    p = _subcommand(
        cmds,
        "pending",
        "the queue's waiting jobs in the order the scheduler serves them",
        "cli.pending:queue_pending",
        description="List the queue's waiting jobs in the order the scheduler serves them: "
        "position in the queue and in the cluster, priority, what each waits for and since "
        "when, read from the visibility API (docs/visibility.md). Jobs of namespaces you may "
        "not read keep their place as (hidden) rows.",
    )
    add_name_args(p, "queue", "queues", flag="-n")
    p.add_argument(
        "--limit", type=int, default=1000, help="at most this many jobs (1 to 5000; 1000)"
    )
    add_output_arg(p)
    _finish(cmds)


def _cronjob(sub: Subparsers) -> None:
    cmds = _group(sub, "cronjob", "Volcano CronJobs (batch.volcano.sh), with kubectl's columns.")

    p = _subcommand(cmds, "list", "list cronjobs", "cli.cronjob:list_cronjobs")
    add_namespace_args(p, "cronjobs", all_namespaces=True)
    add_output_arg(p)

    p = _subcommand(cmds, "get", "show one cronjob", "cli.cronjob:get_cronjob")
    add_namespace_args(p, "cronjob")
    add_name_args(p, "cronjob", "cronjobs")
    add_output_arg(p)

    for verb, value in (("suspend", True), ("resume", False)):
        text = "start no Jobs until resumed" if value else "start Jobs on schedule again"
        p = _subcommand(
            cmds,
            verb,
            f"{verb} a cronjob: {text}",
            f"cli.cronjob:{verb}_cronjob",
            description=f"Set spec.suspend to {str(value).lower()}.",
        )
        add_namespace_args(p, "cronjob")
        add_name_args(p, "cronjob", "cronjobs")
    _finish(cmds)


def _pod(sub: Subparsers) -> None:
    cmds = _group(sub, "pod", "Pods of Volcano jobs and queues.")
    p = _subcommand(
        cmds,
        "list",
        "list pods",
        "cli.pod:list_pods",
        description="List the pods of jobs (all jobs, one job, a queue).",
    )
    add_namespace_args(p, "pods", all_namespaces=True)
    _completes(p.add_argument("-j", "--job", default="", help="only the pods of this job"), "jobs")
    _completes(
        p.add_argument("-q", "--queue", default="", help="only the pods of this queue"), "queues"
    )
    add_output_arg(p)
    _finish(cmds)


def _version(sub: Subparsers) -> None:
    p = sub.add_parser(
        "version",
        help=dict(USER_COMMANDS)["version"],
        description="Print this client's version, the API server's Kubernetes version and the "
        "version of each Caldera Deployment (the chart's app.kubernetes.io/version label).",
    )
    p.add_argument(
        "--client", action="store_true", help="only the client's version (no cluster needed)"
    )
    add_output_arg(p, wide=False)
    add_connection_args(p)
    p.set_defaults(handler=lazy("cli.version:show_version"))


DASHBOARD_PORT: Final = 8090


def _dashboard(sub: Subparsers) -> None:
    p = sub.add_parser(
        "dashboard",
        help=dict(USER_COMMANDS)["dashboard"],
        description="Serve Caldera's web dashboard (queues, jobs, why they wait, live) on "
        "127.0.0.1, reading the cluster with your own kubeconfig: it shows what your RBAC lets "
        "you list, and never writes. Without -n it watches every namespace, which needs the "
        "right to list Jobs, PodGroups and pods cluster-wide.",
    )
    action = p.add_argument(
        "-n", "--namespace", default=None, help="watch this namespace only (default: all)"
    )
    _completes(action, "namespaces")
    p.add_argument(
        "-p",
        "--port",
        type=int,
        default=DASHBOARD_PORT,
        help=f"the port (default: {DASHBOARD_PORT}; 0 picks a free one)",
    )
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="the address to listen on (default: 127.0.0.1; another than a loopback one only "
        "with --in-cluster)",
    )
    p.add_argument(
        "--in-cluster",
        action="store_true",
        help="serve many users (the chart's Deployment): read with this connection (in a pod, "
        "its ServiceAccount), and let in only requests with a bearer token the API server "
        "accepts, each user seeing what their own RBAC lets them list",
    )
    add_connection_args(p)
    p.set_defaults(handler=lazy("cli.dashboard:run_dashboard"))


def _completion(sub: Subparsers) -> None:
    cmds = _group(
        sub, "completion", "Print a completion script: source <(caldera completion bash)."
    )
    for shell in ("bash", "zsh"):
        p = cmds.add_parser(shell, help=f"the {shell} script")
        p.set_defaults(handler=lazy("cli.completion:print_script"))
    names = cmds.add_parser(
        "names",
        help="the names of one resource's objects, one a line (what the script calls)",
        description="Print the names of the jobs, queues, cronjobs or namespaces the "
        "connection can list; nothing (exit code 1) when it cannot.",
    )
    names.add_argument("resource", choices=["jobs", "queues", "cronjobs", "namespaces"])
    add_namespace_args(names, "objects")
    add_connection_args(names)
    names.set_defaults(handler=lazy("cli.names:print_names"))


def register(sub: Subparsers) -> None:
    """Add every user command, and ``completion``."""
    _job(sub)
    _queue(sub)
    _cronjob(sub)
    _pod(sub)
    _version(sub)
    _dashboard(sub)
    _completion(sub)
