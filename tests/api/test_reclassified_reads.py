"""A fact reclassified (corrected to a higher sensitivity or another visibility list) or
deleted is out of reach as a whole: no route serves any version of it, nor names one, to a
reader that may not read its current version, and an older version classified higher than
the current one stays withheld. Through the real Lambda handler on both stores, with the
embedded index and the hashing embedder; every refusal is the error envelope, never a 500.

The rule each route follows: a version is shown only to a reader that may read both the
version itself and its chain's current version (the stricter wins), while the chain is live.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault.api.deps import deps
from memvault.embeddings.hashing import HashingEmbedder
from memvault.identity.claims import Claims
from tests.support.api import Answer, call, claims, memory_body
from tests.support.recall import RecallRig, make_rig

S1 = "/v1/subjects/u-1"
MEMORIES = f"{S1}/memories"
#: Unique words that only the victim's content holds: finding one in an answer is a leak.
CANARY = "Zephyrquill"
OLD_CANARY = "Marrowglint"


def owner() -> Claims:
    """The subject's own token: no agent role, the top ceiling."""
    return claims(max_sensitivity="pii")


def public_agent(role: str = "planner") -> Claims:
    return claims(agent_role=role, max_sensitivity="public")


@pytest.fixture
def rig(aws: None, store_backend: str, tmp_path: Path) -> Iterator[RecallRig]:
    extra = {"data_dir": str(tmp_path / "data")} if store_backend == "sqlite" else {}
    built = make_rig(
        "embedded",
        HashingEmbedder(),
        prefix="rcl-",
        recall_relevance_floor=0.1,
        store=store_backend,
        **extra,
    )
    deps.use(built.services)
    yield built
    deps.use(None)
    if built.services.stores.database is not None:
        built.services.stores.database.close()


class _NoPurge:
    """Deletions tombstone at once; their copies stay until a purge that never comes."""

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        return None


def refused(answer: Answer, status: int, code: str) -> None:
    """The answer is the error envelope with this status and code."""
    assert answer.status == status, (answer.status, answer.body)
    assert isinstance(answer.body, dict) and set(answer.body) == {"error"}, answer.body
    assert set(answer.body["error"]) == {"code", "message", "details"}, answer.body
    assert answer.body["error"]["code"] == code, answer.body


def text(answer: Answer) -> str:
    return json.dumps(answer.body)


def write(who: Claims, content: str, **overrides: Any) -> dict[str, Any]:
    body = memory_body(
        request_id=uuid.uuid4().hex, content=content, **{"sensitivity": "public", **overrides}
    )
    answer = call("POST", MEMORIES, who, body)
    assert answer.status == 201, answer.body
    return dict(answer.body)


def patch(who: Claims, memory_id: str, **changes: Any) -> dict[str, Any]:
    answer = call("PATCH", f"{MEMORIES}/{memory_id}", who, {"expected_version": 1, **changes})
    assert answer.status == 200, answer.body
    return dict(answer.body)


def assert_out_of_reach(who: Claims, ids: list[str], canary: str) -> None:
    """Neither get, history, trace nor export serves or names any of ``ids`` to ``who``."""
    for memory_id in ids:
        for suffix in ("", "/history", "/trace"):
            refused(call("GET", f"{MEMORIES}/{memory_id}{suffix}", who), 404, "not_found")
    exported = call("GET", f"{S1}/export", who)
    assert exported.status == 200, exported.body
    assert not {m["memory_id"] for m in exported.body["memories"]} & set(ids)
    assert canary not in text(exported)
    for memory_id in ids:
        assert memory_id not in text(exported)


# (the correction, readers it puts the fact out of reach of, a reader that still reads it)
RECLASSIFICATIONS = {
    "public to pii": (
        {"sensitivity": "pii"},
        [public_agent(), claims(), claims(agent_role="planner")],
        owner(),
    ),
    "public to internal": (
        {"sensitivity": "internal"},
        [public_agent(), claims(max_sensitivity="public")],
        claims(),
    ),
    "everyone to one role": (
        {"visibility": ["support"]},
        [claims(agent_role="planner"), claims(agent_role="coder", max_sensitivity="pii")],
        claims(agent_role="support"),
    ),
}


