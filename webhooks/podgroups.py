"""Admission of PodGroups (Volcano's pkg/webhooks/admission/podgroups/): the queue from the
namespace annotation, and the queue and networkTopology checks. Beyond Volcano, a PodGroup's
queue must be a leaf (and not root), as a Job's must: the capacity plugin's hierarchy runs jobs
only in leaf queues.

Functions over models and a `ClusterView`. An import-linter contract keeps this module free of I/O
(docs/architecture.md).
"""

from __future__ import annotations

from caldera.api.limits import podgroup_limit_errors
from caldera.api.volcano import (
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    SCHEDULING_QUEUE_NAME_KEY,
    PodGroup,
    QueueState,
)
from webhooks.admission import PatchOp, add
from webhooks.jobs import network_topology_error
from webhooks.view import ClusterView

__all__ = ["mutate_podgroup", "validate_podgroup"]


def mutate_podgroup(
    podgroup: PodGroup, cluster: ClusterView, *, has_spec: bool = True
) -> list[PatchOp]:
    """Put a PodGroup of the default queue into its namespace's queue, when the namespace has
    the annotation `scheduling.volcano.sh/queue-name`."""
    if podgroup.spec.queue != DEFAULT_QUEUE:
        return []
    namespace = cluster.namespace(podgroup.metadata.namespace)
    if namespace is None:
        return []
    queue = namespace.metadata.annotations.get(SCHEDULING_QUEUE_NAME_KEY)
    if not queue or queue == DEFAULT_QUEUE:
        return []
    if not has_spec:
        return [add("/spec", {"queue": queue})]
    return [add("/spec/queue", queue)]


def validate_podgroup(podgroup: PodGroup, cluster: ClusterView) -> str:
    """Why a new PodGroup is refused, or "" when it is admitted."""
    bounds = podgroup_limit_errors(podgroup.spec)
    if bounds:
        return "; ".join(bounds)
    msg = ""
    name = podgroup.spec.queue
    if name:
        queue = cluster.queue(name)
        if queue is None:
            msg += (
                f' spec.queue: unable to find queue: queue.scheduling.volcano.sh "{name}" '
                "not found;"
            )
        else:
            state = queue.status.state or QueueState.OPEN.value
            children = cluster.child_queues(name)
            if state != QueueState.OPEN:
                msg += (
                    " spec.queue: can only submit PodGroup to queue with state `Open`, "
                    f"queue `{name}` status is `{state}`;"
                )
            elif name == ROOT_QUEUE:
                msg += " spec.queue: can not submit PodGroup to root queue;"
            elif children:
                # The job webhook's rule, for the PodGroups other tools create: with the
                # capacity plugin's hierarchy, only leaf queues run jobs.
                msg += (
                    f" spec.queue: can only submit PodGroup to leaf queue, queue `{name}` has "
                    f"{len(children)} child queues;"
                )
    if podgroup.spec.min_member < 0:
        msg += " spec.minMember: 'minMember' must be >= 0;"
    msg += network_topology_error("spec.networkTopology", podgroup.spec.network_topology)
    for i, sub in enumerate(podgroup.spec.sub_group_policy):
        msg += network_topology_error(
            f"spec.subGroupPolicy[{i}].networkTopology", sub.network_topology
        )
    return msg.strip()
