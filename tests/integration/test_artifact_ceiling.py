"""An artifact above a token's ceiling is, to that token, an artifact that does not exist:
naming it from a memory or a checkpoint is refused exactly as naming an unknown id is.

A probe referenced another's ``pii`` artifact with an ``internal`` token: the reference was
accepted (confirming that the artifact, and its digest, exist) and then pinned it, so its
owner's delete answered ``artifact_referenced``. On both stores.
"""

from __future__ import annotations

import pytest

from memvault.models.access import AccessContext, Scope
from memvault.services.bundle import Services
from memvault_wire.errors import ArtifactNotCommitted
from memvault_wire.memory import Sensitivity
from memvault_wire.run import Advance, ArtifactRef, CreateRun, RunStatus
from tests.support.artifacts import committed_artifact
from tests.support.harness import a_write, ctx

EVERYTHING = frozenset(Scope) - {Scope.SUBJECTS_ANY}
OWNER = ctx(scopes=EVERYTHING, max_sensitivity=Sensitivity.PII)
LOWER = ctx(scopes=EVERYTHING, max_sensitivity=Sensitivity.INTERNAL)
DATA = b"scan of a signed lease\n" * 50


def _refusal(raised: pytest.ExceptionInfo[ArtifactNotCommitted]) -> tuple[str, str]:
    return type(raised.value).__name__, str(raised.value)


def _memory_refusal(services: Services, who: AccessContext, artifact_id: str) -> tuple[str, str]:
    with pytest.raises(ArtifactNotCommitted) as raised:
        services.memory.write(who, "u-1", a_write(request_id="ref-1", artifact_id=artifact_id))
    return _refusal(raised)


def test_a_memory_may_not_name_an_artifact_above_the_writers_ceiling(services: Services) -> None:
    hidden, _ = committed_artifact(services.artifacts, OWNER, "u-1", DATA, sensitivity="pii")
    unknown = "art_" + "0" * 32
    assert _memory_refusal(services, LOWER, hidden) == _memory_refusal(services, LOWER, unknown)
    assert services.memory.list_memories(OWNER, "u-1").items == []
    # Nothing pins it: its owner deletes it.
    services.artifacts.delete(OWNER, "u-1", hidden)
    # The owner, who may read it, may name it.
    mine, _ = committed_artifact(
        services.artifacts, OWNER, "u-1", DATA, request_id="up-2", sensitivity="pii"
    )
    services.memory.write(OWNER, "u-1", a_write(request_id="ref-2", artifact_id=mine))


def test_a_checkpoint_may_not_name_an_artifact_above_the_writers_ceiling(
    services: Services,
) -> None:
    hidden, sha = committed_artifact(services.artifacts, OWNER, "u-1", DATA, sensitivity="pii")
    services.runs.create(LOWER, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))
    refusals = []
    for artifact_id, digest in ((hidden, sha), (hidden, "f" * 64), ("art_" + "0" * 32, sha)):
        with pytest.raises(ArtifactNotCommitted) as raised:
            services.runs.advance(
                LOWER,
                "r-1",
                Advance(
                    expected_version=1,
                    status=RunStatus.RUNNING,
                    step="attach",
                    artifact_refs=[ArtifactRef(artifact_id=artifact_id, sha256=digest)],
                ),
            )
        refusals.append(_refusal(raised))
    assert refusals[0] == refusals[1] == refusals[2]
    assert services.runs.get(OWNER, "r-1").version == 1
    services.artifacts.delete(OWNER, "u-1", hidden)
