"""Benchmark: peak memory of republishing 100,000 scored samples (issue 10, "bounded memory").

One input, per forest configuration (the paper's parameters and the library defaults): a ``samples`` message of
``--scored`` unlabelled ids (the scoring set) and ``--train`` labelled ones, ``--features`` feature messages (each
a model change: a republication of the whole scoring set) and a ``control`` ``snapshot`` (one more). Each run is
a fresh subprocess, so its peak resident set size (``ru_maxrss``) is its own; outputs go to ``/dev/null`` through
stdout, serialized as they would be to files. Two ways of running the same input, in the same run:

* **batches**: the embedded runtime (``streamforest.engine.runtime.run``), which writes each message's records
  batch by batch (:meth:`Engine.process_batches`): memory holds one chunk of the republication at a time;
* **whole list** (the peer: how the runtime worked before batches): :meth:`Engine.process` returns every record
  of a message as dicts, then they are written. Skipped with ``--skip-whole``: it takes gigabytes.

The goal: the batches' peak at most 1 GiB for 100,000 published samples. The baseline (the process after its imports,
before the input) is printed too, with the peak's increment per published sample.

    .venv/bin/python -m scenarios.benchmarks.publish_memory            # 100,000 scored samples
    .venv/bin/python -m scenarios.benchmarks.publish_memory --scored 20000 --skip-whole

Results are printed and written to ``results/benchmarks/publish_memory.json``; the exit code is 1 if the batches'
peak misses the goal.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from sklearn.datasets import make_classification

from scenarios.benchmarks import common

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "benchmarks" / "publish_memory.json"
GOAL_BYTES = 2**30
STREAM = "mem"
PARAMS = {"paper": {"trees_per_generation": 30, "max_depth": 6}, "default": {}}
MODES = ("batches", "whole")


def write_input(path: Path, scored: int, train: int, features: int, seed: int) -> None:
    """Samples (``train`` labelled, then ``scored`` unlabelled), the feature messages, a snapshot."""
    n = scored + train
    X, y = make_classification(n_samples=n, n_features=features, n_informative=min(features, 5), n_redundant=0,
                               random_state=seed)
    ids = [str(i) for i in range(n)]
    with open(path, "wb") as fh:
        rows = [{"id": sid, "label": int(lab) if i < train else None}
                for i, (sid, lab) in enumerate(zip(ids, y.tolist(), strict=True))]
        fh.write(orjson.dumps({"v": 1, "type": "samples", "stream": STREAM, "samples": rows}) + b"\n")
        for j in range(features):
            fh.write(orjson.dumps({"v": 1, "type": "feature", "stream": STREAM, "name": f"f{j}", "ids": ids,
                                   "values": X[:, j].tolist(), "kind": "numeric"}) + b"\n")
        fh.write(orjson.dumps({"v": 1, "type": "control", "stream": STREAM, "op": "snapshot"}) + b"\n")


def peak_rss() -> int:
    """This process's peak resident set size, in bytes (Linux reports kibibytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(input_path: str, params: str, mode: str, seed: int) -> dict[str, Any]:
    """One run in this process: the input through the engine, records serialized to stdout."""
    from streamforest.engine.core import Engine, EngineConfig
    from streamforest.engine.runtime import run

    config = EngineConfig(forest={**PARAMS[params], "random_state": seed})
    baseline = peak_rss()
    published = 0
    start = time.perf_counter()
    if mode == "batches":
        engine = run(input_path, "-", config=config)
    else:
        engine = Engine(config)
        out = sys.stdout.buffer
        with open(input_path, "rb") as fh:
            for line in fh:
                records = engine.process(line.rstrip(b"\n"))
                for r in records:
                    out.write(orjson.dumps(r) + b"\n")
                del records
        out.flush()
    seconds = time.perf_counter() - start
    for metric in engine.metrics.records_produced.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("kind") == "prediction":
                published = int(sample.value)
    st = engine.streams[STREAM]
    return {"params": params, "mode": mode, "baseline_rss": baseline, "peak_rss": peak_rss(), "seconds": seconds,
            "published_records": published, "n_trees": st.forest.n_trees_, "scored": int(st.scoring_rows(
                "unlabelled").size)}


def measure(input_path: Path, params: str, mode: str, seed: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "scenarios.benchmarks.publish_memory", "--child", str(input_path), params, mode,
           "--seed", str(seed)]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        return {"params": params, "mode": mode, "failed": proc.stderr.decode(errors="replace")[-2000:]}
    return json.loads(proc.stderr.decode().strip().splitlines()[-1])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scored", type=int, default=100_000, help="unlabelled samples republished")
    parser.add_argument("--train", type=int, default=20_000, help="labelled samples")
    parser.add_argument("--features", type=int, default=3, help="feature messages (each republishes)")
    parser.add_argument("--params", choices=(*PARAMS, "both"), default="both")
    parser.add_argument("--skip-whole", action="store_true", help="do not run the whole-list peer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=3, metavar=("INPUT", "PARAMS", "MODE"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        result = child(*args.child, seed=args.seed)
        print(json.dumps(result), file=sys.stderr)
        return 0
    env = common.environment()
    print(f"publish memory: {args.scored:,} scored + {args.train:,} labelled samples, {args.features} features + a "
          f"snapshot ({args.features + 1} republications); load average {env['load_average'][0]:.2f}")
    names = list(PARAMS) if args.params == "both" else [args.params]
    modes = ["batches"] if args.skip_whole else list(MODES)
    runs = []
    with tempfile.TemporaryDirectory(prefix="sf-publish-memory-") as tmp:
        path = Path(tmp) / "input.jsonl"
        write_input(path, args.scored, args.train, args.features, args.seed)
        for name in names:
            for mode in modes:
                r = measure(path, name, mode, args.seed)
                runs.append(r)
                if "failed" in r:
                    print(f"  {name:<8} {mode:<8} failed:\n{r['failed']}")
                    continue
                extra = r["peak_rss"] - r["baseline_rss"]
                print(f"  {name:<8} {mode:<8} {r['n_trees']:>4} trees: peak RSS {r['peak_rss'] / 2**20:8,.0f} MiB "
                      f"(baseline {r['baseline_rss'] / 2**20:,.0f} MiB; {extra / max(r['scored'], 1) / 1024:6.1f} "
                      f"KiB per scored sample), {r['seconds']:.1f} s", flush=True)
    ok = [r for r in runs if r.get("mode") == "batches" and "failed" not in r]
    meets = bool(ok) and all(r["peak_rss"] <= GOAL_BYTES for r in ok)
    for name in names:
        by = {r["mode"]: r for r in runs if r["params"] == name and "failed" not in r}
        if len(by) == 2:
            print(f"  {name}: whole list / batches peak = {by['whole']['peak_rss'] / by['batches']['peak_rss']:.1f}x")
    print(f"  batches {'meet' if meets else 'miss'} the goal of <= {GOAL_BYTES / 2**30:.0f} GiB peak RSS")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"scored": args.scored, "train": args.train, "features": args.features,
                                       "goal_bytes": GOAL_BYTES, "meets_goal": meets, "environment": env,
                                       "load_average_end": list(os.getloadavg()), "runs": runs}, indent=2) + "\n")
    print(f"  results written to {args.output}")
    return 0 if meets else 1


if __name__ == "__main__":
    sys.exit(main())
