"""What the podgroup controller does for one group of pods, decided without I/O.

Pods that no Volcano Job created, whose ``spec.schedulerName`` is one of Caldera's, and that name
no group (neither ``scheduling.k8s.io/group-name`` nor its alias ``scheduling.volcano.sh/
group-name``) get a PodGroup: one per controlling owner (``podgroup-<owner uid>``: all the pods of
a ReplicaSet, StatefulSet or batch Job gang together), or one per bare pod
(``podgroup-<pod uid>``), with the fields Volcano's pkg/controllers/podgroup/ sets. ``plan``
decides, for one group name, whether to create, update or delete the PodGroup and which pods to
annotate.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from caldera.api.core import Pod
from caldera.api.limits import podgroup_limit_errors
from caldera.api.meta import ObjectMeta, OwnerReference, ResourceList, controller_of
from caldera.api.ownership import clash_message, may_touch
from caldera.api.quantity import QuantityError
from caldera.api.resources import Resources, pod_requests
from caldera.api.volcano import (
    COOLDOWN_TIME_KEY,
    DEFAULT_QUEUE,
    GROUP_MIN_MEMBER_KEY,
    GROUP_MIN_RESOURCES_KEY,
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    KUBE_GROUP_NAME_KEY,
    PREEMPTABLE_KEY,
    REVOCABLE_ZONE_KEY,
    SCHEDULING_QUEUE_NAME_KEY,
    VOLCANO_GROUP_NAME_KEY,
    PodGroup,
    PodGroupPhase,
    PodGroupSpec,
    PodGroupStatus,
)

GROUP_PREFIX: Final = "podgroup-"
INHERITED_PREFIX: Final = "volcano.sh/"
POD_KEYS: Final = (
    PREEMPTABLE_KEY,
    COOLDOWN_TIME_KEY,
    REVOCABLE_ZONE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    JDB_MAX_UNAVAILABLE_KEY,
)
"""Pod annotations copied onto the PodGroup (after the owner's, so the pod's win)."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The pods' controlling owner, as far as the plan needs it.

    ``replicas`` is set for kinds that scale (ReplicaSet, StatefulSet) and None otherwise.
    """

    api_version: str
    kind: str
    name: str
    uid: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """The writes that bring one group in line; empty when nothing is to be done."""

    create: PodGroup | None = None
    spec_patch: Mapping[str, Any] | None = None
    delete: bool = False
    annotate: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    foreign: str = ""  # the PodGroup of the name is not the owner's: left alone, why
    # The PodGroup the owner asks for is over a bound of caldera/api/limits.py (the CRD would
    # refuse it): not created, not updated (the pods still join one that exists), why.
    over_limits: str = ""


def group_name(pod: Pod) -> str:
    """``podgroup-<uid>`` of the pod's controlling owner, or of the pod itself."""
    owner = controller_of(pod.metadata)
    return GROUP_PREFIX + (owner.uid if owner is not None else pod.metadata.uid)


def is_ours(pod: Pod, scheduler_names: Collection[str]) -> bool:
    """Whether Caldera schedules this pod: its schedulerName is one of ``scheduler_names``."""
    return pod.spec.scheduler_name in scheduler_names


def named_group(pod: Pod) -> str | None:
    """The group the pod already names, if any."""
    annotations = pod.metadata.annotations
    return annotations.get(KUBE_GROUP_NAME_KEY) or annotations.get(VOLCANO_GROUP_NAME_KEY)


def min_member(annotations: Mapping[str, str]) -> tuple[int, str | None]:
    """``scheduling.volcano.sh/group-min-member`` (default 1), and a warning when unusable."""
    raw = annotations.get(GROUP_MIN_MEMBER_KEY)
    if raw is None:
        return 1, None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        return 1, f"{GROUP_MIN_MEMBER_KEY}={raw!r} is not a whole number >= 0; using 1"
    return value, None


def min_resources(
    annotations: Mapping[str, str], pod: Pod, members: int
) -> tuple[ResourceList | None, str | None]:
    """``scheduling.volcano.sh/group-min-resources`` (a JSON resource list), else the pod's
    requests times ``members``; and a warning when the annotation or a request is unusable."""
    raw = annotations.get(GROUP_MIN_RESOURCES_KEY)
    warning = None
    if raw is not None:
        try:
            parsed = json.loads(raw)
            if not isinstance(parsed, dict):
                raise TypeError("not a JSON object")
            return dict(Resources.from_list(parsed).to_list()), None
        except (ValueError, TypeError, QuantityError) as err:
            warning = (
                f"{GROUP_MIN_RESOURCES_KEY} is not a resource list such as "
                f'{{"cpu": "2", "memory": "4Gi"}} ({err}); using the pod\'s requests'
            )
    try:
        requests = pod_requests(msgspec.to_builtins(pod.spec))
    except QuantityError as err:
        return None, f"pod {pod.metadata.name}: {err}"
    total = requests.multiply(members)
    listed: ResourceList = dict(total.to_list())
    return (listed or None), warning


