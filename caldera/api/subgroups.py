"""Which sub-group of a PodGroup's ``subGroupPolicy`` (Volcano v1.14) a pod belongs to (pure).

Volcano's ``getSubJobMatchValues`` (pkg/scheduler/api/sub_job_info.go): a policy takes the pods
its ``labelSelector`` matches and groups them by the values of its ``matchLabelKeys``; a pod
missing a key (or with an empty value), and every pod of a policy without ``matchLabelKeys``,
is in none of its sub-groups. Shared by the scheduler (``scheduler.api.subgroups``) and
``caldera job view``.
"""

from __future__ import annotations

from collections.abc import Mapping

from caldera.api.selectors import matches
from caldera.api.volcano import SubGroupPolicy

__all__ = ["group_key"]


def group_key(policy: SubGroupPolicy, labels: Mapping[str, str]) -> tuple[str, ...] | None:
    """The pod's match values under ``policy``, None when the policy does not group it."""
    if policy.label_selector is not None and not matches(policy.label_selector, labels):
        return None
    if not policy.match_label_keys:
        return None
    values = []
    for key in policy.match_label_keys:
        value = labels.get(key, "")
        if not value:
            return None
        values.append(value)
    return tuple(values)
