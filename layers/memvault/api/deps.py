"""The collaborators the routes use, built lazily on first use and kept while warm."""

from __future__ import annotations

from memvault.services.memory import MemoryService
from memvault.wiring import build_memory_service


class Dependencies:
    def __init__(self) -> None:
        self._service: MemoryService | None = None

    def service(self) -> MemoryService:
        if self._service is None:
            self._service = build_memory_service()
        return self._service

    def use(self, service: MemoryService | None) -> None:
        """Serve with this service (local stack, tests); ``None`` goes back to lazy building."""
        self._service = service


deps = Dependencies()
