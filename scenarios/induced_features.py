"""Induced features (Vens & Costa, 2011): is the forest's hashed node-path encoding a better space than the inputs?

For every dataset of ``shared/datasets/motl2019`` and a few seeds (default 3 of 2101..2110): a stratified 2:1
train/test split (:func:`scenarios.paper_reproduction.stratified_split`), the features streamed in a random order
into ``FeatureStreamForest(random_state=seed)`` with the library's default parameters, then the same learners on
three spaces:

* **original**: the input features, NaN imputed with the training median, standardised with the training mean and
  standard deviation (nominal columns as their integer codes);
* **induced**: ``f.encode(X, n_components=2**18)``, both ``values="binary"`` (1-NN with the cosine metric: the
  **headline**) and ``values="weighted"`` (1-NN with the Euclidean metric, i.e. the distance of the weighted
  forest's path kernel);
* **reference**: the exact (unhashed) ``decision_path`` of a scikit-learn ``RandomForestClassifier`` of comparable
  size (``n_estimators = f.n_trees_``, ``max_depth=6``, otherwise scikit-learn's defaults; 1-NN with cosine).

Learners: (a) 1-NN (``KNeighborsClassifier(n_neighbors=1)``), scored by test **accuracy** (the headline, as in
Vens & Costa) and by the AUC of its 0/1 predictions (= balanced accuracy); (b) ``LogisticRegression(max_iter=1000)``,
scored by test AUC. The headline figure is the share of datasets where 1-NN on the binary encoding is more accurate
than 1-NN on the original space (mean over seeds; ties count as not beating it). Target of the issue: >= 60%;
exact encodings of scikit-learn forests are reported to reach about 70%.

(c) The noise experiment of Vens & Costa on larger datasets (default: the 10 largest with n <= 2000; at 500% noise
a stream is six times as long, so larger ones would dominate the run time): 20%, 100% and 500% extra
N(0, 1) features (rounded, at least one) inserted at random positions of the stream; 1-NN accuracy on the induced
space (binary, cosine) vs the original space (and the scikit-learn reference) as the noise grows.

Cost control, stated in the summary: datasets of more than ``--max-n`` (3000) samples are first subsampled to
3000 (stratified, drawn per seed; 24 of the 241 datasets), which keeps a full run of all datasets around half an
hour on two cores. 1-NN on an encoding is a sparse product of (evaluated x reference) rows, so it also uses at
most ``--ref-cap`` (3000) random training rows as the reference set and ``--eval-cap`` (1000) random test rows, the
same rows for every space (with ``--max-n 3000`` these caps never bind); the forests and linear models use the
whole split. Datasets with fewer than
30 samples are excluded (1-NN on a test set of under ten samples says little; one dataset).

    .venv/bin/python -m scenarios.induced_features                  # all datasets, 3 seeds, 2 workers
    .venv/bin/python -m scenarios.induced_features --quick          # a small subset, about a minute
    .venv/bin/python -m scenarios.induced_features --bundled        # the datasets shipped in the package (no
                                                                    # shared/ needed; --quick: 3 of them)
    .venv/bin/python -m scenarios.induced_features --datasets diabetes,phoneme --seeds 5
    .venv/bin/python -m scenarios.induced_features --resummarise    # rebuild the tables from a finished run

Writes ``results/induced/``: ``summary.md`` (tables), ``per_dataset.tsv`` (means over seeds), ``runs.tsv`` (every
dataset and seed), ``noise.tsv`` and ``noise.png`` (noise level vs 1-NN accuracy, mean over datasets), ``run.json``
(settings and timing).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from scenarios.dataset_runs import REPO, SHARED, worker_init
from scenarios.paper_reproduction import Task, make_tasks, stratified_split
from streamforest.encoding import DEFAULT_N_COMPONENTS

if TYPE_CHECKING:
    import scipy.sparse as sp

    from streamforest import FeatureStreamForest
    from streamforest.datasets import Dataset

SEEDS = tuple(range(2101, 2111))
N_COMPONENTS = DEFAULT_N_COMPONENTS
MAX_DEPTH = 6  # the library's default depth; the scikit-learn reference uses the same
MIN_N = 30
REF_CAP = 3000
EVAL_CAP = 1000
MAX_N = 3000
NOISE_LEVELS = (0.0, 0.2, 1.0, 5.0)
N_NOISE_DATASETS = 10
NOISE_MAX_N = 2000
QUICK = ("diabetes", "banknote-authentication", "blood-transfusion-service-center", "breast-w", "haberman",
         "tic-tac-toe")
QUICK_NOISE = ("banknote-authentication", "haberman")
QUICK_SEEDS = 2
#: 1-NN spaces: column prefix -> label.
KNN_SPACES = {
    "knn_orig": "original (standardised), Euclidean",
    "knn_bin": "encoding, binary, cosine (headline)",
    "knn_wtd": "encoding, weighted, Euclidean",
    "knn_rf": "scikit-learn RF decision_path (exact), cosine",
}
#: Linear-model spaces: column -> label.
LR_SPACES = {
    "lr_orig": "original (standardised)",
    "lr_bin": "encoding, binary",
    "lr_wtd": "encoding, weighted",
}


@dataclass
class Unit:
    """One dataset and one seed; ``noise`` asks for the noise experiment too."""

    task: Task
    seed: int
    noise: bool
    ref_cap: int
    eval_cap: int
    max_n: int


@dataclass
class Split:
    """Train/test indices, the 1-NN rows (positions within train and within test) and the stream order."""

    train: np.ndarray
    test: np.ndarray
    ref: np.ndarray
    evl: np.ndarray
    order: list[str]


# ---------------------------------------------------------------------------------------------- spaces


def make_split(data: Dataset, seed: int, ref_cap: int, eval_cap: int) -> Split:
    """The paper's split and feature order for ``seed``, and the (shuffled, capped) 1-NN reference/eval rows."""
    train, test = stratified_split(data.y, seed)
    names = list(data.columns)
    order = [names[j] for j in np.random.default_rng(seed).permutation(len(names))]
    rng = np.random.default_rng([seed, 0x1AA])
    # Shuffled, so that 1-NN ties are not broken by the file's (often class-sorted) row order.
    ref = rng.permutation(len(train))[:ref_cap]
    evl = rng.permutation(len(test))[:eval_cap]
    return Split(train, test, ref, evl, order)


