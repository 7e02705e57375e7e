"""The collaborators the routes use, built lazily on first use and kept while warm.

The routes know the services only by their types. How to build them (the composition,
``memvault.wiring``: boto3 and every adapter) is given by the entry point
(``memvault.handlers.api``), so nothing in ``api`` imports the composition; it is built on
first use, so a request that needs no services (the OpenAPI document, one refused before
its route runs) never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from memvault.api.access import caller
from memvault_wire.errors import InternalError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

    from memvault.config import Settings
    from memvault.services.bundle import Services


class TenantScoped(Protocol):
    """Services per tenant, on sessions scoped to it (``memvault.tenancy``)."""

    def for_tenant(self, tenant_id: str) -> Services: ...


class Dependencies:
    def __init__(
        self,
        build: Callable[[], Services] | None = None,
        scoped: Callable[[Settings], TenantScoped] | None = None,
    ) -> None:
        self._build = build
        self._make_scoped = scoped
        self._given: Services | None = None
        self._own: Services | None = None
        self._scoped: TenantScoped | None = None

    def compose(
        self,
        build: Callable[[], Services],
        scoped: Callable[[Settings], TenantScoped],
    ) -> None:
        """How the services are built: on the function's own credentials, and per tenant
        in pool mode. The entry point gives them once, at import."""
        self._build, self._make_scoped = build, scoped

    def services(self) -> Services:
        """Services on the function's own credentials (silo mode, health checks)."""
        if self._given is not None:
            return self._given
        if self._own is None:
            if self._build is None:
                raise InternalError("the API's services were never composed")
            self._own = self._build()
        return self._own

    def services_for(self, event: APIGatewayProxyEvent) -> Services:
        """The services a request's data access goes through: in pool mode, on a session
        scoped to the caller's tenant (never the function's own credentials)."""
        from memvault.config import get_settings

        if self._given is not None or not get_settings().tenant_role_arn:
            return self.services()
        if self._scoped is None:
            if self._make_scoped is None:
                raise InternalError("the API's services were never composed")
            self._scoped = self._make_scoped(get_settings())
        return self._scoped.for_tenant(caller(event).tenant_id)

    def use(self, services: Services | None) -> None:
        """Serve with these services (local stack, tests); ``None`` goes back to building."""
        self._given = services
        self._own = None
        self._scoped = None


deps = Dependencies()
