"""The library's defaults against a strong offline forest on the paper's datasets, narrow ones above all.

The protocol of :mod:`scenarios.paper_reproduction` (for each dataset and seed: a stratified 2:1 train/test split,
a random permutation of the feature order, the features added one at a time, test AUC after the last one), with
``FeatureStreamForest()`` at its default parameters (the challenger) against scikit-learn's
``RandomForestClassifier(n_estimators=300, min_samples_leaf=5, max_features=2/3)`` fitted on all the features at
once (missing values imputed with the training median). Both see the same split in the same run.

The datasets are divided once and for all into two halves (by a CRC-32 of their name): ``--part tuning`` for
trying parameters, ``--part held-out`` for judging them, ``--part all`` for both. The report gives, per dataset,
both forests' mean AUC over the seeds, then the means, the share of datasets where ours is at least as good
(``>=``), and the same by number of features.

    python -m scenarios.low_dimensional                       # every dataset, 3 seeds, one process
    python -m scenarios.low_dimensional --part held-out --max-d 3
    python -m scenarios.low_dimensional --params '{"split_features": null}'   # ours with other parameters

Writes ``results/low_dimensional/per_dataset.tsv`` and ``report.md``. Targets: our mean AUC at least scikit-learn's,
and ours ``>=`` on at least 60% of the datasets. Choose parameters on some seeds and confirm them on others
(``--skip-seeds 2`` runs the seeds after the first two; ``--seed-from 9000 --seeds 20`` runs 20 splits of seeds none of
the paper's, for trying parameters on more splits of the tuning half).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scenarios.dataset_runs import REPO, SEEDS, SHARED, run_all_tasks, worker_init

PARTS = ("all", "tuning", "held-out")
#: The strong offline reference.
SKLEARN = {"n_estimators": 300, "min_samples_leaf": 5, "max_features": 2 / 3}
#: Ours must be at least as good as scikit-learn's forest on this share of the datasets.
SHARE_TARGET = 0.6
#: Groups of datasets in the report, by number of features.
WIDTHS = ((1, 3), (4, 9), (10, 10**9))


def part_of(name: str) -> str:
    """The fixed half a dataset belongs to."""
    return "held-out" if zlib.crc32(name.encode()) % 2 else "tuning"


@dataclass
class Task:
    path: str
    name: str
    did: int
    d: int
    nominal: tuple[str, ...]
    seeds: tuple[int, ...]
    params: dict[str, Any]


def compare(data: Any, train: np.ndarray, test: np.ndarray, order: list[str], seed: int,
            params: dict[str, Any] | None = None) -> tuple[float, float]:
    """Test AUC of ``FeatureStreamForest(**params)`` fed the features in ``order``, and of scikit-learn's forest."""
    from sklearn.ensemble import RandomForestClassifier

    from streamforest import FeatureStreamForest
    from streamforest.metrics import roc_auc

    f = FeatureStreamForest(**(params or {}), random_state=seed)
    for name in order:
        f.add_feature(name, data.columns[name][train], y=data.y[train], kind=data.kinds[name])
    ours = roc_auc(data.y[test], f.predict_proba({n: data.columns[n][test] for n in order})[:, 1])
    # scikit-learn cannot take NaN in every version: impute with the training median for the reference.
    X = data.X
    med = np.nanmedian(X[train], axis=0) if np.isnan(X[train]).any() else np.zeros(X.shape[1])
    X = np.where(np.isnan(X), np.where(np.isnan(med), 0.0, med), X)
    rf = RandomForestClassifier(**SKLEARN, n_jobs=1, random_state=seed).fit(X[train], data.y[train])
    return ours, roc_auc(data.y[test], rf.predict_proba(X[test])[:, 1])


