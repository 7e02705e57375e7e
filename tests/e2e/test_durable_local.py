"""The embedded store as a user relies on it, proved against a real `memvault run`
subprocess over HTTP on loopback: a restart keeps everything, a `kill -9` loses nothing
that was acknowledged, concurrent writers are kept apart by the store's transactions on
the threaded server, and a forgotten subject leaves no byte on disk (issue 13, "What it
must show")."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import socket
import sqlite3
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memvault.search.embedded import EmbeddedIndex
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.schema import MIGRATIONS
from memvault_local.client import ApiClient, ApiResponse
from memvault_local.devkeys import DevKey
from memvault_local.doctor import doctor
from memvault_local.process import RunningStack, free_port, start_stack
from tests.support import reliability
from tests.support.backends import STORES
from tests.support.markers import marker as new_marker
from tests.support.moto_server import serial_moto

#: The hashing embedder keeps these tests fast; nothing here is about ranking quality.
EMBEDDING_MODEL = "hashing"
SCOPES = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write"
TENANT = "local"


def _start(home: Path) -> RunningStack:
    return start_stack(home, MEMVAULT_EMBEDDING_MODEL=EMBEDDING_MODEL)


@pytest.fixture(params=STORES)
def race_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningStack]:
    """The stack for the HTTP races, on each store adapter: the embedded store, and the
    DynamoDB adapter against a moto server that answers one request at a time (moto is
    not atomic under threads; see ``tests/support/moto_server.py``). moto ignores TTL,
    IAM conditions and transaction tokens, none of which these races rely on."""
    home = tmp_path / "home"
    if request.param == "sqlite":
        stack = _start(home)
        try:
            yield stack
        finally:
            stack.stop()
        return
    with serial_moto(free_port()) as endpoint:
        stack = start_stack(
            home,
            MEMVAULT_EMBEDDING_MODEL=EMBEDDING_MODEL,
            MEMVAULT_DYNAMODB_ENDPOINT=endpoint,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        try:
            assert f"DynamoDB at {endpoint}" in stack.banner
            yield stack
        finally:
            stack.stop()


def _client(stack: RunningStack, subject: str) -> ApiClient:
    return ApiClient(stack.url, _token(stack, subject))


def _token(stack: RunningStack, subject: str) -> str:
    return DevKey.load_or_create(stack.home).mint(tenant=TENANT, subject=subject, scope=SCOPES)


def _memory(request_id: str, content: str, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "kind": "semantic",
        "content": content,
        "source": {"type": "user_statement", "ref": "e2e-durable"},
        "consent": True,
        **fields,
    }


def _until(
    ask: Callable[[], ApiResponse], done: Callable[[ApiResponse], bool], timeout: float = 60.0
) -> ApiResponse:
    """Ask until ``done`` holds, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = ask()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, (answer.status, answer.body)
        time.sleep(0.1)


def _completed(api: ApiClient, deletion_id: str) -> ApiResponse:
    job = _until(
        lambda: api.call("GET", f"/v1/deletions/{deletion_id}"),
        lambda a: a.status == 200 and a.body["status"] in ("COMPLETED", "FAILED"),
    )
    assert job.body["status"] == "COMPLETED", job.body
    return job


def _recalled(api: ApiClient, subject: str, query: str, mode: str = "hybrid") -> list[str]:
    body = {"query": query, "mode": mode}
    answer = api.call("POST", f"/v1/subjects/{subject}/recall", body=body)
    assert answer.status == 200, answer.body
    return [item["memory"]["memory_id"] for item in answer.body["items"]]


