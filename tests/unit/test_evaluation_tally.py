"""The evaluation report's tally: recall by language, traps, and the queries whose
answer was wrong in emptiness (an "expect empty" query answered, an answerable one not)."""

from __future__ import annotations

from typing import Any

from memvault_local.evaluation import _ModeTally


def _q(qid: str, text: str, relevant: list[str], **kw: Any) -> dict[str, Any]:
    return {
        "qid": qid,
        "text": text,
        "relevant": relevant,
        "must_not_return": kw.get("traps", []),
        "expect_empty": kw.get("empty", False),
    }


def test_the_tally_names_the_queries_answered_wrongly_empty_or_not() -> None:
    tally = _ModeTally()
    tally.add(_q("q1", "where do I live", ["m1"]), ["m9", "m1"])
    tally.add(_q("q2", "my allergies", ["m2"]), [])
    tally.add(_q("q3", "表单校验用什么库", ["m3"]), ["m3"])
    tally.add(_q("q4", "tailwind setup", [], empty=True), ["m4"])
    tally.add(_q("q5", "redis postmortem", [], empty=True), [])
    tally.add(_q("q6", "old address", ["m6"], traps=["m7"]), ["m7", "m6"])
    report = tally.report()
    assert report["answered_empty_qids"] == ["q2"]
    assert report["expect_empty_not_empty_qids"] == ["q4"]
    assert report["expect_empty_answered_empty"] == "1/2"
    assert report["trap_qids"] == ["q6"] and report["trap_keys"] == {"q6": ["m7"]}
    assert report["recall"]["en"]["@1"] == 0.0
    assert report["recall"]["en"]["@10"] == round(2 / 3, 4)
    assert report["recall"]["zh"]["@1"] == 1.0
    assert report["recall"]["all"]["queries"] == 4