def run_task(task: Task) -> list[dict]:
    from streamforest.datasets import load_csv, stratified_split

    data = load_csv(Path(task.path), set(task.nominal), task.name, task.did)
    names = list(data.columns)
    rows = []
    for seed in task.seeds:
        train, test = stratified_split(data.y, seed)
        order = [names[j] for j in np.random.default_rng(seed).permutation(len(names))]
        ours, ref = compare(data, train, test, order, seed, task.params)
        rows.append({"dataset": task.name, "did": task.did, "d": task.d, "seed": seed, "auc_ours": ours,
                     "auc_sklearn": ref})
    return rows


def make_tasks(data_dir: Path, part: str, max_d: int | None, names: set[str] | None, seeds: tuple[int, ...],
               params: dict[str, Any]) -> list[Task]:
    from streamforest.datasets import read_manifest

    tasks = []
    for row in read_manifest(data_dir):
        d = int(row["d"])
        if (names is not None and row["name"] not in names) or (max_d is not None and d > max_d):
            continue
        if part != "all" and part_of(row["name"]) != part:
            continue
        nominal = tuple(c for c in row["nominal_cols"].split(";") if c)
        tasks.append(Task(str(data_dir / row["file"]), row["name"], int(row["did"]), d, nominal, seeds, params))
    return sorted(tasks, key=lambda t: t.name)


def paired_se(differences: list[float]) -> float:
    """Standard error of the mean of a dataset's per-split differences (NaN with one split).

    Examples
    --------
    >>> round(paired_se([0.01, 0.03, -0.01]), 4), paired_se([0.5])
    (0.0115, nan)
    """
    d = np.asarray(differences, dtype=np.float64)
    return float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")