@pytest.mark.parametrize("case", sorted(RECLASSIFICATIONS))
def test_export_serves_no_version_of_a_fact_reclassified_above_the_reader(
    rig: RecallRig, case: str
) -> None:
    """The probe's defect: export judged each version alone, so the public version 1 of a
    fact corrected to pii was exported (content and all) to a public or internal reader
    that get and history already answered 404."""
    correction, losers, keeper = RECLASSIFICATIONS[case]
    v1 = write(owner(), f"Drafts are reviewed by {CANARY} on Fridays")
    assert CANARY in text(call("GET", f"{S1}/export", public_agent()))  # reachable before
    v2 = patch(owner(), v1["memory_id"], **correction)

    for reader in losers:
        assert_out_of_reach(reader, [v1["memory_id"], v2["memory_id"]], CANARY)
    # A reader that may read the current version still gets every version it may read.
    exported = call("GET", f"{S1}/export", keeper)
    assert [m["memory_id"] for m in exported.body["memories"]] == [
        v1["memory_id"],
        v2["memory_id"],
    ]
    history = call("GET", f"{MEMORIES}/{v1['memory_id']}/history", keeper)
    assert [v["version"] for v in history.body["versions"]] == [1, 2]


def test_a_deleted_fact_is_served_by_no_route_before_its_purge(rig: RecallRig) -> None:
    rig.services.memory.purge = _NoPurge()
    v1 = write(owner(), f"Drafts are reviewed by {CANARY} on Fridays")
    v2 = patch(owner(), v1["memory_id"], tags=["reviewed"])
    assert call("DELETE", f"{MEMORIES}/{v2['memory_id']}", owner()).status == 202
    for reader in (owner(), public_agent()):
        for memory_id in (v1["memory_id"], v2["memory_id"]):
            for suffix in ("", "/history"):
                refused(call("GET", f"{MEMORIES}/{memory_id}{suffix}", reader), 404, "not_found")
        exported = call("GET", f"{S1}/export", reader)
        assert exported.body["memories"] == [] and CANARY not in text(exported)


# (the first version, the correction, the reader that may read only the correction)
LOWERED = {
    "pii to internal": (
        {"content": f"reach {OLD_CANARY} at li.wei@example.com", "sensitivity": "pii"},
        owner(),
        {"content": "prefers phone calls", "sensitivity": "internal"},
        claims(),
    ),
    "one role to everyone": (
        {"content": f"the {OLD_CANARY} account is on hold", "visibility": ["planner"]},
        claims(),  # the user: an agent may not widen who reads a memory
        {"content": "the account is open", "visibility": []},
        claims(agent_role="support"),
    ),
}


@pytest.mark.parametrize("case", sorted(LOWERED))
def test_an_older_version_classified_higher_than_the_current_stays_withheld(
    rig: RecallRig, case: str
) -> None:
    """The reverse order: the current version is readable, the older one never was."""
    first, writer, correction, reader = LOWERED[case]
    v1 = write(writer, **first)
    v2 = patch(writer, v1["memory_id"], **correction)
    rig.sync()

    got = call("GET", f"{MEMORIES}/{v1['memory_id']}", reader)
    assert got.body["memory_id"] == v2["memory_id"]
    history = call("GET", f"{MEMORIES}/{v1['memory_id']}/history", reader)
    assert [v["memory_id"] for v in history.body["versions"]] == [v2["memory_id"]]
    exported = call("GET", f"{S1}/export", reader)
    assert [m["memory_id"] for m in exported.body["memories"]] == [v2["memory_id"]]
    trace = call("GET", f"{MEMORIES}/{v2['memory_id']}/trace", reader)
    assert [v["memory_id"] for v in trace.body["versions"]] == [v2["memory_id"]]
    assert v1["memory_id"] not in {e["memory_id"] for e in trace.body["events"]}
    context = call(
        "POST",
        f"{S1}/context",
        reader,
        {"goal": "plan the week", "token_budget": 4000, "query": "account phone calls"},
    )
    for answer in (got, history, exported, trace, context):
        assert answer.status == 200, answer.body
        assert OLD_CANARY not in text(answer)


