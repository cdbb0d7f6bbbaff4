"""The River regressor against River's adaptive random forest regressor, in one run: progressive MAE and samples/s.

Progressive validation (predict each sample, then learn it) with ``metrics.MAE()`` and ``metrics.RMSE()`` on:

* River's bundled TrumpApproval (1,001 samples) and ChickWeights (578);
* synthetic generators of :data:`N_SYNTH` samples each: Planes2D and Friedman (stationary), and three of River's
  ``FriedmanDrift`` drifts: *lea* (local and expanding abrupt changes at 1,500, 3,000 and 4,500), *gra* (global
  recurring abrupt changes at 2,000 and 4,000: the second restores the first concept) and *gsg* (global and slow
  gradual changes around 2,000 and 4,000, each over 500 samples).

Ours is :class:`streamforest.connectors.river.ForestRegressor` with default parameters; the peer is
``preprocessing.StandardScaler() | forest.ARFRegressor()``, River's documented way to run it (its leaves fit linear
models by SGD, which diverge on unscaled inputs: on TrumpApproval alone its MAE runs into the billions). Both run
interleaved with the model seeds 1..``--reps`` on each generator seed of ``--data-seeds`` (the bundled datasets have
one draw). A row holds the median over the model seeds per data seed; after a drift stream's row come the MAE of
the :data:`AFTER` samples that follow each change (the recovery), ours and ARF's. Then, over every row, the worst and
the mean of ours' MAE over ARF's.

Target (``--check`` exits 1 if it fails): ours' MAE at most ARF's on every row.

    python -m scenarios.benchmarks.river_regression [--reps 3] [--data-seeds 1,2] [--only trump,friedman_gra]
        [--check]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets, forest, metrics, preprocessing
from river.datasets import synth

from scenarios.benchmarks.common import stream_arguments, stream_draws, stream_outcome
from streamforest.connectors.river import ForestRegressor

Sample = tuple[dict[str, Any], float]
N_SYNTH = 6000
#: The samples after each change whose MAE is the recovery.
AFTER = 500
#: Per stream: a description, the positions of its changes (none: stationary), and the samples of one data seed.
STREAMS: dict[str, tuple[str, tuple[int, ...], Callable[[int], list[Sample]]]] = {
    "trump": ("TrumpApproval (bundled)", (), lambda seed: list(datasets.TrumpApproval())),
    "chick": ("ChickWeights (bundled)", (), lambda seed: list(datasets.ChickWeights())),
    "planes": ("Planes2D", (), lambda seed: list(synth.Planes2D(seed=seed).take(N_SYNTH))),
    "friedman": ("Friedman #1", (), lambda seed: list(synth.Friedman(seed=seed).take(N_SYNTH))),
    "friedman_lea": ("FriedmanDrift, local expanding abrupt", (1500, 3000, 4500), lambda seed: list(
        synth.FriedmanDrift(drift_type="lea", position=(1500, 3000, 4500), seed=seed).take(N_SYNTH))),
    "friedman_gra": ("FriedmanDrift, global recurring abrupt", (2000, 4000), lambda seed: list(
        synth.FriedmanDrift(drift_type="gra", position=(2000, 4000), seed=seed).take(N_SYNTH))),
    "friedman_gsg": ("FriedmanDrift, global slow gradual over 500", (2000, 4000), lambda seed: list(
        synth.FriedmanDrift(drift_type="gsg", position=(2000, 4000), transition_window=500, seed=seed).take(N_SYNTH))),
}
#: The bundled datasets: one draw whatever the data seed.
BUNDLED = ("trump", "chick")


def arf(seed: int) -> Any:
    """The peer: River's adaptive random forest regressor behind a standard scaler, as River's docs run it."""
    return preprocessing.StandardScaler() | forest.ARFRegressor(seed=seed)


def progressive(model: Any, samples: list[Sample]) -> dict[str, Any]:
    """Predict each sample, then learn it: MAE, RMSE, samples per second and the absolute errors in order."""
    mae, rmse = metrics.MAE(), metrics.RMSE()
    errors = np.zeros(len(samples))
    start = time.perf_counter()
    for i, (x, y) in enumerate(samples):
        p = model.predict_one(x)
        mae.update(y, p)
        rmse.update(y, p)
        errors[i] = abs(y - p)
        model.learn_one(x, y)
    seconds = time.perf_counter() - start
    return {"mae": float(mae.get()), "rmse": float(rmse.get()), "sps": len(samples) / seconds, "errors": errors}


def after_changes(errors: np.ndarray, changes: tuple[int, ...], after: int = AFTER) -> list[float]:
    """The MAE of the ``after`` samples that follow each change."""
    return [float(errors[c:c + after].mean()) for c in changes]


def run_stream(name: str, data_seed: int, reps: int) -> dict[str, Any]:
    """Both models with the model seeds 1..``reps`` on one draw of ``name``: the medians over the seeds."""
    description, changes, load = STREAMS[name]
    samples = load(data_seed)
    runs: dict[str, list[dict]] = {"ours": [], "arf": []}
    for seed in range(1, reps + 1):
        for who, make in (("ours", ForestRegressor), ("arf", arf)):
            r = progressive(make(seed=seed), samples)
            r["after"] = after_changes(r.pop("errors"), changes)
            runs[who].append(r)
    row: dict[str, Any] = {"stream": name, "description": description, "data_seed": data_seed,
                           "n_samples": len(samples), "changes": list(changes)}
    for who, rs in runs.items():
        for key in ("mae", "rmse", "sps"):
            row[f"{key}_{who}"] = statistics.median(r[key] for r in rs)
        row[f"after_{who}"] = [statistics.median(r["after"][i] for r in rs) for i in range(len(changes))]
        row[f"runs_{who}"] = rs
    row["mae_ratio"] = row["mae_ours"] / row["mae_arf"]
    row["speed_ratio"] = row["sps_ours"] / row["sps_arf"]
    return row


def warm_up() -> None:
    """Load the numba kernels (cached on disk) outside the timings."""
    progressive(ForestRegressor(seed=0), list(synth.Friedman(seed=0).take(300)))


def main(argv: list[str] | None = None) -> int:
    args, names = stream_arguments(__doc__, argv, STREAMS, Path("results/benchmarks/river_regression.json"),
                                   "exit 1 if ours' MAE exceeds ARF's on a row", "the bundled datasets have")

    warm_up()
    print(f"ForestRegressor() against StandardScaler() | ARFRegressor(), model seeds 1..{args.reps} (medians)")
    print(f"{'stream':<14} {'seed':>4} {'MAE ours':>9} {'ARF':>9} {'ratio':>6} {'RMSE ours':>9} {'ARF':>9} "
          f"{'samples/s ours':>14} {'ARF':>6} {'ratio':>6}")
    rows = []
    for name, data_seed in stream_draws(names, args.data_seeds, BUNDLED):
        row = run_stream(name, data_seed, args.reps)
        rows.append(row)
        seed = "-" if name in BUNDLED else str(data_seed)
        print(f"{name:<14} {seed:>4} {row['mae_ours']:>9.4f} {row['mae_arf']:>9.4f} {row['mae_ratio']:>6.3f} "
              f"{row['rmse_ours']:>9.4f} {row['rmse_arf']:>9.4f} {row['sps_ours']:>14,.0f} "
              f"{row['sps_arf']:>6,.0f} {row['speed_ratio']:>6.1f}", flush=True)
        if row["changes"]:
            print(f"{'':<19} MAE of the {AFTER} samples after each change (ours / ARF): " + ", ".join(
                f"{c:,} {o:.3f} / {a:.3f}" for c, o, a in zip(row["changes"], row["after_ours"], row["after_arf"],
                                                              strict=True)), flush=True)
    ratios = np.array([r["mae_ratio"] for r in rows])
    after = np.array([o / a for r in rows for o, a in zip(r["after_ours"], r["after_arf"], strict=True)])
    missed = [f"{r['stream']}:{r['data_seed']}" for r in rows if r["mae_ratio"] > 1]
    print(f"MAE ours / ARF over {len(rows)} rows: worst {ratios.max():.3f}, mean {ratios.mean():.3f}, "
          f"ours <= ARF on {int((ratios <= 1).sum())}"
          + (f"; after a change: worst {after.max():.3f}, mean {after.mean():.3f}, ours <= ARF on "
             f"{int((after <= 1).sum())} of {after.size}" if after.size else ""))

    import river

    return stream_outcome(args, {"river": river.__version__},
                          {"ours": "ForestRegressor() defaults", "arf": "StandardScaler() | ARFRegressor() defaults",
                           "metric": "MAE (progressive validation)", "rows": rows}, missed, "MAE above ARF's")


if __name__ == "__main__":
    sys.exit(main())
