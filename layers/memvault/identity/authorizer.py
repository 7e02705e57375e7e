"""The API Gateway Lambda authorizer (TOKEN type): verify the JWT, pass its claims on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from memvault.observability import logger
from memvault_wire.errors import Unauthorized

if TYPE_CHECKING:
    from memvault.identity.claims import Claims


class Verifier(Protocol):
    def verify(self, token: str) -> Claims: ...


def authorize(
    event: dict[str, Any], verifier: Verifier, usage_keys: dict[str, str] | None = None
) -> dict[str, Any]:
    """An allow policy carrying the verified claims as context.

    API Gateway caches the policy per token, so it allows every route of the API; routes
    check scopes and subjects themselves. A refused token raises ``Unauthorized``, which
    the Lambda entry point turns into API Gateway's ``"Unauthorized"`` (HTTP 401)."""
    # Imported on first use rather than with the module: they are a good part of the
    # authorizer's cold start (the JWT library, pydantic models, Powertools' event classes).
    from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
        APIGatewayAuthorizerResponse,
        APIGatewayAuthorizerTokenEvent,
    )

    from memvault.identity.tokens import bearer_token

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
    """Holds the verifier (and its key cache) for the life of a warm function.

    ``usage_keys`` is the tenants' usage-plan keys, or a function that reads them; like the
    verifier, it is called once, on the first invocation (not at import: a cold start)."""

    def __init__(
        self,
        verifier_factory: Any,
        usage_keys: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self._factory = verifier_factory
        self._verifier: Verifier | None = None
        self._usage_keys_from = usage_keys
        self._usage_keys: dict[str, str] | None = None

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self._verifier is None:
            self._verifier = self._factory()
        if self._usage_keys is None:
            keys = self._usage_keys_from
            self._usage_keys = dict((keys() if callable(keys) else keys) or {})
        try:
            return authorize(event, self._verifier, self._usage_keys)
        except Unauthorized as err:
            logger.info("token refused", extra={"reason": err.message})
            # The exact string API Gateway maps to a 401 response.
            raise Exception("Unauthorized") from None
