"""Generate charts/caldera/README.md from the chart's values and their comments.

    python -m scripts.chart_readme           # write charts/caldera/README.md
    python -m scripts.chart_readme --check   # exit 1 when the committed README is stale

Every value is described by the ``# --`` comment above it in values.yaml (helm-docs'
convention); a process setting without one takes the help of the setting itself
(``caldera.settings``), the same text as ``caldera <process> --help``. The keys the three processes
share (replicas, resources, ...) are one row with the three defaults, described by the first of
the three comments. A value without any description is an error, so none is left undocumented
(unit/test_chart_readme.py runs the check).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from caldera.settings import (
    ControllersSettings,
    ProcessSettings,
    SchedulerSettings,
    WebhookSettings,
)

REPO: Final = Path(__file__).resolve().parent.parent
CHART: Final = REPO / "charts" / "caldera"
README: Final = CHART / "README.md"
PROCESSES: Final[Mapping[str, type[ProcessSettings]]] = {
    "controllers": ControllersSettings,
    "scheduler": SchedulerSettings,
    "webhook": WebhookSettings,
}
_KEY: Final = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*):(?P<rest>.*)$")


class ReadmeError(Exception):
    """values.yaml cannot be documented as it stands (a value without a description)."""


@dataclass(frozen=True)
class Value:
    """One documented value: its dotted path, default and description."""

    path: str
    default: Any
    description: str


def comments(text: str) -> dict[str, str]:
    """The ``# --`` comment of each key of a values file, by dotted path. A comment belongs to
    the key right below it; its continuation lines start with ``#``; a blank line ends it."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    block_indent: int | None = None  # inside a block scalar (key: |) deeper than this
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if body.startswith("--"):
                pending = [body.removeprefix("--").strip()]
            elif pending:
                pending.append(body)
            continue
        match = _KEY.match(line)
        if match is None:  # a list item or a flow continuation
            pending = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [match["key"]])
        if pending:
            found[path] = " ".join(pending)
        pending = []
        rest = match["rest"].split("#", 1)[0].strip()
        if rest in ("|", ">", "|-", ">-"):
            block_indent = indent
        stack.append((indent, match["key"]))
    return found


def _setting_help(path: str) -> str | None:
    process, _, rest = path.partition(".settings.")
    cls = PROCESSES.get(process)
    if cls is None or not rest:
        return None
    for f in dataclasses.fields(cls):
        if f.name == rest:
            help_text: str = f.metadata.get("help", "")
            return help_text if help_text.endswith(".") else help_text + "."
    return None


