"""JWT verification: RS256 only, signing keys from a JWKS (cached), bounded clock skew."""

from __future__ import annotations

from typing import Any, Protocol

import jwt

from memvault.config import Settings
from memvault.errors import Unauthorized
from memvault.identity.claims import Claims


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


class TokenVerifier:
    def __init__(
        self, keys: SigningKeys, *, issuer: str | None, audience: str, leeway: int
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenVerifier:
        if not settings.jwks_url:
            raise RuntimeError("MEMVAULT_JWKS_URL is not configured")
        return cls(
            JwksUrlKeys(settings.jwks_url, settings.jwks_cache_seconds),
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            leeway=settings.jwt_leeway_seconds,
        )

    def verify(self, token: str) -> Claims:
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
            raise Unauthorized(f"the token is not valid: {type(err).__name__}") from None
        return Claims.parse(payload)


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
