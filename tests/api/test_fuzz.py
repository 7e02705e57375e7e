"""Schemathesis against the generated OpenAPI document, through the local API Gateway
stand-in (token verification included) onto the real handlers and moto DynamoDB:
no request may get a 500, and every response must match the document.

(Schemathesis' own pytest plugin does not load under pytest 9, so each operation's
strategy is driven with Hypothesis directly. The positive-data-acceptance check is left
out: a schema-valid but forged ``next_token`` is rightly refused with 422, and no schema
can express "a token this listing returned".)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from memvault.api.deps import deps
from memvault.handlers.api import handler as lambda_handler
from memvault_local.adapter import ApiGatewayAdapter
from memvault_local.devkeys import DevKey
from tests.support import reliability
from tests.support.harness import make_services

#: Across every operation: requests sent, and those answered 500 or off the document.
_TOTALS = {"operations": 0, "requests": 0, "failed": 0}


@pytest.fixture(scope="module")
def dev_key(tmp_path_factory: pytest.TempPathFactory) -> DevKey:
    return DevKey.load_or_create(Path(tmp_path_factory.mktemp("memvault-home")))


@pytest.fixture(scope="module")
def api_schema(dev_key: DevKey) -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        # Recall is fuzzed against a real (embedded) index with the hashing embedder.
        services, _, _ = make_services(
            prefix="fuzz-", search_backend="embedded", embedding_model="hashing"
        )
        deps.use(services)
        app = ApiGatewayAdapter(dev_key.verifier(), lambda_handler)
        yield schemathesis.openapi.from_wsgi("/v1/openapi.json", app)
        deps.use(None)


def _operations() -> list[str]:
    from memvault.api.app import app

    return sorted(f"{r.method} {r.openapi_path}" for r in app._static_routes + app._dynamic_routes)


@pytest.mark.parametrize("operation", _operations())
def test_no_input_breaks_the_api_or_its_contract(
    api_schema: Any, dev_key: DevKey, operation: str
) -> None:
    method, path = operation.split(" ", 1)
    token = dev_key.mint(
        tenant="fuzz",
        scope="memory:read memory:write memory:delete subjects:any",
        max_sensitivity="pii",
    )
    strategy = api_schema[path][method].as_strategy()

    @given(case=strategy)
    # Derandomized, so that CI replays the same inputs every run; FUZZ_RANDOM=1 explores.
    @settings(
        max_examples=int(os.environ.get("FUZZ_EXAMPLES", "30")),
        deadline=None,
        derandomize=os.environ.get("FUZZ_RANDOM") != "1",
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        _TOTALS["requests"] += 1
        try:
            case.call_and_validate(
                headers={"Authorization": f"Bearer {token}"},
                excluded_checks=[positive_data_acceptance],
            )
        except Exception:
            _TOTALS["failed"] += 1
            raise

    try:
        check()
    finally:
        _TOTALS["operations"] += 1
        reliability.record(
            "schema-fuzz-every-route",
            category="inputs",
            fault="schemathesis inputs generated from the OpenAPI document, every route",
            oracle="no 500; every answer matches the document",
            seeds=_TOTALS["operations"],
            operations=_TOTALS["requests"],
            violations=_TOTALS["failed"],
            store="dynamodb",
            details={"routes": _TOTALS["operations"]},
        )
