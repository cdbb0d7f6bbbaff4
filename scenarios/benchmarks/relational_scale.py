"""The loop at scale, over several schema shapes: 100,000 target rows and 10 million child rows each, budget 200.

Every shape (:mod:`scenarios.benchmarks.relational_shapes`: three levels from CSV as issue 30 has it, the same in
Parquet with keys and a nominal of 1,000 values, a 200-column target over keyless events, a 40-column target over
Parquet transactions, the three levels with dimension tables to look up; and ``synthetic``,
:mod:`streamforest.relational.synthetic` written as CSV) is generated once into a cache directory, then run in a
child process of its own, exactly as a user runs it::

    streamforest relational run --schema schema.json --budget 200 --out out --seed 0

so that each shape's peak RSS is its own: the child's high-water mark of resident memory (``VmHWM``), which starts
afresh at ``exec``, unlike ``ru_maxrss``, which Linux carries over from the parent that spawned it (a parent that
had just generated a shape passed its 2-3 GiB on to the child's figure). Printed per shape: wall and CPU
seconds, peak RSS, candidates per second, whether the planted aggregate was accepted, the final out-of-bag score,
and where the time went: reading the files, indexing (the exploration sample, each path's row index and
visibility), candidate values (aggregates and learned thresholds), learning (the engine: samples, features,
predictions) and the rest (policy, outputs). Targets: <= 120 s and <= 2 GiB per shape. The machine is shared: the
load average before and after each shape is printed with it.

The peer, from the same run, on the ``synthetic`` shape: featuretools' DFS (default primitives, ``max_depth=2``,
``max_features`` = the budget) on the same tables, in its own environment (``--ft-python``; skipped, and said so,
when that environment is not there), under a time limit (``--ft-timeout``) and an address-space limit
(``--ft-memory-gib``) -- or its failure to finish.

    python -m scenarios.benchmarks.relational_scale [--shape csv3 ...] [--targets 100000] [--child-rows 10000000]
        [--data-seed 0]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from scenarios.benchmarks.common import environment, machine_reference, reference_line
from scenarios.benchmarks.relational_shapes import SHAPES, cache_dir, ensure

FT_SCRIPT = Path(__file__).with_name("relational_featuretools_scale.py")
ALL_SHAPES = (*SHAPES, "synthetic")
PHASES = ("reading", "indexing", "values", "learning", "other")


def synthetic_schema(targets: int, child_rows: int, seed: int) -> tuple[Path, str]:
    """The in-memory synthetic database (customer -> order -> item) written once as CSV files with its schema."""
    from streamforest.relational.schema import save_schema
    from streamforest.relational.synthetic import make_relational

    d = cache_dir() / f"synthetic-{targets}-{child_rows}-{seed}"
    if not (d / "schema.json").exists():
        db = make_relational(targets, 10.0, child_rows / targets / 10.0 - 1.0, unlabelled=0.3, time=True, seed=seed)
        save_schema(db, d)
    return d / "schema.json", "item.price WHERE item.category = 'c'"


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds (the machine is shared: wall time alone depends on the others' load)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


class Clock:
    """Exclusive wall time per phase of methods wrapped in place (a method called inside another counts once)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._stack: list[list[float]] = []

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        inner = getattr(owner, name)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            clock._stack.append([time.perf_counter(), 0.0])
            try:
                return inner(*args, **kwargs)
            finally:
                start, nested = clock._stack.pop()
                spent = time.perf_counter() - start
                clock.seconds[phase] += spent - nested
                if clock._stack:
                    clock._stack[-1][1] += spent

        setattr(owner, name, timed)


def child(schema: Path, budget: int, out: Path, seed: int, report: Path, final_trees: int | None) -> dict[str, Any]:
    """One shape, in this (child) process: the CLI command with its phases timed.

    The report is written as the run goes (after reading, after the exploration): a child killed in the final
    stream still says how far it got.
    """
    from streamforest.cli import main as cli
    from streamforest.relational import candidates, drivers, loop, tables
    from streamforest.relational import schema as schema_mod

    if final_trees is not None:  # the final stream's trees per feature (the CLI's default: loop.FINAL_FOREST)
        loop.FINAL_FOREST = {**loop.FINAL_FOREST, "trees_per_generation": final_trees}
    clock = Clock()
    clock.wrap(schema_mod, "load_schema", "reading")
    clock.wrap(tables.Database, "subset", "indexing")
    for name in ("_grouping", "_visible"):
        clock.wrap(candidates.Generator, name, "indexing")
    for name in ("values", "learn"):
        clock.wrap(candidates.Generator, name, "values")
    for name in ("samples", "feature", "drop", "wait_predictions"):
        clock.wrap(drivers.EngineClient, name, "learning")
    results: list[Any] = []
    run, final = loop.Loop.run, getattr(loop.Loop, "_final", None)
    peaks: dict[str, float] = {}

    start, cpu0 = time.perf_counter(), cpu_seconds()

    def partial(stage: str) -> None:
        report.write_text(json.dumps({"stage": stage, "seconds": time.perf_counter() - start,
                                      "cpu_seconds": cpu_seconds() - cpu0, "phases": clock.seconds,
                                      "peaks_gib": peaks}))

    def keep(self: Any) -> Any:
        peaks["before_loop"] = peak_gib()  # reading and the exploration sample
        partial("exploration")
        results.append(run(self))
        return results[-1]

    def mark(self: Any, accepted: Any) -> Any:
        peaks["before_final"] = peak_gib()  # and the exploration: the final stream's forest comes after
        partial(f"final stream ({len(accepted)} accepted features)")
        return final(self, accepted)

    loop.Loop.run = keep
    if final is not None:
        loop.Loop._final = mark
    code = cli(["relational", "run", "--schema", str(schema), "--budget", str(budget), "--out", str(out),
                "--seed", str(seed), "--quiet"])
    seconds = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"streamforest relational run exited {code}")
    clock.seconds["other"] = seconds - sum(clock.seconds.values())
    result = results[0]
    peaks["end"] = peak_gib()
    return {"stage": "done", "seconds": seconds, "cpu_seconds": cpu_seconds() - cpu0, "phases": clock.seconds,
            "candidates": len(result.trials), "accepted": [c.definition for c in result.accepted],
            "final_oob": result.final_oob, "peaks_gib": peaks}


