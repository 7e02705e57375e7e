"""The collaborators the routes use, built lazily on first use and kept while warm."""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

from memvault.api.access import caller
from memvault.config import get_settings
from memvault.tenancy import TenantScopedServices
from memvault.wiring import Services, build_services


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
            self._own = build_services()
        return self._own

    def services_for(self, event: APIGatewayProxyEvent) -> Services:
        """The services a request's data access goes through: in pool mode, on a session
        scoped to the caller's tenant (never the function's own credentials)."""
        if self._given is not None or not get_settings().tenant_role_arn:
            return self.services()
        if self._scoped is None:
            self._scoped = TenantScopedServices(get_settings())
        return self._scoped.for_tenant(caller(event).tenant_id)

    def use(self, services: Services | None) -> None:
        """Serve with these services (local stack, tests); ``None`` goes back to building."""
        self._given = services
        self._own = None
        self._scoped = None


deps = Dependencies()
