"""Knowledge about a Job spec that the job controller and the admission webhook share.

- The job plugins (Volcano's pkg/controllers/job/plugins/): their names, their Go-flag-style
  arguments with types and defaults, and `parse_plugin_args`, which reads `["--port=5000",
  "--ssh-port", "2022"]` the way Go's `flag` package does and raises `PluginArgError` naming the
  plugin and the argument.
- The plugins a job needs (`required_plugins`): `svc` for the distributed-framework plugins,
  `ssh` for mpi.
- Webhook defaults (Volcano's pkg/webhooks/admission/jobs/mutate/mutate_job.go): task names
  `default<i>`, task minAvailable, job minAvailable, maxRetry 3, and the name of a task's pods
  and PVCs.

Functions over `caldera.api.volcano` models. An import-linter contract keeps this module free of I/O
(docs/architecture.md).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.fielderrors import invalid
from caldera.api.volcano import DEFAULT_MAX_RETRY, TaskSpec

__all__ = [
    "DEFAULT_TASK_NAME_PREFIX",
    "FRAMEWORK_PLUGINS",
    "PLUGINS",
    "ArgType",
    "PluginArg",
    "PluginArgError",
    "PluginSpec",
    "default_max_retry",
    "default_task_min_available",
    "default_task_name",
    "job_min_available",
    "parse_plugin_args",
    "required_plugins",
    "service_name_error",
    "uses_svc",
]

DEFAULT_TASK_NAME_PREFIX: Final = "default"


class ArgType(enum.Enum):
    """The Go flag type of a plugin argument."""

    STRING = "string"
    INT = "int"
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class PluginArg:
    """One flag of a plugin: its name (without dashes), type and default."""

    name: str
    type: ArgType
    default: str | int | bool

    @property
    def is_port(self) -> bool:
        """Whether the value is a TCP port (validated to 1-65535)."""
        return self.type is ArgType.INT and self.name.lower().endswith("port")


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """A job plugin: its name and the flags it accepts."""

    name: str
    args: tuple[PluginArg, ...] = ()

    def arg(self, name: str) -> PluginArg | None:
        """The flag called `name`, or None."""
        for a in self.args:
            if a.name == name:
                return a
        return None

    def defaults(self) -> dict[str, str | int | bool]:
        """Every flag's default value."""
        return {a.name: a.default for a in self.args}


def _s(name: str, default: str) -> PluginArg:
    return PluginArg(name, ArgType.STRING, default)


def _i(name: str, default: int) -> PluginArg:
    return PluginArg(name, ArgType.INT, default)


def _b(name: str, default: bool) -> PluginArg:
    return PluginArg(name, ArgType.BOOL, default)


PLUGINS: Final[Mapping[str, PluginSpec]] = {
    spec.name: spec
    for spec in (
        PluginSpec("env"),
        PluginSpec(
            "svc",
            (
                _b("publish-not-ready-addresses", False),
                _b("disable-network-policy", False),
                _b("inject-hosts-env", True),
            ),
        ),
        PluginSpec(
            "ssh",
            (
                _s("ssh-key-file-path", "/root/.ssh"),
                _s("ssh-private-key", ""),
                _s("ssh-public-key", ""),
                _i("ssh-port", 22),
            ),
        ),
        PluginSpec(
            "tensorflow",
            (
                _s("ps", "ps"),
                _s("worker", "worker"),
                _s("chief", "chief"),
                _s("evaluator", "evaluator"),
                _i("port", 2222),
            ),
        ),
        PluginSpec(
            "pytorch",
            (
                _s("master", "master"),
                _s("worker", "worker"),
                _i("port", 23456),
                _b("wait-master-enabled", False),
                _i("wait-master-timeout", 300),
                _s("wait-master-image", "busybox:1.36.1"),
            ),
        ),
        PluginSpec("mpi", (_s("master", "master"), _s("worker", "worker"), _i("port", 22))),
        PluginSpec(
            "ray",
            (
                _s("head", "head"),
                _s("headContainer", "head"),
                _s("worker", "worker"),
                _s("workerContainer", "worker"),
                _i("port", 6379),
                _i("dashboardPort", 8265),
                _i("clientPort", 10001),
            ),
        ),
        PluginSpec("hcclrank", (_s("master", "master"), _s("worker", "worker"))),
        # Caldera addition: MXNet / ps-lite (DMLC_* variables); Volcano has no such plugin.
        PluginSpec(
            "mxnet",
            (
                _s("scheduler", "scheduler"),
                _s("server", "server"),
                _s("worker", "worker"),
                _i("port", 9091),
            ),
        ),
    )
}

# Plugins whose pods address each other by host name, so they need the svc plugin.
FRAMEWORK_PLUGINS: Final = ("tensorflow", "pytorch", "mpi", "ray", "mxnet")


class PluginArgError(ValueError):
    """A plugin argument Go's flag package (and so the plugin) would reject; names both."""


_GO_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_MAX_INT: Final = (1 << 63) - 1


