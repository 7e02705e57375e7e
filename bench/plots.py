"""The benchmark's plots (matplotlib, no display): recall latency CDFs per system and
scale, and recall quality per system and method, written beside the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

COLOURS = {
    "memvault-embedded": "#1b7837",
    "memvault-opensearch": "#5aae61",
    "mem0-opensearch": "#c51b7d",
}


def draw(report: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    s = report["sections"]
    made = []
    if "peer_scale" in s and s["peer_scale"].get("scales"):
        made.append(_latency_cdf(s["peer_scale"], folder / "recall_latency_cdf.png"))
    if "peer_quality" in s:
        made.append(_quality(s["peer_quality"], folder / "recall_quality.png"))
    return made


def _latency_cdf(ps: dict[str, Any], path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    scales = ps["scales"]
    fig, axes = plt.subplots(1, len(scales), figsize=(4.2 * len(scales), 3.6), sharey=True)
    axes = axes if len(scales) > 1 else [axes]
    for ax, row in zip(axes, scales, strict=True):
        for name, samples in row.get("recall_samples_ms", {}).items():
            xs = sorted(samples)
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(xs, ys, where="post", label=name, color=COLOURS.get(name))
        ax.set_title(f"{row['memories']:,} memories")
        ax.set_xlabel("recall, server-side ms")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("share of recalls")
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle("Recall latency CDF (query embedding included)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _quality(pq: dict[str, Any], path: Path) -> Path:
    import matplotlib.pyplot as plt

    bars: list[tuple[str, dict[str, float]]] = []
    for name, methods in pq["systems"].items():
        for method, r in methods.items():
            if isinstance(r, dict) and "recall" in r:
                rec = r["recall"]
                system, _, engine = name.partition("-")
                bars.append(
                    (
                        f"{system}\n{engine}\n{method}",
                        {
                            "recall@10 en": rec["en"]["@10"],
                            "recall@10 zh": rec["zh"]["@10"],
                            "MRR": rec["all"].get("mrr", 0.0),
                        },
                    )
                )
    metrics = ["recall@10 en", "recall@10 zh", "MRR"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(bars)), 4.2))
    width = 0.8 / len(metrics)
    for m, metric in enumerate(metrics):
        xs = [i + (m - 1) * width for i in range(len(bars))]
        ax.bar(xs, [b[1][metric] for b in bars], width, label=metric)
    ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.set_ylim(0.5, 1.0)
    ax.set_ylabel("score")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title("Recall quality on the evaluation set, per system and method")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
