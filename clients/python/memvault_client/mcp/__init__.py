"""memvault as an MCP server: ``memvault mcp`` (or ``python -m memvault_client.mcp``).

Seven tools over one memvault API endpoint, through the SDK (``AsyncMemvaultClient``):
``remember``, ``recall``, ``correct``, ``forget``, ``build_context``, ``get_run`` and
``advance_run``. Each tool's input schema is the JSON schema of the API's own request
model (``MemoryWrite``, ``RecallRequest``, ``MemoryPatch``, ``ContextRequest``,
``Advance``) with the path parameters the route takes in front, so the two cannot drift.
The token is the server's configuration (``MEMVAULT_TOKEN``, ``MEMVAULT_TOKEN_FILE`` or
``--token-file``), never a tool argument; the subject is the token's (or
``MEMVAULT_SUBJECT`` / ``--subject``), and only a token bound to no subject lets the
model name one.

The MCP SDK (the ``mcp`` extra, ``mcp>=2.3,<3``) is imported by
``memvault_client.mcp.server`` only, so ``import memvault_client`` never needs it:
``memvault_client.mcp.tools`` holds the tool table and renderings, which need pydantic only.
"""