def test_a_recall_trace_withholds_the_ids_of_a_fact_reclassified_above_the_reader(
    rig: RecallRig,
) -> None:
    """A trace holds no content, but it names versions; it names only those the reader
    may read now, which a version of a reclassified fact no longer is."""
    agent = public_agent()
    v1 = write(owner(), f"The {CANARY} quarterly planning meeting is on Thursdays")
    rig.sync()
    query = {"query": "quarterly planning meeting thursdays", "limit": 5}
    served = call("POST", f"{S1}/recall", agent, query)
    assert v1["memory_id"] in [i["memory"]["memory_id"] for i in served.body["items"]]
    v2 = patch(owner(), v1["memory_id"], sensitivity="pii")
    # The index still holds version 1 (public): re-validation drops it, and the current
    # version above the reader's ceiling; the reader's trace counts both drops and says
    # nothing of why (a reason would tell it what it may not read).
    stale = call("POST", f"{S1}/recall", agent, query)
    assert stale.status == 200 and stale.body["items"] == [], stale.body
    ids = (v1["memory_id"], v2["memory_id"])

    for recall_id in (served.body["recall_id"], stale.body["recall_id"]):
        trace = call("GET", f"/v1/recalls/{recall_id}", agent)
        assert trace.status == 200, trace.body
        assert not any(memory_id in text(trace) for memory_id in ids), trace.body
    first = call("GET", f"/v1/recalls/{served.body['recall_id']}", agent)
    assert first.body["returned"] == [] and first.body["withheld"] == 1
    dropped = call("GET", f"/v1/recalls/{stale.body['recall_id']}", agent).body
    assert (dropped["dropped"], dropped["dropped_withheld"]) == ([], 2)
    reasons = call("GET", f"/v1/recalls/{stale.body['recall_id']}", owner()).body["dropped"]
    assert {d["reason"] for d in reasons} == {"superseded", "ceiling"}
    # The owner may read the fact: the same traces name its versions.
    shown = call("GET", f"/v1/recalls/{served.body['recall_id']}", owner())
    assert [r["memory_id"] for r in shown.body["returned"]] == [v1["memory_id"]]


def test_a_recall_trace_withholds_the_ids_of_a_deleted_fact_before_its_purge(
    rig: RecallRig,
) -> None:
    rig.services.memory.purge = _NoPurge()
    v1 = write(owner(), f"The {CANARY} quarterly planning meeting is on Thursdays")
    rig.sync()
    served = call(
        "POST", f"{S1}/recall", owner(), {"query": "quarterly planning meeting", "limit": 5}
    )
    assert v1["memory_id"] in text(served)
    assert call("DELETE", f"{MEMORIES}/{v1['memory_id']}", owner()).status == 202
    trace = call("GET", f"/v1/recalls/{served.body['recall_id']}", owner())
    assert trace.status == 200, trace.body
    assert v1["memory_id"] not in text(trace) and trace.body["withheld"] == 1


def test_working_memory_and_its_manifest_serve_no_version_of_a_reclassified_fact(
    rig: RecallRig,
) -> None:
    agent = public_agent()
    v1 = write(owner(), f"The {CANARY} launch checklist lives in the wiki")
    rig.sync()
    request = {"goal": "prepare the launch", "token_budget": 4000}
    before = call("POST", f"{S1}/context", agent, request)
    assert before.status == 200 and CANARY in text(before)
    patch(owner(), v1["memory_id"], sensitivity="pii")
    rig.sync()

    for body in (request, {**request, "query": "launch checklist wiki"}):
        after = call("POST", f"{S1}/context", agent, body)
        assert after.status == 200, after.body
        assert CANARY not in text(after) and v1["memory_id"] not in text(after)
    replayed = call("POST", f"{S1}/context/reproduce", agent, before.body["manifest"])
    refused(replayed, 404, "not_found")


def test_a_retried_write_of_a_fact_reclassified_since_answers_not_found(rig: RecallRig) -> None:
    """A retry of the request that wrote version 1 would answer version 1 itself (its
    content), and 409 against 201 would confirm a guess of it: once the fact is beyond
    the caller, its request id is ``not_found`` whatever the payload."""
    agent = public_agent()
    body = memory_body(
        request_id="agent-write-1",
        content=f"Standup moved to {CANARY} room",
        sensitivity="public",
    )
    first = call("POST", MEMORIES, agent, body)
    assert first.status == 201, first.body
    patch(owner(), first.body["memory_id"], sensitivity="pii")

    again = call("POST", MEMORIES, agent, body)
    refused(again, 404, "not_found")
    assert CANARY not in text(again)
    other = call("POST", MEMORIES, agent, {**body, "content": "Standup moved to room nine"})
    refused(other, 404, "not_found")
    # The owner, who may read the fact, still gets the replay.
    replay = call("POST", MEMORIES, owner(), body)
    assert replay.status == 201 and replay.body["memory_id"] == first.body["memory_id"]


