"""Ownership decisions (caldera.api.ownership): a controller patches, mounts, adopts or deletes
only an object whose controller reference names its owner's UID; a Terminating claim is never
adopted; the PVC creator refuses another owner's claim on 409; the webhook refuses
--ssh-private-key (docs/reliability.md, "Objects made on a Job's behalf")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import PersistentVolumeClaim
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.ownership import (
    HELD_SHOWN,
    ClaimUse,
    claim_use,
    clash_message,
    held_summary,
    may_touch,
    with_held,
)
from caldera.api.volcano import Job
from caldera.kube.errors import AlreadyExists
from controllers.job.pvc_throttle import ClaimUnusableError, PvcCreator, claim_problem
from unit.webhook_fixtures import to_job
from webhooks.jobs import validate_job_create

JOB_UID = "1f0c-job"

uids = st.sampled_from([JOB_UID, "other-uid", "", "1f0c-job-old"])
refs = st.builds(
    OwnerReference,
    api_version=st.sampled_from(["batch.volcano.sh/v1alpha1", "apps/v1", "v1"]),
    kind=st.sampled_from(["Job", "StatefulSet", "ConfigMap"]),
    name=st.sampled_from(["train", "train-worker", "x"]),
    uid=uids,
    controller=st.sampled_from([True, False, None]),
    block_owner_deletion=st.sampled_from([True, False, None]),
)


@given(
    owners=st.lists(refs, max_size=4),
    deleting=st.sampled_from([None, "2026-11-28T23:00:00Z"]),
    owner_uid=uids,
)
def test_touch_only_what_a_controller_reference_gives_this_owner(
    owners: list[OwnerReference], deleting: str | None, owner_uid: str
) -> None:
    """For any ownerReferences, patch/mount/delete is permitted exactly when the (first, the
    API server allows one) controller reference names this owner's non-empty UID; a claim is
    used only when also not Terminating."""
    meta = ObjectMeta(name="train-svc", owner_references=tuple(owners), deletion_timestamp=deleting)
    controller = next((r for r in owners if r.controller), None)
    ours = bool(owner_uid) and controller is not None and controller.uid == owner_uid
    assert may_touch(meta, owner_uid) is ours
    use = claim_use(meta, owner_uid)
    if not ours:
        assert use is ClaimUse.FOREIGN
    else:
        assert use is (ClaimUse.TERMINATING if deleting else ClaimUse.USE)


def test_a_non_controller_reference_with_the_uid_is_not_ownership() -> None:
    """An ownerReference naming the Job without controller: true does not make it the Job's."""
    ref = OwnerReference(kind="Job", name="train", uid=JOB_UID, controller=False)
    assert not may_touch(ObjectMeta(owner_references=(ref,)), JOB_UID)
    assert not may_touch(ObjectMeta(), JOB_UID)  # a user's object, no owner at all


def test_clash_messages_name_the_object_and_are_stable() -> None:
    """The Event names kind/name; equal sets of clashes give equal messages (once per change)."""
    a = clash_message("ConfigMap", "train-svc", "Job train")
    b = clash_message("Service", "train", "Job train")
    assert a.startswith("ConfigMap/train-svc exists and is not controlled by Job train")
    assert held_summary([a, b, a]) == held_summary([b, a])


# Problems are Caldera's own messages about objects, whose names hold no "|" (the separator the
# count below reads).
_PROBLEM = st.text(alphabet=st.characters(blacklist_characters="|"), max_size=300)


@given(st.lists(_PROBLEM, max_size=2000), st.text(max_size=200))
def test_the_held_note_is_bounded_and_replaced_not_appended(
    problems: list[str], message: str
) -> None:
    """However many objects hold a Job (a thousand held pods), its status names at most
    HELD_SHOWN of them and counts the rest; a new note replaces the last one, and an empty one
    removes it, leaving the rest of the message as it was."""
    summary = held_summary(problems)
    assert len(summary) <= 20 + HELD_SHOWN * 303 + 20
    assert summary.count(" | ") <= HELD_SHOWN
    base = message.replace("[held: ", "")
    once = with_held(base, summary)
    assert once.endswith(summary)
    twice = with_held(with_held(once, held_summary(["other"])), summary)
    assert twice == once
    assert with_held(once, "") == base


