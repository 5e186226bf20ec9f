"""Typed, documented settings for each Caldera process, from flags and the environment.

Each process has one frozen dataclass; every field has a default, a unit in its name or help, and
the reason for the default. A field ``kube_qps`` is the flag ``--kube-qps`` and the environment
variable ``CALDERA_KUBE_QPS`` (a flag wins over the environment, which wins over the default), and
the chart's values use the same names. Parsing is pure: ``parse_settings(cls, argv, environ)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

ENV_PREFIX = "CALDERA_"
KNOWN_CONTROLLERS = ("job", "queue", "podgroup", "command", "gc")


class SettingsError(ValueError):
    """A setting has a value the process cannot run with; the message says which and why."""


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True, kw_only=True)
class ProcessSettings:
    """What every process needs: the API server, its endpoints, logging and leadership."""

    kubeconfig: str | None = _opt(
        None, "kubeconfig file; unset: $KUBECONFIG, then in-cluster, then ~/.kube/config"
    )
    context: str | None = _opt(None, "kubeconfig context; unset: the current context")
    kube_qps: float = _opt(50.0, "client-side request rate to the API server (requests/s)")
    kube_burst: int = _opt(100, "requests allowed above kube_qps in a burst")
    listen_address: str = _opt("0.0.0.0", "address of /metrics, /healthz and /readyz")  # noqa: S104
    metrics_port: int = _opt(8080, "port of /metrics, /healthz and /readyz (0: any free port)")
    log_level: str = _opt("info", "debug, info, warning or error")
    log_format: str = _opt("auto", "json, console, or auto (console on a terminal)")
    leader_elect: bool = _opt(True, "take a Lease before working, so replicas never act at once")
    leader_election_namespace: str = _opt(
        "", "namespace of the Lease; empty: the pod's namespace ($POD_NAMESPACE) or default"
    )
    leader_election_id: str = _opt("", "name of the Lease; empty: caldera-<process>")
    lease_duration: float = _opt(15.0, "seconds a leader's Lease is valid without renewal")
    renew_deadline: float = _opt(
        10.0, "seconds the leader keeps trying to renew before it gives up leadership"
    )
    retry_period: float = _opt(2.0, "seconds between tries to take or renew the Lease")
    shutdown_grace_period: float = _opt(
        20.0,
        "seconds to finish work in flight after SIGTERM; keep it below the pod's "
        "terminationGracePeriodSeconds (30 by default) so the kubelet never kills a clean exit",
    )

    def validate(self) -> None:
        if self.kube_qps <= 0 or self.kube_burst < 1:
            raise SettingsError("kube_qps must be > 0 and kube_burst >= 1")
        if not 0 <= self.metrics_port <= 65535:
            raise SettingsError(f"metrics_port {self.metrics_port} is not a TCP port")
        if self.log_format not in ("auto", "json", "console"):
            raise SettingsError(f"log_format {self.log_format!r}: use json, console or auto")
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise SettingsError(f"log_level {self.log_level!r}: use debug, info, warning or error")
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise SettingsError(
                "leader election needs retry_period < renew_deadline < lease_duration "
                f"(got {self.retry_period}, {self.renew_deadline}, {self.lease_duration})"
            )


@dataclass(frozen=True, kw_only=True)
class ControllersSettings(ProcessSettings):
    """``caldera controllers``: the job, queue, podgroup, command and gc controllers."""

    controllers: tuple[str, ...] = _opt(
        (),
        "controllers to run, comma-separated, of " + ",".join(KNOWN_CONTROLLERS) + "; empty: all",
    )
    workers: int = _opt(5, "concurrent reconciles per controller (one key is never concurrent)")
    scheduler_name: str = _opt("volcano", "schedulerName given to pods that name none")
    pvc_create_qps: float = _opt(10.0, "PVC creations per second, process-wide")
    pvc_create_burst: int = _opt(20, "PVC creations allowed above pvc_create_qps in a burst")
    resync_period: float = _opt(
        600.0, "seconds between local re-deliveries of every object (insurance, no API calls)"
    )

    def validate(self) -> None:
        super().validate()
        unknown = [c for c in self.controllers if c not in KNOWN_CONTROLLERS]
        if unknown:
            raise SettingsError(
                f"unknown controller {', '.join(unknown)}: "
                f"choose from {','.join(KNOWN_CONTROLLERS)}"
            )
        if self.workers < 1:
            raise SettingsError("workers must be at least 1")


S = TypeVar("S", bound=ProcessSettings)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _env(name: str) -> str:
    return ENV_PREFIX + name.upper()


def _convert(name: str, annotation: Any, raw: str) -> Any:
    """Turn a flag or environment string into the field's type, with a clear error."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return None if raw == "" else _convert(name, inner[0], raw)
    if origin is tuple:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if annotation is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{name}: {raw!r} is not a boolean (true or false)")
    try:
        return annotation(raw)
    except ValueError:
        raise SettingsError(f"{name}: {raw!r} is not a valid {annotation.__name__}") from None


def add_arguments(parser: argparse.ArgumentParser, cls: type[ProcessSettings]) -> None:
    """One flag per field, with its help, its environment variable and its default."""
    for f in dataclasses.fields(cls):
        default = f.default
        shown = ",".join(default) if isinstance(default, tuple) else default
        parser.add_argument(
            _flag(f.name),
            dest=f.name,
            default=None,
            metavar=f.name.upper(),
            help=f"{f.metadata.get('help', '')} [env {_env(f.name)}; default {shown!r}]",
        )


def parse_settings(
    cls: type[S], args: argparse.Namespace | Mapping[str, Any], environ: Mapping[str, str]
) -> S:
    """Build validated settings: flag, else environment variable, else the field's default."""
    given = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        raw = given.get(f.name)
        if raw is None:
            raw = environ.get(_env(f.name))
        if raw is not None:
            values[f.name] = _convert(f.name, hints[f.name], raw) if isinstance(raw, str) else raw
    settings = cls(**values)
    settings.validate()
    return settings


def from_command_line(cls: type[S], argv: Sequence[str], prog: str) -> S:
    """Parse ``argv`` for ``cls`` (the process entry points use this)."""
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__)
    add_arguments(parser, cls)
    return parse_settings(cls, parser.parse_args(argv), os.environ)