def _upload(api: ApiClient, subject: str, request_id: str, data: bytes) -> str:
    """Start an upload, PUT the bytes to the returned URL, commit: the artifact's id."""
    started = api.call(
        "POST",
        f"/v1/subjects/{subject}/artifacts",
        body={
            "request_id": request_id,
            "media_type": "text/plain",
            "size_bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        },
    )
    assert started.status == 201, started.body
    upload = started.body["upload"]
    assert upload["url"].startswith("http://127.0.0.1:")
    put = urllib.request.Request(upload["url"], data=data, method="PUT", headers=upload["headers"])
    with urllib.request.urlopen(put, timeout=30) as answer:
        assert answer.status == 200
    artifact_id: str = started.body["artifact_id"]
    committed = api.call("POST", f"/v1/subjects/{subject}/artifacts/{artifact_id}/commit")
    assert (committed.status, committed.body["state"]) == (200, "COMMITTED"), committed.body
    return artifact_id


def _download(api: ApiClient, subject: str, artifact_id: str) -> bytes:
    read = api.call("GET", f"/v1/subjects/{subject}/artifacts/{artifact_id}")
    assert read.status == 200, read.body
    with urllib.request.urlopen(read.body["download"]["url"], timeout=30) as answer:
        data: bytes = answer.read()
        return data


class Conn:
    """One HTTP/1.1 connection of one client thread, opened before the thread is released."""

    def __init__(self, stack: RunningStack, token: str) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
        self.http.connect()
        self.token = token

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        self.http.request(method, path, body=data, headers=headers)
        answer = self.http.getresponse()
        raw = answer.read()
        return answer.status, json.loads(raw) if raw else None, dict(answer.getheaders())

    def close(self) -> None:
        self.http.close()


def _race(
    stack: RunningStack, token: str, count: int, request: Callable[[Conn, int], Any]
) -> tuple[list[Any], float]:
    """``count`` threads, each with its own open connection, released together by a
    barrier; each makes one request. Their answers in thread order, and the wall time."""
    conns = [Conn(stack, token) for _ in range(count)]
    barrier = threading.Barrier(count + 1)
    answers: list[Any] = [None] * count

    def client(n: int) -> None:
        barrier.wait(timeout=30)
        try:
            answers[n] = request(conns[n], n)
        except Exception as err:  # reported in the answers, asserted by the caller
            answers[n] = ("error", repr(err))

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=30)
    started = time.monotonic()
    for thread in threads:
        thread.join(timeout=90)
    elapsed = time.monotonic() - started
    assert not any(t.is_alive() for t in threads), "a client thread never got its answer"
    for conn in conns:
        conn.close()
    return answers, elapsed


def _files(folder: Path) -> Iterator[Path]:
    return (p for p in sorted(folder.rglob("*")) if p.is_file())


def _where(folder: Path, needles: dict[str, bytes]) -> list[str]:
    """Every (file, needle, offset) where a needle's bytes occur under ``folder``."""
    found = []
    for path in _files(folder):
        data = path.read_bytes()
        for name, needle in needles.items():
            at = data.find(needle)
            while at != -1:
                found.append(f"{path.relative_to(folder)}: {name} at byte {at}")
                at = data.find(needle, at + 1)
    return found


# ------------------------------------------------------------------ 1. restart keeps all


def _snapshot(api: ApiClient, subject: str, ids: dict[str, str]) -> dict[str, Any]:
    """Every read of what the scenario wrote, as (status, body)."""
    base = f"/v1/subjects/{subject}"
    reads = {
        "memory tz": f"{base}/memories/{ids['tz']}",
        "memory tea": f"{base}/memories/{ids['tea']}",
        "memory deleted": f"{base}/memories/{ids['deleted']}",
        "history tz": f"{base}/memories/{ids['tz']}/history",
        "list": f"{base}/memories",
        "list superseded": f"{base}/memories?status=superseded",
        "export": f"{base}/export",
        "session": f"{base}/sessions/{ids['session']}",
        "run": f"/v1/runs/{ids['run']}",
        "artifact": f"{base}/artifacts/{ids['artifact']}",
        "deletion": f"/v1/deletions/{ids['deletion']}",
    }
    out: dict[str, Any] = {}
    for name, path in reads.items():
        answer = api.call("GET", path)
        body = answer.body
        # Legitimately fresh on every read: the export's own timestamp, and the download
        # URL, signed anew (with a new expiry) each time; its bytes are compared below.
        if name == "export":
            body = {k: v for k, v in body.items() if k != "exported_at"}
        if name == "artifact":
            body = {k: v for k, v in body.items() if k != "download"}
        out[name] = (answer.status, body)
    return out


