"""Only the leading scheduler answers the visibility API: its pod carries ``LEADER_LABEL``.

Standby replicas run no session and have no order to serve, so the chart's Service selects the
scheduler pods that carry the label, and a scheduler labels its own pod when it becomes the
leader and takes the label off at start (a restarted container keeps its pod, and the pod its
labels). The pod is named by ``POD_NAME`` and ``POD_NAMESPACE`` (the chart's downward API);
outside a pod nothing is labelled. A failed write is logged, never fatal: the positions are a
view, scheduling goes on without them.
"""

from __future__ import annotations

import os

import structlog

from caldera.api.kinds import POD
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, Forbidden, NotFound

LEADER_LABEL = "scheduling.caldera.dev/visibility-leader"
log = structlog.get_logger("visibility")


async def mark_own_pod(client: KubeClient, *, leading: bool) -> bool:
    """Put the label on the scheduler's pod (``leading``) or take it off; True if written."""
    name, namespace = os.environ.get("POD_NAME", ""), os.environ.get("POD_NAMESPACE", "")
    if not name or not namespace:
        return False
    patch = {"metadata": {"labels": {LEADER_LABEL: "true" if leading else None}}}
    try:
        await client.patch(POD, name, patch, namespace=namespace)
    except NotFound:
        return False
    except Forbidden:
        # One replica: the chart's Service needs no label and grants no right to set it.
        log.debug("not allowed to label the scheduler's pod", leading=leading)
        return False
    except (ApiError, ApiConnectionError, TimeoutError) as exc:
        log.warning("cannot label the scheduler's pod", leading=leading, error=str(exc))
        return False
    return True
