"""Offline checks of the synthesized templates: cdk-nag and cfn-lint."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cfnlint.api import lint_all
from infra.app import build_app
from infra.stack import MemvaultStack

from tests.infrastructure.conftest import Synth


def test_cdk_nag_reports_nothing_unacknowledged(
    silo: Synth, pool: Synth, pool_production: Synth
) -> None:
    """Synthesis would have failed otherwise; the report says so explicitly too, and every
    acknowledged finding carries a reason."""
    for synth in (silo, pool, pool_production):
        report = json.loads((synth.outdir / "validation-report.json").read_text())
        nag = next(r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions")
        assert nag["conclusion"] == "success"
        assert nag["violations"] == []
        assert nag["suppressedViolations"]
        for finding in nag["suppressedViolations"]:
            assert len(finding["reason"]) > 40, finding["ruleName"]


def test_cdk_nag_is_really_on(tmp_path: Path) -> None:
    app = cdk.App(context={"tenant": "acme"}, outdir=str(tmp_path))
    build_app(app)
    stack = next(c for c in app.node.children if isinstance(c, MemvaultStack))
    s3.Bucket(stack, "CarelessBucket")  # no TLS policy, no access logs: AwsSolutions-S1, S10
    with pytest.raises(RuntimeError, match="AwsSolutions-S10"):
        app.synth()


@pytest.mark.parametrize("name", ["silo", "pool", "pool_production"])
def test_cfn_lint_finds_no_errors(name: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(name)
    template = next(synth.outdir.glob("*.template.json")).read_text()
    errors = [m for m in lint_all(template) if str(m.rule.id).startswith("E")]
    assert errors == [], [f"{m.rule.id} {m.message}" for m in errors]
