"""LoCoMo through the HTTP API: recall_any@5/@10 on the dev and held-out conversations.

Every turn of a conversation is written as an episodic memory of one subject (``source.ref``
is the turn's ``dia_id``, ``source.thread`` its session and ``source.turn`` its place in
it), and every question with evidence (category 5, the adversarial
questions, excluded) is sent to recall with limit 10; a question is a hit at k when one of
its first k items is a gold evidence turn. The dev conversations are the only ones any
ranking choice may be tuned on; the held-out ones are reported, never tuned on.

The data is LoCoMo's ``locomo10`` release (snap-research/locomo, CC BY-NC 4.0), not kept in
this repository: give its folder of per-conversation JSON files
(``data/multimodal_dialog/locomo10_v2``) with ``--data`` or ``MEMVAULT_LOCOMO``.

    python bench/locomo.py --data DIR [--model default|e5-small-v2|minilm] [--split dev|heldout|all]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memvault_client import MemvaultClient
from memvault_local.devkeys import DevKey
from memvault_local.process import start_stack

DEV = ("26", "30", "41", "42", "43")
HELDOUT = ("44", "47", "48", "49", "50")
SCOPES = "memory:read memory:write"
#: Loading threads when turns go in batches (each sends one batch at a time).
BATCH_WRITERS = 4
#: The model a plain ``memvault run`` serves with (none named in its environment).
DEFAULT = "default"


def turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation's turns in order, each with its session's date."""
    out = []
    sessions = sorted(
        (k for k in conversation if k.startswith("session_") and k.split("_")[1].isdigit()),
        key=lambda k: int(k.split("_")[1]),
    )
    for key in sessions:
        value = conversation[key]
        if not isinstance(value, list):
            continue
        for position, turn in enumerate(value):
            out.append(
                {
                    "dia_id": turn["dia_id"],
                    "session": key,
                    "turn": position,
                    "text": f"{turn['speaker']}: {turn['text']}",
                    "date": conversation.get(f"{key}_date_time", ""),
                }
            )
    return out


def questions(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in conversation["qa"] if q.get("category") != 5 and q.get("evidence")]


def hit(question: dict[str, Any], refs: list[str | None]) -> tuple[bool, bool]:
    """Whether a gold evidence turn is among the first 5, and the first 10, results."""
    gold = set(question["evidence"])
    return bool(gold & set(refs[:5])), bool(gold & set(refs[:10]))


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def wait_indexed(mv: MemvaultClient, subject: str, memory_ids: list[str]) -> None:
    """Until every one of ``memory_ids`` is indexed. The indexer follows the order of the
    writes, so this asks after the newest pending memory alone until it is indexed, then
    reads the subject's list (a hundred at a time) to see which others still wait: asking
    after every memory, or listing them all every time, would put hundreds of requests on
    the CPU whose indexing is being timed."""
    pending = list(memory_ids)
    while pending:
        if mv.get_memory(subject, pending[-1]).index_status != "indexed":
            time.sleep(0.05)
            continue
        indexed = {
            m.memory_id
            for m in mv.iter_memories(subject, page_size=100)
            if m.index_status == "indexed"
        }
        pending = [m for m in pending if m not in indexed]


