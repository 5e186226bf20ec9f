"""Typed options of the job plugins, shared by the job controller and the admission webhook.

`caldera.api.jobspec` owns the flag tables (`PLUGINS`) and the Go-`flag`-style parser that turns
`["--port=5000"]` into a dict of values; this module builds on it and adds what both the
controller and the webhook need beyond that:

- `IMPLEMENTED_PLUGINS`: the plugins Caldera's job controller runs (those of Volcano's
  pkg/controllers/job/plugins/ plus `mxnet`, a Caldera addition), in the order it applies them.
- `parse_plugin_args(name, args)`: one frozen options object per plugin (`SvcOptions`,
  `SSHOptions`, ...), with checks across flags that the flag table alone cannot express (an empty
  role name, two roles naming the same task, two ray ports of one number, user-provided ssh
  keys). Every problem is a `PluginArgumentError` naming the plugin, the argument and what is
  allowed.
- `plugin_job_errors(options, job)`: what a plugin cannot do with this particular Job (ray
  without its head task, or a job name too long for ray's Service), as field-named messages.
- `with_required_plugins(plugins)`: the job's plugins plus the ones the webhook would add (svc for
  the distributed frameworks, ssh for mpi), never changing what the user set.

A user-provided ssh private key arrives in the Job spec as a plugin argument, so `SSHOptions`
keeps it out of its repr and no error message ever quotes it.

No clock and no randomness (and no I/O: an import-linter contract; docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from caldera.api.fielderrors import invalid
from caldera.api.jobspec import PluginArgError, required_plugins
from caldera.api.jobspec import parse_plugin_args as _parse_flags
from caldera.api.volcano import Job

__all__ = [
    "DEFAULT_SSH_KEY_PATH",
    "IMPLEMENTED_PLUGINS",
    "SSH_PRIVATE_KEY_REFUSED",
    "EnvOptions",
    "HCCLRankOptions",
    "MPIOptions",
    "MXNetOptions",
    "PluginArgumentError",
    "PluginOptions",
    "PytorchOptions",
    "RayOptions",
    "SSHOptions",
    "SvcOptions",
    "TensorflowOptions",
    "parse_plugin_args",
    "plugin_job_errors",
    "ray_service_name",
    "required_plugins",
    "unsupported_plugin_message",
    "with_required_plugins",
]

# One exception class for every bad plugin argument, whichever module found it.
PluginArgumentError = PluginArgError

# The order the controller applies plugins in. Volcano walks a Go map (random order); a fixed
# order makes the pods of a job identical on every reconcile. hcclrank comes after pytorch, so
# that it reads the RANK pytorch sets (the annotation is the same either way with one master).
IMPLEMENTED_PLUGINS: Final = (
    "env",
    "svc",
    "ssh",
    "tensorflow",
    "pytorch",
    "mpi",
    "mxnet",
    "ray",
    "hcclrank",
)

DEFAULT_SSH_KEY_PATH: Final = "/root/.ssh"
_REDACTED: Final = "<redacted>"
# The webhook refuses --ssh-private-key: a Job's spec is readable by every `view` user, so a
# key there is no secret (docs/compatibility.md).
SSH_PRIVATE_KEY_REFUSED: Final = (
    "flag --ssh-private-key puts a private key in the Job's spec, which everyone who may read "
    "Jobs in the namespace can read; drop it and the ssh plugin generates a key pair into the "
    "Job's own Secret <job>-ssh, or, to use your own key, put it in a Secret and mount that "
    "in the task's pod template instead of using the ssh plugin"
)


@dataclass(frozen=True, slots=True)
class EnvOptions:
    """The env plugin takes no arguments."""


@dataclass(frozen=True, slots=True)
class SvcOptions:
    """svc: headless Service, hosts ConfigMap, NetworkPolicy."""

    publish_not_ready_addresses: bool = False
    disable_network_policy: bool = False
    inject_hosts_env: bool = True


@dataclass(frozen=True, slots=True)
class SSHOptions:
    """ssh: the Secret with the job's key pair, mounted in every pod.

    `private_key` and `public_key` are set only when the user passed `--ssh-private-key` /
    `--ssh-public-key`; the private key never appears in the repr.
    """

    key_file_path: str = DEFAULT_SSH_KEY_PATH
    private_key: str = field(default="", repr=False)
    public_key: str = ""
    port: int = 22

    def __repr__(self) -> str:
        private = _REDACTED if self.private_key else "''"
        return (
            f"SSHOptions(key_file_path={self.key_file_path!r}, private_key={private}, "
            f"public_key={self.public_key!r}, port={self.port})"
        )

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class TensorflowOptions:
    """tensorflow: the task names of each role and the port in TF_CONFIG."""

    ps: str = "ps"
    worker: str = "worker"
    chief: str = "chief"
    evaluator: str = "evaluator"
    port: int = 2222


@dataclass(frozen=True, slots=True)
class PytorchOptions:
    """pytorch: master and worker task names, MASTER_PORT, the optional wait-for-master init."""

    master: str = "master"
    worker: str = "worker"
    port: int = 23456
    wait_master_enabled: bool = False
    wait_master_timeout: int = 300
    wait_master_image: str = "busybox:1.36.1"


@dataclass(frozen=True, slots=True)
class MPIOptions:
    """mpi: master and worker task names and the ssh port opened on every container."""

    master: str = "master"
    worker: str = "worker"
    port: int = 22


@dataclass(frozen=True, slots=True)
class MXNetOptions:
    """mxnet (Caldera addition): ps-lite role task names and DMLC_PS_ROOT_PORT."""

    scheduler: str = "scheduler"
    server: str = "server"
    worker: str = "worker"
    port: int = 9091


@dataclass(frozen=True, slots=True)
class RayOptions:
    """ray: the head and worker tasks and containers, and the head's three ports (Volcano's
    pkg/controllers/job/plugins/distributed-framework/ray)."""

    head: str = "head"
    head_container: str = "head"
    worker: str = "worker"
    worker_container: str = "worker"
    port: int = 6379
    dashboard_port: int = 8265
    client_port: int = 10001


@dataclass(frozen=True, slots=True)
class HCCLRankOptions:
    """hcclrank: the master and worker tasks whose pods get an HCCL rank."""

    master: str = "master"
    worker: str = "worker"


PluginOptions = (
    EnvOptions
    | SvcOptions
    | SSHOptions
    | TensorflowOptions
    | PytorchOptions
    | MPIOptions
    | MXNetOptions
    | RayOptions
    | HCCLRankOptions
)

RAY_SERVICE_SUFFIX: Final = "-head-svc"
_SERVICE_NAME_MAX: Final = 63


def unsupported_plugin_message(name: str) -> str:
    """Why the job controller cannot run plugin `name` (a known Volcano plugin it lacks)."""
    return (
        f"job plugin {name} is not supported by Caldera "
        f"(supported: {', '.join(IMPLEMENTED_PLUGINS)})"
    )


def _redact(message: str, args: Sequence[str]) -> str:
    # The shared parser quotes offending tokens; a private key pasted in the wrong place must not
    # travel on into an Event or a log line.
    for arg in args:
        if "PRIVATE KEY" in arg:
            message = message.replace(repr(arg), _REDACTED).replace(arg, _REDACTED)
    return message


def _roles(plugin: str, roles: Mapping[str, str]) -> None:
    seen: dict[str, str] = {}
    for flag, task in roles.items():
        if not task:
            raise PluginArgumentError(
                f"plugin {plugin}: flag --{flag} must name a task, got an empty value"
            )
        if task in seen:
            raise PluginArgumentError(
                f"plugin {plugin}: flags --{seen[task]} and --{flag} both name task {task!r}; "
                "each role needs its own task"
            )
        seen[task] = flag


def _ssh(values: Mapping[str, str | int | bool]) -> SSHOptions:
    options = SSHOptions(
        key_file_path=str(values["ssh-key-file-path"]),
        private_key=str(values["ssh-private-key"]),
        public_key=str(values["ssh-public-key"]),
        port=int(values["ssh-port"]),
    )
    if not options.key_file_path.startswith("/"):
        raise PluginArgumentError(
            f"plugin ssh: flag --ssh-key-file-path must be an absolute path, "
            f"got {options.key_file_path!r}"
        )
    if options.public_key and not options.private_key:
        raise PluginArgumentError(
            "plugin ssh: flag --ssh-public-key needs --ssh-private-key as well "
            "(give both keys, or neither to let Caldera generate a pair)"
        )
    if options.private_key and "PRIVATE KEY-----" not in options.private_key:
        raise PluginArgumentError(
            "plugin ssh: flag --ssh-private-key must hold a PEM private key "
            "(-----BEGIN ... PRIVATE KEY-----)"
        )
    return options


def _ray(values: Mapping[str, str | int | bool]) -> RayOptions:
    ray = RayOptions(
        head=str(values["head"]),
        head_container=str(values["headContainer"]),
        worker=str(values["worker"]),
        worker_container=str(values["workerContainer"]),
        port=int(values["port"]),
        dashboard_port=int(values["dashboardPort"]),
        client_port=int(values["clientPort"]),
    )
    _roles("ray", {"head": ray.head, "worker": ray.worker})
    for flag, container in (
        ("headContainer", ray.head_container),
        ("workerContainer", ray.worker_container),
    ):
        if not container:
            raise PluginArgumentError(
                f"plugin ray: flag --{flag} must name a container, got an empty value"
            )
    # One Service carries the three ports: the API server refuses two of one number.
    _distinct_ports(
        "ray",
        {"port": ray.port, "dashboardPort": ray.dashboard_port, "clientPort": ray.client_port},
    )
    return ray


def _distinct_ports(plugin: str, ports: Mapping[str, int]) -> None:
    seen: dict[int, str] = {}
    for flag, port in ports.items():
        if port in seen:
            raise PluginArgumentError(
                f"plugin {plugin}: flags --{seen[port]} and --{flag} both use port {port}; "
                "each needs its own port"
            )
        seen[port] = flag


def parse_plugin_args(name: str, args: Sequence[str]) -> PluginOptions:
    """The typed options of plugin `name` given its arguments (`["--port=5000", ...]`).

    Raises `PluginArgumentError` for an unknown plugin, a plugin the controller does not run, an
    unknown flag, a malformed value, or flags that contradict each other; the message names the
    plugin and the argument.
    """
    try:
        values = _parse_flags(name, args)
    except PluginArgError as exc:
        raise PluginArgumentError(_redact(str(exc), args)) from None
    if name == "env":
        return EnvOptions()
    if name == "svc":
        return SvcOptions(
            publish_not_ready_addresses=bool(values["publish-not-ready-addresses"]),
            disable_network_policy=bool(values["disable-network-policy"]),
            inject_hosts_env=bool(values["inject-hosts-env"]),
        )
    if name == "ssh":
        return _ssh(values)
    if name == "tensorflow":
        tf = TensorflowOptions(
            ps=str(values["ps"]),
            worker=str(values["worker"]),
            chief=str(values["chief"]),
            evaluator=str(values["evaluator"]),
            port=int(values["port"]),
        )
        _roles(
            name, {"ps": tf.ps, "worker": tf.worker, "chief": tf.chief, "evaluator": tf.evaluator}
        )
        return tf
    if name == "pytorch":
        pt = PytorchOptions(
            master=str(values["master"]),
            worker=str(values["worker"]),
            port=int(values["port"]),
            wait_master_enabled=bool(values["wait-master-enabled"]),
            wait_master_timeout=int(values["wait-master-timeout"]),
            wait_master_image=str(values["wait-master-image"]),
        )
        _roles(name, {"master": pt.master, "worker": pt.worker})
        if pt.wait_master_timeout <= 0:
            raise PluginArgumentError(
                "plugin pytorch: flag --wait-master-timeout must be a positive number of "
                f"seconds, got {pt.wait_master_timeout}"
            )
        if pt.wait_master_enabled and not pt.wait_master_image:
            raise PluginArgumentError(
                "plugin pytorch: flag --wait-master-image must name an image when "
                "--wait-master-enabled is true"
            )
        return pt
    if name == "mpi":
        mpi = MPIOptions(
            master=str(values["master"]), worker=str(values["worker"]), port=int(values["port"])
        )
        _roles(name, {"master": mpi.master, "worker": mpi.worker})
        return mpi
    if name == "mxnet":
        mx = MXNetOptions(
            scheduler=str(values["scheduler"]),
            server=str(values["server"]),
            worker=str(values["worker"]),
            port=int(values["port"]),
        )
        _roles(name, {"scheduler": mx.scheduler, "server": mx.server, "worker": mx.worker})
        return mx
    if name == "ray":
        return _ray(values)
    if name == "hcclrank":
        hccl = HCCLRankOptions(master=str(values["master"]), worker=str(values["worker"]))
        _roles(name, {"master": hccl.master, "worker": hccl.worker})
        return hccl
    raise PluginArgumentError(unsupported_plugin_message(name))


def ray_service_name(job_name: str) -> str:
    """The ray plugin's Service for the head: `<job>-head-svc`."""
    return job_name + RAY_SERVICE_SUFFIX


