"""extender: Volcano's HTTP scheduler extender (pkg/scheduler/plugins/extender).

The plugin asks an outside service, by POSTing JSON to ``<extender.urlPrefix>/<verb>``, for the
callbacks whose verb the configuration names:

- `extender.predicateVerb` (predicate): `{"task", "node"}` answered `{"status": "<why not>",
  "code"}`; the task fits when `status` is "";
- `extender.prioritizeVerb` (node order): `{"task", "nodes"}` answered `{"nodeScore": {node:
  score}, "errorMessage"}`;
- `extender.preemptableVerb`, `extender.reclaimableVerb`: `{"evictor", "evictees"}` answered
  `{"status": 1 permit / 0 abstain / -1 reject, "victims": [task]}`;
- `extender.jobEnqueueableVerb`: `{"job"}` answered `{"status": 1/0/-1}`;
- `extender.jobReadyVerb`: `{"job"}` answered `{"status": true/false}`;
- `extender.queueOverusedVerb`: `{"queue"}` answered `{"overused": true/false}`;
- `extender.jobEnqueuedVerb` (`{"job"}`) and `extender.onSessionCloseVerb` (`{}`): told only.

Tasks, nodes, jobs and queues are encoded with the field names of Volcano's Go structs
(`UID`, `Name`, `Resreq: {"MilliCPU", "Memory", "ScalarResources"}`, `Pod`, ...), holding what
Caldera's snapshot has of them (`encode_task`, `encode_node`, ...). With
`extender.managedResources` set, only tasks requesting (or limited in) one of those resources
are sent; the others pass. A prioritize answer is asked once per task for every node of the
session and then read per node.

Failure (no answer in `extender.httpTimeout`, default 1s, at most 10s; a status other than 200;
a body that is no JSON object; the session's `extender.sessionBudget` spent, Caldera's argument,
default 5s, at most 60s): with `extender.ignorable: true` the callback has no effect (fits, no
score, permits); otherwise it refuses (no fit, rejects, overused), as Volcano's. Unlike Volcano, the
first failure ends the plugin's calls for the session: every later callback answers as failed
at once, so an unreachable extender costs one timeout per session, not one per pod and node
(Volcano waits for each). `extender.onSessionOpenVerb` (Volcano sends the whole session) and the
`allocateFuncVerb`/`deallocateFuncVerb` event handlers are not supported: naming them is an
error, not a silent no-op.

With the plugin configured, every period runs a session (as in Volcano): the extender may answer
differently though nothing in the cluster changed, so no session is skipped as quiet.

The plugin does no I/O itself: it is given a `Transport` (``scheduler.extender_http`` in the
scheduler process; a test passes its own).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from caldera.api.duration import DurationError, parse_duration
from caldera.api.resources import Resources
from scheduler.api.types import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = [
    "MAX_HTTP_TIMEOUT",
    "ExtenderConfig",
    "ExtenderError",
    "ExtenderPlugin",
    "Transport",
    "encode_job",
    "encode_node",
    "encode_queue",
    "encode_task",
    "parse_config",
]

PREFIX: Final = "extender."
DEFAULT_HTTP_TIMEOUT: Final = 1.0
# A bound on one call: a session waits for at most this long on an extender that never answers.
MAX_HTTP_TIMEOUT: Final = 10.0
# What one session may spend in extender calls in all (Caldera's `extender.sessionBudget`).
DEFAULT_SESSION_BUDGET: Final = 5.0
MAX_SESSION_BUDGET: Final = 60.0

PERMIT: Final = 1
ABSTAIN: Final = 0
REJECT: Final = -1

_VERBS: Final = (
    "predicateVerb",
    "prioritizeVerb",
    "preemptableVerb",
    "reclaimableVerb",
    "queueOverusedVerb",
    "jobEnqueueableVerb",
    "jobEnqueuedVerb",
    "jobReadyVerb",
    "onSessionCloseVerb",
)
_UNSUPPORTED: Final = ("onSessionOpenVerb", "allocateFuncVerb", "deallocateFuncVerb")
_OTHERS: Final = ("urlPrefix", "httpTimeout", "ignorable", "managedResources", "sessionBudget")
_VERB_SHAPE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~-]*(/[A-Za-z0-9][A-Za-z0-9._~-]*)*")

# Volcano's TaskStatus values (a bit each, pkg/scheduler/api/types.go).
_STATUS_CODE: Final = {
    TaskStatus.PENDING: 1,
    TaskStatus.ALLOCATED: 2,
    TaskStatus.PIPELINED: 4,
    TaskStatus.BINDING: 8,
    TaskStatus.BOUND: 16,
    TaskStatus.RUNNING: 32,
    TaskStatus.RELEASING: 64,
    TaskStatus.SUCCEEDED: 128,
    TaskStatus.FAILED: 256,
    TaskStatus.UNKNOWN: 512,
}


class ExtenderError(Exception):
    """A call that got no usable answer (unreachable, timed out, not 200, not JSON)."""


# POSTs the body (JSON) to ``<urlPrefix>/<verb>`` and returns the answer's body; raises
# `ExtenderError` on any failure, within the configuration's timeout.
Transport = Callable[[str, bytes], bytes]


TransportFactory = Callable[["ExtenderConfig"], Transport]


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """The plugin's arguments (Volcano's keys without the `extender.` prefix)."""

    url_prefix: str
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    session_budget: float = DEFAULT_SESSION_BUDGET
    ignorable: bool = False
    managed_resources: frozenset[str] = frozenset()
    verbs: Mapping[str, str] = field(default_factory=dict)

    def verb(self, name: str) -> str:
        """The verb configured for `name` (e.g. `predicateVerb`), or ""."""
        return self.verbs.get(name, "")


def parse_config(args: Arguments) -> ExtenderConfig:
    """The configuration from the plugin's arguments; a ValueError names the key for an
    unknown key, an unsupported verb, a URL that is not http(s), a verb that is not a path, a
    timeout that is no Go duration or outside (0, 10s]."""
    name = args.plugin
    for key in args.raw:
        short = key.removeprefix(PREFIX)
        if not key.startswith(PREFIX) or short not in (*_VERBS, *_UNSUPPORTED, *_OTHERS):
            raise ValueError(f"plugin {name}: unknown argument {key}")
        if short in _UNSUPPORTED and args.raw[key]:
            raise ValueError(f"plugin {name}: argument {key} is not supported by Caldera")
    url = args.string(PREFIX + "urlPrefix", "")
    if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", url):
        raise ValueError(
            f"plugin {name}: argument {PREFIX}urlPrefix must be an http:// or https:// URL, "
            f"got {url!r}"
        )
    timeout = _duration(args, "httpTimeout", DEFAULT_HTTP_TIMEOUT, MAX_HTTP_TIMEOUT)
    budget = _duration(args, "sessionBudget", DEFAULT_SESSION_BUDGET, MAX_SESSION_BUDGET)
    verbs: dict[str, str] = {}
    for verb in _VERBS:
        value = args.string(PREFIX + verb, "")
        if value and not _VERB_SHAPE.fullmatch(value):
            raise ValueError(
                f"plugin {name}: argument {PREFIX}{verb} must be a URL path (letters, digits, "
                f"'.', '_', '~', '-' and '/'), got {value!r}"
            )
        if value:
            verbs[verb] = value
    managed = args.raw.get(PREFIX + "managedResources", [])
    if isinstance(managed, str):
        managed = [m.strip() for m in managed.split(",") if m.strip()]
    if not isinstance(managed, list) or not all(isinstance(m, str) for m in managed):
        raise ValueError(
            f"plugin {name}: argument {PREFIX}managedResources must be a list of resource "
            f"names, got {managed!r}"
        )
    return ExtenderConfig(
        url_prefix=url,
        http_timeout=timeout,
        session_budget=budget,
        ignorable=args.boolean(PREFIX + "ignorable", False),
        managed_resources=frozenset(managed),
        verbs=verbs,
    )


def _duration(args: Arguments, key: str, default: float, most: float) -> float:
    text = args.string(PREFIX + key, "")
    if not text:
        return default
    try:
        value = parse_duration(text)
    except DurationError as exc:
        raise ValueError(f"plugin {args.plugin}: argument {PREFIX}{key}: {exc}") from None
    if not 0 < value <= most:
        raise ValueError(
            f"plugin {args.plugin}: argument {PREFIX}{key} must be more than 0 and at most "
            f"{most:g}s, got {text}"
        )
    return value


# --- the wire: Volcano's Go field names ----------------------------------------------------


def encode_resources(res: Resources) -> dict[str, Any]:
    """Volcano's Resource: MilliCPU, Memory (bytes), ScalarResources (milli units)."""
    scalars = {n: float(v) for n, v in res.items() if n not in ("cpu", "memory")}
    return {
        "MilliCPU": float(res.get("cpu")),
        "Memory": res.get("memory") / 1000,
        "ScalarResources": scalars or None,
        "MaxTaskNum": 0,
    }