def values(text: str) -> list[Value]:
    """Every documented value, in file order: a key with a comment, or a leaf (anything but a
    non-empty mapping); mappings without a comment are walked into."""
    data = yaml.safe_load(text)
    notes = comments(text)

    def same_key(path: str) -> list[str]:
        """The path, and for a key the processes share, the same key of each process (one
        comment, in any of the three blocks, describes all three)."""
        process, _, rest = path.partition(".")
        if process in PROCESSES and rest and not rest.startswith("settings"):
            return [path] + [f"{p}.{rest}" for p in PROCESSES if p != process]
        return [path]

    def note_of(path: str) -> str | None:
        found = next((notes[p] for p in same_key(path) if p in notes), None)
        setting = _setting_help(path)
        if setting and found:
            return f"{setting} {found}"  # the setting's meaning, then the chart's remark
        return found or setting

    def notes_below(path: str) -> bool:
        return path.endswith(".settings") or any(
            note.startswith(p + ".") for p in same_key(path) for note in notes
        )

    def walk(node: Mapping[str, Any], prefix: str) -> Iterator[Value]:
        for key, value in node.items():
            path = f"{prefix}{key}"
            note = note_of(path)
            if isinstance(value, dict) and value and (notes_below(path) or not note):
                if note:
                    yield Value(path, None, note)
                yield from walk(value, path + ".")
            else:
                yield Value(path, value, note or "")

    return list(walk(data, ""))


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell (no HTML tags, no column breaks)."""
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _shown(value: Any) -> str:
    if isinstance(value, str) and "\n" in value:
        return "(see values.yaml)"
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def render(text: str, chart: Mapping[str, Any]) -> str:
    """The README for a values file and the chart's Chart.yaml."""
    rows = values(text)
    undocumented = [v.path for v in rows if not v.description]
    per_process: dict[str, dict[str, Value]] = {}
    for v in rows:
        process, _, rest = v.path.partition(".")
        if process in PROCESSES and rest and not rest.startswith("settings"):
            per_process.setdefault(rest, {})[process] = v
    shared = {rest for rest, by in per_process.items() if set(by) == set(PROCESSES)}
    undocumented = [
        p
        for p in undocumented
        if p.partition(".")[2] not in shared
        or not any(v.description for v in per_process[p.partition(".")[2]].values())
    ]
    if undocumented:
        raise ReadmeError(
            "values without a description (a '# --' comment above them in values.yaml): "
            + ", ".join(undocumented)
        )
    out = [
        "<!-- Generated by `python -m scripts.chart_readme` from values.yaml. Do not edit:",
        "     change the comments in values.yaml and run it again (a unit test fails when this",
        "     is stale). -->",
        f"# {chart['name']}",
        "",
        " ".join(str(chart["description"]).split()),
        "",
        f"Chart version {chart['version']}, Caldera {chart['appVersion']}, Kubernetes "
        f"`{chart.get('kubeVersion', 'any')}`.",
        "",
        "```",
        "helm install caldera charts/caldera --namespace caldera-system --create-namespace",
        "```",
        "",
        "The documentation: [docs/install.md](../../docs/install.md) (installing, certificates,"
        " permissions),",
        "[docs/configuration.md](../../docs/configuration.md) (every value in detail) and",
        "[docs/migrating-from-volcano.md](../../docs/migrating-from-volcano.md) (from Volcano's "
        "chart).",
        "",
        "## Values",
        "",
    ]
    table = ["| Key | Default | Description |", "|---|---|---|"]
    done_shared: set[str] = set()
    settings_tables: dict[str, list[str]] = {}
    for v in rows:
        process, _, rest = v.path.partition(".")
        if process in PROCESSES and rest.startswith("settings."):
            settings_tables.setdefault(process, []).append(
                f"| `{rest.removeprefix('settings.')}` | {_shown(v.default)} | "
                f"{_cell(v.description)} |"
            )
            continue
        if process in PROCESSES and rest in shared:
            if rest in done_shared:
                continue
            done_shared.add(rest)
            by = per_process[rest]
            described = next(by[p].description for p in PROCESSES if by[p].description)
            defaults = {_shown(by[p].default) for p in PROCESSES}
            shown = (
                defaults.pop()
                if len(defaults) == 1
                else ", ".join(f"{p}: {_shown(by[p].default)}" for p in PROCESSES)
            )
            table.append(f"| `<process>.{rest}` | {shown} | {_cell(described)} |")
            continue
        default = "" if v.default is None else _shown(v.default)
        table.append(f"| `{v.path}` | {default} | {_cell(v.description)} |")
    out += [
        "`<process>` is `controllers`, `scheduler` or `webhook`: each has the same keys.",
        "",
        *table,
        "",
    ]
    for process, lines in settings_tables.items():
        out += [
            f"### `{process}.settings`",
            "",
            f"The flags of `caldera {process}` (`kube_qps` is `--kube-qps`); null leaves a "
            "flag out.",
            "",
            "| Setting | Default | Description |",
            "|---|---|---|",
            *lines,
            "",
        ]
    return "\n".join(out)


def generate() -> str:
    """The README text for the chart as it is."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return render((CHART / "values.yaml").read_text(), chart)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.chart_readme")
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md is stale")
    args = parser.parse_args(argv)
    try:
        text = generate()
    except ReadmeError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.check:
        if not README.exists() or README.read_text() != text:
            print(f"{README} is stale: run python -m scripts.chart_readme", file=sys.stderr)
            return 1
        return 0
    README.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
