"""Lambda entry point behind API Gateway: every route of the HTTP API.

The composition is given to the routes' dependencies here, and built on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging import correlation_paths

from memvault.api.app import resolve
from memvault.api.deps import deps
from memvault.observability import logger, metrics, tracer

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from memvault.config import Settings
    from memvault.services.bundle import Services
    from memvault.tenancy import TenantScopedServices


def _build() -> Services:
    from memvault.wiring import build_services

    return build_services()


def _scoped(settings: Settings) -> TenantScopedServices:
    from memvault.tenancy import TenantScopedServices

    return TenantScopedServices(settings)


deps.compose(_build, _scoped)


@logger.inject_lambda_context(
    correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True
)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(event, context)
