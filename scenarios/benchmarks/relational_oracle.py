"""Which candidates Mutagenesis needs: an oracle over the loop's whole candidate space, fold by fold.

Every member of the :class:`~streamforest.relational.candidates.Generator`'s space (the extended one: the default
space and the share, skewness and conjunction families), each threshold filled with every decile the loop would try
(:meth:`~streamforest.relational.candidates.Generator.fillings`), rank-duplicates dropped, is a pool feature. In each
fold of a protocol (stratified 10-fold CV, shuffle seeds ``P*100 ..``; use protocols >= 100, the tuning ones), on
the training rows only:

* the residual of the label after the molecule attributes (``y`` minus the out-of-fold probability of an inner
  5-fold RF(100) on them);
* every pool feature's best single split of that residual (the squared-error reduction of a stump): what a feature
  adds to the attributes, not what it repeats of them;
* per group of families (flat over one step, by condition; flat over two steps; aggregates of aggregates), the
  feature of the best stump (``top1``), and with ``--steps K`` a greedy forward selection of up to ``K`` among the
  group's ``--shortlist`` best stumps by an inner 5-fold CV of RF(100) on the training rows (``greedy``);

then RF(500) trained on the attributes plus the chosen feature(s) is scored on the test fold, paired against the
attributes alone. ``--fixed DEF[,DEF]`` adds fixed feature sets (definitions as the pool names them), ``--loop`` the
loop itself (budget 90): its own AUC, RF(500) on its ``features.csv``, and on that plus each fixed set.

    python -m scenarios.benchmarks.relational_oracle --protocol-seeds 100,101,102 --shuffles 2 \
        --fixed "MIN(atoms.charge)" --fixed "MIN(atoms.charge),MAX(atoms.charge)" [--steps 3] [--loop]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scenarios.benchmarks.relational import DATA, forest_auc, protocol_folds, read_features
from streamforest.relational.candidates import Family, Generator, definition
from streamforest.relational.documents import load_documents
from streamforest.relational.policy import rank_digest

MISSING = -1e9  # sklearn's forests take no NaN: missing ranks lowest, as the loop's trees order it


def group_of(f: Family) -> str:
    """The group of families a pool feature is reported under."""
    if f.kind == "nested":
        return "nested"
    if len(f.path) > 1:
        return "flat, two steps"
    if f.cond2 is not None:
        return "flat, one step, conjunction"
    if f.cond is None:
        return "flat, one step, no condition"
    return f"flat, one step, {f.cond[1]} condition"


def pool(db, extended: bool = True) -> tuple[list[str], list[str], np.ndarray]:
    """Definitions, groups and values (target rows x features) of every distinct member of the space."""
    g = Generator(db, extended=extended)
    seen: set[bytes] = set()
    names, groups, cols = [], [], []
    for fam in g.families():
        if fam.kind == "attribute":
            continue
        for member in g.members(fam):
            for f in g.fillings(member):
                v = g.values(f)
                ok = ~np.isnan(v)
                if ok.sum() < 10 or np.nanstd(v) == 0:
                    continue
                digest = rank_digest(v)
                if digest in seen:
                    continue
                seen.add(digest)
                names.append(definition(f))
                groups.append(group_of(fam))
                cols.append(v)
    return names, groups, np.nan_to_num(np.column_stack(cols), nan=MISSING)


def stump_gains(X: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per column of ``X``, the largest reduction of the squared error of ``r`` by one split of the column."""
    order = np.argsort(X, axis=0, kind="stable")
    xs, rs = np.take_along_axis(X, order, 0), r[order]
    left = np.cumsum(rs, 0)[:-1]
    total, m = rs.sum(0), r.size
    k = np.arange(1, m)[:, None]
    g = np.where(xs[1:] != xs[:-1], left ** 2 / k + (total - left) ** 2 / (m - k), -np.inf)
    return g.max(0) - total ** 2 / m


def forest(X: np.ndarray, y: np.ndarray, trees: int, seed: int):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=trees, random_state=seed, n_jobs=1).fit(X, y)