class CpuMeter:
    """CPU seconds spent while a conversation loads, by the stack's API process (its request
    threads, its store and its indexer's pumps), by its embedding worker processes, and by
    this process (the loading client): where the machine's cores go per loaded turn. Read
    from ``/proc``; on a system without it every figure is None."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self._start: dict[str, float] | None = None

    def _now(self) -> dict[str, float] | None:
        if self.server_pid is None or not Path("/proc/self/stat").exists():
            return None
        try:
            workers = _children(self.server_pid)
            return {
                "api": _cpu_seconds(self.server_pid),
                "embedding": sum(_cpu_seconds(p) for p in workers),
                "client": time.process_time(),
            }
        except (OSError, ValueError):
            return None

    def start(self) -> None:
        self._start = self._now()

    def per_turn_ms(self, turns: int) -> dict[str, float] | None:
        end = self._now()
        if self._start is None or end is None or not turns:
            return None
        return {k: round((end[k] - self._start[k]) * 1000 / turns, 2) for k in end}


def _stat_fields(pid: int) -> list[str]:
    # The command name (field 2) may hold spaces; the fields after its ')' do not.
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu_seconds(pid: int) -> float:
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (the embedding workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat_fields(int(entry.name))[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def run_conversation(
    url: str,
    home: Path,
    name: str,
    conversation: dict[str, Any],
    workers: int = 8,
    server_pid: int | None = None,
    batch: int = 0,
) -> dict[str, Any]:
    subject = f"locomo-{name}-{uuid.uuid4().hex[:6]}"
    token = DevKey.load_or_create(home).mint(
        tenant="bench", subject=subject, scope=SCOPES, max_sensitivity="pii"
    )
    items = turns(conversation)
    refused: list[str] = []
    written: list[str] = []

    local = threading.local()
    clients: list[MemvaultClient] = []

    def client() -> MemvaultClient:
        # One client per loading thread, kept: as an agent keeps its client.
        if not hasattr(local, "mv"):
            local.mv = MemvaultClient(url, token=token)
            clients.append(local.mv)
        mv: MemvaultClient = local.mv
        return mv

    def body(turn: dict[str, Any]) -> dict[str, Any]:
        return {
            "kind": "episodic",
            "content": turn["text"],
            "source": {
                "type": "user_statement",
                "ref": turn["dia_id"],
                # The conversation and the turn's place in it: recall ranks
                # the neighbouring turns of a strong match up with it.
                "thread": f"{name}/{turn['session']}",
                "turn": turn["turn"],
            },
            "consent": True,
        }

    def write(turn: dict[str, Any]) -> None:
        try:
            written.append(client().write_memory(subject, body(turn)).memory_id)
        except Exception as err:  # counted: a refused turn is a recall the run cannot make
            refused.append(f"{turn['dia_id']}: {getattr(err, 'code', type(err).__name__)}")

    def write_many(chunk: list[dict[str, Any]]) -> None:
        try:
            answer = client().write_memories(subject, [body(t) for t in chunk])
        except Exception as err:
            code = getattr(err, "code", type(err).__name__)
            refused.extend(f"{t['dia_id']}: {code}" for t in chunk)
            return
        for turn, item in zip(chunk, answer.items, strict=True):
            if item.memory is not None:
                written.append(item.memory.memory_id)
            else:
                refused.append(f"{turn['dia_id']}: {item.error.code if item.error else '?'}")

    meter = CpuMeter(server_pid)
    meter.start()
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(workers) as pool:
            if batch:
                chunks = [items[at : at + batch] for at in range(0, len(items), batch)]
                list(pool.map(write_many, chunks))
            else:
                list(pool.map(write, items))
    finally:
        for mv in clients:
            mv.close()
    with MemvaultClient(url, token=token) as mv:
        wait_indexed(mv, subject, written)
        loaded_s = time.perf_counter() - started
        cpu = meter.per_turn_ms(len(items))
        hits5 = hits10 = empty = 0
        latencies: list[float] = []
        asked = questions(conversation)
        for q in asked:
            t0 = time.perf_counter()
            answer = mv.recall(subject, {"query": q["question"], "limit": 10})
            latencies.append((time.perf_counter() - t0) * 1000)
            # Every question asked has gold evidence: an empty answer is the relevance
            # floor judging an answerable question to be about nothing the subject holds.
            empty += not answer.items
            at5, at10 = hit(q, [item.memory.source.ref for item in answer.items])
            hits5 += at5
            hits10 += at10
    return {
        "conversation": name,
        "turns": len(items),
        "refused": refused,
        "questions": len(asked),
        "hits_at_5": hits5,
        "hits_at_10": hits10,
        "answered_empty": empty,
        "turns_per_s": round(len(items) / loaded_s, 1),
        "cpu_ms_per_turn": cpu,
        "batch": batch,
        "latencies_ms": latencies,
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    asked = sum(r["questions"] for r in rows)
    latencies = [x for r in rows for x in r["latencies_ms"]]
    return {
        "conversations": [r["conversation"] for r in rows],
        "questions": asked,
        "recall_any_at_5": round(sum(r["hits_at_5"] for r in rows) / asked, 4),
        "recall_any_at_10": round(sum(r["hits_at_10"] for r in rows) / asked, 4),
        "answered_empty": sum(r.get("answered_empty", 0) for r in rows),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(_percentile(latencies, 0.95), 1),
        "turns_per_s": round(
            sum(r["turns"] for r in rows) / sum(r["turns"] / r["turns_per_s"] for r in rows),
            1,
        ),
        "refused_turns": sum(len(r["refused"]) for r in rows),
        "cpu_ms_per_turn": _cpu_per_turn(rows),
    }


def _cpu_per_turn(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """CPU ms per loaded turn over ``rows``, by process kind (None when any row lacks it)."""
    if not rows or any(not r.get("cpu_ms_per_turn") for r in rows):
        return None
    turns = sum(r["turns"] for r in rows)
    kinds = rows[0]["cpu_ms_per_turn"]
    return {
        k: round(sum(r["cpu_ms_per_turn"][k] * r["turns"] for r in rows) / turns, 2) for k in kinds
    }


def embedder_alone(model: str, texts: list[str]) -> float | None:
    """Turns per second the served model embeds on this machine with nothing else running:
    the same worker processes the stack's indexer uses, fed batches of 200 as the outbox
    pump feeds them. The load rate's peer in the same run (None for a model that is not a
    packaged ONNX one); the load rate over it is what the API, the store and the indexer
    keep of the machine's embedding capacity."""
    from memvault.embeddings.onnx import MODELS, OnnxEmbedder
    from memvault_local.embed_worker import WorkerEmbedder

    if model not in MODELS:
        return None
    worker = WorkerEmbedder(OnnxEmbedder(model))
    try:
        worker.start()
        worker.embed(texts[:16])
        started = time.perf_counter()
        for at in range(0, len(texts), 200):
            worker.embed(texts[at : at + 200])
        return len(texts) / (time.perf_counter() - started)
    finally:
        worker.close()


