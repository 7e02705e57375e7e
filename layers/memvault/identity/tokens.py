"""JWT verification: RS256 only, signing keys from a JWKS (cached), bounded clock skew."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import jwt

from memvault.config import Settings
from memvault.identity.claims import Claims
from memvault_wire.errors import Unauthorized


class SigningKeys(Protocol):
    def key_for(self, token: str) -> Any: ...


class JwksUrlKeys:
    """Keys from an issuer's JWKS address, fetched on demand and cached."""

    def __init__(self, url: str, cache_seconds: int) -> None:
        self._client = jwt.PyJWKClient(url, cache_keys=True, lifespan=max(cache_seconds, 1))

    def key_for(self, token: str) -> Any:
        try:
            return self._client.get_signing_key_from_jwt(token).key
        except jwt.PyJWKClientConnectionError as err:
            raise Unauthorized("the token issuer's keys could not be fetched") from err
        except jwt.PyJWKClientError as err:
            raise Unauthorized("the token is signed with an unknown key") from err


class StaticKeys:
    """A fixed JWKS (the local development key)."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self._keys = {k["kid"]: jwt.PyJWK(k).key for k in jwks["keys"]}

    def key_for(self, token: str) -> Any:
        kid = jwt.get_unverified_header(token).get("kid")
        if kid not in self._keys:
            raise Unauthorized("the token is signed with an unknown key")
        return self._keys[kid]


class VerifiedTokens:
    """Tokens this verifier has already accepted, with their claims, for a short while.

    A signature check costs about 1.5 ms, and an agent sends the same token with every
    request; API Gateway's authorizers cache their answer the same way. An entry is kept
    for at most ``ttl`` seconds and never past the token's own ``exp`` (plus the leeway
    the first check allowed), so an expired token is refused as before. The key is the
    whole token, signature included: a changed token is a new key and is checked anew.
    """

    def __init__(
        self, *, size: int = 1024, ttl: float = 300.0, now: Callable[[], float] = time.time
    ) -> None:
        self.size, self.ttl, self.now = size, ttl, now
        self._entries: OrderedDict[str, tuple[float, float, Claims]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str, leeway: int) -> Claims | None:
        with self._lock:
            entry = self._entries.get(token)
            if entry is None:
                return None
            cached_until, expires, claims = entry
            now = self.now()
            if now >= cached_until or now > expires + leeway:
                del self._entries[token]
                return None
            self._entries.move_to_end(token)
            return claims

    def put(self, token: str, expires: float, claims: Claims) -> None:
        with self._lock:
            self._entries[token] = (self.now() + self.ttl, expires, claims)
            self._entries.move_to_end(token)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


class TokenVerifier:
    def __init__(
        self,
        keys: SigningKeys,
        *,
        issuer: str | None,
        audience: str,
        leeway: int,
        verified: VerifiedTokens | None = None,
        max_lifetime: int = 86_400,
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.max_lifetime = max_lifetime
        self.verified = verified if verified is not None else VerifiedTokens()

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenVerifier:
        if not settings.jwks_url:
            raise RuntimeError("MEMVAULT_JWKS_URL is not configured")
        return cls(
            JwksUrlKeys(settings.jwks_url, settings.jwks_cache_seconds),
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            leeway=settings.jwt_leeway_seconds,
            max_lifetime=settings.jwt_max_lifetime_seconds,
        )

    def verify(self, token: str) -> Claims:
        cached = self.verified.get(token, self.leeway)
        if cached is not None:
            return cached
        try:
            if jwt.get_unverified_header(token).get("alg") != "RS256":
                raise Unauthorized("only RS256-signed tokens are accepted")
            payload = jwt.decode(
                token,
                self.keys.key_for(token),
                algorithms=["RS256"],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iat", "sub"], "verify_iss": self.issuer is not None},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("the token has expired; get a new one") from None
        except jwt.InvalidTokenError as err:
            raise Unauthorized(f"the token is not valid: {_why(err)}") from None
        lifetime = _number(payload.get("exp")) - _number(payload.get("iat"))
        if lifetime > self.max_lifetime:
            raise Unauthorized(
                f"the token lives longer than this deployment accepts ({self.max_lifetime} s "
                "from iat to exp at most); get a shorter-lived token",
                {"max_lifetime_seconds": self.max_lifetime},
            )
        if isinstance(payload.get("agent_role"), str) and not payload["agent_role"].strip():
            # A blank role is no role's absence: read as one, it would make an agent's token
            # a person's (who may confirm, claim user_confirmed, read any visibility list).
            raise Unauthorized(
                "the token's claims are missing or malformed: agent_role (leave it out for "
                "a person's token; an agent's names its role)",
                {"claim": "agent_role"},
            )
        claims = Claims.parse(payload)
        self.verified.put(token, float(payload["exp"]), claims)
        return claims


def _number(value: Any) -> float:
    # PyJWT has checked that exp and iat are numbers; anything else counts as forever.
    return float(value) if isinstance(value, int | float) else float("inf")


class TenantIssuers:
    """Pool mode: each tenant has its own issuer and keys. The token's (unverified)
    ``tenant_id`` only chooses whose keys verify it; the verified claims must then name
    the same tenant."""

    def __init__(self, settings: Settings) -> None:
        self._verifiers = {
            tenant: TokenVerifier(
                JwksUrlKeys(cfg.jwks_url, settings.jwks_cache_seconds),
                issuer=cfg.issuer,
                audience=cfg.audience,
                leeway=settings.jwt_leeway_seconds,
                max_lifetime=settings.jwt_max_lifetime_seconds,
            )
            for tenant, cfg in settings.tenant_issuers.items()
        }

    def verify(self, token: str) -> Claims:
        try:
            tenant = jwt.decode(token, options={"verify_signature": False}).get("tenant_id")
        except jwt.InvalidTokenError:
            raise Unauthorized("the token is not a JWT") from None
        verifier = self._verifiers.get(tenant) if isinstance(tenant, str) else None
        if verifier is None:
            raise Unauthorized("the token names no tenant this deployment serves")
        claims = verifier.verify(token)
        if claims.tenant_id != tenant:
            raise Unauthorized("the token's tenant does not match its issuer")
        return claims


def verifier_from_settings(settings: Settings) -> TokenVerifier | TenantIssuers:
    """Per-tenant issuers when configured (pool), else the one issuer (silo)."""
    if settings.tenant_issuers and not settings.jwks_url:
        if settings.silo_tenant_id:
            cfg = settings.tenant_issuers[settings.silo_tenant_id]
            return TokenVerifier(
                JwksUrlKeys(cfg.jwks_url, settings.jwks_cache_seconds),
                issuer=cfg.issuer,
                audience=cfg.audience,
                leeway=settings.jwt_leeway_seconds,
                max_lifetime=settings.jwt_max_lifetime_seconds,
            )
        return TenantIssuers(settings)
    return TokenVerifier.from_settings(settings)


def bearer_token(header: str | None) -> str:
    if not header:
        raise Unauthorized("send the token as 'Authorization: Bearer <JWT>'")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("send the token as 'Authorization: Bearer <JWT>'")
    return token.strip()


def _why(err: Exception) -> str:
    """What is wrong with a token, in words a caller can act on (no claim values)."""
    if isinstance(err, jwt.MissingRequiredClaimError):
        return f"it has no '{err.claim}' claim"
    reasons: tuple[tuple[type[Exception], str], ...] = (
        (jwt.InvalidAudienceError, "its audience (aud) is not this service's"),
        (jwt.InvalidIssuerError, "its issuer (iss) is not the one this service trusts"),
        (jwt.ImmatureSignatureError, "it is not valid yet (iat or nbf is in the future)"),
        (jwt.InvalidSignatureError, "its signature does not match this service's signing key"),
        (jwt.DecodeError, "it is not a signed JWT (header.payload.signature, base64url)"),
    )
    for kind, reason in reasons:
        if isinstance(err, kind):
            return reason
    return "it failed verification; get a new one from your token issuer"
