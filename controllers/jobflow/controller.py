"""The jobflow controller: runs the Jobs of ``flow.volcano.sh/v1alpha1`` JobFlows in dependency
order, as Volcano's pkg/controllers/jobflow does.

Keys are JobFlow keys. A JobFlow is queued when it changes, when a Job it controls changes (the
Jobs are indexed by their controller reference, kind JobFlow), when any other Job under one of
its flows' names comes or goes (the JobFlows are indexed by those names), and when a JobTemplate
one of its flows names is created, changed or deleted (the JobFlows are indexed by the templates
they name), so a flow waiting for a template, or for another's Job of its name to go, starts
when it can. A reconcile reads the cache,
asks ``controllers.jobflow.plan`` what to do at ``ctx.clock()`` and writes, in this order:

1. Jobs of a succeeded flow with ``jobRetainPolicy: delete`` are deleted (UID precondition,
   background propagation; ``Deleted`` Events);
2. the Jobs whose targets have completed are created (``Created``, Volcano's Event). A create
   answering 409 reads the Job found: its own after a stale cache read (the name is
   deterministic), or another's, left alone with a ``ForeignJob`` Warning naming it; only Jobs
   whose controller reference carries the JobFlow's UID are counted or deleted. A create the
   API server or a webhook refuses (400, 403, 422) is a ``FailedCreate`` Warning and is not
   retried: it would be refused again until the template or the flow changes, and either change
   queues the flow. Any other failure is retried with backoff;
3. the status is written with a PUT of the status subresource carrying the cached
   resourceVersion, so a status computed from a stale JobFlow is refused (409) and recomputed.
   Once it is written, a flow that reached Succeed or Failed is counted
   (``caldera_jobflow_<phase>_phase_count``) and told (``Succeeded`` / ``Failed`` Events).

Nothing is polled: every change the plan depends on is an informer event.
"""

from __future__ import annotations

from typing import Final

import msgspec

from caldera.api.flow import (
    CREATED_BY_JOB_TEMPLATE_KEY,
    FLOW_API_VERSION,
    JobFlow,
    JobTemplate,
    flow_job_name,
)
from caldera.api.kinds import JOB, JOBFLOW, JOBTEMPLATE, reference
from caldera.api.meta import ObjectReference
from caldera.api.volcano import Job
from caldera.kube.errors import AlreadyExists, ApiError, NotFound
from controllers.jobflow.metrics import JobFlowMetrics
from controllers.jobflow.plan import Plan, controlled_by, flow_job_keys, foreign_job, plan
from controllers.runtime import Controller, Result, controller_key, delete_child, enqueue_keys
from informers.store import HandlerFuncs

BY_JOBFLOW: Final = "jobflow-controller/jobs-by-jobflow"
BY_TEMPLATE: Final = "jobflow-controller/jobflows-by-template"
BY_FLOW_JOB: Final = "jobflow-controller/jobflows-by-flow-job"
# Refusals a retry cannot overcome: a webhook's or the API server's verdict on the Job (a bad
# request, a webhook's or RBAC's no, an invalid object).
_REFUSED: Final = frozenset({400, 403, 422})


def _owner_key(job: Job) -> str | None:
    return controller_key(job.metadata, "JobFlow", FLOW_API_VERSION)


def _template_keys(jobflow: JobFlow) -> list[str]:
    return sorted({f"{jobflow.metadata.namespace}/{f.name}" for f in jobflow.spec.flows})


