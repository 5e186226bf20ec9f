"""What a session leaves behind and what a simulation run does with Python's collector:
``Session.close`` (a session's objects freed without the cyclic collector),
``simulator.engine.young_generation``, the settled jobs' version that keeps the unsettled
list, and the simulated Job controller's task siblings listed only when read."""

from __future__ import annotations

import gc
import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import Pod
from scheduler.api.job_sums import JobTrail
from scheduler.api.settled import SettledJobs
from scheduler.conf import DEFAULT_CONF, parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.registry import REGISTRY
from simulator.controller import _Later
from simulator.engine import young_generation
from unit.sched_fixtures import add_job, cpu_cluster

CONF = parse_conf(DEFAULT_CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)


def _session() -> Session:
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    add_job(cluster, "a", pending=2)
    add_job(cluster, "b", pending=6)  # a gang that does not fit: waits
    return Session(cluster, CONF.tiers)


def test_a_closed_session_is_freed_without_the_cyclic_collector() -> None:
    """Plugins register bound methods and closures over the session: closed, nothing refers
    back to it, and it goes with its last reference (the collector off throughout)."""
    session = _session()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = run_session(session, CONF, REGISTRY)
        assert result.binds  # a's pods placed: the plugins did register and run
        assert session._fns == {}
        gone = weakref.ref(session)
        del session
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


def test_an_open_session_and_its_plugins_refer_to_each_other() -> None:
    """Without ``close`` the session lives on in a cycle: what ``close`` is for."""
    session = _session()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        plugins = [
            REGISTRY.plugins[option.name](Arguments(option.name, {}))
            for tier in CONF.tiers
            for option in tier
        ]
        for plugin in plugins:
            plugin.on_session_open(session)
        gone = weakref.ref(session)
        del session, plugins, plugin
        assert gone() is not None
        gc.collect()
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


def test_young_generation_sets_the_threshold_and_puts_it_back() -> None:
    before = gc.get_threshold()
    with young_generation(12_345):
        assert gc.get_threshold() == (12_345, *before[1:])
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), young_generation(54_321):
        raise RuntimeError("a run that breaks")
    assert gc.get_threshold() == before


def test_the_settled_version_moves_whenever_the_settled_set_does() -> None:
    trail = JobTrail()
    settled = SettledJobs((), trail.end)
    start = settled.version
    settled.settle("ns/a", "Running")
    settled.settle("ns/b", "Running")
    assert settled.version == start + 2
    kept = settled.version
    trail.keys.append("ns/other")  # a job not settled changes: the set stays
    assert settled.refresh(trail) == {"ns/a": "Running", "ns/b": "Running"}
    assert settled.version == kept
    trail.keys.append("ns/a")  # a settled job changes: unsettled
    assert "ns/a" not in settled.refresh(trail)
    assert settled.version == kept + 1
    trail.trim(trail.end)
    settled.position = trail.base - 1  # read less than was trimmed: everything forgotten
    assert settled.refresh(trail) == {}
    assert settled.version == kept + 2


def test_the_unsettled_list_follows_a_job_unsettled_in_the_session() -> None:
    """A job the trail names during the session leaves the settled set; the list kept for the
    session's passes gains it."""
    cluster = cpu_cluster({"n0": "4"})
    add_job(cluster, "a", running=1)
    add_job(cluster, "b", running=1)
    trail = JobTrail()
    cluster.job_trail = trail
    cluster.settled = SettledJobs(CONF.tiers, trail.end)
    cluster.settled.settle("ns/a", "Running")
    cluster.settled.settle("ns/b", "Running")
    session = Session(cluster, CONF.tiers)
    assert session.incremental.unsettled_jobs() == []
    trail.keys.append("ns/b")
    assert [job.key for job in session.incremental.unsettled_jobs()] == ["ns/b"]


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "settle", "change", "derive again", "remove", "trim"]),
        st.integers(0, 9),
    ),
    max_size=30,
)


@given(steps=_STEPS)
def test_the_unsettled_jobs_kept_across_sessions_are_those_of_a_full_pass(
    steps: list[tuple[str, int]],
) -> None:
    """Sessions after the first list the unsettled jobs from the keys kept with the settled
    set and those the trail names; the list is that of a pass over every job, in the
    snapshot's order, whatever came, went, settled, changed or was derived again."""
    cluster = cpu_cluster({"n0": "4"})
    trail = JobTrail()
    cluster.job_trail = trail
    cluster.settled = SettledJobs(CONF.tiers, trail.end)
    made = 0
    for step, pick in steps:
        keys = list(cluster.jobs)
        key = keys[pick % len(keys)] if keys else None
        if step == "add" or key is None:
            made += 1
            trail.keys.append(add_job(cluster, f"j{made}", running=1).key)
        elif step == "settle":
            cluster.settled.refresh(trail)
            cluster.settled.settle(key, "Running")
        elif step == "change":
            trail.keys.append(key)
        elif step == "derive again":  # a new JobInfo, at the end of the snapshot's jobs
            trail.keys.append(key)
            del cluster.jobs[key]
            add_job(cluster, key.split("/")[1], running=1)
        elif step == "remove":
            trail.keys.append(key)
            del cluster.jobs[key]
        else:  # the trail trimmed past what the settled set read: it starts again
            cluster.settled.refresh(trail)
            trail.keys.append(key)
            trail.trim(trail.end)
        session = Session(cluster, CONF.tiers)
        settled = session.incremental.settled()
        assert session.incremental.unsettled_jobs() == [
            job for job in cluster.jobs.values() if job.key not in settled
        ]


def test_task_siblings_are_listed_once_and_only_when_read() -> None:
    calls: list[int] = []
    pods = [Pod(), Pod()]

    def listing() -> list[Pod]:
        calls.append(1)
        return pods

    later = _Later(listing)
    assert calls == []
    assert len(later) == 2
    assert list(later) == pods
    assert later[1] is pods[1]
    assert later[:1] == [pods[0]]
    assert calls == [1]
