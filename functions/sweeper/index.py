"""Scheduled: removes staged artifact uploads never committed within their bound."""

from __future__ import annotations

from typing import Any

from memvault.observability import logger
from memvault.wiring import build_services


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    swept = build_services().artifacts.sweep_staged()
    logger.info("staged uploads swept", extra={"count": swept})
    return {"swept": swept}