def _claim(owners: tuple[OwnerReference, ...], deleting: str | None = None) -> Any:
    return PersistentVolumeClaim(
        metadata=ObjectMeta(
            name="data-train-worker-0",
            namespace="ns",
            owner_references=owners,
            deletion_timestamp=deleting,
        )
    )


def test_claim_problems_say_what_happens_to_the_pod() -> None:
    """A StatefulSet's claim (no owner) is left alone and the pod is not created; the old Job's
    Terminating claim makes the pod wait for a fresh one; the Job's own claim is used."""
    sts = claim_problem(_claim(()), JOB_UID)
    assert sts is not None
    assert sts.use is ClaimUse.FOREIGN
    assert "PersistentVolumeClaim/data-train-worker-0" in str(sts)
    assert "not created" in str(sts)
    old_ref = OwnerReference(kind="Job", name="train", uid="1f0c-job-old", controller=True)
    old = claim_problem(_claim((old_ref,), "2026-11-28T23:00:00Z"), JOB_UID)
    assert old is not None
    assert old.use is ClaimUse.FOREIGN
    assert "is being deleted" in str(old)
    own_ref = OwnerReference(kind="Job", name="train", uid=JOB_UID, controller=True)
    going = claim_problem(_claim((own_ref,), "2026-11-28T23:00:00Z"), JOB_UID)
    assert going is not None
    assert going.use is ClaimUse.TERMINATING
    assert "waits" in str(going)
    assert claim_problem(_claim((own_ref,)), JOB_UID) is None


@pytest.mark.parametrize(
    ("owners", "deleting", "accepted"),
    [
        ((OwnerReference(kind="Job", name="j", uid=JOB_UID, controller=True),), None, True),
        ((), None, False),  # a StatefulSet-style claim: nobody's
        ((OwnerReference(kind="Job", name="j", uid="old", controller=True),), None, False),
        (
            (OwnerReference(kind="Job", name="j", uid=JOB_UID, controller=True),),
            "2026-11-28T23:00:00Z",
            False,
        ),
    ],
)
async def test_creator_adopts_only_its_own_live_claim_on_409(
    owners: tuple[OwnerReference, ...], deleting: str | None, accepted: bool
) -> None:
    """On AlreadyExists the creator reads the claim: only the Job's own, alive, counts as done;
    anything else fails the request with ClaimUnusableError and the claim is not written."""
    writes: list[str] = []

    async def create(body: dict[str, Any]) -> None:
        writes.append("create")
        raise AlreadyExists(409, "AlreadyExists", "exists")

    async def get(namespace: str, name: str) -> PersistentVolumeClaim:
        existing: PersistentVolumeClaim = _claim(owners, deleting)
        return existing

    owner = {"kind": "Job", "name": "j", "uid": JOB_UID, "controller": True}
    body = {"metadata": {"name": "data-j-w-0", "namespace": "ns", "ownerReferences": [owner]}}
    creator = PvcCreator(None, qps=1000, burst=10, create=create, get=get)  # type: ignore[arg-type]
    creator.start()
    try:
        if accepted:
            await asyncio.wait_for(creator.submit("ns/j", body), 5)
        else:
            with pytest.raises(ClaimUnusableError):
                await asyncio.wait_for(creator.submit("ns/j", body), 5)
    finally:
        await creator.stop()
    assert writes == ["create"]  # one attempt, never retried into the other claim


def _job_with_plugins(plugins: dict[str, list[str]]) -> Job:
    raw = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "mpi", "namespace": "ns"},
        "spec": {
            "minAvailable": 1,
            "queue": "default",
            "plugins": plugins,
            "tasks": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }
    return to_job(raw)


KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret\n-----END RSA PRIVATE KEY-----"


def test_webhook_refuses_a_private_key_in_the_spec() -> None:
    """--ssh-private-key is refused at create, pointing to the generated Secret or a Secret of
    one's own, without echoing the key; the ssh plugin without it is admitted."""
    refusal = validate_job_create(_job_with_plugins({"ssh": [f"--ssh-private-key={KEY}"]}), None)
    assert "spec.plugins.ssh: flag --ssh-private-key puts a private key in the Job's spec" in (
        refusal
    )
    assert "<job>-ssh" in refusal
    assert "MIIsecret" not in refusal
    assert "spec.plugins" not in validate_job_create(_job_with_plugins({"ssh": []}), None)
