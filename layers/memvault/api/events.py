"""Building the API Gateway proxy event that the handlers receive.

One builder serves every path into the handlers that does not come through API Gateway:
the local HTTP adapter, direct invocation, and tests. Identity travels only as the
authorizer context, exactly as API Gateway passes a Lambda authorizer's output on.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memvault.identity.claims import Claims


def proxy_event(
    method: str,
    path: str,
    *,
    claims: Claims | None,
    body: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    stage: str = "local",
    request_id: str | None = None,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    request_id = request_id or secrets.token_hex(16)
    authorizer: dict[str, Any] | None = None
    if claims is not None:
        authorizer = {
            "principalId": claims.sub,
            "integrationLatency": 0,
            **claims.authorizer_context(),
        }
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    now = datetime.now(UTC)
    return {
        "resource": path,
        "path": path,
        "httpMethod": method.upper(),
        "headers": all_headers,
        "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method.upper(),
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": request_id,
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "identity": {"sourceIp": source_ip, "userAgent": all_headers.get("User-Agent", "")},
            "authorizer": authorizer,
            "accountId": "000000000000",
            "apiId": "local",
            "protocol": "HTTP/1.1",
        },
        "body": body,
        "isBase64Encoded": False,
    }


@dataclass
class LocalLambdaContext:
    """What Powertools reads from a Lambda context, for in-process invocations."""

    function_name: str = "memvault-api"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: secrets.token_hex(16))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:local:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000
