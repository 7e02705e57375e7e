"""How keyword and vector candidates are fused, and each embedder's recall tuning.

Score fusion: each list's scores are brought to [0, 1] (min-max over the candidates the
list returned: BM25 scores are unbounded and a model's cosines live in a band of its own)
and summed with a weight, ``vector_weight`` for the vector list and the rest for the
keyword list. A candidate one list did not return gets nothing from it. On LoCoMo's dev
conversations (conv-26, 30, 41, 42 and 43; ``bench/locomo.py``, never the held-out ones)
this beat reciprocal-rank fusion with every embedder measured, because RRF gives a list
the same say however far apart its scores are: recall_any@10 0.671 -> 0.704 with MiniLM,
0.728 -> 0.778 with e5-small-v2.

A model's cosines also set where "nothing relevant" lies (the relevance floor) and how far
below the best match a memory may still come back (the similarity margin): MiniLM's
unrelated texts score near 0, e5's near 0.75. Each known model has its own
:class:`RecallTuning`; a setting (``MEMVAULT_RECALL_RELEVANCE_FLOOR``...) overrides it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memvault.search.backend import Hit

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class RecallTuning:
    #: The vector list's share of the fused score; the keyword list has the rest.
    vector_weight: float
    #: A query whose best cosine is below this, and which no memory matches by enough of
    #: its words, is answered with nothing.
    relevance_floor: float
    #: How far below the best cosine a memory may fall and still come back.
    similarity_margin: float
    #: A lower floor for a query that some memory also matches by ``corroboration`` of its
    #: words (two weak signals that agree): ``None``, the floor alone.
    corroborated_floor: float | None = None
    corroboration: float = 0.25
    #: The floor of a query written in Chinese or Japanese: an English model reads such
    #: text through word pieces and scores it lower; ``None``, the same floor.
    cjk_floor: float | None = None

    def floor_for(self, query: str) -> float:
        if self.cjk_floor is not None and _CJK.search(query):
            return self.cjk_floor
        return self.relevance_floor

    def passes(self, best: float, coverage: float, floor: float, needed: float) -> bool:
        """Whether a query whose best cosine is ``best``, and some memory of which holds
        ``coverage`` of its words, is about anything the subject holds. ``floor`` and
        ``needed`` are the floor and keyword coverage in force (settings may move them):
        either alone suffices; the corroborated floor, capped at ``floor``, lets a
        cosine just under it through when some words agree."""
        if best >= floor or coverage >= needed:
            return True
        if self.corroborated_floor is None:
            return False
        return coverage >= self.corroboration and best >= min(floor, self.corroborated_floor)


#: Floor and margin of MiniLM were chosen on the shared evaluation set; its fusion weight
#: and e5's on LoCoMo's dev conversations, e5's floors and margin on the shared set. e5's
#: best cosines for queries that should find nothing (0.78-0.82) overlap those of queries
#: that should, and so does a share of the query's words, but not both at once: a cosine
#: of 0.825 alone, or of 0.805 where some memory holds a quarter of the query's words.
#: A Chinese query keeps the single floor of 0.81 (see docs/recall.md).
TUNINGS: dict[str, RecallTuning] = {
    "sentence-transformers/all-MiniLM-L6-v2": RecallTuning(0.5, 0.35, 0.6),
    "intfloat/e5-small-v2": RecallTuning(
        0.55, 0.825, 0.10, corroborated_floor=0.805, cjk_floor=0.81
    ),
}
#: Any other model (Titan V2, bge, the hashing embedder of the tests): MiniLM's
#: thresholds, which were the only ones before models were tuned one by one.
DEFAULT_TUNING = RecallTuning(0.5, 0.35, 0.6)


def tuning_for(model_id: str) -> RecallTuning:
    return TUNINGS.get(model_id, DEFAULT_TUNING)


#: The least Chinese-model cosine at which a memory the Chinese list returned is kept on
#: that model's word (it may still be kept on the English model's, or on its words). The
#: list's best match is otherwise always kept, and where a subject holds one Chinese
#: memory it would come back for any Chinese query. On the shared set every Chinese query
#: about a Chinese memory has a best cosine of 0.51 or more; 0.40 stays well below that.
CHINESE_KEEP_FLOOR = 0.40


def vector_share(shares: Sequence[float]) -> float:
    """A memory's share of the vector weight from the vector lists that returned it: the
    better one. A Chinese query has two (``search.language``), one per model, each scaled
    to [0, 1] on its own; a memory either model ranks first keeps the whole weight. A
    memory in English, which only the English model embedded, keeps its English share
    (a mean of the two would halve it), though it now competes with the Chinese list's
    best. On the shared evaluation set's Chinese queries this beat the mean of the two
    (recall@5 0.891 against 0.848, the same recall@10)."""
    return max(shares)


def normalised(hits: Sequence[Hit]) -> list[float]:
    """Each hit's score scaled to [0, 1] over the list (all 1.0 when they are equal)."""
    if not hits:
        return []
    low = min(h.score for h in hits)
    high = max(h.score for h in hits)
    if high - low <= 1e-12:
        return [1.0] * len(hits)
    return [(h.score - low) / (high - low) for h in hits]
