"""Skipping quiet sessions is exact: whenever ``QuietSessions`` says the next session may be
skipped, running it anyway decides exactly what the last one did, which changed nothing.

Random sequences (the live snapshot test's random cache) change the cluster now and then and
run a session each step, as the process does: binds become assumed, PodGroup statuses and wait
records are written back to the cache (their echo is noted, as the informer's would be),
evictions delete the pod. ``CALDERA_QUIET_RUNS`` sets the number of sequences (CI: 120).
"""

from __future__ import annotations

import datetime as dt
import os
import random

from scheduler.conf import parse_conf
from scheduler.framework.session import SessionResult
from scheduler.framework.status import with_findings
from scheduler.quiet import MAX_QUIET_SECONDS, QuietSessions, changed_nothing, reads_clock
from scheduler.registry import ACTIONS, PLUGINS
from unit.test_sched_live_snapshot import CONF, T0, Cache

RUNS = int(os.environ.get("CALDERA_QUIET_RUNS", "120"))
STEPS = 30


def decisions(result: SessionResult) -> tuple[object, ...]:
    """What a session decided, by keys (its tasks are objects of its own snapshot)."""
    return (
        sorted((b.task.key, b.node) for b in result.binds),
        sorted((e.task.key, e.reason) for e in result.evictions),
        sorted(result.podgroup_phase_inqueue),
        sorted(result.podgroup_status),
        sorted(result.unschedulable.items()),
        sorted((k, v.to_list()) for k, v in result.queue_allocated.items()),
    )


def run_and_apply(cache: Cache, now: dt.datetime) -> tuple[SessionResult, int]:
    """One session on the live snapshot, its decisions carried out on the cache; the number
    of status writes is returned."""
    result = cache.session(cache.live_cluster(now))
    for evict in result.evictions:
        key = evict.task.key
        if key in cache.pods.items:
            cache.delete(cache.pods, key)
            cache.assumed.pop(evict.task.uid, None)
    writes = 0
    for key in result.podgroup_status.keys() | result.podgroup_why.keys():
        pg = cache.podgroups.items.get(key)
        if pg is not None:
            status, record = result.podgroup_status.get(key), result.podgroup_why.get(key)
            cache.podgroups.items[key] = updated = with_findings(pg, status, record)
            cache.live.podgroup_changed(updated)
            writes += 1
    return result, writes


def test_a_skipped_session_would_have_decided_the_same_nothing() -> None:
    """Run the session the quiet check would skip: same decisions as the last, none of which
    changes the cluster; and quiet steps do come up, so the check is exercised."""
    skipped = 0
    for seed in range(RUNS):
        cache = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        quiet = QuietSessions()
        last: SessionResult | None = None
        for step in range(STEPS):
            if cache.rng.random() < 0.3:
                for _ in range(cache.rng.randint(1, 3)):
                    cache.change()
            now = T0 + dt.timedelta(seconds=step)
            news = cache.live.has_news(cache.assumed)
            skip = last is not None and quiet.may_skip(CONF, news=news, now=float(step))
            result, writes = run_and_apply(cache, now)
            if skip:
                assert last is not None
                skipped += 1
                assert changed_nothing(result, writes), f"seed {seed} step {step}"
                assert decisions(result) == decisions(last), f"seed {seed} step {step}"
            quiet.record(CONF, result, writes, now=float(step))
            last = result
    assert skipped > RUNS * STEPS // 10


def test_news_or_a_session_that_changed_something_means_no_skip() -> None:
    """A noted event, an assumed bind that came or went, a new configuration or a session
    that wrote anything: the next session runs."""
    cache = Cache(random.Random(3))  # noqa: S311 - seeded test data
    quiet = QuietSessions()
    result, writes = run_and_apply(cache, T0)
    while not changed_nothing(result, writes):
        quiet.record(CONF, result, writes, now=0.0)
        assert not quiet.may_skip(CONF, news=False, now=0.0)
        result, writes = run_and_apply(cache, T0)
    quiet.record(CONF, result, writes, now=0.0)
    assert not cache.live.has_news(cache.assumed)
    assert quiet.may_skip(CONF, news=False, now=1.0)
    cache.put_node("n7", "4", ready=True)
    assert cache.live.has_news(cache.assumed)
    cache.live_cluster(T0)
    assert not cache.live.has_news(cache.assumed)
    cache.assumed["someone"] = "n0"
    assert cache.live.has_news(cache.assumed)
    del cache.assumed["someone"]
    other = parse_conf("actions: allocate", actions=ACTIONS.keys(), plugins=PLUGINS.keys())
    assert not quiet.may_skip(other, news=False, now=1.0)
    assert not quiet.may_skip(CONF, news=False, now=MAX_QUIET_SECONDS + 1)
    assert quiet.skipped == 1


def test_a_session_that_left_out_the_job_figures_is_not_repeated() -> None:
    """The process asks for every job's figures every few seconds; until a session has
    reported them, the next one runs, so the exported shares catch up on an idle cluster."""
    quiet = QuietSessions()
    quiet.record(CONF, SessionResult(job_figures=False), 0, now=0.0)
    assert not quiet.may_skip(CONF, news=False, now=1.0)
    quiet.record(CONF, SessionResult(job_figures=True), 0, now=5.0)
    assert quiet.may_skip(CONF, news=False, now=6.0)


def test_a_clock_plugin_keeps_every_session() -> None:
    """With preemption-toleration, time alone can change a decision: nothing is skipped."""
    conf = parse_conf(
        "actions: allocate, preempt\ntiers:\n- plugins: [{name: preemption-toleration}]\n",
        actions=ACTIONS.keys(),
        plugins=PLUGINS.keys(),
    )
    assert reads_clock(conf)
    assert not reads_clock(CONF)
    quiet = QuietSessions()
    quiet.record(conf, SessionResult(), 0, now=0.0)
    assert not quiet.may_skip(conf, news=False, now=0.5)


def test_a_session_runs_again_when_a_plugin_asked_for_it() -> None:
    """A quiet session that asked to be revisited (sla: a waiting time runs out in 30 s) is
    skipped only until then; the earliest ask wins."""
    quiet = QuietSessions()
    result = SessionResult()
    result.revisit(45.0)
    result.revisit(30.0)
    result.revisit(60.0)
    assert result.revisit_after == 30.0
    quiet.record(CONF, result, 0, now=100.0)
    assert quiet.may_skip(CONF, news=False, now=129.0)
    assert not quiet.may_skip(CONF, news=False, now=130.0)
