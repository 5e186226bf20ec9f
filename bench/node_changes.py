"""What an idle cluster changes on its nodes, and how much of it the scheduler takes as news.

    .venv/bin/python bench/node_changes.py                       # 100 nodes, 60 s window
    .venv/bin/python bench/node_changes.py --nodes 100 --startup-stages --window 120
    .venv/bin/python bench/node_changes.py --smoke                # CI: 5 nodes, 5 s window

A local control plane of its own (``e2e.cluster``), N kwok nodes and nothing else; after a
settling time, a watch of every node (``kubectl get nodes --watch``, the raw objects) for a
window. For each update it prints which fields differ from the node's previous object (paths,
a condition by its type; ``managedFields`` entries by their manager), counted by pattern, and
how many updates the scheduler notes as news: every one before, those
``scheduler.snapshot.node_moved`` holds for now (a heartbeat alone is no news). Both figures
come from one watch of one run, so they are side by side on the same updates.

``--startup-stages`` runs kwok as bench/startup_memory.py does (its node-only stages, the
heartbeat spaced for the size, a Lease for the size), where an idle scheduler was seen taking
about 9 node changes a second at 100 nodes (issue 47).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/*.py are no package)
    sys.path.insert(0, str(REPO))

from bench._procfs import load_average  # noqa: E402
from caldera.api.core import NODE_DECODER  # noqa: E402
from scheduler.snapshot import node_moved  # noqa: E402


def differences(old: Any, new: Any, path: str = "") -> set[str]:
    """The paths at which two decoded JSON values differ; list items of conditions by their
    type and of managedFields by their manager, other lists whole. A purely computational
    function."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: set[str] = set()
        for key in old.keys() | new.keys():
            found |= differences(old.get(key), new.get(key), f"{path}.{key}")
        return found
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and path.endswith((".conditions", ".managedFields"))
    ):
        field = "type" if path.endswith(".conditions") else "manager"
        before = {str(item.get(field)): item for item in old if isinstance(item, dict)}
        after = {str(item.get(field)): item for item in new if isinstance(item, dict)}
        found = set()
        for key in before.keys() | after.keys():
            found |= differences(before.get(key), after.get(key), f"{path}[{key}]")
        return found
    return set() if old == new else {path or "."}


def watch(kubectl: list[str], window: float) -> list[dict[str, Any]]:
    """The node watch events of the next ``window`` seconds, each with its object, after an
    ADDED event for every node there is (the watch starts with a list)."""
    proc = subprocess.Popen(
        [*kubectl, "get", "nodes", "--watch", "--output-watch-events", "-o", "json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=window)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    decoder = json.JSONDecoder()
    events: list[dict[str, Any]] = []
    at = 0
    while True:
        while at < len(out) and out[at].isspace():
            at += 1
        if at >= len(out):
            return events
        try:
            event, at = decoder.raw_decode(out, at)
        except json.JSONDecodeError:  # the last object cut by the kill
            return events
        events.append(event)


def report(events: list[dict[str, Any]], window: float) -> None:
    """Print what the updates among ``events`` changed, and how many are news."""
    previous: dict[str, dict[str, Any]] = {}
    patterns: Counter[str] = Counter()
    updates = moved = 0
    for event in events:
        obj = event["object"]
        name = obj["metadata"]["name"]
        old = previous.get(name)
        previous[name] = obj
        if event["type"] != "MODIFIED" or old is None:
            continue
        updates += 1
        patterns[", ".join(sorted(differences(old, obj)))] += 1
        decode = NODE_DECODER.decode  # as the scheduler's informer decodes it
        if node_moved(decode(json.dumps(old)), decode(json.dumps(obj))):
            moved += 1
    print(f"  {updates} node updates in {window:.0f} s: {updates / window:.2f} a second")
    print(
        f"  the scheduler notes as news: {updates / window:.2f} a second before (every update),"
        f" {moved / window:.2f} after (node_moved: {moved} of {updates})"
    )
    print("  fields that differ from the node's previous object, by update:")
    for pattern, count in patterns.most_common():
        print(f"    {count:5d}  {pattern}")


def main() -> int:
    from bench.startup_memory import node_lease_seconds, node_stages
    from e2e.cluster.control_plane import STAGES, ControlPlane, NodeSpec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--window", type=float, default=60.0, help="seconds watched")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before the window")
    parser.add_argument(
        "--startup-stages", action="store_true", help="kwok as bench/startup_memory.py runs it"
    )
    parser.add_argument("--smoke", action="store_true", help="CI: 5 nodes, 2 s settle, 5 s window")
    args = parser.parse_args()
    if args.smoke:
        args.nodes, args.settle, args.window = 5, 2.0, 5.0
    with tempfile.TemporaryDirectory(prefix="caldera-node-changes-") as tmp:
        directory = Path(tmp) / "cluster"
        directory.mkdir()
        if args.startup_stages:
            stages = directory / "kwok-node-stages.yaml"
            stages.write_text(node_stages(STAGES.read_text(), args.nodes))
            lease = node_lease_seconds(args.nodes)
            plane = ControlPlane(directory, stages=stages, node_lease_seconds=lease)
        else:
            plane = ControlPlane(directory)
        try:
            kubeconfig = plane.up()
            plane.create_nodes(args.nodes, NodeSpec(cpu="32", memory="256Gi"))
            print(f"{args.nodes} kwok nodes Ready; load {load_average()}", flush=True)
            time.sleep(args.settle)
            kubectl = [_kubectl(), f"--kubeconfig={kubeconfig}"]
            events = watch(kubectl, args.window)
            print(f"window of {args.window:.0f} s ended; load {load_average()}")
            report(events, args.window)
        finally:
            plane.down(purge=True)
    return 0


def _kubectl() -> str:
    from e2e.cluster.control_plane import kubectl

    return kubectl()


if __name__ == "__main__":
    sys.exit(main())