def test_a_restart_on_the_same_home_keeps_every_record_and_the_index(tmp_path: Path) -> None:
    """Given memories with a correction chain, a session, a run with checkpoints and an
    operation, an artifact and a completed deletion, when the stack is stopped with
    Ctrl-C and started again on the same home, then every read answers the same, recall
    finds the memories with no reindex, and the artifact downloads the same bytes."""
    home = tmp_path / "home"
    stack = _start(home)
    subject = "keep-1"
    api = _client(stack, subject)
    base = f"/v1/subjects/{subject}"
    ids: dict[str, str] = {}
    try:
        tz = api.call(
            "POST",
            f"{base}/memories",
            body=_memory("keep-tz", "Works in the Asia/Shanghai time zone", canonical_key="tz"),
        )
        assert tz.status == 201, tz.body
        ids["tz"] = tz.body["memory_id"]
        corrected = api.call(
            "PATCH",
            f"{base}/memories/{ids['tz']}",
            body={"expected_version": 1, "content": "Works in the Europe/Berlin time zone"},
        )
        assert (corrected.status, corrected.body["version"]) == (200, 2), corrected.body
        ids["tz"] = corrected.body["memory_id"]
        tea = api.call(
            "POST",
            f"{base}/memories",
            body=_memory("keep-tea", "Prefers green tea over coffee in the afternoon"),
        )
        assert tea.status == 201, tea.body
        ids["tea"] = tea.body["memory_id"]
        doomed = api.call(
            "POST", f"{base}/memories", body=_memory("keep-gone", "Parks on level three")
        )
        assert doomed.status == 201, doomed.body
        ids["deleted"] = doomed.body["memory_id"]
        deleted = api.call("DELETE", f"{base}/memories/{ids['deleted']}")
        assert deleted.status == 202, deleted.body
        ids["deletion"] = deleted.body["deletion_id"]
        _completed(api, ids["deletion"])

        ids["session"] = "sess-keep-1"
        for n, (role, text) in enumerate(
            [("user", "Book the Berlin trip"), ("assistant", "Which dates?"), ("user", "May")]
        ):
            appended = api.call(
                "POST",
                f"{base}/sessions/{ids['session']}/messages",
                body={"request_id": f"msg-{n}", "role": role, "content": text},
            )
            assert appended.status == 201, appended.body

        ids["run"] = "run-keep-1"
        created = api.call(
            "PUT",
            f"/v1/runs/{ids['run']}",
            body={"subject_id": subject, "plan_version": "p1", "budget": {"tokens": 1000}},
        )
        assert created.status == 201, created.body
        for version, step in ((1, "search"), (2, "summarise")):
            advanced = api.call(
                "POST",
                f"/v1/runs/{ids['run']}/checkpoints",
                body={
                    "expected_version": version,
                    "status": "RUNNING",
                    "step": step,
                    "state": {"cursor": version, "seen": ["a", "b"][:version]},
                },
            )
            assert (advanced.status, advanced.body["version"]) == (200, version + 1)
        recorded = api.call(
            "PUT",
            f"/v1/runs/{ids['run']}/operations/send-mail-1",
            body={"status": "COMMITTED", "result_ref": "mail:outbox/42"},
        )
        assert recorded.status == 200, recorded.body

        data = b"a transcript too large for a memory\n" * 300 + uuid.uuid4().bytes
        ids["artifact"] = _upload(api, subject, "keep-art", data)

        # The indexer has caught up, so no read can legitimately change from here on.
        for path in (f"{base}/memories/{ids['tz']}", f"{base}/memories/{ids['tea']}"):
            _until(
                partial(api.call, "GET", path),
                lambda a: a.body.get("index_status") == "indexed",
            )
        recalled_before = {
            q: _recalled(api, subject, q) for q in ("Berlin time zone", "green tea afternoon")
        }
        assert recalled_before == {
            "Berlin time zone": [ids["tz"]],
            "green tea afternoon": [ids["tea"]],
        }
        before = _snapshot(api, subject, ids)
        assert before["memory deleted"][0] == 404
        assert before["deletion"][1]["status"] == "COMPLETED"
        assert [m["version"] for m in before["history tz"][1]["versions"]] == [1, 2]
        assert [m["seq"] for m in before["session"][1]["messages"]] == [1, 2, 3]
        assert before["run"][1]["version"] == 3
        assert _download(api, subject, ids["artifact"]) == data

        stopped = stack.interrupt(timeout=30)
        assert stack.process.returncode == 0, stopped
        assert "memvault stopped." in stopped

        stack = _start(home)
        api = _client(stack, subject)
        after = _snapshot(api, subject, ids)
        for name in before:
            assert after[name] == before[name], name
        # No reindex ran: the index the first run wrote is the one recall reads.
        for query, memory_ids in recalled_before.items():
            assert _recalled(api, subject, query) == memory_ids, query
        assert _download(api, subject, ids["artifact"]) == data
    finally:
        stack.stop()


# ------------------------------------------------------------------ 2. a crash loses nothing