def test_a_retried_write_of_a_version_classified_above_the_reader_stays_not_found(
    rig: RecallRig,
) -> None:
    """The reverse order: the fact was lowered since, but the version the request wrote
    is still above the caller, so its retry answers nothing about it."""
    body = memory_body(
        request_id="owner-write-1",
        content=f"reach {OLD_CANARY} at li.wei@example.com",
        sensitivity="pii",
    )
    first = call("POST", MEMORIES, owner(), body)
    assert first.status == 201, first.body
    patch(owner(), first.body["memory_id"], content="prefers phone calls", sensitivity="internal")

    for payload in (body, {**body, "content": "reach them by phone"}):
        again = call("POST", MEMORIES, claims(), payload)
        refused(again, 404, "not_found")
        assert OLD_CANARY not in text(again)
    assert call("POST", MEMORIES, owner(), body).status == 201


# (the correction an agent sends to a memory the user wrote, what it would widen)
WIDENINGS = {
    "pii to public": ({"sensitivity": "pii"}, {"sensitivity": "public"}),
    "pii to internal": ({"sensitivity": "pii"}, {"sensitivity": "internal"}),
    "one role to everyone": ({"visibility": ["planner"]}, {"visibility": []}),
    "one role to two": ({"visibility": ["planner"]}, {"visibility": ["planner", "coder"]}),
}


@pytest.mark.parametrize("case", sorted(WIDENINGS))
def test_an_agent_may_not_lower_a_memory_or_widen_who_reads_it(rig: RecallRig, case: str) -> None:
    """An agent that may read a memory must not decide who else reads it: lowering the
    sensitivity or widening the visibility is the user's or a reviewer's call (the new
    version would keep the user's provenance, and lower agents would read it). Raising or
    narrowing stays open to the agent; the user may widen."""
    written, widening = WIDENINGS[case]
    memory = write(owner(), f"{CANARY} badge number 4471", **written)
    agent = claims(agent_role="planner", max_sensitivity="pii")
    answer = call(
        "PATCH", f"{MEMORIES}/{memory['memory_id']}", agent, {"expected_version": 1, **widening}
    )
    refused(answer, 403, "provenance_not_allowed")
    assert CANARY not in text(answer)
    lower = claims(agent_role="coder", max_sensitivity="public")
    refused(call("GET", f"{MEMORIES}/{memory['memory_id']}", lower), 404, "not_found")
    assert patch(owner(), memory["memory_id"], **widening)["version"] == 2


def test_an_agent_may_raise_a_memory_or_narrow_who_reads_it(rig: RecallRig) -> None:
    memory = write(owner(), "prefers tea in the afternoon", visibility=["planner", "coder"])
    agent = claims(agent_role="planner", max_sensitivity="pii")
    changed = patch(agent, memory["memory_id"], sensitivity="internal", visibility=["planner"])
    assert changed["sensitivity"] == "internal" and changed["visibility"] == ["planner"]


# (the raise, the redaction that lowers or widens again, readers the raise put it above)
REDACTED = {
    "raised to pii, then public with new content": (
        {"sensitivity": "pii"},
        {"sensitivity": "public"},
        [public_agent(), claims(), claims(max_sensitivity="public")],
    ),
    "narrowed to one role, then every role with new content": (
        {"visibility": ["support"]},
        {"visibility": []},
        [claims(agent_role="planner"), claims(agent_role="planner", max_sensitivity="pii")],
    ),
}


@pytest.mark.parametrize("case", sorted(REDACTED))
def test_a_fact_lowered_again_keeps_what_its_raise_withheld(rig: RecallRig, case: str) -> None:
    """Probe 8 (M1): the owner raises a fact without changing its text, then lowers (or
    widens) it with new, redacted text. Version 1 was labelled public, but the raise said
    that very text is above these readers: it stays withheld from history, export, the
    memory's trace and reproduction, as does version 2; version 3 is served."""
    raise_, lower, readers = REDACTED[case]
    v1 = write(owner(), f"Offsite planning note {CANARY} for the autumn")
    v2 = patch(owner(), v1["memory_id"], **raise_)
    answer = call(
        "PATCH",
        f"{MEMORIES}/{v2['memory_id']}",
        owner(),
        {"expected_version": 2, "content": "Offsite planning note (details withheld)", **lower},
    )
    assert answer.status == 200, answer.body
    v3 = answer.body
    rig.sync()
    for reader in readers:
        history = call("GET", f"{MEMORIES}/{v3['memory_id']}/history", reader)
        assert [v["memory_id"] for v in history.body["versions"]] == [v3["memory_id"]]
        assert CANARY not in text(history)
        exported = call("GET", f"{S1}/export", reader)
        assert [m["memory_id"] for m in exported.body["memories"]] == [v3["memory_id"]]
        assert CANARY not in text(exported)
        trace = call("GET", f"{MEMORIES}/{v3['memory_id']}/trace", reader)
        assert CANARY not in text(trace) and v1["memory_id"] not in text(trace)
    # The owner still reads every version.
    history = call("GET", f"{MEMORIES}/{v3['memory_id']}/history", owner())
    assert [v["version"] for v in history.body["versions"]] == [1, 2, 3]


