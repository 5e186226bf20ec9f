"""``caldera hypernode list|get`` as text: the HyperNode tree, tier by tier, with each island's
free and total resources (pure; ``cli.hypernode`` reads the cluster).

    NAME            TIER  TIERNAME  NODES  GPU FREE  CPU FREE      MEMORY FREE
    spine-0         2     spine     16     96/128    480/512       3.5Ti/4Ti
    ├─ rack-0       1     rack      8      32/64     224/256       ...
    └─ rack-1       1     rack      8      64/64     256/256       ...

Free is what the island's ready nodes have left after the requests of the pods bound to them
(any scheduler's), as the scheduler counts it. The GPU column appears when a node has
``nvidia.com/gpu``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from caldera.api.topology_tree import HyperNodeTree
from cli.output import render_table
from scheduler.framework.hypernodes import IslandResources

GPU = "nvidia.com/gpu"
GI = 1024**3 * 1000  # milli-bytes in a GiB


def _cores(milli: int) -> str:
    cores = milli / 1000
    return f"{cores:g}"


def _memory(milli: int) -> str:
    gib = milli / GI
    return f"{gib / 1024:.1f}Ti" if gib >= 1024 else f"{gib:.0f}Gi"


def _pair(res: IslandResources, name: str, show: str) -> str:
    fmt = _memory if show == "memory" else _cores
    return f"{fmt(res.idle.get(name))}/{fmt(res.allocatable.get(name))}"


def tree_rows(tree: HyperNodeTree, roots: Sequence[str]) -> list[tuple[str, str]]:
    """(name as drawn, name) in tree order, children by tier then name."""
    rows: list[tuple[str, str]] = []

    def walk(name: str, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        rows.append((prefix + branch + name, name))
        kids = sorted(tree.islands[name].children, key=lambda k: (tree.islands[k].tier, k))
        below = prefix + ("" if top else ("   " if last else "│  "))
        for i, kid in enumerate(kids):
            walk(kid, below, i == len(kids) - 1, False)

    for root in roots:
        walk(root, "", True, True)
    return rows


def render_tree(
    tree: HyperNodeTree, resources: Mapping[str, IslandResources], roots: Sequence[str]
) -> str:
    """The tree under ``roots`` as a table (see the module docstring)."""
    if not roots:
        return "No resources found\n"
    gpus = any(res.allocatable.get(GPU) for res in resources.values())
    headers = ["NAME", "TIER", "TIERNAME", "NODES"]
    if gpus:
        headers.append("GPU FREE")
    headers += ["CPU FREE", "MEMORY FREE"]
    rows = []
    for drawn, name in tree_rows(tree, roots):
        island, res = tree.islands[name], resources[name]
        row = [drawn, str(island.tier), island.tier_name or "-", str(len(island.nodes))]
        if gpus:
            row.append(_pair(res, GPU, "count"))
        row += [_pair(res, "cpu", "cpu"), _pair(res, "memory", "memory")]
        rows.append(row)
    return render_table(headers, rows)
