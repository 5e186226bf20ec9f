"""Typed, documented settings for each Caldera process, from flags and the environment.

Each process has one frozen dataclass; every field has a default, a unit in its name or help, and
the reason for the default. A field ``kube_qps`` is the flag ``--kube-qps`` and the environment
variable ``CALDERA_KUBE_QPS`` (a flag wins over the environment, which wins over the default), and
the chart's values use the same names. Parsing is pure: ``parse_settings(cls, argv, environ)``.

Volcano's command lines carry over (docs/migrating-from-volcano.md): a field may also answer to
the flag Volcano gives the same setting (``--kube-api-qps`` for ``--kube-qps``, the
``--leader-elect-*`` flags of Kubernetes' component-base), a field in seconds also takes a Go
duration as Volcano's flags do (``--schedule-period=1s``, ``500ms``, ``1m30s``), and
``--scheduler-name`` may be repeated, as Volcano's string-array flag is, as well as
comma-separated.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from caldera.api.duration import DurationError, parse_duration
from caldera.api.features import (
    SCHEDULING_GATES_QUEUE_ADMISSION,
    FeatureGateError,
    parse_feature_gates,
)

ENV_PREFIX = "CALDERA_"
# Volcano's names for the API client's rate (every Volcano process has them).
KUBE_API_QPS = ("--kube-api-qps",)
KUBE_API_BURST = ("--kube-api-burst",)
KNOWN_CONTROLLERS = (
    "job",
    "queue",
    "podgroup",
    "command",
    "gc",
    "cronjob",
    "jobflow",
    "jobtemplate",
    "hypernode",
    "sharding",
)
# Off unless asked for by name or by '*' (Volcano's default is "*,-sharding-controller").
OFF_BY_DEFAULT = frozenset({"sharding"})
# Volcano's --controllers names for the same controllers (its job controller also takes the
# Commands aimed at Jobs, as Caldera's does), and those of Volcano's that Caldera has not.
VOLCANO_CONTROLLERS = {
    "job-controller": "job",
    "queue-controller": "queue",
    "pg-controller": "podgroup",
    "gc-controller": "gc",
    "cronjob-controller": "cronjob",
    "jobflow-controller": "jobflow",
    "jobtemplate-controller": "jobtemplate",
    "hyperNode-controller": "hypernode",
    "sharding-controller": "sharding",
}
VOLCANO_ONLY_CONTROLLERS = frozenset({"colocation-config-controller"})
VOLCANO_METRICS_HELP = (
    "also serve every metric that has a Volcano counterpart under Volcano's name (volcano_*), "
    "so Volcano's dashboards and alerts keep working"
)
CHECK_CRDS_HELP = (
    "refuse to start when a served CRD lacks a field Caldera writes (the API server would drop "
    "it silently; Volcano's CRDs lack tasks[].volumeClaimTemplates); false: log it and start"
)


FEATURE_GATES_HELP = (
    "Volcano's feature gates, Name=true,Other=false (as Volcano's --feature-gates); "
    "SchedulingGatesQueueAdmission (default false) holds pods annotated "
    "scheduling.volcano.sh/queue-allocation-gate: true behind a scheduling gate while their "
    "queue has no room for them; turn it on in the webhook and in the scheduler"
)


class SettingsError(ValueError):
    """A setting has a value the process cannot run with; the message says which and why."""


def _check_feature_gates(text: str) -> None:
    try:
        parse_feature_gates(text)
    except FeatureGateError as exc:
        raise SettingsError(str(exc)) from None


def _opt(
    default: Any,
    help: str,
    *,
    volcano: tuple[str, ...] = (),
    seconds: bool = False,
    repeatable: bool = False,
) -> Any:
    """A setting: its default and help; ``volcano``: the flags Volcano's processes give the same
    setting, accepted as aliases; ``seconds``: a number of seconds, or a Go duration;
    ``repeatable``: the flag may be given more than once, its values joined with commas."""
    metadata = {"help": help, "volcano": volcano, "seconds": seconds, "repeatable": repeatable}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class ProcessSettings:
    """What every process needs: the API server, its endpoints, logging and leadership."""

    kubeconfig: str | None = _opt(
        None, "kubeconfig file; unset: $KUBECONFIG, then ~/.kube/config, then in-cluster"
    )
    context: str | None = _opt(None, "kubeconfig context; unset: the current context")
    kube_qps: float = _opt(
        50.0, "client-side request rate to the API server (requests/s)", volcano=KUBE_API_QPS
    )
    kube_burst: int = _opt(
        100, "requests allowed above kube_qps in a burst", volcano=KUBE_API_BURST
    )
    listen_address: str = _opt("0.0.0.0", "address of /metrics, /healthz and /readyz")  # noqa: S104
    metrics_port: int = _opt(8080, "port of /metrics, /healthz and /readyz (0: any free port)")
    log_level: str = _opt("info", "debug, info, warning or error")
    log_format: str = _opt("auto", "json, console, or auto (console on a terminal)")
    leader_elect: bool = _opt(True, "take a Lease before working, so replicas never act at once")
    leader_election_namespace: str = _opt(
        "",
        "namespace of the Lease; empty: the pod's namespace ($POD_NAMESPACE) or default",
        volcano=("--leader-elect-resource-namespace", "--lock-object-namespace"),
    )
    leader_election_id: str = _opt(
        "",
        "name of the Lease; empty: caldera-<process>",
        volcano=("--leader-elect-resource-name",),
    )
    lease_duration: float = _opt(
        15.0,
        "seconds a leader's Lease is valid without renewal",
        volcano=("--leader-elect-lease-duration",),
        seconds=True,
    )
    renew_deadline: float = _opt(
        10.0,
        "seconds after its last successful renewal that a leader stops writing and gives up "
        "leadership",
        volcano=("--leader-elect-renew-deadline",),
        seconds=True,
    )
    retry_period: float = _opt(
        2.0,
        "seconds between tries to take or renew the Lease",
        volcano=("--leader-elect-retry-period",),
        seconds=True,
    )
    startup_timeout: float = _opt(
        60.0,
        "seconds a starting process waits for an API server that does not answer (or answers "
        "403 or 5xx) before it exits with one line; long enough to ride out an API server "
        "restart instead of crash-looping into the kubelet's backoff",
        seconds=True,
    )
    shutdown_grace_period: float = _opt(
        20.0,
        "seconds to finish work in flight after SIGTERM; keep it below the pod's "
        "terminationGracePeriodSeconds (30 by default) so the kubelet never kills a clean exit",
        seconds=True,
    )

    def validate(self) -> None:
        # "not x > 0" also refuses NaN, which every comparison answers False to.
        if not self.kube_qps > 0 or self.kube_burst < 1:
            raise SettingsError(
                f"kube_qps must be a number > 0 and kube_burst >= 1 (got {self.kube_qps}, "
                f"{self.kube_burst})"
            )
        if not 0 <= self.metrics_port <= 65535:
            raise SettingsError(
                f"metrics_port {self.metrics_port} is not a TCP port: "
                "use 0 (any free port) to 65535"
            )
        if not self.startup_timeout >= 0:
            raise SettingsError("startup_timeout must be 0 or more seconds")
        if not self.shutdown_grace_period >= 0:
            raise SettingsError("shutdown_grace_period must be 0 or more seconds")
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
    """``caldera controllers``: the job, queue, podgroup, command, gc, cronjob, jobflow,
    jobtemplate, hypernode and sharding controllers."""

    controllers: tuple[str, ...] = _opt(
        (),
        "controllers to run, comma-separated, of " + ",".join(KNOWN_CONTROLLERS) + "; empty: all "
        "but sharding (off unless named, as in Volcano); Volcano's form works too: '*' for all, "
        "-name to leave one out, Volcano's names (job-controller, pg-controller, ...)",
    )
    workers: int = _opt(5, "concurrent reconciles per controller (one key is never concurrent)")
    scheduler_name: str = _opt(
        "volcano",
        "schedulerNames Caldera schedules, comma-separated (as Volcano's --scheduler-name): "
        "the podgroup controller gives their pods a PodGroup; the first is given to pods that "
        "name none",
        repeatable=True,
    )
    pvc_create_qps: float = _opt(10.0, "PVC creations per second, process-wide")
    pvc_create_burst: int = _opt(20, "PVC creations allowed above pvc_create_qps in a burst")
    max_requeue_num: int = _opt(
        15,
        "failed syncs of a Job before it is terminated (Volcano's --max-requeue-num); -1: never",
    )
    resync_period: float = _opt(
        600.0,
        "seconds between local re-deliveries of every object (insurance, no API calls)",
        seconds=True,
    )
    check_crds: bool = _opt(True, CHECK_CRDS_HELP)
    volcano_metrics: bool = _opt(False, VOLCANO_METRICS_HELP)
    network_topology_discovery: str = _opt(
        "",
        "path of Volcano's controller configuration whose networkTopologyDiscovery label "
        "source the hypernode controller runs; empty: no discovery (nodeCount is still kept)",
    )
    sharding_configmap: str = _opt(
        "volcano-sharding-configmap",
        "ConfigMap of the sharding controller's configuration (key sharding.yaml, Volcano's "
        "format)",
    )
    sharding_configmap_namespace: str = _opt(
        "",
        "namespace of sharding_configmap; empty: the controllers' own ($POD_NAMESPACE), "
        "default when unset",
    )
    queue_command_namespaces: tuple[str, ...] = _opt(
        (),
        "namespaces whose Commands may open or close any Queue without a check, "
        "comma-separated (give rights to create Commands there only to queue administrators); "
        "a queue Command elsewhere runs only if the webhook stamped its requester and a "
        "SubjectAccessReview says that requester may update the queue now; empty: the "
        "controllers' own namespace ($POD_NAMESPACE), none when unset",
    )

    def validate(self) -> None:
        super().validate()
        self.chosen_controllers  # noqa: B018 - raises SettingsError for an unknown name
        if self.workers < 1:
            raise SettingsError("workers must be at least 1")
        if not self.pvc_create_qps > 0 or self.pvc_create_burst < 1:
            raise SettingsError(
                f"pvc_create_qps must be a number > 0 and pvc_create_burst >= 1 "
                f"(got {self.pvc_create_qps}, {self.pvc_create_burst})"
            )
        if not self.resync_period >= 0:
            raise SettingsError("resync_period must be 0 (off) or more seconds")
        if not self.scheduler_names:
            raise SettingsError("scheduler_name must name at least one scheduler")

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """The names in ``scheduler_name``, in order, blanks and surrounding spaces dropped."""
        return split_names(self.scheduler_name)

    def trusted_command_namespaces(self, environ: Mapping[str, str]) -> frozenset[str]:
        """The namespaces whose queue Commands run unchecked: ``queue_command_namespaces``, or
        the pod's namespace when that is empty (none outside a pod)."""
        if self.queue_command_namespaces:
            return frozenset(self.queue_command_namespaces)
        own = environ.get("POD_NAMESPACE", "")
        return frozenset({own}) if own else frozenset()

    @property
    def chosen_controllers(self) -> tuple[str, ...]:
        """The controllers to run, by Caldera's names (empty: all), from ``controllers`` in
        Caldera's form or Volcano's (``*,-sharding-controller``, ``job-controller``)."""
        return choose_controllers(self.controllers)


