"""From request bytes to response bytes: routing an AdmissionReview to the rules of its path.

`Admission.review(path, content_type, body)` is the whole admission decision, synchronous and
without I/O: it checks the content type, decodes the review and the object with the model of the
path's kind, calls the pure mutate/validate functions of `webhooks.jobs`, `cronjobs`, `jobflows`,
`queues`, `podgroups`, `pods` and `hypernodes` with a `ClusterView`, and encodes the answer. The
aiohttp server only reads the body, calls it, and writes what it returns; tests and the benchmark
call it directly.

One path needs an answer from the API server: /commands/validate asks, for a Command that opens
or closes a Queue, whether the requester may update that queue (`webhooks.commands`). Its rule
returns a `Question` instead of a verdict; `review_async` sends the question with the function it
is given and decides from the answer, and the server calls that. `review` stays synchronous for
every other path, and answers such a question with an error (no one to ask).

Failure modes, none of which raises:
- not JSON, a wrong content type, an empty body, no `request`: an errored AdmissionReview;
  HTTP 200 carrying the request's uid when the uid can be read at all (a refusal even under
  ``failurePolicy: Ignore``), HTTP 400 only when it cannot;
- an object of another kind than the path's, an unknown path: HTTP 200, refused with code 400;
- an object whose fields have the wrong type (`replicas: "three"`): refused (403) with a message
  naming the field, as the API server's schema validation would;
- a bug in a rule: refused with code 500 and a generic message carrying an error id, the
  traceback logged under that id (never the exception's text to the client), never a crashed
  connection.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import msgspec
import structlog

from caldera.api.authz import SubjectAccessReview, SubjectAccessReviewStatus
from caldera.api.core import POD_DECODER
from caldera.api.flow import JOBFLOW_DECODER, JobFlow
from caldera.api.topology import HYPERNODE_DECODER
from caldera.api.volcano import (
    COMMAND_DECODER,
    CRONJOB_DECODER,
    JOB_DECODER,
    PODGROUP_DECODER,
    QUEUE_DECODER,
    CronJob,
    PodGroup,
)
from webhooks.admission import (
    PRESENCE_DECODER,
    REVIEW_DECODER,
    AdmissionRequest,
    Operation,
    Verdict,
    encode_response,
)
from webhooks.commands import (
    Question,
    mutate_command,
    validate_command_create,
    validate_command_update,
)
from webhooks.cronjobs import validate_cronjob
from webhooks.hypernodes import validate_hypernode
from webhooks.jobflows import review_jobflow
from webhooks.jobs import mutate_job, validate_job_create, validate_job_update
from webhooks.podgroups import mutate_podgroup, validate_podgroup
from webhooks.pods import mutate_pod, validate_pod
from webhooks.queues import QueueRules, mutate_queue, validate_queue
from webhooks.view import ClusterView

__all__ = [
    "AccessCheck",
    "Admission",
    "AdmissionOptions",
    "Answer",
    "Pending",
    "decode_response",
    "internal_error",
    "review_uid",
]

T = TypeVar("T")
log = structlog.get_logger("webhook")

_MSGSPEC_PATH: Final = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Answer:
    """What to send back: HTTP status and body, plus the labels of the request's metrics."""

    status: int
    body: bytes
    operation: str
    result: str


@dataclass(frozen=True, slots=True)
class AdmissionOptions:
    """The settings the rules read."""

    scheduler_names: tuple[str, ...] = ("volcano",)
    queue_rules: QueueRules = field(default_factory=QueueRules)
    queue_admission_gates: bool = False  # the SchedulingGatesQueueAdmission feature gate


def _type_error_message(exc: Exception, what: str) -> str:
    """A msgspec error as `field: problem` (`spec.tasks[0].replicas: Expected int, got str`)."""
    match = _MSGSPEC_PATH.match(str(exc))
    text = str(exc)
    if match is not None and match["path"] is not None:
        path = match["path"].lstrip(".") or what
        return f"{path}: {match['msg']}"
    return f"{what}: {text}"


class _BadObjectError(Exception):
    """The object in the review does not decode as its kind; the message names the field."""


