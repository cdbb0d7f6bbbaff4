"""The River classifier against River's adaptive random forest on stream families no setting was chosen on.

Every constant of the adapter's drift handling was chosen on STAGGER, SEA and Agrawal changes
(``scenarios.benchmarks.river``). This benchmark runs the same comparison on generators and drifts none of them
was looked at on, to see whether the figures hold beyond the cases they were built for:

* binary: Sine (functions 0 -> 1 and 2 -> 3 abruptly at mid-stream; 0 -> 2 over 500 samples; balanced with noise,
  stationary; functions 0 and 2 stationary, the concepts of the gradual change on their own), Mixed (0 -> 1
  abruptly; over 300 samples at 3,000), Hyperplane rotating ten times faster than in the main benchmark, with 5%
  noise, RandomTree (numeric and nominal features), Agrawal functions 1 -> 3 over 500 and 5 -> 8 abruptly, SEA
  variants 1 -> 2 over 1,000 samples, STAGGER 1 -> 0 abruptly at 800, and STAGGER through four concepts (0, 1, 2,
  0, abruptly at 1,000, 2,000 and 3,000);
* multiclass: River's bundled ImageSegments (7 classes), RandomRBF (6 classes, 15 features), RandomTree (4 classes)
  and LEDDrift switching abruptly from no drifting feature to 3.

With ``--changes``, changes of other shapes instead (``--only`` takes the names of either set):

* binary: a RandomTree concept swapped for another RandomTree's, abruptly at 2,000 and over 600 samples at 2,500;
  a RandomRBF concept swapped for another's; Agrawal 2 -> 6 with features perturbed by 10%; SEA 0 -> 3 over 400
  samples and SEA 1 -> 2 abruptly, both with 10% label noise; Mixed 1 -> 0 over 1,500 samples; Sine 1 -> 3 with two
  noise features; STAGGER 2 -> 1 with balanced classes over 300 samples; Agrawal 0 -> 1 -> 2 (abrupt, at 1,500 and
  3,000); Agrawal 3 -> 9;
* multiclass: RandomRBF swapped for another (4 classes), RandomTree swapped for another over 300 samples (3 classes).

Each generator draws from ``data_seed`` (a change's second concept from the next seed; a swapped generator's concept
from ``data_seed + 100``). Ours (:class:`streamforest.connectors.river.ForestClassifier`, with ``--long-window`` its
``long_window``) and ``river.forest.ARFClassifier``, both with default parameters, run interleaved with the model
seeds 1..``--reps`` on the same samples (predict, then learn). A binary row holds the means over the model seeds of
River's ``ROCAUC`` (10 thresholds), the exact ROC AUC of the same predictions, accuracy and log loss; a multiclass row
accuracy and Cohen's kappa; both the samples per second and their ratio. The summary counts, per metric, the rows
where ours is at least ARF's, with the worst and the mean difference.

Target (``--check`` exits 1 if one fails): ours' accuracy at least ARF's on every row.

    python -m scenarios.benchmarks.river_families [--reps 3] [--data-seeds 1,2] [--only sine01,imagesegments]
        [--changes] [--check] [--long-window 2]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets, forest
from river.datasets import synth

from scenarios.benchmarks.common import (
    add_window_arguments,
    stream_arguments,
    stream_draws,
    stream_outcome,
    window_options,
)
from scenarios.benchmarks.river import exact_auc, led_drift, multiclass_score, progressive, switch, warm_up
from streamforest.connectors.river import ForestClassifier

Sample = tuple[dict[str, Any], Any]
N = 5000


def _gradual(first: Any, second: Any, position: int, width: int, seed: int) -> list[Sample]:
    return list(synth.ConceptDriftStream(first, second, seed=seed, position=position, width=width).take(N))


#: Per stream: a description and the samples of one data seed ``s``.
BINARY: dict[str, tuple[str, Callable[[int], list[Sample]]]] = {
    "sine01": ("Sine 0 -> 1, abrupt at 2,500", lambda s: switch((synth.Sine(0, seed=s), N // 2),
                                                                (synth.Sine(1, seed=s + 1), N // 2))),
    "sine23": ("Sine 2 -> 3, abrupt at 2,500", lambda s: switch((synth.Sine(2, seed=s), N // 2),
                                                                (synth.Sine(3, seed=s + 1), N // 2))),
    "sine02_gradual": ("Sine 0 -> 2 over 500 at 2,500",
                       lambda s: _gradual(synth.Sine(0, seed=s), synth.Sine(2, seed=s + 1), 2500, 500, s + 2)),
    "sine_noise": ("Sine 1, balanced, noise", lambda s: list(
        synth.Sine(1, balance_classes=True, has_noise=True, seed=s).take(N))),
    "sine0": ("Sine 0, stationary", lambda s: list(synth.Sine(0, seed=s).take(N))),
    "sine2": ("Sine 2, stationary", lambda s: list(synth.Sine(2, seed=s).take(N))),
    "mixed01": ("Mixed 0 -> 1, abrupt at 2,500", lambda s: switch((synth.Mixed(0, seed=s), N // 2),
                                                                  (synth.Mixed(1, seed=s + 1), N // 2))),
    "mixed01_gradual": ("Mixed 0 -> 1 over 300 at 3,000",
                        lambda s: _gradual(synth.Mixed(0, seed=s), synth.Mixed(1, seed=s + 1), 3000, 300, s + 2)),
    "hyperplane_fast": ("Hyperplane, 10 features, 5 drifting at 0.01, 5% noise", lambda s: list(
        synth.Hyperplane(seed=s, n_features=10, n_drift_features=5, mag_change=0.01, noise_percentage=0.05).take(N))),
    "randomtree": ("RandomTree, 5 numeric and 3 nominal features, depth 5", lambda s: list(
        synth.RandomTree(seed_tree=s, seed_sample=s + 1, n_classes=2, n_num_features=5, n_cat_features=3,
                         max_tree_depth=5).take(N))),
    "agrawal13_gradual": ("Agrawal 1 -> 3 over 500 at 2,500", lambda s: _gradual(
        synth.Agrawal(1, seed=s), synth.Agrawal(3, seed=s + 1), 2500, 500, s + 2)),
    "agrawal58": ("Agrawal 5 -> 8, abrupt at 2,500", lambda s: switch((synth.Agrawal(5, seed=s), N // 2),
                                                                      (synth.Agrawal(8, seed=s + 1), N // 2))),
    "sea12_gradual": ("SEA 1 -> 2 over 1,000 at 2,000",
                      lambda s: _gradual(synth.SEA(1, seed=s), synth.SEA(2, seed=s + 1), 2000, 1000, s + 2)),
    "stagger10_early": ("STAGGER 1 -> 0, abrupt at 800", lambda s: switch((synth.STAGGER(1, seed=s), 800),
                                                                          (synth.STAGGER(0, seed=s + 1), N - 800))),
    "stagger_three": ("STAGGER 0 -> 1 -> 2 -> 0 at 1,000, 2,000, 3,000", lambda s: switch(
        (synth.STAGGER(0, seed=s), 1000), (synth.STAGGER(1, seed=s + 1), 1000), (synth.STAGGER(2, seed=s + 2), 1000),
        (synth.STAGGER(0, seed=s + 3), N - 3000))),
}
MULTICLASS: dict[str, tuple[str, Callable[[int], list[Sample]]]] = {
    "imagesegments": ("ImageSegments (bundled, 7 classes, one draw)", lambda s: list(datasets.ImageSegments())),
    "randomrbf6": ("RandomRBF, 6 classes, 15 features, 30 centroids", lambda s: list(
        synth.RandomRBF(seed_model=s, seed_sample=s + 1, n_classes=6, n_features=15, n_centroids=30).take(N))),
    "randomtree4": ("RandomTree, 4 classes, 6 numeric and 2 nominal features, depth 6", lambda s: list(
        synth.RandomTree(seed_tree=s, seed_sample=s + 1, n_classes=4, n_num_features=6, n_cat_features=2,
                         max_tree_depth=6).take(N))),
    "led03": ("LEDDrift 0 -> 3 drifting features, abrupt at 2,500", lambda s: switch(
        (led_drift(0, s), N // 2), (led_drift(3, s + 1), N // 2))),
}
STREAMS = {**BINARY, **MULTICLASS}
#: One draw whatever the data seed.
BUNDLED = ("imagesegments",)


def _random_tree(s: int, classes: int, numeric: int, nominal: int, seed_sample: int) -> synth.RandomTree:
    return synth.RandomTree(seed_tree=s, seed_sample=seed_sample, n_classes=classes, n_num_features=numeric,
                            n_cat_features=nominal, max_tree_depth=5)


def _rbf(s: int, classes: int, features: int, seed_sample: int) -> synth.RandomRBF:
    return synth.RandomRBF(seed_model=s, seed_sample=seed_sample, n_classes=classes, n_features=features,
                           n_centroids=20)


#: Changes of other shapes (``--changes``): a generator's concept swapped for another draw of the same generator
#: (every split or centroid moves), label noise through a change, a slow change, a chain of three concepts.
CHANGES_BINARY: dict[str, tuple[str, Callable[[int], list[Sample]]]] = {
    "randomtree_swap": ("RandomTree -> another, 4 numeric and 2 nominal features, abrupt at 2,000", lambda s: switch(
        (_random_tree(s, 2, 4, 2, s + 1), 2000), (_random_tree(s + 100, 2, 4, 2, s + 2), N - 2000))),
    "randomtree_swap_gradual": ("RandomTree -> another, over 600 at 2,500", lambda s: _gradual(
        _random_tree(s, 2, 4, 2, s + 1), _random_tree(s + 100, 2, 4, 2, s + 2), 2500, 600, s + 3)),
    "randomrbf_swap": ("RandomRBF -> another, 10 features, abrupt at 2,500", lambda s: switch(
        (_rbf(s, 2, 10, s + 1), N // 2), (_rbf(s + 100, 2, 10, s + 2), N // 2))),
    "agrawal26_perturbed": ("Agrawal 2 -> 6, features perturbed by 10%, abrupt at 1,500", lambda s: switch(
        (synth.Agrawal(2, perturbation=0.1, seed=s), 1500),
        (synth.Agrawal(6, perturbation=0.1, seed=s + 1), N - 1500))),
    "sea03_noise_gradual": ("SEA 0 -> 3, 10% label noise, over 400 at 2,000", lambda s: _gradual(
        synth.SEA(0, noise=0.1, seed=s), synth.SEA(3, noise=0.1, seed=s + 1), 2000, 400, s + 2)),
    "sea12_noise": ("SEA 1 -> 2, 10% label noise, abrupt at 2,500", lambda s: switch(
        (synth.SEA(1, noise=0.1, seed=s), N // 2), (synth.SEA(2, noise=0.1, seed=s + 1), N // 2))),
    "mixed10_slow": ("Mixed 1 -> 0 over 1,500 at 2,500", lambda s: _gradual(
        synth.Mixed(1, seed=s), synth.Mixed(0, seed=s + 1), 2500, 1500, s + 2)),
    "sine13_noise": ("Sine 1 -> 3, two noise features, abrupt at 1,800", lambda s: switch(
        (synth.Sine(1, has_noise=True, seed=s), 1800), (synth.Sine(3, has_noise=True, seed=s + 1), N - 1800))),
    "stagger21_balanced": ("STAGGER 2 -> 1, balanced classes, over 300 at 2,200", lambda s: _gradual(
        synth.STAGGER(2, balance_classes=True, seed=s), synth.STAGGER(1, balance_classes=True, seed=s + 1), 2200,
        300, s + 2)),
    "agrawal012": ("Agrawal 0 -> 1 -> 2 at 1,500 and 3,000", lambda s: switch(
        (synth.Agrawal(0, seed=s), 1500), (synth.Agrawal(1, seed=s + 1), 1500), (synth.Agrawal(2, seed=s + 2),
                                                                                N - 3000))),
    "agrawal39": ("Agrawal 3 -> 9, abrupt at 2,500", lambda s: switch(
        (synth.Agrawal(3, seed=s), N // 2), (synth.Agrawal(9, seed=s + 1), N // 2))),
}
CHANGES_MULTICLASS: dict[str, tuple[str, Callable[[int], list[Sample]]]] = {
    "randomrbf4_swap": ("RandomRBF -> another, 4 classes, 8 features, abrupt at 2,500", lambda s: switch(
        (_rbf(s, 4, 8, s + 1), N // 2), (_rbf(s + 100, 4, 8, s + 2), N // 2))),
    "randomtree3_swap_gradual": ("RandomTree -> another, 3 classes, 5 numeric features, over 300 at 2,500", lambda s: (
        _gradual(_random_tree(s, 3, 5, 0, s + 1), _random_tree(s + 100, 3, 5, 0, s + 2), 2500, 300, s + 3))),
}
CHANGES = {**CHANGES_BINARY, **CHANGES_MULTICLASS}
_ALL = {**STREAMS, **CHANGES}
_BINARY = {*BINARY, *CHANGES_BINARY}


def log_loss(samples: list[Sample], probas: list[dict]) -> float:
    """Mean negative log probability of the true class (probabilities clipped at 1e-15; no prediction: log 2)."""
    return statistics.fmean(-math.log(min(max(p.get(y, 0.0), 1e-15), 1.0)) if p else math.log(2)
                            for p, (_, y) in zip(probas, samples, strict=True))


def binary_run(model: Any, samples: list[Sample]) -> dict[str, float]:
    """River's ROCAUC, the exact ROC AUC, accuracy, log loss and samples per second of progressive validation."""
    probas: list[dict] = []
    start = time.perf_counter()
    auc, acc, _ = progressive(model, samples, probas)
    sps = len(samples) / (time.perf_counter() - start)
    return {"rocauc": auc, "exact_auc": exact_auc(samples, probas), "accuracy": acc,
            "log_loss": log_loss(samples, probas), "sps": sps}


