"""Least privilege, checked: what Caldera's processes did as their chart ServiceAccounts
against what their roles grant, and no secret in their logs.

    python -m bench.privilege --audit-log CLUSTER/logs/audit.log --release R --namespace NS
    python -m bench.privilege --audit-log A.log --rbac DIR/rbac.yaml
    python -m bench.privilege --scan controllers.log scheduler.log --known-file tokens.txt
    python -m bench.privilege --smoke     # CI: the checks on a made-up audit log and log line

The audit log is the local control plane's (``e2e/cluster``: Metadata level, every request made
with a ServiceAccount token). The roles are the chart's, rendered for release R in namespace NS
(``helm template``), or the RBAC file ``e2e/cluster/identities.create_identities`` wrote. The
report is a markdown table of every right each process used (times, refused, granted) and one
of the rights granted but never used. ``--scan`` looks for private keys, certificates, tokens
and the values of ``--known-file`` (one secret a line) in the given files.

``--smoke`` renders the chart's roles and checks the command on what it must find: a made-up
audit log in which every process uses one right its role grants, one process also uses one it is
not granted and is refused once, and a log line holding a private key.

Exit status 1 when a used right is not granted, a request was refused, or a secret was found.
The chaos run calls ``rights_report`` and ``scan_files`` directly; the logic is in ``e2e/audit``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

# `python bench/privilege.py` as well as `-m`: the test helpers (e2e/) are not installed.
REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from e2e.audit.rbac import Comparison, compare_processes, granted_rules, service_accounts  # noqa: E402
from e2e.audit.report import findings_table, rights_table, unused_table  # noqa: E402
from e2e.audit.secrets import Finding, KnownSecret, Scanner, known_secret  # noqa: E402
from e2e.audit.usage import parse_audit  # noqa: E402
from e2e.cluster.identities import RBAC_KINDS, helm_binary, render_chart  # noqa: E402


def _lines(paths: Iterable[Path]) -> Iterator[str]:
    for path in paths:
        with path.open(errors="replace") as f:
            yield from f


def rights_report(
    audit_logs: Sequence[Path], rbac: Sequence[Mapping[str, Any]]
) -> dict[str, Comparison]:
    """Each process of ``rbac`` (rendered ServiceAccounts and roles) compared with what its
    ServiceAccount did according to ``audit_logs`` (rotated files too, in any order)."""
    return compare_processes(parse_audit(_lines(audit_logs)), rbac)


def scan_files(paths: Iterable[Path], known: Iterable[KnownSecret] = ()) -> list[Finding]:
    """Secrets in the lines of ``paths``, located as "<file name>:<line>"."""
    scanner = Scanner(known)
    findings: list[Finding] = []
    for path in paths:
        with path.open(errors="replace") as f:
            findings += scanner.lines(f, path.name)
    return findings


def report_text(comparisons: Mapping[str, Comparison]) -> str:
    """The markdown printed by the command: the rights table, then the unused grants."""
    unused = sum(len(c.unused) for c in comparisons.values())
    return (
        "## Rights used\n\n"
        + rights_table(comparisons)
        + f"\n## Granted, never used ({unused})\n\n"
        + unused_table(comparisons)
    )


def failures(comparisons: Mapping[str, Comparison]) -> list[str]:
    """What breaks least privilege: a used right not granted, a refused request, a process
    that made no request at all (it did not run as its ServiceAccount)."""
    problems: list[str] = []
    for process, comparison in comparisons.items():
        if not comparison.rows:
            problems.append(f"{process}: no request in the audit log")
        for row in comparison.ungranted:
            r = row.right
            problems.append(f"{process}: {r.verb} {r.group}/{r.resource} used, not granted")
        if comparison.refused:
            problems.append(f"{process}: {comparison.refused} requests refused (403)")
    return problems


def _rbac(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.rbac:
        docs = list(yaml.safe_load_all(Path(args.rbac).read_text()))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            values = Path(tmp) / "values.yaml"
            values.write_text(Path(args.values).read_text() if args.values else "{}\n")
            docs = render_chart(
                helm_binary(), values, release=args.release, namespace=args.namespace
            )
    return [d for d in docs if d and d.get("kind") in RBAC_KINDS]


def _audit_line(audit_id: str, user: str, verb: str, right: tuple[str, str], code: int) -> str:
    group, resource = right
    return json.dumps(
        {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "stage": "ResponseComplete",
            "auditID": audit_id,
            "user": {"username": user},
            "verb": verb,
            "objectRef": {"apiGroup": group, "resource": resource},
            "responseStatus": {"code": code},
        }
    )


def smoke(rbac: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the command gets wrong on a made-up run whose answer is known (empty: nothing)."""
    users = service_accounts(rbac)
    lines: list[str] = []
    for n, user in enumerate(sorted(users)):
        # A ClusterRole's plain rule: it holds everywhere, for any name.
        rule = next(
            r
            for r in granted_rules(rbac, user)
            if r.namespace is None and not r.builtin and not r.resource_names and r.resources
        )
        right = (rule.api_groups[0], rule.resources[0])
        lines.append(_audit_line(f"a{n}", user, rule.verbs[0], right, 200))
    intruder = sorted(users)[0]
    lines.append(_audit_line("x", intruder, "delete", ("", "nodes"), 403))
    with tempfile.TemporaryDirectory() as tmp:
        audit = Path(tmp) / "audit.log"
        audit.write_text("\n".join(lines) + "\n")
        log = Path(tmp) / "process.log"
        log.write_text('{"event": "oops", "key": "-----BEGIN RSA PRIVATE KEY-----"}\n')
        comparisons = rights_report([audit], rbac)
        findings = scan_files([log])
    expected = {f"{users[intruder]}: delete /nodes used, not granted"}
    expected.add(f"{users[intruder]}: 1 requests refused (403)")
    wrong = [f"missing: {p}" for p in sorted(expected - set(failures(comparisons)))]
    wrong += [f"unexpected: {p}" for p in sorted(set(failures(comparisons)) - expected)]
    if len(comparisons) != len(users):
        wrong.append(f"{len(comparisons)} processes compared, {len(users)} in the chart")
    if len(findings) != 1:
        wrong.append(f"{len(findings)} secrets found in a line holding one private key")
    return wrong


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--audit-log", type=Path, nargs="+", default=[], help="audit log files")
    parser.add_argument("--release", default="caldera", help="the chart's release name")
    parser.add_argument("--namespace", default="caldera-system", help="the release namespace")
    parser.add_argument("--values", help="chart values file used to render the roles")
    parser.add_argument("--rbac", help="rendered RBAC objects (YAML) instead of rendering")
    parser.add_argument("--scan", type=Path, nargs="+", default=[], help="logs to scan")
    parser.add_argument(
        "--known-file", type=Path, help="secrets to look for in --scan files, one a line"
    )
    parser.add_argument("--smoke", action="store_true", help="check the checks (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        wrong = smoke(_rbac(args))
        for problem in wrong:
            print(f"FAIL smoke: {problem}", file=sys.stderr)
        print("privilege smoke: " + ("FAIL" if wrong else "the checks find what they must"))
        return 1 if wrong else 0
    if not args.audit_log and not args.scan:
        parser.error("give --audit-log, --scan or both")
    problems: list[str] = []
    if args.audit_log:
        comparisons = rights_report(args.audit_log, _rbac(args))
        print(report_text(comparisons))
        problems += failures(comparisons)
    if args.scan:
        known = []
        if args.known_file:
            values = args.known_file.read_text().splitlines()
            known = [
                known_secret(f"{args.known_file.name}:{n}", v) for n, v in enumerate(values, 1)
            ]
        findings = scan_files(args.scan, known)
        print(f"## Secrets seen ({len(findings)})\n\n" + findings_table(findings))
        problems += [str(f) for f in findings]
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
