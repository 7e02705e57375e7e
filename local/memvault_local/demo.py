"""A narrated walk through the governed memory service on the embedded store.

Each step prints what was asked and what memvault answered, including the refusals
that make memory trustworthy (secrets, missing consent, stale versions)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any, TextIO

from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.services.memory import MemoryService
from memvault.wiring import build_services
from memvault_wire.errors import MemvaultError
from memvault_wire.memory import Memory, MemoryPatch, MemoryWrite, Sensitivity

TENANT = "demo-tenant"
SUBJECT = "user-42"


def _agent(**overrides: Any) -> AccessContext:
    fields: dict[str, Any] = {
        "tenant_id": TENANT,
        "principal": "demo-agent",
        "subject_id": SUBJECT,
        "scopes": frozenset({Scope.MEMORY_READ, Scope.MEMORY_WRITE, Scope.MEMORY_DELETE}),
        "max_sensitivity": Sensitivity.INTERNAL,
    }
    fields.update(overrides)
    return AccessContext(**fields)


def _write(**overrides: Any) -> MemoryWrite:
    body: dict[str, Any] = {
        "request_id": "req-1001",
        "kind": "semantic",
        "canonical_key": "doc-language",
        "content": "Technical documents in workspace w1 are written in Chinese",
        "tags": ["preference", "language"],
        "scope": {"workspace": "w1", "doc_type": "internal"},
        "source": {"type": "user_statement", "ref": "session-7/msg-3"},
        "consent": True,
        "ttl_seconds": 90 * 86_400,
    }
    body.update(overrides)
    return MemoryWrite.model_validate(body)


class Narrator:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.step = 0

    def __call__(self, title: str, action: Callable[[], str]) -> None:
        self.step += 1
        try:
            answer = action()
        except MemvaultError as err:
            answer = f"refused: {err.code} ({err.status}) - {err.message}"
        self.out.write(f"{self.step:>2}. {title}\n    -> {answer}\n")


def run_demo(service: MemoryService, out: TextIO) -> None:
    say = Narrator(out)
    me = _agent()
    first = _show_idempotent_writes(service, say, me)
    second = _show_versioned_corrections(service, say, me, first)
    _show_secrets_and_consent(service, say, me)
    _show_candidates_and_tenancy(service, say, me, second)
    _show_deletion_and_forgetting(service, say, me, second)


def _show_idempotent_writes(service: MemoryService, say: Narrator, me: AccessContext) -> Memory:
    """A fact written once; its retry answered with the same memory, its request id refused
    for other content; the same key in another scope is another fact."""
    first = service.write(me, SUBJECT, _write()).memory
    say(
        "write a preference (user statement, with consent)",
        lambda: f"{first.memory_id} v{first.version} {first.status.value}",
    )
    say(
        "retry the same request (network timeout on the client)",
        lambda: f"same memory: {service.write(me, SUBJECT, _write()).memory.memory_id}",
    )
    say(
        "reuse the request id for other content",
        lambda: str(service.write(me, SUBJECT, _write(content="Everything in English"))),
    )
    say(
        "a different scope is a different fact, not a conflict",
        lambda: "v{0.version} {0.memory_id}".format(
            service.write(
                me,
                SUBJECT,
                _write(
                    request_id="req-1002",
                    content="External API documents are written in English",
                    scope={"workspace": "w1", "doc_type": "external-api"},
                ),
            ).memory
        ),
    )
    return first


def _show_versioned_corrections(
    service: MemoryService, say: Narrator, me: AccessContext, first: Memory
) -> Memory:
    """A correction at the version read, one from a stale version refused, and the fact's
    history; answers the corrected version."""
    second = service.correct(
        me,
        SUBJECT,
        first.memory_id,
        MemoryPatch(expected_version=1, content="Internal docs: Chinese"),
    )
    say(
        "correct the first fact at version 1",
        lambda: f"v{second.version} supersedes {second.supersedes_id}",
    )
    say(
        "another agent corrects it from the stale version 1",
        lambda: str(
            service.correct(
                me, SUBJECT, first.memory_id, MemoryPatch(expected_version=1, content="stale edit")
            )
        ),
    )
    say(
        "history of the fact",
        lambda: ", ".join(
            f"v{m.version} {m.status.value}" for m in service.history(me, SUBJECT, second.memory_id)
        ),
    )
    return second


def _show_secrets_and_consent(service: MemoryService, say: Narrator, me: AccessContext) -> None:
    """A credential refused; personal data refused without consent, classified with it, and
    hidden from an agent not cleared for it."""
    say(
        "store a cloud access key",
        lambda: str(
            service.write(
                me,
                SUBJECT,
                _write(
                    request_id="req-1003",
                    canonical_key=None,
                    content="deploy with AKIAIOSFODNN7EXAMPLE",
                ),
            )
        ),
    )
    say(
        "store an email address without consent",
        lambda: str(
            service.write(
                me,
                SUBJECT,
                _write(
                    request_id="req-1004",
                    canonical_key="contact",
                    consent=False,
                    content="reach me at li.wei@example.com",
                ),
            )
        ),
    )
    pii = service.write(
        me,
        SUBJECT,
        _write(
            request_id="req-1005", canonical_key="contact", content="reach me at li.wei@example.com"
        ),
    )
    say("store it with consent", lambda: f"classified {pii.memory.sensitivity.value}")
    say(
        "an agent cleared only up to 'internal' lists memories",
        lambda: f"{len(service.list_memories(me, SUBJECT).items)} visible (the pii one is not)",
    )


def _show_candidates_and_tenancy(
    service: MemoryService, say: Narrator, me: AccessContext, fact: Memory
) -> None:
    """A model's inference starts as a candidate; another tenant cannot read the fact."""
    inferred = service.write(
        me,
        SUBJECT,
        _write(
            request_id="req-1006",
            canonical_key="tea",
            content="Seems to like oolong tea",
            source={"type": "model_inferred", "ref": "run-88"},
        ),
    ).memory
    say("a model-inferred memory", lambda: f"starts as {inferred.status.value}")
    say(
        "someone in another tenant asks for the first fact",
        lambda: str(service.get(_agent(tenant_id="other-tenant"), SUBJECT, fact.memory_id)),
    )


def _show_deletion_and_forgetting(
    service: MemoryService, say: Narrator, me: AccessContext, fact: Memory
) -> None:
    """The fact deleted copy by copy and gone for reads; then the whole subject forgotten."""
    job = service.delete(me, SUBJECT, fact.memory_id)
    say(
        "delete the corrected fact",
        lambda: (
            f"{job.deletion_id} {job.status.value}: "
            + ", ".join(f"{c.name}={c.status.value}" for c in job.copies)
        ),
    )
    say("read it again", lambda: str(service.get(me, SUBJECT, fact.memory_id)))
    forget = service.forget(me, SUBJECT)
    say("forget the subject", lambda: f"{forget.deletion_id} {forget.status.value}")
    say(
        "list after forgetting", lambda: f"{len(service.list_memories(me, SUBJECT).items)} memories"
    )


def main(out: TextIO) -> int:
    with tempfile.TemporaryDirectory(prefix="memvault-demo-") as folder:
        settings = Settings(store="sqlite", data_dir=folder)
        out.write(
            "memvault demo: governed memory on the embedded store (a SQLite file in a "
            "temporary folder, removed afterwards; nothing leaves this machine)\n\n"
        )
        services = build_services(settings)
        try:
            run_demo(services.memory, out)
        finally:
            services.stores.database.close()
    out.write("\nDone. `make test` runs the whole suite.\n")
    return 0
