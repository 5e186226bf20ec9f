"""The guide's example plugin (docs/architecture.md, "Writing a plugin") is the module
scheduler/plugins/example_rank.py, word for word, and decides in real sessions as the guide
says: alone, it puts ranked jobs first, the lowest rank first; behind priority, it orders only
jobs of equal priority. It offers no speed hooks, and decides the same with the incremental
layer withheld.
"""

from __future__ import annotations

import re
from pathlib import Path

from scheduler.api.types import ClusterInfo
from scheduler.conf import parse_conf
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session
from scheduler.plugins import example_rank
from scheduler.plugins.example_rank import RANK, RankPlugin
from scheduler.registry import ACTIONS, PLUGINS
from unit.sched_fixtures import make_cluster, make_job, make_node

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry(plugins={**PLUGINS, RankPlugin.name: RankPlugin}, actions=ACTIONS)
ALONE = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: gang}, {name: example-rank}, {name: predicates}]
"""
BESIDE_THE_DEFAULTS = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: example-rank, arguments: {annotation: example.caldera.io/rank}},
            {name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""
WITHOUT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""


def test_the_guide_shows_the_module_word_for_word() -> None:
    guide = (REPO / "docs" / "architecture.md").read_text()
    assert "\n## Writing a plugin\n" in guide, "docs/architecture.md has no 'Writing a plugin'"
    section = guide.split("\n## Writing a plugin\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)\n```", section, flags=re.DOTALL)
    module = Path(example_rank.__file__).read_text().rstrip("\n")
    assert blocks == [module], "the guide's example differs from scheduler/plugins/example_rank.py"
    assert 35 <= len(module.splitlines()) <= 50  # a forty-line example


def _cluster(jobs: list[tuple[str, int, int, str | None]]) -> ClusterInfo:
    """One node with room for two of the gangs: (name, priority, created, rank) each, two
    1-cpu pods whole."""
    return make_cluster(
        [make_node("n0", "4")],
        [
            make_job(
                name,
                2,
                priority=priority,
                created=created,
                annotations={} if rank is None else {RANK: rank},
            )
            for name, priority, created, rank in jobs
        ],
    )


def _placed(text: str, cluster: ClusterInfo, *, speedups: bool = True) -> set[str]:
    """The jobs that got binds in one session of the configuration ``text``."""
    conf = parse_conf(text, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    session = Session(cluster, conf.tiers, speedups=speedups)
    result = run_session(session, conf, REGISTRY)
    return {bind.task.job.split("/")[1] for bind in result.binds}


def test_alone_it_puts_the_lowest_rank_first_and_unranked_jobs_last() -> None:
    jobs = [("a", 0, 0, None), ("b", 0, 1, "2"), ("c", 0, 2, "1")]
    assert _placed(ALONE, _cluster(jobs)) == {"b", "c"}
    assert _placed(ALONE, _cluster(jobs), speedups=False) == {"b", "c"}
    assert _placed(ALONE.replace("{name: example-rank}, ", ""), _cluster(jobs)) == {"a", "b"}
    # A rank that is no whole number is no rank; a negative one is.
    jobs = [("a", 0, 0, "-1"), ("b", 0, 1, "first"), ("c", 0, 2, "0")]
    assert _placed(ALONE, _cluster(jobs)) == {"a", "c"}


def test_behind_priority_it_orders_jobs_of_equal_priority() -> None:
    """Priority, in the first tier, decides first: the unranked job of higher priority goes
    first; between the two of equal priority the rank decides, not creation time."""
    jobs = [("a", 10, 2, None), ("b", 0, 0, "2"), ("c", 0, 1, "1")]
    assert _placed(BESIDE_THE_DEFAULTS, _cluster(jobs)) == {"a", "c"}
    assert _placed(BESIDE_THE_DEFAULTS, _cluster(jobs), speedups=False) == {"a", "c"}
    assert _placed(WITHOUT, _cluster(jobs)) == {"a", "b"}


def test_it_offers_no_speed_hooks() -> None:
    """The example is a plain Volcano-style plugin: it registers one job order function and
    nothing in the incremental layer, so the job order is compared, not keyed."""
    conf = parse_conf(ALONE, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    session = Session(_cluster([("a", 0, 0, "1")]), conf.tiers)
    RankPlugin(Arguments(RankPlugin.name, {})).on_session_open(session)
    assert session.incremental.of(RankPlugin.name) == Speedups()
    assert not isinstance(session.job_order_key()(session.jobs["ns/a"]), tuple)
