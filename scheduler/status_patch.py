"""PodGroup status writes as JSON merge patches of what changed, and the PodGroups as the
scheduler has decided them while those writes wait or fly.

The PodGroup CRD has no status subresource (as in Volcano), so a session's status and the
annotations it sets (the wait record, the HyperNode a job was placed under, plugins'
annotations) go in one PATCH of the object (``application/merge-patch+json``, RFC 7386).
Volcano's scheduler PUTs the whole object with the resourceVersion it read; the patch instead:

- names only the top-level status fields and the annotations that change; a field back to its
  zero value is removed (null), as Volcano's omitempty fields read;
- carries no resourceVersion: a cache that has not yet seen the scheduler's own last write no
  longer gets 409 Conflict and a second write (the status fields are the scheduler's; the
  queue controller's condition writes carry their resourceVersion and are tried again);
- carries ``metadata.uid``: a patch meant for a PodGroup deleted and made again under the
  same name is refused (422, the uid is immutable) instead of landing on the new one;
- ``conditions`` is a list, which a merge patch replaces whole, as the PUT did.

``AssumedPodGroups`` is what the sessions read instead of the informer store: each PodGroup
with the patch decided for it applied, from the decision until the cache shows it (or the write
is dropped), as binds are assumed until the cache shows them bound. Without it a job enqueued
by one session would look Pending to the next while its write waits, and be admitted twice.
A later decision for the same PodGroup is patched against the cache too, naming every field
the earlier patch named: so it may replace the earlier one whether that was sent or not.

All of it is pure computation over immutable values, apart from the view's small dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from caldera.api.volcano import PodGroup, PodGroupStatus
from scheduler.live_snapshot import Objects

Patch = dict[str, Any]


def _changes(before: Mapping[str, Any], after: Mapping[str, Any], also: frozenset[str]) -> Patch:
    """The top-level keys of ``after`` that differ from ``before`` (None: removed), and the
    keys in ``also`` at their value in ``after``."""
    keys = before.keys() | after.keys()
    changed = {k: after.get(k) for k in keys if before.get(k) != after.get(k)}
    changed.update({k: after.get(k) for k in also})
    return changed


def podgroup_patch(
    cached: PodGroup, desired: PodGroup, previous: Patch | None = None
) -> Patch | None:
    """The merge patch that makes ``cached``'s status and annotations ``desired``'s, naming too
    every field ``previous`` (an earlier patch not yet in the cache) named; None when there is
    nothing to write."""
    before_status = msgspec.to_builtins(cached.status)
    after_status = msgspec.to_builtins(desired.status)
    previous = previous or {}
    status = _changes(before_status, after_status, frozenset(previous.get("status", {})))
    named = frozenset(previous.get("metadata", {}).get("annotations", {}))
    annotations = _changes(cached.metadata.annotations, desired.metadata.annotations, named)
    if not status and not annotations:
        return None
    metadata: dict[str, Any] = {"uid": cached.metadata.uid} if cached.metadata.uid else {}
    if annotations:
        metadata["annotations"] = annotations
    patch: Patch = {"metadata": metadata} if metadata else {}
    if status:
        patch["status"] = status
    return patch


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386: ``target`` with the merge patch ``patch`` applied (neither is changed)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge(merged.get(key), value)
    return merged


def patched(pg: PodGroup, patch: Patch) -> PodGroup:
    """``pg`` as the API server makes it with ``patch`` (status and annotations only; a patch
    for another uid leaves it as it is, as the API server refuses it)."""
    metadata = patch.get("metadata", {})
    if metadata.get("uid", pg.metadata.uid) != pg.metadata.uid:
        return pg
    if "status" in patch:
        status = merge(msgspec.to_builtins(pg.status), patch["status"])
        pg = msgspec.structs.replace(pg, status=msgspec.convert(status, PodGroupStatus))
    if "annotations" in metadata:
        annotations = merge(pg.metadata.annotations, metadata["annotations"])
        meta = msgspec.structs.replace(pg.metadata, annotations=annotations)
        pg = msgspec.structs.replace(pg, metadata=meta)
    return pg


class AssumedPodGroups:
    """The informer's PodGroups with the patches decided and not yet seen in the cache
    applied (``Objects``, what the sessions read); see the module docstring."""

    def __init__(self, store: Objects[PodGroup]) -> None:
        self.store = store
        self.patches: dict[str, Patch] = {}  # by "namespace/name"

    def get(self, key: str) -> PodGroup | None:
        pg = self.store.get(key)
        patch = self.patches.get(key)
        return pg if pg is None or patch is None else patched(pg, patch)

    def list(self) -> Sequence[PodGroup]:
        if not self.patches:
            return self.store.list()
        return [self._assumed(pg) for pg in self.store.list()]

    def _assumed(self, pg: PodGroup) -> PodGroup:
        patch = self.patches.get(f"{pg.metadata.namespace}/{pg.metadata.name}")
        return pg if patch is None else patched(pg, patch)

    def assume(self, key: str, patch: Patch) -> None:
        self.patches[key] = patch

    def seen(self, pg: PodGroup) -> bool:
        """The cache holds ``pg`` now: its patch is dropped when ``pg`` shows it (the write
        landed) or belongs to another PodGroup of that name; True when dropped."""
        key = f"{pg.metadata.namespace}/{pg.metadata.name}"
        patch = self.patches.get(key)
        if patch is None:
            return False
        uid = patch.get("metadata", {}).get("uid", pg.metadata.uid)
        if uid != pg.metadata.uid or patched(pg, patch) == pg:
            del self.patches[key]
            return True
        return False

    def drop(self, key: str) -> None:
        """The write was dropped: the cache's PodGroup is what the sessions read again."""
        self.patches.pop(key, None)