def subsample(data: Dataset, max_n: int, seed: int) -> Dataset:
    """At most ``max_n`` samples of ``data`` (stratified, drawn with ``seed``); ``max_n=0``: all of them."""
    from streamforest.datasets import Dataset

    if not max_n or data.n <= max_n:
        return data
    keep, _ = stratified_split(data.y, seed + 7919, test_fraction=1 - max_n / data.n)
    return Dataset(data.name, data.did, {k: v[keep] for k, v in data.columns.items()}, data.kinds, data.y[keep])


def impute(X: np.ndarray, train: np.ndarray) -> np.ndarray:
    """NaN replaced by the training median of its column (0 where a column has no training value)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        med = np.nanmedian(X[train], axis=0)
    med = np.where(np.isnan(med), 0.0, med)
    return np.where(np.isnan(X), med, X)


def standardise(X: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Median-imputed, then centred and scaled with the training mean and standard deviation."""
    from sklearn.preprocessing import StandardScaler

    Xi = impute(X, train)
    return StandardScaler().fit(Xi[train]).transform(Xi)


def stream_forest(columns: dict[str, np.ndarray], kinds: dict[str, str], order: list[str], train: np.ndarray,
                  y: np.ndarray, seed: int) -> FeatureStreamForest:
    """A default ``FeatureStreamForest`` fed the training part of the columns one by one, in ``order``."""
    from streamforest import FeatureStreamForest

    f = FeatureStreamForest(random_state=seed)
    for k, name in enumerate(order):
        f.add_feature(name, columns[name][train], y=y[train] if k == 0 else None, kind=kinds.get(name))
    return f


def encode(f: FeatureStreamForest, X: np.ndarray, values: str) -> sp.csr_matrix:
    """The hashed node-path encoding of the rows of ``X`` (columns in arrival order)."""
    return f.encode(X, n_components=N_COMPONENTS, values=values)


