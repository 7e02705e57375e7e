"""The README's LangGraph store quick start runs as written against the local stack."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack
from tests.langgraph_adapters.conftest import SCOPES

REPO = Path(__file__).resolve().parents[2]


def readme_store_quick_start() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n### LangGraph store\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the LangGraph store section has no python block"
    return match.group(1)


def test_the_readme_store_quick_start_runs(stack: RunningStack, tmp_path: Path) -> None:
    # A tenant of its own, so the quick start's fixed subject meets no other test's items.
    tenant = f"readme-{uuid.uuid4().hex[:8]}"
    token = DevKey.load_or_create(stack.home).mint(tenant=tenant, subject="user-1", scope=SCOPES)
    script = tmp_path / "store_quick_start.py"
    script.write_text(readme_store_quick_start(), encoding="utf-8")
    env = {**os.environ, "MEMVAULT_ENDPOINT": stack.url, "MEMVAULT_TOKEN": token}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["{'text': 'Internal docs in Chinese'}", "['docs-language']"]
