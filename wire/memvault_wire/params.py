"""The API's path parameters as pydantic types: the patterns the routes validate with
(``memvault.api.routes.params``) and the types the MCP tools check arguments against."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

#: A subject, run or operation id.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$"
SESSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$"
MEMORY_ID_PATTERN = r"^mem_[0-9a-f]{32}$"
DELETION_ID_PATTERN = r"^del_[0-9a-f]{32}$"
MAX_NAME = 128

SubjectPath = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN, description="the subject")
]
MemoryPath = Annotated[str, Field(pattern=MEMORY_ID_PATTERN, description="a memory version id")]
RunPath = Annotated[
    str, Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN, description="a run id")
]
