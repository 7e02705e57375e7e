"""`make run` plays the demo; it must run end to end and show each rule holding."""

from __future__ import annotations

import io

from memvault_local import demo


def test_the_demo_runs_and_shows_the_rules_holding() -> None:
    out = io.StringIO()
    assert demo.main(out) == 0
    text = out.getvalue()
    for expected in (
        "v1 active",
        "refused: idempotency_key_reused (409)",
        "refused: version_conflict (409)",
        "v1 superseded, v2 active",
        "refused: secret_detected (422)",
        "refused: consent_required (422)",
        "classified pii",
        "starts as candidate",
        "refused: not_found (404)",
        "primary=DONE, runs=NOT_APPLICABLE, sessions=NOT_APPLICABLE, traces=DONE, versions=DONE",
        "0 memories",
    ):
        assert expected in text
    assert "AKIAIOSFODNN7EXAMPLE" not in text