def _convert(plugin: str, arg: PluginArg, raw: str) -> str | int | bool:
    if arg.type is ArgType.STRING:
        return raw
    if arg.type is ArgType.BOOL:
        if raw in _GO_TRUE:
            return True
        if raw in _GO_FALSE:
            return False
        raise PluginArgError(
            f"plugin {plugin}: invalid boolean value {raw!r} for flag --{arg.name} "
            "(use true or false)"
        )
    try:
        value = int(raw, 0)
    except ValueError:
        raise PluginArgError(
            f"plugin {plugin}: invalid integer value {raw!r} for flag --{arg.name}"
        ) from None
    if abs(value) > _MAX_INT:
        raise PluginArgError(
            f"plugin {plugin}: value {raw!r} for flag --{arg.name} is out of range"
        )
    if arg.is_port and not 1 <= value <= 65535:
        raise PluginArgError(
            f"plugin {plugin}: flag --{arg.name} must be a port between 1 and 65535, got {value}"
        )
    return value


def parse_plugin_args(plugin: str, args: Sequence[str]) -> dict[str, str | int | bool]:
    """Parse a plugin's arguments as Go's `flag` package does; return every flag's value.

    Accepted forms: `-name`, `--name` (booleans only), `-name=value`, `--name=value`, and
    `--name value` for non-boolean flags; `--` ends the flags. Unlike Go (where the plugins ignore
    parse errors), anything else raises `PluginArgError`: an unknown plugin or flag, a positional
    argument, a missing or malformed value, a port outside 1-65535.
    """
    spec = PLUGINS.get(plugin)
    if spec is None:
        raise PluginArgError(f"unable to find job plugin: {plugin}")
    values = spec.defaults()
    i = 0
    while i < len(args):
        arg_text = args[i]
        i += 1
        if arg_text == "--":
            if i < len(args):
                raise PluginArgError(f"plugin {plugin}: unexpected argument {args[i]!r}")
            break
        if len(arg_text) < 2 or arg_text[0] != "-" or arg_text.startswith("---"):
            raise PluginArgError(
                f"plugin {plugin}: unexpected argument {arg_text!r} "
                "(arguments look like --name=value)"
            )
        body = arg_text[2:] if arg_text.startswith("--") else arg_text[1:]
        name, has_value, raw = body.partition("=")
        if not name or name[0] in "-=":
            raise PluginArgError(f"plugin {plugin}: bad flag syntax: {arg_text}")
        arg = spec.arg(name)
        if arg is None:
            known = ", ".join(f"--{a.name}" for a in spec.args) or "none"
            raise PluginArgError(
                f"plugin {plugin}: flag provided but not defined: -{name} (known flags: {known})"
            )
        if not has_value:
            if arg.type is ArgType.BOOL:
                values[name] = True
                continue
            if i >= len(args):
                raise PluginArgError(f"plugin {plugin}: flag needs an argument: -{name}")
            raw = args[i]
            i += 1
        values[name] = _convert(plugin, arg, raw)
    return values


def required_plugins(plugins: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The plugins the webhook adds to a job: svc for the frameworks, ssh for mpi.

    Returns only the missing ones, each with no arguments; a plugin the user set is never touched.
    """
    added: dict[str, tuple[str, ...]] = {}
    if any(name in plugins for name in FRAMEWORK_PLUGINS) and "svc" not in plugins:
        added["svc"] = ()
    if "mpi" in plugins and "ssh" not in plugins:
        added["ssh"] = ()
    return added


def default_task_name(index: int) -> str:
    """The name the webhook gives an unnamed task: `default<index>`."""
    return f"{DEFAULT_TASK_NAME_PREFIX}{index}"


def default_task_min_available(task: TaskSpec) -> int:
    """A task's minAvailable when unset: minPartitions*partitionSize if minPartitions > 0, else
    replicas."""
    policy = task.partition_policy
    if policy is not None and policy.min_partitions > 0:
        return policy.min_partitions * policy.partition_size
    return task.replicas


def job_min_available(tasks: Sequence[TaskSpec]) -> int:
    """A job's minAvailable when 0: the sum of the tasks' (defaulted) minAvailable."""
    return sum(
        t.min_available if t.min_available is not None else default_task_min_available(t)
        for t in tasks
    )


def default_max_retry(value: int) -> int:
    """maxRetry as the webhook leaves it: 0 becomes 3."""
    return DEFAULT_MAX_RETRY if value == 0 else value


_DNS1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SERVICE_NAME_MAX: Final = 63


def uses_svc(plugins: Mapping[str, Sequence[str]]) -> bool:
    """Whether the job runs the svc plugin: named, or added by the webhook for a framework."""
    return "svc" in plugins or "svc" in required_plugins(plugins)


def service_name_error(job_name: str) -> str:
    """Why the svc plugin cannot name a Service after `job_name`, or "": a Service name is a
    DNS-1035 label (Kubernetes refuses `1train` and `a.b`, which a Job name may be)."""
    if len(job_name) <= _SERVICE_NAME_MAX and _DNS1035_LABEL.fullmatch(job_name):
        return ""
    return invalid(
        "metadata.name",
        job_name,
        "the svc plugin creates a Service of this name, and a Service name must be a DNS-1035 "
        "label: at most 63 lowercase letters, digits or '-', starting with a letter and ending "
        "with a letter or digit",
    )
