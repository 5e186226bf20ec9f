"""The scheduler (its snapshot and proportion plugin) on Queue specs the webhook would refuse
(stored without it): a weight below 1 counts as 1 and nothing divides by it; a guarantee above
the capability is given (the guarantee wins). No session fails on them."""

from __future__ import annotations

import msgspec
import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import Queue, QueueSpec
from scheduler.api.types import QueueInfo
from scheduler.framework.plugin import Arguments
from scheduler.plugins.proportion import ProportionPlugin
from scheduler.snapshot import queue_info
from unit.sched_fixtures import add_job, cpu, cpu_cluster, open_session


@pytest.mark.parametrize(
    ("a", "want_a", "want_b"),
    [
        pytest.param(QueueInfo("a", weight=-3), "5", "5", id="negative-weight-is-1"),
        pytest.param(QueueInfo("a", weight=0), "5", "5", id="zero-weight-is-1"),
        pytest.param(
            QueueInfo("a", capability=cpu("2"), guarantee=cpu("4")),
            "4",
            "6",
            id="guarantee-above-capability",
        ),
    ],
)
def test_bad_queue_specs_schedule(a: QueueInfo, want_a: str, want_b: str) -> None:
    """Deserved shares stay defined and non-negative beside a valid queue of weight 1."""
    cluster = cpu_cluster({"n0": "10"}, [a, QueueInfo("b")])
    add_job(cluster, "ja", queue="a", pending=50)
    add_job(cluster, "jb", queue="b", pending=50)
    plugin = ProportionPlugin(Arguments("proportion", {}))
    open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu(want_a)
    assert plugin.queue_attrs["b"].deserved == cpu(want_b)


def test_the_snapshot_reads_a_weight_below_1_as_1() -> None:
    """A Queue stored with weight -3 (before the CRD's bounds) enters the snapshot with 1."""
    stored = Queue(metadata=ObjectMeta(name="old"), spec=QueueSpec(weight=-3))
    assert queue_info(stored).weight == 1
    assert queue_info(msgspec.structs.replace(stored, spec=QueueSpec(weight=7))).weight == 7
