"""HyperNode validation for /hypernodes/validate (CREATE and UPDATE), Volcano's rules and
messages: at least one member; each member's selector names exactly one of exactMatch,
regexMatch and labelMatch (Volcano's CRD says so with CEL rules, which Caldera's generated CRD
lacks, so the webhook says it); an exact name and a pattern are required, a pattern must
compile. Beyond Volcano: no member cycle (a HyperNode that would contain one of its own
ancestors), found among the cached HyperNodes of the `ClusterView`.
"""

from __future__ import annotations

import msgspec

from caldera.api.fielderrors import invalid
from caldera.api.topology import HyperNode, MemberSelector
from caldera.api.topology_tree import member_cycle, regex_error
from webhooks.view import ClusterView

__all__ = ["validate_hypernode"]


def _selector_errors(selector: MemberSelector, path: str) -> list[str]:
    chosen = [
        s
        for s in (selector.exact_match, selector.regex_match, selector.label_match)
        if s is not None
    ]
    shown = msgspec.to_builtins(selector)
    if not chosen:
        return [
            invalid(
                path,
                shown,
                "member selector must have one of exactMatch, regexMatch, or labelMatch",
            )
        ]
    if len(chosen) > 1:
        return [
            invalid(
                path,
                shown,
                "cannot specify more than one selector type (exactMatch, regexMatch, labelMatch)",
            )
        ]
    if selector.exact_match is not None and not selector.exact_match.name:
        return [invalid(f"{path}.exactMatch.name", "", "member exactMatch name is required")]
    if selector.regex_match is not None:
        pattern = selector.regex_match.pattern
        if not pattern:
            return [
                invalid(f"{path}.regexMatch.pattern", "", "member regexMatch pattern is required")
            ]
        problem = regex_error(pattern)
        if problem is not None:
            return [
                invalid(
                    f"{path}.regexMatch.pattern",
                    pattern,
                    f"member regexMatch pattern is invalid: {problem}",
                )
            ]
    return []


def validate_hypernode(hypernode: HyperNode, cluster: ClusterView) -> str:
    """The rejection message for ``hypernode``, or "" when it is valid."""
    errors: list[str] = []
    members = hypernode.spec.members
    if not members:
        errors.append(invalid("spec.members", [], "member must have at least one member"))
    for i, member in enumerate(members):
        errors += _selector_errors(member.selector, f"spec.members[{i}].selector")
    if not errors:
        cycle = member_cycle(list(cluster.hypernodes()), hypernode)
        if cycle is not None:
            errors.append(
                invalid(
                    "spec.members",
                    hypernode.metadata.name,
                    f"hypernode member cycle: {' -> '.join(cycle)}",
                )
            )
    return "; ".join(errors)
