"""Tests of controllers.job.created: pods created and not yet in the cache count as the Job's
until the cache shows them, they are deleted, the Job goes, or the entry expires."""

from __future__ import annotations

from caldera.api.core import Pod, PodStatus
from caldera.api.meta import ObjectMeta
from controllers.job.created import CreatedPods

JOB = "ns/job"


def pod(name: str, uid: str = "", phase: str = "Pending") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", uid=uid or f"uid-{name}"),
        status=PodStatus(phase=phase),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def names(pods: list[Pod]) -> list[str]:
    return sorted(p.metadata.name for p in pods)


def test_created_pods_join_the_cached_ones_until_seen() -> None:
    created = CreatedPods()
    created.remember(JOB, pod("job-w-1"))
    created.remember(JOB, pod("job-w-2"))
    assert names(created.merged(JOB, [pod("job-w-0")])) == ["job-w-0", "job-w-1", "job-w-2"]
    created.seen(JOB, pod("job-w-1"))
    assert names(created.merged(JOB, [pod("job-w-0"), pod("job-w-1")])) == [
        "job-w-0",
        "job-w-1",
        "job-w-2",
    ]
    created.seen(JOB, pod("job-w-2"))
    assert len(created) == 0
    assert names(created.merged(JOB, [])) == []


def test_a_cached_pod_of_the_same_name_wins() -> None:
    created = CreatedPods()
    created.remember(JOB, pod("job-w-0", uid="new"))
    old = pod("job-w-0", uid="old", phase="Failed")
    merged = created.merged(JOB, [old])
    assert [p.metadata.uid for p in merged] == ["old"]


def test_the_old_pod_leaving_does_not_end_the_new_one() -> None:
    """A pod deleted and created again under its name: the old one's DELETE (another uid)
    must not drop the new one, which the cache has not shown yet."""
    created = CreatedPods()
    created.remember(JOB, pod("job-w-0", uid="new"))
    created.seen(JOB, pod("job-w-0", uid="old"))
    assert [p.metadata.uid for p in created.merged(JOB, [])] == ["new"]


def test_entries_expire_after_the_ttl() -> None:
    clock = Clock()
    created = CreatedPods(ttl=60.0, clock=clock)
    created.remember(JOB, pod("job-w-0"))
    clock.now += 59.0
    assert names(created.merged(JOB, [])) == ["job-w-0"]
    clock.now += 2.0
    assert names(created.merged(JOB, [])) == []
    assert len(created) == 0


def test_jobs_are_kept_apart_and_forgotten() -> None:
    created = CreatedPods()
    created.remember(JOB, pod("job-w-0"))
    created.remember("ns/other", pod("other-w-0"))
    assert names(created.merged("ns/other", [])) == ["other-w-0"]
    created.forget(JOB)
    assert names(created.merged(JOB, [])) == []
    assert len(created) == 1


def test_seen_for_an_unknown_job_is_a_no_op() -> None:
    created = CreatedPods()
    created.seen("ns/nobody", pod("x"))
    assert len(created) == 0