def peak_gib() -> float:
    """This process's peak resident memory since its ``exec`` (``VmHWM``; ``ru_maxrss`` where /proc has none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run_shape(shape: str, schema: Path, planted: str, args: argparse.Namespace) -> dict[str, Any]:
    """The shape in a child process; its peak RSS from ``wait4``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "scenarios.benchmarks.relational_scale", "--child", str(schema),
               "--child-report", str(report), "--budget", str(args.budget), "--seed", str(args.seed),
               "--out", str(Path(tmp) / "out")]
        if args.final_trees is not None:
            cmd += ["--final-trees", str(args.final_trees)]
        load_before = os.getloadavg()[0]
        with open(Path(tmp) / "stderr", "w") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stderr = (Path(tmp) / "stderr").read_text()
        # A child that did not finish has no report of its own peak: wait4's ru_maxrss, an upper bound, names it.
        peak = usage.ru_maxrss / 2**20
        if proc.returncode != 0 or not report.exists():
            why = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {proc.returncode}"
            if proc.returncode == -9:
                why += " (SIGKILL: the kernel's OOM killer, when the machine ran out of memory)"
            got = json.loads(report.read_text()) if report.exists() else {}
            return {"shape": shape, "error": f"{why}; peak RSS {peak:.2f} GiB; reached: {got.get('stage', '-')} "
                                             f"after {got.get('seconds', 0):.0f} s ({got.get('cpu_seconds', 0):.0f} "
                                             f"CPU s), peaks {got.get('peaks_gib')}, phases {got.get('phases')}"}
        out = json.loads(report.read_text())
    out.update(shape=shape, peak_rss_gib=out["peaks_gib"]["end"], load_before=load_before,
               load_after=os.getloadavg()[0], planted=planted,
               planted_found=[d for d in out["accepted"] if planted in d])
    return out


