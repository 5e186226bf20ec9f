"""Markdown tables of the privilege audit, as ``docs/reliability.md`` shows them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from e2e.audit.rbac import Comparison
from e2e.audit.secrets import Finding
from e2e.audit.usage import Right

__all__ = ["findings_table", "rights_table", "unused_table"]


def _group(right: Right) -> str:
    if right.non_resource:
        return "(non-resource URL)"
    return right.group or "core"


def _table(header: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rights_table(comparisons: Mapping[str, Comparison]) -> str:
    """Every right each process used: times used, refused (403), and whether its roles grant
    it ("no (n)" when n of its requests are not allowed by any rule)."""
    rows = [
        (
            process,
            _group(row.right),
            row.right.resource,
            row.right.verb,
            row.used,
            row.refused,
            "yes" if row.granted else f"**no** ({row.ungranted})",
        )
        for process, comparison in comparisons.items()
        for row in comparison.rows
    ]
    header = ("process", "API group", "resource", "verb", "used", "refused", "granted")
    return _table(header, rows)


def unused_table(comparisons: Mapping[str, Comparison]) -> str:
    """Every right a chart rule grants that the process never used, with the rule it is in."""
    rows = [
        (
            process,
            _group(u.right),
            u.right.resource
            + (f" [{', '.join(u.rule.resource_names)}]" if u.rule.resource_names else ""),
            u.right.verb,
            f"{u.rule.source} rule {u.rule.index}"
            + (f" (in {u.rule.namespace})" if u.rule.namespace is not None else ""),
        )
        for process, comparison in comparisons.items()
        for u in comparison.unused
    ]
    return _table(("process", "API group", "resource", "verb", "granted by"), rows)


def findings_table(findings: Iterable[Finding]) -> str:
    """Where secrets were seen (never the secrets)."""
    return _table(("where", "column", "what"), ((f.where, f.column, f.what) for f in findings))
