"""Lambda authorizer for API Gateway: verifies the caller's JWT against its issuer's JWKS
(one issuer in a silo deployment, each tenant's own in a pool)."""

from memvault.config import get_settings
from memvault.identity.authorizer import AuthorizerHandler
from memvault.identity.tokens import verifier_from_settings

handler = AuthorizerHandler(
    lambda: verifier_from_settings(get_settings()), usage_keys=get_settings().usage_keys
)
