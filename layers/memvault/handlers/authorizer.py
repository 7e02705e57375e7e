"""Lambda authorizer for API Gateway: verifies the caller's JWT against its issuer's JWKS
(one issuer in a silo deployment, each tenant's own in a pool)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memvault.identity.authorizer import AuthorizerHandler

if TYPE_CHECKING:
    from memvault.identity.tokens import TenantIssuers, TokenVerifier

# Settings, the JWT library and the verifier are loaded on the first invocation, not at
# import: they are most of this function's cold start.


def _verifier() -> TokenVerifier | TenantIssuers:
    from memvault.config import get_settings
    from memvault.identity.tokens import verifier_from_settings

    return verifier_from_settings(get_settings())


def _usage_keys() -> dict[str, str]:
    from memvault.config import get_settings

    return get_settings().usage_keys


handler = AuthorizerHandler(_verifier, usage_keys=_usage_keys)
