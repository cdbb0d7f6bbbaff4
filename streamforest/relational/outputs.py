"""What a loop run writes: ``features.csv``, ``predictions.csv``, ``candidates.jsonl`` and a plot."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from streamforest.relational.loop import LoopResult
from streamforest.relational.tables import Database


def write_features(path: str | Path, db: Database, result: LoopResult) -> None:
    """The target key, the label as given, then one column per accepted feature named by its definition."""
    cols = []
    for c in result.accepted:
        if c.nominal and c.feature is not None:
            cats = db.columns_of(db.target)[c.feature.column].categories
            cols.append([cats[int(v)] if v == v else "" for v in c.values.tolist()])
        else:
            cols.append(_cells(c.values))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([db.key, db.label, *(c.definition for c in result.accepted)])
        for i, row in enumerate(zip(*cols, strict=True) if cols else [()] * len(db.ids)):
            w.writerow([db.ids[i], db.labels[i], *row])


def _cells(v: np.ndarray) -> list[str]:
    return ["" if x != x else repr(x) for x in v.tolist()]


def write_predictions(path: str | Path, db: Database, result: LoopResult) -> None:
    """The target key and the predicted probability of each class, for the unlabelled rows (in table order)."""
    classes = sorted({k for p in result.predictions.values() for k in p})
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([db.key, *(f"proba_{k}" for k in classes)])
        for i in db.ids[~db.labelled].tolist():
            p = result.predictions.get(i)
            w.writerow([i, *(("" if p is None else repr(p.get(k, 0.0))) for k in classes)])


class TrialLog:
    """``candidates.jsonl``, one line per candidate as it is tried (flushed: a killed run keeps what it did)."""

    def __init__(self, path: str | Path) -> None:
        self.fh: IO[bytes] = open(path, "wb")

    def __call__(self, trial: dict[str, Any]) -> None:
        self.fh.write(orjson.dumps(trial) + b"\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def plot_curve(path: str | Path, result: LoopResult, title: str = "") -> bool:
    """Out-of-bag score of the exploration forest against candidates tried; False if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("relational: matplotlib is not installed (pip install streamforest[plot]): no plot", file=sys.stderr)
        return False
    n = [t["n"] for t in result.trials]
    oob = [np.nan if t["feedback"]["oob_after"] is None else t["feedback"]["oob_after"] for t in result.trials]
    acc = [t["accepted"] for t in result.trials]
    metric = next((t["feedback"]["oob_metric"] for t in result.trials if t["feedback"]["oob_metric"]), "score")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(n, oob, color="0.6", lw=1, label="out-of-bag after each candidate")
    ax.scatter([a for a, k in zip(n, acc, strict=True) if k], [o for o, k in zip(oob, acc, strict=True) if k],
               color="tab:green", s=18, zorder=3, label="accepted")
    best = np.fmax.accumulate(np.where(acc, oob, np.nan)) if metric != "log_loss" else \
        np.fmin.accumulate(np.where(acc, oob, np.nan))
    ax.plot(n, best, color="tab:blue", lw=2, label="best accepted so far")
    ax.set_xlabel("candidates tried")
    ax.set_ylabel(f"out-of-bag {metric}")
    ax.set_title(title or "propositionalization loop")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