@dataclass
class _Writer:
    """One client thread writing memories on its own connection until told to stop."""

    number: int
    conn: Conn
    subject: str
    acknowledged: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    in_flight: tuple[str, dict[str, Any]] | None = None
    refused: list[tuple[int, Any]] = field(default_factory=list)
    ended_by: str = ""

    def run(self, stop: threading.Event, limit: int = 20_000) -> None:
        for n in range(limit):
            if stop.is_set():
                self.ended_by = "stop"
                return
            request_id = f"w{self.number}-{n}"
            body = _memory(
                request_id,
                f"Crash note {_word(self.number, n)} from writer {self.number} number {n}",
                kind="episodic",
            )
            self.in_flight = (request_id, body)
            try:
                status, answer, _ = self.conn.call(
                    "POST", f"/v1/subjects/{self.subject}/memories", body
                )
            except (OSError, http.client.HTTPException) as err:
                self.ended_by = type(err).__name__
                return
            self.in_flight = None
            if status == 201:
                self.acknowledged[request_id] = (answer["memory_id"], body)
            else:
                self.refused.append((status, answer))
        self.ended_by = "limit"


def _word(writer: int, n: int) -> str:
    """A word no other memory holds, so that one recall finds exactly that memory."""
    return f"zq{writer}x{n}k"


def _page_size(db: Path) -> int:
    raw = sqlite3.connect(db)
    try:
        return int(raw.execute("PRAGMA page_size").fetchone()[0])
    finally:
        raw.close()


def test_a_store_with_4_kb_pages_is_rewritten_in_8_kb_ones_at_start_keeping_everything(
    tmp_path: Path,
) -> None:
    """Given a store made before memvault gave new files 8 KB pages (4 KB: a memory's row
    overflows into a page of its own), when `memvault run` starts on it, then it says it
    rewrites the file once, the file has 8 KB pages, and every memory reads back and is
    recalled as before."""
    home = tmp_path / "home"
    db = home / "data" / "memvault.db"
    subject = "pages-1"
    stack = _start(home)
    try:
        api = _client(stack, subject)
        made = api.call(
            "POST",
            f"/v1/subjects/{subject}/memories",
            body=_memory("pages-tea", "Prefers green tea over coffee in the afternoon"),
        )
        assert made.status == 201, made.body
        memory_id = made.body["memory_id"]
        _until(
            lambda: api.call("GET", f"/v1/subjects/{subject}/memories/{memory_id}"),
            lambda r: r.status == 200 and r.body["index_status"] == "indexed",
        )
    finally:
        stack.stop()
    assert _page_size(db) == 8192
    raw = sqlite3.connect(db, isolation_level=None)
    for statement in ("journal_mode=DELETE", "page_size=4096"):
        raw.execute(f"PRAGMA {statement}")
    raw.execute("VACUUM")
    raw.execute("PRAGMA journal_mode=WAL")
    raw.close()
    assert _page_size(db) == 4096

    stack = _start(home)
    try:
        assert "rewriting its 4 KB pages as 8 KB ones" in stack.banner, stack.banner
        api = _client(stack, subject)
        again = api.call("GET", f"/v1/subjects/{subject}/memories/{memory_id}")
        assert again.status == 200, again.body
        assert again.body["content"] == "Prefers green tea over coffee in the afternoon"
        assert _recalled(api, subject, "green tea afternoon") == [memory_id]
    finally:
        stack.stop()
    assert _page_size(db) == 8192


