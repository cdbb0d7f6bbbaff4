"""Guided vs exhaustive: the feedback policy against sending every candidate of the space, in one run.

The exhaustive baseline sends every candidate up to depth 2 (flat aggregates with at most one condition, plain
aggregates of aggregates; :class:`~streamforest.relational.policy.EnumerationPolicy`) through the same loop, same
engine, same shadows and acceptance. The guided policy gets a fifth of that budget. Both are scored by
scikit-learn's RandomForest (500 trees) on the features accepted within the first k candidates (the curve), and by
the loop's own predictions at the end. Mutagenesis (stratified k-fold) and the synthetic generator (the same).

    python -m scenarios.benchmarks.relational_exhaustive [--folds 5] [--dataset mutagenesis|synthetic]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from scenarios.benchmarks.relational import DATA, forest_auc
from streamforest.relational.candidates import Generator
from streamforest.relational.documents import load_documents
from streamforest.relational.loop import Loop
from streamforest.relational.policy import EnumerationPolicy, ThompsonPolicy
from streamforest.relational.synthetic import make_relational


def load(name: str):
    if name == "mutagenesis":
        return load_documents(DATA, "mutagenic")
    return make_relational(n_targets=1000, seed=0)


def run(db, policy_cls, budget: int, seed: int, **kw):
    policy = policy_cls(Generator(db), np.asarray(db.labels), db.labelled, seed=seed, **kw)
    loop = Loop(db, policy=policy, budget=budget, seed=seed)
    try:
        start = time.perf_counter()
        result = loop.run()
        return result, time.perf_counter() - start
    finally:
        loop.client.close()
        loop.final_client.close()


def curve(result, y, train, test, seed: int, grid: list[int]) -> list[float | None]:
    """RF(500) AUC on the features accepted within the first k candidates, for each k of the grid."""
    accepted_at = {t["definition"]: t["n"] for t in result.trials if t["accepted"]}
    out = []
    for k in grid:
        cols = [c.values for c in result.accepted if accepted_at.get(c.definition, 10**9) <= k]
        out.append(forest_auc(np.column_stack(cols), y, train, test, seed) if cols else None)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=("mutagenesis", "synthetic"), default="mutagenesis")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--shuffle", type=int, default=0)
    ap.add_argument("--guided-budget", type=int, default=None,
                    help="the guided side's budget (default: 1/5 of the exhaustive budget; the exhaustive side skips "
                         "constants and rank-duplicates, so 1/5 of what it actually sends can be less)")
    ap.add_argument("--max-folds", type=int, default=None,
                    help="run only the first N folds of the split (the exhaustive side is long on Mutagenesis)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    base = load(args.dataset)
    y = base.labels.astype(int)
    n_all = EnumerationPolicy(Generator(base), np.asarray(base.labels), base.labelled).size()
    # shadows ride along in both: the exhaustive budget covers the space plus its shadows
    exhaustive_budget = n_all + n_all // 10 + 2
    guided_budget = args.guided_budget or exhaustive_budget // 5
    grid = sorted({guided_budget // 4, guided_budget // 2, guided_budget, exhaustive_budget // 2, exhaustive_budget})
    rows = []
    for k, (train, test) in enumerate(StratifiedKFold(args.folds, shuffle=True, random_state=args.shuffle)
                                      .split(y, y)):
        if args.max_folds is not None and k >= args.max_folds:
            break
        row: dict = {"fold": k}
        for name, cls, budget in (("guided", ThompsonPolicy, guided_budget),
                                  ("exhaustive", EnumerationPolicy, exhaustive_budget)):
            db = load(args.dataset)
            db.labels[test] = ""
            result, seconds = run(db, cls, budget, seed=k)
            own = np.array([result.predictions[i]["1"] for i in db.ids[test]])
            row[name] = {"candidates": len(result.trials), "accepted": len(result.accepted), "seconds": seconds,
                         "auc_loop": float(roc_auc_score(y[test], own)),
                         "curve": curve(result, y, train, test, k, [g for g in grid if g <= budget])}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    def mean(name: str, key: str) -> float:
        return float(np.mean([r[name][key] for r in rows]))

    def mean_curve(name: str) -> list[float]:
        n = len(rows[0][name]["curve"])
        return [float(np.mean([r[name]["curve"][j] for r in rows if r[name]["curve"][j] is not None]))
                for j in range(n)]

    g_curve, e_curve = mean_curve("guided"), mean_curve("exhaustive")
    print(f"\n{args.dataset}: guided (budget {guided_budget}) vs exhaustive ({n_all} candidates + shadows = "
          f"{exhaustive_budget}), {len(rows)} folds of a {args.folds}-fold CV, RF(500) AUC on the features accepted "
          "so far:")
    print("  candidates  " + "  ".join(f"{g:>7}" for g in grid))
    print("  guided      " + "  ".join(f"{v:7.4f}" for v in g_curve))
    print("  exhaustive  " + "  ".join(f"{v:7.4f}" for v in e_curve))
    g_final, e_final = g_curve[-1], e_curve[-1]
    # the exhaustive side skips constants and rank-duplicates without spending budget: the share is of what it sent
    sent_g, sent_e = mean("guided", "candidates"), mean("exhaustive", "candidates")
    print(f"  guided sent {sent_g:.0f} candidates per fold, exhaustive {sent_e:.0f} ({sent_g / sent_e:.2f} of them; "
          f"target <= 0.2): {g_final:.4f} against {e_final:.4f}; difference {g_final - e_final:+.4f} "
          "(target >= -0.01)")
    print(f"  loop's own predictions: guided {mean('guided', 'auc_loop'):.4f}, "
          f"exhaustive {mean('exhaustive', 'auc_loop'):.4f}; seconds per fold: guided {mean('guided', 'seconds'):.1f}, "
          f"exhaustive {mean('exhaustive', 'seconds'):.1f}")
    out = Path(args.out or f"results/benchmarks/relational_exhaustive_{args.dataset}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"grid": grid, "guided_curve": g_curve, "exhaustive_curve": e_curve,
                               "space": n_all, "folds": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
