"""Path parameter types, validated as the domain's id types are."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Path, Query

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$"

SubjectPath = Annotated[
    str, Path(min_length=1, max_length=128, pattern=NAME_PATTERN, description="the subject")
]
MemoryPath = Annotated[str, Path(pattern=r"^mem_[0-9a-f]{32}$", description="a memory version id")]
SessionPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$",
        description="a session id",
    ),
]
RunPath = Annotated[
    str, Path(min_length=1, max_length=128, pattern=NAME_PATTERN, description="a run id")
]
OperationPath = Annotated[
    str, Path(min_length=1, max_length=128, pattern=NAME_PATTERN, description="an operation id")
]
DeletionPath = Annotated[str, Path(pattern=r"^del_[0-9a-f]{32}$", description="a deletion job id")]
#: Run ids are unique per subject: a token for one subject means its own runs; a tenant
#: service's token (``subjects:any``, no subject) names the subject here.
RunSubjectQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=128,
        pattern=NAME_PATTERN,
        description="the run's subject; needed only with a token that has no subject",
    ),
]
