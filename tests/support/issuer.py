"""A token issuer for tests: an RSA key, its JWKS served over loopback HTTP, and minting."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://issuer.test/acme"
AUDIENCE = "memvault"


class Issuer:
    def __init__(self, kid: str = "key-1") -> None:
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.fetches = 0

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def token(
        self,
        *,
        lifetime: int = 600,
        issued_ago: int = 0,
        drop: tuple[str, ...] = (),
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        now = int(time.time()) - issued_ago
        payload: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "agent-client-1",
            "iat": now,
            "exp": now + lifetime,
            "tenant_id": "acme",
            "subject_id": "u-1",
            "scope": "memory:read memory:write memory:delete",
        }
        payload.update(claims)
        for name in drop:
            payload.pop(name, None)
        return jwt.encode(
            payload, self.key, algorithm="RS256", headers={"kid": self.kid, **(headers or {})}
        )


@contextmanager
def serve_jwks(issuer: Issuer) -> Iterator[str]:
    """Serve the issuer's JWKS on 127.0.0.1; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.fetches += 1
            body = json.dumps(issuer.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()
