"""A webhook receiver on loopback that keeps the JSON bodies POSTed to it (and, for the
rebinding and TLS tests, the Host headers and TLS server names it was sent)."""

import datetime
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@contextmanager
def webhook_receiver(
    address: str = "127.0.0.1",
    port: int = 0,
    *,
    hosts: list[str] | None = None,
    tls: ssl.SSLContext | None = None,
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Its URL and the bodies received so far, in order; stopped on exit. `hosts` gets
    each request's Host header, `tls` serves HTTPS with that context."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            bodies.append(json.loads(self.rfile.read(length)))
            if hosts is not None:
                hosts.append(self.headers["Host"])
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((address, port), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://{address}:{server.server_port}/hook", bodies
    finally:
        server.shutdown()
        server.server_close()


def tls_server(folder: Path, name: str, server_names: list[str]) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for `name` from a fresh CA, and the CA's file.

    Each TLS server name a client sends is added to `server_names` (SNI).
    """
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "portal test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = folder / "ca.crt", folder / "server.crt", folder / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)

    def remember(_socket: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        server_names.append(server_name or "")

    context.sni_callback = remember
    return context, ca_file