def featuretools_peer(schema: Path, ft_python: str, n_features: int, timeout: float, memory_gib: float) -> dict:
    """DFS on the synthetic shape's tables in featuretools' environment: its JSON line, or why it did not finish."""
    if not ft_python or not Path(ft_python).exists():
        return {"error": f"skipped: no featuretools environment at {ft_python} (see ARCHITECTURE.md: pandas<3)"}
    from streamforest.relational.schema import load_schema

    db = load_schema(schema)
    c, o, i = db.tables["customer"], db.tables["order"], db.tables["item"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tables.npz"
        np.savez(path, age=c.columns["age"].values, region=c.columns["region"].values,
                 order_customer=o.links[0].index, amount=o.columns["amount"].values,
                 channel=o.columns["channel"].values, item_order=i.links[0].index, price=i.columns["price"].values,
                 category=i.columns["category"].values, quantity=i.columns["quantity"].values)
        del db, c, o, i
        limit = int(memory_gib * 2**30)

        def cap() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        start, cpu0 = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
        try:
            res = subprocess.run([ft_python, str(FT_SCRIPT), str(path), str(n_features)], capture_output=True,
                                 text=True, timeout=timeout, preexec_fn=cap)
        except subprocess.TimeoutExpired:
            cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
            return {"error": f"did not finish within {timeout:.0f} s ({cpu:.0f} CPU s)",
                    "seconds": time.perf_counter() - start, "cpu_seconds": cpu}
    cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
    if res.returncode != 0:
        return {"error": f"failed (exit {res.returncode}; address space capped at {memory_gib:g} GiB): "
                         f"{res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ''}",
                "seconds": time.perf_counter() - start, "cpu_seconds": cpu}
    return {**json.loads(res.stdout.strip().splitlines()[-1]), "cpu_seconds": cpu}


def line(r: dict[str, Any], seconds_goal: float, gib_goal: float) -> str:
    if "error" in r:
        return f"{r['shape']:<10} FAILED: {r['error']}"
    ph = r["phases"]
    split = ", ".join(f"{p} {ph[p]:.1f}" for p in PHASES)
    ok = "ok" if r["seconds"] <= seconds_goal and r["peak_rss_gib"] <= gib_goal else "MISSED"
    return (f"{r['shape']:<10} {r['seconds']:6.1f} s ({r['cpu_seconds']:.0f} CPU s), peak RSS "
            f"{r['peak_rss_gib']:.2f} GiB, {r['candidates'] / r['seconds']:.2f} candidates/s "
            f"({r['candidates']}), {len(r['accepted'])} accepted, planted {'yes' if r['planted_found'] else 'NO'}, "
            f"final oob {r['final_oob'] if r['final_oob'] is None else round(r['final_oob'], 4)} [{ok}]\n"
            f"{'':<10} seconds: {split}; peak RSS before the loop {r['peaks_gib'].get('before_loop', 0):.2f} GiB, "
            f"before the final stream {r['peaks_gib'].get('before_final', 0):.2f} GiB; "
            f"load {r['load_before']:.1f} -> {r['load_after']:.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", choices=ALL_SHAPES, help="a shape to run (repeatable; default all)")
    ap.add_argument("--targets", type=int, default=100_000)
    ap.add_argument("--child-rows", type=int, default=10_000_000)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0, help="the loop's seed (and the data's, without --data-seed)")
    ap.add_argument("--data-seed", type=int, help="seed of the generated shapes (default: --seed)")
    ap.add_argument("--seconds-goal", type=float, default=120.0)
    ap.add_argument("--gib-goal", type=float, default=2.0)
    ap.add_argument("--ft-python", default="/work/wt/ft-venv/bin/python")
    ap.add_argument("--ft-timeout", type=float, default=1200.0, help="seconds featuretools gets")
    ap.add_argument("--ft-memory-gib", type=float, default=12.0, help="address space featuretools gets")
    ap.add_argument("--final-trees", type=int,
                    help="trees per feature of the final stream (default: the CLI's, loop.FINAL_FOREST)")
    ap.add_argument("--out", default="results/benchmarks/relational_scale.json")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-report", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        report = child(args.child, args.budget, Path(args.out), args.seed, args.child_report, args.final_trees)
        args.child_report.write_text(json.dumps(report))
        return 0
    shapes: list[str] = args.shape or list(ALL_SHAPES)
    data_seed = args.seed if args.data_seed is None else args.data_seed
    runs: list[dict[str, Any]] = []
    makers: dict[str, Callable[[], tuple[Path, str]]] = {
        s: (lambda s=s: ensure(s, args.targets, args.child_rows, data_seed)) for s in SHAPES}
    makers["synthetic"] = lambda: synthetic_schema(args.targets, args.child_rows, data_seed)
    print(f"relational scale: {args.targets:,} targets, {args.child_rows:,} child rows, data seed {data_seed}, "
          f"budget {args.budget}, seed {args.seed}; "
          f"goals <= {args.seconds_goal:g} s and <= {args.gib_goal:g} GiB per shape; cache {cache_dir()}",
          file=sys.stderr)
    reference = machine_reference()
    print(reference_line(reference), flush=True)
    for shape in shapes:
        t0 = time.perf_counter()
        schema, planted = makers[shape]()
        print(f"{shape}: files ready ({time.perf_counter() - t0:.0f} s), running", file=sys.stderr, flush=True)
        runs.append(run_shape(shape, schema, planted, args))
        print(line(runs[-1], args.seconds_goal, args.gib_goal), flush=True)
    summary: dict[str, Any] = {"targets": args.targets, "child_rows": args.child_rows, "data_seed": data_seed,
                               "budget": args.budget, "seed": args.seed, "shapes": runs}
    if "synthetic" in shapes:
        peer = featuretools_peer(makers["synthetic"]()[0], args.ft_python, args.budget, args.ft_timeout,
                                 args.ft_memory_gib)
        summary["featuretools"] = peer
        ours = next(r for r in runs if r["shape"] == "synthetic")
        if "error" in peer:
            print(f"featuretools DFS (synthetic, {args.budget} features): {peer['error']}")
        elif "error" not in ours:
            print(f"featuretools DFS (synthetic): {peer['features']} features in {peer['seconds']:.0f} s, peak RSS "
                  f"{peer['peak_rss_gib']:.2f} GiB; ratios loop/featuretools: seconds "
                  f"{ours['seconds'] / peer['seconds']:.2f}, CPU seconds "
                  f"{ours['cpu_seconds'] / peer['cpu_seconds']:.2f}, peak RSS "
                  f"{ours['peak_rss_gib'] / peer['peak_rss_gib']:.2f}")
    ok = [r for r in runs if "error" not in r]
    if ok:
        secs = [r["seconds"] for r in ok]
        worst = ok[int(np.argmax(secs))]["shape"]
        print(f"all shapes: seconds median {np.median(secs):.1f}, worst {max(secs):.1f} ({worst}); "
              f"peak RSS worst {max(r['peak_rss_gib'] for r in ok):.2f} GiB")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "environment": environment(machine_reference=reference)},
                              indent=1))
    return 0 if len(ok) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