def inner_cv(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[float, np.ndarray]:
    """AUC and out-of-fold probabilities of RF(100) by stratified 5-fold CV (training rows only)."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    p = np.zeros(y.size)
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=seed).split(X, y):
        p[te] = forest(X[tr], y[tr], 100, seed).predict_proba(X[te])[:, 1]
    return float(roc_auc_score(y, p)), p


def greedy(A: np.ndarray, X: np.ndarray, y: np.ndarray, shortlist: list[int], steps: int, seed: int) -> list[int]:
    """Forward selection among ``shortlist`` by inner CV, while the inner AUC rises."""
    chosen: list[int] = []
    best = inner_cv(A, y, seed)[0]
    for _ in range(steps):
        score, j = max((inner_cv(np.column_stack([A, X[:, [*chosen, j]]]), y, seed)[0], j)
                       for j in shortlist if j not in chosen)
        if score <= best:
            break
        best, chosen = score, [*chosen, j]
    return chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--protocol-seeds", default="100")
    ap.add_argument("--shuffles", type=int, default=5)
    ap.add_argument("--max-folds", type=int, default=None)
    ap.add_argument("--steps", type=int, default=0, help="greedy forward selection of up to K per group (0: none)")
    ap.add_argument("--shortlist", type=int, default=15)
    ap.add_argument("--fixed", action="append", default=[], metavar="DEF[,DEF]")
    ap.add_argument("--loop", action="store_true", help="also the loop (budget 90) and its features.csv")
    ap.add_argument("--out", default="results/benchmarks/relational_oracle.json")
    args = ap.parse_args(argv)
    from sklearn.metrics import roc_auc_score

    base = load_documents(args.data, "mutagenic")
    y = base.labels.astype(int)
    target = base.tables[base.target]
    A = np.column_stack([target.columns[c].values for c in sorted(target.columns)])
    t0 = time.process_time()
    names, groups, X = pool(base)
    print(f"pool: {len(names)} distinct features in {time.process_time() - t0:.1f} CPU s", file=sys.stderr)
    index = {n: j for j, n in enumerate(names)}
    fixed = {spec: [index[d] for d in spec.split(",")] for spec in args.fixed}
    kinds = sorted(set(groups))
    in_group = {k: np.array([g == k for g in groups]) for k in kinds}
    tmp = Path(tempfile.mkdtemp())
    rows = []
    for p in (int(s) for s in args.protocol_seeds.split(",")):
        for s, k, train, test in protocol_folds(y, p, args.shuffles, 10):
            if args.max_folds is not None and k >= args.max_folds:
                continue
            seed = p * 1000 + s * 100 + k

            _, oof = inner_cv(A[train], y[train], seed)
            gains = stump_gains(X[train], y[train] - oof)
            row: dict = {"protocol": p, "shuffle": s, "fold": k, "attributes": forest_auc(A, y, train, test, seed),
                         "chosen": {}}
            for kind in kinds:
                g = np.where(in_group[kind], gains, -np.inf)
                top = [int(j) for j in np.argsort(-g)[: args.shortlist]]
                row[f"top1 {kind}"] = forest_auc(np.column_stack([A, X[:, top[:1]]]), y, train, test, seed)
                row["chosen"][f"top1 {kind}"] = [names[top[0]]]
                if args.steps:
                    pick = greedy(A[train], X[train], y[train], top, args.steps, seed)
                    with_pick = np.column_stack([A, X[:, pick]])
                    row[f"greedy {kind}"] = forest_auc(with_pick, y, train, test, seed) if pick else row["attributes"]
                    row["chosen"][f"greedy {kind}"] = [names[j] for j in pick]
            for spec, cols in fixed.items():
                row[f"+ {spec}"] = forest_auc(np.column_stack([A, X[:, cols]]), y, train, test, seed)
            if args.loop:
                from streamforest.relational.loop import run_loop
                from streamforest.relational.outputs import write_features

                db = load_documents(args.data, "mutagenic")
                db.labels[test] = ""
                result = run_loop(db, budget=90, seed=seed)
                own = np.array([result.predictions[i]["1"] for i in db.ids[test]])
                write_features(tmp / "features.csv", db, result)
                _, F = read_features(tmp / "features.csv")
                F = np.nan_to_num(F, nan=MISSING)
                row["loop"] = float(roc_auc_score(y[test], own))
                row["features.csv"] = forest_auc(F, y, train, test, seed)
                for spec, cols in fixed.items():
                    row[f"features.csv + {spec}"] = forest_auc(np.column_stack([F, X[:, cols]]), y, train, test, seed)
            rows.append(row)
            print(json.dumps({k2: (round(v, 4) if isinstance(v, float) else v) for k2, v in row.items()}),
                  file=sys.stderr, flush=True)
    keys = [key for key in rows[0] if isinstance(rows[0][key], float)]
    ref = np.array([r["attributes"] for r in rows])
    print(f"\nMutagenesis oracle, {len(rows)} folds (protocols {args.protocol_seeds}); RF(500) test AUC, "
          f"mean, and paired against the attributes alone (SE):")
    for key in keys:
        v = np.array([r[key] for r in rows])
        d = v - ref
        print(f"  {key:48s} {v.mean():.4f}  {d.mean():+.4f} ({d.std(ddof=1) / np.sqrt(d.size):.4f})")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "pool": len(names)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
