"""scripts/dashboard_png.py's PromQL subset: every query of the dashboard is understood, and the
evaluation does what Prometheus does for these forms (rates over the window, aggregation by
labels, histogram quantiles, matchers, dashboard variables as All)."""

from __future__ import annotations

import json

import pytest

from scripts.dashboard_png import (
    DASHBOARD,
    QueryError,
    Scrape,
    evaluate,
    legend,
    parse,
    parse_exposition,
)


def _scrapes() -> list[Scrape]:
    """Two scrapes 60 s apart of a counter, a gauge and a histogram, from two instances."""

    def at(t: float, n: float) -> Scrape:
        text = f"""\
# TYPE caldera_schedule_attempts counter
caldera_schedule_attempts_total{{result="scheduled"}} {n}
caldera_schedule_attempts_total{{result="error"}} 1
# TYPE caldera_queue_share gauge
caldera_queue_share{{queue_name="a"}} 0.5
caldera_queue_share{{queue_name="b"}} {n / 100}
# TYPE caldera_x_milliseconds histogram
caldera_x_milliseconds_bucket{{le="10.0"}} {n}
caldera_x_milliseconds_bucket{{le="100.0"}} {2 * n}
caldera_x_milliseconds_bucket{{le="+Inf"}} {2 * n}
caldera_x_milliseconds_count {2 * n}
caldera_x_milliseconds_sum 0
"""
        samples = parse_exposition(text, "one")
        for name, found in parse_exposition(text, "two").items():
            samples[name].extend(found)
        return Scrape(t, samples)

    return [at(0, 0), at(60, 30)]


def test_every_dashboard_query_is_understood() -> None:
    """Each target of every panel parses and evaluates (a new panel the drawing cannot follow
    fails here, not when the picture is made)."""
    dashboard = json.loads(DASHBOARD.read_text())
    scrapes = _scrapes()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            evaluate(parse(target["expr"]), scrapes, 1)


def test_rate_sum_by_and_variables() -> None:
    """rate is the increase over the window per second; sum by keeps the named labels; a
    dashboard variable matches everything; an equality matcher filters."""
    scrapes = _scrapes()
    query = 'sum by (result) (rate(caldera_schedule_attempts_total{instance=~"$instance"}[5m]))'
    assert evaluate(parse(query), scrapes, 1) == {
        (("result", "scheduled"),): 1.0,  # 30 per minute on each of two instances
        (("result", "error"),): 0.0,
    }
    one = 'sum(rate(caldera_schedule_attempts_total{result="scheduled", instance="one"}[5m]))'
    assert evaluate(parse(one), scrapes, 1) == {(): 0.5}


def test_max_by_division_and_regex() -> None:
    scrapes = _scrapes()
    query = 'max by (queue_name) (caldera_queue_share{queue_name=~"b|c"}) / 0.1'
    assert evaluate(parse(query), scrapes, 1) == {(("queue_name", "b"),): pytest.approx(3.0)}


def test_histogram_quantile_interpolates_within_a_bucket() -> None:
    """Half the observations are at most 10 ms, all at most 100 ms: the median is 10 ms and the
    75th percentile half way through the second bucket."""
    scrapes = _scrapes()
    rate = "sum by (le) (rate(caldera_x_milliseconds_bucket[5m]))"
    assert evaluate(parse(f"histogram_quantile(0.5, {rate})"), scrapes, 1) == {(): 10.0}
    assert evaluate(parse(f"histogram_quantile(0.75, {rate})"), scrapes, 1) == {(): 55.0}


def test_queries_outside_the_subset_are_refused() -> None:
    with pytest.raises(QueryError):
        parse("avg(caldera_queue_share)")
    with pytest.raises(QueryError):
        parse("caldera_queue_share offset 5m")


def test_legend_format() -> None:
    assert legend("{{queue_name}} deserved", (("queue_name", "a"),)) == "a deserved"
    assert legend("", ()) == "value"
