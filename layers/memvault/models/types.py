"""Reusable identifier types, validated in one place.

Tenant and subject ids lead every DynamoDB key (``<tenant>#<subject>``), so they may
not contain ``#`` or ``/``: that keeps key prefixes unambiguous for IAM
``dynamodb:LeadingKeys`` and S3 prefixes.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, StringConstraints

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


#: DynamoDB's number range: magnitudes from 1e-130 up to (not including) 1e126, or 0.
NUMBER_MIN, NUMBER_MAX = 1e-130, 1e126


def storable_number(value: Any) -> Any:
    """``value`` if DynamoDB can store it as a number; ``ValueError`` (a 422) if not.

    Python accepts 1e-200 and 1e200 as floats; DynamoDB refuses them, and before this
    check such a value reached the table and answered 500."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("numbers must be finite")
    if isinstance(value, int) and abs(value) >= 10**38:
        raise ValueError("integers must have at most 38 digits")
    if value != 0 and not NUMBER_MIN <= abs(value) < NUMBER_MAX:
        raise ValueError("numbers must be 0 or between 1e-130 and 1e126 in magnitude")
    return value


#: A confidence in [0, 1] that the store can hold.
Confidence = Annotated[float, AfterValidator(storable_number)]
