"""Scheduled: removes staged artifact uploads never committed within their bound, and
starts the purge of any deletion whose Step Functions execution never started (the start
was lost after the delete committed: reads were already blocked by the tombstone, but the
copies would stay until a purge runs)."""

from __future__ import annotations

from typing import Any

from memvault.observability import logger


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    # Imported on the first run, not with the module: the composition (boto3, the
    # services) is most of this function's cold start, and it is built per run anyway.
    from memvault.models.memory import DeletionState
    from memvault.services.deletion import resume_unfinished
    from memvault.wiring import build_services

    services = build_services()
    swept = services.artifacts.sweep_staged()
    logger.info("staged uploads swept", extra={"count": swept})
    started = 0
    if services.memory.settings.purge_state_machine_arn:
        started = len(
            resume_unfinished(
                services.purge,
                services.memory.purge,
                statuses=frozenset({DeletionState.REQUESTED, DeletionState.BLOCKED}),
                resume=False,
            )
        )
    return {"swept": swept, "purge_launches": started}