def choose_controllers(requested: tuple[str, ...]) -> tuple[str, ...]:
    """Caldera's names of the controllers ``requested`` asks for, in KNOWN_CONTROLLERS order
    (empty: all but OFF_BY_DEFAULT). Volcano's form: ``*`` is every controller, ``-name``
    leaves one out, and Volcano's names are Caldera's (``pg-controller`` is ``podgroup``);
    leaving out one that only Volcano has is accepted, asking for one is not (pure)."""
    chosen: set[str] = set()
    unknown: list[str] = []
    for item in requested:
        negated = item.startswith("-")
        name = item.removeprefix("-")
        if name == "*" and not negated:
            chosen |= set(KNOWN_CONTROLLERS)
            continue
        if negated and name in VOLCANO_ONLY_CONTROLLERS:
            continue
        caldera = VOLCANO_CONTROLLERS.get(name, name)
        if caldera not in KNOWN_CONTROLLERS:
            unknown.append(item)
        elif negated:
            chosen.discard(caldera)
        else:
            chosen.add(caldera)
    if unknown:
        raise SettingsError(
            f"unknown controller {', '.join(unknown)}: choose from {','.join(KNOWN_CONTROLLERS)} "
            f"(or Volcano's {','.join(VOLCANO_CONTROLLERS)}, '*' and -name)"
        )
    if requested and not chosen:
        raise SettingsError(f"controllers {','.join(requested)} leaves no controller to run")
    if not requested:
        chosen = set(KNOWN_CONTROLLERS) - OFF_BY_DEFAULT
    return tuple(name for name in KNOWN_CONTROLLERS if name in chosen)


