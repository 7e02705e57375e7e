"""The caller's access context, rebuilt from the authorizer context only."""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from memvault.identity.claims import Claims
from memvault.models.access import AccessContext
from memvault_wire.errors import Unauthorized


def caller(event: APIGatewayProxyEvent) -> AccessContext:
    context = event.request_context.authorizer.get_context() if event.request_context else {}
    if not context or "tenant_id" not in context:
        raise Unauthorized("no verified identity reached the handler; send a bearer token")
    return Claims.parse(context).access_context()
