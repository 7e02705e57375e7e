"""Reusable identifier types, validated in one place.

Tenant and subject ids lead every DynamoDB key (``<tenant>#<subject>``), so they may
not contain ``#`` or ``/``: that keeps key prefixes unambiguous for IAM
``dynamodb:LeadingKeys`` and S3 prefixes.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$"

TenantId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=_NAME)]
SubjectId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=_NAME)]
AgentRole = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=_NAME)]
MemoryId = Annotated[str, StringConstraints(pattern=r"^mem_[0-9a-f]{32}$")]
DeletionId = Annotated[str, StringConstraints(pattern=r"^del_[0-9a-f]{32}$")]
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=100)]
CanonicalKey = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\s](.*[^\s])?$")
]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[^\s,]+$")]
ScopeKey = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")]
ScopeValue = Annotated[str, StringConstraints(min_length=1, max_length=256)]
