"""Run state under the write policy and the read limits memories and sessions have.

A probe stored a checkpoint whose state held an SSN, an email and a phone number without
consent, and a ``public``-ceiling agent with ``runs:write`` read it back whole. Now
personal data in a run's content (plan version, budget, step, state, an operation's
result reference) is refused without consent and classified ``pii`` with it; the rest of
a run's content is ``internal``. A reader sees what its ceiling admits: a field above it
is answered empty and named in ``withheld``, on every route that answers a checkpoint or
an operation. A token may not replace a field it may not read. Runs on both stores.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from memvault.models.access import AccessContext, Scope
from memvault.services.bundle import Services
from memvault_wire.artifact import StartUpload
from memvault_wire.context import ContextRequest
from memvault_wire.errors import (
    ConsentRequired,
    Forbidden,
    IdempotencyKeyReused,
    NotFound,
    OperationConflict,
    SecretDetected,
    ValidationFailed,
    VersionConflict,
)
from memvault_wire.memory import Sensitivity
from memvault_wire.run import (
    Advance,
    CreateRun,
    OperationStatus,
    RecordOperation,
    RunEvent,
    RunStatus,
)
from memvault_wire.session import AppendMessage
from tests.support.harness import a_write, ctx

SSN = "078-05-1120"
EMAIL = "alice@example.com"
PHONE = "+1 650-253-0000"
PERSONAL_STATE = {"customer": {"ssn": SSN, "email": EMAIL, "phone": PHONE}, "step_no": 3}
CONTENT = ["step", "plan_version", "budget", "pending_approvals", "state", "artifact_refs"]
RUNS_AND_CONTEXT = frozenset({Scope.RUNS_WRITE, Scope.MEMORY_READ})


def reader(ceiling: Sensitivity) -> AccessContext:
    return ctx(scopes=RUNS_AND_CONTEXT, max_sensitivity=ceiling)


PII_READER = reader(Sensitivity.PII)
INTERNAL_READER = reader(Sensitivity.INTERNAL)
PUBLIC_READER = reader(Sensitivity.PUBLIC)


def running(services: Services, run_id: str = "r-1") -> None:
    runs = services.runs
    runs.create(PII_READER, run_id, CreateRun(subject_id="u-1", plan_version="p1"))
    runs.advance(
        PII_READER, run_id, Advance(expected_version=1, status=RunStatus.RUNNING, step="plan")
    )


def personal(services: Services, run_id: str = "r-1") -> None:
    """A run at version 3 whose state holds personal data, kept with consent."""
    running(services, run_id)
    services.runs.advance(
        PII_READER,
        run_id,
        Advance(
            expected_version=2,
            status=RunStatus.WAITING_APPROVAL,
            step="confirm the refund",
            state=PERSONAL_STATE,
            pending_approvals=["ap-1"],
            consent=True,
        ),
    )


def leaks(value: Any) -> list[str]:
    text = value if isinstance(value, str) else value.model_dump_json()
    return [p for p in (SSN, EMAIL, "253-0000") if p in text]


def test_personal_data_in_run_state_needs_consent_and_nothing_is_kept_without_it(
    services: Services,
) -> None:
    running(services)
    with pytest.raises(ConsentRequired) as raised:
        services.runs.advance(
            PII_READER,
            "r-1",
            Advance(expected_version=2, status=RunStatus.RUNNING, step="s", state=PERSONAL_STATE),
        )
    details = raised.value.details
    assert {"national_id", "email", "phone_number"} <= set(details["pii_types"])
    assert details["fields"] and all(f.startswith("state.customer") for f in details["fields"])
    assert leaks(str(raised.value.to_body())) == []
    assert services.runs.get(PII_READER, "r-1").version == 2  # nothing kept
    # The same holds for a run's creation and for an operation's result reference.
    with pytest.raises(ConsentRequired):
        services.runs.create(
            PII_READER, "r-2", CreateRun(subject_id="u-1", plan_version="p1", budget={EMAIL: 1})
        )
    with pytest.raises(ConsentRequired):
        services.runs.record_operation(
            PII_READER,
            "r-1",
            "op-1",
            RecordOperation(status=OperationStatus.COMMITTED, result_ref=f"mailto:{EMAIL}"),
        )
    assert services.runs.get(PII_READER, "r-1").operations == []


#: Probe 8: each was kept without consent (named by its key, or held as a number) and
#: shown to internal-ceiling readers, where the same text as prose needed consent.
NAMED_OR_NUMBERS = {
    "ssn as a number": {"ssn": 123456789},
    "ssn under a nested key": {"customer": {"ssn": "123456789"}},
    "phone as a number": {"phone": 4155550132},
    "PRC mobile under a Chinese key": {"手机号": 13812345678},
    "card number as a number": {"card_number": 4111111111111111},
    "ISO date of birth": {"date_of_birth": "1990-04-12"},
    "street address": {"address": "1600 Amphitheatre Parkway, Mountain View, CA 94043"},
    "passport number": {"passport_no": "X12345678"},
}


@pytest.mark.parametrize("state", NAMED_OR_NUMBERS.values(), ids=NAMED_OR_NUMBERS.keys())
def test_personal_data_named_by_its_key_or_held_as_a_number_needs_consent(
    services: Services, state: dict[str, Any]
) -> None:
    running(services)
    runs = services.runs
    with pytest.raises(ConsentRequired) as raised:
        runs.advance(
            PII_READER,
            "r-1",
            Advance(expected_version=2, status=RunStatus.RUNNING, step="s", state=state),
        )
    assert raised.value.details["reason"] == "pii"
    assert all(f.startswith("state.") for f in raised.value.details["fields"])
    assert runs.get(PII_READER, "r-1").version == 2  # nothing kept
    kept = runs.advance(
        PII_READER,
        "r-1",
        Advance(expected_version=2, status=RunStatus.RUNNING, step="s", state=state, consent=True),
    )
    assert kept.pii_fields == ["state"]
    assert runs.get(INTERNAL_READER, "r-1").withheld == ["state"]


def test_a_birthday_in_the_step_and_a_phone_in_the_budget_need_consent(
    services: Services,
) -> None:
    running(services)
    runs = services.runs
    birthday = Advance(
        expected_version=2, status=RunStatus.RUNNING, step="My birthday is 1990-04-12"
    )
    with pytest.raises(ConsentRequired) as raised:
        runs.advance(PII_READER, "r-1", birthday)
    assert raised.value.details["pii_types"] == ["date_of_birth"]
    kept = runs.advance(PII_READER, "r-1", birthday.model_copy(update={"consent": True}))
    assert kept.pii_fields == ["step"] and runs.get(INTERNAL_READER, "r-1").step == ""
    with pytest.raises(ConsentRequired):
        runs.create(
            PII_READER,
            "r-2",
            CreateRun(subject_id="u-1", plan_version="p1", budget={"phone": 4155550132.0}),
        )


def test_ids_counts_and_timestamps_in_run_state_stay_internal(services: Services) -> None:
    """A number under a key that names no personal data, an id, a timestamp: no consent
    needed, and shown to internal readers."""
    running(services)
    state = {
        "step": 1640,
        "tokens": 4155550132,
        "run_id": "run-1f1ef3e9-c56e-6105-bfff-114013845259",
        "created_at": "2026-01-02T03:04:05Z",
        "released": "1990-04-12",
    }
    moved = services.runs.advance(
        PII_READER,
        "r-1",
        Advance(expected_version=2, status=RunStatus.RUNNING, step="s", state=state),
    )
    assert moved.pii_fields == []
    assert services.runs.get(INTERNAL_READER, "r-1").state == state
    created, _ = services.runs.create(
        PII_READER,
        "r-2",
        CreateRun(subject_id="u-1", plan_version="p1", budget={"tokens": 4155550132.0}),
    )
    assert created.pii_fields == []


def test_a_reader_sees_only_the_run_state_its_ceiling_admits(services: Services) -> None:
    personal(services)
    runs = services.runs

    full = runs.get(PII_READER, "r-1")
    assert full.state == PERSONAL_STATE and full.withheld == [] and full.pii_fields == ["state"]

    internal = runs.get(INTERNAL_READER, "r-1")
    assert (internal.state, internal.withheld) == ({}, ["state"])
    assert (internal.step, internal.pending_approvals) == ("confirm the refund", ["ap-1"])
    assert (internal.status, internal.version) == (RunStatus.WAITING_APPROVAL, 3)

    public = runs.get(PUBLIC_READER, "r-1")
    assert public.withheld == CONTENT
    assert (public.step, public.plan_version, public.state, public.pending_approvals) == (
        "",
        "",
        {},
        [],
    )
    assert (public.status, public.version) == (RunStatus.WAITING_APPROVAL, 3)

    for low in (INTERNAL_READER, PUBLIC_READER):
        assert leaks(runs.get(low, "r-1")) == []
        assert leaks(runs.version(low, "r-1", 3)) == []
        assert runs.version(low, "r-1", 3).withheld == runs.get(low, "r-1").withheld
        context = services.context.assemble(
            low, "u-1", ContextRequest(goal="help", token_budget=4000, run_id="r-1")
        )
        assert leaks(context) == []
    assert runs.version(PII_READER, "r-1", 3).state == PERSONAL_STATE
    assert runs.version(INTERNAL_READER, "r-1", 2).withheld == []  # no personal data then


def test_answers_to_writes_leave_out_what_the_writer_may_not_read(services: Services) -> None:
    personal(services)
    runs = services.runs
    # A stale advance is answered with the current checkpoint, as the caller may see it.
    with pytest.raises(VersionConflict) as stale:
        runs.advance(
            INTERNAL_READER, "r-1", Advance(expected_version=2, status=RunStatus.RUNNING, step="s")
        )
    assert leaks(str(stale.value.to_body())) == []
    assert stale.value.details["current"]["withheld"] == ["state"]
    # An event's answer, and an advance that keeps the state it may not read.
    granted = runs.deliver_event(
        INTERNAL_READER,
        "r-1",
        RunEvent(event_id="e-1", type="approval.granted", approval_id="ap-1"),
    )
    assert granted["checkpoint"].withheld == ["state"] and leaks(granted["checkpoint"]) == []
    moved = runs.advance(
        INTERNAL_READER, "r-1", Advance(expected_version=4, status=RunStatus.RUNNING, step="pay")
    )
    assert (moved.version, moved.withheld, moved.state) == (5, ["state"], {})
    assert runs.get(PII_READER, "r-1").state == PERSONAL_STATE  # kept, still classified
    assert runs.get(PII_READER, "r-1").pii_fields == ["state"]


def test_a_token_may_not_replace_run_state_it_may_not_read(services: Services) -> None:
    personal(services)
    runs = services.runs
    with pytest.raises(Forbidden) as refused:
        runs.advance(
            INTERNAL_READER,
            "r-1",
            Advance(expected_version=3, status=RunStatus.RUNNING, step="s", state={"reset": True}),
        )
    assert refused.value.details["withheld"] == ["state"]
    assert runs.get(PII_READER, "r-1").state == PERSONAL_STATE
    # A token that may read it replaces it, and the new state is internal again.
    clean = runs.advance(
        PII_READER,
        "r-1",
        Advance(expected_version=3, status=RunStatus.RUNNING, step="s", state={"reset": True}),
    )
    assert clean.pii_fields == [] and runs.get(INTERNAL_READER, "r-1").state == {"reset": True}
    # A public token may read none of a run's content, so it replaces none of it.
    with pytest.raises(Forbidden):
        runs.advance(
            PUBLIC_READER, "r-1", Advance(expected_version=4, status=RunStatus.RUNNING, step="t")
        )


def test_an_operations_personal_result_reference_is_classified_and_withheld(
    services: Services,
) -> None:
    running(services)
    runs = services.runs
    ref = f"mailto:{EMAIL}"
    recorded, _ = runs.record_operation(
        PII_READER,
        "r-1",
        "op-1",
        RecordOperation(status=OperationStatus.COMMITTED, result_ref=ref, consent=True),
    )
    assert (recorded.result_ref, recorded.sensitivity) == (ref, Sensitivity.PII)
    (op,) = runs.get(INTERNAL_READER, "r-1").operations
    assert (op.result_ref, op.withheld, op.status.value) == (None, ["result_ref"], "COMMITTED")
    assert runs.get(PII_READER, "r-1").operations[0].result_ref == ref
    with pytest.raises(OperationConflict) as conflict:
        runs.record_operation(
            INTERNAL_READER,
            "r-1",
            "op-1",
            RecordOperation(status=OperationStatus.FAILED),
        )
    assert leaks(str(conflict.value.to_body())) == []
    # An internal reference is shown to an internal reader, not to a public one.
    runs.record_operation(
        PII_READER,
        "r-1",
        "op-2",
        RecordOperation(status=OperationStatus.COMMITTED, result_ref="s3://x/1"),
    )
    shown = {o.operation_id: o.result_ref for o in runs.get(INTERNAL_READER, "r-1").operations}
    assert shown["op-2"] == "s3://x/1"
    assert [o.result_ref for o in runs.get(PUBLIC_READER, "r-1").operations] == [None, None]


def test_a_replayed_create_from_before_consent_existed_is_the_same_run(
    services: Services,
) -> None:
    """Consent is not part of a create's identity: the same run with or without it."""
    body = CreateRun(subject_id="u-1", plan_version="p1", budget={"tokens": 5})
    services.runs.create(PII_READER, "r-1", body)
    again, created = services.runs.create(
        PII_READER,
        "r-1",
        CreateRun(subject_id="u-1", plan_version="p1", budget={"tokens": 5}, consent=True),
    )
    assert not created and again.version == 1