def _decode(decoder: msgspec.json.Decoder[T], raw: msgspec.Raw | None, what: str) -> T:
    if raw is None:
        raise _BadObjectError(f"{what}: Required value: the AdmissionReview carries no {what}")
    try:
        return decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        raise _BadObjectError(_type_error_message(exc, what)) from None


def _has_spec(raw: msgspec.Raw | None) -> bool:
    if raw is None:
        return False
    try:
        return len(PRESENCE_DECODER.decode(raw).spec) > 0
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return False


N = TypeVar("N", CronJob, PodGroup, JobFlow)


def _with_namespace(obj: N, req: AdmissionRequest) -> N:
    """``obj`` with the request's namespace when its own metadata has none (a create through a
    namespaced URL whose body names no namespace)."""
    if obj.metadata.namespace or not req.namespace:
        return obj
    meta = msgspec.structs.replace(obj.metadata, namespace=req.namespace)
    return msgspec.structs.replace(obj, metadata=meta)


def _verdict(message: str) -> Verdict:
    return Verdict.deny(message) if message else Verdict.allow()


Rule = Callable[[AdmissionRequest], "Verdict | Question"]
AccessCheck = Callable[[SubjectAccessReview], Awaitable[SubjectAccessReviewStatus]]
"""Sends a SubjectAccessReview to the API server and returns its status (the server's edge)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A request whose verdict waits for the answer to `question`."""

    path: str
    uid: str
    operation: str
    question: Question


@dataclass(frozen=True, slots=True)
class _Route:
    group: str
    kind: str
    rule: Rule


