"""The pending-positions API, ``visibility.caldera.dev/v1alpha1``: its wire models and paths.

The scheduler serves the order in which it will serve waiting jobs as an aggregated API (an
APIService in front of the scheduler process, as Kueue's ``visibility.kueue.x-k8s.io``): the API
server authenticates every read and checks RBAC before it proxies it. Paths under
``/apis/visibility.caldera.dev/v1alpha1``:

- ``namespaces/<ns>/pendingjobs`` (list) and ``namespaces/<ns>/pendingjobs/<podgroup>`` (get):
  the namespace's waiting jobs; RBAC on ``pendingjobs`` in that namespace decides who reads it;
- ``pendingjobs``: every namespace's, for those RBAC lets list ``pendingjobs`` cluster-wide;
- ``queues/<queue>/pendingjobs``: one queue's waiting jobs in order, RBAC on the
  ``queues/pendingjobs`` subresource; jobs of namespaces the user may not list ``pendingjobs``
  in are shown without their namespace, names and wait record (``PendingJob.hidden``).

A ``PendingJob`` is a job whose gang is not placed (PodGroup phase Pending, Inqueue or
Unknown) as the scheduler's last session left it. Positions count from 1; the position in the
queue is the queue's job order, the position in the cluster queue order then job order, the
order in which the enqueue action admits (docs/visibility.md). Shared by the scheduler
(server), the CLI and the dashboard (clients).
"""

from __future__ import annotations

from typing import Final

import msgspec

from caldera.api.meta import ListMeta, Model, ObjectMeta, type_meta
from caldera.api.why import WaitRecord

GROUP: Final = "visibility.caldera.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
ROOT: Final = f"/apis/{API_VERSION}"
RESOURCE: Final = "pendingjobs"
DEFAULT_LIMIT: Final = 1000
MAX_LIMIT: Final = 5000
"""Most entries one response carries (``limit``); ``offset`` pages further."""


class PendingJob(Model, frozen=True):
    """A waiting job and where it stands. ``metadata`` is the PodGroup's name, namespace and
    creation time."""

    api_version: str = type_meta(API_VERSION)
    kind: str = type_meta("PendingJob")
    metadata: ObjectMeta = ObjectMeta()
    job: str = ""  # the Volcano Job owning the PodGroup, if any
    pod_group: str = ""
    queue: str = ""
    position_in_queue: int = 0  # from 1
    position_in_cluster: int = 0  # from 1
    priority: int = 0
    phase: str = ""  # the PodGroup's phase: Pending, Inqueue or Unknown
    waiting_for: WaitRecord | None = None  # the scheduler's why record (caldera job why)
    waiting_since: str = ""  # RFC 3339
    hidden: bool = False  # another namespace's job the reader may not see: names left out


class PendingJobList(Model, frozen=True):
    """Waiting jobs in order (queue position for a queue, cluster position otherwise)."""

    api_version: str = type_meta(API_VERSION)
    kind: str = type_meta("PendingJobList")
    metadata: ListMeta = ListMeta()
    items: tuple[PendingJob, ...] = ()
    observed_at: str = ""  # RFC 3339: the end of the session whose order this is
    total: int = 0  # entries before ``offset``/``limit`` were applied


def queue_path(queue: str) -> str:
    return f"{ROOT}/queues/{queue}/{RESOURCE}"


def namespace_path(namespace: str, name: str = "") -> str:
    path = f"{ROOT}/namespaces/{namespace}/{RESOURCE}"
    return f"{path}/{name}" if name else path


PENDING_JOB_DECODER: Final = msgspec.json.Decoder(PendingJob)
PENDING_JOB_LIST_DECODER: Final = msgspec.json.Decoder(PendingJobList)
