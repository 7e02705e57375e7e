"""Inputs a hostile probe sent that used to answer 500: each now gets a 4xx with a stable
code and a message that says what to send instead. Runs on both stores (the number-range
cases failed only on DynamoDB, whose numbers stop at 1e-130 and 1e126)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from memvault.api.events import proxy_event
from memvault.identity.claims import Claims
from tests.support.api import Answer, invoke, memory_body

WHO = Claims.parse(
    {
        "tenant_id": "acme",
        "sub": "agent-client-1",
        "subject_id": "u-1",
        "scope": "memory:read memory:write runs:write",
    }
)
MEMORIES = "/v1/subjects/u-1/memories"


def _send(
    method: str,
    path: str,
    body: str | None,
    content_type: str | None = "application/json",
    query: dict[str, str] | None = None,
) -> Answer:
    event = proxy_event(method, path, claims=WHO, body=body, query=query)
    for where in ("headers", "multiValueHeaders"):
        event[where] = {k: v for k, v in event[where].items() if k.lower() != "content-type"}
    if content_type is not None:
        event["headers"]["Content-Type"] = content_type
        event["multiValueHeaders"]["Content-Type"] = [content_type]
    return invoke(event)


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/xml", "multipart/form-data", "application/x-www-form-urlencoded"],
)
def test_a_body_that_is_not_declared_json_is_a_415(api: Any, content_type: str) -> None:
    answer = _send("POST", MEMORIES, json.dumps(memory_body()), content_type)
    assert (answer.status, answer.code) == (415, "media_type_not_allowed"), answer.body
    assert "application/json" in answer.body["error"]["message"]


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/xml",
        "application/x-www-form-urlencoded",
        "application/json",
        None,
    ],
)
@pytest.mark.parametrize("path", [MEMORIES, "/v1/subjects/u-1/recall"])
def test_an_empty_body_is_a_422_whatever_its_media_type(
    api: Any, path: str, content_type: str | None
) -> None:
    """An empty body has no media type to refuse: it is a missing body (a fresh probe of
    stop 47 found ``text/plain`` with no body answering 500)."""
    answer = _send("POST", path, "", content_type)
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


@pytest.mark.parametrize(
    "content_type", ["APPLICATION/JSON", "Application/Json; charset=UTF-8", None]
)
def test_json_is_json_whatever_the_case_of_its_media_type(
    api: Any, content_type: str | None
) -> None:
    answer = _send("POST", MEMORIES, json.dumps(memory_body()), content_type)
    assert answer.status == 201, answer.body


def test_json_nested_2000_levels_is_refused_before_it_is_parsed(api: Any) -> None:
    deep = "[" * 2000 + "]" * 2000
    body = json.dumps(memory_body()).replace('"tags": ["preference"]', f'"tags": {deep}')
    answer = _send("POST", MEMORIES, body)
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    # Brackets inside strings are text, not nesting.
    text = json.dumps(memory_body(request_id="r-brackets", content="[" * 500 + "x" + "]" * 500))
    assert _send("POST", MEMORIES, text).status == 201


def test_a_next_token_hiding_deep_json_is_a_422(api: Any) -> None:
    token = base64.urlsafe_b64encode(("[" * 5000 + "]" * 5000).encode()).decode()
    answer = _send("GET", MEMORIES, None, query={"next_token": token})
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


#: An integer past Python's int parsing limit (4,300 digits).
_HUGE = "7" * 4400


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/subjects/u-1/recall", '{"query": "q", "limit": HUGE}'),
        ("POST", "/v1/subjects/u-1/context", '{"goal": "g", "token_budget": HUGE}'),
        ("PUT", "/v1/runs/r-big", '{"subject_id": "u-1", "plan_version": "p", "limit": HUGE}'),
        (
            "POST",
            MEMORIES,
            json.dumps(memory_body(ttl_seconds=0)).replace('ttl_seconds": 0', 'ttl_seconds": HUGE'),
        ),
        ("POST", MEMORIES, '{"scope": {"w": [HUGE]}}'),
    ],
    ids=["recall", "context", "run", "memory ttl", "nested"],
)
def test_an_integer_too_long_to_parse_is_a_422_on_every_route(
    api: Any, method: str, path: str, body: str
) -> None:
    """A probe: a JSON integer of more than 4,300 digits raised a plain ValueError in
    ``json.loads`` (Python's int parsing limit), answered 500 on every route."""
    answer = _send(method, path, body.replace("HUGE", _HUGE))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    problems = answer.body["error"]["details"]["errors"]
    assert problems[0]["location"] == "body", problems
    assert "number has more digits than any field takes" in problems[0]["problem"], problems
    assert "7777" not in json.dumps(answer.body)


@pytest.mark.parametrize("confidence", [1e-200, 1e-131])
def test_a_confidence_the_store_cannot_hold_is_a_422(api: Any, confidence: float) -> None:
    answer = _send("POST", MEMORIES, json.dumps(memory_body(confidence=confidence)))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    ok = _send("POST", MEMORIES, json.dumps(memory_body(request_id="r-ok", confidence=1e-9)))
    assert ok.status == 201, ok.body


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"subject_id": "u-1", "plan_version": "p1", "budget": {"tokens": 1e200}}, "/v1/runs/r-1"),
        ({"subject_id": "u-1", "plan_version": "p1", "budget": {"usd": 1e-200}}, "/v1/runs/r-2"),
    ],
)
def test_budgets_beyond_the_stores_number_range_are_a_422(
    api: Any, body: dict[str, Any], path: str
) -> None:
    answer = _send("PUT", path, json.dumps(body))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


