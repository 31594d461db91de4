"""Certificates for the TLS tests: kube-scheduler's tlsConfig (certFile/keyFile/caFile) against schedlens' own."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _issue(
    subject: str,
    issuer_name: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server: bool = False,
    key: ec.EllipticCurvePrivateKey | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name if not ca else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key if not ca else key, hashes.SHA256()), key


def make_pki(root: Path) -> Pki:
    """A CA, a server and a client certificate it issued, and a stranger's certificate from another CA, in ``root``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, _ = _issue("schedlens test CA", x509.Name([]), ca_key, ca=True, key=ca_key)
    server_cert, server_key = _issue("schedlens.schedlens-system.svc", ca_cert.subject, ca_key, server=True)
    client_cert, client_key = _issue("schedlens-scheduler", ca_cert.subject, ca_key)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca, _ = _issue("someone else's CA", x509.Name([]), other_key, ca=True, key=other_key)
    stranger_cert, stranger_key = _issue("intruder", other_ca.subject, other_key)

    def write(name: str, data: bytes) -> Path:
        path = root / name
        path.write_bytes(data)
        return path

    pem = serialization.Encoding.PEM
    return Pki(
        ca=write("ca.crt", ca_cert.public_bytes(pem)),
        server_cert=write("server.crt", server_cert.public_bytes(pem)),
        server_key=write("server.key", _key_pem(server_key)),
        client_cert=write("client.crt", client_cert.public_bytes(pem)),
        client_key=write("client.key", _key_pem(client_key)),
        stranger_cert=write("stranger.crt", stranger_cert.public_bytes(pem)),
        stranger_key=write("stranger.key", _key_pem(stranger_key)),
    )


def client_context(pki: Pki, *, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    """What kube-scheduler does with tlsConfig caFile (+ certFile/keyFile): verify the server, maybe present a cert."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context
