"""``memvault trace <memory_id>`` and ``memvault recall-trace <recall_id>`` against the real
local stack: what they print (and ``--json``: the API's answer as it is), where the subject
comes from when ``--subject`` is not given, and an unknown or malformed id as one line on
stderr with exit 1."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from memvault_local.client import ApiClient
from memvault_local.process import RunningStack
from tests.client.conftest import Cli, mint, new_subject


def _recalled(cli: Cli, stack: RunningStack) -> dict[str, Any]:
    """A subject, a memory written through the CLI, and a recall (for run-3) that served it."""
    subject = new_subject("trace")
    raw = ApiClient(stack.url, mint(stack, subject))
    code, out, _ = cli(
        "write", subject, "The release train leaves every second Wednesday", "--consent", "--json"
    )
    assert code == 0
    memory_id = json.loads(out)["memory_id"]
    base = f"/v1/subjects/{subject}/memories/{memory_id}"
    deadline = time.monotonic() + 30
    while raw.call("GET", base).body["index_status"] != "indexed":
        assert time.monotonic() < deadline, "the memory was never indexed"
        time.sleep(0.1)
    answer = raw.call(
        "POST",
        f"/v1/subjects/{subject}/recall",
        body={"query": "when does the release train leave", "limit": 5, "run_id": "run-3"},
    )
    assert answer.status == 200
    assert [i["memory"]["memory_id"] for i in answer.body["items"]] == [memory_id]
    return {
        "subject": subject,
        "memory_id": memory_id,
        "recall_id": answer.body["recall_id"],
        "raw": raw,
    }


def test_trace_and_recall_trace_print_the_memory_and_the_recall(
    cli: Cli, stack: RunningStack
) -> None:
    r = _recalled(cli, stack)
    subject, memory_id, recall_id = r["subject"], r["memory_id"], r["recall_id"]

    code, out, _ = cli("trace", memory_id, "--subject", subject, "--json")
    assert code == 0
    raw_trace = r["raw"].call("GET", f"/v1/subjects/{subject}/memories/{memory_id}/trace").body
    assert json.loads(out) == raw_trace
    assert raw_trace["last_used"]["recall_id"] == recall_id

    code, out, _ = cli("trace", memory_id, "--subject", subject)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{memory_id}  chain ") and lines[0].endswith("live  current v1")
    assert lines[1].startswith(f"  v1 {memory_id} active by ")
    assert lines[1].endswith(f"index indexed; served by: {recall_id}#1")
    assert any(" memory.write by " in line for line in lines)
    assert lines[-1].startswith("  last used ") and f"by {recall_id} (run run-3" in lines[-1]

    code, out, _ = cli("recall-trace", recall_id, "--subject", subject)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{recall_id}  ") and "run run-3" in lines[0]
    assert "(recall, " in lines[0]
    assert lines[-1] == f"  #1 {memory_id} v1"
    code, out, _ = cli("recall-trace", recall_id, "--subject", subject, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown == r["raw"].call("GET", f"/v1/recalls/{recall_id}").body
    # Ids, counts and reasons only: the memory's words are nowhere in either answer.
    assert "release train" not in json.dumps(shown) + json.dumps(raw_trace)


def test_the_subject_comes_from_the_environment_or_the_token(
    cli: Cli, stack: RunningStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _recalled(cli, stack)
    subject, memory_id, recall_id = r["subject"], r["memory_id"], r["recall_id"]

    # Neither --subject, $MEMVAULT_SUBJECT nor a token: one line, exit 2, nothing asked.
    for argv in (("trace", memory_id), ("recall-trace", recall_id)):
        code, out, err = cli(*argv)
        assert (code, out) == (2, "")
        assert err.count("\n") == 1 and err.startswith("error: name the ")
        assert "--subject" in err and "MEMVAULT_SUBJECT" in err

    monkeypatch.setenv("MEMVAULT_SUBJECT", subject)
    code, out, _ = cli("trace", memory_id)
    assert code == 0 and out.startswith(f"{memory_id}  chain ")
    code, out, _ = cli("recall-trace", recall_id)
    assert code == 0 and out.startswith(f"{recall_id}  ")

    # A token bound to the subject names it.
    monkeypatch.delenv("MEMVAULT_SUBJECT")
    monkeypatch.setenv("MEMVAULT_TOKEN", mint(stack, subject, scope="memory:read"))
    code, out, _ = cli("trace", memory_id, "--json")
    assert code == 0 and json.loads(out)["memory_id"] == memory_id
    code, out, _ = cli("recall-trace", recall_id, "--json")
    assert code == 0 and json.loads(out)["recall_id"] == recall_id


def test_an_unknown_or_malformed_id_is_one_line_and_exit_1(cli: Cli) -> None:
    subject = new_subject("trace")
    cases = (
        (("trace", "mem_" + "4" * 32), "error: not_found (404): "),
        (("recall-trace", "rcl_" + "4" * 32), "error: not_found (404): "),
        (("recall-trace", "rcl_nope"), "error: validation_failed (422): "),
        (("trace", "mem_nope"), "error: validation_failed (422): "),
    )
    for argv, expected in cases:
        code, out, err = cli(*argv, "--subject", subject)
        assert (code, out) == (1, ""), argv
        assert err.startswith(expected) and err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err
