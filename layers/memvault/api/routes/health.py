"""``/v1/health`` and ``/v1/openapi.json``: the two routes that need no token."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault import __version__
from memvault.api.deps import deps
from memvault_wire.schemas import HealthOut

router = APIGatewayRouter()
PUBLIC_PATHS = frozenset({"/v1/health", "/v1/openapi.json"})


@router.get(
    "/v1/health",
    summary="Liveness and the state of each dependency (no token needed)",
    responses={
        200: {"description": "healthy", "content": {"application/json": {"model": HealthOut}}},
        503: {
            "description": "a dependency is unavailable",
            "content": {"application/json": {"model": HealthOut}},
        },
    },
    tags=["health"],
)
def health() -> Response[HealthOut]:
    dynamodb = "ok" if deps.services().memory.repo.reachable() else "unavailable"
    healthy = dynamodb == "ok"
    body = HealthOut(
        status="ok" if healthy else "degraded",
        version=__version__,
        dependencies={"dynamodb": dynamodb},
    )
    return Response(status_code=200 if healthy else 503, content_type="application/json", body=body)