def plugin_job_errors(options: PluginOptions, job: Job) -> list[str]:
    """What the plugin cannot do with `job`, one field-named message per problem ([] when it
    can run). Only ray has such checks: its head task must exist (Volcano's controller fails
    every pod of the job otherwise, with the same words), and `<job>-head-svc` must fit a
    Service name (the svc plugin, which ray brings, already checks the name's shape)."""
    if not isinstance(options, RayOptions):
        return []
    errors: list[str] = []
    name = job.metadata.name
    if all(task.name != options.head for task in job.spec.tasks):
        errors.append(f"spec.plugins.ray: job {name} doesn't have head task {options.head}")
    service = ray_service_name(name)
    if len(service) > _SERVICE_NAME_MAX:
        errors.append(
            invalid(
                "metadata.name",
                name,
                f"the ray plugin creates a Service {service}, and a Service name has at most "
                f"{_SERVICE_NAME_MAX} characters (a job name at most "
                f"{_SERVICE_NAME_MAX - len(RAY_SERVICE_SUFFIX)})",
            )
        )
    return errors


def with_required_plugins(
    plugins: Mapping[str, Sequence[str]],
) -> dict[str, tuple[str, ...]]:
    """The job's plugins plus those it needs (svc for the frameworks, ssh for mpi).

    The user's entries, arguments included, are kept as they are; added plugins get no
    arguments.
    """
    merged = {name: tuple(args) for name, args in plugins.items()}
    merged.update(required_plugins(plugins))
    return merged
