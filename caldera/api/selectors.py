"""metav1.LabelSelector matching, as ``metav1.LabelSelectorAsSelector`` then ``Matches`` do it.

A selector matches a label set when every ``matchLabels`` pair is present and every
``matchExpressions`` requirement holds (In, NotIn, Exists, DoesNotExist). A requirement
Kubernetes would refuse (an unknown operator, In or NotIn without values, Exists or DoesNotExist
with values) makes the whole selector match nothing, as a selector that fails to convert matches
nothing for the callers that skip it (the PodDisruptionBudget readers do). ``None`` and the
empty selector are told apart by the caller (``is_empty``): the scheduler's pdb plugin, as
Volcano's, lets them cover no pod.
"""

from __future__ import annotations

from collections.abc import Mapping

from caldera.api.meta import LabelSelector, LabelSelectorRequirement

__all__ = ["is_empty", "matches"]


def is_empty(selector: LabelSelector | None) -> bool:
    """No selector, or one without labels and expressions."""
    return selector is None or not (selector.match_labels or selector.match_expressions)


def _valid(req: LabelSelectorRequirement) -> bool:
    if req.operator in ("In", "NotIn"):
        return bool(req.values)
    if req.operator in ("Exists", "DoesNotExist"):
        return not req.values
    return False


def _holds(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    return value is None  # DoesNotExist


def matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector`` (an empty selector matches everything here;
    see the module docstring for who treats it otherwise)."""
    if not all(_valid(req) for req in selector.match_expressions):
        return False
    if any(labels.get(key) != value for key, value in selector.match_labels.items()):
        return False
    return all(_holds(req, labels) for req in selector.match_expressions)
