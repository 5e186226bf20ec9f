"""A picture of the Grafana dashboard (docs/dashboard.png), drawn from the dashboard's JSON and
metrics recorded from Caldera's processes, without Grafana.

    python -m scripts.dashboard_png record samples.json   # a local cluster, a workload, /metrics
    python -m scripts.dashboard_png render samples.json docs/dashboard.png

``record`` starts a local control plane (``e2e/cluster``) with four fake GPU nodes, Caldera's
three processes, three queues and a stream of jobs (CPU and GPU gangs that run and finish, and
gangs too big to fit at once), and scrapes each process's ``/metrics`` every few seconds.
``render`` lays the panels out as ``charts/caldera/files/dashboard.json`` places them and plots
each target's query, evaluated over the recorded scrapes by a small PromQL subset: selectors
with matchers, ``rate`` and ``increase``, ``sum``/``max`` ``by``, ``histogram_quantile`` and
division by a number (unit/test_dashboard_png.py checks that every query of the dashboard is
understood). Dashboard variables (``$namespace``, ...) select everything, as "All" does. Drawing
needs matplotlib (the ``simulate`` extra, in ``dev``), which Caldera's processes do not use.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
DASHBOARD: Final = REPO / "charts" / "caldera" / "files" / "dashboard.json"
Labels = tuple[tuple[str, str], ...]
Vector = dict[Labels, float]


# ---- recorded scrapes -----------------------------------------------------------------------


@dataclass(frozen=True)
class Scrape:
    """Every sample of every process at one moment (``t`` seconds from the start)."""

    t: float
    samples: dict[str, list[tuple[dict[str, str], float]]]  # metric name -> (labels, value)


def parse_exposition(text: str, instance: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples of a Prometheus text exposition, each labelled with its ``instance``."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = {**sample.labels, "instance": instance, "namespace": "caldera-system"}
            out.setdefault(sample.name, []).append((labels, float(sample.value)))
    return out


# ---- a PromQL subset ------------------------------------------------------------------------

_TOKEN: Final = re.compile(
    r'\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_:]*)|(?P<str>"(?:[^"\\]|\\.)*")'
    r"|(?P<dur>\[[^\]]*\])|(?P<op>=~|!=|[(){},=/]))"
)


class QueryError(ValueError):
    """A query outside the subset the renderer evaluates."""


@dataclass(frozen=True)
class Node:
    kind: str  # selector, rate, increase, agg, quantile, div
    name: str = ""
    matchers: tuple[tuple[str, str, str], ...] = ()  # (label, op, value)
    by: tuple[str, ...] | None = None
    children: tuple[Node, ...] = ()
    number: float = 0.0


def _tokens(query: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(query):
        if query[pos:].strip() == "":
            break
        match = _TOKEN.match(query, pos)
        if match is None:
            raise QueryError(f"cannot read {query[pos:]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def parse(query: str) -> Node:
    """The query as a tree (``QueryError`` outside the subset)."""
    tokens = _tokens(query)
    pos = 0

    def peek() -> tuple[str, str]:
        return tokens[pos] if pos < len(tokens) else ("", "")

    def take(value: str | None = None) -> tuple[str, str]:
        nonlocal pos
        token = peek()
        if value is not None and token[1] != value:
            raise QueryError(f"expected {value!r} at {token[1]!r} in {query!r}")
        pos += 1
        return token

    def labels() -> tuple[str, ...]:
        take("(")
        names = []
        while peek()[1] != ")":
            names.append(take()[1])
            if peek()[1] == ",":
                take(",")
        take(")")
        return tuple(names)

    def selector(name: str) -> Node:
        matchers = []
        if peek()[1] == "{":
            take("{")
            while peek()[1] != "}":
                label = take()[1]
                op = take()[1]
                value = json.loads(take()[1])
                matchers.append((label, op, value))
                if peek()[1] == ",":
                    take(",")
            take("}")
        return Node("selector", name=name, matchers=tuple(matchers))

    def primary() -> Node:
        kind, value = take()
        if value in ("sum", "max"):
            by = labels() if peek()[1] == "by" and take("by") else None
            take("(")
            inner = expression()
            take(")")
            return Node("agg", name=value, by=by, children=(inner,))
        if value in ("rate", "increase"):
            take("(")
            inner = primary()
            if peek()[0] == "dur":
                take()
            take(")")
            return Node(value, children=(inner,))
        if value == "histogram_quantile":
            take("(")
            q = float(take()[1])
            take(",")
            inner = expression()
            take(")")
            return Node("quantile", number=q, children=(inner,))
        if value == "(":
            inner = expression()
            take(")")
            return inner
        if kind == "name":
            return selector(value)
        raise QueryError(f"unexpected {value!r} in {query!r}")

    def expression() -> Node:
        node = primary()
        while peek()[1] == "/":
            take("/")
            node = Node("div", number=float(take()[1]), children=(node,))
        return node

    tree = expression()
    if pos != len(tokens):
        raise QueryError(f"unread {tokens[pos:]} in {query!r}")
    return tree


def _matches(labels: Mapping[str, str], matchers: Iterable[tuple[str, str, str]]) -> bool:
    for label, op, value in matchers:
        if value.startswith("$"):
            continue  # a dashboard variable set to All
        have = labels.get(label, "")
        if op == "=" and have != value:
            return False
        if op == "!=" and have == value:
            return False
        if op == "=~" and re.fullmatch(value, have) is None:
            return False
    return True


def _key(labels: Mapping[str, str]) -> Labels:
    return tuple(sorted(labels.items()))


RATE_WINDOW: Final = 60.0  # seconds a rate looks back over (the recording is short)


def evaluate(node: Node, scrapes: Sequence[Scrape], at: int) -> Vector:
    """The value of ``node`` at scrape ``at``."""
    if node.kind == "selector":
        found = scrapes[at].samples.get(node.name, [])
        return {_key(labels): v for labels, v in found if _matches(labels, node.matchers)}
    if node.kind in ("rate", "increase"):
        now = evaluate(node.children[0], scrapes, at)
        start = at
        while start > 0 and scrapes[at].t - scrapes[start - 1].t <= RATE_WINDOW:
            start -= 1
        before = evaluate(node.children[0], scrapes, start)
        span = max(scrapes[at].t - scrapes[start].t, 1e-9)
        out: Vector = {}
        for key, value in now.items():
            grown = max(value - before.get(key, 0.0), 0.0)
            out[tuple((k, v) for k, v in key if k != "__name__")] = (
                grown / span if node.kind == "rate" else grown
            )
        return out
    if node.kind == "agg":
        inner = evaluate(node.children[0], scrapes, at)
        groups: dict[Labels, list[float]] = {}
        for key, value in inner.items():
            kept = tuple((k, v) for k, v in key if node.by is not None and k in node.by)
            groups.setdefault(kept, []).append(value)
        reduce: Callable[[list[float]], float] = sum if node.name == "sum" else max
        return {key: reduce(values) for key, values in groups.items()}
    if node.kind == "div":
        return {k: v / node.number for k, v in evaluate(node.children[0], scrapes, at).items()}
    if node.kind == "quantile":
        return _quantiles(node.number, evaluate(node.children[0], scrapes, at))
    raise QueryError(node.kind)


def _quantiles(q: float, buckets: Vector) -> Vector:
    """Prometheus' histogram_quantile over each group of ``le`` buckets."""
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for key, count in buckets.items():
        bound = dict(key).get("le")
        if bound is None:
            continue
        rest = tuple((k, v) for k, v in key if k != "le")
        groups.setdefault(rest, []).append((float(bound), count))
    out: Vector = {}
    for key, pairs in groups.items():
        pairs.sort()
        total = pairs[-1][1] if pairs else 0.0
        if total <= 0:
            continue
        rank, prev_le, prev_count = q * total, 0.0, 0.0
        for le, count in pairs:
            if count >= rank:
                if math.isinf(le):
                    out[key] = prev_le
                else:
                    fraction = (rank - prev_count) / max(count - prev_count, 1e-9)
                    out[key] = prev_le + (le - prev_le) * fraction
                break
            prev_le, prev_count = le, count
    return out


