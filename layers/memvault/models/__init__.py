"""Domain models: identifiers, access context, memory commands and records.

Every model here, in ``memvault.api`` and in ``memvault.identity.claims`` is declared
with ``defer_build=True``: pydantic builds its validator on first use, not when the class
is defined. Building them all was a large share of the API function's cold start, and a
request uses a few of them. The pydantic in use (2.14) builds a deferred model under a
lock, so a first use from several threads at once is safe; some earlier 2.x releases
raced there.
"""
