"""The podgroup controller: a PodGroup for the pods of Deployments, StatefulSets, batch Jobs and
bare pods that Caldera schedules, so that they are scheduled as gangs like Volcano Jobs.

Keys are the PodGroups' own keys, "namespace/podgroup-<uid>": every pod Caldera schedules is
indexed under the group it belongs to (its controlling owner's UID, or its own), so a reconcile
sees the whole group at once and decides with ``controllers.podgroup.plan``. A pod that names no
group queues its group's key; an owner change (replicas, annotations) queues the key of the
PodGroup that owner already has.

Writes, in an order that never lets the scheduler see a pod naming a missing group: create the
PodGroup (on 409 the group is planned again once the cache has the PodGroup found: the
owner's after a stale cache read, else left alone with a Warning), then PATCH the pods'
``scheduling.k8s.io/group-name`` annotation (pods are not ours: never PUT). A PodGroup the
owner's annotations would put over a bound of ``caldera.api.limits`` is neither created nor
patched, and told once per change; a create or patch the API server refuses as invalid is told
and not retried. The PodGroup carries the owner's reference, so Kubernetes' garbage collector
removes it with its owner; an owner scaled to zero gets its PodGroup deleted at once.
"""

from __future__ import annotations

from typing import Any, Final

from caldera.api.core import Pod
from caldera.api.kinds import POD, PODGROUP
from caldera.api.meta import ObjectReference, OwnerReference, controller_of
from caldera.api.volcano import KUBE_GROUP_NAME_KEY, PodGroup
from caldera.kube.errors import AlreadyExists, Conflict, Invalid, NotFound
from controllers.podgroup.kinds import OWNER_KINDS, ReplicaSet, StatefulSet
from controllers.podgroup.plan import (
    GROUP_PREFIX,
    Owner,
    group_name,
    is_ours,
    named_group,
    plan,
)
from controllers.runtime import Controller, Result, TerminalError
from informers.factory import SharedInformer
from informers.store import HandlerFuncs, KubeObject, split_key

BY_GROUP: Final = "podgroup-controller/pods-by-group"
OWNER_CACHE_WAIT: Final = 2.0
"""Seconds to wait for an owner the cache has not seen yet (its pods can arrive first)."""
CONFLICT_WAIT: Final = 0.5
"""Seconds before a group whose create met an existing PodGroup is planned again from the
cache (the plan checks whose it is)."""
OVER_LIMITS_REMEMBERED: Final = 4096
"""PodGroups held over a bound whose Warning was told (so that it is told once per change)."""


def _group_key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{group_name(pod)}"