def rf_paths(X: np.ndarray, y: np.ndarray, split: Split, n_trees: int, seed: int) -> tuple[Any, Any, float]:
    """Exact decision paths of a scikit-learn forest (reference rows, eval rows) and its test AUC."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import roc_auc_score

    Xtr, Xte = X[split.train], X[split.test]
    rf = RandomForestClassifier(n_estimators=n_trees, max_depth=MAX_DEPTH, n_jobs=1, random_state=seed)
    rf.fit(Xtr, y[split.train])
    ref = rf.decision_path(Xtr[split.ref])[0].astype(np.float32)
    evl = rf.decision_path(Xte[split.evl])[0].astype(np.float32)
    return ref, evl, float(roc_auc_score(y[split.test], rf.predict_proba(Xte)[:, 1]))


# ---------------------------------------------------------------------------------------------- learners


def knn_scores(ref: Any, y_ref: np.ndarray, evl: Any, y_eval: np.ndarray, metric: str) -> tuple[float, float]:
    """1-NN accuracy and the AUC of its 0/1 predictions (NaN if the evaluated rows hold one class)."""
    from sklearn.metrics import roc_auc_score
    from sklearn.neighbors import KNeighborsClassifier

    pred = KNeighborsClassifier(n_neighbors=1, metric=metric).fit(ref, y_ref).predict(evl)
    auc = float(roc_auc_score(y_eval, pred)) if np.unique(y_eval).size == 2 else float("nan")
    return float(np.mean(pred == y_eval)), auc


def lr_auc(Xtr: Any, ytr: np.ndarray, Xte: Any, yte: np.ndarray) -> tuple[float, bool]:
    """Test AUC of ``LogisticRegression(max_iter=1000)`` and whether it converged."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = LogisticRegression(max_iter=1000).fit(Xtr, ytr)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return float(roc_auc_score(yte, model.predict_proba(Xte)[:, 1])), converged


