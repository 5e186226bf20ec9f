"""The plugins' objects (Service, ConfigMap, NetworkPolicy, Secret) on the API server: made,
kept and deleted only as the Job's own (`caldera.api.ownership`).

Their names are deterministic (`<job>`, `<job>-svc`, `<job>-ssh`), so a user's object may hold
one. Each object is read first (it exists on all but the first sync, so one GET per object and
sync, no write when nothing changed) and created when absent; an existing one is used
(patched, mounted, its key pair read) only when its controller reference carries the Job's
UID; otherwise it is a clash, returned as a message for the caller's Warning Event, and the
Job's pods are not made (they would mount or resolve through the other object).

Deletes happen once, as Volcano's OnJobDelete: only for the plugins `status.controlledResources`
records (`plugin-<name>`), and the caller drops those entries with the status it writes, so a
finished Job's later syncs, a restart or a failover delete nothing again. Each delete reads the
object first and carries its UID as a precondition: a same-named object made by someone else
in between is neither the one read nor deleted.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from caldera.api.kinds import SECRET, KindInfo, kind_for
from caldera.api.meta import ObjectMeta
from caldera.api.ownership import clash_message, may_touch
from caldera.api.volcano import Job
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, Conflict, NotFound
from controllers.job.plugins import PluginSet, SSHKeyPair, key_pair_from_secret
from controllers.job.plugins.base import CONTROLLED_RESOURCE_PREFIX
from controllers.job.plugins.ssh import SSHPlugin, secret_name

__all__ = ["delete_objects", "ensure_objects", "job_label", "own_key_pair"]


def job_label(job: Job) -> str:
    """How a clash message names the Job."""
    return f"Job {job.metadata.name} (uid {job.metadata.uid})"


async def own_key_pair(client: KubeClient, job: Job) -> tuple[SSHKeyPair | None, str]:
    """The key pair of the Job's own Secret `<job>-ssh` (None when absent or incomplete), and
    the clash message when a Secret of that name is not the Job's ("" otherwise): its keys are
    never read."""
    name = secret_name(job)
    try:
        secret = await client.get(SECRET, name, namespace=job.metadata.namespace)
    except NotFound:
        return None, ""
    if not may_touch(secret.metadata, job.metadata.uid):
        return None, clash_message("Secret", name, job_label(job))
    return key_pair_from_secret(secret.data), ""


async def ensure_objects(client: KubeClient, job: Job, plugins: PluginSet) -> list[str]:
    """Make the plugins' objects exist: each is read first (on most syncs it exists, and one
    GET decides), created when absent; the Job's own is patched (with its uid) where the plugin
    updates it and its content differs; every other owner's object is reported as a clash
    message and left untouched. The ssh plugin is skipped while it has no key pair (its Secret
    clashed: see `own_key_pair`)."""
    clashes: list[str] = []
    uid = job.metadata.uid
    for plugin in plugins.plugins:
        if isinstance(plugin, SSHPlugin) and plugin.needs_key_pair:
            continue
        for obj in plugin.resources(job):
            kind = kind_for(obj["apiVersion"], obj["kind"])
            ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
            existing = await _get(client, kind, ns, name)
            if existing is None:
                try:
                    await client.create(kind, obj, namespace=ns)
                    continue
                except AlreadyExists:  # made since the read: judge that one
                    existing = await _get(client, kind, ns, name)
                if existing is None:
                    continue  # and gone again: the next sync makes it
            meta: ObjectMeta = existing.metadata
            if not may_touch(meta, uid):
                clashes.append(clash_message(kind.kind, name, job_label(job)))
                continue
            if meta.deletion_timestamp or not plugins.update_on_change(obj):
                continue
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
            current = msgspec.to_builtins(existing)
            if all(current.get(k) == v for k, v in body.items()):
                continue
            # The UID in a merge patch is a precondition: the API server refuses the patch if
            # the object was replaced since it was read.
            body["metadata"] = {"uid": meta.uid}
            with contextlib.suppress(NotFound, Conflict):
                await client.patch(kind, name, body, namespace=ns)
    return clashes


async def _get(client: KubeClient, kind: KindInfo[Any], namespace: str, name: str) -> Any:
    try:
        return await client.get(kind, name, namespace=namespace)
    except NotFound:
        return None


async def delete_objects(client: KubeClient, job: Job, plugins: PluginSet) -> list[str]:
    """Delete the objects of the plugins `status.controlledResources` records, each only if it
    is the Job's own and with its UID as precondition; the recorded keys handled (for the
    caller to drop from the status it writes)."""
    recorded = job.status.controlled_resources
    done: list[str] = []
    for plugin in plugins.plugins:
        key = CONTROLLED_RESOURCE_PREFIX + plugin.name
        if key not in recorded:
            continue
        for ref in plugin.resource_refs(job):
            kind = kind_for(ref.api_version, ref.kind)
            await _delete_own(client, kind, ref.namespace, ref.name, job.metadata.uid)
        done.append(key)
    return done


async def _delete_own(
    client: KubeClient, kind: KindInfo[Any], namespace: str, name: str, owner_uid: str
) -> None:
    try:
        existing: Any = await client.get(kind, name, namespace=namespace)
    except NotFound:
        return
    meta: ObjectMeta = existing.metadata
    if not may_touch(meta, owner_uid) or meta.deletion_timestamp:
        return
    with contextlib.suppress(NotFound, Conflict):
        await client.delete(kind, name, namespace=namespace, uid=meta.uid)
