"""Lambda entry point for direct invocation by agent runtimes (no API Gateway)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memvault.api.direct import handle_direct
from memvault.handlers.api import handler as api_handler

if TYPE_CHECKING:
    from memvault.identity.tokens import TenantIssuers, TokenVerifier

# Settings and the token verifier (the JWT library) load on the first invocation, not at
# import: a cold start should not pay for them twice over the API's own.


@lru_cache(maxsize=1)
def _verifier() -> TokenVerifier | TenantIssuers:
    from memvault.config import get_settings
    from memvault.identity.tokens import verifier_from_settings

    return verifier_from_settings(get_settings())


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from memvault.config import get_settings

    return handle_direct(
        event, context, settings=get_settings(), verifier=_verifier, api=api_handler
    )