def test_a_kill_9_while_four_clients_write_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Given 4 client threads writing memories concurrently, when the stack is killed
    with SIGKILL mid-stream and started again on the same home, then every write that
    was answered 201 is there: its request id replays to the same memory, it reads back,
    recall catches up, and `memvault doctor` finds every invariant holding."""
    home = tmp_path / "home"
    stack = _start(home)
    subject = "crash-1"
    token = _token(stack, subject)
    writers = [_Writer(n, Conn(stack, token), subject) for n in range(4)]
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in writers]
    try:
        started = time.monotonic()
        for thread in threads:
            thread.start()
        # Mid-stream: every writer has had writes acknowledged and is still writing, and
        # (when it can be caught, for up to 10 s) the indexer is behind the change feed.
        database = home / "data" / "memvault.db"
        deadline = started + 60
        while time.monotonic() < deadline:
            counts = [len(w.acknowledged) for w in writers]
            running = time.monotonic() - started
            if min(counts) >= 25 and running >= 3 and (_backlog(database) or running >= 10):
                break
            assert all(t.is_alive() for t in threads), [w.ended_by for w in writers]
            time.sleep(0.05)
        assert all(t.is_alive() for t in threads), "the writers must still be writing"
        stack.kill9()
        killed_after = time.monotonic() - started
        for thread in threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        stop.set()
        assert all(w.ended_by not in ("", "stop", "limit") for w in writers), [
            w.ended_by for w in writers
        ]
        assert [w.refused for w in writers] == [[], [], [], []]
        acknowledged = {k: v for w in writers for k, v in w.acknowledged.items()}
        in_flight = [w.in_flight for w in writers if w.in_flight is not None]
        print(
            f"\nkill -9 after {killed_after:.1f}s: {len(acknowledged)} writes acknowledged "
            f"({[len(w.acknowledged) for w in writers]} per writer), {len(in_flight)} in flight"
        )
        assert len(acknowledged) >= 100
        print(f"changes not yet delivered to the indexer at the kill: {_backlog(database)}")

        stack = _start(home)
        api = _client(stack, subject)
        base = f"/v1/subjects/{subject}/memories"
        not_yet_indexed = 0
        lost: list[str] = []  # acknowledged, then not read back as written
        doubled: list[str] = []  # a replay that stored a second memory
        for request_id, (memory_id, body) in acknowledged.items():
            read = api.call("GET", f"{base}/{memory_id}")
            if read.status != 200 or read.body.get("content") != body["content"]:
                lost.append(request_id)
                continue
            not_yet_indexed += read.body["index_status"] != "indexed"
            replay = api.call("POST", base, body=body)
            if (replay.status, replay.body.get("memory_id")) != (201, memory_id) or replay.headers[
                "Idempotent-Replay"
            ] != "true":
                doubled.append(request_id)
        reliability.record(
            "kill-9-while-writing",
            category="durability",
            fault="SIGKILL of the local stack while 4 clients write, then a restart",
            oracle="every write answered 201 reads back as written; its replay is the same "
            "memory; doctor finds every invariant",
            seeds=1,
            operations=len(acknowledged),
            violations=len(lost) + len(doubled),
            store="sqlite",
            details={"lost": len(lost), "duplicated": len(doubled), "in_flight": len(in_flight)},
        )
        assert lost == [] and doubled == [], (lost, doubled)
        # A write cut off by the kill either committed whole or not at all: now it is one
        # memory, whether its replay found it or wrote it.
        committed_in_flight = 0
        for request_id, body in in_flight:
            replay = api.call("POST", base, body=body)
            assert replay.status == 201, (request_id, replay.body)
            assert api.call("GET", f"{base}/{replay.body['memory_id']}").status == 200
            committed_in_flight += replay.headers["Idempotent-Replay"] == "true"

        # Recall catches up from the durable cursor: every acknowledged memory is found.
        missing = {body["content"].split()[2]: mid for mid, body in acknowledged.values()}
        restarted = time.monotonic()
        while missing:
            for word, memory_id in list(missing.items()):
                # By keyword: the word is the memory's own. The test stack's hashing
                # embedder can cancel it out (``zq2x122k`` and ``122`` share a bucket with
                # opposite signs), leaving hybrid recall to rank the one keyword hit
                # among dozens of vector ties; that is ranking, not what this test checks.
                if memory_id in _recalled(api, subject, word, mode="keyword"):
                    del missing[word]
            if missing and time.monotonic() > restarted + 120:
                raise AssertionError(_never_recalled(api, base, missing, database, stack))
        print(
            f"after restart: {not_yet_indexed} acknowledged not yet indexed at first read, "
            f"{committed_in_flight}/{len(in_flight)} in-flight writes had committed, all "
            f"{len(acknowledged)} recalled {time.monotonic() - restarted:.1f}s after the replays"
        )
        listed = api.call("GET", base, query={"limit": 100})
        assert listed.status == 200

        stopped = stack.interrupt(timeout=30)
        assert stack.process.returncode == 0, stopped
        data = home / "data"
        assert not (data / "index-failures.jsonl").exists()  # no change was dropped
        logs = list((data / "index").glob("*.sqlite3"))
        assert len(logs) == 1, logs  # the index the stack used, reopened from its file
        index = EmbeddedIndex(logs[0].stem, logs[0].parent)
        assert len(index.documents(TENANT)) >= len(acknowledged)
        db = Database(data / "memvault.db", MIGRATIONS)
        try:
            report = io.StringIO()
            assert doctor(db, index, report) == 0, report.getvalue()
            assert "every invariant holds" in report.getvalue()
        finally:
            db.close()
        # The check is not vacuous: the same doctor on a copy with one broken chain head.
        _assert_doctor_sees_a_broken_chain(data / "memvault.db", tmp_path / "broken.db")
    finally:
        stop.set()
        stack.stop()


def _never_recalled(
    api: ApiClient, base: str, missing: dict[str, str], database: Path, stack: RunningStack
) -> str:
    """What to look at when recall never caught up: each missing memory's index status,
    what one recall of its word answered, the indexer's backlog and the stack's log."""
    lines = [f"{len(missing)} never recalled; backlog {_backlog(database)}"]
    for word, memory_id in list(missing.items())[:5]:
        read = api.call("GET", f"{base}/{memory_id}")
        found = api.call(
            "POST", f"{base.rsplit('/', 1)[0]}/recall", body={"query": word, "mode": "keyword"}
        )
        lines.append(
            f"{memory_id} ({word}): {read.status} index_status="
            f"{read.body.get('index_status')} version={read.body.get('version')}; recall "
            f"answered {found.status} with {len(found.body.get('items', []))} items, "
            f"trace {found.body.get('recall_id')}"
        )
        trace = api.call("GET", f"/v1/recalls/{found.body.get('recall_id')}")
        lines.append(f"  trace {trace.status}: candidates {trace.body.get('candidates')}")
        lines.append(f"  index files: {_indexed_rows(database.parent.parent, memory_id, word)}")
    # Metric lines say nothing here; the rest of the log does.
    log = [line for line in stack.output if not line.startswith('{"_aws"')]
    lines.append("stack log (last lines):\n" + "".join(log[-40:]))
    return "\n".join(lines)


def _indexed_rows(home: Path, memory_id: str, word: str) -> list[str]:
    """What each embedded index file under ``home`` holds for the memory, read only."""
    found = []
    for path in sorted(home.rglob("*.sqlite3")):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute(
                "SELECT d.doc_type, d.memory_version, d.version, b.words LIKE ?, b.vector IS NULL "
                "FROM docs d JOIN bodies b ON b.rid = d.rid WHERE d.memory_id = ?",
                (f"%{word}%", memory_id),
            ).fetchall()
        except sqlite3.Error as err:
            rows = [type(err).__name__]
        finally:
            conn.close()
        found.append(f"{path.name}: {rows}")
    return found


def _backlog(database: Path) -> int:
    """Changes in the outbox past the indexer's cursor, read without writing the file."""
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute(
            "SELECT COUNT(*) FROM outbox WHERE seq > COALESCE("
            "(SELECT position FROM feed_cursor WHERE consumer = 'indexer'), 0)"
        ).fetchone()
        return int(row[0])
    finally:
        conn.close()