# --- ids and names: shown to every reader of what they name, never withheld ------------

ID_EMAIL = "li.wei@example.com"
ID_SSN = "078-05-1120"
WRITER = ctx(
    scopes=frozenset({Scope.RUNS_WRITE, Scope.SESSIONS_WRITE, Scope.ARTIFACTS_WRITE}),
    max_sensitivity=Sensitivity.PII,
)


def _refused_as_id(raised: pytest.ExceptionInfo[ValidationFailed], field: str) -> None:
    assert raised.value.details["field"] == field
    assert raised.value.details["reason"] == "pii_in_id"
    assert ID_EMAIL not in str(raised.value) and ID_SSN not in str(raised.value)


def test_a_run_id_holding_personal_data_is_refused_and_nothing_is_stored(
    services: Services,
) -> None:
    """A probe created run ``trip-<e-mail>``; the id was listed to public readers. An id
    is never withheld, so it may not hold personal data at all (consent or not)."""
    run_id = f"trip-{ID_EMAIL}"
    with pytest.raises(ValidationFailed) as raised:
        services.runs.create(
            PII_READER, run_id, CreateRun(subject_id="u-1", plan_version="p1", consent=True)
        )
    _refused_as_id(raised, "run_id")
    with pytest.raises(NotFound):
        services.runs.get(PII_READER, run_id)
    # Ids of digits (often a phone number's shape) stay open: only precise kinds are judged.
    services.runs.create(
        PII_READER, "build-12345678901", CreateRun(subject_id="u-1", plan_version="p1")
    )


