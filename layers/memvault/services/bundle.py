"""The services one composition builds, together: what an entry point, the local stack or a
test holds. ``memvault.wiring`` builds it."""

from __future__ import annotations

from dataclasses import dataclass

from memvault.services.artifacts import ArtifactService
from memvault.services.context import ContextAssembler
from memvault.services.deletion import PurgeRunner
from memvault.services.memory import MemoryService
from memvault.services.recall import RecallService
from memvault.services.runs import RunService
from memvault.services.sessions import SessionService
from memvault.services.traces import TraceService
from memvault.storage.stores import Stores


@dataclass(frozen=True)
class Services:
    memory: MemoryService
    sessions: SessionService
    runs: RunService
    context: ContextAssembler
    artifacts: ArtifactService
    recall: RecallService
    purge: PurgeRunner
    stores: Stores
    traces: TraceService
