"""Secrets in text: private keys, certificates, tokens, and secrets known by value.

Two kinds of evidence:

- shapes any secret of its kind has: a PEM header of a private key (PKCS#1, PKCS#8, EC,
  OpenSSH) or of a certificate, the same header base64-encoded as a Secret's ``data`` holds it,
  and a JSON Web Token (a ServiceAccount token: three base64url parts, the first two JSON);
- the values themselves (``KnownSecret``: a minted token, an ssh key read from the ssh plugin's
  Secret): the whole value, its base64 form, and for a multi-line value such as a PEM key each
  line of its body, so that a key logged with escaped newlines, cut short or re-wrapped is still
  found.

A finding says where (file and line, or the Event) and what, never the secret itself.

Matching known values is one pass over each line: runs of base64-alphabet characters are
looked up by their 16-character windows in a dict of the values' prefixes, so the cost does not
grow with the number of known secrets (the chaos run knows hundreds of ssh keys).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "KnownSecret", "Scanner", "event_text", "known_secret"]

WINDOW = 16
"""Known values are matched by their first WINDOW characters; shorter ones are ignored."""

SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("PEM private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
    ("PEM certificate", re.compile(r"-----BEGIN (?:X509 |TRUSTED )?CERTIFICATE-----")),
    # base64 of "-----BEGIN " at the start of an encoded value (a Secret's data field).
    ("base64 PEM block", re.compile(r"LS0tLS1CRUdJTi")),
    (
        "JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),
    ),
)
_RUN = re.compile(rf"[A-Za-z0-9+/=_-]{{{WINDOW},}}")


@dataclass(frozen=True, slots=True)
class KnownSecret:
    """A secret value to look for, by its label (what the finding calls it)."""

    label: str
    needles: tuple[str, ...]
    """The strings whose presence is a leak: value, base64 forms, body lines."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret seen in ``where`` ("<file>:<line>" or "event <namespace>/<name>"), at
    ``column`` of that line; ``what`` names the shape or the known secret's label."""

    where: str
    column: int
    what: str

    def __str__(self) -> str:
        return f"{self.where}:{self.column}: {self.what}"


def known_secret(label: str, value: str) -> KnownSecret:
    """The needles of ``value``: itself, its standard and URL-safe base64, and for a
    multi-line value each line of at least WINDOW characters that is not a PEM header. A value
    (or line) that does not begin with WINDOW base64-alphabet characters is not looked for."""
    encoded = base64.b64encode(value.encode()).decode()
    needles = {value, encoded, base64.urlsafe_b64encode(value.encode()).decode()}
    lines = [line.strip() for line in value.splitlines()]
    if len(lines) > 1:
        needles.discard(value)
        needles.update(line for line in lines if not line.startswith("-----"))
    # A needle is looked up by its first WINDOW characters inside a run of the base64
    # alphabet: tokens, keys and their encodings all begin so.
    kept = (n for n in needles if len(n) >= WINDOW and _RUN.fullmatch(n[:WINDOW]))
    return KnownSecret(label, tuple(sorted(kept)))


class Scanner:
    """Finds secrets in lines; built once for a set of known secrets."""

    def __init__(self, known: Iterable[KnownSecret] = ()) -> None:
        self._by_prefix: dict[str, list[tuple[str, str]]] = {}
        for secret in known:
            for needle in secret.needles:
                self._by_prefix.setdefault(needle[:WINDOW], []).append((needle, secret.label))

    def line(self, text: str, where: str) -> list[Finding]:
        """The secrets in one line of text, at most one finding per shape or known secret."""
        found: dict[str, int] = {}
        for what, pattern in SHAPES:
            match = pattern.search(text)
            if match:
                found.setdefault(what, match.start())
        if self._by_prefix:
            for run in _RUN.finditer(text):
                for at in range(run.start(), run.end() - WINDOW + 1):
                    for needle, label in self._by_prefix.get(text[at : at + WINDOW], ()):
                        # The needle may go on past the run (a token's dots, a value's spaces).
                        if text.startswith(needle, at):
                            found.setdefault(f"known secret: {label}", at)
        return [Finding(where, column + 1, what) for what, column in found.items()]

    def lines(self, lines: Iterable[str], source: str) -> list[Finding]:
        """The secrets in ``lines`` of ``source`` (a file name), located as "<source>:<n>"."""
        return [
            finding
            for number, text in enumerate(lines, start=1)
            for finding in self.line(text, f"{source}:{number}")
        ]

    def events(self, events: Iterable[Mapping[str, Any]]) -> list[Finding]:
        """The secrets in Events (``v1`` or ``events.k8s.io/v1`` objects, as dicts)."""
        findings: list[Finding] = []
        for event in events:
            meta = event.get("metadata") or {}
            where = f"event {meta.get('namespace', '')}/{meta.get('name', '')}"
            findings.extend(self.line(event_text(event), where))
        return findings


def event_text(event: Mapping[str, Any]) -> str:
    """What a user reads of an Event, on one line: reason, message or note, and the object."""
    obj = event.get("involvedObject") or event.get("regarding") or {}
    parts: Sequence[Any] = (
        event.get("reason", ""),
        event.get("message") or event.get("note") or "",
        obj.get("kind", ""),
        obj.get("name", ""),
    )
    return " | ".join(str(p) for p in parts)
