"""Scheduled: removes staged artifact uploads never committed within their bound."""

from __future__ import annotations

from typing import Any

from memvault.observability import logger


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    # Imported on the first run, not with the module: the composition (boto3, the
    # services) is most of this function's cold start, and it is built per run anyway.
    from memvault.wiring import build_services

    swept = build_services().artifacts.sweep_staged()
    logger.info("staged uploads swept", extra={"count": swept})
    return {"swept": swept}
