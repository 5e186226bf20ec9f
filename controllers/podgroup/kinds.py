"""The workload kinds that own pods, as the podgroup controller reads them.

Minimal views (metadata and replica counts only): these objects belong to Kubernetes, so Caldera
only reads them and never writes them back. Kept here rather than in ``caldera.api`` because only
this controller needs them.
"""

from __future__ import annotations

from typing import Any, Final

from caldera.api.kinds import KindInfo
from caldera.api.meta import Int32, Model, ObjectMeta, type_meta


class ReplicasSpec(Model, frozen=True):
    """The one spec field read from ReplicaSets and StatefulSets."""

    replicas: Int32 | None = None  # the API server defaults it to 1


class ReplicaSet(Model, frozen=True):
    """apps/v1 ReplicaSet (partial)."""

    api_version: str = type_meta("apps/v1")
    kind: str = type_meta("ReplicaSet")
    metadata: ObjectMeta = ObjectMeta()
    spec: ReplicasSpec = ReplicasSpec()


class StatefulSet(Model, frozen=True):
    """apps/v1 StatefulSet (partial)."""

    api_version: str = type_meta("apps/v1")
    kind: str = type_meta("StatefulSet")
    metadata: ObjectMeta = ObjectMeta()
    spec: ReplicasSpec = ReplicasSpec()


class DaemonSet(Model, frozen=True):
    """apps/v1 DaemonSet (metadata only)."""

    api_version: str = type_meta("apps/v1")
    kind: str = type_meta("DaemonSet")
    metadata: ObjectMeta = ObjectMeta()


class BatchJob(Model, frozen=True):
    """batch/v1 Job (metadata only; not Volcano's Job)."""

    api_version: str = type_meta("batch/v1")
    kind: str = type_meta("Job")
    metadata: ObjectMeta = ObjectMeta()


REPLICASET: Final = KindInfo("ReplicaSet", "apps", "v1", "replicasets", True, ReplicaSet, ("rs",))
STATEFULSET: Final = KindInfo(
    "StatefulSet", "apps", "v1", "statefulsets", True, StatefulSet, ("sts",)
)
DAEMONSET: Final = KindInfo("DaemonSet", "apps", "v1", "daemonsets", True, DaemonSet, ("ds",))
BATCH_JOB: Final = KindInfo("Job", "batch", "v1", "jobs", True, BatchJob)

OWNER_KINDS: Final[tuple[KindInfo[Any], ...]] = (REPLICASET, STATEFULSET, DAEMONSET, BATCH_JOB)
"""Owners whose ``volcano.sh/`` annotations and group settings the PodGroup inherits."""
