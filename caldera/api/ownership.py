"""Which objects a controller may touch: those whose controller owner reference names it.

A controller makes objects on an owner's behalf under deterministic names (`<job>-svc`,
`data-<pod>`), so a name alone proves nothing: a user's own ConfigMap, a StatefulSet's claim or
the claims of a deleted Job of the same name may hold it. Before a controller patches, mounts,
adopts or deletes such an object it asks `may_touch(meta, owner_uid)`: only an object whose
`controller: true` owner reference carries the owner's UID (UIDs are never reused, names are)
is its own. Anything else is left alone and reported by `clash_message`.

A claim needs one more rule: a Terminating claim (deletionTimestamp set) is never adopted, even
our own, because the pod that mounts it would wait on a volume about to vanish.

Pure: no I/O; the callers read the object (cache or GET) and write.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from typing import Final

from caldera.api.meta import ObjectMeta, controller_of

__all__ = [
    "HELD_SHOWN",
    "ClaimUse",
    "claim_use",
    "clash_message",
    "held_summary",
    "may_touch",
    "with_held",
]


def may_touch(meta: ObjectMeta, owner_uid: str) -> bool:
    """Whether the object of `meta` is controlled by the owner whose UID is `owner_uid`: its
    controller reference (the API server allows one) names that UID. An empty UID (an owner not
    yet stored) owns nothing."""
    ref = controller_of(meta)
    return bool(owner_uid) and ref is not None and ref.uid == owner_uid


class ClaimUse(enum.Enum):
    """What a controller may do with an existing PersistentVolumeClaim of the name it wants."""

    USE = "use"  # its own and alive: mount it
    FOREIGN = "foreign"  # another owner's (or nobody's): leave it alone, never mount it
    TERMINATING = "terminating"  # being deleted: wait for it to go, then make a fresh one


def claim_use(meta: ObjectMeta, owner_uid: str) -> ClaimUse:
    """The use a controller owned by `owner_uid` may make of the existing claim of `meta`."""
    if not may_touch(meta, owner_uid):
        return ClaimUse.FOREIGN
    if meta.deletion_timestamp:
        return ClaimUse.TERMINATING
    return ClaimUse.USE


def clash_message(kind: str, name: str, owner: str) -> str:
    """Why an object of the wanted name is left alone (an Event message; names the object)."""
    return (
        f"{kind}/{name} exists and is not controlled by {owner}; Caldera leaves it alone "
        "(rename or delete it)"
    )


HELD_SHOWN: Final = 5  # problems named in a Job's status and Events per change; the rest counted
_HELD = re.compile(r"(?:; )?\[held: [^\]]*\]")


def held_summary(problems: Iterable[str], *, shown: int = HELD_SHOWN) -> str:
    """What holds a Job's pods back, as one bounded text for ``status.state.message``:
    ``[held: <first problem> | ... | and N more]``. Sorted and deduplicated, so that the same
    problems give the same text (an Event is told once per change of it, not per sync); a
    thousand held pods give five problems and a count, not a thousand lines."""
    unique = sorted({p.replace("]", ")") for p in problems})
    parts = unique[:shown]
    if len(unique) > shown:
        parts.append(f"and {len(unique) - shown} more")
    return f"[held: {' | '.join(parts)}]"


def with_held(message: str, summary: str) -> str:
    """``message`` with its earlier ``held_summary`` (if any) replaced by ``summary``; with
    ``summary`` "" the earlier one is only removed (nothing holds the Job any more)."""
    base = _HELD.sub("", message)
    if not summary:
        return base
    return f"{base}; {summary}" if base else summary