class JobFlowController(Controller):
    """Creates the Jobs of JobFlows in dependency order and keeps their status."""

    name = "jobflow"

    def setup(self) -> None:
        self.jobflows = self.ctx.informers.informer(JOBFLOW)
        self.templates = self.ctx.informers.informer(JOBTEMPLATE)
        self.jobs = self.ctx.informers.informer(JOB)
        self.metrics = JobFlowMetrics(self.ctx.registry)
        self.jobs.add_indexer(BY_JOBFLOW, lambda j: [k] if (k := _owner_key(j)) else [])
        self.jobflows.add_indexer(BY_TEMPLATE, _template_keys)
        self.jobflows.add_indexer(BY_FLOW_JOB, flow_job_keys)
        on_jobflow: HandlerFuncs[JobFlow] = HandlerFuncs(
            add=self.enqueue, update=lambda _old, new: self.enqueue(new), delete=self.enqueue
        )
        on_template: HandlerFuncs[JobTemplate] = HandlerFuncs(
            add=self._template_changed,
            update=lambda _old, new: self._template_changed(new),
            delete=self._template_changed,
        )
        self.jobflows.add_handler(on_jobflow)
        on_namesake: HandlerFuncs[Job] = HandlerFuncs(
            add=self._namesake_changed, delete=self._namesake_changed
        )
        self.jobs.add_handler(enqueue_keys(self.queue, _owner_key))
        self.jobs.add_handler(on_namesake)
        self.templates.add_handler(on_template)

    def _namesake_changed(self, job: Job) -> None:
        """A Job under a flow's name came or went: another's going lets the flow start it."""
        if _owner_key(job) is not None:
            return  # a JobFlow's own: queued by its owner already
        key = f"{job.metadata.namespace}/{job.metadata.name}"
        for jobflow in self.jobflows.store.by_index(BY_FLOW_JOB, key):
            self.enqueue(jobflow)

    def _template_changed(self, template: JobTemplate) -> None:
        key = f"{template.metadata.namespace}/{template.metadata.name}"
        for jobflow in self.jobflows.store.by_index(BY_TEMPLATE, key):
            self.enqueue(jobflow)

    def _inputs(self, jobflow: JobFlow, key: str) -> tuple[list[Job], dict[str, JobTemplate]]:
        """The Jobs the plan reads (the flow's own and any under a flow's name) and the
        JobTemplates its flows name."""
        namespace, name = jobflow.metadata.namespace, jobflow.metadata.name
        jobs = {j.metadata.uid: j for j in self.jobs.store.by_index(BY_JOBFLOW, key)}
        templates: dict[str, JobTemplate] = {}
        for flow in jobflow.spec.flows:
            job = self.jobs.store.get(f"{namespace}/{flow_job_name(name, flow.name)}")
            if job is not None:
                jobs[job.metadata.uid] = job
            template = self.templates.store.get(f"{namespace}/{flow.name}")
            if template is not None:
                templates[flow.name] = template
        return list(jobs.values()), templates

    async def reconcile(self, key: str) -> Result | None:
        jobflow = self.jobflows.store.get(key)
        if jobflow is None or jobflow.metadata.deletion_timestamp:
            return None  # the garbage collector deletes its Jobs (owner references)
        jobs, templates = self._inputs(jobflow, key)
        todo = plan(jobflow, jobs, templates, self.ctx.clock())
        involved = reference(JOBFLOW, jobflow.metadata)
        for note in todo.notes:
            self.ctx.recorder.record(involved, note.type, note.reason, note.message)
        for job in todo.delete:
            await self._delete(job, involved)
        for job in todo.create:
            await self._create(jobflow, job, involved)
        if todo.status is not None:
            await self._write_status(jobflow, todo, involved)
        return None

    async def _create(self, jobflow: JobFlow, job: Job, involved: ObjectReference) -> None:
        name, namespace = job.metadata.name, job.metadata.namespace
        try:
            await self.ctx.client.create(JOB, job, namespace=namespace)
        except AlreadyExists:
            # Ours, created before the cache saw it; or another's, left alone and told.
            try:
                found = await self.ctx.client.get(JOB, name, namespace=namespace)
            except NotFound:
                raise RuntimeError(f"job {namespace}/{name} vanished after a conflict") from None
            if not controlled_by(found, jobflow):
                flow = job.metadata.labels.get(CREATED_BY_JOB_TEMPLATE_KEY, "")
                note = foreign_job(name, flow.partition(".")[2])
                self.ctx.recorder.record(involved, note.type, note.reason, note.message)
            return
        except ApiError as exc:
            if exc.status not in _REFUSED:
                raise
            self.ctx.recorder.record(
                involved, "Warning", "FailedCreate", f"failed to create job {name}: {exc.message}"
            )
            self.log.warning("job refused; waiting for the flow or template to change", job=name)
            return
        self.ctx.recorder.record(involved, "Normal", "Created", f"create a job named {name}!")
        self.log.info("created job", job=name)

    async def _delete(self, job: Job, involved: ObjectReference) -> None:
        name = job.metadata.name
        try:
            deleted = await delete_child(self.ctx.client, JOB, job.metadata)
        except ApiError as exc:
            self.ctx.recorder.record(
                involved, "Warning", "FailedDelete", f"failed to delete job {name}: {exc.message}"
            )
            raise
        if not deleted:
            return  # gone, or another Job of that name now: not this one to delete
        self.ctx.recorder.record(
            involved,
            "Normal",
            "Deleted",
            f"deleted job {name}: the flow succeeded and its jobRetainPolicy is delete",
        )

    async def _write_status(self, jobflow: JobFlow, todo: Plan, involved: ObjectReference) -> None:
        body = msgspec.structs.replace(jobflow, status=todo.status)
        try:
            await self.ctx.client.update_status(JOBFLOW, body, namespace=jobflow.metadata.namespace)
        except NotFound:
            return  # deleted meanwhile
        if todo.transition is not None:
            self.metrics.reached(todo.transition.phase, jobflow.metadata.namespace)
            note = todo.transition.note
            self.ctx.recorder.record(involved, note.type, note.reason, note.message)
            self.log.info("jobflow finished", phase=todo.transition.phase)