def desired_podgroup(name: str, pod: Pod, owner: Owner | None) -> tuple[PodGroup, tuple[str, ...]]:
    """The PodGroup for ``pod`` and its ``owner`` (None for a bare pod), and any warnings."""
    source = owner.annotations if owner is not None else pod.metadata.annotations
    members, member_warning = min_member(source)
    resources, resource_warning = min_resources(source, pod, members)
    annotations = {k: v for k, v in source.items() if k.startswith(INHERITED_PREFIX)}
    annotations.update(
        {k: pod.metadata.annotations[k] for k in POD_KEYS if k in pod.metadata.annotations}
    )
    if owner is not None:
        # The pod's own references (the owner as controller); blockOwnerDeletion is dropped: it
        # needs permission on the owner's finalizers and buys nothing for a PodGroup.
        refs = tuple(
            msgspec.structs.replace(ref, block_owner_deletion=None)
            for ref in pod.metadata.owner_references
        )
    else:
        refs = (
            OwnerReference(
                api_version=pod.api_version,
                kind=pod.kind,
                name=pod.metadata.name,
                uid=pod.metadata.uid,
                controller=True,
            ),
        )
    group = PodGroup(
        metadata=ObjectMeta(
            name=name,
            namespace=pod.metadata.namespace,
            annotations=annotations,
            owner_references=refs,
        ),
        spec=PodGroupSpec(
            min_member=members,
            queue=pod.metadata.annotations.get(SCHEDULING_QUEUE_NAME_KEY) or DEFAULT_QUEUE,
            priority_class_name=pod.spec.priority_class_name,
            min_resources=resources,
        ),
        status=PodGroupStatus(phase=PodGroupPhase.PENDING),
    )
    warnings = tuple(w for w in (member_warning, resource_warning) if w)
    return group, warnings


def _same_resources(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    try:
        return Resources.from_list(a or {}) == Resources.from_list(b or {})
    except QuantityError:
        return False


def _newest_first(pod: Pod) -> tuple[str, str]:
    return (pod.metadata.creation_timestamp or "", pod.metadata.name)


def plan(*, name: str, pods: Sequence[Pod], owner: Owner | None, existing: PodGroup | None) -> Plan:
    """The writes for group ``name``.

    ``pods`` are the live pods of the group that Caldera schedules; those that name no group yet
    are annotated. ``owner`` is their controlling owner (None: a bare pod, or an owner kind the
    controller does not read). ``existing`` is the PodGroup of that name, if any.

    - An owner scaled to zero replicas has its PodGroup deleted.
    - A missing PodGroup is created when a pod still needs one.
    - An existing one follows its owner: minMember and minResources are updated when the owner's
      annotations (or the pods' requests) change.
    - An existing one the owner (or the bare pod) does not control is never patched, deleted or
      joined: ``foreign`` says why.
    - One the owner's annotations would put over a bound of ``caldera.api.limits`` (e.g.
      group-min-member 2000000) is neither created nor patched (the API server would refuse
      it, and a retried refusal never ends): ``over_limits`` says why.
    """
    if owner is not None and owner.replicas == 0:
        return Plan(delete=existing is not None and may_touch(existing.metadata, owner.uid))
    members = [p for p in pods if named_group(p) in (None, name)]
    pending = sorted(
        (p for p in members if named_group(p) is None), key=_newest_first, reverse=True
    )
    sample = pending[0] if pending else max(members, key=_newest_first, default=None)
    if sample is None:
        return Plan()
    desired, warnings = desired_podgroup(name, sample, owner)
    controller = controller_of(desired.metadata)
    if existing is not None and (
        controller is None or not may_touch(existing.metadata, controller.uid)
    ):
        who = f"{controller.kind} {controller.name}" if controller else "its pods' owner"
        return Plan(foreign=clash_message("PodGroup", name, who))
    annotate = tuple(p.metadata.name for p in pending)
    over = podgroup_limit_errors(desired.spec)
    if over:
        action = "not created" if existing is None else "not updated"
        over_limits = (
            f"PodGroup {name}: {'; '.join(over)} (from the owner's annotations): the PodGroup "
            f"is {action} until they ask for less"
        )
        if existing is None:
            return Plan(warnings=warnings, over_limits=over_limits)
        return Plan(annotate=annotate, warnings=warnings, over_limits=over_limits)
    if existing is None:
        if not pending:
            return Plan(warnings=warnings)
        return Plan(create=desired, annotate=annotate, warnings=warnings)
    patch: dict[str, Any] = {}
    if existing.spec.min_member != desired.spec.min_member:
        patch["minMember"] = desired.spec.min_member
    if not _same_resources(existing.spec.min_resources, desired.spec.min_resources):
        patch["minResources"] = desired.spec.min_resources
    return Plan(spec_patch=patch or None, annotate=annotate, warnings=warnings)
