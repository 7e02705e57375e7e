"""An artifact's name is shown to every reader of the artifact: personal data in it is
kept only with the subject's consent, as in a memory, a session message or a run, and
makes the artifact ``pii``. On both stores.

A probe: ``StartUpload`` had no ``consent``; a name holding an SSN was refused on an
``internal`` artifact but stored as given once the artifact was declared ``pii``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from memvault.models.access import Scope
from memvault.services.bundle import Services
from memvault_wire.artifact import StartUpload
from memvault_wire.errors import ConsentRequired, NotFound
from memvault_wire.memory import Sensitivity
from tests.support.harness import ctx

EVERYTHING = frozenset(Scope) - {Scope.SUBJECTS_ANY}
OWNER = ctx(scopes=EVERYTHING, max_sensitivity=Sensitivity.PII)
LOWER = ctx(scopes=EVERYTHING, max_sensitivity=Sensitivity.INTERNAL)
DATA = b"a scanned page\n" * 20
PASSPORT = "Passport scan Dana Whitfield SSN 123-45-6789.pdf"


def _start(services: Services, **fields: Any) -> Any:
    body = StartUpload.model_validate(
        {
            "request_id": fields.pop("request_id", "up-1"),
            "media_type": "text/plain",
            "size_bytes": len(DATA),
            "sha256": hashlib.sha256(DATA).hexdigest(),
            **fields,
        }
    )
    return services.artifacts.start(OWNER, "u-1", body)


@pytest.mark.parametrize("sensitivity", ["public", "internal", "pii"])
def test_personal_data_in_a_name_needs_consent_and_makes_the_artifact_pii(
    services: Services, sensitivity: str
) -> None:
    with pytest.raises(ConsentRequired) as raised:
        _start(services, name=PASSPORT, sensitivity=sensitivity)
    details = raised.value.details
    assert (details["reason"], details["fields"]) == ("pii", ["name"])
    assert "national_id" in details["pii_types"]
    assert "6789" not in str(raised.value) + str(details)

    # Nothing was kept: the same request, with consent, starts the upload.
    out, created = _start(services, name=PASSPORT, sensitivity=sensitivity, consent=True)
    assert created
    assert (out.name, out.sensitivity) == (PASSPORT, Sensitivity.PII)
    assert services.artifacts.get(OWNER, "u-1", out.artifact_id).sensitivity is Sensitivity.PII
    with pytest.raises(NotFound):
        services.artifacts.get(LOWER, "u-1", out.artifact_id)


def test_a_name_without_personal_data_needs_no_consent_and_keeps_its_class(
    services: Services,
) -> None:
    out, created = _start(services, name="q3-report.pdf", sensitivity="public")
    assert created and out.sensitivity is Sensitivity.PUBLIC
    # Consent is no part of the upload asked for: a retry that adds it is a replay.
    again, created = _start(services, name="q3-report.pdf", sensitivity="public", consent=True)
    assert not created and again.artifact_id == out.artifact_id
    unnamed, _ = _start(services, request_id="up-2")
    assert unnamed.sensitivity is Sensitivity.INTERNAL
