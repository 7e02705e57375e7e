"""Direct invocation by agent runtimes: an envelope with the operation, params, body and
JWT, verified inside the function; or, in a silo deployment, the stack's fixed tenant."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.api.direct import handle_direct
from memvault.api.events import LocalLambdaContext
from memvault.config import Settings
from memvault.handlers.api import handler as lambda_handler
from memvault.identity.tokens import StaticKeys, TokenVerifier
from tests.support.api import load_event, memory_body
from tests.support.issuer import AUDIENCE, ISSUER, Issuer

pytestmark = pytest.mark.usefixtures("api")


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def invoke(issuer: Issuer) -> Any:
    verifier = TokenVerifier(StaticKeys(issuer.jwks()), issuer=ISSUER, audience=AUDIENCE, leeway=60)

    def run(event: dict[str, Any], settings: Settings | None = None) -> dict[str, Any]:
        return handle_direct(
            event,
            LocalLambdaContext(),
            settings=settings or Settings(),
            verifier=lambda: verifier,
            api=lambda_handler,
        )

    return run


def test_the_sample_envelope_writes_a_memory(invoke: Any, issuer: Issuer) -> None:
    event = load_event("direct_write_memory.json")
    event["token"] = issuer.token(subject_id="u-42")
    out = invoke(event)
    assert out["statusCode"] == 201
    assert out["body"]["kind"] == "procedural"

    read = invoke(
        {
            "operation": "memory.get",
            "token": event["token"],
            "params": {"subject_id": "u-42", "memory_id": out["body"]["memory_id"]},
        }
    )
    assert read["statusCode"] == 200
    assert read["body"]["memory_id"] == out["body"]["memory_id"]


def test_a_batch_of_writes_by_direct_invocation(invoke: Any, issuer: Issuer) -> None:
    token = issuer.token()
    out = invoke(
        {
            "operation": "memory.write_batch",
            "token": token,
            "params": {"subject_id": "u-1"},
            "body": {
                "memories": [
                    memory_body(request_id="b-1"),
                    memory_body(request_id="b-2", content="key AKIAIOSFODNN7EXAMPLE"),
                ]
            },
        }
    )
    assert out["statusCode"] == 200
    assert [i["status"] for i in out["body"]["items"]] == [201, 422]
    assert (out["body"]["written"], out["body"]["refused"]) == (1, 1)


def test_errors_have_the_same_codes_as_over_http(invoke: Any, issuer: Issuer) -> None:
    token = issuer.token()
    write = {
        "operation": "memory.write",
        "token": token,
        "params": {"subject_id": "u-1"},
        "body": memory_body(content="key AKIAIOSFODNN7EXAMPLE"),
    }
    assert invoke(write)["body"]["error"]["code"] == "secret_detected"
    other = {"operation": "memory.list", "token": token, "params": {"subject_id": "u-2"}}
    assert invoke(other)["statusCode"] == 403


@pytest.mark.parametrize(
    ("event", "code"),
    [
        ({"operation": "memory.list", "params": {"subject_id": "u-1"}}, "unauthorized"),
        (
            {"operation": "memory.list", "token": "not.a.jwt", "params": {"subject_id": "u-1"}},
            "unauthorized",
        ),
        ({"operation": "memory.explode", "token": "x"}, "validation_failed"),
        (
            {"operation": "memory.get", "token": "x", "params": {"subject_id": "u-1"}},
            "validation_failed",
        ),
        (
            {"operation": "memory.list", "token": "x", "params": {"subject_id": "../../etc"}},
            "validation_failed",
        ),
        ({"operation": "memory.list", "tenant_id": "acme"}, "validation_failed"),
        ({"nothing": True}, "validation_failed"),
    ],
)
def test_a_bad_envelope_gets_a_clear_error(invoke: Any, event: dict[str, Any], code: str) -> None:
    out = invoke(event)
    assert out["body"]["error"]["code"] == code


def test_a_silo_deployment_may_name_the_caller_instead_of_a_token(invoke: Any) -> None:
    silo = Settings(silo_tenant_id="acme")
    caller = {"sub": "runtime-role", "scope": "memory:read memory:write subjects:any"}
    write = {
        "operation": "memory.write",
        "caller": caller,
        "params": {"subject_id": "u-7"},
        "body": memory_body(),
    }
    assert invoke(write, silo)["statusCode"] == 201
    listed = invoke(
        {"operation": "memory.list", "caller": caller, "params": {"subject_id": "u-7"}}, silo
    )
    assert len(listed["body"]["items"]) == 1
    # Without a silo tenant the same envelope is refused: a pool needs a verified token.
    assert invoke(write)["body"]["error"]["code"] == "unauthorized"


def test_a_silo_deployment_refuses_a_token_of_another_tenant(invoke: Any, issuer: Issuer) -> None:
    out = invoke(
        {
            "operation": "memory.list",
            "token": issuer.token(tenant_id="globex"),
            "params": {"subject_id": "u-1"},
        },
        Settings(silo_tenant_id="acme"),
    )
    assert out["body"]["error"]["code"] == "unauthorized"
