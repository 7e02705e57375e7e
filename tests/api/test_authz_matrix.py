"""Authorization matrix: every documented route against every kind of hostile caller.

The rows come from the served OpenAPI document (``GET /v1/openapi.json``): a route the
document lists and this file has no row for fails the run, so a new route gets its row
here (a victim, a request, an expectation per caller) before it ships.

For each row the owner (tenant ``acme``, subject ``u-1``, agent role ``planner``, ceiling
``internal``) first creates the victim through the API: a memory visible to ``planner``
only, a session with messages and a summary, a run, an artifact, a deletion. Then each
hostile caller, which differs from the owner in exactly one respect, sends the request:

- ``no-token``: no verified identity reaches the handler;
- ``other-tenant``: the same subject id in another tenant (a fresh tenant per request);
- ``other-subject``: another subject of the same tenant;
- ``missing-scope``: the owner's scopes less every scope the route accepts;
- ``lower-ceiling``: ``max_sensitivity=public``, below the victim's ``internal``;
- ``other-role``: agent role ``critic``, outside the memory's visibility list.

The oracle, per request: the status (and error code) the row expects, as docs/api.md and the
services define them (401, 403, 404, a documented 409; or a 2xx for a caller acting in its
own tenant, or for a listing that must leave the victim out); never a 5xx; no marker of a
resource hidden from that caller anywhere in the answer (unique canary words in the
content, and the ids the caller did not send itself); and, for every request that is not a
GET, the victim re-read by the owner afterwards unchanged. Each row's owner request is
sent last and must succeed and show the victim's markers: that proves each refusal is the
authorization's (not a malformed request's) and that the marker check can see a leak.

Sessions, runs and artifacts carry no visibility list, and deletion jobs no sensitivity
(docs/api.md: ``visibility`` is a memory's; ``max_sensitivity`` is what a caller may read):
those cells are listed as not applicable, with the reason, and are not sent. A run's
content is ``internal`` (``pii`` with personal data): a ``public`` token is answered the
run's control state without it, may not replace it, and may still record operations and
deliver events (they replace none of it).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from memvault.api.deps import deps
from memvault.embeddings.hashing import HashingEmbedder
from memvault.identity.claims import Claims
from tests.support import reliability
from tests.support.api import Answer, call, claims, memory_body
from tests.support.artifacts import put
from tests.support.recall import RecallRig, make_rig

ATTACKERS = (
    "no-token",
    "other-tenant",
    "other-subject",
    "missing-scope",
    "lower-ceiling",
    "other-role",
)
#: The callers each row states an expectation for, in the order of ``Probe.expect``; the
#: other two get the same answer on every protected route: 401 without a token, 403
#: without the scope.
PER_ROW = ("other-tenant", "other-subject", "lower-ceiling", "other-role")
#: The routes that need no token (docs/api.md, "Identity"; the document says ``security: []``).
PUBLIC = frozenset({("GET", "/v1/health"), ("GET", "/v1/openapi.json")})
SCOPES = frozenset(
    {
        "memory:read",
        "memory:write",
        "memory:delete",
        "sessions:write",
        "runs:write",
        "artifacts:write",
    }
)

M = "/v1/subjects/{subject_id}/memories"
MEMORY = f"{M}/{{memory_id}}"
SESSION = "/v1/subjects/{subject_id}/sessions/{session_id}"
RUN = "/v1/runs/{run_id}"
ARTIFACTS = "/v1/subjects/{subject_id}/artifacts"
ARTIFACT = f"{ARTIFACTS}/{{artifact_id}}"
CONTEXT = "/v1/subjects/{subject_id}/context"
FEEDBACK = "/v1/subjects/{subject_id}/feedback"

#: The scopes each protected route accepts (any one of them will do). The document states
#: them in each summary ("(scope memory:read or memory:delete)");
#: ``test_the_scope_table_agrees_with_the_document`` holds the two together.
ACCEPTED: dict[tuple[str, str], frozenset[str]] = {
    ("POST", M): frozenset({"memory:write"}),
    ("POST", f"{M}/batch"): frozenset({"memory:write"}),
    ("GET", M): frozenset({"memory:read"}),
    ("DELETE", M): frozenset({"memory:delete"}),
    ("GET", MEMORY): frozenset({"memory:read"}),
    ("PATCH", MEMORY): frozenset({"memory:write"}),
    ("DELETE", MEMORY): frozenset({"memory:delete"}),
    ("GET", f"{MEMORY}/history"): frozenset({"memory:read"}),
    ("GET", "/v1/subjects/{subject_id}/export"): frozenset({"memory:read"}),
    ("POST", "/v1/subjects/{subject_id}/recall"): frozenset({"memory:read"}),
    ("GET", "/v1/deletions/{deletion_id}"): frozenset({"memory:read", "memory:delete"}),
    ("GET", f"{MEMORY}/trace"): frozenset({"memory:read"}),
    ("GET", "/v1/recalls/{recall_id}"): frozenset({"memory:read"}),
    ("POST", FEEDBACK): frozenset({"memory:write"}),
    ("GET", FEEDBACK): frozenset({"memory:read"}),
    ("POST", f"{SESSION}/messages"): frozenset({"sessions:write"}),
    ("GET", SESSION): frozenset({"sessions:write", "memory:read"}),
    ("PUT", f"{SESSION}/summary"): frozenset({"sessions:write"}),
    ("DELETE", SESSION): frozenset({"sessions:write"}),
    ("PUT", RUN): frozenset({"runs:write"}),
    ("GET", RUN): frozenset({"runs:write"}),
    ("GET", f"{RUN}/versions/{{version}}"): frozenset({"runs:write"}),
    ("POST", f"{RUN}/checkpoints"): frozenset({"runs:write"}),
    ("PUT", f"{RUN}/operations/{{operation_id}}"): frozenset({"runs:write"}),
    ("POST", f"{RUN}/events"): frozenset({"runs:write"}),
    ("GET", f"{RUN}/events"): frozenset({"runs:write"}),
    ("POST", CONTEXT): frozenset({"memory:read"}),
    ("POST", f"{CONTEXT}/reproduce"): frozenset({"memory:read"}),
    ("POST", ARTIFACTS): frozenset({"artifacts:write"}),
    ("POST", f"{ARTIFACT}/commit"): frozenset({"artifacts:write"}),
    ("GET", ARTIFACT): frozenset({"memory:read"}),
    # ArtifactService.delete also takes memory:delete; the summary names artifacts:write only.
    ("DELETE", ARTIFACT): frozenset({"artifacts:write", "memory:delete"}),
}
#: Scopes a route accepts that its summary does not name (see the entry above).
UNDOCUMENTED_SCOPES = {("DELETE", ARTIFACT): frozenset({"memory:delete"})}

#: Cells where production code is known to answer wrongly. The matrix keeps the correct
#: expectation; a cell listed here that deviates is counted (``known_holes`` in the
#: recorded details) instead of failing the run, and one that no longer deviates fails it,
#: so that the entry is removed with the fix.
KNOWN_HOLES: frozenset[tuple[str, str, str]] = frozenset(
    # Every hole this matrix found is closed, each with its own regression test: an artifact
    # above the caller's ceiling is absent on replay, commit and delete; a session's summary
    # or messages above it refuse replacing and ending; forgetting a subject refuses a
    # token that may not read every memory; another subject's run id is its own run.
    # A hole found later goes here, with its cause, until it is fixed.
)

CODES = {401: "unauthorized", 403: "forbidden", 404: "not_found"}
STABLE = {
    "memory": ("memory_id", "version", "status", "content", "tags", "visibility", "sensitivity"),
    "run": ("version", "status", "step", "plan_version", "pending_approvals", "state"),
    "artifact": ("artifact_id", "state", "version", "sha256", "name", "referenced_by"),
}


# ------------------------------------------------------------------------ expectations


@dataclass(frozen=True)
class Deny:
    """Refused with one of these statuses (and the code that goes with each)."""

    statuses: frozenset[int]
    code: str | None = None


@dataclass(frozen=True)
class Allow:
    """Answered, but with nothing of the victim: the caller acts in its own tenant, or a
    listing leaves out what the caller may not read. ``grows``: the request adds to the
    victim (an append) without changing what was there. ``drives``: the request moves the
    victim on by its rules (a run's operation or event) without showing any of it."""

    status: int
    grows: bool = False
    drives: bool = False


@dataclass(frozen=True)
class Indistinct:
    """The same answer as for an id nobody holds: the victim's existence stays private."""


@dataclass(frozen=True)
class NotApplicable:
    reason: str


Expect = Deny | Allow | Indistinct | NotApplicable


def deny(*statuses: int, code: str | None = None) -> Deny:
    return Deny(frozenset(statuses), code)


FORBIDDEN, NOT_FOUND, UNAUTHORIZED = deny(403), deny(404), deny(401)
NOT_WRITABLE = deny(409, code="fact_not_writable")
NO_VISIBILITY = NotApplicable("sessions, runs and artifacts carry no visibility list")
#: Run ids are unique per subject: another subject's token means its own (absent) run, 404,
#: or, naming the owner in the query parameter ``subject_id``, is refused, 403.
OTHER_SUBJECTS_RUN = deny(403, 404)
REPLAY_REFUSED = deny(409, code="idempotency_key_reused")
JOB = NotApplicable("a deletion job holds ids and statuses, no sensitivity or visibility")


# ------------------------------------------------------------------------- principals


@dataclass(frozen=True)
class Principal:
    tenant: str = "acme"
    subject: str = "u-1"
    scopes: frozenset[str] = SCOPES
    role: str | None = "planner"
    ceiling: str = "internal"

    def token(self) -> Claims:
        return claims(
            self.tenant,
            self.subject,
            " ".join(sorted(self.scopes)),
            agent_role=self.role,
            max_sensitivity=self.ceiling,
        )


OWNER = Principal()
_tenants = itertools.count()


def hostile(kind: str, owner: Principal, accepted: frozenset[str]) -> Principal | None:
    """The owner, changed in exactly one respect."""
    if kind == "no-token":
        return None
    if kind == "other-tenant":
        # A fresh tenant per request, so that what one request creates there (a copy of a
        # replayed body) is never mistaken for a leak by the next.
        return replace(owner, tenant=f"globex{next(_tenants)}")
    if kind == "other-subject":
        return replace(owner, subject="u-2")
    if kind == "missing-scope":
        return replace(owner, scopes=owner.scopes - accepted)
    if kind == "lower-ceiling":
        return replace(owner, ceiling="public")
    assert kind == "other-role"
    return replace(owner, role="critic")


# ----------------------------------------------------------------------------- victims


@dataclass
class Victim:
    """What the owner created for a row: path parameters, the bodies it sent, markers."""

    owner: Principal
    ids: dict[str, Any]
    #: Set when a request changed the victim: the next request gets a fresh one.
    dirty: bool = False
    #: The owner's last view of it, by what was looked at: the next request's "before".
    seen: dict[str, Any] = field(default_factory=dict)


Body = Callable[[Victim, Principal], Any]


@dataclass(frozen=True)
class Probe:
    """One row: a route, its victim, the owner's answer, and what each caller gets."""

    method: str
    path: str
    #: ``world`` (shared, never changed by the row's requests) or a fresh-victim builder.
    victim: str
    #: The owner's answer.
    control: int
    #: Other tenant, other subject, lower ceiling, other role (no token: 401; missing
    #: scope: 403, everywhere).
    expect: tuple[Expect, Expect, Expect, Expect]
    body: Body | None = None
    #: What the owner re-reads around every request but a GET: memory, session, run, artifact.
    looks: str | None = None
    #: Victim ids (markers) the owner's answer must show.
    sees: tuple[str, ...] = ()
    #: The body is one write sent as a batch (``POST .../memories/batch``): a 200 answer is
    #: judged by its one item's status and code, as the single write's answer is.
    batch: bool = False

    @property
    def route(self) -> tuple[str, str]:
        return (self.method, self.path)

    def expectation(self, kind: str) -> Expect:
        if kind == "no-token":
            return UNAUTHORIZED
        if kind == "missing-scope":
            return FORBIDDEN
        return dict(zip(PER_ROW, self.expect, strict=True))[kind]


def _attempt(v: Victim, caller: Principal) -> dict[str, Any]:
    """A hostile write to the victim's fact: same key, another request id and content."""
    return memory_body(
        request_id=f"atk-{secrets.token_hex(4)}",
        canonical_key=v.ids["canonical_key"],
        content="The subject now prefers coffee",
        source={"type": "tool_result", "ref": "tool-9"},
        visibility=["planner"],  # the owner's control writes it: it stays hidden as well
    )


def _replay(name: str) -> Body:
    return lambda v, _: v.ids[name]


def _batched(one: Body) -> Body:
    return lambda v, caller: {"memories": [one(v, caller)]}


def _item_answer(answer: Answer) -> Answer:
    """A batch's one write, as the single write would have answered it."""
    if answer.status != 200 or not isinstance(answer.body, dict):
        return answer
    (item,) = answer.body["items"]
    body = {"error": item["error"]} if item["error"] else item["memory"]
    return Answer(item["status"], body, answer.headers)


def _note(v: Victim, caller: Principal) -> dict[str, Any]:
    return {"request_id": f"atk-{secrets.token_hex(4)}", "role": "assistant", "content": "Hi"}


def _same_run(v: Victim, caller: Principal) -> dict[str, Any]:
    """The owner's creation payload, for the caller's own subject."""
    return {"subject_id": caller.subject, "plan_version": v.ids["plan_version"]}


def _cancel(v: Victim, caller: Principal) -> dict[str, Any]:
    return {"event_id": f"ev-{secrets.token_hex(4)}", "type": "cancel.requested"}


def _feedback(v: Victim, caller: Principal) -> dict[str, Any]:
    return {"recall_id": v.ids["recall_id"], "memory_id": v.ids["memory_id"], "verdict": "helpful"}


SEEN_MEMORY = ("memory_secret", "memory_id")
SEEN_CONTEXT = ("memory_secret", "session_secret", "summary_secret", "run_secret")
OWN = Allow  # answered in the caller's own tenant, or as a listing without the victim
#: Forgetting, ending a session, replacing a summary: any refusal will do.
REFUSED = deny(403, 404, 409)
NF, FB, NA_V = NOT_FOUND, FORBIDDEN, NO_VISIBILITY

PROBES: tuple[Probe, ...] = (
    # long-term memory        victim  owner  other-tenant, other-subject, ceiling, role
    Probe("POST", M, "memory", 201, (OWN(201), FB, NOT_WRITABLE, NOT_WRITABLE),
          body=_attempt, looks="memory"),
    Probe("POST", M, "world", 201, (OWN(201), FB, NF, NF),
          body=_replay("memory_body"), looks="memory", sees=("memory_id",)),
    Probe("POST", f"{M}/batch", "memory", 201, (OWN(201), FB, NOT_WRITABLE, NOT_WRITABLE),
          body=_batched(_attempt), looks="memory", batch=True),
    Probe("POST", f"{M}/batch", "world", 201, (OWN(201), FB, NF, NF),
          body=_batched(_replay("memory_body")), looks="memory", sees=("memory_id",),
          batch=True),
    Probe("GET", M, "world", 200, (OWN(200), FB, OWN(200), OWN(200)), sees=SEEN_MEMORY),
    Probe("DELETE", M, "subject", 202, (OWN(202), FB, REFUSED, REFUSED), looks="memory"),
    Probe("GET", MEMORY, "world", 200, (NF, FB, NF, NF), sees=SEEN_MEMORY[:1]),
    Probe("PATCH", MEMORY, "memory", 200, (NF, FB, NF, NF),
          body=lambda v, _: {"expected_version": 1, "tags": ["changed"]}, looks="memory"),
    Probe("DELETE", MEMORY, "memory", 202, (NF, FB, NF, NF), looks="memory"),
    Probe("GET", f"{MEMORY}/history", "world", 200, (NF, FB, NF, NF), sees=SEEN_MEMORY[:1]),
    Probe("GET", "/v1/subjects/{subject_id}/export", "world", 200,
          (OWN(200), FB, OWN(200), OWN(200)), sees=SEEN_MEMORY),
    Probe("POST", "/v1/subjects/{subject_id}/recall", "world", 200,
          (OWN(200), FB, OWN(200), OWN(200)),
          body=lambda v, _: {"query": v.ids["memory_topic"], "limit": 20}, sees=SEEN_MEMORY),
    Probe("GET", "/v1/deletions/{deletion_id}", "world", 200, (NF, NF, JOB, JOB)),
    # traces and feedback: ids only, and only of what the reader may read now
    Probe("GET", f"{MEMORY}/trace", "world", 200, (NF, FB, NF, NF), sees=("memory_id",)),
    Probe("GET", "/v1/recalls/{recall_id}", "world", 200,
          (NF, OTHER_SUBJECTS_RUN, OWN(200), OWN(200)), sees=("recall_id",)),
    Probe("POST", FEEDBACK, "world", 201, (NF, FB, NF, NF),
          body=_feedback, looks="memory", sees=("memory_id",)),
    Probe("GET", FEEDBACK, "world", 200, (OWN(200), FB, OWN(200), OWN(200)),
          sees=("memory_id",)),
    # sessions: a public token may add a message (it supersedes nothing), but the session
    # it is answered must leave out the messages above its ceiling
    Probe("POST", f"{SESSION}/messages", "session", 201,
          (OWN(201), FB, OWN(201, grows=True), NA_V),
          body=_note, looks="session", sees=("session_secret",)),
    Probe("GET", SESSION, "world", 200, (NF, FB, OWN(200), NA_V),
          sees=("session_secret", "summary_secret")),
    Probe("PUT", f"{SESSION}/summary", "session", 200, (NF, FB, REFUSED, NA_V),
          body=lambda v, _: {"content": "Replaced", "from_seq": 1, "through_seq": 1},
          looks="session"),
    Probe("DELETE", SESSION, "session", 200, (NF, FB, REFUSED, NA_V), looks="session"),
    # runs: a public token sees a run's control state, never its (internal) content
    # (a lower token's replay of a create is refused whether or not its payload matches)
    Probe("PUT", RUN, "world", 200, (OWN(201), Indistinct(), REPLAY_REFUSED, NA_V),
          body=_same_run, looks="run", sees=("run_secret",)),
    Probe("GET", RUN, "world", 200, (NF, OTHER_SUBJECTS_RUN, OWN(200), NA_V),
          sees=("run_secret",)),
    Probe("GET", f"{RUN}/versions/{{version}}", "world", 200,
          (NF, OTHER_SUBJECTS_RUN, OWN(200), NA_V), sees=("run_secret",)),
    Probe("POST", f"{RUN}/checkpoints", "run", 200, (NF, OTHER_SUBJECTS_RUN, FB, NA_V),
          body=lambda v, _: {"expected_version": 1, "status": "RUNNING", "step": "hijacked"},
          looks="run"),
    Probe("PUT", f"{RUN}/operations/{{operation_id}}", "run", 200,
          (NF, OTHER_SUBJECTS_RUN, OWN(200, drives=True), NA_V),
          body=lambda v, _: {"status": "COMMITTED", "result_ref": "forged"}, looks="run"),
    Probe("POST", f"{RUN}/events", "run", 200,
          (NF, OTHER_SUBJECTS_RUN, OWN(200, drives=True), NA_V), body=_cancel, looks="run"),
    Probe("GET", f"{RUN}/events", "world", 200,
          (NF, OTHER_SUBJECTS_RUN, OWN(200), NA_V), sees=("run_event_id",)),
    # working memory (the other tenant's request names a run that tenant does not hold)
    Probe("POST", CONTEXT, "world", 200, (NF, FB, OWN(200), OWN(200)),
          body=_replay("context_body"), sees=SEEN_CONTEXT),
    Probe("POST", f"{CONTEXT}/reproduce", "world", 200, (NF, FB, NF, NF),
          body=_replay("manifest"), sees=SEEN_CONTEXT),
    # artifacts (a replayed upload by a token that may not read it: 404, as a memory's)
    Probe("POST", ARTIFACTS, "world", 201, (OWN(201), FB, NF, NA_V),
          body=_replay("upload_body"), looks="artifact", sees=("artifact_id",)),
    Probe("POST", f"{ARTIFACT}/commit", "staged", 200, (NF, FB, NF, NA_V),
          looks="artifact", sees=("artifact_secret",)),
    Probe("GET", ARTIFACT, "world", 200, (NF, FB, NF, NA_V), sees=("artifact_secret",)),
    Probe("DELETE", ARTIFACT, "artifact", 202, (NF, FB, NF, NA_V), looks="artifact"),
)  # fmt: skip


# -------------------------------------------------------------------------------- lab

#: Who must never see a resource of each kind: a memory is hidden from every attacker
#: here (the victim is internal and visible to planner only); sessions, artifacts and a
#: run's content have a sensitivity but no visibility list; a run's event receipts hold
#: ids only (the run's control state), which its subject's tokens may read.
HIDDEN_FROM = {
    "memory": frozenset(ATTACKERS),
    "session": frozenset(ATTACKERS) - {"other-role"},
    "artifact": frozenset(ATTACKERS) - {"other-role"},
    "run": frozenset(ATTACKERS) - {"other-role"},
    "run-event": frozenset(ATTACKERS) - {"other-role", "lower-ceiling"},
}


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class Outcome:
    label: str
    attacker: str
    status: int | None
    problems: list[str]


@dataclass
class Lab:
    """The victims and their markers, on one store, and the judging of each request."""

    rig: RecallRig
    #: Per route, the query parameters the document declares that name the victim's
    #: subject (``subject_id`` on the run routes): sent, so that a caller names it.
    queries: dict[tuple[str, str], tuple[str, ...]]
    markers: list[tuple[str, str]] = field(default_factory=list)  # (value, resource kind)
    fresh: dict[str, Victim] = field(default_factory=dict)
    _n: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.world = self._world()

    # ------------------------------------------------------------------ building

    def n(self) -> int:
        return next(self._n)

    def marker(self, kind: str, value: str | None = None) -> str:
        value = value or f"zq{kind[:3]}{secrets.token_hex(5)}"
        self.markers.append((value, kind))
        return value

    def ok(self, method: str, path: str, who: Principal, body: Any, status: int) -> Any:
        answer = call(method, path, who.token(), body)
        assert answer.status == status, (method, path, answer.status, answer.body)
        return answer.body

    def memory(self, owner: Principal) -> dict[str, Any]:
        n, topic, secret = self.n(), self.marker("memory"), self.marker("memory")
        body = memory_body(
            request_id=f"victim-{n}",
            canonical_key=f"victim-fact-{n}",
            content=f"The subject prefers {topic} tea; keep {secret} private",
            source={"type": "tool_result", "ref": "tool-1"},
            visibility=["planner"],
        )
        made = self.ok("POST", f"/v1/subjects/{owner.subject}/memories", owner, body, 201)
        self.marker("memory", made["memory_id"])
        return {
            "subject_id": owner.subject,
            "memory_id": made["memory_id"],
            "canonical_key": body["canonical_key"],
            "memory_body": body,
            "memory_topic": topic,
            "memory_secret": secret,
        }

    def session(self, owner: Principal) -> dict[str, Any]:
        sid, said, summed = f"s-{self.n()}", self.marker("session"), self.marker("session")
        base = f"/v1/subjects/{owner.subject}/sessions/{sid}"
        for i, (role, text) in enumerate((("user", f"Meet at {said}"), ("assistant", "Noted"))):
            message = {"request_id": f"{sid}-{i}", "role": role, "content": text}
            # The user's words come with the subject's own token (no agent role).
            writer = replace(owner, role=None) if role == "user" else owner
            self.ok("POST", f"{base}/messages", writer, message, 201)
        summary = {"content": f"They meet at {summed}", "from_seq": 1, "through_seq": 2}
        self.ok("PUT", f"{base}/summary", owner, summary, 200)
        return {"session_id": sid, "session_secret": said, "summary_secret": summed}

    def run(self, owner: Principal) -> dict[str, Any]:
        rid, secret = f"run-{self.n()}", self.marker("run")
        plan = f"plan-{secret}"
        self.ok(
            "PUT",
            f"/v1/runs/{rid}",
            owner,
            {"subject_id": owner.subject, "plan_version": plan},
            201,
        )
        return {"run_id": rid, "plan_version": plan, "run_secret": secret}

    def artifact(self, owner: Principal, *, commit: bool) -> dict[str, Any]:
        n, secret = self.n(), self.marker("artifact")
        data = f"artifact bytes {n}".encode()
        body = {
            "request_id": f"upload-{n}",
            "media_type": "text/plain",
            "size_bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "name": f"report-{secret}.txt",
        }
        base = f"/v1/subjects/{owner.subject}/artifacts"
        started = self.ok("POST", base, owner, body, 201)
        aid = self.marker("artifact", started["artifact_id"])
        upload = started["upload"]
        assert put(self.rig.services.artifacts, upload["url"], data, upload["headers"]) == 200
        if commit:
            self.ok("POST", f"{base}/{aid}/commit", owner, None, 200)
        return {
            "subject_id": owner.subject,
            "artifact_id": aid,
            "artifact_secret": secret,
            "upload_body": body,
        }

    def _world(self) -> Victim:
        """The shared victim: one of every resource kind, indexed, and the owner's working
        memory assembled over them (its manifest is what ``reproduce`` is sent)."""
        o = OWNER
        ids: dict[str, Any] = self.memory(o)
        # A second version, so that history has more than one to hide.
        memory = f"/v1/subjects/{o.subject}/memories/{ids['memory_id']}"
        kept = {"expected_version": 1, "tags": ["preference", "kept"]}
        self.marker("memory", self.ok("PATCH", memory, o, kept, 200)["memory_id"])
        gone = self.memory(o)
        deleted = f"/v1/subjects/{o.subject}/memories/{gone['memory_id']}"
        ids["deletion_id"] = self.ok("DELETE", deleted, o, None, 202)["deletion_id"]
        ids |= self.session(o) | self.run(o) | self.artifact(o, commit=True)
        run = f"/v1/runs/{ids['run_id']}"
        advance = {"expected_version": 1, "status": "RUNNING", "step": "collect"}
        self.ok("POST", f"{run}/checkpoints", o, advance, 200)
        self.ok("PUT", f"{run}/operations/op-1", o, {"status": "PENDING"}, 200)
        # An event that changes nothing: its receipt is what the events listing shows.
        ids["run_event_id"] = self.marker("run-event")
        event = {"event_id": ids["run_event_id"], "type": "note.added", "payload": {"n": 1}}
        self.ok("POST", f"{run}/events", o, event, 200)
        self.rig.sync()  # recall and context search the index
        ids["context_body"] = {
            "goal": "Plan the subject's week",
            "token_budget": 4000,
            "session_id": ids["session_id"],
            "run_id": ids["run_id"],
            "query": ids["memory_topic"],
        }
        context = f"/v1/subjects/{o.subject}/context"
        ids["manifest"] = self.ok("POST", context, o, ids["context_body"], 200)["manifest"]
        # The assembly's recall, and feedback on the memory it served.
        ids["recall_id"] = ids["manifest"]["recall_ids"][0]
        feedback = f"/v1/subjects/{o.subject}/feedback"
        self.ok("POST", feedback, o, _feedback(Victim(o, ids), o), 201)
        return Victim(o, ids)

    def victim(self, name: str) -> Victim:
        if name == "world":
            return self.world
        current = self.fresh.get(name)
        if current is None or current.dirty:
            current = self.fresh[name] = self._build(name)
        return current

    def _build(self, name: str) -> Victim:
        o = OWNER
        if name == "memory":
            return Victim(o, self.memory(o))
        if name == "subject":  # forgetting needs a subject of its own
            # ... and, for an agent, the top ceiling: a forget erases sessions, runs and
            # artifacts of every sensitivity.
            o = replace(OWNER, subject=f"fg-{self.n()}", ceiling="pii")
            return Victim(o, self.memory(o))
        if name == "session":
            return Victim(o, {"subject_id": o.subject} | self.session(o))
        if name == "run":
            return Victim(o, self.run(o))
        assert name in ("staged", "artifact"), name
        return Victim(o, self.artifact(o, commit=name == "artifact"))

    # ------------------------------------------------------------------- judging

    def look(self, what: str, v: Victim) -> Any:
        """The owner's view of the victim, without what changes on its own."""
        o, ids = v.owner.token(), v.ids
        if what == "memory":
            path = f"/v1/subjects/{ids['subject_id']}/memories/{ids['memory_id']}"
            answer = call("GET", path, o)
            return answer.status, _fields(answer.body, STABLE["memory"])
        if what == "session":
            path = f"/v1/subjects/{ids['subject_id']}/sessions/{ids['session_id']}"
            answer = call("GET", path, o)
            body = answer.body or {}
            return {
                "status": answer.status,
                "messages": sorted(
                    (m["seq"], m["role"], m["content"]) for m in body.get("messages", [])
                ),
                "summary": body.get("summary"),
                "clocks": (body.get("idle_expires_at"), body.get("expires_at")),
            }
        if what == "run":
            answer = call("GET", f"/v1/runs/{ids['run_id']}", o)
            ops = sorted(
                (op["operation_id"], op["status"], op["result_ref"])
                for op in (answer.body or {}).get("operations", [])
            )
            return answer.status, _fields(answer.body, STABLE["run"]), ops
        assert what == "artifact"
        path = f"/v1/subjects/{ids['subject_id']}/artifacts/{ids['artifact_id']}"
        answer = call("GET", path, o)
        return answer.status, _fields(answer.body, STABLE["artifact"])

    def request(
        self, probe: Probe, v: Victim, caller: Principal | None
    ) -> tuple[str, Any, dict[str, str] | None]:
        params = {"operation_id": "op-9", "version": 1, **v.ids}
        path = probe.path.format_map(params)
        body = probe.body(v, caller or v.owner) if probe.body else None
        query = {name: v.owner.subject for name in self.queries.get(probe.route, ())}
        return path, body, query or None

    def attack(self, probe: Probe, kind: str) -> Outcome:
        v = self.victim(probe.victim)
        label = f"{probe.method} {probe.path}"
        expect = probe.expectation(kind)
        caller = hostile(kind, v.owner, ACCEPTED[probe.route])
        path, body, query = self.request(probe, v, caller)
        looks = probe.looks if probe.method != "GET" else None
        before = (v.seen.get(looks) or self.look(looks, v)) if looks else None
        token = caller.token() if caller else None
        whole = call(probe.method, path, token, body, query=query)
        answer = _item_answer(whole) if probe.batch else whole
        problems = self._verdict(expect, answer)
        sent = path + _text(body) + _text(query)
        shown = _text(whole.body)
        leaked = sorted(
            {
                resource
                for value, resource in self.markers
                if kind in HIDDEN_FROM[resource] and value not in sent and value in shown
            }
        )
        if leaked:
            problems.append(f"answer shows the victim's {', '.join(leaked)}")
        if isinstance(expect, Indistinct):  # the run-creation row: the same with a free id
            ghost = probe.path.format_map({**v.ids, "run_id": f"ghost-{self.n()}"})
            twin = call(probe.method, ghost, token, body, query=query)
            if (twin.status, twin.code) != (answer.status, answer.code):
                problems.append(
                    f"answer differs from a free id's ({answer.status} {answer.code} "
                    f"against {twin.status} {twin.code}): the id's existence shows"
                )
        if looks:
            after = v.seen[looks] = self.look(looks, v)
            if after != before:
                v.dirty = True
                grown = isinstance(expect, Allow) and expect.grows and _grew(before, after)
                driven = isinstance(expect, Allow) and expect.drives
                if not (grown or driven):
                    problems.append(f"changed the victim's {looks}")
        return Outcome(label, kind, answer.status, problems)

    @staticmethod
    def _verdict(expect: Expect, answer: Answer) -> list[str]:
        status = answer.status
        if status >= 500:
            return [f"{status} {answer.code}"]
        if isinstance(expect, Allow):
            return [] if status == expect.status else [f"expected {expect.status}"]
        if isinstance(expect, Indistinct):
            return []
        assert isinstance(expect, Deny)
        wanted = "/".join(str(s) for s in sorted(expect.statuses))
        if 200 <= status < 300:
            return [f"answered {status} where {wanted} refuses"]
        if status not in expect.statuses:
            return [f"expected {wanted}, got {status} {answer.code}"]
        code = expect.code or CODES.get(status)
        if code is not None and answer.code != code:
            return [f"expected code {code}, got {answer.code}"]
        return []

    def control(self, probe: Probe) -> Outcome:
        """The owner's own request succeeds and shows the victim: the row can see a leak."""
        v = self.victim(probe.victim)
        path, body, query = self.request(probe, v, None)
        answer = call(probe.method, path, v.owner.token(), body, query=query)
        answer = _item_answer(answer) if probe.batch else answer
        problems = [] if answer.status == probe.control else [f"expected {probe.control}"]
        missing = [name for name in probe.sees if str(v.ids[name]) not in _text(answer.body)]
        if missing:
            problems.append(f"the owner's answer lacks {', '.join(missing)}")
        v.seen.clear()
        if probe.victim != "world":
            v.dirty = True
        return Outcome(f"{probe.method} {probe.path}", "owner", answer.status, problems)


def _fields(body: Any, names: tuple[str, ...]) -> Any:
    if not isinstance(body, dict) or "error" in body:
        return body
    return {name: body.get(name) for name in names}


def _grew(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A session that only gained messages: every earlier one and the summary unchanged."""
    return (
        before["status"] == after["status"] == 200
        and set(before["messages"]) <= set(after["messages"])
        and before["summary"] == after["summary"]
    )


# ------------------------------------------------------------------------------ tests


@functools.cache
def _document() -> dict[str, Any]:
    answer = call("GET", "/v1/openapi.json", None)
    assert answer.status == 200
    assert isinstance(answer.body, dict)
    return answer.body


def _documented(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, operations in doc["paths"].items()
        for method, operation in operations.items()
    }


class _NoPurge:
    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        return None


@pytest.fixture
def rig(aws: None, store_backend: str, tmp_path: Path) -> Iterator[RecallRig]:
    """The handlers on a store, as the ``api`` fixture serves them, with a search index
    (embedded, hashing embedder) so that recall and context really search."""
    extra = {"data_dir": str(tmp_path / "data")} if store_backend == "sqlite" else {}
    built = make_rig(
        "embedded",
        HashingEmbedder(),
        prefix="authz-",
        recall_relevance_floor=0.1,
        store=store_backend,
        **extra,
    )
    # Deletes and forgets tombstone at once; the purge that follows runs with the job's own
    # tenant and subject, decides nothing about the caller, and is slow on moto: not run.
    built.services.memory.purge = _NoPurge()
    quiet = logging.getLogger("memvault")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # some 500 requests: their INFO lines cost seconds
    deps.use(built.services)
    yield built
    deps.use(None)
    quiet.setLevel(level)
    if built.services.stores.database is not None:
        built.services.stores.database.close()


def _tally(outcomes: list[Outcome]) -> tuple[list[Outcome], list[Outcome]]:
    """(known holes that showed, violations): a known hole's cell that now behaves is a
    violation too, so that its entry leaves KNOWN_HOLES with the fix."""
    holes, violations = [], []
    known: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        method, _, path = o.label.partition(" ")
        if (method, path, o.attacker) in KNOWN_HOLES and (o.status or 0) < 500:
            known.setdefault((o.label, o.attacker), []).append(o)
        elif o.problems:
            violations.append(o)
    for (label, attacker), group in known.items():
        shown = [o for o in group if o.problems]
        holes += shown
        if not shown:
            fixed = "known hole no longer shows: remove it from KNOWN_HOLES"
            violations.append(Outcome(label, attacker, group[0].status, [fixed]))
    return holes, violations


def test_every_documented_route_has_a_row_and_every_row_a_route() -> None:
    documented = set(_documented(_document()))
    rows = {p.route for p in PROBES}
    assert documented - PUBLIC - rows == set(), "documented routes without a matrix row"
    assert rows - documented == set(), "matrix rows for routes the document no longer lists"
    assert set(ACCEPTED) == rows
    for probe in PROBES:
        assert len(probe.expect) == len(PER_ROW), probe.route
    assert {(m, p) for m, p, _ in KNOWN_HOLES} <= rows


def test_the_scope_table_agrees_with_the_document() -> None:
    for route, operation in _documented(_document()).items():
        if route in PUBLIC:
            assert operation.get("security") == [], route
            continue
        stated = re.search(r"\(scope ([a-z:]+(?: or [a-z:]+)*)\)", operation.get("summary", ""))
        assert stated, f"{route}: the summary names no scope"
        named = frozenset(stated.group(1).split(" or "))
        assert named | UNDOCUMENTED_SCOPES.get(route, frozenset()) == ACCEPTED[route], route


def test_no_hostile_caller_reaches_a_victim_on_any_route(
    rig: RecallRig, store_backend: str
) -> None:
    documented = _documented(_document())
    queries = {
        route: tuple(
            p["name"]
            for p in operation.get("parameters", [])
            if p.get("in") == "query" and p.get("name") == "subject_id"
        )
        for route, operation in documented.items()
    }
    lab = Lab(rig, queries)
    outcomes: list[Outcome] = []
    skipped: list[tuple[str, str, str]] = []
    for method, path in sorted(PUBLIC):  # legitimately public: no token, and no victim
        answer = call(method, path, None)
        problems = [] if answer.status == 200 else ["expected 200"]
        if any(value in _text(answer.body) for value, _ in lab.markers):
            problems.append("answer shows a victim's marker")
        outcomes.append(Outcome(f"{method} {path}", "no-token", answer.status, problems))
    uncovered = sorted(set(documented) - PUBLIC - {p.route for p in PROBES})
    for method, path in uncovered:
        outcomes.append(Outcome(f"{method} {path}", "-", None, ["no row in the matrix"]))
    controls = 0
    for probe in sorted(PROBES, key=lambda p: (p.path, p.method)):
        if probe.route not in documented:
            continue  # the coverage test reports it
        for kind in ATTACKERS:
            expect = probe.expectation(kind)
            if isinstance(expect, NotApplicable):
                skipped.append((probe.method, probe.path, kind))
                continue
            outcomes.append(lab.attack(probe, kind))
        outcomes.append(lab.control(probe))
        controls += 1

    holes, violations = _tally(outcomes)
    attacks = [o for o in outcomes if o.attacker not in ("owner", "-")]
    reliability.record(
        "authz-matrix",
        category="isolation",
        fault="hostile callers: other tenant, subject, scope, ceiling, role; no token",
        oracle="documented 401/403/404/409; no victim marker; victim unchanged; owner ok",
        seeds=1,
        operations=len(attacks) + controls,
        violations=len(violations),
        store=store_backend,
        details={
            "routes": len(documented),
            "public_routes": len(PUBLIC),
            "rows": len(PROBES),
            "attackers": len(ATTACKERS),
            "cells_sent": len(attacks) - len(PUBLIC),
            "public_checks": len(PUBLIC),
            "cells_not_applicable": len(skipped),
            "owner_controls": controls,
            "known_holes": len(holes),
            "known_hole_cells": sorted(f"{o.label} x {o.attacker}" for o in holes),
        },
    )
    assert violations == [], "authorization violations:\n" + "\n".join(
        f"  {o.label} x {o.attacker}: {o.status}: {'; '.join(o.problems)}" for o in violations
    )
