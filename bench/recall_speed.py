"""Recall speed on the local stack with a real OpenSearch and 10,000 memories in one tenant.

The 10,000 memories (100 subjects x 100) are written straight into the stack's DynamoDB
(moto) in batches, as version items and chain heads shaped exactly as the service
writes them; the stream pump then indexes them with MiniLM, as it would any write.
Measured through the HTTP API:

- recall latency, server-side (``Server-Timing``: embed, search, validate, total) and
  as the client sees it on loopback, over 300 queries from the evaluation set;
- write to first appearance in recall: a new memory is written over HTTP, then recall is
  asked every 25 ms until the memory comes back.

On the local stack, "validate" is the batch read of the candidates from moto, whose
cost grows with the attributes of each item (about 1.7 ms per memory item here);
DynamoDB answers such a read in single-digit milliseconds.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from cleanup import drop_indexes
from recall_eval import stack_env

from memvault.storage import keys
from memvault.storage.dynamo import to_item
from memvault_local.evaluation import EvalSet, percentile
from memvault_local.process import start_stack

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "recall_eval.json"
TENANT = "bench"
SUBJECTS = 100
PER_SUBJECT = 100
QUERIES = 300
APPEARANCES = 12


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "n": len(values),
    }


def _items(contents: list[str], rng: random.Random) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    iso = lambda t: t.isoformat().replace("+00:00", "Z")  # noqa: E731
    out = []
    for s in range(SUBJECTS):
        subject = f"s-{s:03d}"
        for i in range(PER_SUBJECT):
            mid = f"mem_{uuid.uuid4().hex}"
            cid = f"chn_{uuid.uuid4().hex}"
            content = f"{rng.choice(contents)} (note {s}-{i})"
            pk = keys.subject_pk(TENANT, subject)
            expires = now + timedelta(days=90)
            out.append(
                {
                    "pk": pk,
                    "sk": keys.version_sk(mid),
                    "type": "memory",
                    "memory_id": mid,
                    "tenant_id": TENANT,
                    "subject_id": subject,
                    "chain_id": cid,
                    "kind": "semantic",
                    "canonical_key": None,
                    "content": content,
                    "tags": ["bench"],
                    "scope": {},
                    "source_type": "user_statement",
                    "source_ref": "bench",
                    "sensitivity": "internal",
                    "consent": True,
                    "confidence": None,
                    "visibility": [],
                    "status": "active",
                    "version": 1,
                    "valid_from": iso(now),
                    "expires_at": iso(expires),
                    "ttl": int(expires.timestamp()),
                    "supersedes_id": None,
                    "content_hash": uuid.uuid4().hex,
                    "index_status": "pending",
                    "embedding_model": None,
                    "artifact_id": None,
                    "request_id": None,
                    "created_by": "bench",
                    "created_at": iso(now),
                    "updated_at": iso(now),
                    "subject_epoch": 0,
                }
            )
            out.append(
                {
                    "pk": pk,
                    "sk": keys.chain_sk(cid),
                    "type": "chain",
                    "chain_id": cid,
                    "state": "live",
                    "current_memory_id": mid,
                    "current_version": 1,
                    "versions": [mid],
                    "subject_epoch": 0,
                }
            )
    return out


def _bulk_write(ddb: Any, table: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        requests = [{"PutRequest": {"Item": to_item(i)}} for i in items[start : start + 25]]
        pending: dict[str, Any] = {table: requests}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def _indexed(url: str, alias: str) -> int:
    import urllib.request

    with urllib.request.urlopen(f"{url}/{alias}/_count", timeout=10) as raw:  # noqa: S310
        return int(json.loads(raw.read())["count"])


def run(opensearch_url: str = "http://127.0.0.1:9200") -> dict[str, Any]:
    rng = random.Random(7)
    evalset = EvalSet.read(EVAL)
    contents = [m["content"] for m in evalset.memories]
    queries = [q["text"] for q in evalset.queries]
    # The sweeper's full-table scans (moto holds every other call while one runs) are
    # paused while the figures are taken; what is measured is the request path.
    env = stack_env("opensearch", opensearch_url) | {"MEMVAULT_SWEEP_SECONDS": "3600"}
    alias = env["MEMVAULT_SEARCH_ALIAS"]
    with tempfile.TemporaryDirectory() as home:
        stack = start_stack(Path(home), **env)
        try:
            endpoint = re.search(r"moto at (http://\S+):", stack.banner)
            assert endpoint, stack.banner
            ddb = boto3.client(
                "dynamodb",
                endpoint_url=endpoint.group(1),
                region_name="us-east-1",
                aws_access_key_id="local",
                aws_secret_access_key="local",
            )
            items = _items(contents, rng)
            started = time.monotonic()
            _bulk_write(ddb, "memvault-memory", items)
            loaded_s = time.monotonic() - started
            total = SUBJECTS * PER_SUBJECT
            while True:
                try:
                    count = _indexed(opensearch_url, alias)
                except OSError:
                    count = 0
                if count >= total:
                    break
                print(f"\r  indexed {count}/{total}", end="", file=sys.stderr, flush=True)
                time.sleep(2)
            indexed_s = time.monotonic() - started
            print(file=sys.stderr)
            # ... and until the indexer has recorded index_status on the last items.
            last = [i for i in items if i["sk"].startswith("MEM#")][-3:]
            while True:
                statuses = [
                    stack.client(TENANT, i["subject_id"])
                    .call("GET", f"/v1/subjects/{i['subject_id']}/memories/{i['memory_id']}")
                    .body.get("index_status")
                    for i in last
                ]
                if all(s == "indexed" for s in statuses):
                    break
                time.sleep(2)
            settled_s = time.monotonic() - started

            clients = {}
            server: dict[str, list[float]] = {}
            client_ms: list[float] = []
            returned: list[int] = []
            for n in range(QUERIES):
                subject = f"s-{rng.randrange(SUBJECTS):03d}"
                client = clients.get(subject) or clients.setdefault(
                    subject, stack.client(TENANT, subject)
                )
                t0 = time.perf_counter()
                answer = client.call(
                    "POST",
                    f"/v1/subjects/{subject}/recall",
                    body={"query": queries[n % len(queries)]},
                )
                client_ms.append((time.perf_counter() - t0) * 1000)
                assert answer.status == 200, answer.body
                returned.append(len(answer.body["items"]))
                for part in answer.headers.get("Server-Timing", "").split(","):
                    name, _, dur = part.strip().partition(";dur=")
                    if dur:
                        server.setdefault(name, []).append(float(dur))

            appear: list[float] = []
            writer = stack.client(TENANT, "s-writer")
            # moto copies every table on each transaction, so a write into a 20,000-item
            # table takes seconds here; the clock below starts when the write has returned.
            writer.timeout = 300
            write_ms: list[float] = []
            for n in range(APPEARANCES):
                colour = rng.choice(["red", "blue", "green"])
                text = f"Fresh fact {n}: the {colour} pipeline {uuid.uuid4().hex[:6]} moved to {n}"
                w0 = time.perf_counter()
                written = writer.call(
                    "POST",
                    "/v1/subjects/s-writer/memories",
                    body={
                        "request_id": f"appear-{n}",
                        "kind": "episodic",
                        "content": text,
                        "source": {"type": "user_statement", "ref": "bench"},
                        "consent": True,
                    },
                )
                assert written.status == 201, written.body
                write_ms.append((time.perf_counter() - w0) * 1000)
                t0 = time.perf_counter()
                while True:
                    found = writer.call(
                        "POST", "/v1/subjects/s-writer/recall", body={"query": text, "limit": 3}
                    )
                    if any(
                        i["memory"]["memory_id"] == written.body["memory_id"]
                        for i in found.body["items"]
                    ):
                        break
                    if time.perf_counter() - t0 > 30:
                        raise RuntimeError("a written memory did not appear within 30 s")
                    time.sleep(0.025)
                appear.append((time.perf_counter() - t0) * 1000)
        except Exception:
            print("".join(list(stack.output)[-20:]), file=sys.stderr)
            raise
        finally:
            stack.stop()
            drop_indexes(opensearch_url, alias)
    return {
        "memories": SUBJECTS * PER_SUBJECT,
        "subjects": SUBJECTS,
        "load_seconds": round(loaded_s, 1),
        "indexed_after_seconds": round(indexed_s, 1),
        "index_throughput_per_s": round(total / indexed_s, 1),
        "index_status_recorded_after_seconds": round(settled_s, 1),
        "recall_server_ms": {k: summary(v) for k, v in server.items()},
        "recall_client_roundtrip_ms": summary(client_ms),
        "recall_items_returned_median": statistics.median(returned),
        "write_to_first_recall_ms": summary(appear),
        "write_request_ms_on_moto": summary(write_ms),
    }


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:2]), indent=2))
