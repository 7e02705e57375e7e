"""The direct (Lambda) transport behind the same clients.

``InProcessLambda`` stands in for boto3's Lambda client, and only for it: its ``invoke``
hands the payload the SDK built to the real direct function (``handle_direct``, the
function's own entry, verifying a real RS256 token and running the API's routes over
the services on an embedded store) and wraps the answer as boto3 does (``Payload`` a
stream, ``FunctionError`` when the function raised). That is the transport's boundary,
not the code under test: the SDK's envelope, its parsing of the answer, its retries
and its errors are all real. Lambda's own throttling and a lost answer are the two
things this stand-in produces itself, when a test asks it to, as boto3 would raise them.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from moto import mock_aws

from memvault.api.deps import deps
from memvault.api.direct import handle_direct
from memvault.api.events import LocalLambdaContext
from memvault.config import Settings
from memvault.handlers.api import handler as lambda_handler
from memvault.identity.tokens import StaticKeys, TokenVerifier
from memvault_client import (
    AsyncLambdaTransport,
    AsyncMemvaultClient,
    InternalError,
    LambdaTransport,
    MemvaultClient,
    NotFound,
    RetryPolicy,
    SearchUnavailable,
    Unauthorized,
    VersionConflict,
)
from tests.client.conftest import memory, new_subject
from tests.support.harness import make_services
from tests.support.issuer import AUDIENCE, ISSUER, Issuer

FAST = RetryPolicy(base_delay=0.01, max_delay=0.05)
SCOPES = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class InProcessLambda:
    """boto3's ``lambda`` client's ``invoke``, answered by the real direct function."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.events: list[dict[str, Any]] = []
        self.throttle_next = 0
        self.lose_next_answer = 0

    def invoke(self, **kwargs: Any) -> Mapping[str, Any]:
        assert kwargs["InvocationType"] == "RequestResponse"
        event = json.loads(kwargs["Payload"])
        self.events.append(event)
        if self.throttle_next:
            self.throttle_next -= 1
            raise ClientError(
                {
                    "Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"},
                    "ResponseMetadata": {"HTTPStatusCode": 429},
                },
                "Invoke",
            )
        try:
            answer: Any = self.handler(event, LocalLambdaContext())
            extra: dict[str, Any] = {}
        except Exception as err:  # what the Lambda runtime answers when a handler raises
            answer = {"errorMessage": str(err), "errorType": type(err).__name__}
            extra = {"FunctionError": "Unhandled"}
        if self.lose_next_answer:  # the function ran; its answer never arrived
            self.lose_next_answer -= 1
            raise ReadTimeoutError(endpoint_url="https://lambda.us-east-1.amazonaws.com")
        payload = io.BytesIO(json.dumps(answer).encode())
        return {"StatusCode": 200, "ExecutedVersion": "$LATEST", "Payload": payload, **extra}


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[Handler]:
    """The direct function's handler over services on an embedded store (S3 and KMS on
    moto), verifying the test issuer's tokens."""
    data = tmp_path_factory.mktemp("direct") / "data"
    verifier = TokenVerifier(StaticKeys(issuer.jwks()), issuer=ISSUER, audience=AUDIENCE, leeway=60)
    with mock_aws():
        services, _, _ = make_services(store="sqlite", data_dir=str(data))
        deps.use(services)
        try:
            yield lambda event, context: handle_direct(
                event, context, settings=Settings(), verifier=lambda: verifier, api=lambda_handler
            )
        finally:
            deps.use(None)
            if services.stores.database is not None:
                services.stores.database.close()


@pytest.fixture
def subject() -> str:
    return new_subject("direct")


@pytest.fixture
def invoker(direct: Handler) -> InProcessLambda:
    return InProcessLambda(direct)


@pytest.fixture
def client(invoker: InProcessLambda, issuer: Issuer, subject: str) -> Iterator[MemvaultClient]:
    transport = LambdaTransport("memvault-direct", client=invoker)
    token = issuer.token(subject_id=subject, scope=SCOPES)
    with MemvaultClient(transport=transport, token=token, retry=FAST) as mv:
        yield mv


def test_the_routes_work_over_direct_invocation(
    client: MemvaultClient, invoker: InProcessLambda, subject: str
) -> None:
    first = client.write_memory(subject, memory("Prefers dark mode", canonical_key="theme"))
    assert invoker.events[0]["operation"] == "memory.write"
    assert invoker.events[0]["params"] == {"subject_id": subject}
    assert len(invoker.events[0]["body"]["request_id"]) == 32
    second = client.correct_memory(
        subject, first.memory_id, {"expected_version": 1, "content": "Prefers light mode"}
    )
    assert client.get_memory(subject, second.memory_id).version == 2
    assert [v.version for v in client.memory_history(subject, second.memory_id).versions] == [1, 2]
    with pytest.raises(VersionConflict):
        client.correct_memory(subject, first.memory_id, {"expected_version": 1, "content": "x"})
    assert len(client.export_subject(subject).memories) == 2
    deletion = client.delete_memory(subject, second.memory_id)
    assert client.deletion_status(deletion.deletion_id).deletion_id == deletion.deletion_id
    with pytest.raises(NotFound):
        client.get_memory(subject, second.memory_id)

    session = client.append_message(subject, "s", {"role": "user", "content": "hello"})
    assert session.message_count == 1
    client.put_summary(subject, "s", {"content": "hello", "from_seq": 1, "through_seq": 1})
    assert client.read_session(subject, "s").summary is not None
    assert client.end_session(subject, "s").deleted_items >= 1

    run = f"run-{subject}"
    client.create_run(run, {"subject_id": subject, "plan_version": "p"})
    client.advance_run(run, {"expected_version": 1, "status": "RUNNING", "step": "a"})
    client.record_operation(run, "op", {"status": "PENDING"})
    client.deliver_event(run, {"event_id": "e", "type": "cancel.requested"})
    assert client.get_run(run).status == "CANCELLED"

    assembled = client.assemble_context(subject, {"goal": "plan the day", "token_budget": 300})
    assert "goal" in assembled.sections
    staged = client.start_upload(
        subject, {"media_type": "text/plain", "size_bytes": 2, "sha256": "a" * 64}
    )
    assert client.get_artifact(subject, staged.artifact_id).state == "STAGED"
    assert client.forget_subject(subject).scope == "subject"
    assert client.health().status == "ok"