S = TypeVar("S", bound=ProcessSettings)


def split_names(value: str) -> tuple[str, ...]:
    """The comma-separated names of ``value``, in order, blanks and surrounding spaces dropped."""
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _env(name: str) -> str:
    return ENV_PREFIX + name.upper()


def parse_seconds(name: str, raw: str) -> float:
    """A number of seconds ("2.5") or a Go duration ("1s", "500ms", "1m30s"), as Volcano's
    duration flags take; a clear error naming the setting otherwise."""
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return parse_duration(raw.strip())
    except DurationError:
        raise SettingsError(
            f"{name}: {raw!r} is neither a number of seconds nor a Go duration (1s, 500ms, 1m30s)"
        ) from None


def _convert(name: str, annotation: Any, raw: str, *, seconds: bool = False) -> Any:
    """Turn a flag or environment string into the field's type, with a clear error."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return None if raw == "" else _convert(name, inner[0], raw)
    if seconds:
        return parse_seconds(name, raw)
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
    """One flag per field (and Volcano's flags for the same setting), with its help, its
    environment variable and its default."""
    for f in dataclasses.fields(cls):
        default = f.default
        shown = ",".join(default) if isinstance(default, tuple) else default
        notes = [f"env {_env(f.name)}", f"default {shown!r}"]
        if f.metadata.get("seconds"):
            notes.append("seconds or a Go duration")
        if f.metadata.get("repeatable"):
            notes.append("may be repeated")
        parser.add_argument(
            _flag(f.name),
            *f.metadata.get("volcano", ()),
            dest=f.name,
            default=None,
            action="append" if f.metadata.get("repeatable") else "store",
            metavar=f.name.upper(),
            help=f"{f.metadata.get('help', '')} [{'; '.join(notes)}]",
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
        if isinstance(raw, list):  # a repeatable flag given several times
            raw = ",".join(raw)
        if raw is None:
            raw = environ.get(_env(f.name))
        if isinstance(raw, str):
            seconds = bool(f.metadata.get("seconds"))
            values[f.name] = _convert(f.name, hints[f.name], raw, seconds=seconds)
        elif raw is not None:
            values[f.name] = raw
    settings = cls(**values)
    settings.validate()
    return settings


def from_command_line(cls: type[S], argv: Sequence[str], prog: str) -> S:
    """Parse ``argv`` for ``cls`` (the process entry points use this)."""
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__)
    add_arguments(parser, cls)
    return parse_settings(cls, parser.parse_args(argv), os.environ)


WEBHOOK_PATHS = (
    "/jobs/mutate",
    "/jobs/validate",
    "/queues/mutate",
    "/queues/validate",
    "/podgroups/mutate",
    "/podgroups/validate",
    "/pods/mutate",
    "/pods/validate",
    "/cronjobs/validate",
    "/jobflows/validate",
    "/hypernodes/validate",
    "/commands/mutate",
    "/commands/validate",
)


@dataclass(frozen=True, kw_only=True)
class WebhookSettings(ProcessSettings):
    """``caldera webhook``: the admission webhook (HTTPS); stateless, run as many as needed."""

    leader_elect: bool = _opt(
        False, "unused: webhook replicas are active-active, each answers on its own"
    )
    port: int = _opt(8443, "HTTPS port of the admission endpoints (0: any free port)")
    tls_cert_file: str = _opt(
        "/etc/caldera/webhook/tls.crt", "serving certificate (PEM); reloaded when it changes"
    )
    tls_key_file: str = _opt(
        "/etc/caldera/webhook/tls.key",
        "private key of the serving certificate (PEM)",
        volcano=("--tls-private-key-file",),
    )
    cert_reload_interval: float = _opt(
        10.0, "seconds between checks of the certificate files for a renewal", seconds=True
    )
    cert_secret: str = _opt(
        "",
        "Secret (namespace/name, or a name in $POD_NAMESPACE) where the webhook keeps a "
        "self-signed serving certificate it makes itself, written to --tls-cert-file and "
        "--tls-key-file; empty: those files are given",
    )
    cert_dns_names: tuple[str, ...] = _opt(
        (), "names (or IP addresses) the self-made certificate is for, comma-separated"
    )
    cert_validity_days: int = _opt(
        3650,
        "validity of the self-made CA and certificate (days); the running webhook renews them "
        "two thirds into it",
    )
    webhook_configurations: tuple[str, ...] = _opt(
        (),
        "Mutating and ValidatingWebhookConfigurations whose caBundle the webhook sets to the "
        "self-made certificate's CA, comma-separated",
    )
    scheduler_name: str = _opt(
        "volcano",
        "schedulerNames Caldera schedules, comma-separated (as Volcano's --scheduler-name): the "
        "first is given to jobs that name none; pods of any of them are validated",
        repeatable=True,
    )
    client_max_size: int = _opt(
        5 * 1024 * 1024,
        "largest AdmissionReview accepted, in bytes (5 MiB: an object of the API server's "
        "largest request body, 3 MiB, plus its stored old version, at most etcd's 1.5 MiB, "
        "plus the review's overhead); larger is refused from its Content-Length, unread",
    )
    max_connections: int = _opt(
        2000,
        "open connections (TLS handshakes included); more are closed at once, those open keep "
        "working (each costs about 60 KiB)",
    )
    max_in_flight: int = _opt(
        256, "reviews being read or decided at once; more are answered 429 without being read"
    )
    max_large_in_flight: int = _opt(
        16,
        "reviews above 64 KiB (or of unknown length) being read or decided at once; more are "
        "answered 429 (their bodies together hold at most this times client_max_size)",
    )
    header_timeout: float = _opt(
        10.0,
        "seconds for a TLS handshake, and for a request's headers from its first byte; the "
        "connection is closed when they run out",
        seconds=True,
    )
    body_timeout: float = _opt(
        10.0, "seconds for a review's body once its headers arrived (then 408)", seconds=True
    )
    idle_timeout: float = _opt(
        120.0,
        "seconds an open connection may carry no request before it is closed (longer than the "
        "API server's 90 s, so the client closes first)",
        seconds=True,
    )
    shutdown_delay: float = _opt(
        5.0,
        "seconds between SIGTERM and closing the listener: readiness is false and reviews are "
        "still answered while the Service's endpoints drop the pod",
        seconds=True,
    )
    enabled_admission: tuple[str, ...] = _opt(
        WEBHOOK_PATHS, "admission paths served, comma-separated; others answer 404"
    )
    max_queue_depth: int = _opt(5, "levels below root a queue may sit at")
    root_queue_protection: bool = _opt(
        True,
        "refuse changes to the capability, deserved and guarantee of queue root",
        volcano=("--enable-root-queue-protection",),
    )
    cache_sync_timeout: float = _opt(
        5.0,
        "seconds a request waits for the queue cache to sync after start-up before it is "
        "answered with an error (the API server's webhook timeout is 10 s by default)",
        seconds=True,
    )
    feature_gates: str = _opt("", FEATURE_GATES_HELP)

    def validate(self) -> None:
        super().validate()
        _check_feature_gates(self.feature_gates)
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"port {self.port} is not a TCP port")
        unknown = [p for p in self.enabled_admission if p not in WEBHOOK_PATHS]
        if unknown:
            raise SettingsError(
                f"unknown admission path {', '.join(unknown)}: "
                f"choose from {','.join(WEBHOOK_PATHS)}"
            )
        if not self.scheduler_names:
            raise SettingsError("scheduler_name must name at least one scheduler")
        if self.client_max_size < 64 * 1024:
            raise SettingsError("client_max_size must be at least 65536 bytes")
        for name in ("max_connections", "max_in_flight", "max_large_in_flight"):
            if getattr(self, name) < 1:
                raise SettingsError(f"{name} must be at least 1")
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            if not getattr(self, name) > 0:
                raise SettingsError(f"{name} must be a number of seconds > 0")
        if not self.shutdown_delay >= 0:
            raise SettingsError("shutdown_delay must be 0 or more seconds")
        if self.max_queue_depth < 1:
            raise SettingsError("max_queue_depth must be at least 1")
        if self.cert_reload_interval <= 0 or self.cache_sync_timeout <= 0:
            raise SettingsError("cert_reload_interval and cache_sync_timeout must be > 0")
        if self.cert_secret and not self.cert_dns_names:
            raise SettingsError(
                "cert_secret needs cert_dns_names: the names the certificate is for"
            )
        if self.cert_validity_days < 1:
            raise SettingsError("cert_validity_days must be at least 1")

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """The names in ``scheduler_name``, in order, blanks and surrounding spaces dropped."""
        return split_names(self.scheduler_name)

    @property
    def queue_admission_gates(self) -> bool:
        """Whether the SchedulingGatesQueueAdmission feature gate is on."""
        return parse_feature_gates(self.feature_gates)[SCHEDULING_GATES_QUEUE_ADMISSION]


@dataclass(frozen=True, kw_only=True)
class SchedulerSettings(ProcessSettings):
    """``caldera scheduler``: gang scheduling sessions, binding, PodGroup and Queue status."""

    kube_qps: float = _opt(
        2000.0,
        "client-side request rate to the API server (requests/s; binds are requests)",
        volcano=KUBE_API_QPS,
    )
    kube_burst: int = _opt(
        2000, "requests allowed above kube_qps in a burst", volcano=KUBE_API_BURST
    )
    scheduler_name: str = _opt(
        "volcano",
        "schedulerNames served, comma-separated (pods naming another are left alone)",
        repeatable=True,
    )
    schedule_period: float = _opt(
        1.0,
        "seconds between sessions; a session also starts early when work arrives",
        seconds=True,
    )
    scheduler_conf: str = _opt(
        "", "configuration file in Volcano's format (actions, tiers); empty: Volcano's default"
    )
    default_queue: str = _opt("default", "queue of PodGroups that name none")
    bind_workers: int = _opt(32, "binds in flight at once (and twice as many DRA claim writes)")
    check_crds: bool = _opt(True, CHECK_CRDS_HELP)
    volcano_metrics: bool = _opt(False, VOLCANO_METRICS_HELP)
    scheduler_sharding_mode: str = _opt(
        "none",
        "node sharding (Volcano's flag): none, or hard (place pods only on the nodes of the "
        "NodeShard scheduler_sharding_name that no other shard has in use); Volcano's soft is "
        "not supported",
    )
    scheduler_sharding_name: str = _opt(
        "volcano", "the NodeShard this scheduler places on in hard sharding mode"
    )
    feature_gates: str = _opt("", FEATURE_GATES_HELP)
    gate_removal_worker_num: int = _opt(
        5,
        "queue admission gates being removed at once (Volcano's; used when "
        "SchedulingGatesQueueAdmission is on)",
    )
    minimum_feasible_nodes: int = _opt(
        100,
        "Volcano's: a pod judged node by node (inter-pod affinity, topology spread) looks "
        "for at least this many fitting nodes before choosing among them; in a cluster of "
        "this many nodes or fewer, at every node",
    )
    minimum_percentage_nodes_to_find: int = _opt(
        5, "Volcano's: the least share of the nodes, in percent, such a pod looks for"
    )
    percentage_nodes_to_find: int = _opt(
        0,
        "Volcano's: the share of the nodes, in percent, such a pod looks for; 0: adaptive, "
        "50 percent less one point per 125 nodes (10 at 5,000 nodes)",
    )
    visibility: bool = _opt(
        False,
        "serve the waiting jobs' positions as the aggregated API visibility.caldera.dev "
        "(an APIService must point at visibility_port; docs/visibility.md)",
    )
    visibility_port: int = _opt(
        8443, "HTTPS port of the visibility API, for the API server only (0: any free port)"
    )
    visibility_cert_file: str = _opt(
        "/etc/caldera/visibility/tls.crt",
        "serving certificate of the visibility API (PEM), for the APIService's Service name",
    )
    visibility_key_file: str = _opt(
        "/etc/caldera/visibility/tls.key", "private key of the visibility API's certificate"
    )

    def validate(self) -> None:
        super().validate()
        if self.scheduler_sharding_mode not in ("none", "hard"):
            hint = (
                " (Volcano's soft mode is not supported)"
                if self.scheduler_sharding_mode == "soft"
                else ""
            )
            raise SettingsError(
                f"scheduler_sharding_mode {self.scheduler_sharding_mode!r}: use none or hard{hint}"
            )
        if self.scheduler_sharding_mode == "hard" and not self.scheduler_sharding_name:
            raise SettingsError("scheduler_sharding_name must name a NodeShard in hard mode")
        if not 0 <= self.visibility_port <= 65535:
            raise SettingsError("visibility_port must be a port number (0 to 65535)")
        if not self.schedule_period > 0:
            raise SettingsError("schedule_period must be a number of seconds > 0")
        if self.bind_workers < 1:
            raise SettingsError("bind_workers must be at least 1")
        if self.gate_removal_worker_num < 1:
            raise SettingsError("gate_removal_worker_num must be at least 1")
        if self.minimum_feasible_nodes < 1:
            raise SettingsError("minimum_feasible_nodes must be at least 1")
        for name in ("minimum_percentage_nodes_to_find", "percentage_nodes_to_find"):
            if not 0 <= getattr(self, name) <= 100:
                raise SettingsError(f"{name} must be a percentage (0 to 100)")
        _check_feature_gates(self.feature_gates)
        if not self.scheduler_names:
            raise SettingsError("scheduler_name must name at least one scheduler")

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """The names in ``scheduler_name``, in order, blanks and surrounding spaces dropped."""
        return split_names(self.scheduler_name)

    @property
    def queue_admission_gates(self) -> bool:
        """Whether the SchedulingGatesQueueAdmission feature gate is on."""
        return parse_feature_gates(self.feature_gates)[SCHEDULING_GATES_QUEUE_ADMISSION]
