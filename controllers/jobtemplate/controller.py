"""The jobtemplate controller: keeps each JobTemplate's ``status.jobDependsOnList``, the Jobs
created from it, as Volcano's pkg/controllers/jobtemplate does.

Keys are JobTemplate keys. A template is queued when it is added or changed and when a Job
labelled as created from it (``volcano.sh/createdByJobTemplate``; the Jobs are indexed by it)
is added, changed or deleted. A reconcile reads the cache, asks
``controllers.jobtemplate.plan`` for the status and, when it differs, PUTs the status
subresource with the cached resourceVersion (a 409 is retried from a fresh read).
"""

from __future__ import annotations

import contextlib
from typing import Final

import msgspec

from caldera.api.flow import JobTemplate
from caldera.api.kinds import JOB, JOBTEMPLATE
from caldera.kube.errors import NotFound
from controllers.jobtemplate.plan import created_from, template_status
from controllers.runtime import Controller, Result, enqueue_keys
from informers.store import HandlerFuncs

BY_TEMPLATE: Final = "jobtemplate-controller/jobs-by-template"


class JobTemplateController(Controller):
    """Lists in each JobTemplate's status the Jobs created from it."""

    name = "jobtemplate"

    def setup(self) -> None:
        self.templates = self.ctx.informers.informer(JOBTEMPLATE)
        self.jobs = self.ctx.informers.informer(JOB)
        self.jobs.add_indexer(BY_TEMPLATE, lambda j: [k] if (k := created_from(j)) else [])
        on_template: HandlerFuncs[JobTemplate] = HandlerFuncs(
            add=self.enqueue, update=lambda _old, new: self.enqueue(new)
        )
        self.templates.add_handler(on_template)
        self.jobs.add_handler(enqueue_keys(self.queue, created_from))

    async def reconcile(self, key: str) -> Result | None:
        template = self.templates.store.get(key)
        if template is None or template.metadata.deletion_timestamp:
            return None
        status = template_status(template, self.jobs.store.by_index(BY_TEMPLATE, key))
        if status is None:
            return None
        body = msgspec.structs.replace(template, status=status)
        with contextlib.suppress(NotFound):  # deleted meanwhile
            await self.ctx.client.update_status(
                JOBTEMPLATE, body, namespace=template.metadata.namespace
            )
        return None