def used_columns(Etr: sp.csr_matrix, Ete: sp.csr_matrix) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Both encodings restricted to the columns the training rows use.

    For an L2-penalised logistic regression this changes nothing (a column no training row uses keeps a zero
    coefficient), but L-BFGS on 2**18 mostly idle coefficients is many times slower.
    """
    used = np.unique(Etr.indices)
    return Etr[:, used], Ete[:, used]


def put_knn(row: dict[str, Any], key: str, scores: tuple[float, float]) -> None:
    row[f"{key}_acc"], row[f"{key}_auc"] = scores


# ---------------------------------------------------------------------------------------------- one run


def main_run(data: Dataset, split: Split, seed: int) -> dict[str, Any]:
    """Part (a) and (b) for one dataset and seed."""
    from sklearn.metrics import roc_auc_score

    y = data.y
    ytr, yte = y[split.train], y[split.test]
    y_ref, y_eval = ytr[split.ref], yte[split.evl]
    X = data.X
    f = stream_forest(data.columns, data.kinds, split.order, split.train, y, seed)
    Xs = np.column_stack([data.columns[n] for n in split.order])
    row: dict[str, Any] = {"n_trees": f.n_trees_, "n_generations": len(f.generations_),
                           "forest_auc": float(roc_auc_score(yte, f.predict_proba(Xs[split.test])[:, 1]))}
    Z = standardise(X, split.train)
    Ztr, Zte = Z[split.train], Z[split.test]
    put_knn(row, "knn_orig", knn_scores(Ztr[split.ref], y_ref, Zte[split.evl], y_eval, "euclidean"))
    row["lr_orig"], row["lr_orig_converged"] = lr_auc(Ztr, ytr, Zte, yte)
    for values, key, metric in (("binary", "bin", "cosine"), ("weighted", "wtd", "euclidean")):
        Etr, Ete = encode(f, Xs[split.train], values), encode(f, Xs[split.test], values)
        if values == "binary":
            row["enc_nnz_per_row"] = Etr.nnz / Etr.shape[0]
        put_knn(row, f"knn_{key}", knn_scores(Etr[split.ref], y_ref, Ete[split.evl], y_eval, metric))
        Ctr, Cte = used_columns(Etr, Ete)
        row[f"lr_{key}"], row[f"lr_{key}_converged"] = lr_auc(Ctr, ytr, Cte, yte)
    ref, evl, row["rf_auc"] = rf_paths(impute(X, split.train), y, split, f.n_trees_, seed)
    put_knn(row, "knn_rf", knn_scores(ref, y_ref, evl, y_eval, "cosine"))
    return row


def with_noise(data: Dataset, order: list[str], level: float, seed: int) -> tuple[dict[str, np.ndarray], list[str]]:
    """The columns plus ``round(level * d)`` (at least one) N(0, 1) columns, inserted at random stream positions."""
    k = max(1, round(level * data.d))
    rng = np.random.default_rng([seed, 0x401, round(level * 100)])
    noise = {f"noise_{j}": rng.standard_normal(data.n) for j in range(k)}
    stream = list(order)
    for name in noise:
        stream.insert(int(rng.integers(0, len(stream) + 1)), name)
    return {**data.columns, **noise}, stream


def noise_run(data: Dataset, split: Split, level: float, seed: int) -> dict[str, Any]:
    """1-NN accuracy on the induced (binary, cosine), original and reference spaces with noise features added."""
    columns, stream = with_noise(data, split.order, level, seed)
    y = data.y
    ytr, yte = y[split.train], y[split.test]
    y_ref, y_eval = ytr[split.ref], yte[split.evl]
    f = stream_forest(columns, data.kinds, stream, split.train, y, seed)
    Xs = np.column_stack([columns[n] for n in stream])
    Etr = encode(f, Xs[split.train][split.ref], "binary")
    Ete = encode(f, Xs[split.test][split.evl], "binary")
    row: dict[str, Any] = {"level": level, "n_noise": len(columns) - data.d, "n_trees": f.n_trees_}
    row["knn_bin_acc"] = knn_scores(Etr, y_ref, Ete, y_eval, "cosine")[0]
    Z = standardise(Xs, split.train)
    row["knn_orig_acc"] = knn_scores(Z[split.train][split.ref], y_ref, Z[split.test][split.evl], y_eval,
                                     "euclidean")[0]
    ref, evl, _ = rf_paths(impute(Xs, split.train), y, split, f.n_trees_, seed)
    row["knn_rf_acc"] = knn_scores(ref, y_ref, evl, y_eval, "cosine")[0]
    return row


def run_unit(unit: Unit) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Parts (a), (b) and, if asked, (c) for one dataset and seed: the main row and the noise rows."""
    from streamforest.datasets import load_csv

    t0 = time.perf_counter()
    task = unit.task
    full = load_csv(Path(task.path), set(task.nominal), task.name, task.did)
    data = subsample(full, unit.max_n, unit.seed)
    split = make_split(data, unit.seed, unit.ref_cap, unit.eval_cap)
    head = {"dataset": task.name, "did": task.did, "seed": unit.seed, "n": full.n, "n_used": data.n, "d": data.d,
            "n_ref": len(split.ref), "n_eval": len(split.evl),
            "capped": len(split.ref) < len(split.train) or len(split.evl) < len(split.test)}
    row = main_run(data, split, unit.seed)
    noise_rows = []
    if unit.noise:
        base = {"level": 0.0, "n_noise": 0, "n_trees": row["n_trees"],
                **{k: row[k] for k in ("knn_bin_acc", "knn_orig_acc", "knn_rf_acc")}}
        noise_rows.append({**head, **base})
        for level in NOISE_LEVELS[1:]:
            noise_rows.append({**head, **noise_run(data, split, level, unit.seed)})
    return {**head, **row, "seconds": time.perf_counter() - t0}, noise_rows


# ---------------------------------------------------------------------------------------------- driver


def pool_init() -> None:
    """One single-threaded process per core: numba (as in paper_reproduction) and BLAS/OpenMP alike.

    The environment variable alone comes too late when the parent imported numba before forking (``make_tasks``
    imports ``streamforest``), so numba's thread count is also set at run time.
    """
    worker_init()
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(1)
    threadpool_limits(1)


