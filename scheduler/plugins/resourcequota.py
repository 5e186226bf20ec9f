"""resourcequota: a job is not admitted (enqueued) while its minResources would take its
namespace beyond one of its ResourceQuotas (Volcano's resourcequota plugin). Admitting it
would only let the job controller create pods the API server refuses ("exceeded quota").

For each ResourceQuota of the job's namespace, in the resources the quota limits and the job
asks for:

    used + reserved + minResources <= hard

- hard: ``status.hard``, what the quota controller enforces (``spec.hard`` before the
  controller has filled the status in); a raised quota counts once the controller has seen it;
- used: ``status.used``;
- reserved: what admitted jobs of the namespace have not created yet, which ``used`` cannot
  show: the minResources of the jobs admitted earlier in this session (Volcano's), and of the
  Inqueue jobs beyond what their live pods already request (Caldera's: the job controller
  creates an admitted job's pods a moment later, so two jobs admitted in consecutive sessions
  must not both count on the same room).

A scoped quota (``scopes`` or ``scopeSelector``: only some pods count against it) is left to
the API server: the plugin does not evaluate scopes, and holding every job back on it would
keep jobs the quota does not even cover Pending forever. Volcano applies it to every job.

Quota names are read as Kubernetes does: ``cpu`` and ``requests.cpu`` limit the same requests
(likewise memory, ephemeral-storage, hugepages and ``requests.<extended resource>``), and
``pods`` and ``count/pods`` limit the number of pods, against which a job asks for minMember.
Volcano compares names literally, so it misses ``requests.cpu``, the common form. Limits
(``limits.*``) and object counts are not compared: minResources holds requests only.

The vote is Volcano's: permit when every quota has room, reject otherwise. A permit decides
its tier (``scheduler.framework.session``), so put resourcequota in the tier of the queue gate
(proportion or capacity) and overcommit, or after it, never before it.

A refused job gets the PodGroup condition ``Unschedulable`` with reason
``ResourceQuotaExceeded`` and the quota's numbers, the Normal event ``Unschedulable`` "resource
quota insufficient, requested: ..., used: ..., limited: ..." (Volcano's words), and the wait
record's enqueue stage. Jobs without minResources are not asked (the enqueue action admits
them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from caldera.api.core import ResourceQuota
from caldera.api.meta import ResourceList, format_time
from caldera.api.quantity import QuantityError, QuantityLike
from caldera.api.resources import Resources, to_milli
from caldera.api.volcano import PodGroupCondition
from caldera.api.why import WaitStage
from scheduler.api.types import JobInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.why import amount, gate_text

REASON = "ResourceQuotaExceeded"
EVENT_PREFIX = "resource quota insufficient"
POD_COUNT = "pods"
# Standard resources whose quota may be written with or without the "requests." prefix.
_PLAIN_REQUESTS = ("cpu", "memory", "ephemeral-storage")
_LIVE = (
    TaskStatus.PENDING,
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.RELEASING,
    TaskStatus.UNKNOWN,
)


def request_name(quota_name: str) -> str | None:
    """The job-request resource a quota name limits (``pods`` for pod counts), or None when
    minResources cannot say (limits, object counts)."""
    if quota_name in (POD_COUNT, "count/pods"):
        return POD_COUNT
    if quota_name in _PLAIN_REQUESTS or quota_name.startswith("hugepages-"):
        return quota_name
    if quota_name.startswith("requests."):
        return quota_name.removeprefix("requests.")
    return None


def _milli(name: str, quantity: QuantityLike) -> int | None:
    try:
        return to_milli(name, quantity)
    except QuantityError:
        return None  # the API server never stores such a quantity; a cache oddity is skipped


def in_request_terms(listed: ResourceList) -> Resources:
    """A quota's resource list in job-request names; of two names for one resource (``cpu``
    and ``requests.cpu``) the smaller limit holds."""
    amounts: dict[str, int] = {}
    for quota_name, quantity in listed.items():
        name = request_name(quota_name)
        value = _milli(quota_name, quantity) if name is not None else None
        if name is None or value is None:
            continue
        amounts[name] = min(amounts.get(name, value), value)
    return Resources(amounts)


def job_need(job: JobInfo) -> Resources:
    """What admitting ``job`` asks of a quota: its minResources, and minMember pods."""
    return job.min_resources + Resources({POD_COUNT: job.min_available * 1000})


@dataclass(frozen=True)
class QuotaView:
    """One ResourceQuota in job-request terms."""

    name: str
    hard: Resources
    used: Resources

    @classmethod
    def of(cls, quota: ResourceQuota) -> QuotaView:
        hard = quota.status.hard or quota.spec.hard
        return cls(
            name=f"{quota.metadata.namespace}/{quota.metadata.name}",
            hard=in_request_terms(hard),
            used=in_request_terms(quota.status.used),
        )


def exceeded(view: QuotaView, reserved: Resources, need: Resources) -> Resources:
    """By how much admitting ``need`` would exceed the quota, in the resources both name."""
    return Resources(
        {
            name: view.used.get(name) + reserved.get(name) + asked - view.hard.get(name)
            for name, asked in need.items()
            if asked > 0
            and name in view.hard
            and view.used.get(name) + reserved.get(name) + asked > view.hard.get(name)
        }
    )


def _listed(amounts: Resources, names: tuple[str, ...]) -> str:
    return ", ".join(amount(name, amounts.get(name)) for name in names)


class ResourceQuotaPlugin:
    """Holds jobs at the enqueue gate while their namespace's quota has no room for them."""

    name = "resourcequota"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self._reserved: dict[str, Resources] = {}  # by namespace, computed on first use

    def on_session_open(self, ssn: Session) -> None:
        self._reserved = {}
        # Registered even without quotas: a permit decides its tier's vote (Volcano's), so
        # whether the gates of later tiers are asked must not depend on a quota existing.
        quotas: Mapping[str, tuple[ResourceQuota, ...]] = ssn.cluster.resource_quotas

        def reserved(namespace: str) -> Resources:
            found = self._reserved.get(namespace)
            if found is None:
                found = Resources.sum(
                    job_need(job).sub_clamped(_live_requests(job))
                    for job in ssn.jobs.values()
                    if job.namespace == namespace and job.phase == "Inqueue"
                )
                self._reserved[namespace] = found
            return found

        def enqueueable(job: JobInfo) -> int:
            listed = quotas.get(job.namespace)
            if not listed or job.min_resources.is_empty():
                return 1
            need = job_need(job)
            held = reserved(job.namespace)
            for quota in listed:
                if quota.spec.scopes or quota.spec.scope_selector:
                    continue  # see the module docstring
                view = QuotaView.of(quota)
                over = exceeded(view, held, need)
                if over.is_empty():
                    continue
                self._refuse(ssn, job, view, held, need, over)
                return -1
            return 1

        def enqueued(job: JobInfo) -> None:
            if job.namespace in quotas:
                self._reserved[job.namespace] = reserved(job.namespace) + job_need(job)

        ssn.add_job_enqueueable_fn(self.name, enqueueable)
        ssn.add_job_enqueued_fn(self.name, enqueued)

    @staticmethod
    def _refuse(
        ssn: Session,
        job: JobInfo,
        view: QuotaView,
        reserved: Resources,
        need: Resources,
        over: Resources,
    ) -> None:
        """The event, the condition and the wait note of a job the quota holds back."""
        names = over.names()
        event = (
            f"{EVENT_PREFIX}, requested: {_listed(need, names)}, used: "
            f"{_listed(view.used, names)}, limited: {_listed(view.hard, names)}"
        )
        ssn.record_event("PodGroup", job.namespace, job.name, "Normal", "Unschedulable", event)
        ssn.job_conditions[job.key] = PodGroupCondition(
            type="Unschedulable",
            status="True",
            last_transition_time=format_time(ssn.now),
            reason=REASON,
            message=f"{event} (ResourceQuota {view.name})",
        )
        ssn.note_wait(
            job.key,
            WaitStage.ENQUEUE,
            gate_text(
                holder=f"ResourceQuota {view.name}",
                limit=view.hard,
                allocated=view.used,
                reserved=reserved,
                need=need,
                freed_by=over,
            ),
        )

    def on_session_close(self, ssn: Session) -> None:
        self._reserved = {}


def _live_requests(job: JobInfo) -> Resources:
    """What the job's live pods request, and their count (what the quota's used shows)."""
    live = list(job.tasks_in(*_LIVE))
    return Resources.sum(t.resreq for t in live) + Resources({POD_COUNT: len(live) * 1000})
