"""A self-signed serving certificate the webhook makes for itself (pure; ``webhooks.selfcert``
stores it and registers its CA).

With ``--cert-secret`` (the chart's ``certificates.generator: webhook``) nothing of the certificate
is in the rendered manifests, so ``helm template`` (ArgoCD, Flux) renders the same objects every
time: the first webhook replica to start makes a CA and a certificate for the Service's names,
keeps them in a Secret, and every replica serves that pair. This module makes and checks pairs:
an EC P-256 CA, and a leaf for the names given (DNS names, or IP addresses for a webhook reached
by URL), both valid for ``days``.

A pair is renewed once two thirds of its lifetime have passed (``renewal_due``), inside the
running webhook (``webhooks.selfcert.keep_certificate``). The renewed Secret keeps the previous
CA beside the new one (``ca-previous.crt``), and the webhook configurations trust both
(``ca_bundle``) while replicas switch from the old pair to the new.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "RENEW_AFTER",
    "ServingPair",
    "ca_bundle",
    "ca_certificate",
    "make_pair",
    "pair_from_secret",
    "pair_problem",
    "renewal_due",
    "secret_data",
    "subject_alternative_names",
]

# The fraction of a pair's lifetime after which it is made again: a third of it is left to
# notice a failing renewal (cert-manager's default is the same two thirds).
RENEW_AFTER: Final = 2 / 3
_BACKDATE: Final = dt.timedelta(minutes=5)  # clocks of other machines may lag a little


@dataclass(frozen=True, slots=True)
class ServingPair:
    """PEM bytes of the CA's certificate, the serving certificate and its private key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    previous_ca_pem: bytes = b""  # the CA of the pair this one replaced (trusted while switching)


def ca_bundle(pair: ServingPair) -> bytes:
    """The caBundle the webhook configurations carry for ``pair``: its CA, and the previous one
    while replicas may still serve a certificate it signed."""
    return pair.ca_pem + pair.previous_ca_pem


def renewal_due(pair: ServingPair) -> dt.datetime:
    """When ``pair`` should be made again: two thirds into the shorter lifetime of its CA and
    certificate."""
    ca = x509.load_pem_x509_certificate(pair.ca_pem)
    leaf = x509.load_pem_x509_certificate(pair.cert_pem)
    start = max(ca.not_valid_before_utc, leaf.not_valid_before_utc)
    end = min(ca.not_valid_after_utc, leaf.not_valid_after_utc)
    return start + (end - start) * RENEW_AFTER


def subject_alternative_names(names: Sequence[str]) -> x509.SubjectAlternativeName:
    """The extension naming ``names``: IP addresses as such, the rest as DNS names."""
    sans: list[x509.GeneralName] = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(sans)


def ca_certificate(
    name: x509.Name, key: ec.EllipticCurvePrivateKey, *, start: dt.datetime, end: dt.datetime
) -> x509.Certificate:
    """A self-signed CA certificate for ``key``, signing certificates only."""
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )


def make_pair(
    names: Sequence[str], *, days: float, now: dt.datetime, previous_ca_pem: bytes = b""
) -> ServingPair:
    """A new CA and a serving certificate for ``names``, valid ``days`` from ``now``;
    ``previous_ca_pem``: the CA of the pair it replaces."""
    start, end = now - _BACKDATE, now + dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "caldera-webhook-ca")])
    ca = ca_certificate(ca_name, ca_key, start=start, end=end)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(subject_alternative_names(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingPair(
        ca_pem=ca.public_bytes(pem),
        cert_pem=leaf.public_bytes(pem),
        key_pem=key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        previous_ca_pem=previous_ca_pem,
    )


def pair_problem(pair: ServingPair, names: Sequence[str], *, now: dt.datetime) -> str | None:
    """Why ``pair`` should not serve ``names`` at ``now`` (None: it can): unreadable, a key of
    another certificate, not signed by the CA, a name missing, or due for renewal."""
    try:
        ca = x509.load_pem_x509_certificate(pair.ca_pem)
        leaf = x509.load_pem_x509_certificate(pair.cert_pem)
        key = serialization.load_pem_private_key(pair.key_pem, password=None)
    except ValueError as exc:
        return f"unreadable: {exc}"
    own = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    served = leaf.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if own != served:
        return "the key does not belong to the certificate"
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the certificate is not signed by the CA"
    try:
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "the certificate names no host"
    covered = {str(v) for v in sans.get_values_for_type(x509.DNSName)}
    covered |= {str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    missing = [n for n in names if str(_san_value(n)) not in covered]
    if missing:
        return f"the certificate is not for {', '.join(missing)}"
    if now >= renewal_due(pair):
        return "two thirds of the certificate's lifetime have passed"
    return None


def _san_value(name: str) -> object:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return name


_KEYS: Final = ("ca.crt", "tls.crt", "tls.key")
_PREVIOUS: Final = "ca-previous.crt"


def secret_data(pair: ServingPair) -> dict[str, str]:
    """The ``data`` of a ``kubernetes.io/tls`` Secret holding the pair (and ``ca.crt``, and
    ``ca-previous.crt`` after a renewal)."""
    values = (pair.ca_pem, pair.cert_pem, pair.key_pem)
    data = {k: base64.b64encode(v).decode() for k, v in zip(_KEYS, values, strict=True)}
    if pair.previous_ca_pem:
        data[_PREVIOUS] = base64.b64encode(pair.previous_ca_pem).decode()
    return data


def pair_from_secret(data: Mapping[str, str]) -> ServingPair | None:
    """The pair a Secret's ``data`` holds, or None when a key is missing or not base64."""
    try:
        ca, cert, key = (base64.b64decode(data[k], validate=True) for k in _KEYS)
        previous = base64.b64decode(data.get(_PREVIOUS, ""), validate=True)
    except (KeyError, ValueError):
        return None
    return ServingPair(ca_pem=ca, cert_pem=cert, key_pem=key, previous_ca_pem=previous)
