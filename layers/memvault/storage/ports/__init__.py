"""The storage ports: what the services ask of a store, in domain types.

One module per store; each has a DynamoDB adapter (``storage/dynamodb/``, what AWS runs)
and a SQLite adapter (``storage/sqlite/``, the local default), and one conformance suite
(``tests/storage/``) runs against both.
"""

from memvault.storage.ports.changes import Change, ChangeFeed, ChangeKind
from memvault.storage.ports.errors import ConditionFailed, Conflict

__all__ = ["Change", "ChangeFeed", "ChangeKind", "ConditionFailed", "Conflict"]
