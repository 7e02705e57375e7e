"""The API Gateway (REST) entry point: one resolver, routers by resource, one error mapping."""

from __future__ import annotations

import json
import traceback
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from memvault import __version__
from memvault.api.errors import error_response, internal_response, validation_response
from memvault.api.routes import (
    artifacts,
    context,
    deletions,
    health,
    memories,
    recall,
    runs,
    sessions,
)
from memvault.api.routes.health import PUBLIC_PATHS
from memvault.config import get_settings
from memvault.errors import MemvaultError, NotFound, PayloadTooLarge
from memvault.observability import logger, metrics, tracer

app = APIGatewayRestResolver(enable_validation=True)
app.configure_openapi(
    title="memvault",
    version=__version__,
    summary="Governed memory and exact run state for AI agents",
    security_schemes={"bearer": HTTPBearer(bearerFormat="JWT")},
    security=[{"bearer": []}],
)
app.include_router(memories.router)
app.include_router(recall.router)
app.include_router(deletions.router)
app.include_router(sessions.router)
app.include_router(runs.router)
app.include_router(context.router)
app.include_router(artifacts.router)
app.include_router(health.router)


@app.get(
    "/v1/openapi.json",
    summary="This API's OpenAPI document (no token needed)",
    responses={
        200: {
            "description": "the OpenAPI 3.1 document",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
    tags=["health"],
)
def openapi_document() -> Response[Any]:
    return Response(status_code=200, content_type="application/json", body=openapi_json())


def openapi_json() -> str:
    doc = json.loads(
        app.get_openapi_json_schema(
            title="memvault",
            version=__version__,
            security_schemes={"bearer": HTTPBearer(bearerFormat="JWT")},
            security=[{"bearer": []}],
        )
    )
    # Powertools drops an empty per-route security list; the public routes need one to
    # say "no token" against the document-wide bearer requirement.
    for path in PUBLIC_PATHS:
        for operation in doc["paths"].get(path, {}).values():
            operation["security"] = []
    return json.dumps(doc)


@app.exception_handler(MemvaultError)
def _domain_error(err: MemvaultError) -> Response[Any]:
    logger.info("request refused", extra={"code": err.code, "status": err.status})
    return error_response(err)


@app.exception_handler(RequestValidationError)
def _invalid_request(err: RequestValidationError) -> Response[Any]:
    return validation_response(list(err.errors()))


@app.not_found
def _no_route(_: Exception) -> Response[Any]:
    return error_response(
        NotFound(
            "no such route; see GET /v1/openapi.json for the API", {"path": app.current_event.path}
        )
    )


@app.exception_handler(Exception)
def _unexpected(err: Exception) -> Response[Any]:
    # The exception's text may quote input; log its type and where it arose only.
    logger.error(
        "unexpected error",
        extra={
            "error": type(err).__name__,
            "where": traceback.format_tb(err.__traceback__)[-3:],
        },
    )
    metrics.add_metric(name="UnexpectedError", unit="Count", value=1)
    return internal_response(app.current_event.request_context.request_id)


@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True
)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    too_large = _oversize(event)
    if too_large is not None:
        return too_large
    return app.resolve(event, context)


def _oversize(event: dict[str, Any]) -> dict[str, Any] | None:
    """Refuse an oversize body before anything parses it."""
    limit = get_settings().max_body_bytes
    if len((event.get("body") or "").encode()) <= limit:
        return None
    err = PayloadTooLarge(f"the request body is larger than {limit} bytes", {"max_bytes": limit})
    return {
        "statusCode": err.status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(err.to_body()),
        "isBase64Encoded": False,
    }


def parsed(response: dict[str, Any]) -> tuple[int, Any]:
    """Status and JSON body of a handler response (direct invocation, tests)."""
    body = response.get("body")
    return response["statusCode"], json.loads(body) if body else None
