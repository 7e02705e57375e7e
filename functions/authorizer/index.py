"""Lambda authorizer for API Gateway: verifies the caller's JWT against the issuer's JWKS."""

from memvault.config import get_settings
from memvault.identity.authorizer import AuthorizerHandler
from memvault.identity.tokens import TokenVerifier

handler = AuthorizerHandler(lambda: TokenVerifier.from_settings(get_settings()))
