"""A queue's shares over time (dashboard.history): bounded samples, forgotten queues, and the
charts drawn from them; the queue page shows them."""

from __future__ import annotations

import datetime as dt

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from dashboard.cache import ClusterCache
from dashboard.history import CHART_HEIGHT, CHART_WIDTH, ShareHistory, charts
from dashboard.live import Hub
from dashboard.server import make_app
from unit.dashboard_objects import T0, queue


def _at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_samples_are_bounded_per_queue_and_in_number_of_queues() -> None:
    """However long the dashboard runs and however many queues there are, it keeps the last
    max_points samples of at most max_queues queues (by name)."""
    history = ShareHistory(max_points=3, max_queues=2)
    for minute in range(10):
        history.record(_at(minute), [queue(n, allocated={"cpu": str(minute)}) for n in "cab"])
    assert [s.allocated["cpu"] for s in history.samples("a")] == [7000, 8000, 9000]
    assert len(history.samples("b")) == 3
    assert history.samples("c") == ()  # third by name: not kept


def test_a_queue_gone_from_the_cache_is_forgotten() -> None:
    history = ShareHistory()
    history.record(_at(0), [queue("a"), queue("b")])
    history.record(_at(1), [queue("b")])
    assert history.samples("a") == ()
    assert len(history.samples("b")) == 2


def test_charts_draw_held_deserved_and_capability_and_say_it_in_words() -> None:
    """cpu held from 2 to 6 cores against 4 deserved and 8 capability: the held line rises,
    the deserved line sits at half the height, and the summary says the same."""
    history = ShareHistory()
    for minute, held in ((0, "2"), (30, "4"), (60, "6")):
        history.record(
            _at(minute),
            [queue("a", allocated={"cpu": held}, deserved={"cpu": "4"}, capability={"cpu": "8"})],
        )
    (chart,) = charts(history.samples("a"))
    assert chart.resource == "cpu"
    assert chart.top == "8"
    points = [tuple(map(float, p.split(","))) for p in chart.allocated.split()]
    assert points == [
        (0.0, CHART_HEIGHT * 0.75),
        (CHART_WIDTH / 2, CHART_HEIGHT / 2),
        (CHART_WIDTH, CHART_HEIGHT * 0.25),
    ]
    assert {p.split(",")[1] for p in chart.deserved.split()} == {f"{CHART_HEIGHT / 2:.1f}"}
    assert (
        chart.summary
        == "cpu held over the last 60 min: from 2 to 6, at most 6; deserved 4; capability 8"
    )


def test_a_resource_never_held_nor_promised_has_no_chart() -> None:
    history = ShareHistory()
    history.record(_at(0), [queue("a", allocated={"cpu": "1"})])
    assert [c.resource for c in charts(history.samples("a"))] == ["cpu"]
    assert charts(()) == ()


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40))
def test_every_point_lies_in_the_chart(helds: list[int]) -> None:
    history = ShareHistory()
    for minute, held in enumerate(helds):
        history.record(_at(minute), [queue("a", allocated={"cpu": f"{held}m"})])
    for chart in charts(history.samples("a")):
        for point in chart.allocated.split():
            x, y = map(float, point.split(","))
            assert 0 <= x <= CHART_WIDTH
            assert 0 <= y <= CHART_HEIGHT


async def test_the_queue_page_shows_its_shares_as_labelled_images() -> None:
    """The application samples the cache when it starts: the queue page draws the chart, an
    image with its summary as its label."""
    cache = ClusterCache.static(
        queues=[queue("q", allocated={"cpu": "3"}, deserved={"cpu": "4"})],
        jobs=[],
        podgroups=[],
        pods=[],
        nodes=[],
    )
    app = make_app(cache, Hub(), clock=lambda: T0)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        page = await (await client.get("/queues/q")).text()
    assert "Shares over time" in page
    assert (
        'role="img" aria-label="cpu held over the last 0 min: from 3 to 3, at most 3; deserved 4"'
        in page
    )
