"""Driving the HTTP API in-process through real-shaped API Gateway proxy events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memvault.api.events import LocalLambdaContext, proxy_event
from memvault.handlers.api import handler as lambda_handler
from memvault.identity.claims import Claims

EVENTS = Path(__file__).resolve().parents[2] / "events"
ALL = "memory:read memory:write memory:delete"


def claims(
    tenant: str = "acme",
    subject: str | None = "u-1",
    scope: str = ALL,
    *,
    agent_role: str | None = None,
    max_sensitivity: str = "internal",
) -> Claims:
    return Claims.model_validate(
        {
            "tenant_id": tenant,
            "sub": f"client-of-{subject}",
            "subject_id": subject,
            "scope": scope,
            "agent_role": agent_role,
            "max_sensitivity": max_sensitivity,
        }
    )


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def code(self) -> str | None:
        return (
            (self.body or {}).get("error", {}).get("code") if isinstance(self.body, dict) else None
        )


def invoke(event: dict[str, Any]) -> Answer:
    out = lambda_handler(event, LocalLambdaContext())
    headers = dict(out.get("headers") or {})
    for name, values in (out.get("multiValueHeaders") or {}).items():
        headers[name] = ", ".join(values)
    raw = out.get("body")
    return Answer(out["statusCode"], json.loads(raw) if raw else None, headers)


def call(
    method: str,
    path: str,
    who: Claims | None,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    raw_body: str | None = None,
) -> Answer:
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    return invoke(proxy_event(method, path, claims=who, body=text, query=query))


def memory_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "request_id": "req-1",
        "kind": "semantic",
        "canonical_key": "preferred-language",
        "content": "Prefers Chinese for internal technical documents",
        "tags": ["preference"],
        "scope": {"workspace": "w1"},
        "source": {"type": "user_statement", "ref": "msg-1"},
        "consent": True,
    }
    body.update(overrides)
    return body
