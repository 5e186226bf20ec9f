"""Certificates for the local control plane: one CA, a serving certificate for 127.0.0.1, an
admin client certificate in system:masters, and the service-account signing key pair; and the
front proxy's own CA and client certificate, with which the API server proxies requests to
aggregated APIs (Caldera's visibility API): a separate CA, so that no client certificate of the
cluster CA can pass for the front proxy.

Everything is written once into ``<cluster>/pki`` and reused by later ``up`` calls, so clients
that trusted the CA before a restart still trust it afterwards.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhooks.certificate import ca_certificate, subject_alternative_names

# Long enough for a developer's cluster to outlive a working week without re-issuing.
VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True)
class Pki:
    """Paths of the files a control plane needs."""

    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def admin_crt(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def front_proxy_ca_crt(self) -> Path:
        return self.dir / "front-proxy-ca.crt"

    @property
    def front_proxy_client_crt(self) -> Path:
        return self.dir / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.dir / "front-proxy-client.key"


FRONT_PROXY_CLIENT = "front-proxy-client"  # the API server's --requestheader-allowed-names


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def issue(
    *,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    server_names: list[str] | None = None,
    client: bool = False,
) -> x509.Certificate:
    """Sign a leaf certificate; Go verifies names from the SAN only, so servers always get one."""
    now = dt.datetime.now(dt.UTC)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if server_names:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = builder.add_extension(subject_alternative_names(server_names), critical=False)
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def ensure_pki(directory: Path) -> Pki:
    """Create the CA and certificates unless they already exist; return their paths."""
    pki = Pki(directory)
    if pki.sa_pub.exists():
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_name = _name("caldera-local-ca")
    ca_cert = ca_certificate(
        ca_name, ca_key, start=now - dt.timedelta(minutes=5), end=now + VALIDITY
    )
    _write_key(pki.ca_key, ca_key)
    pki.ca_crt.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    serving_key = _key()
    serving = issue(
        ca_cert=ca_cert,
        ca_key=ca_key,
        subject=_name("kube-apiserver"),
        key=serving_key,
        server_names=[
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ],
    )
    _write_key(pki.serving_key, serving_key)
    pki.serving_crt.write_bytes(serving.public_bytes(serialization.Encoding.PEM))

    admin_key = _key()
    admin = issue(
        ca_cert=ca_cert,
        ca_key=ca_key,
        subject=_name("caldera-admin", "system:masters"),
        key=admin_key,
        client=True,
    )
    _write_key(pki.admin_key, admin_key)
    pki.admin_crt.write_bytes(admin.public_bytes(serialization.Encoding.PEM))

    sa_key = _key()
    _write_key(pki.sa_key, sa_key)
    # Written last: its presence marks the set as complete (see the check above).
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def ensure_front_proxy(pki: Pki) -> None:
    """Create the front proxy's CA and client certificate unless they exist (a cluster made
    before they were added gets them at its next start)."""
    if pki.front_proxy_client_crt.exists():
        return
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_cert = ca_certificate(
        _name("caldera-local-front-proxy-ca"),
        ca_key,
        start=now - dt.timedelta(minutes=5),
        end=now + VALIDITY,
    )
    pki.front_proxy_ca_crt.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    client_key = _key()
    client = issue(
        ca_cert=ca_cert,
        ca_key=ca_key,
        subject=_name(FRONT_PROXY_CLIENT),
        key=client_key,
        client=True,
    )
    _write_key(pki.front_proxy_client_key, client_key)
    # Written last: its presence marks the pair as complete (see the check above).
    pki.front_proxy_client_crt.write_bytes(client.public_bytes(serialization.Encoding.PEM))


def load_ca(pki: Pki) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA, for tests that need to sign a webhook's serving certificate."""
    cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def write_serving_pair(pki: Pki, out_dir: Path, names: list[str]) -> tuple[Path, Path]:
    """Issue a serving certificate signed by the cluster CA (for local webhook servers)."""
    ca_cert, ca_key = load_ca(pki)
    key = _key()
    cert = issue(
        ca_cert=ca_cert, ca_key=ca_key, subject=_name(names[0]), key=key, server_names=names
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    crt_path, key_path = out_dir / "tls.crt", out_dir / "tls.key"
    _write_key(key_path, key)
    crt_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return crt_path, key_path
