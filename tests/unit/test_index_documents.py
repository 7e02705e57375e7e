"""Index operations derived from stream images: stages, external versions, tombstones."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.search.documents import STAGES, Stage, external_version, op_from_images
from memvault.search.opensearch import OpenSearchIndex


def item(**over: Any) -> dict[str, Any]:
    base = {
        "pk": "acme#u-1",
        "sk": "MEM#mem_1",
        "type": "memory",
        "memory_id": "mem_1",
        "chain_id": "chn_1",
        "tenant_id": "acme",
        "subject_id": "u-1",
        "kind": "semantic",
        "status": "active",
        "content": "Lin deploys on Thursdays",
        "tags": ["deploy"],
        "scope": {"workspace": "w1"},
        "sensitivity": "internal",
        "visibility": [],
        "source_type": "user_statement",
        "version": 3,
        "valid_from": "2026-01-01T00:00:00Z",
        "expires_at": "2026-06-01T00:00:00Z",
        "created_at": "2026-01-01T00:00:00Z",
        "content_hash": "h",
    }
    return base | over


#: The documented rule (docs/recall.md, indexing): external version = memory version
#: * 8 + life stage, the stages numbered in their order of life. Written out here so that
#: the expectations below do not come from the code they check.
STAGE_NUMBER = {
    "CANDIDATE": 1,
    "ACTIVE": 2,
    "SUPERSEDED": 3,
    "EXPIRED": 4,
    "DELETED": 5,
    "PURGED": 6,
    "REMOVED": 7,
}


def test_every_later_stage_and_every_newer_version_outranks_what_came_before() -> None:
    assert {s.name: int(s) for s in Stage} == STAGE_NUMBER and STAGES == 8
    assert [external_version(3, s) for s in Stage] == [3 * 8 + n for n in STAGE_NUMBER.values()]
    order = [external_version(v, s) for v in (1, 2) for s in Stage]
    assert order == sorted(order) and len(set(order)) == len(order)
    assert external_version(2, Stage.CANDIDATE) > external_version(1, Stage.REMOVED)
    assert max(Stage) < STAGES


def test_an_insert_is_a_live_document_with_scope_pairs() -> None:
    op = op_from_images("INSERT", item(), None)
    assert op is not None and op.live and op.doc_id == "chn_1"
    assert op.version == 3 * 8 + STAGE_NUMBER["ACTIVE"]
    body = op.body()
    assert body["doc_type"] == "memory" and body["scope"] == ["workspace=w1"]
    assert body["visible_to_all"] is True and body["sensitivity_rank"] == 1
    row = item()
    for name in (
        "chain_id", "memory_id", "tenant_id", "subject_id", "kind", "status", "content",
        "tags", "sensitivity", "visibility", "source_type", "valid_from", "expires_at",
        "created_at", "content_hash",
    ):  # fmt: skip
        assert body[name] == row[name], name
    assert body["memory_version"] == row["version"]


@pytest.mark.parametrize(
    ("event", "new", "old", "stage"),
    [
        ("MODIFY", item(status="superseded"), item(), Stage.SUPERSEDED),
        ("MODIFY", item(status="deleted"), item(), Stage.DELETED),
        (
            "MODIFY",
            {
                "pk": "acme#u-1",
                "sk": "MEM#mem_1",
                "type": "memory-tombstone",
                "memory_id": "mem_1",
                "chain_id": "chn_1",
                "status": "deleted",
            },
            item(status="deleted"),
            Stage.PURGED,
        ),
        ("REMOVE", None, item(), Stage.REMOVED),
    ],
)
def test_leaving_life_writes_an_ids_only_tombstone(
    event: str, new: dict[str, Any] | None, old: dict[str, Any], stage: Stage
) -> None:
    op = op_from_images(event, new, old)
    assert op is not None and op.stage is stage and not op.live
    body = op.body()
    assert body["doc_type"] == "tombstone" and "content" not in body
    assert op.version == 3 * 8 + STAGE_NUMBER[stage.name]
    assert body["memory_version"] == 3 and body["status"] == stage.name.lower()


def test_bookkeeping_changes_and_other_items_are_not_index_changes() -> None:
    assert op_from_images("MODIFY", item(index_status="indexed"), item()) is None
    assert op_from_images("INSERT", {"pk": "acme#u-1", "sk": "CHAIN#chn_1"}, None) is None
    assert op_from_images("REMOVE", None, {"pk": "acme#u-1", "sk": "KEY#x"}) is None


def test_reader_roles_are_mapped_to_a_read_only_role_on_the_alias() -> None:
    """The local node has no security plugin, so the requests are checked as sent."""
    sent: list[tuple[str, str, Any]] = []

    class Indices:
        def exists(self, index: str) -> bool:
            return True

        def exists_alias(self, name: str) -> bool:
            return True

    class Transport:
        def perform_request(self, method: str, url: str, body: Any = None) -> None:
            sent.append((method, url, body))

    class Client:
        indices = Indices()
        transport = Transport()

    index = OpenSearchIndex(
        Client(),
        "memvault-memories",
        model_slug="m",
        model_id="m",
        model_version="1",
        dimensions=4,
        reader_role_arns=["arn:aws:iam::1:role/api"],
    )
    index.ensure()
    role, mapping = sent
    assert role[1] == "/_plugins/_security/api/roles/memvault-memories-reader"
    assert role[2]["index_permissions"][0]["allowed_actions"] == ["read"]
    assert role[2]["index_permissions"][0]["index_patterns"] == [
        "memvault-memories",
        "memvault-memories--*",
    ]
    assert mapping[2] == {"backend_roles": ["arn:aws:iam::1:role/api"]}
