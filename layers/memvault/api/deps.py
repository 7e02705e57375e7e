"""The collaborators the routes use, built lazily on first use and kept while warm.

The composition (``memvault.wiring``: boto3, the services) and the settings are imported
on first use too: they are much of the API function's cold start, and a request that
needs no services (the OpenAPI document, one refused before its route runs) never loads
the composition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memvault.api.access import caller

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

    from memvault.tenancy import TenantScopedServices
    from memvault.wiring import Services


class Dependencies:
    def __init__(self) -> None:
        self._given: Services | None = None
        self._own: Services | None = None
        self._scoped: TenantScopedServices | None = None

    def services(self) -> Services:
        """Services on the function's own credentials (silo mode, health checks)."""
        if self._given is not None:
            return self._given
        if self._own is None:
            from memvault.wiring import build_services

            self._own = build_services()
        return self._own

    def services_for(self, event: APIGatewayProxyEvent) -> Services:
        """The services a request's data access goes through: in pool mode, on a session
        scoped to the caller's tenant (never the function's own credentials)."""
        from memvault.config import get_settings

        if self._given is not None or not get_settings().tenant_role_arn:
            return self.services()
        if self._scoped is None:
            from memvault.tenancy import TenantScopedServices

            self._scoped = TenantScopedServices(get_settings())
        return self._scoped.for_tenant(caller(event).tenant_id)

    def use(self, services: Services | None) -> None:
        """Serve with these services (local stack, tests); ``None`` goes back to building."""
        self._given = services
        self._own = None
        self._scoped = None


deps = Dependencies()
