"""A plugin that does not opt into the incremental layer decides the same, only slower.

The built-in plugins that offer speed hooks (``Speedups``: drf, gang, priority, proportion,
sla, capacity, preemption-toleration) and use its memos (gang, overcommit, proportion, drf)
run the differential scenarios of ``unit/test_sched_differential.py`` twice: with the layer,
and with it withheld (``Session(..., speedups=False)``: hooks ignored, memos derived every
time, no verdict carried across sessions, nothing settled). Every decision must be the same.
Over sessions on the live snapshot, where memos, sums, node verdicts and settled jobs outlive
a session, the same holds step after step.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest

from scheduler.conf import parse_conf
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.priority import PriorityPlugin
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.test_sched_differential import CONFS, DECORATE, decisions, random_cluster
from unit.test_sched_live_snapshot import STEPS, T0, Cache, _decisions

CLUSTERS = 250  # per configuration (the differential test runs 1,000 with the layer)
LIVE_RUNS = 12


def _run(name: str, seed: int, *, speedups: bool) -> tuple[dict[str, object], bool]:
    """One session of ``name``'s configuration over seed's cluster: its decisions, and
    whether an order was taken from sort keys (the speed hooks' path)."""
    conf = parse_conf(CONFS[name], actions=ACTIONS.keys(), plugins=PLUGINS.keys())
    cluster = random_cluster(seed)
    decorate = DECORATE.get(name)
    if decorate is not None:
        decorate(cluster, seed)
    session = Session(cluster, conf.tiers, speedups=speedups)
    keyed: list[bool] = []
    order_keys = session.incremental.order_keys

    def watched(kind: CallbackKind, plugins: Iterable[str]) -> list[Callable[[Any], Any]] | None:
        keys = order_keys(kind, plugins)
        keyed.append(bool(keys))  # a sort key from some plugin
        return keys

    session.incremental.order_keys = watched  # type: ignore[method-assign]
    result = run_session(session, conf, REGISTRY)
    return decisions(cluster, result), any(keyed)


@pytest.mark.parametrize("name", sorted(CONFS))
def test_same_decisions_without_the_speed_hooks(name: str) -> None:
    """Every seeded cluster: the same binds, evictions, statuses, Events and queue figures
    with the incremental layer and without it; and the layer was really in use in one run and
    not in the other (its sort keys)."""
    used = 0
    for seed in range(CLUSTERS):
        fast, keyed = _run(name, seed, speedups=True)
        plain, plain_keyed = _run(name, seed, speedups=False)
        assert fast == plain, f"seed {seed}"
        assert not plain_keyed
        used += keyed
    assert used > 0


def test_a_broken_hook_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: a priority plugin whose job order key says the opposite of
    its order function decides differently on some cluster."""
    opened = PriorityPlugin.on_session_open

    def broken(self: PriorityPlugin, ssn: Session) -> None:
        opened(self, ssn)
        hooks = ssn.incremental.of(self.name)
        ssn.add_speedups(self.name, replace(hooks, job_order_key=lambda job: job.priority))

    monkeypatch.setattr(PriorityPlugin, "on_session_open", broken)
    differs = sum(
        _run("full", seed, speedups=True)[0] != _run("full", seed, speedups=False)[0]
        for seed in range(40)
    )
    assert differs > 0


@pytest.mark.parametrize("chunk", range(2))
def test_same_decisions_over_live_sessions_without_the_layer(chunk: int) -> None:
    """Two caches from one seed go through the same random changes; one's sessions run with
    the incremental layer on the live snapshot (memos, sums and settled jobs carried from
    session to session), the other's without it. Each session decides and reports the same."""
    sessions = settled = memos = verdicts = 0
    for seed in range(chunk, LIVE_RUNS, 2):
        fast = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        plain = Cache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for cache in (fast, plain):
                for _ in range(cache.rng.randint(0, 4)):
                    cache.change()
            now = T0 + dt.timedelta(seconds=step)
            with_layer, without = fast.live_cluster(now), plain.live_cluster(now)
            settled += len(with_layer.settled.phases) if with_layer.settled else 0
            memos += sum(len(job.memo) for job in with_layer.jobs.values())
            assert not any(job.memo for job in without.jobs.values())
            assert with_layer.verdicts is not None
            assert without.verdicts is not None
            verdicts += len(with_layer.verdicts.classes)
            assert not without.verdicts.classes  # no verdict carried across sessions
            plain.rng.random()  # as ``fast``'s draw below: the two sequences stay one
            if fast.rng.random() < 0.5:
                fast_result = fast.session(with_layer)
                plain_result = plain.session(without, speedups=False)
                assert _decisions(fast_result, with_layer) == _decisions(plain_result, without), (
                    f"seed {seed} step {step}"
                )
                fast.write_back(fast_result)
                plain.write_back(plain_result)
                sessions += 1
                assert without.settled is None or not without.settled.phases
    assert sessions > 0
    assert settled > 0  # jobs the layer's sessions skipped
    assert memos > 0
    assert verdicts > 0
