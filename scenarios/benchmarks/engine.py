"""Benchmark: the engine's feature-arrival latency and its scoring throughput (issue 4, "Benchmarks").

What it measures, all in one process:

1. **Feature-arrival latency** (message in -> feedback out) at n = 100,000 samples (``make_classification``,
   70% labelled, 30% unlabelled: the scoring set), through :meth:`Engine.process_batches` on the serialized
   ``feature`` message, with the engine's defaults (``publish="unlabelled"``, ``encoding="leaves"``, 2^18
   components). One
   ``samples`` message declares the samples; ``--warmup`` features arrive untimed (the forest starts, numba
   compiles or loads its cache); then ``--arrivals`` more features are timed, each a new generation. Every arrival
   is split into **training** (the engine's ``streamforest_training_seconds``: growing the generation, bookkeeping,
   out-of-bag scores), **publishing** (predictions + encodings of the scoring set and their records; of which
   **encoding** is the engine's ``streamforest_encoding_seconds``) and **other** (decoding and checking the
   message, storing the column). The feedback comes in the first batch, the republication after it; the latency
   counted is the whole message. The serialization of the records to JSON lines, which a sink does
   next, is timed apart. Two forest configurations: the library defaults
   (``trees_per_generation="auto"``, 50 trees on the 70,000 training samples, ``max_depth=16``) and the paper's
   (``trees_per_generation=30, max_depth=6``).
2. **Scoring throughput**: unlabelled samples per second predicted and encoded, on the forest left by part 1 and
   its 30,000 unlabelled samples, printed side by side for both configurations: the **raw** forest's own
   ``predict_proba`` + ``encode`` on the same batch (the engine's own input mapping, built beforehand); the
   **engine** answering a ``control`` ``snapshot`` through :meth:`Engine.process_batches`, its record batches
   rendered to JSON lines (the records as a sink writes them; also timed without rendering, and through
   :meth:`Engine.process`, every record a dict as before batches); and the **embedded runtime**
   (``streamforest.engine.runtime.run`` reading a snapshot line and writing JSONL files). The issue's aims: the
   engine at >= 70% of the raw throughput with the paper's parameters, >= 85% with the defaults. Leaves (the
   default) and, for comparison, paths encodings (skipped when their dict records would not fit
   ``--paths-budget`` entries).

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
from collections.abc import Iterator, Sequence
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

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "results" / "benchmarks"
STREAM = "bench"
LABELLED_SHARE = 0.7
#: The issue's aims for the engine's share of the raw forest's scoring throughput.
THROUGHPUT_TARGETS = {"default": 0.85, "paper": 0.70}
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
    """The engine, with the time spent republishing (predictions, encodings and their batches) accumulated."""

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config)
        self.publish_seconds = 0.0

    def _republication(self, *args: Any) -> Iterator[records.RecordBatch]:
        batches = super()._republication(*args)
        while True:
            start = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            finally:
                self.publish_seconds += time.perf_counter() - start
            yield batch


def consume(engine: Engine, raw: bytes, render: bool) -> tuple[list[dict[str, Any]], int, int, float]:
    """One message through :meth:`Engine.process_batches`: its plain records, records and bytes out, and the
    seconds spent serializing them (``render``: JSON lines, as a sink does; else the batches are only built)."""
    plain: list[dict[str, Any]] = []
    n_bytes = 0
    seconds = 0.0
    n = 0
    for batch in engine.process_batches(raw, "bench"):
        n += len(batch)
        start = time.perf_counter()
        if isinstance(batch, records.RecordBatch):
            if render:
                n_bytes += len(batch.jsonl())
        else:
            plain += batch
            n_bytes += sum(len(orjson.dumps(r)) + 1 for r in batch)
        seconds += time.perf_counter() - start
    return plain, n, n_bytes, seconds


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
    out, n_records, n_bytes, serialize_s = consume(engine, raw, render=True)
    total = time.perf_counter() - t0 - serialize_s
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
        "records": n_records, "output_bytes": n_bytes, "message_bytes": len(raw),
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


def bench_throughput(engine: TimedEngine, repeats: int, paths_budget: float, target: float) -> dict[str, Any]:
    """Samples/s of the raw forest, of the engine and of the embedded runtime; leaves and paths.

    Raw: the forest's ``predict_proba`` + ``encode`` of the whole scoring set. Engine: a ``control`` ``snapshot``
    through :meth:`Engine.process_batches`, its batches rendered to JSON lines (the records as a sink writes them);
    also without rendering (the batches only) and through :meth:`Engine.process` (every record a dict, in one
    list: the engine's output before batches). Runtime: ``runtime.run`` on a snapshot line, into JSONL files. The
    dict records of the whole set are also timed apart (what building them cost before batches).

    Paths encodings are skipped when they would hold more than ``paths_budget`` entries: the dict records of each
    entry take tens of bytes as Python objects, and the machine's memory is shared.
    """
    st = engine.streams[STREAM]
    rows = st.scoring_rows(engine.config.publish)
    X = st.rows_matrix(rows)
    ids = [st.ids[r] for r in rows]
    version = st.forest.model_version_
    n = int(rows.size)
    result: dict[str, Any] = {"n_scored": n, "n_trees": st.forest.n_trees_, "repeats": repeats,
                              "chunk_size": engine.chunk_size, "target": target}
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
        t: dict[str, list[float]] = {k: [] for k in ("predict", "encode", "dict_records", "batches", "engine",
                                                     "engine_dicts", "runtime")}
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
                records.encodings(STREAM, ids, version, E)
                t["dict_records"].append(time.perf_counter() - t0)
                del proba, E
                gc.collect()
                t0 = time.perf_counter()
                _, n_records, _, _ = consume(eng, snapshot, render=False)
                t["batches"].append(time.perf_counter() - t0)
                assert n_records == 2 * n, (n_records, n)
                gc.collect()
                t0 = time.perf_counter()
                consume(eng, snapshot, render=True)
                t["engine"].append(time.perf_counter() - t0)
                gc.collect()
                t0 = time.perf_counter()
                out = eng.process(snapshot, "bench")
                t["engine_dicts"].append(time.perf_counter() - t0)
                assert len(out) == 2 * n, (len(out), n)
                del out
                gc.collect()
                seconds, runtime_bytes = runtime_scoring(eng, Path(tmp), 1)
                t["runtime"].append(seconds)
        med = {k: median(v) for k, v in t.items()}
        raw = med["predict"] + med["encode"]
        result[encoding] = {
            "timings_s": t, "median_s": med, "nnz_per_sample": nnz / n, "runtime_bytes_per_snapshot": runtime_bytes,
            "raw_samples_per_s": n / raw, "engine_samples_per_s": n / med["engine"],
            "runtime_samples_per_s": n / med["runtime"],
            "batches_over_raw": raw / med["batches"], "engine_over_raw": raw / med["engine"],
            "engine_dicts_over_raw": raw / med["engine_dicts"], "runtime_over_raw": raw / med["runtime"],
        }
    result["meets_target"] = result["leaves"]["engine_over_raw"] >= target
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
    print(f"\n  scoring throughput: {thr['n_scored']:,} unlabelled samples, {thr['n_trees']} trees, chunks of "
          f"{thr['chunk_size']:,} (seconds, median of {thr['repeats']}; ratio = raw seconds / seconds)")
    print(f"  {'encoding':<8} {'predict':>8} {'encode':>8} {'raw/s':>9} | {'batches':>8} {'ratio':>6} | {'engine':>8}"
          f" {'engine/s':>9} {'ratio':>6} | {'runtime':>8} {'runtime/s':>9} {'ratio':>6} | {'dicts':>7} {'ratio':>6}"
          f" {'(dict records)':>14} {'nnz':>5}")
    for encoding in ("leaves", "paths"):
        r = thr[encoding]
        if "skipped" in r:
            print(f"  {encoding:<8} skipped: {r['skipped']}")
            continue
        m = r["median_s"]
        print(f"  {encoding:<8} {m['predict']:8.3f} {m['encode']:8.3f} {r['raw_samples_per_s']:9,.0f} |"
              f" {m['batches']:8.3f} {r['batches_over_raw']:6.0%} | {m['engine']:8.3f}"
              f" {r['engine_samples_per_s']:9,.0f} {r['engine_over_raw']:6.0%} | {m['runtime']:8.3f}"
              f" {r['runtime_samples_per_s']:9,.0f} {r['runtime_over_raw']:6.0%} | {m['engine_dicts']:7.3f}"
              f" {r['engine_dicts_over_raw']:6.0%} {m['dict_records']:14.3f} {r['nnz_per_sample']:5.0f}")
    verdict = "meets" if thr["meets_target"] else "misses"
    print(f"  engine (leaves, batches rendered to JSON lines) at {thr['leaves']['engine_over_raw']:.0%} of raw: "
          f"{verdict} the >= {thr['target']:.0%} aim; runtime at {thr['leaves']['runtime_over_raw']:.0%}")


def print_summary(runs: dict[str, Any]) -> None:
    """Both configurations side by side: samples/s of the raw forest, the engine and the runtime (leaves)."""
    print("\n  summary (leaves encodings; samples/s, and share of the raw forest's):")
    print(f"  {'params':<8} {'raw/s':>9} {'engine/s':>9} {'share':>6} {'aim':>5} {'runtime/s':>10} {'share':>6}"
          f" {'before (dicts)':>15}")
    for name, run_ in runs.items():
        thr = run_["throughput"]
        r = thr["leaves"]
        print(f"  {name:<8} {r['raw_samples_per_s']:9,.0f} {r['engine_samples_per_s']:9,.0f}"
              f" {r['engine_over_raw']:6.0%} {thr['target']:5.0%} {r['runtime_samples_per_s']:10,.0f}"
              f" {r['runtime_over_raw']:6.0%} {r['engine_dicts_over_raw']:15.0%}")


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
                               "throughput_targets": THROUGHPUT_TARGETS, "runs": {}}
    for name in names:
        params = PARAMS[name]
        print(f"\n[{name}] forest params {params or '(library defaults)'}")
        engine, lat = bench_latency(cfg, params, args.seed)
        thr = bench_throughput(engine, cfg.repeats, args.paths_budget, THROUGHPUT_TARGETS[name])
        results["runs"][name] = {"forest_params": {**params, "random_state": args.seed}, "latency": lat,
                                 "throughput": thr}
        print_latency(name, params, lat, cfg.n)
        print_throughput(thr)
        del engine
        gc.collect()
    print_summary(results["runs"])
    results["seconds"] = time.perf_counter() - t0
    results["load_average_end"] = list(os.getloadavg())
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults written to {output} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
