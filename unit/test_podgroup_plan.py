"""What the podgroup controller plans for a group of pods (controllers.podgroup.plan)."""

from __future__ import annotations

import msgspec
import pytest

from caldera.api.core import Container, Pod, PodSpec, ResourceRequirements
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import PodGroup, PodGroupSpec
from controllers.podgroup.plan import (
    Owner,
    Plan,
    desired_podgroup,
    group_name,
    is_ours,
    min_member,
    min_resources,
    named_group,
    plan,
)

RS_REF = OwnerReference(
    api_version="apps/v1",
    kind="ReplicaSet",
    name="web-123",
    uid="rs-uid",
    controller=True,
    block_owner_deletion=True,
)


def _pod(
    name: str = "p",
    *,
    owner: OwnerReference | None = RS_REF,
    annotations: dict[str, str] | None = None,
    cpu: str = "500m",
    scheduler: str = "volcano",
    created: str = "2026-01-01T00:00:00Z",
    priority_class: str = "",
) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="ns",
            uid=f"{name}-uid",
            creation_timestamp=created,
            annotations=annotations or {},
            owner_references=(owner,) if owner else (),
        ),
        spec=PodSpec(
            scheduler_name=scheduler,
            priority_class_name=priority_class,
            containers=(
                Container(
                    name="c",
                    resources=ResourceRequirements(requests={"cpu": cpu, "memory": "1Gi"}),
                ),
            ),
        ),
    )


def _owner(annotations: dict[str, str] | None = None, replicas: int | None = 3) -> Owner:
    return Owner(
        api_version="apps/v1",
        kind="ReplicaSet",
        name="web-123",
        uid="rs-uid",
        annotations=annotations or {},
        replicas=replicas,
    )


def test_group_name_is_the_owner_uid_or_the_pod_uid() -> None:
    """podgroup-<controller owner uid>, or podgroup-<pod uid> for a bare pod."""
    assert group_name(_pod()) == "podgroup-rs-uid"
    assert group_name(_pod("solo", owner=None)) == "podgroup-solo-uid"
    not_controller = OwnerReference(kind="ReplicaSet", name="x", uid="x-uid", controller=False)
    assert group_name(_pod("p", owner=not_controller)) == "podgroup-p-uid"


@pytest.mark.parametrize(
    ("scheduler", "names", "ours"),
    [
        ("volcano", ("volcano",), True),
        ("kube-batch", ("volcano", "kube-batch"), True),
        ("default-scheduler", ("volcano",), False),
        ("", ("volcano",), False),
    ],
)
def test_is_ours(scheduler: str, names: tuple[str, ...], ours: bool) -> None:
    """Only pods whose schedulerName is one of Caldera's are handled."""
    assert is_ours(_pod(scheduler=scheduler), names) is ours


@pytest.mark.parametrize(
    ("annotations", "group"),
    [
        ({}, None),
        ({"scheduling.k8s.io/group-name": "g1"}, "g1"),
        ({"scheduling.volcano.sh/group-name": "g2"}, "g2"),
    ],
)
def test_named_group(annotations: dict[str, str], group: str | None) -> None:
    """A pod names its group with the Kubernetes key or Volcano's alias."""
    assert named_group(_pod(annotations=annotations)) == group


@pytest.mark.parametrize(
    ("raw", "value", "warns"),
    [(None, 1, False), ("3", 3, False), (" 2 ", 2, False), ("0", 0, False), ("-1", 1, True)],
)
def test_min_member(raw: str | None, value: int, warns: bool) -> None:
    """group-min-member defaults to 1; an unusable value falls back to 1 with a warning."""
    annotations = {"scheduling.volcano.sh/group-min-member": raw} if raw is not None else {}
    got, warning = min_member(annotations)
    assert got == value
    assert (warning is not None) is warns


def test_min_member_rejects_words() -> None:
    """A non-number min-member is reported, naming the annotation."""
    got, warning = min_member({"scheduling.volcano.sh/group-min-member": "three"})
    assert got == 1
    assert warning is not None
    assert "group-min-member" in warning


@pytest.mark.parametrize(
    ("annotation", "members", "expected", "warns"),
    [
        (None, 1, {"cpu": "500m", "memory": "1Gi"}, False),
        (None, 3, {"cpu": "1500m", "memory": "3Gi"}, False),
        ('{"cpu": "2", "nvidia.com/gpu": 1}', 3, {"cpu": "2", "nvidia.com/gpu": "1"}, False),
        ("not json", 2, {"cpu": "1", "memory": "2Gi"}, True),
        ('["cpu"]', 1, {"cpu": "500m", "memory": "1Gi"}, True),
        ('{"cpu": "lots"}', 1, {"cpu": "500m", "memory": "1Gi"}, True),
    ],
)
def test_min_resources(
    annotation: str | None, members: int, expected: dict[str, str], warns: bool
) -> None:
    """group-min-resources wins; otherwise the pod's requests times minMember."""
    annotations = (
        {"scheduling.volcano.sh/group-min-resources": annotation} if annotation is not None else {}
    )
    got, warning = min_resources(annotations, _pod(), members)
    assert got == expected
    assert (warning is not None) is warns