def encode_task(task: TaskInfo) -> dict[str, Any]:
    """A TaskInfo as Volcano's (the fields Caldera's snapshot holds)."""
    return {
        "UID": task.uid,
        "Job": task.job,
        "Name": task.name,
        "Namespace": task.namespace,
        "TaskRole": task.role,
        "Resreq": encode_resources(task.resreq),
        "InitResreq": encode_resources(task.init_resreq),
        "NodeName": task.node_name,
        "Status": _STATUS_CODE[task.status],
        "Priority": task.priority,
        "Preemptable": task.preemptable,
        "BestEffort": task.best_effort,
        "Pod": msgspec.to_builtins(task.pod) if task.pod is not None else None,
    }


def encode_node(node: NodeInfo) -> dict[str, Any]:
    """A NodeInfo as Volcano's, without its tasks (their keys in `TaskKeys`)."""
    idle = node.allocatable.sub_clamped(node.used)
    return {
        "Name": node.name,
        "Node": msgspec.to_builtins(node.node) if node.node is not None else None,
        "State": {"Phase": 1 if node.ready and not node.unschedulable else 2, "Reason": ""},
        "Releasing": encode_resources(node.releasing),
        "Pipelined": encode_resources(node.pipelined),
        "Idle": encode_resources(idle),
        "Used": encode_resources(node.used),
        "Allocatable": encode_resources(node.allocatable),
        "Capacity": encode_resources(node.allocatable),
        "TaskKeys": sorted(node.tasks),
    }