def _assert_doctor_sees_a_broken_chain(source: Path, copy: Path) -> None:
    src, dst = sqlite3.connect(source), sqlite3.connect(copy)
    try:
        src.backup(dst)
        dst.execute(
            "UPDATE memory_chains SET current_version = current_version + 5 "
            "WHERE chain_id = (SELECT MIN(chain_id) FROM memory_chains)"
        )
        dst.commit()
    finally:
        src.close()
        dst.close()
    db = Database(copy, MIGRATIONS)
    try:
        report = io.StringIO()
        assert doctor(db, None, report) == 1, report.getvalue()
    finally:
        db.close()


# ------------------------------------------------------------------ 3. concurrency is real


def test_the_server_answers_while_another_request_is_still_being_read(tmp_path: Path) -> None:
    """The threads are real: a request whose body has not arrived holds one thread, and
    another client is answered meanwhile (a one-thread server would wait for the first)."""
    stack = _start(tmp_path / "home")
    try:
        with socket.create_connection(("127.0.0.1", stack.port), timeout=10) as slow:
            slow.sendall(
                b"POST /v1/subjects/user-1/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            health = ApiClient(stack.url, None, timeout=5).call("GET", "/v1/health")
            assert health.status == 200, health.body
    finally:
        stack.stop()


def test_64_clients_correcting_one_memory_at_one_version_make_exactly_one_version(
    race_stack: RunningStack,
) -> None:
    stack = race_stack
    subject = "race-1"
    api = _client(stack, subject)
    base = f"/v1/subjects/{subject}/memories"
    try:
        written = api.call("POST", base, body=_memory("race-1", "Likes the colour blue"))
        assert written.status == 201, written.body
        memory_id = written.body["memory_id"]

        def correct(conn: Conn, n: int) -> tuple[int, Any]:
            status, body, _ = conn.call(
                "PATCH",
                f"{base}/{memory_id}",
                {"expected_version": 1, "content": f"Likes the colour number {n}"},
            )
            return status, body

        answers, elapsed = _race(stack, _token(stack, subject), 64, correct)
        won = [n for n, (status, _) in enumerate(answers) if status == 200]
        lost = [b for status, b in answers if status == 409]
        print(f"\n64 PATCHes at version 1 answered in {elapsed:.2f}s: {len(won)} x 200")
        _record_race("64-clients-correct-one-memory", answers, won, lost)
        assert len(won) == 1, answers
        assert len(lost) == 63, answers
        assert {b["error"]["code"] for b in lost} == {"version_conflict"}
        # The details name the version that won, as the contract says.
        assert all(b["error"]["details"].get("current_version") == 2 for b in lost), lost[0]
        current = api.call("GET", f"{base}/{answers[won[0]][1]['memory_id']}")
        assert (current.body["version"], current.body["content"]) == (
            2,
            f"Likes the colour number {won[0]}",
        )
        history = api.call("GET", f"{base}/{memory_id}/history")
        assert [v["version"] for v in history.body["versions"]] == [1, 2]
    finally:
        stack.stop()


def test_64_workers_advancing_one_run_at_one_version_make_exactly_one_checkpoint(
    race_stack: RunningStack,
) -> None:
    stack = race_stack
    subject = "race-run-1"
    api = _client(stack, subject)
    run = "/v1/runs/run-race-1"
    try:
        created = api.call("PUT", run, body={"subject_id": subject, "plan_version": "p1"})
        assert created.status == 201, created.body

        def advance(conn: Conn, n: int) -> tuple[int, Any]:
            status, body, _ = conn.call(
                "POST",
                f"{run}/checkpoints",
                {"expected_version": 1, "status": "RUNNING", "step": f"worker-{n}"},
            )
            return status, body

        answers, elapsed = _race(stack, _token(stack, subject), 64, advance)
        won = [n for n, (status, _) in enumerate(answers) if status == 200]
        lost = [b for status, b in answers if status == 409]
        print(f"\n64 advances at version 1 answered in {elapsed:.2f}s: {len(won)} x 200")
        _record_race("64-workers-advance-one-run", answers, won, lost)
        assert len(won) == 1, answers
        assert len(lost) == 63, answers
        assert {b["error"]["code"] for b in lost} == {"version_conflict"}
        current = api.call("GET", run)
        assert (current.body["version"], current.body["step"]) == (2, f"worker-{won[0]}")
    finally:
        stack.stop()


def _record_race(name: str, answers: list[Any], won: list[int], lost: list[Any]) -> None:
    """One row: racers at one expected version; every answer but one must be a 409."""
    conflicts = [b for b in lost if b["error"]["code"] == "version_conflict"]
    reliability.record(
        name,
        category="uniqueness",
        fault=f"{len(answers)} concurrent HTTP clients at one expected version (a barrier)",
        oracle="exactly one 200, every other answer 409 version_conflict",
        seeds=1,
        operations=len(answers),
        violations=abs(len(won) - 1) + (len(answers) - 1 - len(conflicts) if won else 0),
        store="sqlite",
        details={"won": len(won), "version_conflict": len(conflicts)},
    )


def test_32_concurrent_appends_to_one_session_are_all_kept_in_order_once(
    race_stack: RunningStack,
) -> None:
    stack = race_stack
    subject = "race-sess-1"
    api = _client(stack, subject)
    path = f"/v1/subjects/{subject}/sessions/sess-race-1"
    try:

        def append(conn: Conn, n: int) -> tuple[int, Any]:
            status, _, headers = conn.call(
                "POST",
                f"{path}/messages",
                {"request_id": f"m-{n}", "role": "user", "content": f"message {n}"},
            )
            return status, headers.get("Idempotent-Replay")

        answers, elapsed = _race(stack, _token(stack, subject), 32, append)
        print(f"\n32 appends answered in {elapsed:.2f}s")
        assert answers == [(201, "false")] * 32
        session = api.call("GET", path)
        assert session.status == 200, session.body
        messages = session.body["messages"]
        assert session.body["message_count"] == 32
        assert [m["seq"] for m in messages] == list(range(1, 33))
        assert sorted(m["request_id"] for m in messages) == sorted(f"m-{n}" for n in range(32))
        assert all(m["content"] == f"message {m['request_id'][2:]}" for m in messages)
    finally:
        stack.stop()


# ------------------------------------------------------------------ 4. deleted means gone


def test_a_forgotten_subject_leaves_no_byte_of_its_content_on_disk(tmp_path: Path) -> None:
    """Given a unique marker in a subject's memories (two versions of one, and another),
    session messages and summary, run state and an operation, and an artifact's bytes,
    when the subject is forgotten and the purge reaches COMPLETED, then the marker is in
    no byte of any file under the home folder (data folder included: database, WAL,
    shared memory, index, objects), neither while the stack runs nor after Ctrl-C."""
    home = tmp_path / "home"
    stack = _start(home)
    subject = "gone-1"
    api = _client(stack, subject)
    base = f"/v1/subjects/{subject}"
    marker = f"MARKER-{new_marker(32)}"
    word = marker.split("-")[1]
    plaintext_line = f"artifact plaintext {new_marker(32)}\n".encode()
    artifact_data = (plaintext_line + f"the codename is {marker}\n".encode()) * 50
    needles = {"marker": marker.encode(), "artifact plaintext": plaintext_line.strip()}
    try:
        artifact_id = _upload(api, subject, "gone-art", artifact_data)
        first = api.call(
            "POST",
            f"{base}/memories",
            body=_memory(
                "gone-1",
                f"The vault codename is {marker}",
                canonical_key="codename",
                artifact_id=artifact_id,
            ),
        )
        assert first.status == 201, first.body
        second = api.call(
            "PATCH",
            f"{base}/memories/{first.body['memory_id']}",
            body={"expected_version": 1, "content": f"The vault codename is now {marker} (v2)"},
        )
        assert second.status == 200, second.body
        other = api.call(
            "POST", f"{base}/memories", body=_memory("gone-2", f"Backup phrase {marker}")
        )
        assert other.status == 201, other.body

        session = f"{base}/sessions/sess-gone-1"
        for n in range(3):
            appended = api.call(
                "POST",
                f"{session}/messages",
                body={"request_id": f"gm-{n}", "role": "user", "content": f"{n}: {marker}"},
            )
            assert appended.status == 201, appended.body
        summary = api.call(
            "PUT",
            f"{session}/summary",
            body={"content": f"They said {marker}", "from_seq": 1, "through_seq": 3},
        )
        assert summary.status == 200, summary.body

        run = "/v1/runs/run-gone-1"
        assert api.call("PUT", run, body={"subject_id": subject, "plan_version": "p1"}).ok
        advanced = api.call(
            "POST",
            f"{run}/checkpoints",
            body={
                "expected_version": 1,
                "status": "RUNNING",
                "step": "remember",
                "state": {"note": marker},
            },
        )
        assert advanced.status == 200, advanced.body
        recorded = api.call(
            "PUT", f"{run}/operations/op-gone", body={"status": "PENDING", "result_ref": marker}
        )
        assert recorded.status == 200, recorded.body

        # Indexed, so the index held the content too before the purge.
        _until(
            lambda: api.call("GET", f"{base}/memories/{other.body['memory_id']}"),
            lambda a: a.body.get("index_status") == "indexed",
        )
        _until(
            lambda: api.call("POST", f"{base}/recall", body={"query": word}),
            lambda a: len(a.body.get("items", [])) == 2,
        )
        # The scan finds the marker while it is held (so its silence later means gone).
        held = _where(home, needles)
        assert any("marker" in h for h in held), held

        forgotten = api.call("DELETE", f"{base}/memories")
        assert (forgotten.status, forgotten.body["scope"]) == (202, "subject"), forgotten.body
        job = _completed(api, forgotten.body["deletion_id"])
        copies = {c["copy"]: c["status"] for c in job.body["copies"]}
        for copy in ("artifacts", "primary", "versions", "index", "sessions", "runs"):
            assert copies[copy] == "DONE", job.body
        assert api.call("GET", session).status == 404
        assert api.call("GET", run).status == 404
        assert api.call("GET", f"{base}/artifacts/{artifact_id}").status == 404
        assert api.call("POST", f"{base}/recall", body={"query": word}).body["items"] == []
        objects = home / "data" / "objects" / TENANT / subject / artifact_id
        assert not objects.exists() or not any(_files(objects))
        # COMPLETED means gone already, while the stack still runs (what a kill -9 now
        # would leave): no old WAL frame, outbox row, index line or object keeps it.
        running = _where(home, needles)

        stopped = stack.interrupt(timeout=30)
        assert stack.process.returncode == 0, stopped
        after = _where(home, needles)
        reliability.record(
            "forget-leaves-no-byte-on-disk",
            category="deletion",
            fault="a subject's content in memories (2 versions), session and summary, run "
            "state and operation, an artifact and the index, then forget",
            oracle="no byte of any file under the home holds the content once the purge is "
            "COMPLETED, while running and after Ctrl-C",
            seeds=1,
            operations=2,
            violations=len(running) + len(after),
            store="sqlite",
            details={"files_holding_it_while_running": len(running), "after_stop": len(after)},
        )
        assert running == [] and after == [], (running, after)
        assert not (home / "data" / "index-failures.jsonl").exists()
    finally:
        stack.stop()