def test_the_iterator_pages_over_direct_invocation(
    client: MemvaultClient, invoker: InProcessLambda, subject: str
) -> None:
    written = {client.write_memory(subject, memory(f"direct fact {n}")).memory_id for n in range(5)}
    invoker.events.clear()
    assert {m.memory_id for m in client.iter_memories(subject, page_size=2)} == written
    lists = [e for e in invoker.events if e["operation"] == "memory.list"]
    assert len(lists) == 3
    assert [e["query"]["limit"] for e in lists] == ["2", "2", "2"]
    assert "next_token" not in lists[0]["query"] and lists[2]["query"]["next_token"]


def test_lambda_throttling_is_retried_with_the_same_request_id(
    client: MemvaultClient, invoker: InProcessLambda, subject: str
) -> None:
    invoker.throttle_next = 2
    written = client.write_memory(subject, memory("Commutes by ferry"))
    assert len(invoker.events) == 3
    assert len({e["body"]["request_id"] for e in invoker.events}) == 1
    assert [m.memory_id for m in client.list_memories(subject).items] == [written.memory_id]


def test_a_lost_answer_is_retried_and_the_write_is_stored_once(
    client: MemvaultClient, invoker: InProcessLambda, subject: str
) -> None:
    invoker.lose_next_answer = 1
    written = client.write_memory(subject, memory("Owns a red bicycle"))
    assert len(invoker.events) == 2
    assert invoker.events[0]["body"] == invoker.events[1]["body"]
    assert [m.memory_id for m in client.list_memories(subject).items] == [written.memory_id]


def test_errors_over_direct_invocation_are_the_same_classes(
    invoker: InProcessLambda, subject: str
) -> None:
    transport = LambdaTransport("f", client=invoker)
    with (
        MemvaultClient(transport=transport, token="bad") as mv,
        pytest.raises(Unauthorized) as refused,
    ):
        mv.list_memories(subject)
    assert refused.value.status == 401
    assert len(invoker.events) == 1  # not retried


def test_recall_is_routed_through_direct_invocation(
    client: MemvaultClient, invoker: InProcessLambda, subject: str
) -> None:
    """The direct function offers recall: the request reaches the recall service, which
    here (services with no search index configured) answers search_unavailable, a 503
    that is retried, instead of the envelope's validation_failed for an unknown name."""
    with pytest.raises(SearchUnavailable):
        client.recall(subject, "anything")
    assert [e["operation"] for e in invoker.events] == ["memory.recall"] * FAST.max_attempts


def test_a_function_that_raised_is_an_internal_error_without_its_message(
    issuer: Issuer, subject: str
) -> None:
    def broken_verifier() -> TokenVerifier:
        raise RuntimeError("verifier misconfigured: secret-marker")

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return handle_direct(
            event, context, settings=Settings(), verifier=broken_verifier, api=lambda_handler
        )

    transport = LambdaTransport("f", client=InProcessLambda(handler))
    with (
        MemvaultClient(transport=transport, token=issuer.token()) as mv,
        pytest.raises(InternalError) as failed,
    ):
        mv.list_memories(subject)
    assert failed.value.details == {"function_error": "Unhandled", "error_type": "RuntimeError"}
    assert "secret-marker" not in str(failed.value)


@pytest.mark.usefixtures("direct")  # the services the routes run on
def test_a_silo_caller_may_stand_in_for_a_token() -> None:
    def silo(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return handle_direct(
            event,
            context,
            settings=Settings(silo_tenant_id="acme"),
            verifier=lambda: pytest.fail("no token was sent"),
            api=lambda_handler,
        )

    invoker = InProcessLambda(silo)
    caller = {"sub": "runtime-role", "scope": "memory:read memory:write subjects:any"}
    with MemvaultClient(transport=LambdaTransport("f", client=invoker, caller=caller)) as mv:
        mv.write_memory("silo-subject", memory("Silo write"))
        assert [m.content for m in mv.list_memories("silo-subject").items] == ["Silo write"]
    assert all("token" not in e and e["caller"] == caller for e in invoker.events)


def test_the_async_client_over_direct_invocation(
    invoker: InProcessLambda, issuer: Issuer, subject: str
) -> None:
    asked: list[str] = []

    def provider() -> str:
        asked.append(issuer.token(subject_id=subject, scope=SCOPES))
        return asked[-1]

    async def scenario() -> list[str]:
        transport = AsyncLambdaTransport("memvault-direct", client=invoker)
        async with AsyncMemvaultClient(transport=transport, token=provider, retry=FAST) as mv:
            invoker.throttle_next = 1
            await mv.write_memory(subject, memory("Async over Lambda"))
            return [m.content async for m in mv.iter_memories(subject)]

    assert asyncio.run(scenario()) == ["Async over Lambda"]
    # A token asked for on every attempt: the throttled write, its retry, one list page.
    assert [e["token"] for e in invoker.events] == asked and len(asked) == 3
