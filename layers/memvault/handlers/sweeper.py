"""Scheduled: removes staged artifact uploads never committed within their bound, and
brings every unfinished deletion to an end without anyone asking: a job whose Step
Functions execution never started (the start was lost after the delete committed), one
whose execution failed (a copy's retries ran out: an index outage, throttles), and one
cut short between steps. Reads were blocked by the tombstone all along; this clears the
copies. The launcher names each attempt (``del_…``, ``del_…-2`` …), skips a job whose
newest execution still runs, and stops after a bounded number of attempts."""

from __future__ import annotations

from typing import Any

from memvault.observability import logger, metrics


@metrics.log_metrics  # PurgeAbandoned, when a deletion's relaunches run out
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    # Imported on the first run, not with the module: the composition (boto3, the
    # services) is most of this function's cold start, and it is built per run anyway.
    from memvault.services.deletion import resume_unfinished
    from memvault.wiring import build_services

    services = build_services()
    swept = services.artifacts.sweep_staged()
    logger.info("staged uploads swept", extra={"count": swept})
    started = 0
    if services.memory.settings.purge_state_machine_arn:
        started = len(resume_unfinished(services.purge, services.memory.purge))
    return {"swept": swept, "purge_launches": started}
