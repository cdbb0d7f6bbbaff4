"""Benchmark: the engine's feature-arrival latency and its scoring throughput (issue 4, "Benchmarks").

What it measures, all in one process:

1. **Feature-arrival latency** (message in -> feedback out) at n = 100,000 samples (``make_classification``,
   70% labelled, 30% unlabelled: the scoring set), through :meth:`Engine.process` on the serialized ``feature``
   message, with the engine's defaults (``publish="unlabelled"``, ``encoding="leaves"``, 2^18 components). One
   ``samples`` message declares the samples; ``--warmup`` features arrive untimed (the forest starts, numba
   compiles or loads its cache); then ``--arrivals`` more features are timed, each a new generation. Every arrival
   is split into **training** (the engine's ``streamforest_training_seconds``: growing the generation, bookkeeping,
   out-of-bag scores), **publishing** (predictions + encodings of the scoring set and their records; of which
   **encoding** is the engine's ``streamforest_encoding_seconds``) and **other** (decoding and checking the
   message, storing the column). ``process`` returns the feedback record together with the republication, so the
   latency to feedback out is the whole call. The serialization of the records to JSON, which the embedded
   runtime does next, is timed apart. Two forest configurations: the library defaults
   (``trees_per_generation=50, max_depth=16``) and the paper's (``trees_per_generation=30, max_depth=6``).
2. **Scoring throughput**: unlabelled samples per second predicted and encoded, on the forest left by part 1 and
   its 30,000 unlabelled samples: the raw cost of the forest's own ``predict_proba`` + ``encode`` on the same
   batch (the engine's own input mapping, built beforehand) against the engine answering a ``control``
   ``snapshot`` message (``Engine.process``: records as dicts) and against the embedded runtime
   (``streamforest.engine.runtime.run`` reading snapshot lines and writing JSONL files). The issue's aim: the
   engine at >= 70% of the raw throughput. Leaves (the default) and, for comparison, paths encodings (skipped when
   their records would not fit ``--paths-budget`` entries).

Latencies are medians over the timed arrivals (each arrival is a different feature, so they are not repeats of
one thing: the forest grows until pruning bounds it); throughputs are medians of ``--repeats`` runs with the
methods interleaved. The machine may be shared: the load average is recorded.

Run it from the repository root::

    .venv/bin/python -m scenarios.benchmarks.engine            # n = 100,000 (tens of minutes on 2 busy CPUs)
    .venv/bin/python -m scenarios.benchmarks.engine --quick    # n = 20,000 (a few minutes on 2 busy CPUs)

Results are printed and written to ``results/benchmarks/engine.json`` (``engine_quick.json`` with ``--quick``).
The exit code is 0 whatever the results: it is a report.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import sklearn
from prometheus_client import Histogram
from sklearn.datasets import make_classification

from scenarios.benchmarks import common
from streamforest.engine import records
from streamforest.engine.core import Engine, EngineConfig
from streamforest.engine.messages import decode
from streamforest.engine.runtime import OUTPUT_FILES, run
from streamforest.engine.state import StreamState

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "results" / "benchmarks"
STREAM = "bench"
LABELLED_SHARE = 0.7
THROUGHPUT_TARGET = 0.70
PARAMS = {
    "default": {},
    "paper": {"trees_per_generation": 30, "max_depth": 6},
}


@dataclass(frozen=True)
class Config:
    """Sizes of one run."""

    n: int
    warmup: int
    arrivals: int
    repeats: int
    quick: bool


FULL = Config(n=100_000, warmup=3, arrivals=5, repeats=3, quick=False)
QUICK = Config(n=20_000, warmup=2, arrivals=3, repeats=3, quick=True)


class TimedEngine(Engine):
    """The engine, with the time spent republishing (predictions, encodings and their records) accumulated."""

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config)
        self.publish_seconds = 0.0

    def _publish(self, st: StreamState) -> list[dict[str, Any]]:
        start = time.perf_counter()
        try:
            return super()._publish(st)
        finally:
            self.publish_seconds += time.perf_counter() - start


def histogram_sum(h: Histogram) -> float:
    """The ``_sum`` sample of a prometheus histogram: total seconds observed."""
    for metric in h.collect():
        for sample in metric.samples:
            if sample.name.endswith("_sum"):
                return float(sample.value)
    return 0.0


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# ---------------------------------------------------------------------------------------------- messages


def make_messages(n: int, n_features: int, seed: int) -> tuple[bytes, list[bytes]]:
    """The serialized ``samples`` message (70% labelled) and one ``feature`` message per column."""
    X, y = make_classification(n_samples=n, n_features=n_features, n_informative=min(8, n_features),
                               n_redundant=0, random_state=seed)
    rng = np.random.default_rng(seed)
    labelled = np.zeros(n, dtype=bool)
    labelled[rng.permutation(n)[: round(LABELLED_SHARE * n)]] = True
    ids = [str(i) for i in range(n)]
    samples = orjson.dumps({"v": 1, "type": "samples", "stream": STREAM, "samples": [
        {"id": sid, "label": int(lab) if keep else None}
        for sid, lab, keep in zip(ids, y.tolist(), labelled.tolist(), strict=True)]})
    features = [orjson.dumps({"v": 1, "type": "feature", "stream": STREAM, "name": f"f{j}", "ids": ids,
                              "values": X[:, j].tolist(), "kind": "numeric"}) for j in range(n_features)]
    return samples, features


def snapshot_message() -> bytes:
    return orjson.dumps({"v": 1, "type": "control", "stream": STREAM, "op": "snapshot"})


# ---------------------------------------------------------------------------------------------- part 1: latency


def timed_arrival(engine: TimedEngine, raw: bytes) -> dict[str, Any]:
    """One feature message through ``Engine.process``, with its time split."""
    gc.collect()
    t0 = time.perf_counter()
    decode(raw)
    decode_s = time.perf_counter() - t0
    train0 = histogram_sum(engine.metrics.training_seconds)
    enc0 = histogram_sum(engine.metrics.encoding_seconds)
    engine.publish_seconds = 0.0
    t0 = time.perf_counter()
    out = engine.process(raw, "bench")
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    lines = [orjson.dumps(r) for r in out]
    serialize_s = time.perf_counter() - t0
    errors = [r["reason"] for r in out if r["type"] == "error"]
    if errors:
        raise RuntimeError(f"the engine refused a benchmark message: {errors[0]}")
    fb = next(r for r in out if r["type"] == "feedback")
    training = histogram_sum(engine.metrics.training_seconds) - train0
    publishing = engine.publish_seconds
    return {
        "feature": fb["feature"], "generation": fb["generation"], "model_version": fb["model_version"],
        "n_trees": engine.streams[STREAM].forest.n_trees_,
        "n_generations": len(engine.streams[STREAM].forest.generations_),
        "records": len(out), "output_bytes": sum(len(line) + 1 for line in lines), "message_bytes": len(raw),
        "total_s": total, "training_s": training, "publishing_s": publishing,
        "encoding_s": histogram_sum(engine.metrics.encoding_seconds) - enc0,
        "other_s": total - training - publishing, "decode_s": decode_s, "serialize_s": serialize_s,
        "oob_before": fb["oob_before"], "oob_after": fb["oob_after"],
    }


def bench_latency(cfg: Config, params: dict[str, Any], seed: int) -> tuple[TimedEngine, dict[str, Any]]:
    """Samples, ``warmup`` untimed arrivals, ``arrivals`` timed ones; returns the engine (for part 2) and results."""
    samples, features = make_messages(cfg.n, cfg.warmup + cfg.arrivals, seed)
    engine = TimedEngine(EngineConfig(forest={**params, "random_state": seed}))
    t0 = time.perf_counter()
    out = engine.process(samples, "bench")
    samples_s = time.perf_counter() - t0
    assert not out, out
    t0 = time.perf_counter()
    for raw in features[: cfg.warmup]:
        engine.process(raw, "bench")
    warmup_s = time.perf_counter() - t0
    arrivals = []
    for raw in features[cfg.warmup:]:
        a = timed_arrival(engine, raw)
        arrivals.append(a)
        print(f"    {a['feature']:>4} gen {a['generation']:>2} ({a['n_trees']:>4} trees): total {a['total_s']:7.3f} s"
              f" = training {a['training_s']:7.3f} + publishing {a['publishing_s']:7.3f} (encoding "
              f"{a['encoding_s']:.3f}) + other {a['other_s']:.3f};  serialize {a['serialize_s']:.3f} s,"
              f" {a['output_bytes'] / 1e6:.0f} MB out", flush=True)
    keys = ("total_s", "training_s", "publishing_s", "encoding_s", "other_s", "decode_s", "serialize_s")
    summary = {f"median_{k}": median([a[k] for a in arrivals]) for k in keys}
    summary["publishing_share"] = summary["median_publishing_s"] / summary["median_total_s"]
    return engine, {"samples_message_s": samples_s, "warmup_s": warmup_s, "arrivals": arrivals, **summary}


# ---------------------------------------------------------------------------------------------- part 2: throughput


def raw_scoring(engine: Engine, X: dict[str, np.ndarray], leaves_only: bool) -> tuple[float, float, Any, Any]:
    """The forest's own ``predict_proba`` and ``encode`` on the engine's batch: seconds and results."""
    forest = engine.streams[STREAM].forest
    cfg = engine.config
    t0 = time.perf_counter()
    proba = forest.predict_proba(X)
    t1 = time.perf_counter()
    E = forest.encode(X, n_components=cfg.n_components, values=cfg.encoding_values, leaves_only=leaves_only)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, proba, E


def runtime_scoring(engine: Engine, directory: Path, repeats: int) -> tuple[float, int]:
    """``runtime.run`` over ``repeats`` snapshot lines into JSONL files: seconds per snapshot, bytes per snapshot."""
    src = directory / "snapshots.jsonl"
    src.write_bytes((snapshot_message() + b"\n") * repeats)
    out = directory / "out"
    gc.collect()
    t0 = time.perf_counter()
    run(str(src), str(out), engine=engine)
    seconds = (time.perf_counter() - t0) / repeats
    size = sum((out / name).stat().st_size for name in OUTPUT_FILES.values()) // repeats
    for name in OUTPUT_FILES.values():
        (out / name).unlink()
    return seconds, size


def paths_entries(engine: Engine, X: dict[str, np.ndarray], n: int) -> float:
    """Expected entries of the paths encodings of ``n`` samples, from the first 500."""
    head = {k: v[:500] for k, v in X.items()}
    E = engine.streams[STREAM].forest.encode(head, n_components=engine.config.n_components)
    return E.nnz / E.shape[0] * n


def bench_throughput(engine: TimedEngine, repeats: int, paths_budget: float) -> dict[str, Any]:
    """Samples/s of the raw forest, of ``Engine.process(snapshot)`` and of the embedded runtime; leaves and paths.

    Paths encodings are skipped when they would hold more than ``paths_budget`` entries: the records of each entry
    take tens of bytes as Python objects, and the machine's memory is shared.
    """
    st = engine.streams[STREAM]
    rows = st.scoring_rows(engine.config.publish)
    X = st.rows_matrix(rows)
    ids = [st.ids[r] for r in rows]
    version = st.forest.model_version_
    n = int(rows.size)
    result: dict[str, Any] = {"n_scored": n, "n_trees": st.forest.n_trees_, "repeats": repeats}
    snapshot = snapshot_message()
    encodings = ["leaves"]
    expected = paths_entries(engine, X, n)
    if expected <= paths_budget:
        encodings.append("paths")
    else:
        result["paths"] = {"skipped": f"{expected:,.0f} entries expected, over the budget of {paths_budget:,.0f} "
                                      "(--paths-budget)"}
    for encoding in encodings:
        eng = engine if encoding == engine.config.encoding else Engine(EngineConfig(**{
            **engine.config.to_json(), "encoding": encoding}))
        eng.streams = engine.streams
        t: dict[str, list[float]] = {k: [] for k in ("predict", "encode", "prediction_records", "encoding_records",
                                                     "engine", "runtime")}
        nnz = 0
        runtime_bytes = 0
        with tempfile.TemporaryDirectory(prefix="sf-engine-bench-") as tmp:
            for _ in range(repeats):
                gc.collect()
                p_s, e_s, proba, E = raw_scoring(eng, X, encoding == "leaves")
                t["predict"].append(p_s)
                t["encode"].append(e_s)
                nnz = int(E.nnz)
                t0 = time.perf_counter()
                records.predictions(STREAM, ids, version, st.forest.classes_, proba)
                t["prediction_records"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                records.encodings(STREAM, ids, version, E)
                t["encoding_records"].append(time.perf_counter() - t0)
                del proba, E
                gc.collect()
                t0 = time.perf_counter()
                out = eng.process(snapshot, "bench")
                t["engine"].append(time.perf_counter() - t0)
                assert len(out) == 2 * n, (len(out), n)
                del out
                seconds, runtime_bytes = runtime_scoring(eng, Path(tmp), 1)
                t["runtime"].append(seconds)
        med = {k: median(v) for k, v in t.items()}
        raw = med["predict"] + med["encode"]
        result[encoding] = {
            "timings_s": t, "median_s": med, "nnz_per_sample": nnz / n, "runtime_bytes_per_snapshot": runtime_bytes,
            "raw_samples_per_s": n / raw, "engine_samples_per_s": n / med["engine"],
            "runtime_samples_per_s": n / med["runtime"],
            "engine_over_raw": raw / med["engine"], "runtime_over_raw": raw / med["runtime"],
            "records_share_of_engine": (med["prediction_records"] + med["encoding_records"]) / med["engine"],
        }
    result["meets_target"] = result["leaves"]["engine_over_raw"] >= THROUGHPUT_TARGET
    return result


# ---------------------------------------------------------------------------------------------- report


def print_latency(name: str, params: dict[str, Any], lat: dict[str, Any], n: int) -> None:
    print(f"\n  feature-arrival latency, {name} params {params or '(library defaults)'}, n = {n:,} "
          f"(median of {len(lat['arrivals'])} arrivals)")
    print(f"  {'total':>9} {'training':>9} {'publish':>9} {'(encode)':>9} {'other':>9} {'(decode)':>9}"
          f" {'serialize':>9}  publish share")
    print(f"  {lat['median_total_s']:9.3f} {lat['median_training_s']:9.3f} {lat['median_publishing_s']:9.3f}"
          f" {lat['median_encoding_s']:9.3f} {lat['median_other_s']:9.3f} {lat['median_decode_s']:9.3f}"
          f" {lat['median_serialize_s']:9.3f}  {lat['publishing_share']:.0%}")


def print_throughput(thr: dict[str, Any]) -> None:
    print(f"\n  scoring throughput: {thr['n_scored']:,} unlabelled samples, {thr['n_trees']} trees "
          f"(median of {thr['repeats']})")
    print(f"  {'encoding':<8} {'predict':>8} {'encode':>8} {'raw/s':>10} {'pred rec':>9} {'enc rec':>9}"
          f" {'engine':>8} {'engine/s':>10} {'ratio':>6} {'runtime':>8} {'runtime/s':>10} {'ratio':>6} {'nnz':>6}")
    for encoding in ("leaves", "paths"):
        r = thr[encoding]
        if "skipped" in r:
            print(f"  {encoding:<8} skipped: {r['skipped']}")
            continue
        m = r["median_s"]
        print(f"  {encoding:<8} {m['predict']:8.3f} {m['encode']:8.3f} {r['raw_samples_per_s']:10,.0f}"
              f" {m['prediction_records']:9.3f} {m['encoding_records']:9.3f} {m['engine']:8.3f}"
              f" {r['engine_samples_per_s']:10,.0f} {r['engine_over_raw']:6.0%} {m['runtime']:8.3f}"
              f" {r['runtime_samples_per_s']:10,.0f} {r['runtime_over_raw']:6.0%} {r['nnz_per_sample']:6.0f}")
    verdict = "meets" if thr["meets_target"] else "misses"
    print(f"  engine (leaves) at {thr['leaves']['engine_over_raw']:.0%} of raw: {verdict} the "
          f">= {THROUGHPUT_TARGET:.0%} aim")


def environment() -> dict[str, Any]:
    return common.environment({"scikit-learn": sklearn.__version__, "orjson": orjson.__version__})


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 20,000, fewer arrivals")
    parser.add_argument("--n", type=int, default=None, help="samples (default 100,000; 20,000 with --quick)")
    parser.add_argument("--arrivals", type=int, default=None, help="timed feature arrivals per configuration")
    parser.add_argument("--warmup", type=int, default=None, help="untimed arrivals first (at least 1)")
    parser.add_argument("--repeats", type=int, default=None, help="throughput timings per method (at least 3)")
    parser.add_argument("--params", choices=(*PARAMS, "both"), default="both", help="forest configurations")
    parser.add_argument("--paths-budget", type=float, default=20e6,
                        help="skip the paths throughput when its encodings would hold more entries than this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="where to write the JSON results")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    base = QUICK if args.quick else FULL
    cfg = Config(n=args.n or base.n, warmup=max(1, args.warmup or base.warmup),
                 arrivals=max(1, args.arrivals or base.arrivals), repeats=max(3, args.repeats or base.repeats),
                 quick=base.quick)
    output = args.output or RESULTS_DIR / ("engine_quick.json" if cfg.quick else "engine.json")
    names = list(PARAMS) if args.params == "both" else [args.params]
    env = environment()
    print(f"streamforest engine benchmark ({'quick' if cfg.quick else 'full'}): n = {cfg.n:,} "
          f"({LABELLED_SHARE:.0%} labelled), {cfg.warmup} warm-up + {cfg.arrivals} timed arrivals; "
          f"{env['cpu_count']} CPUs, numba {env['numba_threads']} threads, load average {env['load_average'][0]:.2f}")
    t0 = time.perf_counter()
    results: dict[str, Any] = {"config": asdict(cfg), "labelled_share": LABELLED_SHARE, "environment": env,
                               "throughput_target": THROUGHPUT_TARGET, "runs": {}}
    for name in names:
        params = PARAMS[name]
        print(f"\n[{name}] forest params {params or '(library defaults)'}")
        engine, lat = bench_latency(cfg, params, args.seed)
        thr = bench_throughput(engine, cfg.repeats, args.paths_budget)
        results["runs"][name] = {"forest_params": {**params, "random_state": args.seed}, "latency": lat,
                                 "throughput": thr}
        print_latency(name, params, lat, cfg.n)
        print_throughput(thr)
        del engine
        gc.collect()
    results["seconds"] = time.perf_counter() - t0
    results["load_average_end"] = list(os.getloadavg())
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults written to {output} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