class PodGroupController(Controller):
    """Creates, updates and deletes the PodGroups of pods that no Volcano Job created."""

    name = "podgroup"

    def setup(self) -> None:
        self.scheduler_names = frozenset(self.ctx.settings.scheduler_names)
        self._over_limits: dict[str, str] = {}  # PodGroup key -> the Warning told
        self.pods = self.ctx.informers.informer(POD)
        self.podgroups = self.ctx.informers.informer(PODGROUP)
        self.owners: dict[tuple[str, str], SharedInformer[Any]] = {
            (kind.api_version, kind.kind): self.ctx.informers.informer(kind) for kind in OWNER_KINDS
        }
        self.pods.add_indexer(
            BY_GROUP, lambda p: [_group_key(p)] if is_ours(p, self.scheduler_names) else []
        )
        on_pod: HandlerFuncs[Pod] = HandlerFuncs(
            add=self._pod_changed, update=lambda _old, new: self._pod_changed(new)
        )
        on_owner: HandlerFuncs[Any] = HandlerFuncs(
            add=self._owner_changed, update=lambda _old, new: self._owner_changed(new)
        )
        self.pods.add_handler(on_pod)
        for informer in self.owners.values():
            informer.add_handler(on_owner)

    def _pod_changed(self, pod: Pod) -> None:
        if (
            is_ours(pod, self.scheduler_names)
            and named_group(pod) is None
            and not pod.metadata.deletion_timestamp
        ):
            self.queue.add(_group_key(pod))

    def _owner_changed(self, owner: KubeObject) -> None:
        key = f"{owner.metadata.namespace}/{GROUP_PREFIX}{owner.metadata.uid}"
        if key in self.podgroups.store:
            self.queue.add(key)

    async def reconcile(self, key: str) -> Result | None:
        namespace, name = split_key(key)
        if namespace is None:
            return None
        pods = [
            p for p in self.pods.store.by_index(BY_GROUP, key) if not p.metadata.deletion_timestamp
        ]
        existing = self.podgroups.store.get(key)
        ref = self._owner_ref(pods, existing)
        owner: Owner | None = None
        if ref is not None:
            found = self._owner(namespace, ref)
            if found is None:
                return Result(requeue_after=OWNER_CACHE_WAIT)
            if found.uid != ref.uid:
                return None  # the owner was replaced; its pods are being garbage-collected
            owner = found
        todo = plan(name=name, pods=pods, owner=owner, existing=existing)
        involved = ObjectReference(
            api_version=PODGROUP.api_version, kind=PODGROUP.kind, namespace=namespace, name=name
        )
        if todo.foreign:
            self.ctx.recorder.record(involved, "Warning", "FailedCreate", todo.foreign)
            return None
        self._tell_over_limits(key, todo.over_limits, involved, existing is None)
        if (todo.create or todo.spec_patch) and todo.warnings:
            for warning in todo.warnings:
                self.ctx.recorder.record(involved, "Warning", "InvalidAnnotation", warning)
        client = self.ctx.client
        if todo.delete and existing is not None:
            try:
                await client.delete(PODGROUP, name, namespace=namespace, uid=existing.metadata.uid)
            except (NotFound, Conflict):
                return None
            self.log.info("deleted the podgroup of an owner scaled to zero")
            return None
        if todo.create is not None:
            try:
                await client.create(PODGROUP, todo.create, namespace=namespace)
                self.log.info("created podgroup", min_member=todo.create.spec.min_member)
            except AlreadyExists:
                # Created meanwhile: ours after a stale cache read, or someone else's, which
                # the pods must not join. The plan tells them apart once the cache has it.
                return Result(requeue_after=CONFLICT_WAIT)
            except Invalid as exc:
                # e.g. a queue annotation that is no valid name: retrying cannot fix it
                self.ctx.recorder.record(involved, "Warning", "FailedCreate", str(exc))
                raise TerminalError(f"podgroup {key} rejected: {exc}") from exc
        if todo.spec_patch is not None:
            try:
                await client.patch(PODGROUP, name, {"spec": todo.spec_patch}, namespace=namespace)
            except Invalid as exc:
                # As at create: the same patch would be refused again, so no retry loop.
                self.ctx.recorder.record(involved, "Warning", "FailedUpdate", str(exc))
                raise TerminalError(f"podgroup {key} update rejected: {exc}") from exc
            self.log.info("updated podgroup", patch=todo.spec_patch)
        for pod_name in todo.annotate:
            patch = {"metadata": {"annotations": {KUBE_GROUP_NAME_KEY: name}}}
            try:
                await client.patch(POD, pod_name, patch, namespace=namespace)
            except NotFound:
                continue  # deleted meanwhile
        return None

    def _tell_over_limits(
        self, key: str, message: str, involved: ObjectReference, creating: bool
    ) -> None:
        """A Warning for a PodGroup held over a bound, once per message: the owner's status
        changes queue the group again and again, and each would repeat it."""
        if not message:
            self._over_limits.pop(key, None)
            return
        if self._over_limits.get(key) == message:
            return
        if len(self._over_limits) >= OVER_LIMITS_REMEMBERED:
            self._over_limits.clear()  # bounded; the worst case is one Warning told again
        self._over_limits[key] = message
        reason = "FailedCreate" if creating else "FailedUpdate"
        self.ctx.recorder.record(involved, "Warning", reason, message)
        self.log.warning("podgroup over the bounds", podgroup=key, message=message)

    @staticmethod
    def _owner_ref(pods: list[Pod], existing: PodGroup | None) -> OwnerReference | None:
        """The group's controlling owner, from its pods or else from the existing PodGroup."""
        for pod in pods:
            ref = controller_of(pod.metadata)
            if ref is not None:
                return ref
        if existing is not None:
            ref = controller_of(existing.metadata)
            if ref is not None and ref.kind != POD.kind:
                return ref
        return None

    def _owner(self, namespace: str, ref: OwnerReference) -> Owner | None:
        """The owner as the plan sees it; None when a kind the controller reads is not in the
        cache yet. An owner of another kind (a CRD) has no annotations or replicas to read."""
        informer = self.owners.get((ref.api_version, ref.kind))
        if informer is None:
            return Owner(api_version=ref.api_version, kind=ref.kind, name=ref.name, uid=ref.uid)
        obj = informer.store.get(f"{namespace}/{ref.name}")
        if obj is None:
            return None
        replicas = None
        if isinstance(obj, ReplicaSet | StatefulSet):
            replicas = 1 if obj.spec.replicas is None else obj.spec.replicas
        return Owner(
            api_version=ref.api_version,
            kind=ref.kind,
            name=ref.name,
            uid=obj.metadata.uid,
            annotations=obj.metadata.annotations,
            replicas=replicas,
        )
