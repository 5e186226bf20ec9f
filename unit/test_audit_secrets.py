"""Tests of e2e.audit.secrets: private keys, certificates and tokens are found by their shape,
known values by themselves, their base64 forms and the lines of their body, in log lines and
Events; a finding says where, never the secret."""

from __future__ import annotations

import base64
import json

from hypothesis import given
from hypothesis import strategies as st

from controllers.job.plugins import generate_key_pair
from e2e.audit.report import findings_table
from e2e.audit.secrets import Scanner, known_secret

PRIVATE_KEY = generate_key_pair().private_key_pem.decode()
BODY = PRIVATE_KEY.splitlines()[3]  # a line from the middle of the key
# A made-up token with a JWT's shape (header and claims are JSON, base64url).
TOKEN = (
    ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
        for part in ({"alg": "RS256", "kid": "k"}, {"sub": "system:serviceaccount:ns:sa"})
    )
    + ".c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
)


def whats(scanner: Scanner, text: str) -> set[str]:
    return {f.what for f in scanner.line(text, "f:1")}


def test_shapes_are_found_without_knowing_the_values() -> None:
    """PEM private keys of every flavour, certificates, a base64-encoded PEM and a JWT."""
    scanner = Scanner()
    for header in ("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"):
        assert whats(scanner, f'"key": "-----BEGIN {header}-----\\nMIIE"') == {"PEM private key"}
    assert whats(scanner, "-----BEGIN CERTIFICATE-----") == {"PEM certificate"}
    encoded = base64.b64encode(PRIVATE_KEY.encode()).decode()
    assert whats(scanner, f"data: {encoded[:40]}") == {"base64 PEM block"}
    assert whats(scanner, f"Authorization: Bearer {TOKEN}") == {"JSON Web Token"}


def test_ordinary_log_lines_are_clean() -> None:
    """Timestamps, uids, resource versions, public keys and names are not secrets."""
    scanner = Scanner([known_secret("token", TOKEN), known_secret("key", PRIVATE_KEY)])
    lines = [
        '{"event": "reconciled", "key": "ns/job-a", "uid": "3f2a9c1e-1b2c-4d5e-8f90-a1b2c3d4e5f6"}',
        "2026-11-25T11:00:00.123456Z resourceVersion=123456789 ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB",
        "-----BEGIN PUBLIC KEY-----",
    ]
    assert scanner.lines(lines, "controllers.log") == []


def test_known_values_in_any_form() -> None:
    """A known key is found whole, escaped in JSON, as one line of its body, base64-encoded;
    a known token whole or base64-encoded; each finding names the secret's label."""
    scanner = Scanner([known_secret("secret ns/j-ssh", PRIVATE_KEY), known_secret("tok", TOKEN)])
    escaped = json.dumps({"data": PRIVATE_KEY.replace("-----BEGIN", "BEGIN")})
    assert "known secret: secret ns/j-ssh" in whats(scanner, escaped)
    assert whats(scanner, f"x={BODY[:-1]}") == set()  # a line cut short is not enough
    assert whats(scanner, f"x={BODY}y") == {"known secret: secret ns/j-ssh"}
    encoded = base64.b64encode(PRIVATE_KEY.encode()).decode()
    assert "known secret: secret ns/j-ssh" in whats(scanner, encoded)
    assert whats(scanner, f"token {TOKEN}") == {"JSON Web Token", "known secret: tok"}
    assert "known secret: tok" in whats(scanner, base64.b64encode(TOKEN.encode()).decode())


def test_findings_locate_and_never_echo() -> None:
    """File and line number, column, what: the secret is in none of them, nor in the table."""
    scanner = Scanner([known_secret("tok", TOKEN)])
    findings = scanner.lines(["fine", f"bad {TOKEN}"], "webhook.log")
    assert {(f.where, f.column) for f in findings} == {("webhook.log:2", 5)}
    text = findings_table(findings) + "".join(str(f) for f in findings)
    assert TOKEN not in text
    assert TOKEN[:20] not in text


def test_events_are_scanned_by_what_a_user_reads() -> None:
    """An Event's message naming a key is a finding located at the Event."""
    scanner = Scanner()
    events = [
        {"metadata": {"namespace": "ns", "name": "e1"}, "reason": "Ok", "message": "fine"},
        {
            "metadata": {"namespace": "ns", "name": "e2"},
            "reason": "Oops",
            "message": "bad key -----BEGIN RSA PRIVATE KEY-----",
            "involvedObject": {"kind": "Job", "name": "j"},
        },
    ]
    (finding,) = scanner.events(events)
    assert (finding.where, finding.what) == ("event ns/e2", "PEM private key")


@given(
    st.text(alphabet=st.characters(codec="ascii"), max_size=60),
    st.text(alphabet=st.characters(codec="ascii"), max_size=60),
)
def test_a_known_token_is_found_wherever_it_sits(before: str, after: str) -> None:
    """Whatever text surrounds it, a known token is found, at its column."""
    scanner = Scanner([known_secret("tok", TOKEN)])
    findings = {f.what: f.column for f in scanner.line(before + TOKEN + after, "f:1")}
    assert findings["known secret: tok"] <= len(before) + 1
