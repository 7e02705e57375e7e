"""`memvault run` (what `make run` starts) as a user meets it: a subprocess on loopback,
its printed curl example run as printed, the API driven over HTTP, a second start
refused clearly, and Ctrl-C stopping everything."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault_local.client import ApiClient
from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack, free_port, start_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    home = tmp_path_factory.mktemp("memvault-home")
    running = start_stack(home)
    yield running
    running.stop()


def test_the_printed_curl_example_works_as_printed(stack: RunningStack) -> None:
    curl = next(line for line in stack.banner.splitlines() if line.startswith("curl "))
    out = subprocess.run(
        ["bash", "-c", curl + " -w '\\n%{http_code}'"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    body, status = out.stdout.rsplit("\n", 1)
    assert status == "201", out.stdout
    assert '"version":1' in body


def test_the_banner_says_what_runs_where(stack: RunningStack) -> None:
    assert f"embedded: {stack.home / 'data' / 'memvault.db'} (SQLite, WAL)" in stack.banner
    assert "moto" not in stack.banner
    assert str(stack.home / "dev-signing-key.pem") in stack.banner


def test_the_memory_lifecycle_over_http(stack: RunningStack) -> None:
    api = stack.client()
    base = "/v1/subjects/user-1/memories"
    body = {
        "request_id": "e2e-1",
        "kind": "semantic",
        "canonical_key": "tz",
        "content": "Works in the Asia/Shanghai time zone",
        "source": {"type": "user_statement"},
        "consent": True,
    }

    first = api.call("POST", base, body=body)
    assert first.status == 201
    replay = api.call("POST", base, body=body)
    assert (replay.status, replay.body["memory_id"]) == (201, first.body["memory_id"])
    assert replay.headers["Idempotent-Replay"] == "true"
    reused = api.call("POST", base, body={**body, "content": "Europe/Berlin"})
    assert (reused.status, reused.body["error"]["code"]) == (409, "idempotency_key_reused")

    memory_id = first.body["memory_id"]
    corrected = api.call(
        "PATCH",
        f"{base}/{memory_id}",
        body={"expected_version": 1, "content": "Works in Europe/Berlin"},
    )
    assert (corrected.status, corrected.body["version"]) == (200, 2)
    stale = api.call("PATCH", f"{base}/{memory_id}", body={"expected_version": 1, "content": "x"})
    assert (stale.status, stale.body["error"]["code"]) == (409, "version_conflict")
    history = api.call("GET", f"{base}/{memory_id}/history")
    assert [v["version"] for v in history.body["versions"]] == [1, 2]

    deleted = api.call("DELETE", f"{base}/{memory_id}")
    assert deleted.status == 202
    assert api.call("GET", f"{base}/{memory_id}").status == 404
    # The purge runs by itself in the background, as a Step Functions execution would.
    status = _until(
        lambda: api.call("GET", f"/v1/deletions/{deleted.body['deletion_id']}"),
        lambda answer: answer.body["status"] in ("COMPLETED", "FAILED"),
    )
    assert status.body["status"] == "COMPLETED"
    assert {c["copy"]: c["status"] for c in status.body["copies"]}["index"] == "DONE"

    api.call("POST", base, body={**body, "request_id": "e2e-2", "canonical_key": "tea"})
    exported = api.call("GET", "/v1/subjects/user-1/export")
    keys = {m["canonical_key"] for m in exported.body["memories"]}
    assert "tea" in keys
    assert "tz" not in keys
    forgotten = api.call("DELETE", base)
    assert (forgotten.status, forgotten.body["scope"]) == (202, "subject")
    assert api.call("GET", base).body["items"] == []


def test_isolation_and_refusals_over_http(stack: RunningStack) -> None:
    base = "/v1/subjects/user-1/memories"
    mine = stack.client().call(
        "POST",
        base,
        body={
            "request_id": "iso-1",
            "kind": "episodic",
            "content": "Chose the blue theme",
            "source": {"type": "user_statement"},
            "consent": True,
        },
    )
    assert mine.status == 201
    other_tenant = stack.client(tenant="other").call("GET", f"{base}/{mine.body['memory_id']}")
    assert (other_tenant.status, other_tenant.body["error"]["code"]) == (404, "not_found")
    other_subject = stack.client(subject="user-2").call("GET", base)
    assert (other_subject.status, other_subject.body["error"]["code"]) == (403, "forbidden")
    read_only = stack.client(scope="memory:read").call("DELETE", base)
    assert (read_only.status, read_only.body["error"]["code"]) == (403, "forbidden")
    bad = ApiClient(stack.url, "not-a-token").call("GET", base)
    assert (bad.status, bad.body["error"]["code"]) == (401, "unauthorized")
    forged = ApiClient(
        stack.url,
        DevKey.load_or_create(stack.home / "elsewhere").mint(tenant="local", subject="user-1"),
    ).call("GET", base)
    assert forged.status == 401


def test_an_artifact_round_trip_over_http(stack: RunningStack) -> None:
    """Start, PUT the bytes to the returned URL with the returned headers, commit, read
    back through the download URL: S3 and KMS are moto's, behind the local stack."""
    import hashlib
    import urllib.request

    data = b"a transcript too large for a memory\n" * 200
    api = stack.client(scope="memory:read artifacts:write")
    started = api.call(
        "POST",
        "/v1/subjects/user-1/artifacts",
        body={
            "request_id": "art-e2e",
            "media_type": "text/plain",
            "size_bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
    )
    assert started.status == 201, started.body
    upload = started.body["upload"]
    put = urllib.request.Request(upload["url"], data=data, method="PUT", headers=upload["headers"])
    with urllib.request.urlopen(put, timeout=30) as answer:
        assert answer.status == 200
    artifact_id = started.body["artifact_id"]
    committed = api.call("POST", f"/v1/subjects/user-1/artifacts/{artifact_id}/commit")
    assert (committed.status, committed.body["state"]) == (200, "COMMITTED")
    read = api.call("GET", f"/v1/subjects/user-1/artifacts/{artifact_id}")
    with urllib.request.urlopen(read.body["download"]["url"], timeout=30) as answer:
        assert answer.read() == data


def test_a_second_start_says_one_is_running(stack: RunningStack) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "memvault_local.cli", "run"],
        env={**stack.env, "MEMVAULT_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert f"memvault is already running at {stack.url}" in second.stdout


def test_the_cli_talks_to_the_stack(stack: RunningStack) -> None:
    env = {**stack.env, "MEMVAULT_ENDPOINT": stack.url}
    cli = [sys.executable, "-m", "memvault_local.cli"]
    written = subprocess.run(
        [
            *cli,
            "write",
            "user-1",
            "Prefers short answers",
            "--key",
            "answer-style",
            "--consent",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert written.returncode == 0, written.stderr
    assert '"version": 1' in written.stdout
    listed = subprocess.run(
        [*cli, "list", "user-1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert "Prefers short answers" in listed.stdout
    refused = subprocess.run(
        [*cli, "write", "user-1", "no consent given"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "consent_required (422)" in refused.stderr


def test_a_written_memory_is_recalled_over_http_and_a_deleted_one_is_not(
    stack: RunningStack,
) -> None:
    """The stack's own stream pump feeds the indexer; recall uses e5-small-v2 and the
    embedded index by default, with no step by hand in between."""
    client = stack.client(subject="recall-1")
    written = client.call(
        "POST",
        "/v1/subjects/recall-1/memories",
        body={
            "request_id": "rc-1",
            "kind": "semantic",
            "content": "The nightly invoice export runs at 02:00 UTC from the billing cluster",
            "source": {"type": "user_statement", "ref": "e2e"},
            "consent": True,
        },
    )
    assert written.status == 201, written.body
    memory_id = written.body["memory_id"]
    query = {"query": "when does the invoice export run?"}

    found = _poll(lambda: client.call("POST", "/v1/subjects/recall-1/recall", body=query))
    assert [i["memory"]["memory_id"] for i in found.body["items"]] == [memory_id]
    assert "total;dur=" in found.headers.get("Server-Timing", "")
    assert found.body["items"][0]["why"]["matched_by"]
    assert (
        client.call("GET", f"/v1/subjects/recall-1/memories/{memory_id}").body["index_status"]
        == "indexed"
    )

    assert client.call("DELETE", f"/v1/subjects/recall-1/memories/{memory_id}").status == 202
    after = client.call("POST", "/v1/subjects/recall-1/recall", body=query)
    assert after.status == 200 and after.body["items"] == []


def test_chinese_is_read_by_the_chinese_model_beside_the_english_one(
    stack: RunningStack,
) -> None:
    """``make install`` installs bge-small-zh-v1.5, so the stack routes Chinese to it: a
    Chinese memory gets its vector and a Chinese query searches it (the trace counts the
    Chinese model's candidates); an English query does not."""
    from memvault_local.local_index import CHINESE_MODEL, chinese_model_for

    if chinese_model_for("e5-small-v2") != CHINESE_MODEL:
        pytest.skip("bge-small-zh-v1.5 is not installed here (make install installs it)")
    assert "embeddings: e5-small-v2 + bge-small-zh-v1.5" in stack.banner
    client = stack.client(subject="zh-1")
    base = "/v1/subjects/zh-1"
    _write_all(client, base, "zh", ("我喜欢喝乌龙茶 常买台湾的冻顶乌龙", "I cycle on Tuesdays"))
    found = _poll(lambda: client.call("POST", f"{base}/recall", body={"query": "我平时喝什么茶"}))
    assert found.body["items"][0]["memory"]["content"].startswith("我喜欢喝乌龙茶")
    trace = client.call("GET", f"/v1/recalls/{found.body['recall_id']}")
    assert trace.status == 200, trace.body
    assert trace.body["candidates"]["vector_zh"] >= 1
    english = client.call("POST", f"{base}/recall", body={"query": "how do I get to work?"})
    trace = client.call("GET", f"/v1/recalls/{english.body['recall_id']}")
    assert "vector_zh" not in trace.body["candidates"]
    # Emoji or punctuation alone hold nothing to match, though e5's cosines with them pass
    # its floor: answered empty (they came back with every memory of the subject before).
    for nothing in ("\U0001f600", "\uff1f\uff01\u3002", "?!"):
        answer = client.call("POST", f"{base}/recall", body={"query": nothing})
        assert answer.status == 200 and answer.body["items"] == [], nothing


def test_forgetting_a_subject_leaves_nothing_in_list_recall_export_or_index(
    stack: RunningStack,
) -> None:
    client = stack.client(subject="forget-1")
    base = "/v1/subjects/forget-1"
    secret = "Lumo the cat sleeps on the blue radiator shelf"
    _write_all(client, base, "fg", (secret, "Forget-1 prefers window seats on trains"))
    _poll(lambda: client.call("POST", f"{base}/recall", body={"query": "where does the cat sleep"}))

    forgotten = client.call("DELETE", f"{base}/memories")
    assert forgotten.status == 202
    job = _until(
        lambda: client.call("GET", f"/v1/deletions/{forgotten.body['deletion_id']}"),
        lambda answer: answer.body["status"] in ("COMPLETED", "FAILED"),
    )

    assert job.body["status"] == "COMPLETED", job.body
    assert client.call("GET", f"{base}/memories").body["items"] == []
    assert client.call("GET", f"{base}/export").body["memories"] == []
    recall = client.call("POST", f"{base}/recall", body={"query": "where does the cat sleep"})
    assert recall.status == 200 and recall.body["items"] == []
    folder = stack.home / "data" / "index"
    on_disk = b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())
    # "radiat" is also the stemmed token the full-text index held for "radiator".
    assert b"radiat" not in on_disk and b"window seats" not in on_disk
    assert b"forget-1" in on_disk  # its tombstones (ids only) are there


def _write_all(client: Any, base: str, prefix: str, contents: tuple[str, ...]) -> None:
    """Each of ``contents`` as a semantic memory of the subject at ``base``."""
    for n, content in enumerate(contents):
        written = client.call(
            "POST",
            f"{base}/memories",
            body={
                "request_id": f"{prefix}-{n}",
                "kind": "semantic",
                "content": content,
                "source": {"type": "user_statement", "ref": "e2e"},
                "consent": True,
            },
        )
        assert written.status == 201, written.body


def _until(ask: Any, done: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        answer = ask()
        if answer.status == 200 and done(answer):
            return answer
        assert time.monotonic() < deadline, answer.body
        time.sleep(0.1)


def _poll(ask: Any, timeout: float = 60.0) -> Any:
    return _until(ask, lambda answer: bool(answer.body["items"]), timeout)


def test_ctrl_c_stops_everything_cleanly(stack: RunningStack) -> None:
    stack.process.send_signal(signal.SIGINT)
    out = stack.finish(timeout=30)
    assert stack.process.returncode == 0
    assert "memvault stopped." in out
    assert not (stack.home / "run.json").exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(stack.url.rsplit(":", 1)[1])), timeout=2)


def test_the_stack_can_use_another_dynamodb_endpoint(tmp_path: Path) -> None:
    """MEMVAULT_DYNAMODB_ENDPOINT points the stack at another DynamoDB-compatible server
    (here a second moto server) instead of starting its own."""
    import boto3
    from moto.server import ThreadedMotoServer

    other = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    other.start()
    endpoint = f"http://127.0.0.1:{other._server.server_port}"  # type: ignore[union-attr]
    home = tmp_path / "home"
    started = start_stack(
        home,
        MEMVAULT_DYNAMODB_ENDPOINT=endpoint,
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="x",
        AWS_DEFAULT_REGION="us-east-1",
    )
    process, banner, url = started.process, started.banner, started.url
    try:
        assert f"DynamoDB at {endpoint}" in banner
        assert "moto at" not in banner
        client = ApiClient(url, DevKey.load_or_create(home).mint(tenant="t", subject="s"))
        written = client.call(
            "POST",
            "/v1/subjects/s/memories",
            body={
                "request_id": "ep-1",
                "kind": "semantic",
                "content": "Stored elsewhere",
                "source": {"type": "user_statement"},
                "consent": True,
            },
        )
        assert written.status == 201
        ddb = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
        items = ddb.scan(TableName="memvault-memory")["Items"]
        assert any(i.get("memory_id", {}).get("S") == written.body["memory_id"] for i in items)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        other.stop()


def test_a_banner_sent_to_a_pipe_prints_no_token_nor_console_key(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A probe found a one-hour token and the console's sign-in key in a log file the
    banner had been redirected to. Away from a terminal, neither is printed: the key is
    in a file of the home only its owner reads, and tokens come from `memvault dev-token`."""
    home = tmp_path_factory.mktemp("memvault-quiet-home")
    quiet = start_stack(home, MEMVAULT_SHOW_CREDENTIALS="0")
    try:
        key_file = home / "console-sign-in-key"
        key = key_file.read_text().strip()
        assert len(key) >= 24 and key not in quiet.banner
        assert key_file.stat().st_mode & 0o777 == 0o600
        assert "Bearer" not in quiet.banner and "eyJ" not in quiet.banner
        assert str(key_file) in quiet.banner and "memvault dev-token" in quiet.banner
        quiet.interrupt()  # a clean stop (Ctrl-C) removes the key's file
    finally:
        quiet.stop()
    assert not key_file.exists()