def encode_job(job: JobInfo) -> dict[str, Any]:
    """A JobInfo as Volcano's, its tasks by UID."""
    return {
        "UID": job.key,
        "Name": job.name,
        "Namespace": job.namespace,
        "Queue": job.queue,
        "Priority": job.priority,
        "MinAvailable": job.min_available,
        "TaskMinAvailable": dict(job.min_task_member),
        "Allocated": encode_resources(job.allocated),
        "TotalRequest": encode_resources(Resources.sum(t.resreq for t in job.tasks.values())),
        "Preemptable": job.preemptable,
        "PodGroup": msgspec.to_builtins(job.podgroup) if job.podgroup is not None else None,
        "Tasks": {uid: encode_task(t) for uid, t in job.tasks.items()},
    }


def encode_queue(queue: QueueInfo) -> dict[str, Any]:
    """A QueueInfo as Volcano's."""
    return {
        "UID": queue.name,
        "Name": queue.name,
        "Weight": queue.weight,
        "Priority": queue.priority,
        "Parent": queue.parent,
        "Queue": msgspec.to_builtins(queue.queue) if queue.queue is not None else None,
    }


def _requests_any(task: TaskInfo, names: frozenset[str]) -> bool:
    pod = task.pod
    if pod is None:
        return any(n in names for n in task.init_resreq.names())
    for container in (*pod.spec.containers, *pod.spec.init_containers):
        resources = container.resources
        if any(n in names for n in resources.requests) or any(n in names for n in resources.limits):
            return True
    return False


# --- the plugin ------------------------------------------------------------------------------


