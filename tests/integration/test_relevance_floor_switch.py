"""A recall request may turn the relevance floor off (``relevance_floor: false``).

The floor answers a query about nothing the subject holds with nothing. A question put in
other words than the memory that answers it ("Does the user have any allergies?" for "I am
allergic to eggs") can fall under it too; a caller that would rather weigh weak matches
than get none asks without it. Only the floor goes: the hard filters and re-validation
still decide what may come back, and the trace says the floor was off. Run on both search
backends and both stores.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from memvault.embeddings.hashing import HashingEmbedder
from memvault_wire.memory import Sensitivity
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.recall import RIG_PARAMS, RecallRig, rig_for

QUERY = "Does the user have any allergies?"


@pytest.fixture(params=RIG_PARAMS, ids="-".join)
def rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    yield from rig_for(request.param, HashingEmbedder())


def _write(rig: RecallRig, content: str, **kw: Any) -> Any:
    body = {"request_id": uuid.uuid4().hex, "kind": "semantic", "canonical_key": None, **kw}
    return rig.services.memory.write(
        ctx(max_sensitivity=Sensitivity.PII), "u-1", a_write(content=content, **body)
    ).memory


#: The write policy classes a health fact as personal data: its reader holds that ceiling.
READER = ctx(max_sensitivity=Sensitivity.PII)


def _recall(rig: RecallRig, reader: Any = READER, **request: Any) -> Any:
    return rig.services.recall.recall(reader, "u-1", RecallRequest(query=QUERY, **request))


def test_without_the_floor_a_weak_match_comes_back_and_the_trace_says_so(
    rig: RecallRig,
) -> None:
    eggs = _write(rig, "I am allergic to eggs")
    rig.sync()
    # The hashing embedder shares no word with the query: under the floor, and no
    # word in common, so the default answers nothing.
    assert _recall(rig).items == []
    found = _recall(rig, relevance_floor=False)
    assert [i.memory.memory_id for i in found.items] == [eggs.memory_id]
    assert found.items[0].why.similarity is not None
    traced = rig.services.traces.recall_trace(READER, found.recall_id)
    assert traced.filters["relevance_floor"] is False
    assert traced.below_floor == 0
    default = rig.services.traces.recall_trace(READER, _recall(rig).recall_id)
    assert default.filters["relevance_floor"] is True and default.below_floor == 1


def test_without_the_floor_the_hard_filters_and_re_validation_still_hold(
    rig: RecallRig,
) -> None:
    """Above the reader's ceiling, hidden from its role, deleted: none comes back (the
    reader is an agent with an internal ceiling; a person's token sees every role's)."""
    _write(rig, "I keep a spare key under the blue flower pot", sensitivity=Sensitivity.PII)
    _write(rig, "Notes for the clinic staff only", visibility=["clinic"])
    gone = _write(rig, "I used to keep two cats")
    kept = _write(rig, "I cycle to work unless it rains")
    rig.sync()
    rig.services.memory.delete(ctx(), "u-1", gone.memory_id)  # the index still holds it
    found = _recall(rig, ctx(agent_role="support"), relevance_floor=False)
    assert [i.memory.content for i in found.items] == [kept.content]


def test_the_switch_takes_a_json_boolean_only() -> None:
    assert RecallRequest(query=QUERY).relevance_floor is True
    for wrong in ("false", 0, None):
        with pytest.raises(ValidationError):
            RecallRequest(query=QUERY, relevance_floor=wrong)
