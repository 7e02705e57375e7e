"""A Lambda handler's import (its cold start) loads only what building the handler needs.

Each handler module is imported in a fresh interpreter, outside Lambda (tracing off), and
the modules it loaded are checked: the X-Ray SDK, the AWS SDK, the services and their
policies, search and model libraries load on the first invocation that needs them, or
never. No timing is asserted (machines are noisy); ``bench/cold_start.py`` measures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Never loaded by importing any handler.
NEVER = (
    "aws_xray_sdk.core",  # Tracer's X-Ray recorder: only while tracing is on (in Lambda)
    "boto3",
    "botocore.session",
    "s3transfer",
    "opensearchpy",
    "numpy",
    "phonenumbers",
    "detect_secrets",
    "bpe_openai",
    "requests",
    "jwt",
    "pydantic_settings",
    "aws_lambda_powertools.event_handler.openapi.models",  # only GET /v1/openapi.json
    "memvault.config",
    "memvault.wiring",
    "memvault.tenancy",
    "memvault.services.memory",
    "memvault.policy.write_policy",
)
#: Handlers with no HTTP routes load no pydantic at all.
NOT_ROUTED = ("pydantic",)
ROUTED = {"api", "direct"}

PROBE = """
import json, sys
import functions.{name}.index
modules = sorted(sys.modules)
built = []
if "pydantic" in modules:
    from pydantic import BaseModel
    built = sorted(
        f"{{c.__module__}}.{{c.__qualname__}}"
        for m in list(sys.modules.values())
        if getattr(m, "__name__", "").startswith("memvault")
        for c in list(vars(m).values())
        if isinstance(c, type) and issubclass(c, BaseModel) and c.__module__ == m.__name__
        and c.__pydantic_complete__
    )
print(json.dumps({{"modules": modules, "built_models": built}}))
"""


def _import_in_a_fresh_interpreter(name: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "LAMBDA_TASK_ROOT"}
    env["PYTHONPATH"] = os.pathsep.join(["layers", "wire", "local", "."])
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(name=name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    result: dict[str, list[str]] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("name", ["api", "authorizer", "direct", "indexer", "purge", "sweeper"])
def test_importing_a_handler_leaves_the_heavy_modules_unloaded(name: str) -> None:
    found = _import_in_a_fresh_interpreter(name)
    modules = set(found["modules"])
    unwanted = NEVER if name in ROUTED else NEVER + NOT_ROUTED
    assert f"functions.{name}.index" in modules
    assert not [m for m in unwanted if m in modules]
    # Routes name their models at import; each builds its validator when first used.
    assert found["built_models"] == []
