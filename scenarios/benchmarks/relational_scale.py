"""The loop at scale: synthetic data with 100,000 target rows and 10 million child rows, budget 200.

customer -1:n- order -1:n- item (:mod:`streamforest.relational.synthetic`), the label planted in
``MEAN(order.item.price WHERE item.category = 'c')``. Printed from one run: seconds (generation of the data apart),
peak RSS, candidates per second, whether the planted aggregate was found, and the loop's out-of-bag AUC.
Targets: <= 10 minutes, <= 6 GiB. The peer, from the same run: featuretools' DFS (default primitives,
``max_depth=2``, ``max_features`` = the budget) on the same tables, in its own environment (``--ft-python``), under a
time limit (``--ft-timeout``) and an address-space limit (``--ft-memory-gib``) -- or its failure to finish.

    python -m scenarios.benchmarks.relational_scale [--targets 100000] [--orders 10] [--items 9] [--budget 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scenarios.benchmarks.common import environment
from streamforest.relational.loop import Loop
from streamforest.relational.synthetic import make_relational

PLANTED = "item.price WHERE item.category = 'c'"
FT_SCRIPT = Path(__file__).with_name("relational_featuretools_scale.py")


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def featuretools_peer(db, ft_python: str, n_features: int, timeout: float, memory_gib: float) -> dict:
    """DFS on the same tables in featuretools' environment: its JSON line, or why it did not finish."""
    if not ft_python or not Path(ft_python).exists():
        return {"error": f"no featuretools environment at {ft_python}"}
    c, o, i = db.tables["customer"], db.tables["order"], db.tables["item"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tables.npz"
        np.savez(path, age=c.columns["age"].values, region=c.columns["region"].values,
                 order_customer=o.links[0].index, amount=o.columns["amount"].values,
                 channel=o.columns["channel"].values, item_order=i.links[0].index, price=i.columns["price"].values,
                 category=i.columns["category"].values, quantity=i.columns["quantity"].values)
        limit = int(memory_gib * 2**30)

        def cap() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        start, cpu0 = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
        try:
            res = subprocess.run([ft_python, str(FT_SCRIPT), str(path), str(n_features)], capture_output=True,
                                 text=True, timeout=timeout, preexec_fn=cap)
        except subprocess.TimeoutExpired:
            # subprocess.run kills and reaps the child: its CPU time is in RUSAGE_CHILDREN
            cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
            return {"error": f"did not finish within {timeout:.0f} s ({cpu:.0f} CPU s)",
                    "seconds": time.perf_counter() - start, "cpu_seconds": cpu}
    cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0
    if res.returncode != 0:
        return {"error": f"failed (exit {res.returncode}; address space capped at {memory_gib:g} GiB): "
                         f"{res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ''}",
                "seconds": time.perf_counter() - start, "cpu_seconds": cpu}
    return {**json.loads(res.stdout.strip().splitlines()[-1]), "cpu_seconds": cpu}


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds (the machine is shared: wall time alone depends on the others' load)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", type=int, default=100_000)
    ap.add_argument("--orders", type=float, default=10.0, help="orders per target (Poisson mean)")
    ap.add_argument("--items", type=float, default=9.0, help="items per order (1 + Poisson)")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--pool", type=int, default=8, help="members computed per family visit")
    ap.add_argument("--explore-rows", type=int, default=10_000, help="labelled rows the exploration samples")
    ap.add_argument("--final-trees", type=int, default=30, help="trees per feature in the final stream")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ft-python", default="/work/wt/ft-venv/bin/python")
    ap.add_argument("--ft-timeout", type=float, default=1200.0, help="seconds featuretools gets")
    ap.add_argument("--ft-memory-gib", type=float, default=12.0, help="address space featuretools gets")
    ap.add_argument("--out", default="results/benchmarks/relational_scale.json")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    db = make_relational(args.targets, args.orders, args.items, seed=args.seed)
    child_rows = db.tables["order"].n_rows + db.tables["item"].n_rows
    t_data = time.perf_counter() - t0
    print(f"data: {args.targets:,} targets, {child_rows:,} child rows ({t_data:.1f} s)", file=sys.stderr)
    start, cpu0 = time.perf_counter(), cpu_seconds()
    loop = Loop(db, budget=args.budget, seed=args.seed, explore_rows=args.explore_rows,
                policy_options={"pool": args.pool}, final_forest={"trees_per_generation": args.final_trees},
                progress=lambda s: print(f"{time.perf_counter() - start:7.1f}s {s}", file=sys.stderr, flush=True))
    try:
        result = loop.run()
    finally:
        loop.client.close()
        loop.final_client.close()
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
    found = [c.definition for c in result.accepted if PLANTED in c.definition]
    summary = {"targets": args.targets, "child_rows": child_rows, "budget": args.budget,
               "candidates": len(result.trials), "accepted": len(result.accepted), "seconds": seconds,
               "cpu_seconds": cpu,
               "candidates_per_second": len(result.trials) / seconds, "peak_rss_gib": peak_rss_gib(),
               "planted_found": found, "final_oob_auc": result.final_oob}
    print(f"\nscale: {args.targets:,} targets, {child_rows:,} child rows, budget {args.budget}: "
          f"{seconds:.0f} s (target <= 600; {cpu:.0f} CPU s), peak RSS {summary['peak_rss_gib']:.2f} GiB "
          "(target <= 6), "
          f"{summary['candidates_per_second']:.2f} candidates/s, final out-of-bag AUC {result.final_oob}")
    print(f"planted signal found: {found or 'NO'}")
    peer = featuretools_peer(db, args.ft_python, args.budget, args.ft_timeout, args.ft_memory_gib)
    summary["featuretools"] = peer
    if "error" in peer:
        print(f"featuretools DFS ({args.budget} features, same tables): {peer['error']}; ratio loop/featuretools "
              f"below {seconds / peer['seconds']:.2f} (seconds), {cpu / max(peer['cpu_seconds'], 1e-9):.2f} (CPU s)"
              if "seconds" in peer else f"featuretools DFS: {peer['error']}")
    else:
        print(f"featuretools DFS: {peer['features']} features in {peer['seconds']:.0f} s, peak RSS "
              f"{peer['peak_rss_gib']:.2f} GiB ({peer['features'] / peer['seconds']:.2f} features/s); ratios "
              f"loop/featuretools: seconds {seconds / peer['seconds']:.2f}, CPU seconds "
              f"{cpu / peer['cpu_seconds']:.2f}, peak RSS "
              f"{summary['peak_rss_gib'] / peer['peak_rss_gib']:.2f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "trials": result.trials, "environment": environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
