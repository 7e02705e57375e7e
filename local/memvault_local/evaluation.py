"""The recall evaluation set, loaded and scored through the HTTP API.

``load`` writes every memory of the set as its owner would, then applies its lifecycle
(supersede, delete, expire, leave as candidate); ``score`` asks every query in each
recall mode and reports recall@k per language, trap keys returned, and how many of the
queries about topics a subject never mentioned come back empty.

The caller supplies ``client_for(tenant, subject, agent_role, max_sensitivity)``
(``subject`` None: a reviewer's, acting for any subject with ``subjects:any``): an
object with ``call(method, path, body=...)`` answering ``.status``, ``.body`` and
``.headers`` (``memvault_local.client.ApiClient`` over HTTP, or an in-process stand-in).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

MODES = ("keyword", "vector", "hybrid")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


class Answer(Protocol):
    status: int
    body: Any
    headers: dict[str, str]


class Caller(Protocol):
    def call(self, method: str, path: str, *, body: Any = None) -> Any: ...


ClientFor = Callable[[str, str | None, str | None, str | None], Caller]


@dataclass(frozen=True)
class EvalSet:
    memories: list[dict[str, Any]]
    queries: list[dict[str, Any]]

    @classmethod
    def read(cls, path: str | Path) -> EvalSet:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(memories=data["memories"], queries=data["queries"])


def language(text: str) -> str:
    """``zh`` for Chinese or mixed text, ``en`` otherwise."""
    return "zh" if _CJK.search(text) else "en"


@dataclass
class Loaded:
    #: Eval key -> memory id the service assigned.
    ids: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _write_body(m: dict[str, Any]) -> dict[str, Any]:
    body = {
        "request_id": f"eval-{m['key']}",
        "kind": m["kind"],
        "content": m["content"],
        "tags": m["tags"],
        "scope": m["scope"],
        "source": m["source"],
        "sensitivity": m["sensitivity"],
        "consent": m["consent"],
        "visibility": m["visibility"],
        "ttl_seconds": m["ttl_seconds"],
    }
    if m.get("canonical_key"):
        body["canonical_key"] = m["canonical_key"]
    return body


def load(evalset: EvalSet, client_for: ClientFor, *, wait_indexed: float = 120.0) -> Loaded:
    """Write the set, apply lifecycles, wait for expiry and for the index to catch up."""
    started = time.monotonic()
    out = Loaded()
    expiring_until = 0.0
    for m in evalset.memories:
        # The writer's identity matches the provenance it claims: the subject's own token,
        # or for a reviewed memory a reviewer's (no subject: ``subjects:any``).
        reviewed = m["source"]["type"] == "human_review"
        client = client_for(m["tenant_id"], None if reviewed else m["subject_id"], None, "pii")
        path = f"/v1/subjects/{m['subject_id']}/memories"
        answer = client.call("POST", path, body=_write_body(m))
        if answer.status != 201:
            code = (answer.body or {}).get("error", {}).get("code", answer.status)
            out.refused[m["key"]] = str(code)
            continue
        out.ids[m["key"]] = answer.body["memory_id"]
        if m["lifecycle"] == "deleted":
            gone = client.call("DELETE", f"{path}/{out.ids[m['key']]}")
            if gone.status != 202:
                raise RuntimeError(f"could not delete {m['key']}: {gone.status}")
        elif m["lifecycle"] == "expired":
            expiring_until = time.monotonic() + m["ttl_seconds"] + 0.5
    # Superseded versions were replaced when their newer version (same key) was written.
    time.sleep(max(0.0, expiring_until - time.monotonic()))
    _wait_indexed(evalset, client_for, out, wait_indexed)
    out.seconds = time.monotonic() - started
    return out


def _wait_indexed(evalset: EvalSet, client_for: ClientFor, loaded: Loaded, timeout: float) -> None:
    """Until every active memory of the set reports ``index_status: indexed``."""
    pending = [m for m in evalset.memories if m["lifecycle"] == "active" and m["key"] in loaded.ids]
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        still = []
        for m in pending:
            role = m["visibility"][0] if m["visibility"] else None
            client = client_for(m["tenant_id"], m["subject_id"], role, "pii")
            got = client.call(
                "GET", f"/v1/subjects/{m['subject_id']}/memories/{loaded.ids[m['key']]}"
            )
            if got.status != 200 or got.body.get("index_status") != "indexed":
                still.append(m)
        pending = still
        if pending:
            time.sleep(0.5)
    if pending:
        keys = ", ".join(m["key"] for m in pending[:20])
        raise RuntimeError(
            f"{len(pending)} memories were not indexed within {timeout:.0f} s: {keys}"
        )


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def server_ms(headers: dict[str, str]) -> float | None:
    timing = headers.get("Server-Timing") or headers.get("server-timing") or ""
    match = re.search(r"total;dur=([0-9.]+)", timing)
    return float(match.group(1)) if match else None


def score(
    evalset: EvalSet,
    client_for: ClientFor,
    loaded: Loaded,
    modes: Iterable[str] = MODES,
    limit: int = 10,
) -> dict[str, Any]:
    """Per mode: recall@1, @5 and @10 and MRR by language, trap queries, empty answers,
    latency."""
    key_of = {v: k for k, v in loaded.ids.items()}
    report: dict[str, Any] = {}
    for mode in modes:
        tally = _ModeTally()
        for q in evalset.queries:
            answer = _ask_recall(client_for, q, mode, limit)
            took = server_ms(answer.headers)
            if took is not None:
                tally.latencies.append(took)
            got = [key_of.get(i["memory"]["memory_id"], "?") for i in answer.body["items"]]
            tally.add(q, got)
        report[mode] = tally.report()
    return report


def _ask_recall(client_for: ClientFor, q: dict[str, Any], mode: str, limit: int) -> Any:
    """The answer to one query of the set in ``mode``, as its asker; it must be a 200."""
    client = client_for(
        q["tenant_id"], q["subject_id"], q.get("agent_role"), q.get("max_sensitivity")
    )
    body: dict[str, Any] = {"query": q["text"], "limit": limit, "mode": mode}
    if q.get("scope"):
        body["scope"] = q["scope"]
    answer = client.call("POST", f"/v1/subjects/{q['subject_id']}/recall", body=body)
    if answer.status != 200:
        raise RuntimeError(f"{q['qid']}: recall answered {answer.status} {answer.body}")
    return answer


@dataclass
class _ModeTally:
    """What one recall mode's answers add up to, query by query."""

    #: Language (and "all") -> k (0: the reciprocal rank) -> one share per query.
    hits: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    traps: list[str] = field(default_factory=list)
    trap_keys: dict[str, list[str]] = field(default_factory=dict)
    empty_ok: int = 0
    empty_total: int = 0
    #: "Expect empty" queries answered with something, and answerable ones with nothing.
    not_empty: list[str] = field(default_factory=list)
    answered_empty: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def add(self, q: dict[str, Any], got: list[str]) -> None:
        """Count the eval keys ``got`` back for query ``q``, best first."""
        trapped = sorted(set(got[:10]) & set(q["must_not_return"]))
        if trapped:
            self.traps.append(q["qid"])
            self.trap_keys[q["qid"]] = trapped
        if q["expect_empty"]:
            self.empty_total += 1
            self.empty_ok += not got
            if got:
                self.not_empty.append(q["qid"])
            return
        if not got:
            self.answered_empty.append(q["qid"])
        relevant = set(q["relevant"])
        lang = language(q["text"])
        first = next((rank for rank, key in enumerate(got, 1) if key in relevant), None)
        for k in (1, 5, 10, 0):  # 0: the reciprocal rank of the first relevant item
            share = len(relevant & set(got[:k])) / len(relevant) if k else 1 / (first or math.inf)
            self.hits.setdefault(lang, {}).setdefault(k, []).append(share)
            self.hits.setdefault("all", {}).setdefault(k, []).append(share)

    def report(self) -> dict[str, Any]:
        return {
            "recall": {
                lang: {
                    ("mrr" if k == 0 else f"@{k}"): round(statistics.fmean(v), 4)
                    for k, v in by_k.items()
                }
                | {"queries": len(by_k[5])}
                for lang, by_k in sorted(self.hits.items())
            },
            "queries_with_trap_in_top10": len(self.traps),
            "trap_qids": self.traps,
            "trap_keys": self.trap_keys,
            "expect_empty_answered_empty": f"{self.empty_ok}/{self.empty_total}",
            "expect_empty_not_empty_qids": self.not_empty,
            "answered_empty_qids": self.answered_empty,
            "server_ms_p50": round(percentile(self.latencies, 50), 2),
            "server_ms_p95": round(percentile(self.latencies, 95), 2),
        }
