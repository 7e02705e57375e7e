"""Time from a delete request to its job reaching COMPLETED, on the local stack.

The stack purges in the background, as a Step Functions execution would on AWS, with
every step of the pipeline (artifacts, primary, versions, index tombstone, cache,
sessions, runs). Each memory is written and indexed first; the clock starts when the
DELETE is sent and stops when ``GET /v1/deletions/{id}`` first answers COMPLETED
(polled every 20 ms, so figures carry up to 20 ms of polling granularity).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cleanup import drop_indexes
from recall_eval import stack_env

from memvault_local.evaluation import percentile
from memvault_local.process import start_stack

DELETES = 40


def run(opensearch_url: str = "http://127.0.0.1:9200") -> dict[str, Any]:
    env = stack_env("opensearch", opensearch_url)
    alias = env["MEMVAULT_SEARCH_ALIAS"]
    with tempfile.TemporaryDirectory() as home:
        stack = start_stack(Path(home), **env)
        try:
            client = stack.client("bench", "del-1")
            ids = []
            for n in range(DELETES):
                written = client.call(
                    "POST",
                    "/v1/subjects/del-1/memories",
                    body={
                        "request_id": f"d-{n}",
                        "kind": "episodic",
                        "content": f"Delivery note {n}: parcel left with the neighbour at {n}:00",
                        "source": {"type": "user_statement", "ref": "bench"},
                        "consent": True,
                    },
                )
                assert written.status == 201, written.body
                ids.append(written.body["memory_id"])
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                last = client.call("GET", f"/v1/subjects/del-1/memories/{ids[-1]}")
                if last.body.get("index_status") == "indexed":
                    break
                time.sleep(0.2)
            times: list[float] = []
            for memory_id in ids:
                started = time.perf_counter()
                deleted = client.call("DELETE", f"/v1/subjects/del-1/memories/{memory_id}")
                assert deleted.status == 202, deleted.body
                while True:
                    status = client.call("GET", f"/v1/deletions/{deleted.body['deletion_id']}")
                    if status.body["status"] in ("COMPLETED", "FAILED"):
                        break
                    time.sleep(0.02)
                assert status.body["status"] == "COMPLETED", status.body
                times.append((time.perf_counter() - started) * 1000)
        except Exception:
            print("".join(list(stack.output)[-20:]), file=sys.stderr)
            raise
        finally:
            stack.stop()
            drop_indexes(opensearch_url, alias)
    return {
        "deletes": len(times),
        "request_to_completed_ms": {
            "p50": round(percentile(times, 50), 1),
            "p95": round(percentile(times, 95), 1),
            "max": round(max(times), 1),
        },
    }


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:2]), indent=2))