def measure(data: Path, names: tuple[str, ...], model: str, batch: int = 0) -> dict[str, Any]:
    """Every named conversation through a fresh local stack on ``model`` (``default``:
    the model a plain ``memvault run`` chooses)."""
    with tempfile.TemporaryDirectory(prefix="memvault-locomo-") as tmp:
        home = Path(tmp)
        env = {} if model == DEFAULT else {"MEMVAULT_EMBEDDING_MODEL": model}
        for passed in ("MEMVAULT_MODEL_DIR", "MEMVAULT_EMBEDDING_MODEL_ZH"):
            if os.environ.get(passed):
                env[passed] = os.environ[passed]
        stack = start_stack(home, **env)
        served = re.search(r"embeddings: ([^\s;]+)", stack.banner)
        model = served.group(1) if served else model
        texts: list[str] = []  # every turn, for the embedder alone after the stack
        try:
            rows = []
            for name in names:
                conversation = json.loads((data / f"{name}.json").read_text())
                texts += [t["text"] for t in turns(conversation)]
                row = run_conversation(
                    stack.url,
                    home,
                    name,
                    conversation,
                    server_pid=stack.process.pid,
                    batch=batch,
                    workers=BATCH_WRITERS if batch else 8,
                )
                rows.append(row)
                print(
                    f"conv-{name}: {row['hits_at_10']}/{row['questions']} at 10, "
                    f"{row['turns_per_s']} turns/s, {len(row['refused'])} refused",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            stack.stop()
    alone = embedder_alone(model, texts)
    result: dict[str, Any] = {"model": model, "cores": os.cpu_count()}
    if alone is not None:
        result["embedder_alone_turns_per_s"] = round(alone, 1)
    for split, members in (("dev", DEV), ("heldout", HELDOUT), ("all", DEV + HELDOUT)):
        chosen = [r for r in rows if r["conversation"] in members]
        if chosen and (split != "all" or set(DEV + HELDOUT) <= {r["conversation"] for r in rows}):
            result[split] = summarise(chosen)
    result["rows"] = rows
    return result


def run(opensearch_url: str = "") -> dict[str, Any]:
    """``make bench``'s LoCoMo section: all ten conversations on the default model, when the
    data is there (``MEMVAULT_LOCOMO``; it is not shipped: CC BY-NC); with an OpenSearch,
    Mem0 on the same conversations with the same embedder (``locomo_mem0``)."""
    data = os.environ.get("MEMVAULT_LOCOMO")
    if not data or not Path(data).is_dir():
        return {"skipped": "set MEMVAULT_LOCOMO to LoCoMo's locomo10_v2 folder to run this"}
    model = os.environ.get("MEMVAULT_LOCOMO_MODEL", DEFAULT)
    result = measure(Path(data), DEV + HELDOUT, model)
    result.pop("rows")
    # The same again, each conversation loaded 25 turns a request (the batch route), on
    # another fresh stack: what loading a history costs when it is sent as one.
    batched = measure(Path(data), DEV + HELDOUT, model, batch=25)
    result["batched"] = {
        "batch": 25,
        **{
            k: batched[k]
            for k in ("dev", "heldout", "all", "embedder_alone_turns_per_s")
            if k in batched
        },
    }
    result["goals"] = {
        "recall_any_at_10_all": 0.78,
        "recall_any_at_10_heldout": 0.76,
        "p95_ms_at_most": 30,
        "turns_per_s_at_least": 100,
    }
    if opensearch_url:
        result["mem0"] = versus_mem0(Path(data), DEV + HELDOUT, opensearch_url, result["model"])
    return result


def versus_mem0(data: Path, names: tuple[str, ...], url: str, model: str) -> dict[str, Any]:
    """Mem0's figures per split, on ``model`` (the one memvault was measured with)."""
    import locomo_mem0

    rows = locomo_mem0.measure(data, names, url, model)
    out: dict[str, Any] = {"model": model}
    for split, members in (("dev", DEV), ("heldout", HELDOUT), ("all", DEV + HELDOUT)):
        chosen = [r for r in rows if r["conversation"] in members]
        if chosen:
            out[split] = locomo_mem0.summary(chosen)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("MEMVAULT_LOCOMO"))
    parser.add_argument("--model", default=DEFAULT, help="default: what memvault run chooses")
    parser.add_argument("--split", choices=["dev", "heldout", "all"], default="dev")
    parser.add_argument("--out", help="write the figures here as JSON")
    parser.add_argument(
        "--batch",
        type=int,
        default=0,
        metavar="N",
        help="load N turns a request (POST .../memories/batch); 0: one write a turn",
    )
    parser.add_argument("--mem0", metavar="URL", help="also Mem0, on the OpenSearch at URL")
    args = parser.parse_args(argv)
    if not args.data:
        print("error: give LoCoMo's folder with --data or MEMVAULT_LOCOMO", file=sys.stderr)
        return 2
    names = {"dev": DEV, "heldout": HELDOUT, "all": DEV + HELDOUT}[args.split]
    measured = measure(Path(args.data), names, args.model, args.batch)
    rows = measured.pop("rows", None)
    result: dict[str, Any] = {"split": args.split, **measured}
    if args.mem0:
        result["mem0"] = versus_mem0(Path(args.data), names, args.mem0, measured["model"])
    print(json.dumps({k: v for k, v in result.items()}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({**result, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