def run_all(units: list[Unit], workers: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every unit, on ``workers`` processes (paper_reproduction's pattern), with a progress bar."""
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    noise: list[dict[str, Any]] = []
    if workers <= 1:
        for unit in tqdm(units, desc="runs", unit="run"):
            r, nr = run_unit(unit)
            rows.append(r)
            noise.extend(nr)
        return rows, noise
    with ProcessPoolExecutor(max_workers=workers, initializer=pool_init) as pool:
        futures = {pool.submit(run_unit, u): u for u in units}
        for fut in tqdm(as_completed(futures), total=len(futures), desc="dataset x seed", unit="run"):
            r, nr = fut.result()
            rows.append(r)
            noise.extend(nr)
    return rows, noise


def noise_names(data_dir: Path, eligible: set[int], how_many: int) -> set[int]:
    """The ``how_many`` largest datasets (by n) of at most ``NOISE_MAX_N`` samples among the eligible ones."""
    from streamforest.datasets import read_manifest

    rows = [r for r in read_manifest(data_dir) if int(r["did"]) in eligible and int(r["n"]) <= NOISE_MAX_N]
    rows.sort(key=lambda r: (-int(r["n"]), r["name"]))
    return {int(r["did"]) for r in rows[:how_many]}


def make_units(args: argparse.Namespace) -> tuple[list[Unit], list[str]]:
    """The runs to do (largest datasets first) and notes on what was excluded."""
    from streamforest.datasets import read_manifest

    names = set(args.datasets.split(",")) if args.datasets else (set(QUICK) if args.quick else None)
    n_seeds = args.seeds if args.seeds is not None else (QUICK_SEEDS if args.quick else 3)
    seeds = SEEDS[:n_seeds]
    small = {int(r["did"]): r["name"] for r in read_manifest(args.data_dir) if int(r["n"]) < MIN_N}
    tasks = [t for t in make_tasks(args.data_dir, names, seeds, False) if t.did not in small]
    notes = [f"excluded (n < {MIN_N}): {', '.join(sorted(v for k, v in small.items()))}"] if small else []
    if args.no_noise:
        noisy: set[int] = set()
    elif args.noise_datasets:
        noisy = {t.did for t in tasks if t.name in set(args.noise_datasets.split(","))}
    elif args.quick:
        noisy = {t.did for t in tasks if t.name in QUICK_NOISE}
    else:
        noisy = noise_names(args.data_dir, {t.did for t in tasks}, N_NOISE_DATASETS)
    units = [Unit(replace(t, seeds=(s,)), s, t.did in noisy, args.ref_cap, args.eval_cap, args.max_n)
             for t in tasks for s in seeds]
    # Noise runs are the longest: start them first so that the two workers finish together.
    units.sort(key=lambda u: not u.noise)
    return units, notes


# ---------------------------------------------------------------------------------------------- summary


def per_dataset(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means over seeds, one row per dataset (by OpenML id: two names occur twice)."""
    by: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["did"], []).append(r)
    out = []
    for _did, rs in sorted(by.items(), key=lambda kv: (kv[1][0]["dataset"], kv[0])):
        d: dict[str, Any] = {k: rs[0][k] for k in ("dataset", "did", "n", "d")}
        d["n_seeds"] = len(rs)
        for k, v in rs[0].items():
            if k in d or k == "seed" or isinstance(v, str):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                d[k] = float(np.nanmean([float(r[k]) for r in rs]))
        out.append(d)
    return out


def share(a: np.ndarray, b: np.ndarray, tol: float = 1e-6) -> tuple[float, float]:
    """Share of (non-NaN) datasets where ``a > b``, and where they tie (within ``tol``).

    The tolerance absorbs float summation order and the 10 significant digits of the TSVs; real differences in a
    mean accuracy over three seeds are at least 1/(3 * n_eval), i.e. 3e-4 or more.
    """
    ok = ~(np.isnan(a) | np.isnan(b))
    diff = a[ok] - b[ok]
    return float(np.mean(diff > tol)), float(np.mean(np.abs(diff) <= tol))


def col(per: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.array([d[key] for d in per], dtype=float)


def knn_table(per: list[dict[str, Any]]) -> list[str]:
    lines = ["| 1-NN space | mean accuracy | beats original (accuracy) | ties | mean AUC of 0/1 predictions | "
             "beats original (AUC) |", "|---|---|---|---|---|---|"]
    base_acc, base_auc = col(per, "knn_orig_acc"), col(per, "knn_orig_auc")
    for key, label in KNN_SPACES.items():
        acc, auc = col(per, f"{key}_acc"), col(per, f"{key}_auc")
        if key == "knn_orig":
            lines.append(f"| {label} | {np.nanmean(acc):.4f} | - | - | {np.nanmean(auc):.4f} | - |")
            continue
        win, tie = share(acc, base_acc)
        win_auc, _ = share(auc, base_auc)
        lines.append(f"| {label} | {np.nanmean(acc):.4f} | {win:.1%} | {tie:.1%} | {np.nanmean(auc):.4f} | "
                     f"{win_auc:.1%} |")
    return lines


def lr_table(per: list[dict[str, Any]]) -> list[str]:
    lines = ["| logistic regression on | mean test AUC | beats original | share of runs converged |",
             "|---|---|---|---|"]
    base = col(per, "lr_orig")
    for key, label in LR_SPACES.items():
        auc = col(per, key)
        conv = float(np.mean(col(per, f"{key}_converged")))
        win = "-" if key == "lr_orig" else f"{share(auc, base)[0]:.1%}"
        lines.append(f"| {label} | {np.nanmean(auc):.4f} | {win} | {conv:.1%} |")
    lines.append(f"| (the forest itself, predict_proba) | {np.nanmean(col(per, 'forest_auc')):.4f} | "
                 f"{share(col(per, 'forest_auc'), base)[0]:.1%} | - |")
    lines.append(f"| (the scikit-learn reference forest) | {np.nanmean(col(per, 'rf_auc')):.4f} | "
                 f"{share(col(per, 'rf_auc'), base)[0]:.1%} | - |")
    return lines


def size_table(per: list[dict[str, Any]]) -> list[str]:
    """Headline win share by dataset size."""
    lines = ["| datasets with (n before subsampling) | count | binary encoding beats original | "
             "scikit-learn exact beats original |",
             "|---|---|---|---|"]
    n = col(per, "n")
    for lo, hi in ((0, 200), (200, 1000), (1000, 5000), (5000, 10**9)):
        sel = [d for d, m in zip(per, n, strict=True) if lo <= m < hi]
        if not sel:
            continue
        label = f"{lo} <= n < {hi}" if hi < 10**9 else f"n >= {lo}"
        base = col(sel, "knn_orig_acc")
        lines.append(f"| {label} | {len(sel)} | {share(col(sel, 'knn_bin_acc'), base)[0]:.1%} | "
                     f"{share(col(sel, 'knn_rf_acc'), base)[0]:.1%} |")
    return lines


def noise_summary(noise: list[dict[str, Any]]) -> dict[float, dict[str, float]]:
    """Mean 1-NN accuracy per noise level and space: means over seeds per dataset, then over datasets."""
    out: dict[float, dict[str, float]] = {}
    for level in NOISE_LEVELS:
        rs = [r for r in noise if r["level"] == level]
        if not rs:
            continue
        per = per_dataset(rs)
        out[level] = {k: float(np.mean(col(per, f"{k}_acc"))) for k in ("knn_orig", "knn_bin", "knn_rf")}
        out[level]["datasets"] = len(per)
        out[level]["n_trees"] = float(np.mean(col(per, "n_trees")))
    return out


def noise_table(summary: dict[float, dict[str, float]]) -> list[str]:
    lines = ["| noise features | datasets | trees alive | 1-NN original | 1-NN induced (binary) | "
             "1-NN scikit-learn exact | original: change | induced: change |", "|---|---|---|---|---|---|---|---|"]
    base = summary.get(0.0)
    for level, s in summary.items():
        d_o = f"{s['knn_orig'] - base['knn_orig']:+.4f}" if base else ""
        d_b = f"{s['knn_bin'] - base['knn_bin']:+.4f}" if base else ""
        lines.append(f"| {level:.0%} | {s['datasets']:.0f} | {s['n_trees']:.0f} | {s['knn_orig']:.4f} | "
                     f"{s['knn_bin']:.4f} | {s['knn_rf']:.4f} | {d_o} | {d_b} |")
    return lines


def headline(per: list[dict[str, Any]]) -> str:
    base = col(per, "knn_orig_acc")
    ours, tie = share(col(per, "knn_bin_acc"), base)
    wtd = share(col(per, "knn_wtd_acc"), base)[0]
    ref = share(col(per, "knn_rf_acc"), base)[0]
    verdict = "PASS" if ours >= 0.6 else "FAIL"
    return (f"**Headline [{verdict}]**: 1-NN on the binary hashed encoding (cosine) is more accurate than 1-NN on the "
            f"standardised original features on **{ours:.1%}** of {len(per)} datasets (ties {tie:.1%}; target >= 60%). "
            f"Weighted encoding: {wtd:.1%}. Reference, exact scikit-learn decision_path of the same size, same runs: "
            f"{ref:.1%}.")


def summary_markdown(rows: list[dict[str, Any]], per: list[dict[str, Any]], noise: list[dict[str, Any]],
                     meta: dict[str, Any]) -> str:
    """The tables of ``summary.md``; ``meta`` holds the run's settings and timing (see :func:`run_meta`)."""
    seeds = sorted({int(r["seed"]) for r in rows})
    capped = sum(1 for d in per if d["capped"] > 0)
    big = sorted(d["dataset"] for d in per if d["n_used"] < d["n"])
    trees = col(per, "n_trees")
    parts = [
        "# Induced features: 1-NN and logistic regression on the forest's encoding vs the original features", "",
        f"{len(per)} datasets x {len(seeds)} seeds ({', '.join(map(str, seeds))}); stratified 2:1 split; features "
        f"streamed in a random order into `FeatureStreamForest(random_state=seed)` (default parameters: "
        f"{np.mean(trees):.0f} trees alive on average, {trees.min():.0f}..{trees.max():.0f}); encoding "
        f"`f.encode(X, n_components=2**{N_COMPONENTS.bit_length() - 1})`. Per dataset, means over seeds; a space "
        f"\"beats\" the original when its "
        f"mean is strictly higher.",
        f"1-NN reference set: at most {meta['ref_cap']} random training rows, evaluated on at most {meta['eval_cap']} "
        f"random "
        f"test rows (the same rows for every space; {capped} datasets are capped). Original space: NaN -> training "
        "median, standardised; nominal columns as integer codes. Headline metric for 1-NN: accuracy "
        "(Vens & Costa); the AUC of 0/1 predictions (= balanced accuracy) is shown beside it.",
        f"Datasets over {meta['max_n']} samples are subsampled (stratified, per seed) to {meta['max_n']} before the "
        f"split: {', '.join(big) if big else 'none'}." if meta["max_n"] else "No subsampling.",
        *meta["notes"], "", headline(per), "",
        "## (a) 1-NN", "", *knn_table(per), "", "By dataset size:", "", *size_table(per), "",
        "## (b) Logistic regression (max_iter=1000), test AUC", "", *lr_table(per), "",
    ]
    if noise:
        ns = noise_summary(noise)
        names = sorted({r["dataset"] for r in noise})
        parts += ["## (c) Noise (Vens & Costa): N(0,1) features added at random stream positions", "",
                  f"Datasets: {', '.join(names)}. Level = extra features as a share of d (rounded, at least 1).", "",
                  *noise_table(ns), "", "![noise](noise.png)", ""]
    load = "load average not recorded"
    if meta.get("load_start") is not None:
        load = f"load average (1 min) {meta['load_start']:.1f} at the start, {meta['load_end']:.1f} at the end"
    parts.append(f"Elapsed: {meta['elapsed_s']:.0f} s on {meta['workers']} worker(s); {load}; "
                 f"sum of per-run wall times {sum(r['seconds'] for r in rows):.0f} s.")
    return "\n".join(parts) + "\n"


def write_tsv(path: Path, rows: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(keys)
        for r in rows:
            w.writerow([f"{v:.10g}" if isinstance(v, float) else v for v in (r.get(k, "") for k in keys)])


def plot_noise(summary: dict[float, dict[str, float]], path: Path) -> None:
    from streamforest.optional import require

    matplotlib = require("matplotlib", "the induced-features plot")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = list(summary)
    x = np.arange(len(levels))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for key, label, style in (("knn_bin", "induced: streamforest encoding (binary, cosine)", "o-"),
                              ("knn_rf", "induced: scikit-learn decision_path (exact)", "s--"),
                              ("knn_orig", "original features (standardised)", "^-")):
        ax.plot(x, [summary[lv][key] for lv in levels], style, label=label)
    ax.set_xticks(x, [f"{lv:.0%}" for lv in levels])
    ax.set_xlabel("added N(0,1) noise features (share of d)")
    ax.set_ylabel("1-NN test accuracy (mean over datasets)")
    n = int(summary[levels[0]]["datasets"])
    ax.set_title(f"1-NN accuracy as noise grows ({n} datasets)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_tsv(path: Path) -> list[dict[str, Any]]:
    """Rows written by :func:`write_tsv`, numbers (and True/False) back as floats."""

    def value(v: str) -> Any:
        if v in ("True", "False"):
            return float(v == "True")
        try:
            return float(v)
        except ValueError:
            return v

    with open(path, newline="") as fh:
        return [{k: value(v) for k, v in r.items()} for r in csv.DictReader(fh, delimiter="\t")]


def run_meta(args: argparse.Namespace, notes: list[str], elapsed: float, load_start: float) -> dict[str, Any]:
    return {"elapsed_s": elapsed, "workers": args.workers, "ref_cap": args.ref_cap, "eval_cap": args.eval_cap,
            "max_n": args.max_n, "notes": notes, "load_start": load_start, "load_end": os.getloadavg()[0]}


def write_outputs(out: Path, rows: list[dict[str, Any]], per: list[dict[str, Any]], noise: list[dict[str, Any]],
                  text: str, meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    write_tsv(out / "runs.tsv", sorted(rows, key=lambda r: (r["dataset"], r["did"], r["seed"])))
    write_tsv(out / "per_dataset.tsv", per)
    if noise:
        write_tsv(out / "noise.tsv", sorted(noise, key=lambda r: (r["dataset"], r["did"], r["seed"], r["level"])))
        plot_noise(noise_summary(noise), out / "noise.png")
    (out / "summary.md").write_text(text)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=SHARED / "datasets" / "motl2019")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "induced")
    ap.add_argument("--quick", action="store_true", help=f"{len(QUICK)} small datasets, {QUICK_SEEDS} seeds")
    ap.add_argument("--bundled", action="store_true",
                    help="the datasets shipped inside the package instead of --data-dir (no shared/ needed)")
    ap.add_argument("--datasets", help="comma-separated dataset names")
    ap.add_argument("--seeds", type=int, default=None, help="how many of the seeds 2101.. (default 3)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--noise-datasets",
                    help="comma-separated names for part (c) (default: the 10 largest with n <= 2000)")
    ap.add_argument("--no-noise", action="store_true", help="skip part (c)")
    ap.add_argument("--ref-cap", type=int, default=REF_CAP, help="most training rows in the 1-NN reference set")
    ap.add_argument("--eval-cap", type=int, default=EVAL_CAP, help="most test rows 1-NN is evaluated on")
    ap.add_argument("--max-n", type=int, default=MAX_N, help="subsample larger datasets to this many rows (0: never)")
    ap.add_argument("--resummarise", action="store_true",
                    help="only rebuild summary.md and noise.png from the TSVs and run.json in --out")
    return ap.parse_args(argv)


def resummarise(out: Path) -> int:
    """Rebuild the summary and the plot from a finished run's files."""
    rows = read_tsv(out / "runs.tsv")
    noise = read_tsv(out / "noise.tsv") if (out / "noise.tsv").exists() else []
    meta = json.loads((out / "run.json").read_text())
    per = per_dataset(rows)
    text = summary_markdown(rows, per, noise, meta)
    write_outputs(out, rows, per, noise, text, meta)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.resummarise:
        return resummarise(args.out)
    if args.bundled:
        from streamforest.datasets import bundled_dir

        args.data_dir = bundled_dir()
    if not (args.data_dir / "MANIFEST.tsv").exists():
        print(f"no datasets at {args.data_dir} (use --bundled, or put shared/ beside the repository)", file=sys.stderr)
        return 2
    units, notes = make_units(args)
    if not units:
        print("no dataset matched", file=sys.stderr)
        return 2
    n_ds = len({u.task.did for u in units})
    print(f"{n_ds} datasets, {len(units)} runs ({sum(u.noise for u in units)} with noise) on {args.workers} worker(s)")
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    rows, noise = run_all(units, args.workers)
    meta = run_meta(args, notes, time.perf_counter() - start, load_start)
    per = per_dataset(rows)
    text = summary_markdown(rows, per, noise, meta)
    write_outputs(args.out, rows, per, noise, text, meta)
    print(text)
    print(f"outputs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
