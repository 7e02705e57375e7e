"""Key layout. Every partition key starts with ``<tenant_id>#``.

memory table, partition ``<tenant>#<subject>``:
    ``MEM#<memory_id>``   one version of a memory (content lives here only)
    ``CHAIN#<chain_id>``  head of a version chain: current version (compare-and-set), tombstone;
                          a keyed chain's is ``CHAIN#chk_<fact>_<generation>``: the newest
                          generation of a fact is its canonical pointer, and creating it
                          (if absent) claims the fact
    ``KEY#<digest>``      canonical pointer of the earlier layout (no longer written)
    ``#SUBJECT``          the subject's epoch; forgetting a subject retires the epoch
idempotency table: ``<tenant>#<subject>`` / ``memory-write#<request_id>`` (earlier layout;
                   a memory write's record is now its version, whose id derives from
                   the request id)
deletions table:   ``<tenant>#<deletion_id>`` / ``JOB``
audit table:       ``<tenant>#<subject>`` / ``<time>#<event_id>`` for events,
                   ``<tenant>#~deletions`` / ``<time>#<deletion_id>`` for the deletion log
                   (``~`` cannot appear in a subject id, so the two never collide)
"""

from __future__ import annotations

from memvault.storage.ports.memory import keyed_chain_prefix, keyed_chain_slot

SUBJECT_META_SK = "#SUBJECT"
VERSION_PREFIX = "MEM#"
CHAIN_PREFIX = "CHAIN#"
POINTER_PREFIX = "KEY#"
JOB_SK = "JOB"


def subject_pk(tenant_id: str, subject_id: str) -> str:
    return f"{tenant_id}#{subject_id}"


def version_sk(memory_id: str) -> str:
    return f"{VERSION_PREFIX}{memory_id}"


def chain_sk(chain_id: str) -> str:
    """A chain head's key: a keyed chain's is its fact and generation (not its random
    part), so that creating the head claims the fact (see ``keyed_chain_id``)."""
    return f"{CHAIN_PREFIX}{keyed_chain_slot(chain_id) or chain_id}"


def fact_chains_prefix(fact: str) -> str:
    """The key prefix of every chain head of one fact, oldest generation first."""
    return f"{CHAIN_PREFIX}{keyed_chain_prefix(fact)}"


def idempotency_sk(request_id: str) -> str:
    return f"memory-write#{request_id}"


def deletion_pk(tenant_id: str, deletion_id: str) -> str:
    return f"{tenant_id}#{deletion_id}"


def deletion_log_pk(tenant_id: str) -> str:
    return f"{tenant_id}#~deletions"
