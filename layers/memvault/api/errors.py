"""The one place where failures become HTTP answers (docs/api.md, Errors)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from memvault_wire.errors import ALL_ERRORS, InternalError, MemvaultError, ValidationFailed
from memvault_wire.schemas import ErrorBody


def error_response(err: MemvaultError, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        status_code=err.status,
        content_type="application/json",
        body=json.dumps(err.to_body()),
        headers=headers or {},
    )


def _problem(error: dict[str, Any]) -> dict[str, str]:
    if error.get("type") == "json_invalid":
        # json's own message ("Expecting ',' delimiter", a key given twice) holds no
        # input; the character offset it came with is left out with the body.
        reason = str((error.get("ctx") or {}).get("error") or "")
        return {
            "location": "body",
            "problem": f"the body is not valid JSON: {reason}" if reason else "JSON decode error",
            "type": "json_invalid",
        }
    return {
        "location": ".".join(_shown(p) for p in error.get("loc", ())),
        "problem": error.get("msg", ""),
        "type": error.get("type", ""),
    }


def _shown(part: Any) -> str:
    """A location's part: a field or key name is the caller's own, shown only when it
    holds no credential and no personal data (``memvault.policy.echo``)."""
    from memvault.policy.echo import echoable  # the scanners load with a refusal only

    text = str(part)
    return text if isinstance(part, int) or echoable(text) else "<name not shown>"


def validation_response(errors: list[dict[str, Any]]) -> Response[Any]:
    # Input values are left out: they may hold memory content or a credential.
    problems = [_problem(e) for e in errors]
    where = ", ".join(p["location"] for p in problems[:5]) or "the request"
    return error_response(
        ValidationFailed(
            f"the request does not match the API contract at: {where}", {"errors": problems}
        )
    )


def internal_response(correlation_id: str | None) -> Response[Any]:
    return error_response(
        InternalError(
            "an unexpected error occurred; quote the correlation id when reporting it",
            {"correlation_id": correlation_id},
        )
    )


def documented(status: int, model: Any, *errors: int) -> dict[int, OpenAPIResponse]:
    """OpenAPI entries: the success answer and its model, the error answers a route can give,
    and those every protected route can give (415: a body sent as another media type than
    JSON, ``app._not_json``)."""
    codes = sorted({*errors, 401, 413, 415, 422, 429, 500})
    responses: dict[int, OpenAPIResponse] = {
        status: {"description": "success", "content": {"application/json": {"model": model}}}
    }
    for code in codes:
        responses[code] = {
            "description": ", ".join(c.code for c in ALL_ERRORS if c.status == code),
            "content": {"application/json": {"model": ErrorBody}},
        }
    return responses
