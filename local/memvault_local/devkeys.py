"""The local development signing key and the tokens it mints (`memvault dev-token`).

The key lives in the memvault data folder (``MEMVAULT_HOME``, default ``~/.memvault``),
created on first use, readable by its owner only. Only the local stack trusts it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from memvault.identity.tokens import StaticKeys, TokenVerifier

ISSUER = "memvault-local"
AUDIENCE = "memvault"
KEY_FILE = "dev-signing-key.pem"
DEFAULT_SCOPES = "memory:read memory:write memory:delete"


def data_home() -> Path:
    return Path(os.environ.get("MEMVAULT_HOME") or Path.home() / ".memvault")


@dataclass(frozen=True)
class DevKey:
    private_key: rsa.RSAPrivateKey
    path: Path

    @classmethod
    def load_or_create(cls, home: Path | None = None) -> DevKey:
        home = home or data_home()
        path = home / KEY_FILE
        if path.exists():
            loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
            if not isinstance(loaded, rsa.RSAPrivateKey):
                raise RuntimeError(f"{path} does not hold an RSA private key")
            return cls(loaded, path)
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        return cls(key, path)

    @property
    def kid(self) -> str:
        der = self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return hashlib.sha256(der).hexdigest()[:16]

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private_key.public_key()))
        return {"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def verifier(self, leeway: int = 60) -> TokenVerifier:
        return TokenVerifier(
            StaticKeys(self.jwks()), issuer=ISSUER, audience=AUDIENCE, leeway=leeway
        )

    def mint(
        self,
        *,
        tenant: str,
        subject: str | None = None,
        scope: str = DEFAULT_SCOPES,
        agent_role: str | None = None,
        max_sensitivity: str | None = None,
        ttl: int = 3600,
        sub: str | None = None,
    ) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": sub or (f"user:{subject}" if subject else "dev-client"),
            "iat": now,
            "exp": now + ttl,
            "jti": secrets.token_hex(8),
            "tenant_id": tenant,
            "scope": scope,
        }
        if subject:
            claims["subject_id"] = subject
        if agent_role:
            claims["agent_role"] = agent_role
        if max_sensitivity:
            claims["max_sensitivity"] = max_sensitivity
        return jwt.encode(claims, self.private_key, algorithm="RS256", headers={"kid": self.kid})