def multiclass_run(model: Any, samples: list[Sample]) -> dict[str, float]:
    """Accuracy, Cohen's kappa and samples per second of progressive validation."""
    acc, kappa, sps = multiclass_score(model, samples)
    return {"accuracy": acc, "kappa": kappa, "sps": sps}


def run_stream(name: str, data_seed: int, reps: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Both models with the model seeds 1..``reps`` on one draw of ``name`` (ours with ``options``): the means
    over the seeds."""
    description, load = _ALL[name]
    samples = load(data_seed)
    run = binary_run if name in _BINARY else multiclass_run
    runs: dict[str, list[dict]] = {"ours": [], "arf": []}
    for seed in range(1, reps + 1):
        runs["ours"].append(run(ForestClassifier(seed=seed, **(options or {})), samples))
        runs["arf"].append(run(forest.ARFClassifier(seed=seed), samples))
    row: dict[str, Any] = {"stream": name, "description": description, "data_seed": data_seed,
                           "binary": name in _BINARY, "n_samples": len(samples)}
    for who, rs in runs.items():
        for key in rs[0]:
            row[f"{key}_{who}"] = statistics.fmean(r[key] for r in rs)
        row[f"runs_{who}"] = rs
    row["speed_ratio"] = row["sps_ours"] / row["sps_arf"]
    return row


def summary(rows: list[dict], key: str, lower_is_better: bool = False) -> str:
    """Over the rows with ``key``: where ours is at least as good as ARF, the worst and the mean difference."""
    diffs = np.array([(r[f"{key}_arf"] - r[f"{key}_ours"]) if lower_is_better else (r[f"{key}_ours"] - r[f"{key}_arf"])
                      for r in rows if f"{key}_ours" in r])
    if not diffs.size:
        return ""
    return (f"{key}: ours at least ARF's on {int((diffs >= 0).sum())} of {diffs.size}, "
            f"worst {diffs.min():+.4f}, mean {diffs.mean():+.4f}" + (" (ARF's less ours')" if lower_is_better else ""))


def main(argv: list[str] | None = None) -> int:
    def extra(ap: argparse.ArgumentParser) -> None:
        add_window_arguments(ap)
        ap.add_argument("--changes", action="store_true",
                        help=f"the changes of other shapes ({', '.join(CHANGES)}) rather than the families")

    args, names = stream_arguments(__doc__, argv, _ALL, Path("results/benchmarks/river_families.json"),
                                   "exit 1 if ours' accuracy is below ARF's on a row", "ImageSegments has",
                                   extra=extra, default="the families; with --changes, the changes")
    if not args.only:
        names = list(CHANGES if args.changes else STREAMS)

    warm_up()
    print(f"ForestClassifier() against ARFClassifier(), model seeds 1..{args.reps} (means)")
    print(f"{'stream':<24} {'seed':>4} {'ROCAUC ours':>11} {'ARF':>6} {'exact AUC ours':>14} {'ARF':>6} "
          f"{'accuracy ours':>13} {'ARF':>6} {'log loss / kappa ours':>21} {'ARF':>6} {'samples/s ours':>14} "
          f"{'ARF':>6} {'ratio':>5}")
    rows = []
    for name, data_seed in stream_draws(names, args.data_seeds, BUNDLED):
        r = run_stream(name, data_seed, args.reps, window_options(args))
        rows.append(r)
        seed = "-" if name in BUNDLED else str(data_seed)
        if r["binary"]:
            aucs = f"{r['rocauc_ours']:>11.4f} {r['rocauc_arf']:>6.4f} {r['exact_auc_ours']:>14.4f} " \
                   f"{r['exact_auc_arf']:>6.4f}"
            third = f"{r['log_loss_ours']:>21.4f} {r['log_loss_arf']:>6.4f}"
        else:
            aucs = f"{'':>11} {'':>6} {'':>14} {'':>6}"
            third = f"{r['kappa_ours']:>21.4f} {r['kappa_arf']:>6.4f}"
        print(f"{name:<24} {seed:>4} {aucs} {r['accuracy_ours']:>13.4f} {r['accuracy_arf']:>6.4f} {third} "
              f"{r['sps_ours']:>14,.0f} {r['sps_arf']:>6,.0f} {r['speed_ratio']:>5.1f}", flush=True)
    for line in (summary(rows, "rocauc"), summary(rows, "exact_auc"), summary(rows, "accuracy"),
                 summary(rows, "log_loss", lower_is_better=True), summary(rows, "kappa")):
        if line:
            print(line)
    ratios = [r["speed_ratio"] for r in rows]
    print(f"samples/s ours / ARF: {min(ratios):.1f}-{max(ratios):.1f}x")

    import river

    missed = [f"{r['stream']}:{r['data_seed']}" for r in rows if r["accuracy_ours"] < r["accuracy_arf"]]
    return stream_outcome(args, {"river": river.__version__}, {"ours": "ForestClassifier() defaults",
                                                                **window_options(args),
                                                                "arf": "ARFClassifier() defaults", "rows": rows},
                          missed, "accuracy below ARF's")


if __name__ == "__main__":
    sys.exit(main())