def test_operation_event_approval_and_session_ids_holding_personal_data_are_refused(
    services: Services,
) -> None:
    running(services)
    with pytest.raises(ValidationFailed) as raised:
        services.runs.record_operation(
            PII_READER,
            "r-1",
            f"refund-{ID_EMAIL}",
            RecordOperation(status=OperationStatus.PENDING),
        )
    _refused_as_id(raised, "operation_id")
    with pytest.raises(ValidationFailed) as raised:
        services.runs.advance(
            PII_READER,
            "r-1",
            Advance(
                expected_version=2,
                status=RunStatus.WAITING_APPROVAL,
                step="wait",
                pending_approvals=["ap-1", f"ask-{ID_EMAIL}"],
                consent=True,
            ),
        )
    _refused_as_id(raised, "pending_approvals[1]")
    assert services.runs.get(PII_READER, "r-1").version == 2
    with pytest.raises(ValidationFailed) as raised:
        services.runs.deliver_event(
            PII_READER, "r-1", RunEvent(event_id=f"mail-{ID_EMAIL}", type="note")
        )
    _refused_as_id(raised, "event_id")
    with pytest.raises(ValidationFailed) as raised:
        services.sessions.append(
            WRITER,
            "u-1",
            f"chat-{ID_EMAIL}",
            AppendMessage(request_id="m-1", role="assistant", content="hello"),  # type: ignore[arg-type]
        )
    _refused_as_id(raised, "session_id")


