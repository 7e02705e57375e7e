"""Counting references to artifacts inside the transaction of the record that makes them.

A reference is a member of the artifact row's string set ``referenced_by``
(``memory:<chain_id>``, ``run:<run_id>``); adding one requires the artifact to be
committed (and, for checkpoints, to have the expected sha256), so a record can never point
at an upload that is not there.
"""

from __future__ import annotations

from typing import Any

from memvault.storage.dynamo import key, to_attr


def add_reference(
    table: str,
    tenant_id: str,
    subject_id: str,
    artifact_id: str,
    ref: str,
    sha256: str | None = None,
) -> dict[str, Any]:
    condition = "#state = :committed"
    values: dict[str, Any] = {":ref": {"SS": [ref]}, ":committed": to_attr("COMMITTED")}
    if sha256 is not None:
        condition += " AND sha256 = :sha"
        values[":sha"] = to_attr(sha256)
    return {
        "Update": {
            "TableName": table,
            "Key": key(f"{tenant_id}#{subject_id}", f"ART#{artifact_id}"),
            "UpdateExpression": "ADD referenced_by :ref",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": values,
        }
    }
