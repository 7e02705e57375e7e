"""Lambda entry point for direct invocation by agent runtimes (no API Gateway)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from memvault.api.app import lambda_handler
from memvault.api.direct import handle_direct
from memvault.config import get_settings
from memvault.identity.tokens import TenantIssuers, TokenVerifier, verifier_from_settings


@lru_cache(maxsize=1)
def _verifier() -> TokenVerifier | TenantIssuers:
    return verifier_from_settings(get_settings())


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_direct(
        event, context, settings=get_settings(), verifier=_verifier, api=lambda_handler
    )
