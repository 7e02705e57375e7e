"""The ``memvault`` CLI's memory commands run on the SDK and print what they printed
before: the raw JSON answer with ``--json``, the same lines without it, and errors as
``error: <code> (<status>): <message>`` (exit 1). Run in-process against the stack."""

from __future__ import annotations

import json
import time

import pytest

from memvault_local.cli import main
from memvault_local.client import ApiClient
from memvault_local.process import RunningStack, free_port
from tests.client.conftest import Cli, mint, new_subject


def test_the_memory_commands_print_what_the_api_answered(cli: Cli, stack: RunningStack) -> None:
    subject = new_subject("cli")
    raw = ApiClient(stack.url, mint(stack, subject, scope="memory:read memory:delete"))
    base = f"/v1/subjects/{subject}/memories"

    code, out, _ = cli(
        "write", subject, "Prefers short answers", "--key", "style", "--consent", "--json"
    )
    assert code == 0
    written = json.loads(out)
    assert out == json.dumps(written, indent=2, ensure_ascii=False) + "\n"
    assert written["version"] == 1
    deadline = time.monotonic() + 30
    while raw.call("GET", f"{base}/{written['memory_id']}").body["index_status"] != "indexed":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    code, out, _ = cli("get", subject, written["memory_id"], "--json")
    assert json.loads(out) == raw.call("GET", f"{base}/{written['memory_id']}").body

    code, out, _ = cli("get", subject, written["memory_id"])
    assert code == 0
    got = raw.call("GET", f"{base}/{written['memory_id']}").body
    assert out.splitlines() == [
        f"{written['memory_id']}  v1 active  semantic [style]  internal  "
        f"expires {got['expires_at']}",
        "    Prefers short answers",
    ]
    code, out, _ = cli("list", subject, "--limit", "1")
    assert out.splitlines()[-1] == "(1 shown)"
    code, out, _ = cli("list", subject, "--json")
    assert json.loads(out) == raw.call("GET", base).body
    code, out, _ = cli("history", subject, written["memory_id"])
    assert "Prefers short answers" in out
    code, out, _ = cli("export", subject)
    assert out.startswith(f"export of {subject} at ") and "1 versions" in out.splitlines()[0]

    code, out, _ = cli("delete", subject, written["memory_id"], "--json")
    deletion = json.loads(out)
    assert deletion["scope"] == "memory" and deletion["copies"]
    code, out, _ = cli("deletion-status", deletion["deletion_id"])
    assert out.startswith(f"{deletion['deletion_id']}  ") and "    primary" in out
    code, out, _ = cli("forget", subject)
    assert code == 0 and f"(subject of {subject}, requested" in out


def test_errors_print_as_before(cli: Cli, stack: RunningStack) -> None:
    subject = new_subject("cli")
    code, _, err = cli("write", subject, "no consent given")
    assert code == 1
    assert err.startswith("error: consent_required (422): ")

    # Refused by the API's model before sending: the server's own words all the same.
    code, out, _ = cli("write", subject, "x", "--sensitivity", "bogus", "--consent", "--json")
    raw = ApiClient(stack.url, mint(stack, subject)).call(
        "POST",
        f"/v1/subjects/{subject}/memories",
        body={
            "request_id": "r",
            "kind": "semantic",
            "content": "x",
            "source": {"type": "user_statement"},
            "sensitivity": "bogus",
            "consent": True,
        },
    )
    assert code == 1
    assert json.loads(out) == raw.body
    code, _, err = cli("get", subject, "mem_" + "3" * 32)
    assert (code, err.split(":")[0:2]) == (1, ["error", " not_found (404)"])


def test_an_unreachable_endpoint_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMVAULT_TOKEN", "t")
    endpoint = f"http://127.0.0.1:{free_port()}"
    assert main(["list", "u-1", "--endpoint", endpoint]) == 2
    assert f"error: could not reach {endpoint}" in capsys.readouterr().err