def test_desired_podgroup_fields() -> None:
    """The PodGroup takes minMember from the owner, queue and priority class from the pod,
    the owner's volcano.sh/ annotations and the pod's preemption keys, and the pod's owner
    reference without blockOwnerDeletion."""
    owner = _owner(
        {
            "scheduling.volcano.sh/group-min-member": "2",
            "volcano.sh/preemptable": "true",
            "volcano.sh/task-topology-affinity": "a,b",
            "other.io/key": "x",
        }
    )
    pod = _pod(
        annotations={
            "scheduling.volcano.sh/queue-name": "team-a",
            "volcano.sh/preemptable": "false",
            "volcano.sh/cooldown-time": "600s",
            "volcano.sh/not-copied-from-pod": "x",
        },
        priority_class="high",
    )
    group, warnings = desired_podgroup("podgroup-rs-uid", pod, owner)
    assert warnings == ()
    assert group.metadata.name == "podgroup-rs-uid"
    assert group.metadata.namespace == "ns"
    assert group.spec.min_member == 2
    assert group.spec.queue == "team-a"
    assert group.spec.priority_class_name == "high"
    assert group.spec.min_resources == {"cpu": "1", "memory": "2Gi"}
    assert group.status.phase == "Pending"
    assert group.metadata.annotations == {
        "volcano.sh/preemptable": "false",
        "volcano.sh/task-topology-affinity": "a,b",
        "volcano.sh/cooldown-time": "600s",
    }
    (ref,) = group.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid, ref.controller) == (
        "ReplicaSet",
        "web-123",
        "rs-uid",
        True,
    )
    assert ref.block_owner_deletion is None


def test_bare_pod_is_owned_by_itself_and_queues_default() -> None:
    """A bare pod's PodGroup is owned by the pod, in queue default, minMember from the pod."""
    pod = _pod("solo", owner=None, annotations={"scheduling.volcano.sh/group-min-member": "1"})
    group, _ = desired_podgroup("podgroup-solo-uid", pod, None)
    assert group.spec.queue == "default"
    (ref,) = group.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid) == ("v1", "Pod", "solo", "solo-uid")
    assert ref.controller is True


def _existing(
    min_member: int = 3,
    resources: dict[str, str | int | float] | None = None,
    owners: tuple[OwnerReference, ...] = (RS_REF,),
) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(
            name="podgroup-rs-uid", namespace="ns", uid="pg-uid", owner_references=owners
        ),
        spec=PodGroupSpec(
            min_member=min_member,
            min_resources=resources if resources is not None else {"cpu": "1500m", "memory": "3Gi"},
        ),
    )


THREE = {"scheduling.volcano.sh/group-min-member": "3"}
ANNOTATED = {"scheduling.k8s.io/group-name": "podgroup-rs-uid"}


def test_plan_creates_then_annotates_every_pending_pod() -> None:
    """No PodGroup yet: create it and annotate the pods that name no group."""
    pods = [_pod("a"), _pod("b"), _pod("c", annotations=ANNOTATED)]
    result = plan(name="podgroup-rs-uid", pods=pods, owner=_owner(THREE), existing=None)
    assert result.create is not None
    assert result.create.spec.min_member == 3
    assert set(result.annotate) == {"a", "b"}
    assert result.spec_patch is None
    assert not result.delete


def test_plan_is_idempotent_once_done() -> None:
    """PodGroup in place and every pod annotated: nothing to do."""
    pods = [_pod("a", annotations=ANNOTATED), _pod("b", annotations=ANNOTATED)]
    assert (
        plan(name="podgroup-rs-uid", pods=pods, owner=_owner(THREE), existing=_existing()) == Plan()
    )


def test_plan_existing_group_only_annotates() -> None:
    """A PodGroup created earlier (or by a stale read) is not created again."""
    pods = [_pod("a", annotations=ANNOTATED), _pod("new")]
    result = plan(name="podgroup-rs-uid", pods=pods, owner=_owner(THREE), existing=_existing())
    assert result == Plan(annotate=("new",))


@pytest.mark.parametrize(
    ("annotations", "patch"),
    [
        (
            {"scheduling.volcano.sh/group-min-member": "5"},
            {"minMember": 5, "minResources": {"cpu": "2500m", "memory": "5Gi"}},
        ),
        (
            {**THREE, "scheduling.volcano.sh/group-min-resources": '{"cpu": "4"}'},
            {"minResources": {"cpu": "4"}},
        ),
    ],
)
def test_plan_follows_owner_annotations(
    annotations: dict[str, str], patch: dict[str, object]
) -> None:
    """Changing the owner's group annotations updates the PodGroup's spec."""
    pods = [_pod("a", annotations=ANNOTATED)]
    result = plan(
        name="podgroup-rs-uid", pods=pods, owner=_owner(annotations), existing=_existing()
    )
    assert result.spec_patch == patch
    assert result.annotate == ()