def summarise(rows: list[dict]) -> tuple[str, list[dict]]:
    """Per-dataset means over the seeds, the overall figures and the figures by width."""
    by_ds: dict[str, list[dict]] = {}
    for r in rows:
        by_ds.setdefault(r["dataset"], []).append(r)
    per = [{"dataset": name, "did": rs[0]["did"], "d": rs[0]["d"], "n_runs": len(rs),
            "auc_ours": float(np.mean([r["auc_ours"] for r in rs])),
            "auc_sklearn": float(np.mean([r["auc_sklearn"] for r in rs])),
            "se_difference": paired_se([r["auc_ours"] - r["auc_sklearn"] for r in rs])}
           for name, rs in sorted(by_ds.items())]
    lines = ["| datasets | n | ours | scikit-learn | difference | ours >= |", "|---|---|---|---|---|---|"]

    def line(label: str, ds: list[dict]) -> None:
        if not ds:
            return
        ours = np.array([d["auc_ours"] for d in ds])
        ref = np.array([d["auc_sklearn"] for d in ds])
        lines.append(f"| {label} | {len(ds)} | {ours.mean():.4f} | {ref.mean():.4f} | "
                     f"{ours.mean() - ref.mean():+.4f} | {np.mean(ours >= ref):.1%} |")

    line("all", per)
    for lo, hi in WIDTHS:
        line(f"{lo}-{hi} features" if hi < 10**9 else f">= {lo} features", [d for d in per if lo <= d["d"] <= hi])
    return "\n".join(lines), per


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=SHARED / "datasets" / "motl2019")
    ap.add_argument("--bundled", action="store_true",
                    help="the datasets shipped inside the package instead of --data-dir (no ../shared needed)")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "low_dimensional")
    ap.add_argument("--part", choices=PARTS, default="all", help="the fixed half of the datasets to run on")
    ap.add_argument("--max-d", type=int, help="only datasets with at most this many features")
    ap.add_argument("--datasets", help="comma-separated dataset names")
    ap.add_argument("--seeds", type=int, default=3, help="how many of the paper's seeds (2101, ...)")
    ap.add_argument("--skip-seeds", type=int, default=0,
                    help="start after this many of the paper's seeds (confirm on seeds other than those tuned on)")
    ap.add_argument("--seed-from", type=int,
                    help="seeds from this one on instead of the paper's (splits that neither tuning nor judging used)")
    ap.add_argument("--workers", type=int, default=1, help="processes (the machine may be shared: 1 by default)")
    ap.add_argument("--params", default="{}", help="JSON of FeatureStreamForest parameters for ours")
    args = ap.parse_args(argv)
    if args.bundled:
        from streamforest.datasets import bundled_dir

        args.data_dir = bundled_dir()

    if not (args.data_dir / "MANIFEST.tsv").exists():
        print(f"no datasets at {args.data_dir} (use --bundled, or put shared/ beside the repository)", file=sys.stderr)
        return 2
    params = json.loads(args.params)
    names = set(args.datasets.split(",")) if args.datasets else None
    seeds = SEEDS[args.skip_seeds : args.skip_seeds + args.seeds] if args.seed_from is None else tuple(
        range(args.seed_from + args.skip_seeds, args.seed_from + args.skip_seeds + args.seeds))
    tasks = make_tasks(args.data_dir, args.part, args.max_d, names, seeds, params)
    if not tasks:
        print("no dataset matched", file=sys.stderr)
        return 2
    print(f"{len(tasks)} datasets ({args.part}) x seeds {', '.join(map(str, seeds))} on {args.workers} worker(s); "
          f"ours: FeatureStreamForest({', '.join(f'{k}={v!r}' for k, v in params.items())}), reference: "
          f"RandomForestClassifier({', '.join(f'{k}={v!r}' for k, v in SKLEARN.items())}); "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    # One thread per process: the numba kernels would otherwise take every core of a shared machine.
    worker_init()
    start = time.perf_counter()
    rows = run_all_tasks(run_task, tasks, args.workers)
    elapsed = time.perf_counter() - start
    report, per = summarise(rows)
    print(f"{'dataset':<36} {'d':>3} {'ours':>7} {'sklearn':>7}")
    for d in per:
        print(f"{d['dataset']:<36} {d['d']:>3} {d['auc_ours']:>7.4f} {d['auc_sklearn']:>7.4f}"
              f"{'' if d['auc_ours'] >= d['auc_sklearn'] else '  <'}")
    print(report)
    ours = np.mean([d["auc_ours"] for d in per])
    ref = np.mean([d["auc_sklearn"] for d in per])
    share = np.mean([d["auc_ours"] >= d["auc_sklearn"] for d in per])
    diff = np.array([d["auc_ours"] - d["auc_sklearn"] for d in per])
    verdict = (f"targets: mean AUC ours {ours:.4f} >= scikit-learn {ref:.4f}: {'met' if ours >= ref else 'MISSED'}; "
               f"ours >= on {share:.1%} of datasets (>= {SHARE_TARGET:.0%}): "
               f"{'met' if share >= SHARE_TARGET else 'MISSED'}; worst ours - scikit-learn {diff.min():+.4f} "
               f"({per[int(np.argmin(diff))]['dataset']}); ours >= on {int((diff >= 0).sum())}, < on "
               f"{int((diff < 0).sum())}")
    # On test sets of a few dozen samples most datasets are level within the splits' noise: how many differ by more
    # than two standard errors of their paired differences says which side the share's coin flips hide.
    se = np.array([d["se_difference"] for d in per])
    if not np.isnan(se).all():
        verdict += (f"; beyond two standard errors of the paired differences over the seeds: ours ahead on "
                    f"{int((diff > 2 * se).sum())}, behind on {int((diff < -2 * se).sum())}")
    print(verdict)
    print(f"{len(rows)} runs in {elapsed:.0f} s; load average {os.getloadavg()[0]:.1f}")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "per_dataset.tsv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(per[0]), delimiter="\t")
        w.writeheader()
        w.writerows(per)
    (args.out / "report.md").write_text(f"# Library defaults vs a strong offline forest ({args.part})\n\n"
                                        f"ours: {json.dumps(params)}\n\n{report}\n\n{verdict}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
