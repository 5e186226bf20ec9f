"""Objects of a scenario as a cluster would store them: Queues and Jobs through the admission
webhook's own defaulting and validation, Queues given root as parent as the queue controller
does, and the ``root`` and ``default`` queues the scheduler creates at start when missing.

A manifest the webhook would refuse is refused here with the webhook's message, so a trace that
the simulator accepts is one the cluster would take unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import DEFAULT_QUEUE, ROOT_QUEUE, Job, Queue, QueueSpec
from controllers.queue.state import needs_root_parent
from webhooks.admission import Operation, apply_patch
from webhooks.jobs import defaulted_job, validate_job_create
from webhooks.queues import QueueRules, mutate_queue, validate_queue
from webhooks.view import StaticView

SCHEDULER_NAME = "volcano"


class AdmissionError(ValueError):
    """A manifest the admission webhook refuses; the message names the field."""


def decode(document: Mapping[str, Any], model: type[Any], where: str) -> Any:
    """``document`` as ``model``, or an `AdmissionError` naming ``where`` and the field."""
    try:
        return msgspec.convert(document, model)
    except msgspec.ValidationError as exc:
        raise AdmissionError(f"{where}: {exc}") from None


def scheduler_queues() -> tuple[Queue, Queue]:
    """``root`` and ``default`` as the scheduler creates them at start."""
    return (
        Queue(metadata=ObjectMeta(name=ROOT_QUEUE), spec=QueueSpec(weight=1, reclaimable=False)),
        Queue(
            metadata=ObjectMeta(name=DEFAULT_QUEUE),
            spec=QueueSpec(weight=1, reclaimable=True, parent=ROOT_QUEUE),
        ),
    )


def admit_queues(documents: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Queue]:
    """The queues of ``(where, manifest)`` pairs, in order, each defaulted and validated against
    those before it, plus ``root`` and ``default`` unless given."""
    admitted: dict[str, Queue] = {}
    pending = list(documents)
    given = {str(doc.get("metadata", {}).get("name", "")) for _, doc in pending}
    for queue in scheduler_queues():
        if queue.metadata.name not in given:
            admitted[queue.metadata.name] = queue
    rules = QueueRules()
    for where, document in pending:
        found: Queue = decode(document, Queue, where)
        ops = mutate_queue(found, has_spec="spec" in document)
        if ops:
            found = decode(apply_patch(dict(document), ops), Queue, where)
        if needs_root_parent(found):
            found = msgspec.structs.replace(
                found, spec=msgspec.structs.replace(found.spec, parent=ROOT_QUEUE)
            )
        name = found.metadata.name
        view = StaticView(admitted.values())
        message = validate_queue(Operation.CREATE, found, None, cluster=view, rules=rules)
        if message:
            raise AdmissionError(f"{where}: queue {name!r} is refused: {message}")
        if name in admitted:
            raise AdmissionError(f"{where}: queue {name!r} is defined twice")
        admitted[name] = found
    return list(admitted.values())


def admit_job(document: Mapping[str, Any], queues: Iterable[Queue], where: str) -> Job:
    """The Job of a manifest, defaulted as the mutating webhook does and validated as the
    validating webhook does (its queue must exist and be open)."""
    if document.get("kind", "Job") != "Job":
        raise AdmissionError(f"{where}: kind is {document.get('kind')!r}; a trace holds Jobs")
    job: Job = decode(document, Job, where)
    job = defaulted_job(job, scheduler_name=SCHEDULER_NAME)
    message = validate_job_create(job, StaticView(queues))
    if message:
        raise AdmissionError(f"{where}: job {job.metadata.name!r} is refused: {message}")
    return job