def test_plan_equal_quantities_are_not_a_change() -> None:
    """minResources written differently but equal ("1.5" vs "1500m") is left alone."""
    pods = [_pod("a", annotations=ANNOTATED)]
    existing = _existing(resources={"cpu": "1.5", "memory": "3072Mi"})
    assert plan(name="podgroup-rs-uid", pods=pods, owner=_owner(THREE), existing=existing) == Plan()


@pytest.mark.parametrize("existing", [None, _existing()])
def test_plan_scaled_to_zero_deletes(existing: PodGroup | None) -> None:
    """An owner scaled to zero replicas loses its PodGroup (if it has one) and nothing else."""
    result = plan(
        name="podgroup-rs-uid", pods=[_pod("a")], owner=_owner(THREE, replicas=0), existing=existing
    )
    assert result == Plan(delete=existing is not None)


@pytest.mark.parametrize(
    "owners",
    [(), (msgspec.structs.replace(RS_REF, uid="someone-else"),)],
    ids=["no owner", "another owner"],
)
def test_plan_leaves_a_podgroup_its_owner_does_not_control_alone(
    owners: tuple[OwnerReference, ...],
) -> None:
    """A PodGroup of the group's name that the owner does not control (made first by someone
    else) is neither patched, joined (no pod annotated), nor deleted at scale to zero; the plan
    says why, naming it."""
    foreign = _existing(min_member=9, owners=owners)
    pods = [_pod("a")]
    result = plan(name="podgroup-rs-uid", pods=pods, owner=_owner(THREE), existing=foreign)
    assert (result.create, result.spec_patch, result.delete, result.annotate) == (
        None,
        None,
        False,
        (),
    )
    assert result.foreign.startswith("PodGroup/podgroup-rs-uid exists and is not controlled by")
    zero = plan(
        name="podgroup-rs-uid", pods=pods, owner=_owner(THREE, replicas=0), existing=foreign
    )
    assert not zero.delete


def test_plan_without_pods_does_nothing() -> None:
    """No pod to learn the group from: nothing is created or changed."""
    assert (
        plan(name="podgroup-rs-uid", pods=[], owner=_owner(THREE), existing=_existing()) == Plan()
    )
    assert plan(name="podgroup-rs-uid", pods=[], owner=_owner(THREE), existing=None) == Plan()


def test_plan_ignores_pods_of_other_groups() -> None:
    """A pod that names another group (its user chose) is neither annotated nor sampled."""
    other = _pod("x", annotations={"scheduling.k8s.io/group-name": "mine"}, cpu="8")
    result = plan(name="podgroup-rs-uid", pods=[other], owner=_owner(THREE), existing=None)
    assert result == Plan()


def test_plan_samples_the_newest_pending_pod() -> None:
    """During a rolling update the newest pod's requests size minResources."""
    old = _pod("old", cpu="1", created="2026-01-01T00:00:00Z")
    new = _pod("new", cpu="2", created="2026-01-02T00:00:00Z")
    result = plan(name="podgroup-rs-uid", pods=[old, new], owner=_owner({}), existing=None)
    assert result.create is not None
    assert result.create.spec.min_resources == {"cpu": "2", "memory": "1Gi"}


def test_plan_warnings_are_passed_on() -> None:
    """An unusable annotation still creates the PodGroup, with a warning for an Event."""
    owner = _owner({"scheduling.volcano.sh/group-min-member": "many"})
    result = plan(name="podgroup-rs-uid", pods=[_pod("a")], owner=owner, existing=None)
    assert result.create is not None
    assert result.create.spec.min_member == 1
    assert len(result.warnings) == 1


OVER = {"scheduling.volcano.sh/group-min-member": "2000000"}


def test_plan_over_the_bounds_neither_creates_nor_patches() -> None:
    """An owner whose group-min-member is over the CRD's bound gets no PodGroup, and an
    existing one is not patched to it (the API server would refuse the patch, and a refusal
    retried never ends); the pods still join the existing one; the reason names the field."""
    pods = [_pod("a", annotations=ANNOTATED), _pod("new")]
    created = plan(name="podgroup-rs-uid", pods=pods, owner=_owner(OVER), existing=None)
    assert created.create is None
    assert created.annotate == ()
    assert "spec.minMember: must be at most 10000 (got 2000000)" in created.over_limits
    assert "not created" in created.over_limits
    patched = plan(name="podgroup-rs-uid", pods=pods, owner=_owner(OVER), existing=_existing())
    assert patched.spec_patch is None
    assert patched.annotate == ("new",)
    assert "not updated" in patched.over_limits
    # Back under the bound: the patch follows and nothing is held.
    back = plan(name="podgroup-rs-uid", pods=pods, owner=_owner(THREE), existing=_existing(1))
    assert back.spec_patch == {"minMember": 3}
    assert back.over_limits == ""