class ExtenderPlugin:
    """Volcano's extender: callbacks answered by an HTTP service (see the module doc)."""

    name = "extender"

    def __init__(self, args: Arguments, transport: TransportFactory | None = None) -> None:
        self.config = parse_config(args)
        self._transport = transport(self.config) if transport is not None else None
        # The first failed call ends this session's calls (see the module doc).
        self.failure: str = ""
        self._scores: dict[str, dict[str, float] | None] = {}

    def interested(self, task: TaskInfo) -> bool:
        """Whether the extender manages a resource of the task (always, without a list)."""
        managed = self.config.managed_resources
        return not managed or _requests_any(task, managed)

    def call(self, verb: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """The extender's answer, or None when the call failed (or an earlier one did)."""
        if self.failure:
            return None
        if self._transport is None:
            self.failure = "no transport to the extender"
            return None
        try:
            raw = self._transport(verb, json.dumps(payload, separators=(",", ":")).encode())
            answer = json.loads(raw) if raw.strip() else {}
        except (ExtenderError, ValueError) as exc:
            self.failure = f"extender {verb}: {exc}"
            return None
        if not isinstance(answer, dict):
            self.failure = f"extender {verb}: the answer is not a JSON object"
            return None
        return answer

    def on_session_open(self, ssn: Session) -> None:
        cfg = self.config
        if cfg.verb("predicateVerb"):
            ssn.add_predicate_fn(self.name, self._predicate(cfg.verb("predicateVerb")))
        if cfg.verb("prioritizeVerb"):
            nodes = ssn.nodes
            ssn.add_node_order_fn(self.name, self._node_order(cfg.verb("prioritizeVerb"), nodes))
        if cfg.verb("preemptableVerb"):
            ssn.add_preemptable_fn(self.name, self._victims(cfg.verb("preemptableVerb")))
        if cfg.verb("reclaimableVerb"):
            ssn.add_reclaimable_fn(self.name, self._victims(cfg.verb("reclaimableVerb")))
        if cfg.verb("jobEnqueueableVerb"):
            ssn.add_job_enqueueable_fn(self.name, self._enqueueable(cfg.verb("jobEnqueueableVerb")))
        if cfg.verb("jobEnqueuedVerb"):
            verb = cfg.verb("jobEnqueuedVerb")
            ssn.add_job_enqueued_fn(
                self.name, lambda job: self._tell(verb, {"job": encode_job(job)})
            )
        if cfg.verb("jobReadyVerb"):
            ssn.add_job_ready_fn(self.name, self._job_ready(cfg.verb("jobReadyVerb")))
        if cfg.verb("queueOverusedVerb"):
            ssn.add_overused_fn(self.name, self._overused(cfg.verb("queueOverusedVerb")))

    def on_session_close(self, ssn: Session) -> None:
        verb = self.config.verb("onSessionCloseVerb")
        if verb:
            self._tell(verb, {})
        # The extender's answers may change at any moment: the next period's session runs even
        # if nothing in the cluster changed (``scheduler.quiet`` would skip it otherwise).
        ssn.result.revisit(0)

    def _tell(self, verb: str, payload: Mapping[str, Any]) -> None:
        self.call(verb, payload)  # a notification: its answer and failure change nothing

    def _predicate(self, verb: str) -> Callable[[TaskInfo, NodeInfo], str | None]:
        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            if not self.interested(task):
                return None
            answer = self.call(verb, {"task": encode_task(task), "node": encode_node(node)})
            if answer is None:
                return None if self.config.ignorable else self.failure
            status = answer.get("status")
            return str(status) if status else None

        return predicate

    def _node_order(
        self, verb: str, nodes: Mapping[str, NodeInfo]
    ) -> Callable[[TaskInfo, NodeInfo], float]:
        def node_order(task: TaskInfo, node: NodeInfo) -> float:
            if not self.interested(task):
                return 0.0
            if task.uid not in self._scores:
                self._scores[task.uid] = self._prioritize(verb, task, nodes)
            scores = self._scores[task.uid]
            return scores.get(node.name, 0.0) if scores else 0.0

        return node_order

    def _prioritize(
        self, verb: str, task: TaskInfo, nodes: Mapping[str, NodeInfo]
    ) -> dict[str, float] | None:
        payload = {"task": encode_task(task), "nodes": [encode_node(n) for n in nodes.values()]}
        answer = self.call(verb, payload)
        if answer is None or answer.get("errorMessage"):
            return None  # Volcano: the batch scorer's error leaves the scores out
        raw = answer.get("nodeScore")
        if not isinstance(raw, dict):
            return None
        scores: dict[str, float] = {}
        for name, value in raw.items():
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if numeric and math.isfinite(value):
                scores[str(name)] = float(value)
        return scores

    def _victims(self, verb: str) -> Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]:
        def victims(evictor: TaskInfo, evictees: Sequence[TaskInfo]) -> list[TaskInfo]:
            if not self.interested(evictor):
                return list(evictees)  # abstains: no narrower than the candidates
            payload = {
                "evictor": encode_task(evictor),
                "evictees": [encode_task(t) for t in evictees],
            }
            answer = self.call(verb, payload)
            if answer is None:
                return list(evictees) if self.config.ignorable else []
            status = answer.get("status")
            if status == REJECT:
                return []
            if status == ABSTAIN:
                return list(evictees)
            chosen = {v.get("UID") for v in answer.get("victims") or () if isinstance(v, dict)}
            return [t for t in evictees if t.uid in chosen]

        return victims

    def _enqueueable(self, verb: str) -> Callable[[JobInfo], int]:
        def enqueueable(job: JobInfo) -> int:
            answer = self.call(verb, {"job": encode_job(job)})
            if answer is None:
                return PERMIT if self.config.ignorable else REJECT
            status = answer.get("status")
            return status if status in (PERMIT, ABSTAIN, REJECT) else ABSTAIN

        return enqueueable

    def _job_ready(self, verb: str) -> Callable[[JobInfo], bool]:
        def ready(job: JobInfo) -> bool:
            answer = self.call(verb, {"job": encode_job(job)})
            if answer is None:
                return self.config.ignorable
            return answer.get("status") is True

        return ready

    def _overused(self, verb: str) -> Callable[[QueueInfo], bool]:
        def overused(queue: QueueInfo) -> bool:
            answer = self.call(verb, {"queue": encode_queue(queue)})
            if answer is None:
                return not self.config.ignorable
            return answer.get("overused") is True

        return overused