def legend(template: str, key: Labels) -> str:
    """Grafana's legendFormat: ``{{label}}`` replaced by the series' label."""
    labels = dict(key)
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template) or "value"


# ---- drawing ----------------------------------------------------------------------------------


def render(dashboard: Mapping[str, Any], scrapes: Sequence[Scrape], out: Path) -> None:
    """Draw every panel of ``dashboard`` where its gridPos puts it, over the recording."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    top = 1.2  # rows of the title and variables bar
    fig = plt.figure(figsize=(16, (rows + top) * 0.36), facecolor="#111217")
    height = rows + top
    names = [v["name"] for v in dashboard["templating"]["list"]]
    bar = "    ".join(f"{n}: {'Prometheus' if n == 'datasource' else 'All'}" for n in names)
    fig.text(0.01, 1 - 0.45 / height, dashboard["title"], color="#d8d9da", fontsize=15)
    fig.text(0.25, 1 - 0.45 / height, bar, color="#8e8e8e", fontsize=10)
    minutes = [s.t / 60 for s in scrapes]
    for panel in panels:
        pos = panel["gridPos"]
        box = (
            pos["x"] / 24 + 0.035,
            1 - (pos["y"] + pos["h"] + top) / height + 0.02,
            pos["w"] / 24 - 0.05,
            pos["h"] / height - 0.05,
        )
        ax = fig.add_axes(box, facecolor="#181b1f")
        ax.set_title(panel["title"], color="#d8d9da", fontsize=10, loc="left")
        ax.tick_params(colors="#8e8e8e", labelsize=7)
        for spine in ax.spines.values():
            spine.set_color("#2c3235")
        if panel["type"] == "heatmap":
            _heatmap(ax, panel, scrapes, minutes)
            continue
        for target in panel["targets"]:
            tree = parse(target["expr"])
            series: dict[Labels, list[float]] = {}
            for at in range(len(scrapes)):
                for key, value in evaluate(tree, scrapes, at).items():
                    series.setdefault(key, [math.nan] * len(scrapes))[at] = value
            for key, values in sorted(series.items())[:6]:
                ax.plot(minutes, values, linewidth=1.2, label=legend(target["legendFormat"], key))
        if ax.lines:
            ax.legend(fontsize=6, loc="upper left", frameon=False, labelcolor="#d8d9da", ncol=2)
        ax.set_xlabel("minutes", color="#8e8e8e", fontsize=7)
    fig.savefig(out, dpi=72, facecolor=fig.get_facecolor())
    plt.close(fig)


def _heatmap(
    ax: Any, panel: Mapping[str, Any], scrapes: Sequence[Scrape], minutes: list[float]
) -> None:
    tree = parse(panel["targets"][0]["expr"])
    columns = [evaluate(tree, scrapes, at) for at in range(len(scrapes))]
    bounds = sorted({float(dict(k)["le"]) for col in columns for k in col if "le" in dict(k)})
    finite = [b for b in bounds if not math.isinf(b)]
    grid = []
    for le in finite:
        row = []
        for col in columns:
            counts = {float(dict(k)["le"]): v for k, v in col.items()}
            below = max((b for b in finite if b < le), default=None)
            row.append(counts.get(le, 0.0) - (counts.get(below, 0.0) if below is not None else 0.0))
        grid.append(row)
    if grid:
        ax.imshow(
            grid,
            aspect="auto",
            origin="lower",
            cmap="Oranges",
            extent=(minutes[0], minutes[-1], 0, len(finite)),
        )
        ax.set_yticks([i + 0.5 for i in range(len(finite))])
        ax.set_yticklabels([f"{b / 1000:g}s" for b in finite], fontsize=6)
    ax.set_xlabel("minutes", color="#8e8e8e", fontsize=7)


# ---- recording --------------------------------------------------------------------------------


def record(out: Path, *, duration: float, interval: float = 5.0) -> None:
    """Run a workload on a local cluster for ``duration`` seconds, scraping every process."""
    import random
    import tempfile
    import time
    import urllib.request

    from e2e.cluster.caldera_processes import start_caldera
    from e2e.cluster.control_plane import ControlPlane, NodeSpec

    rng = random.Random(18)  # noqa: S311 - a reproducible workload, not a secret
    with tempfile.TemporaryDirectory() as tmp:
        plane = ControlPlane(Path(tmp) / "cluster")
        plane.up()
        try:
            plane.create_nodes(4, NodeSpec(cpu="16", memory="64Gi", pods="110", gpu="4"))
            ports = start_caldera(plane)
            for name, weight, gpus in (("research", 3, None), ("batch", 1, None), ("gpu", 2, "6")):
                spec: dict[str, Any] = {"weight": weight}
                if gpus:
                    spec["capability"] = {"nvidia.com/gpu": gpus}
                queue = {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": spec,
                }
                plane.kubectl("apply", "-f", "-", input=json.dumps(queue))
            scrapes: list[dict[str, Any]] = []
            started = time.monotonic()
            submitted = 0
            while time.monotonic() - started < duration:
                for _ in range(rng.randint(1, 3)):
                    plane.kubectl("apply", "-f", "-", input=json.dumps(_job(rng, submitted)))
                    submitted += 1
                samples: dict[str, list[tuple[dict[str, str], float]]] = {}
                for process in ("caldera-controllers", "caldera-scheduler", "caldera-webhook"):
                    url = f"http://127.0.0.1:{ports[process]}/metrics"
                    with urllib.request.urlopen(url, timeout=5) as answer:
                        for name, found in parse_exposition(
                            answer.read().decode(), process
                        ).items():
                            samples.setdefault(name, []).extend(found)
                scrapes.append({"t": time.monotonic() - started, "samples": samples})
                time.sleep(interval)
        finally:
            plane.down()
    out.write_text(json.dumps({"jobs": submitted, "scrapes": scrapes}))


def _job(rng: Any, index: int) -> dict[str, Any]:
    """A job of the recorded workload: a CPU or GPU gang that runs a while and succeeds, or
    (one in ten) a gang too big to fit until others finish."""
    kind = rng.choice(["research", "research", "batch", "gpu"])
    replicas = rng.randint(2, 4)
    requests = {"cpu": "2", "memory": "4Gi"}
    if kind == "gpu":
        requests["nvidia.com/gpu"] = "1"
    if rng.random() < 0.1:
        replicas = 12
    annotations = {
        "kwok.caldera.io/run-for": f"{rng.randint(20, 60)}s",
        "kwok.caldera.io/exit-code": "0",
    }
    limits = {"nvidia.com/gpu": requests["nvidia.com/gpu"]} if kind == "gpu" else {}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"{kind}-{index}", "namespace": "default"},
        "spec": {
            "queue": kind,
            "minAvailable": replicas,
            "ttlSecondsAfterFinished": 30,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": annotations},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "busybox:1.36",
                                    "resources": {"requests": requests, "limits": limits},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def load(path: Path) -> list[Scrape]:
    data = json.loads(path.read_text())
    return [
        Scrape(s["t"], {k: [(dict(lv[0]), lv[1]) for lv in v] for k, v in s["samples"].items()})
        for s in data["scrapes"]
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.dashboard_png")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run a workload on a local cluster and scrape /metrics")
    rec.add_argument("samples", type=Path)
    rec.add_argument("--duration", type=float, default=240.0, help="seconds (default 240)")
    draw = sub.add_parser("render", help="draw the dashboard over recorded samples")
    draw.add_argument("samples", type=Path)
    draw.add_argument("png", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.samples, duration=args.duration)
    else:
        render(json.loads(DASHBOARD.read_text()), load(args.samples), args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