@pytest.mark.parametrize("case", sorted(REDACTED))
def test_a_retried_write_of_a_version_a_raise_withheld_answers_not_found(
    rig: RecallRig, case: str
) -> None:
    """Probe 9 (F1): after the raise and the redacting lower, history and export withhold
    version 1, but a retry of the request that wrote it answered 201 with version 1's id
    and metadata, and 409 for any other payload: a way to confirm a guess of the redacted
    text. The replay now judges the version as history does: ``not_found`` for any
    payload, to every reader the raise put it above; the owner still gets it."""
    raise_, lower, readers = REDACTED[case]
    body = memory_body(
        request_id=f"redacted-{uuid.uuid4().hex}",
        content=f"Offsite planning note {CANARY} for the autumn",
        sensitivity="public",
    )
    first = call("POST", MEMORIES, owner(), body)
    assert first.status == 201, first.body
    v2 = patch(owner(), first.body["memory_id"], **raise_)
    lowered = call(
        "PATCH",
        f"{MEMORIES}/{v2['memory_id']}",
        owner(),
        {"expected_version": 2, "content": "Offsite planning note (details withheld)", **lower},
    )
    assert lowered.status == 200, lowered.body
    for reader in readers:
        for payload in (body, {**body, "content": "Offsite planning note in room nine"}):
            again = call("POST", MEMORIES, reader, payload)
            refused(again, 404, "not_found")
            assert CANARY not in text(again) and first.body["memory_id"] not in text(again)
    replay = call("POST", MEMORIES, owner(), body)
    assert replay.status == 201 and replay.body["memory_id"] == first.body["memory_id"]


def test_a_write_only_token_cannot_replay_another_callers_write(rig: RecallRig) -> None:
    """Probe 9 (F6): a token with ``memory:write`` but not ``memory:read`` got 403 on list
    and get, yet re-posting the owner's exact body answered 201 with the memory's id,
    version and times, and 409 for any other content: a way to confirm a guess. Such a
    token may replay only its own writes."""
    body = memory_body(request_id=f"owner-{uuid.uuid4().hex}", content=f"Likes {CANARY}")
    first = call("POST", MEMORIES, owner(), body)
    assert first.status == 201, first.body
    writer = Claims.model_validate(
        {**claims(scope="memory:write").model_dump(), "sub": "another-service"}
    )
    refused(call("GET", f"{MEMORIES}/{first.body['memory_id']}", writer), 403, "forbidden")
    for payload in (body, {**body, "content": "Likes something else"}):
        again = call("POST", MEMORIES, writer, payload)
        refused(again, 404, "not_found")
        assert first.body["memory_id"] not in text(again)
    # Its own write it may retry.
    mine = memory_body(request_id=f"writer-{uuid.uuid4().hex}", content="Prefers green tea")
    assert call("POST", MEMORIES, writer, mine).status == 201
    replayed = call("POST", MEMORIES, writer, mine)
    assert replayed.status == 201, replayed.body


def test_older_versions_of_a_fact_whose_current_version_expired_are_not_exported(
    rig: RecallRig,
) -> None:
    """A fact lives as long as its current version: once that expires, no older version
    of it is exported, however long its own expiry (each version is judged with its
    fact, not alone)."""
    v1 = write(owner(), f"Drafts are reviewed by {CANARY} on Fridays", ttl_seconds=30 * 86400)
    v2 = patch(owner(), v1["memory_id"], content="Drafts are reviewed on Mondays", ttl_seconds=60)
    rig.clock.advance(seconds=120)
    exported = call("GET", f"{S1}/export", owner())
    assert exported.status == 200, exported.body
    assert exported.body["memories"] == [] and CANARY not in text(exported)
    refused(call("GET", f"{MEMORIES}/{v2['memory_id']}/history", owner()), 404, "not_found")