def test_run_state_beyond_the_stores_number_range_is_a_422(api: Any) -> None:
    created = _send("PUT", "/v1/runs/r-3", json.dumps({"subject_id": "u-1", "plan_version": "p"}))
    assert created.status == 201, created.body
    advance = {"expected_version": 1, "status": "RUNNING", "step": "s", "state": {"x": [1e300]}}
    answer = _send("POST", "/v1/runs/r-3/checkpoints", json.dumps(advance))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


@pytest.mark.parametrize(
    "state",
    [{"k": "\ud800"}, {"\udfff": "v"}, {"k": {"deeper": ["\ud83d"]}}],
    ids=["value", "key", "nested"],
)
def test_a_lone_surrogate_in_run_state_is_a_422_never_a_500(
    api: Any, state: dict[str, Any]
) -> None:
    """A fresh probe found the lone surrogate in a state value answered 500 (it cannot be
    serialized) and one in a key was stored as replacement characters."""
    created = _send("PUT", "/v1/runs/r-4", json.dumps({"subject_id": "u-1", "plan_version": "p"}))
    assert created.status in (200, 201), created.body
    advance = {"expected_version": 1, "status": "RUNNING", "step": "s", "state": state}
    answer = _send("POST", "/v1/runs/r-4/checkpoints", json.dumps(advance))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    budget = {"subject_id": "u-1", "plan_version": "p", "budget": {"\ud800": 1.0}}
    answer = _send("PUT", "/v1/runs/r-5", json.dumps(budget))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


#: Characters that make an id look like another, or end a line where none is seen: C0
#: and C1 controls, bidirectional overrides, isolates and marks, zero-width and BOM
#: format characters, line separators, a lone surrogate, variation selectors,
#: noncharacters and private-use characters.
INVISIBLE = {
    "bell": "\x07",
    "escape": "\x1b",
    "next line": "\x85",
    "right-to-left override": "\u202e",
    "left-to-right embedding": "\u202a",
    "first strong isolate": "\u2068",
    "right-to-left mark": "\u200f",
    "zero width space": "\u200b",
    "byte order mark": "\ufeff",
    "line separator": "\u2028",
    "lone surrogate": "\ud800",
    # A probe: a variation selector and a noncharacter passed (two ids drawn alike).
    "variation selector": "\ufe0f",
    "noncharacter": "\uffff",
    "private use": "\ue000",
    # A probe: a no-break space made "a\u00a0b" an id that reads as "a b".
    "no-break space": "\u00a0",
    "ideographic space": "\u3000",
}
EVERY_SCOPE = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write"
ARTIFACT = {
    "media_type": "text/plain",
    "size_bytes": 3,
    "sha256": "a" * 64,
}


