"""The rehearsal's stand-ins for what moto does not serve, on loopback only.

- ``SearchDomain``: the OpenSearch Service domain. A TLS endpoint (a certificate made
  here, trusted by the functions through ``SSL_CERT_FILE``) in front of the real local
  OpenSearch node the suite starts; it refuses any request not signed with SigV4 (as the
  domain's access policy does), answers the fine-grained access control API
  (``/_plugins/_security/api``, absent from the open-source node) by recording the
  mapping, and can be taken down (an outage) and brought back.
- ``Bedrock``: ``bedrock-runtime`` ``InvokeModel`` for Titan Text Embeddings V2, with a
  deterministic embedding of the requested size (hashed words: similar texts get
  similar vectors), since no model can be reached from here.
"""

from __future__ import annotations

import datetime
import hashlib
import http.client
import ipaddress
import json
import math
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "search.rehearsal")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "search.pem", folder / "search.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class SearchDomain(_Server):
    def __init__(self, node_url: str, folder: Path) -> None:
        super().__init__(_SearchHandler)
        self.node = urlsplit(node_url)
        self.cert, key = self_signed(folder)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.down = False
        self.unsigned = 0
        self.security_api: dict[str, Any] = {}

    @property
    def endpoint(self) -> str:
        """What the domain's ``DomainEndpoint`` attribute resolves to."""
        return f"127.0.0.1:{self.port}"


class _SearchHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _any(self) -> None:
        domain: SearchDomain = self.server.owner  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if domain.down:
            self._answer(503, b'{"message": "search domain unavailable (rehearsal outage)"}')
            return
        if not (self.headers.get("Authorization") or "").startswith("AWS4-HMAC-SHA256 "):
            domain.unsigned += 1
            self._answer(403, b'{"message": "request not signed"}')
            return
        if self.path.startswith("/_plugins/_security/api/"):
            domain.security_api[self.path] = json.loads(body or b"{}")
            self._answer(200, b'{"status": "OK"}')
            return
        connection = http.client.HTTPConnection(
            domain.node.hostname or "127.0.0.1", domain.node.port or 9200, timeout=30
        )
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in ("host", "authorization", "connection", "content-length")
        }
        connection.request(self.command, self.path, body=body or None, headers=headers)
        answer = connection.getresponse()
        data = answer.read()
        connection.close()
        self._answer(answer.status, data, answer.getheader("Content-Type") or "application/json")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    def log_message(self, *args: Any) -> None:
        return None


class Bedrock(_Server):
    def __init__(self) -> None:
        super().__init__(_BedrockHandler)
        self.calls = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def embed(text: str, dimensions: int) -> list[float]:
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dimensions
        vector[index] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class _BedrockHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        owner: Bedrock = self.server.owner  # type: ignore[attr-defined]
        owner.calls += 1
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        dimensions = int(request.get("dimensions", 1024))
        text = str(request.get("inputText", ""))
        body = json.dumps(
            {"embedding": embed(text, dimensions), "inputTextTokenCount": len(text.split())}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None