def test_an_ssn_in_an_id_and_a_credential_in_a_subject_id_are_refused(
    services: Services,
) -> None:
    """A fresh probe: an SSN with its dashes was accepted in operation, run, event, approval
    and session ids and an event type (and listed to public readers), and a service token
    wrote memories under a subject id that was a GitHub token. Ids hold neither."""
    running(services)
    with pytest.raises(ValidationFailed) as raised:
        services.runs.record_operation(
            PII_READER, "r-1", f"op-{ID_SSN}", RecordOperation(status=OperationStatus.PENDING)
        )
    _refused_as_id(raised, "operation_id")
    with pytest.raises(ValidationFailed) as raised:
        services.runs.deliver_event(
            PII_READER, "r-1", RunEvent(event_id="ev-1", type=f"ssn-{ID_SSN}")
        )
    _refused_as_id(raised, "type")
    with pytest.raises(ValidationFailed) as raised:
        services.runs.create(
            PII_READER, f"case-{ID_SSN}", CreateRun(subject_id="u-1", plan_version="p1")
        )
    _refused_as_id(raised, "run_id")
    token = "ghp_" + "Zq7vN2kLx9RtWb4M" * 2 + "Ab1x"
    service = ctx(
        subject=None,
        scopes=frozenset({Scope.MEMORY_WRITE, Scope.SUBJECTS_ANY, Scope.SESSIONS_WRITE}),
    )
    with pytest.raises(SecretDetected):
        services.memory.write(service, token, a_write())
    with pytest.raises(SecretDetected):
        services.sessions.append(
            service,
            token,
            "s-1",
            AppendMessage(request_id="m-1", role="assistant", content="hello"),  # type: ignore[arg-type]
        )
    with pytest.raises(ValidationFailed) as raised:
        services.memory.write(service, f"u-{ID_SSN}", a_write())
    _refused_as_id(raised, "subject_id")


