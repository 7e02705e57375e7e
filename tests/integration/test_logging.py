"""Logs carry ids and counts, never memory content."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from memvault.observability import logger
from memvault.services.memory import MemoryService
from memvault_wire.errors import SecretDetected
from memvault_wire.memory import MemoryPatch
from tests.support.harness import a_write, ctx


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """The service's structured log lines, formatted exactly as in Lambda."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    target = logging.getLogger(logger.name)
    target.addHandler(handler)
    yield stream
    target.removeHandler(handler)


def test_logs_of_the_memory_lifecycle_carry_ids_not_content(
    service: MemoryService, log_output: io.StringIO
) -> None:
    content = "Prefers oolong tea at 3pm on Fridays"
    m = service.write(ctx(), "u-1", a_write(content=content)).memory
    v2 = service.correct(
        ctx(), "u-1", m.memory_id, MemoryPatch(expected_version=1, content=content + " and Mondays")
    )
    service.export(ctx(), "u-1")
    job = service.delete(ctx(), "u-1", v2.memory_id)
    with pytest.raises(SecretDetected):
        service.write(ctx(), "u-1", a_write(request_id="r-s", content="key AKIAIOSFODNN7EXAMPLE"))

    logs = log_output.getvalue()
    assert m.memory_id in logs and v2.memory_id in logs and job.deletion_id in logs
    assert "oolong" not in logs
    assert "AKIAIOSFODNN7EXAMPLE" not in logs
