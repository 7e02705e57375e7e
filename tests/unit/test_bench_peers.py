"""The fairness devices of the peer benchmark (bench/peers.py): the order in which a
round robin takes the systems, and the HTTP front that tells when it has finished a
request off. The benchmark itself is run by ``make bench``, not here."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import Counter
from typing import Any

import pytest
from bench.peers import ModeView, _SettlingServer, balanced_orders
from werkzeug.serving import WSGIRequestHandler


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_each_system_follows_each_other_equally_often_and_holds_each_place(n: int) -> None:
    rows = balanced_orders(n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    follows = Counter((row[i], row[i + 1]) for row in rows for i in range(n - 1))
    assert len(follows) == n * (n - 1)  # every ordered pair of two systems occurs
    assert len(set(follows.values())) == 1  # and each as often
    places = Counter((system, place) for row in rows for place, system in enumerate(row))
    assert len(places) == n * n and len(set(places.values())) == 1


def test_the_server_says_settled_only_once_its_work_after_the_answer_is_done() -> None:
    finished = threading.Event()

    class SlowToFinish(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            pass

        def finish(self) -> None:  # runs after the answer is written
            super().finish()
            time.sleep(0.5)
            finished.set()

    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]

    server = _SettlingServer("127.0.0.1", 0, app, handler=SlowToFinish)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        with urllib.request.urlopen(url, timeout=5) as answer:
            assert answer.read() == b"ok"
        assert not finished.is_set()  # the answer came before the handler's own end
        server.wait_settled()
        assert finished.is_set()
    finally:
        server.shutdown()
        server.server_close()


def test_a_mode_view_asks_every_recall_in_its_mode_and_leaves_other_calls_alone() -> None:
    seen: list[tuple[str, str, Any]] = []

    class Recorder:
        def call(self, method: str, path: str, *, body: Any = None) -> Any:
            seen.append((method, path, body))
            return "answer"

    class View:
        def client_for(self, *args: Any) -> Recorder:
            return Recorder()

    client = ModeView(View(), "vector").client_for("t", "s", None, None)
    assert client.call("POST", "/v1/subjects/s/recall", body={"query": "q", "limit": 10})
    client.call("POST", "/v1/subjects/s/memories", body={"content": "c"})
    assert seen[0][2] == {"query": "q", "limit": 10, "mode": "vector"}
    assert seen[1][2] == {"content": "c"}