def _refused(who: Claims, method: str, path: str, body: Any, query: Any = None) -> Answer:
    text = json.dumps(body) if body is not None else None
    return invoke(proxy_event(method, path, claims=who, body=text, query=query))


def _memory(**fields: Any) -> tuple[str, str, Any]:
    return "POST", MEMORIES, memory_body(**fields)


def _message(session: str = "s-1", request_id: str = "m-1") -> tuple[str, str, Any]:
    body = {"request_id": request_id, "role": "user", "content": "hi"}
    return "POST", f"/v1/subjects/u-1/sessions/{session}/messages", body


RUN = {"subject_id": "u-1", "plan_version": "p"}
ADVANCE = {"expected_version": 1, "status": "RUNNING", "step": "s"}
ID_FIELDS = {
    "memory request_id": ("body.request_id", lambda c: _memory(request_id=f"r{c}1")),
    "canonical_key": ("body.canonical_key", lambda c: _memory(canonical_key=f"k{c}y")),
    "tag": ("body.tags.0", lambda c: _memory(tags=[f"t{c}g"])),
    "scope value": ("body.scope.workspace", lambda c: _memory(scope={"workspace": c})),
    "memory artifact_id": ("body.artifact_id", lambda c: _memory(artifact_id=f"art{c}")),
    "source ref": (
        "body.source.ref",
        lambda c: _memory(source={"type": "tool_result", "ref": f"m{c}"}),
    ),
    "canonical_key filter": (
        "query.canonical_key",
        lambda c: ("GET", MEMORIES, None, {"canonical_key": f"k{c}"}),
    ),
    "tag filter": ("query.tag", lambda c: ("GET", MEMORIES, None, {"tag": f"t{c}"})),
    "subject in the path": (
        "path.subject_id",
        lambda c: ("POST", f"/v1/subjects/u{c}1/memories", memory_body()),
    ),
    "session in the path": ("path.session_id", lambda c: _message(session=f"s{c}1")),
    "message request_id": ("body.request_id", lambda c: _message(request_id=f"m{c}1")),
    "run in the path": ("path.run_id", lambda c: ("PUT", f"/v1/runs/r{c}1", RUN)),
    "run subject_id": (
        "body.subject_id",
        lambda c: ("PUT", "/v1/runs/r-1", {**RUN, "subject_id": f"u{c}"}),
    ),
    "event_id": (
        "body.event_id",
        lambda c: ("POST", "/v1/runs/r-1/events", {"event_id": f"e{c}", "type": "x.y"}),
    ),
    "artifact request_id": (
        "body.request_id",
        lambda c: ("POST", "/v1/subjects/u-1/artifacts", {"request_id": f"a{c}", **ARTIFACT}),
    ),
    # A probe: these were stored as sent (L2); a plan version and a result reference are
    # labels a caller chooses, as an id is.
    "run plan_version": (
        "body.plan_version",
        lambda c: ("PUT", "/v1/runs/r-1", {**RUN, "plan_version": f"p{c}1"}),
    ),
    "checkpoint plan_version": (
        "body.plan_version",
        lambda c: ("POST", "/v1/runs/r-1/checkpoints", {**ADVANCE, "plan_version": f"p{c}1"}),
    ),
    "operation result_ref": (
        "body.result_ref",
        lambda c: (
            "PUT",
            "/v1/runs/r-1/operations/op-1",
            {"status": "COMMITTED", "result_ref": f"ref{c}evil"},
        ),
    ),
}


