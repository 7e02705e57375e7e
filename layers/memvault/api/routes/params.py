"""Path parameter types, validated as the domain's id types are (the patterns are the
wire package's, which the MCP tools check arguments with)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from memvault_wire.params import (
    DELETION_ID_PATTERN,
    MAX_NAME,
    MEMORY_ID_PATTERN,
    NAME_PATTERN,
    SESSION_PATTERN,
)

SubjectPath = Annotated[
    str, Path(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN, description="the subject")
]
MemoryPath = Annotated[str, Path(pattern=MEMORY_ID_PATTERN, description="a memory version id")]
SessionPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_NAME,
        pattern=SESSION_PATTERN,
        description="a session id",
    ),
]
RunPath = Annotated[
    str, Path(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN, description="a run id")
]
OperationPath = Annotated[
    str,
    Path(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN, description="an operation id"),
]
DeletionPath = Annotated[str, Path(pattern=DELETION_ID_PATTERN, description="a deletion job id")]
#: Run ids are unique per subject: a token for one subject means its own runs; a tenant
#: service's token (``subjects:any``, no subject) names the subject here.
RunSubjectQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_NAME,
        pattern=NAME_PATTERN,
        description="the run's subject; needed only with a token that has no subject",
    ),
]
