"""`memvault doctor`: check the embedded store's invariants and the index against it.

Exits 0 when every invariant holds, 1 with one readable line per violation otherwise:
one current version per live chain, the chain head's version equal to its current row's,
no version above its chain head, every canonical pointer naming a live chain of its fact,
and the search index holding a live document only for a live chain's current version.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from memvault.search.backend import SearchIndex
from memvault.storage.ports.memory import LIVE
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.memory import invariant_violations


def index_violations(db: Database, index: SearchIndex) -> list[str]:
    """Live documents the table does not back (a deleted, superseded or unknown chain)."""
    out: list[str] = []
    with db.read() as conn:
        tenants = [r[0] for r in conn.execute("SELECT DISTINCT tenant_id FROM memory_chains")]
        chains: dict[tuple[str, str], Any] = {
            (r["tenant_id"], r["chain_id"]): r
            for r in conn.execute(
                "SELECT tenant_id, chain_id, state, current_memory_id FROM memory_chains"
            )
        }
    for tenant in tenants:
        for chain_id, (_, body) in index.documents(tenant).items():
            if body.get("doc_type") != "memory":
                continue
            head = chains.get((tenant, chain_id))
            where = f"{tenant} index document {chain_id}"
            if head is None:
                out.append(f"{where}: live in the index, but no such chain in the store")
            elif head["state"] != LIVE:
                out.append(f"{where}: live in the index, but the chain is deleted")
            elif body.get("memory_id") != head["current_memory_id"]:
                # The indexer may simply be behind; a second look tells.
                out.append(
                    f"{where}: holds {body.get('memory_id')}, the chain's current version "
                    f"is {head['current_memory_id']} (indexing behind, or a lost update)"
                )
    return out


def doctor(
    db: Database, index: SearchIndex | None, out: TextIO, now_epoch: int | None = None
) -> int:
    found = invariant_violations(db, int(time.time()) if now_epoch is None else now_epoch)
    if index is not None:
        found += index_violations(db, index)
    if not found:
        out.write(f"{db.path}: every invariant holds\n")
        return 0
    out.write(f"{db.path}: {len(found)} violation(s)\n")
    for line in found:
        out.write(f"  - {line}\n")
    return 1