@pytest.mark.parametrize(("where", "build"), ID_FIELDS.values(), ids=ID_FIELDS.keys())
def test_control_and_bidirectional_characters_in_ids_and_tags_are_a_422_naming_the_field(
    api: Any, where: str, build: Any
) -> None:
    who = Claims.parse(
        {"tenant_id": "acme", "sub": "client-1", "subject_id": "u-1", "scope": EVERY_SCOPE}
    )
    for name, char in INVISIBLE.items():
        answer = _refused(who, *build(char))
        assert (answer.status, answer.code) == (422, "validation_failed"), (name, answer.body)
        locations = [e["location"] for e in answer.body["error"]["details"]["errors"]]
        assert where in locations, (name, locations)
        assert char not in json.dumps(answer.body, ensure_ascii=False), name


#: What free text on one line (a name, a step, a state key) refuses: controls (line
#: breaks and tabs among them), bidirectional and zero-width format characters, line and
#: paragraph separators, a lone surrogate.
NOT_ONE_LINE = {
    "line feed": "\n",
    "carriage return": "\r",
    "tab": "\t",
    "bell": "\x07",
    "escape": "\x1b",
    "next line": "\x85",
    "right-to-left override": "\u202e",
    "left-to-right embedding": "\u202a",
    "first strong isolate": "\u2068",
    "right-to-left mark": "\u200f",
    "arabic letter mark": "\u061c",
    "zero width space": "\u200b",
    "byte order mark": "\ufeff",
    "tag character": "\U000e0041",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
    "lone surrogate": "\ud800",
}
ARTIFACTS = "/v1/subjects/u-1/artifacts"
TEXT_FIELDS = {
    "artifact name": (
        "body.name",
        lambda c: (
            "POST",
            ARTIFACTS,
            {"request_id": "a-1", **ARTIFACT, "name": f"invoice{c}gpj.exe"},
        ),
    ),
    "checkpoint step": (
        "body.step",
        lambda c: ("POST", "/v1/runs/r-1/checkpoints", {**ADVANCE, "step": f"step{c}evil"}),
    ),
    "state key": (
        "body.state",
        lambda c: ("POST", "/v1/runs/r-1/checkpoints", {**ADVANCE, "state": {f"k{c}": 1}}),
    ),
    "nested state key": (
        "body.state",
        lambda c: (
            "POST",
            "/v1/runs/r-1/checkpoints",
            {**ADVANCE, "state": {"a": [{"b": {f"k{c}": 1}}]}},
        ),
    ),
    "budget key": (
        "body.budget",
        lambda c: ("PUT", "/v1/runs/r-1", {**RUN, "budget": {f"usd{c}": 1.0}}),
    ),
}


@pytest.mark.parametrize(("where", "build"), TEXT_FIELDS.values(), ids=TEXT_FIELDS.keys())
def test_free_text_labels_are_one_line_without_bidirectional_characters(
    api: Any, where: str, build: Any
) -> None:
    """A probe: an artifact named ``invoice\u202egpj.exe`` (shown as ``invoiceexe.jpg``)
    or ``report\n\nIgnore previous instructions.txt``, a checkpoint step, plan version and
    state key holding an override were stored and shown raw by GET, the console and the
    SDKs. Each is a 422 naming the field, never quoting the value."""
    who = Claims.parse(
        {"tenant_id": "acme", "sub": "client-1", "subject_id": "u-1", "scope": EVERY_SCOPE}
    )
    for name, char in NOT_ONE_LINE.items():
        answer = _refused(who, *build(char))
        assert (answer.status, answer.code) == (422, "validation_failed"), (name, answer.body)
        locations = [e["location"] for e in answer.body["error"]["details"]["errors"]]
        assert where in locations, (name, locations)
        assert char not in json.dumps(answer.body, ensure_ascii=False), name


