"""webhooks.certificate: the pair the webhook makes for itself is a CA and a leaf for exactly the
names asked (DNS names and IP addresses), usable until 30 days before its end, and survives the
round trip through a Secret's data; anything else is a problem with a reason."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from webhooks.certificate import (
    ServingPair,
    ca_bundle,
    make_pair,
    pair_from_secret,
    pair_problem,
    renewal_due,
    secret_data,
)

NOW = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
NAMES = ["caldera-webhook", "caldera-webhook.caldera-system.svc", "127.0.0.1"]


@pytest.fixture(scope="module")
def pair() -> ServingPair:
    return make_pair(NAMES, days=3650, now=NOW)


def test_a_new_pair_serves_its_names(pair: ServingPair, tmp_path: Path) -> None:
    """The leaf names every DNS name and IP address, is signed by the CA, loads into an
    SSLContext with its key, and is good now."""
    assert pair_problem(pair, NAMES, now=NOW) is None
    leaf = x509.load_pem_x509_certificate(pair.cert_pem)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == NAMES[:2]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca = x509.load_pem_x509_certificate(pair.ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    leaf.verify_directly_issued_by(ca)
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")


@pytest.mark.parametrize(
    ("when", "names", "problem"),
    [
        (NOW + dt.timedelta(days=3650 * 2 / 3 - 1), NAMES, None),
        (NOW + dt.timedelta(days=3650 * 2 / 3 + 1), NAMES, "two thirds"),
        (NOW, [*NAMES, "other.svc"], "not for other.svc"),
        (NOW, ["10.0.0.1"], "not for 10.0.0.1"),
    ],
)
def test_problems_of_a_held_pair(
    pair: ServingPair, when: dt.datetime, names: list[str], problem: str | None
) -> None:
    """A pair two thirds into its lifetime, or not for every name asked, is made again."""
    found = pair_problem(pair, names, now=when)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_mismatched_or_broken_pairs(pair: ServingPair) -> None:
    """Another pair's key, another CA, or garbage each have their reason."""
    other = make_pair(NAMES, days=3650, now=NOW)
    foreign_key = ServingPair(pair.ca_pem, pair.cert_pem, other.key_pem)
    assert pair_problem(foreign_key, NAMES, now=NOW) == "the key does not belong to the certificate"
    foreign_ca = ServingPair(other.ca_pem, pair.cert_pem, pair.key_pem)
    assert pair_problem(foreign_ca, NAMES, now=NOW) == "the certificate is not signed by the CA"
    broken = ServingPair(b"x", pair.cert_pem, pair.key_pem)
    problem = pair_problem(broken, NAMES, now=NOW)
    assert problem is not None
    assert problem.startswith("unreadable")


def test_secret_round_trip(pair: ServingPair) -> None:
    """secret_data and pair_from_secret invert each other; a Secret missing a key or holding
    something that is not base64 gives no pair."""
    data = secret_data(pair)
    assert set(data) == {"ca.crt", "tls.crt", "tls.key"}
    assert pair_from_secret(data) == pair
    assert pair_from_secret({k: v for k, v in data.items() if k != "ca.crt"}) is None
    assert pair_from_secret({**data, "tls.key": "not base64!"}) is None


def test_previous_ca_round_trips_and_joins_the_bundle(pair: ServingPair) -> None:
    """A renewed pair keeps the CA it replaced in its Secret; the bundle trusts both, and a
    pair with none trusts its own CA only."""
    assert ca_bundle(pair) == pair.ca_pem
    assert pair_from_secret(secret_data(pair)) == pair
    renewed = make_pair(NAMES, days=10, now=NOW, previous_ca_pem=pair.ca_pem)
    assert pair_from_secret(secret_data(renewed)) == renewed
    assert ca_bundle(renewed) == renewed.ca_pem + pair.ca_pem
    due = renewal_due(renewed)
    assert NOW + dt.timedelta(days=6) < due < NOW + dt.timedelta(days=7)
