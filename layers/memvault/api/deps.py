"""The collaborators the routes use, built lazily on first use and kept while warm."""

from __future__ import annotations

from memvault.wiring import Services, build_services


class Dependencies:
    def __init__(self) -> None:
        self._services: Services | None = None

    def services(self) -> Services:
        if self._services is None:
            self._services = build_services()
        return self._services

    def use(self, services: Services | None) -> None:
        """Serve with these services (local stack, tests); ``None`` goes back to lazy building."""
        self._services = services


deps = Dependencies()
