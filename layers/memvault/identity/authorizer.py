"""The API Gateway Lambda authorizer (TOKEN type): verify the JWT, pass its claims on."""

from __future__ import annotations

from typing import Any, Protocol

from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerResponse,
    APIGatewayAuthorizerTokenEvent,
)

from memvault.errors import Unauthorized
from memvault.identity.claims import Claims
from memvault.identity.tokens import bearer_token
from memvault.observability import logger


class Verifier(Protocol):
    def verify(self, token: str) -> Claims: ...


def authorize(
    event: dict[str, Any], verifier: Verifier, usage_keys: dict[str, str] | None = None
) -> dict[str, Any]:
    """An allow policy carrying the verified claims as context.

    API Gateway caches the policy per token, so it allows every route of the API; routes
    check scopes and subjects themselves. A refused token raises ``Unauthorized``, which
    the Lambda entry point turns into API Gateway's ``"Unauthorized"`` (HTTP 401)."""
    token_event = APIGatewayAuthorizerTokenEvent(event)
    claims = verifier.verify(bearer_token(token_event.authorization_token))
    arn = token_event.parsed_arn
    policy = APIGatewayAuthorizerResponse(
        principal_id=claims.sub,
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        context=claims.authorizer_context(),
        # Pool mode: the tenant's usage plan (throttle, quota) applies to this caller.
        usage_identifier_key=(usage_keys or {}).get(claims.tenant_id),
    )
    policy.allow_all_routes()
    logger.info("token accepted", extra={"tenant_id": claims.tenant_id, "principal": claims.sub})
    return policy.asdict()


class AuthorizerHandler:
    """Holds the verifier (and its key cache) for the life of a warm function."""

    def __init__(self, verifier_factory: Any, usage_keys: dict[str, str] | None = None) -> None:
        self._factory = verifier_factory
        self._verifier: Verifier | None = None
        self._usage_keys = usage_keys or {}

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self._verifier is None:
            self._verifier = self._factory()
        try:
            return authorize(event, self._verifier, self._usage_keys)
        except Unauthorized as err:
            logger.info("token refused", extra={"reason": err.message})
            # The exact string API Gateway maps to a 401 response.
            raise Exception("Unauthorized") from None
