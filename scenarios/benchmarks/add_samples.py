"""What ``add_samples`` costs and buys: regrowing the alive generations on a larger training set.

A stream of features is learned on part of the training samples; then the rest of the training samples arrive
through ``add_samples``, which regrows every alive generation on all samples with the same subspaces and seeds
(the bookkeeping stays valid). Compared, in one run:

* the forest before the new samples (test AUC),
* after ``add_samples`` (test AUC, seconds),
* a forest streamed from the start with all training samples (test AUC, seconds for the whole stream).

    python -m scenarios.benchmarks.add_samples [--n 40000] [--features 20]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from streamforest import FeatureStreamForest
from streamforest.metrics import roc_auc


def stream(X: np.ndarray, y: np.ndarray, seed: int) -> tuple[FeatureStreamForest, float]:
    f = FeatureStreamForest(random_state=seed)
    start = time.perf_counter()
    for j in range(X.shape[1]):
        f.add_feature(f"f{j}", X[:, j], y=y)
    return f, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--first-share", type=float, default=0.25, help="share of training samples known at first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/benchmarks/add_samples.json"))
    args = ap.parse_args(argv)

    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=args.n, n_features=args.features, n_informative=args.features // 2,
                               random_state=args.seed)
    n_train = args.n * 2 // 3
    n_first = int(n_train * args.first_share)
    X_test, y_test = X[n_train:], y[n_train:]

    stream(X[:200], y[:200], args.seed)  # compile numba outside the timings
    f, t_first = stream(X[:n_first], y[:n_first], args.seed)
    auc_before = roc_auc(y_test, f.predict_proba(X_test)[:, 1])
    start = time.perf_counter()
    f.add_samples(X[n_first:n_train], y[n_first:n_train])
    t_add = time.perf_counter() - start
    auc_after = roc_auc(y_test, f.predict_proba(X_test)[:, 1])
    full, t_full = stream(X[:n_train], y[:n_train], args.seed)
    auc_full = roc_auc(y_test, full.predict_proba(X_test)[:, 1])

    result = {
        "n_first": n_first, "n_added": n_train - n_first, "alive_trees": f.n_trees_,
        "auc_before": auc_before, "auc_after_add_samples": auc_after, "auc_streamed_with_all": auc_full,
        "seconds_add_samples": t_add, "seconds_stream_all": t_full, "seconds_stream_first": t_first,
    }
    print(f"samples: {n_first} first, {n_train - n_first} added; {f.n_trees_} alive trees regrown")
    print(f"test AUC before add_samples      {auc_before:.4f}")
    print(f"test AUC after add_samples       {auc_after:.4f}   ({t_add:.2f} s)")
    print(f"test AUC streamed with all       {auc_full:.4f}   ({t_full:.2f} s for {args.features} features)")
    print(f"add_samples / full re-stream time: {t_add / t_full:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
