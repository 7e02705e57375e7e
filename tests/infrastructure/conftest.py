"""Synthesized stacks for the infrastructure tests (silo, pool, and pool with WAF in
production, with reserved concurrency and alarm notifications). Synthesis runs cdk-nag's
AwsSolutions pack as a validation plugin: an unacknowledged finding fails it, so every
fixture here is also a nag check."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from infra.app import build_app
from infra.stack import MemvaultStack


@dataclass
class Synth:
    stack: MemvaultStack
    template: Template
    outdir: Path

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.template.to_json()
        return data

    def resources(self, kind: str) -> dict[str, Any]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == kind}


def synth(tmp: Path, **context: str) -> Synth:
    app = cdk.App(context=context, outdir=str(tmp))
    build_app(app)
    app.synth()
    stack = next(c for c in app.node.children if isinstance(c, MemvaultStack))
    return Synth(stack, Template.from_stack(stack), tmp)


@pytest.fixture(scope="session")
def silo(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth(tmp_path_factory.mktemp("silo"), tenant="acme")


@pytest.fixture(scope="session")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth(tmp_path_factory.mktemp("pool"), mode="pool")


#: The production pool's optional settings (infra/deployment.py, docs/deploy.md).
PRODUCTION_RESERVED = {"api": 100, "purge": 5}
PRODUCTION_ALARM_EMAIL = "oncall@example.com"
PRODUCTION_ALARM_TOPIC = "arn:aws:sns:us-east-1:123456789012:ops-alarms"


@pytest.fixture(scope="session")
def pool_production(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth(
        tmp_path_factory.mktemp("poolprod"),
        mode="pool",
        production="true",
        enable_waf="true",
        reserved_concurrency=json.dumps(PRODUCTION_RESERVED),
        alarm_email=PRODUCTION_ALARM_EMAIL,
        alarm_topic_arn=PRODUCTION_ALARM_TOPIC,
    )


def statements(synth: Synth, role_logical_prefix: str) -> list[dict[str, Any]]:
    """Every statement of the inline policies attached to roles whose id starts so."""
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        roles = json.dumps(policy["Properties"].get("Roles", []))
        if role_logical_prefix in roles:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def one(synth: Synth, kind: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
    """The single resource of ``kind`` whose logical id starts with ``prefix``."""
    found = [(k, v) for k, v in synth.resources(kind).items() if k.startswith(prefix)]
    assert len(found) == 1, [k for k, _ in found]
    return found[0]


def function(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    return one(synth, "AWS::Lambda::Function", f"Compute{name}Function")


def role(synth: Synth, name: str) -> str:
    return one(synth, "AWS::IAM::Role", f"Compute{name}FunctionServiceRole")[0]