class Admission:
    """The admission rules of every path, over one `ClusterView`."""

    def __init__(
        self,
        cluster: ClusterView,
        options: AdmissionOptions,
        *,
        paths: tuple[str, ...] | None = None,  # None: every path
    ) -> None:
        self.cluster = cluster
        self.options = options
        routes = {
            "/jobs/mutate": _Route("batch.volcano.sh", "Job", self._mutate_job),
            "/jobs/validate": _Route("batch.volcano.sh", "Job", self._validate_job),
            "/queues/mutate": _Route("scheduling.volcano.sh", "Queue", self._mutate_queue),
            "/queues/validate": _Route("scheduling.volcano.sh", "Queue", self._validate_queue),
            "/podgroups/mutate": _Route("scheduling.volcano.sh", "PodGroup", self._mutate_pg),
            "/podgroups/validate": _Route("scheduling.volcano.sh", "PodGroup", self._validate_pg),
            "/pods/mutate": _Route("", "Pod", self._mutate_pod),
            "/pods/validate": _Route("", "Pod", self._validate_pod),
            "/cronjobs/validate": _Route("batch.volcano.sh", "CronJob", self._validate_cronjob),
            "/jobflows/validate": _Route("flow.volcano.sh", "JobFlow", self._validate_jobflow),
            "/hypernodes/validate": _Route(
                "topology.volcano.sh", "HyperNode", self._validate_hypernode
            ),
            "/commands/mutate": _Route("bus.volcano.sh", "Command", self._mutate_command),
            "/commands/validate": _Route("bus.volcano.sh", "Command", self._validate_command),
        }
        self.routes = {p: r for p, r in routes.items() if paths is None or p in paths}

    # --- the rules of each path -----------------------------------------------------------------

    def _mutate_job(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        job = _decode(JOB_DECODER, req.raw_object, "object")
        return Verdict.allow(mutate_job(job, scheduler_name=self.options.scheduler_names[0]))

    def _validate_job(self, req: AdmissionRequest) -> Verdict:
        if req.operation == Operation.CREATE:
            return _verdict(
                validate_job_create(_decode(JOB_DECODER, req.raw_object, "object"), self.cluster)
            )
        if req.operation == Operation.UPDATE:
            new = _decode(JOB_DECODER, req.raw_object, "object")
            old = _decode(JOB_DECODER, req.raw_old_object, "oldObject")
            return _verdict(validate_job_update(old, new))
        return Verdict.allow()

    def _mutate_queue(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        queue = _decode(QUEUE_DECODER, req.raw_object, "object")
        return Verdict.allow(mutate_queue(queue, has_spec=_has_spec(req.raw_object)))

    def _validate_queue(self, req: AdmissionRequest) -> Verdict:
        new = old = None
        if req.operation in (Operation.CREATE, Operation.UPDATE):
            new = _decode(QUEUE_DECODER, req.raw_object, "object")
        if req.operation in (Operation.UPDATE, Operation.DELETE):
            if req.raw_old_object is None and req.operation == Operation.DELETE:
                # Old API servers sent no oldObject on DELETE; the cache has the queue.
                old = self.cluster.queue(req.name)
            else:
                old = _decode(QUEUE_DECODER, req.raw_old_object, "oldObject")
        rules = self.options.queue_rules
        return _verdict(validate_queue(req.operation, new, old, cluster=self.cluster, rules=rules))

    def _mutate_pg(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        pg = _with_namespace(_decode(PODGROUP_DECODER, req.raw_object, "object"), req)
        return Verdict.allow(mutate_podgroup(pg, self.cluster, has_spec=_has_spec(req.raw_object)))

    def _validate_pg(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        return _verdict(
            validate_podgroup(_decode(PODGROUP_DECODER, req.raw_object, "object"), self.cluster)
        )

    def _mutate_pod(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        pod = _decode(POD_DECODER, req.raw_object, "object")
        options = self.options
        gates = options.queue_admission_gates
        return Verdict.allow(mutate_pod(pod, options.scheduler_names, queue_admission_gates=gates))

    def _validate_pod(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        pod = _decode(POD_DECODER, req.raw_object, "object")
        return _verdict(validate_pod(pod, self.options.scheduler_names))

    def _validate_cronjob(self, req: AdmissionRequest) -> Verdict:
        if req.operation not in (Operation.CREATE, Operation.UPDATE):
            return Verdict.allow()
        cronjob = _with_namespace(_decode(CRONJOB_DECODER, req.raw_object, "object"), req)
        return _verdict(validate_cronjob(cronjob, scheduler_name=self.options.scheduler_names[0]))

    def _validate_jobflow(self, req: AdmissionRequest) -> Verdict:
        if req.operation not in (Operation.CREATE, Operation.UPDATE):
            return Verdict.allow()
        jobflow = _with_namespace(_decode(JOBFLOW_DECODER, req.raw_object, "object"), req)
        review = review_jobflow(jobflow)
        if review.message:
            return Verdict.deny(review.message)
        return Verdict.allow(warnings=review.warnings)

    def _validate_hypernode(self, req: AdmissionRequest) -> Verdict:
        if req.operation not in (Operation.CREATE, Operation.UPDATE):
            return Verdict.allow()
        hypernode = _decode(HYPERNODE_DECODER, req.raw_object, "object")
        return _verdict(validate_hypernode(hypernode, self.cluster))

    def _mutate_command(self, req: AdmissionRequest) -> Verdict:
        if req.operation != Operation.CREATE:
            return Verdict.allow()
        command = _decode(COMMAND_DECODER, req.raw_object, "object")
        return Verdict.allow(mutate_command(command, req.user_info))

    def _validate_command(self, req: AdmissionRequest) -> Verdict | Question:
        if req.operation == Operation.CREATE:
            command = _decode(COMMAND_DECODER, req.raw_object, "object")
            return validate_command_create(command, req.user_info)
        if req.operation == Operation.UPDATE:
            new = _decode(COMMAND_DECODER, req.raw_object, "object")
            old = _decode(COMMAND_DECODER, req.raw_old_object, "oldObject")
            return _verdict(validate_command_update(old, new))
        return Verdict.allow()

    # --- the protocol ---------------------------------------------------------------------------

    def review(self, path: str, content_type: str, body: bytes) -> Answer:
        """Answer one AdmissionReview POSTed to `path`; never raises. A request that needs an
        access check is refused here (code 500): `review_async` is the one that can ask."""
        step = self.begin(path, content_type, body)
        if isinstance(step, Answer):
            return step
        message = f"{path} needs an access check and no API server to ask"
        return self.finish(step, Verdict(False, message=message, code=500))

    async def review_async(
        self, path: str, content_type: str, body: bytes, ask: AccessCheck
    ) -> Answer:
        """Answer one AdmissionReview, asking the API server with ``ask`` when a rule needs
        it; never raises (a failed question refuses with code 500, the details logged)."""
        step = self.begin(path, content_type, body)
        if isinstance(step, Answer):
            return step
        try:
            status = await ask(step.question.review)
        except Exception:
            log.exception("access check failed", path=path, uid=step.uid)
            message = (
                f"the webhook could not ask the API server whether {step.question.about}; try again"
            )
            return self.finish(step, Verdict(False, message=message, code=500))
        return self.finish(step, self._decided(step, status))

    @staticmethod
    def _decided(step: Pending, status: SubjectAccessReviewStatus) -> Verdict:
        try:
            return step.question.decide(status)
        except Exception:  # a bug in a rule must cost one refusal, not the server
            return internal_error(step.path, step.uid)

    @staticmethod
    def finish(step: Pending, verdict: Verdict) -> Answer:
        """The answer to a pending request, once decided."""
        return Answer(200, encode_response(step.uid, verdict), step.operation, verdict.result)

    def begin(self, path: str, content_type: str, body: bytes) -> Answer | Pending:
        """The answer to a request, or what it waits for (see `review_async`)."""
        if content_type != "application/json":
            return self._bad(f"expected Content-Type application/json, got {content_type!r}", body)
        if not body:
            return self._bad("the request body is empty: expected an AdmissionReview")
        try:
            review = REVIEW_DECODER.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
            return self._bad(
                "the body is not an AdmissionReview: " + _type_error_message(exc, "review"), body
            )
        req = review.request
        if req is None:
            return self._bad("the AdmissionReview has no request")
        route = self.routes.get(path)
        if route is None:
            verdict = Verdict.errored(f"no admission rules are served at {path}")
        elif (req.kind.group, req.kind.kind) != (route.group, route.kind):
            got = f"{req.kind.group}/{req.kind.kind}" if req.kind.group else req.kind.kind
            want = f"{route.group}/{route.kind}" if route.group else route.kind
            verdict = Verdict.errored(
                f"{path} admits {want} objects, not {got or 'an unknown kind'}"
            )
        else:
            try:
                outcome = route.rule(req)
                if isinstance(outcome, Question):
                    return Pending(path, req.uid, req.operation or "-", outcome)
                verdict = outcome
            except _BadObjectError as exc:
                verdict = Verdict.deny(str(exc))
            except Exception:  # a bug in a rule must cost one refusal, not the server
                verdict = internal_error(path, req.uid)
        return Answer(200, encode_response(req.uid, verdict), req.operation or "-", verdict.result)

    @staticmethod
    def _bad(message: str, body: bytes = b"") -> Answer:
        """An unreadable review: refused with its uid when the uid can be read at all (HTTP 200,
        so even ``failurePolicy: Ignore`` refuses it); HTTP 400 only when it cannot (the API
        server then applies the failure policy: no answer can name the request)."""
        uid = review_uid(body)
        status = 200 if uid else 400
        return Answer(status, encode_response(uid, Verdict.errored(message)), "-", "error")


class _UidRequest(msgspec.Struct, frozen=True):
    uid: str = ""


class _UidReview(msgspec.Struct, frozen=True):
    request: _UidRequest | None = None


_UID_DECODER: Final = msgspec.json.Decoder(_UidReview)


def review_uid(body: bytes) -> str:
    """The ``request.uid`` of a review when it can be read (whatever else is wrong), or ""."""
    try:
        review = _UID_DECODER.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return ""
    return review.request.uid if review.request is not None else ""


def internal_error(path: str, uid: str) -> Verdict:
    """A refusal for a bug on the webhook's side: the client sees a generic message and an id;
    the log has the traceback under that id (called inside the ``except`` block)."""
    error_id = uuid.uuid4().hex[:12]
    log.exception("admission rule failed", path=path, uid=uid, error_id=error_id)
    return Verdict(
        False,
        message=f"internal error in {path} (error id {error_id}; the webhook's log has details)",
        code=500,
    )


def decode_response(body: bytes) -> dict[str, Any]:
    """The `response` of an encoded AdmissionReview (tests and the benchmark read it)."""
    decoded: dict[str, Any] = msgspec.json.decode(body)["response"]
    return decoded