def test_an_artifact_named_with_personal_data_needs_consent_and_is_pii(
    services: Services,
) -> None:
    """As a memory's, a session message's or a run's text: personal data in an artifact's
    name is kept only with consent, and the artifact is then ``pii`` (more on both stores
    in test_artifact_names.py)."""
    data = b"scan"
    body = {
        "request_id": "up-1",
        "media_type": "text/plain",
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "name": f"passport-scan-{ID_EMAIL}.txt",
        "sensitivity": "internal",
    }
    for declared in ("internal", "pii"):
        start = StartUpload.model_validate({**body, "sensitivity": declared})
        with pytest.raises(ConsentRequired) as raised:
            services.artifacts.start(WRITER, "u-1", start)
        assert raised.value.details == {"reason": "pii", "pii_types": ["email"], "fields": ["name"]}
    out, created = services.artifacts.start(
        WRITER, "u-1", StartUpload.model_validate({**body, "consent": True})
    )
    assert created and out.sensitivity is Sensitivity.PII


# --- replays: a guess of hidden content is never confirmed ------------------------------


def test_a_create_replayed_below_the_runs_ceiling_answers_alike_for_right_and_wrong_guesses(
    services: Services,
) -> None:
    """A probe: a public-ceiling token retried another's create with guessed content and
    told 200 (right guess) from 409 (wrong). Now both are the same refusal."""
    body = {"subject_id": "u-1", "plan_version": f"plan for {EMAIL}", "consent": True}
    services.runs.create(PII_READER, "r-9", CreateRun.model_validate(body))
    answers = []
    for guess in (body["plan_version"], "plan for bob@example.com"):
        with pytest.raises(IdempotencyKeyReused) as raised:
            services.runs.create(
                INTERNAL_READER, "r-9", CreateRun.model_validate({**body, "plan_version": guess})
            )
        answers.append((str(raised.value), raised.value.details))
    assert answers[0] == answers[1]
    # A reader that may read it all still gets the replay.
    _, created = services.runs.create(PII_READER, "r-9", CreateRun.model_validate(body))
    assert created is False


def test_an_operation_replayed_below_its_ceiling_answers_alike_for_right_and_wrong_guesses(
    services: Services,
) -> None:
    running(services)
    ref = f"refund receipt sent to {EMAIL}"
    services.runs.record_operation(
        PII_READER,
        "r-1",
        "op-1",
        RecordOperation(status=OperationStatus.COMMITTED, result_ref=ref, consent=True),
    )
    answers = []
    for guess in (ref, "refund receipt sent to bob@example.com"):
        with pytest.raises(OperationConflict) as raised:
            services.runs.record_operation(
                INTERNAL_READER,
                "r-1",
                "op-1",
                RecordOperation(status=OperationStatus.COMMITTED, result_ref=guess, consent=True),
            )
        answers.append((str(raised.value), raised.value.details))
    assert answers[0] == answers[1]
    assert EMAIL not in str(answers)
    _, changed = services.runs.record_operation(
        PII_READER,
        "r-1",
        "op-1",
        RecordOperation(status=OperationStatus.COMMITTED, result_ref=ref, consent=True),
    )
    assert changed is False