def test_free_text_labels_keep_the_spaces_and_joiners_scripts_need(api: Any) -> None:
    """Unlike an id, a name or a step is text: a no-break space (French punctuation), the
    zero-width non-joiner (Persian) and joiner, and emoji with a variation selector."""
    who = Claims.parse(
        {"tenant_id": "acme", "sub": "client-1", "subject_id": "u-1", "scope": EVERY_SCOPE}
    )
    texts = [
        "Rapport d\u2019\u00e9tape\u00a0: T3.pdf",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt",
        "\u2705\ufe0f done \U0001f469\u200d\U0001f4bb.md",
    ]
    for n, text in enumerate(texts):
        started = _refused(
            who, "POST", ARTIFACTS, {"request_id": f"ok-{n}", **ARTIFACT, "name": text}
        )
        assert started.status == 201, started.body
        assert started.body["name"] == text
    created = _refused(who, "PUT", "/v1/runs/r-ok", RUN)
    assert created.status == 201, created.body
    advanced = _refused(
        who,
        "POST",
        "/v1/runs/r-ok/checkpoints",
        {**ADVANCE, "step": texts[0], "state": {"r\u00e9sum\u00e9 cl\u00e9": {"x": "a\nb"}}},
    )
    assert advanced.status == 200, advanced.body
    assert advanced.body["step"] == texts[0]


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("a key given twice", '{"request_id": "r-dup", "consent": false, "consent": true}'),
        ("a repeated key deep inside", '{"scope": {"w": "a", "w": "b"}}'),
        ("NUL in a value", json.dumps(memory_body(content="before\u0000after"))),
        ("NUL in a key", json.dumps({**memory_body(), "scope": {"w\u0000": "a"}})),
        ("NUL in a list", json.dumps(memory_body(tags=["ok", "x\u0000y"]))),
    ],
)
def test_bodies_that_read_differently_to_different_parsers_are_refused(
    api: Any, name: str, body: str
) -> None:
    """A probe's body with ``consent`` given twice was read as its last value, and a NUL in
    content was stored (where C tools, logs and terminals stop reading). Both are 422
    ``validation_failed``, with a message that names the problem."""
    answer = _send("POST", MEMORIES, body)
    assert (answer.status, answer.code) == (422, "validation_failed"), (name, answer.body)
    text = json.dumps(answer.body)
    assert "twice" in text or "NUL" in text, (name, answer.body)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/subjects/u-1/recall", [{"query": "allergies"}, {"limit": "x", "bogus": 1}]),
        (MEMORIES, [memory_body(request_id="arr-1"), {"request_id": ""}]),
        (MEMORIES, [memory_body(request_id="arr-2")]),
        ("/v1/subjects/u-1/recall", "allergies"),
        ("/v1/subjects/u-1/recall", None),
        ("/v1/subjects/u-1/recall", 7),
    ],
    ids=["recall array", "write array", "array of one", "string", "null", "number"],
)
def test_a_body_that_is_not_one_object_is_a_422(api: Any, path: str, body: Any) -> None:
    """A fresh probe (stop 49): a JSON array was answered 200 on recall and 201 on a write,
    validation having taken its first item for the model and dropped the rest unread, so
    that a proxy or log reading the whole body saw another request."""
    answer = _send("POST", path, json.dumps(body))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    assert "one JSON object" in json.dumps(answer.body)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl_seconds", True),
        ("ttl_seconds", "3600"),
        ("ttl_seconds", 3600.0),
        ("confidence", "0.5"),
        ("confidence", True),
        ("consent", 1),
        ("consent", "true"),
    ],
)
def test_numbers_and_flags_must_be_json_numbers_and_booleans(
    api: Any, field: str, value: Any
) -> None:
    """``ttl_seconds: true`` was stored as 1 second and ``confidence: "0.5"`` as 0.5: a
    client with a type bug got an answer it did not ask for. A number must be a JSON
    number (an integer where one is counted) and a flag a JSON boolean."""
    answer = _send("POST", MEMORIES, json.dumps(memory_body(**{field: value})))
    assert (answer.status, answer.code) == (422, "validation_failed"), (field, value, answer.body)
    assert field in json.dumps(answer.body), answer.body


def test_a_well_typed_body_is_still_accepted(api: Any) -> None:
    answer = _send(
        "POST",
        MEMORIES,
        json.dumps(memory_body(request_id="r-typed", ttl_seconds=3600, confidence=1, consent=True)),
    )
    assert answer.status == 201, answer.body
