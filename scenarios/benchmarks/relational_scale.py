"""The loop at scale: synthetic data with 100,000 target rows and 10 million child rows, budget 200.

customer -1:n- order -1:n- item (:mod:`streamforest.relational.synthetic`), the label planted in
``MEAN(order.item.price WHERE item.category = 'c')``. Printed from one run: seconds (generation of the data apart),
peak RSS, candidates per second, whether the planted aggregate was found, and the loop's out-of-bag AUC.
Targets: <= 10 minutes, <= 6 GiB.

    python -m scenarios.benchmarks.relational_scale [--targets 100000] [--orders 10] [--items 9] [--budget 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from scenarios.benchmarks.common import environment
from streamforest.relational.loop import Loop
from streamforest.relational.synthetic import make_relational

PLANTED = "item.price WHERE item.category = 'c'"


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


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
    ap.add_argument("--out", default="results/benchmarks/relational_scale.json")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    db = make_relational(args.targets, args.orders, args.items, seed=args.seed)
    child_rows = db.tables["order"].n_rows + db.tables["item"].n_rows
    t_data = time.perf_counter() - t0
    print(f"data: {args.targets:,} targets, {child_rows:,} child rows ({t_data:.1f} s)", file=sys.stderr)
    start = time.perf_counter()
    loop = Loop(db, budget=args.budget, seed=args.seed, explore_rows=args.explore_rows,
                policy_options={"pool": args.pool}, final_forest={"trees_per_generation": args.final_trees},
                progress=lambda s: print(f"{time.perf_counter() - start:7.1f}s {s}", file=sys.stderr, flush=True))
    try:
        result = loop.run()
    finally:
        loop.client.close()
        loop.final_client.close()
    seconds = time.perf_counter() - start
    found = [c.definition for c in result.accepted if PLANTED in c.definition]
    summary = {"targets": args.targets, "child_rows": child_rows, "budget": args.budget,
               "candidates": len(result.trials), "accepted": len(result.accepted), "seconds": seconds,
               "candidates_per_second": len(result.trials) / seconds, "peak_rss_gib": peak_rss_gib(),
               "planted_found": found, "final_oob_auc": result.final_oob}
    print(f"\nscale: {args.targets:,} targets, {child_rows:,} child rows, budget {args.budget}: "
          f"{seconds:.0f} s (target <= 600), peak RSS {summary['peak_rss_gib']:.2f} GiB (target <= 6), "
          f"{summary['candidates_per_second']:.2f} candidates/s, final out-of-bag AUC {result.final_oob}")
    print(f"planted signal found: {found or 'NO'}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "trials": result.trials, "environment": environment()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