def test_a_message_replayed_below_its_ceiling_answers_alike_for_right_and_wrong_guesses(
    services: Services,
) -> None:
    writer = ctx(scopes=frozenset({Scope.SESSIONS_WRITE}), max_sensitivity=Sensitivity.PII)
    lower = ctx(scopes=frozenset({Scope.SESSIONS_WRITE}), max_sensitivity=Sensitivity.INTERNAL)
    said = f"my e-mail is {EMAIL}"
    message = {"request_id": "m-1", "role": "assistant", "content": said, "consent": True}
    services.sessions.append(writer, "u-1", "s-1", AppendMessage.model_validate(message))
    answers = []
    for guess in (said, "my e-mail is bob@example.com"):
        with pytest.raises(IdempotencyKeyReused) as raised:
            services.sessions.append(
                lower, "u-1", "s-1", AppendMessage.model_validate({**message, "content": guess})
            )
        answers.append((str(raised.value), raised.value.details))
    assert answers[0] == answers[1]
    _, appended = services.sessions.append(
        writer, "u-1", "s-1", AppendMessage.model_validate(message)
    )
    assert appended is False


def test_request_ids_holding_personal_data_are_refused_on_every_write(services: Services) -> None:
    """A probe stored a session message and an artifact under ``request_id`` = an e-mail
    address; the id was then shown to internal readers of the session."""
    from tests.support.harness import a_write

    writer = ctx(
        scopes=frozenset(
            {Scope.SESSIONS_WRITE, Scope.ARTIFACTS_WRITE, Scope.MEMORY_WRITE, Scope.MEMORY_READ}
        ),
        max_sensitivity=Sensitivity.PII,
    )
    with pytest.raises(ValidationFailed) as raised:
        services.sessions.append(
            writer,
            "u-1",
            "s-1",
            AppendMessage(request_id=ID_EMAIL, role="assistant", content="hi"),  # type: ignore[arg-type]
        )
    _refused_as_id(raised, "request_id")
    data = b"x"
    start = {
        "request_id": ID_EMAIL,
        "media_type": "text/plain",
        "size_bytes": 1,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    with pytest.raises(ValidationFailed) as raised:
        services.artifacts.start(writer, "u-1", StartUpload.model_validate(start))
    _refused_as_id(raised, "request_id")
    with pytest.raises(ValidationFailed) as raised:
        services.memory.write(writer, "u-1", a_write(request_id=ID_EMAIL, consent=True))
    _refused_as_id(raised, "request_id")


def test_an_agent_role_holding_personal_data_is_refused_on_write_and_correction(
    services: Services,
) -> None:
    """Probe 8: an e-mail address was kept as an agent role (``visibility``). A role is an
    identifier matched against tokens' ``agent_role``, kept in the search index and shown
    with the memory; consent would not withhold it, so it is refused outright."""
    from memvault_wire.memory import MemoryPatch

    writer = ctx(
        scopes=frozenset({Scope.MEMORY_WRITE, Scope.MEMORY_READ}), max_sensitivity=Sensitivity.PII
    )
    with pytest.raises(ValidationFailed) as raised:
        services.memory.write(writer, "u-1", a_write(visibility=[ID_EMAIL], consent=True))
    _refused_as_id(raised, "visibility[0]")
    assert services.memory.list_memories(writer, "u-1").items == []
    written = services.memory.write(writer, "u-1", a_write(visibility=["billing-agent"])).memory
    assert written.sensitivity is Sensitivity.INTERNAL
    with pytest.raises(ValidationFailed) as raised:
        services.memory.correct(
            writer,
            "u-1",
            written.memory_id,
            MemoryPatch(expected_version=1, visibility=["billing-agent", ID_EMAIL]),
        )
    _refused_as_id(raised, "visibility[1]")
    assert services.memory.get(writer, "u-1", written.memory_id).version == 1


def test_a_recalls_run_and_task_ids_hold_no_secret_nor_personal_data(services: Services) -> None:
    """A probe's recall kept ``run_id`` = a GitHub token and ``task_id`` = a national id in
    its trace, shown to public readers."""
    from memvault_wire.errors import SecretDetected
    from memvault_wire.recall import RecallRequest

    reader = ctx(scopes=frozenset({Scope.MEMORY_READ}), max_sensitivity=Sensitivity.PII)
    token = "ghp_" + "Zq8xR2mV4kT7nB1cW9yL3pD6fH0jS5gA2eU8"
    with pytest.raises(SecretDetected):
        services.recall.recall(reader, "u-1", RecallRequest(query="x", run_id=token))
    with pytest.raises(ValidationFailed) as raised:
        services.recall.recall(reader, "u-1", RecallRequest(query="x", task_id=f"t-{ID_EMAIL}"))
    _refused_as_id(raised, "task_id")
