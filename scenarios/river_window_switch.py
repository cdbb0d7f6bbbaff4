"""The classifier's ways to learn from more samples than one window holds, against one window and ARF.

On the streams of :mod:`scenarios.benchmarks.river_families` (binary and multiclass), progressive validation (test,
then train) of ``ForestClassifier(window_growth=1)`` (one window of 2,000), ``ForestClassifier()`` (the default: the
window grows up to 4,000 while the forest is not stale), ``ForestClassifier(long_window=2.0)`` (a window of 2,000 and
one of 4,000, the one with fewer recent errors predicting, see ``connectors/river/pair.py``) and River's
``ARFClassifier``, all with the same model seed. Prints the errors and seconds per stream, the totals, and where
each way errs more than the one window and than ARF.

    python -m scenarios.river_window_switch [--only sine02_gradual,sine0] [--data-seeds 1,2] [--model-seed 1]
        [--no-arf]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from river import forest

from scenarios.benchmarks.river_families import STREAMS
from streamforest.connectors.river import ForestClassifier

ONE, GROWING, PAIR, ARF = "window_growth=1", "default (growing)", "long_window=2", "ARF"


def errors_and_seconds(model: Any, samples: list[tuple[dict, Any]]) -> tuple[int, float]:
    """Errors of progressive validation of ``model`` on ``samples`` and the seconds it took."""
    errors = 0
    start = time.perf_counter()
    for x, y in samples:
        errors += model.predict_one(x) != y
        model.learn_one(x, y)
    return errors, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated stream names (default: every stream)")
    ap.add_argument("--data-seeds", default="1,2")
    ap.add_argument("--model-seed", type=int, default=1)
    ap.add_argument("--no-arf", action="store_true", help="skip River's ARFClassifier (the slowest part)")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(STREAMS)
    unknown = sorted(set(names) - set(STREAMS))
    if unknown:
        ap.error(f"unknown streams {unknown}; known: {sorted(STREAMS)}")
    seed = args.model_seed
    models: dict[str, Callable[[], Any]] = {ONE: lambda: ForestClassifier(seed=seed, window_growth=1.0),
                                            GROWING: lambda: ForestClassifier(seed=seed),
                                            PAIR: lambda: ForestClassifier(seed=seed, long_window=2.0)}
    if not args.no_arf:
        models[ARF] = lambda: forest.ARFClassifier(seed=seed)
    errors_and_seconds(models[PAIR](), STREAMS["sine0"][1](0)[:500])  # compile the kernels outside the timings
    print(f"errors of progressive validation (seconds), model seed {seed}")
    print(f"{'stream':<20} {'seed':>4} " + " ".join(f"{c:>20}" for c in models))
    totals = {c: [0, 0.0] for c in models}
    rows = []
    for name in names:
        for data_seed in (int(s) for s in args.data_seeds.split(",")):
            samples = STREAMS[name][1](data_seed)
            got = {c: errors_and_seconds(make(), samples) for c, make in models.items()}
            for c, (e, s) in got.items():
                totals[c][0] += e
                totals[c][1] += s
            rows.append((name, data_seed, got))
            print(f"{name:<20} {data_seed:>4} " + " ".join(f"{e:>12} ({s:5.1f})" for e, s in got.values()),
                  flush=True)
    print(f"{'total':<25} " + " ".join(f"{e:>12} ({s:5.1f})" for e, s in totals.values()))
    e_one, s_one = totals[ONE]
    for way in (GROWING, PAIR):
        print(f"{way} / {ONE}: errors {totals[way][0] / e_one:.4f}, seconds {totals[way][1] / s_one:.2f}")
        for peer in [c for c in (ONE, ARF) if c in models]:
            diffs = sorted(((got[way][0] - got[peer][0], name, ds) for name, ds, got in rows), reverse=True)
            more = [d for d in diffs if d[0] > 0]
            print(f"{way} errs more than {peer} on {len(more)} of {len(diffs)} streams; worst {diffs[0][0]:+d} "
                  f"({diffs[0][1]} {diffs[0][2]}), best {diffs[-1][0]:+d} ({diffs[-1][1]} {diffs[-1][2]})")
    if ARF in models:
        one_more = sum(got[ONE][0] > got[ARF][0] for _, _, got in rows)
        print(f"{ONE} errs more than {ARF} on {one_more} of {len(rows)} streams")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
