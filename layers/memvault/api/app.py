"""The HTTP API: one resolver, routers by resource, one error mapping, and the refusals made
before a body is parsed. Its Lambda entry point is ``memvault.handlers.api``."""

from __future__ import annotations

import json
import re
import traceback
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.typing import LambdaContext

from memvault import __version__
from memvault.api import json_body
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
    traces,
)
from memvault.api.routes.health import PUBLIC_PATHS
from memvault.observability import logger, metrics
from memvault_wire.errors import (
    MediaTypeNotAllowed,
    MemvaultError,
    NotFound,
    PayloadTooLarge,
    ValidationFailed,
)
from memvault_wire.types import invisible_char

app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=json_body.loads)
# The security scheme is given where the document is built (``openapi_json``): its model
# comes with Powertools' OpenAPI models, a large import that only that route needs.
app.configure_openapi(
    title="memvault",
    version=__version__,
    summary="Governed memory and exact run state for AI agents",
)
app.include_router(memories.router)
app.include_router(recall.router)
app.include_router(deletions.router)
app.include_router(sessions.router)
app.include_router(runs.router)
app.include_router(context.router)
app.include_router(artifacts.router)
app.include_router(traces.router)
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
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

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
    path = app.current_event.path
    if invisible_char(path) is not None:
        # No route takes such a path, but the caller is owed the field, not a 404.
        return _invisible_in_path(path)
    return error_response(
        NotFound("no such route; see GET /v1/openapi.json for the API", {"path": path})
    )


def _invisible_in_path(path: str) -> Response[Any]:
    """A 422 naming the path parameter that holds a control, bidirectional or other
    invisible character (``models.types.visible``): the routes' templates, each
    parameter taking any segment, say which one it is."""
    found = str(invisible_char(path))
    where = "path"
    for template in sorted({r.path for r in app._dynamic_routes}):
        pattern = re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", re.escape(template))
        matched = re.fullmatch(pattern + "/*", path)
        if matched is None:
            continue
        names = [name for name, value in matched.groupdict().items() if found in value]
        if names:
            where = f"path.{names[0]}"
            break
    problem = (
        "must not contain control, bidirectional or other invisible formatting characters "
        f"(found U+{ord(found):04X})"
    )
    return validation_response(
        [{"loc": tuple(where.split(".")), "msg": problem, "type": "value_error"}]
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


def resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One API Gateway proxy event answered: refused before it is parsed (too large, not
    JSON, nested too deep) or routed. The entry point is ``memvault.handlers.api``."""
    refused = _oversize(event) or _not_json(event) or _too_deep(event)
    if refused is not None:
        return refused
    return app.resolve(event, context)


def _refusal(err: MemvaultError) -> dict[str, Any]:
    return {
        "statusCode": err.status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(err.to_body()),
        "isBase64Encoded": False,
    }


#: Deeper JSON than this is refused before it is parsed: Python's parser recurses, and
#: 2,000 levels used to end in a RecursionError (a 500). No memvault body nests past 40.
MAX_JSON_DEPTH = 64


def _not_json(event: dict[str, Any]) -> dict[str, Any] | None:
    """Every body this API takes is JSON. Another declared media type is a 415 here
    (Powertools raised on several: 500s); none declared is read as JSON, as Powertools
    does. The media type's case is normalised (RFC 9110: it is case-insensitive, and
    ``APPLICATION/JSON`` used to fail). An empty body has no media type to refuse: it is
    read as missing JSON (``text/plain`` with no body used to end in Powertools' 500)."""
    found = [
        (where, name)
        for where in ("headers", "multiValueHeaders")
        for name in (event.get(where) or {})
        if name.lower() == "content-type"
    ]
    headers = event.get("headers") or {}
    value = next((headers[n] for w, n in found if w == "headers"), "")
    media = str(value).split(";", 1)[0].strip().lower()
    if event.get("body") and media not in ("", "application/json"):
        return _refusal(
            MediaTypeNotAllowed(
                "send the request body as JSON, with Content-Type: application/json",
                {"content_type": media[:100] or None},
            )
        )
    for where, name in found:
        event[where] = {k: v for k, v in event[where].items() if k != name}
        event[where]["Content-Type"] = (
            "application/json" if where == "headers" else ["application/json"]
        )
    return None


def _too_deep(event: dict[str, Any]) -> dict[str, Any] | None:
    body = event.get("body") or ""
    # Cheap first: few brackets cannot nest deeply.
    if body.count("[") + body.count("{") <= MAX_JSON_DEPTH:
        return None
    if _json_depth(body) <= MAX_JSON_DEPTH:
        return None
    return _refusal(
        ValidationFailed(
            f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep",
            {"max_depth": MAX_JSON_DEPTH},
        )
    )


def _json_depth(text: str) -> int:
    """The deepest bracket nesting of ``text``, brackets inside strings not counted."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _oversize(event: dict[str, Any]) -> dict[str, Any] | None:
    """Refuse an oversize body before anything parses it."""
    # Settings (pydantic-settings) load on the first request, not with the module.
    from memvault.config import get_settings

    limit = get_settings().max_body_bytes
    if len((event.get("body") or "").encode()) <= limit:
        return None
    return _refusal(body_too_large(limit))


def body_too_large(limit: int) -> PayloadTooLarge:
    """The refusal of a body over ``limit`` bytes (``max_body_bytes``), wherever it is
    counted: here, or by the local stack while it reads the body."""
    return PayloadTooLarge(f"the request body is larger than {limit} bytes", {"max_bytes": limit})


def parsed(response: dict[str, Any]) -> tuple[int, Any]:
    """Status and JSON body of a handler response (direct invocation, tests)."""
    body = response.get("body")
    return response["statusCode"], json.loads(body) if body else None
