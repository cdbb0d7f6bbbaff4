"""Would a short and a long window, chosen by their recent errors, beat the adapter's one window? A measurement for
the River adapter's design, not a benchmark of something it does.

On the binary streams of :mod:`scenarios.benchmarks.river_families`, progressive validation (test, then train) of
``ForestClassifier()`` (window 2,000), ``ForestClassifier(window_size=4000)`` and River's ``ARFClassifier``; then a
switcher that predicts each sample with whichever window made fewer errors over the last ``k`` scored samples (past
information only, as an online chooser would have it). Prints the errors per stream and in total.

    python -m scenarios.river_window_switch [--only sine02_gradual,sine0] [--data-seeds 1,2] [--model-seed 1]
        [--k 100,300,1000] [--no-arf]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from river import forest

from scenarios.benchmarks.river_families import BINARY
from streamforest.connectors.river import ForestClassifier

#: The adapter's default window and the long one it is paired with.
SHORT_WINDOW = 2000
LONG_WINDOW = 4000


def correct(model: Any, samples: list[tuple[dict, Any]]) -> np.ndarray:
    """Per sample, whether ``model`` predicted it right before learning it."""
    out = np.zeros(len(samples), dtype=bool)
    for i, (x, y) in enumerate(samples):
        out[i] = model.predict_one(x) == y
        model.learn_one(x, y)
    return out


def switched(short: np.ndarray, long: np.ndarray, k: int) -> np.ndarray:
    """Per sample, whether the switcher was right: it takes ``long``'s prediction when ``long`` made fewer errors
    than ``short`` over the ``k`` samples scored before it.

    Examples
    --------
    >>> short = np.array([True, False, False, True, True])
    >>> long = np.array([True, True, True, False, True])
    >>> switched(short, long, k=2).tolist()  # long has erred less over the two samples before the third and fourth
    [True, False, True, False, True]
    """
    errors_short = np.concatenate([[0], np.cumsum(~short)])
    errors_long = np.concatenate([[0], np.cumsum(~long)])
    i = np.arange(len(short))
    lo = np.maximum(0, i - k)
    use_long = errors_long[i] - errors_long[lo] < errors_short[i] - errors_short[lo]
    return np.where(use_long, long, short)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated stream names (default: every binary stream)")
    ap.add_argument("--data-seeds", default="1,2")
    ap.add_argument("--model-seed", type=int, default=1)
    ap.add_argument("--k", default="100,300,1000", help="comma-separated look-backs of the switcher")
    ap.add_argument("--no-arf", action="store_true", help="skip River's ARFClassifier (the slowest part)")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(BINARY)
    unknown = sorted(set(names) - set(BINARY))
    if unknown:
        ap.error(f"unknown streams {unknown}; known: {sorted(BINARY)}")
    ks = [int(k) for k in args.k.split(",")]
    models: dict[str, Callable[[], Any]] = {
        f"window {SHORT_WINDOW}": lambda: ForestClassifier(seed=args.model_seed, window_size=SHORT_WINDOW),
        f"window {LONG_WINDOW}": lambda: ForestClassifier(seed=args.model_seed, window_size=LONG_WINDOW)}
    if not args.no_arf:
        models["ARF"] = lambda: forest.ARFClassifier(seed=args.model_seed)
    columns = [*models, *(f"switch k={k}" for k in ks)]
    print(f"errors of progressive validation, model seed {args.model_seed}")
    print(f"{'stream':<20} {'seed':>4} " + " ".join(f"{c:>13}" for c in columns))
    totals = dict.fromkeys(columns, 0)
    for name in names:
        for data_seed in (int(s) for s in args.data_seeds.split(",")):
            samples = BINARY[name][1](data_seed)
            right = {label: correct(make(), samples) for label, make in models.items()}
            short, long = right[f"window {SHORT_WINDOW}"], right[f"window {LONG_WINDOW}"]
            right.update({f"switch k={k}": switched(short, long, k) for k in ks})
            errors = {c: int((~right[c]).sum()) for c in columns}
            for c in columns:
                totals[c] += errors[c]
            print(f"{name:<20} {data_seed:>4} " + " ".join(f"{errors[c]:>13}" for c in columns), flush=True)
    print(f"{'total':<25} " + " ".join(f"{totals[c]:>13}" for c in columns))
    base = totals[f"window {SHORT_WINDOW}"]
    print(f"total / window {SHORT_WINDOW}: " + ", ".join(f"{c} {totals[c] / base:.4f}" for c in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
