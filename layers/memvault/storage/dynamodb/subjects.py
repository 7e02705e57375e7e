"""A subject's epoch as a condition of another table's transaction.

The memory table keeps each subject's epoch (``SUBJECT#meta``); a forget retires it in one
conditional write. A session, run or artifact write adds this check to its own
transaction, so that it commits only while the subject's epoch is still the one it was
decided under (``Conflict.EPOCH`` otherwise, under the label ``epoch``).
"""

from __future__ import annotations

from typing import Any

from memvault.storage.dynamodb import keys
from memvault.storage.dynamodb.dynamo import Dynamo, key, to_attr

#: The transaction item label a refused epoch check is reported under.
EPOCH = "epoch"


def epoch_check(db: Dynamo, tenant_id: str, subject_id: str, epoch: int) -> dict[str, Any]:
    """A ``ConditionCheck``: the subject's epoch is ``epoch`` (0: never forgotten, so no
    subject record exists)."""
    check: dict[str, Any] = {
        "TableName": db.names["memory"],
        "Key": key(keys.subject_pk(tenant_id, subject_id), keys.SUBJECT_META_SK),
    }
    if epoch == 0:
        check["ConditionExpression"] = "attribute_not_exists(pk)"
    else:
        check["ConditionExpression"] = "epoch = :epoch"
        check["ExpressionAttributeValues"] = {":epoch": to_attr(epoch)}
    return {"ConditionCheck": check}


def subject_epoch(db: Dynamo, tenant_id: str, subject_id: str) -> int:
    """The subject's current epoch, read strongly consistent (0: never forgotten)."""
    item = db.get("memory", keys.subject_pk(tenant_id, subject_id), keys.SUBJECT_META_SK)
    return int(item["epoch"]) if item else 0
