"""A River model downstream of the engine: produce -> run -> feed the published encodings to a LogisticRegression.

1. ``produce``: a bundled dataset as engine messages (one ``samples`` message whose test rows are unlabelled, then
   one ``feature`` message per column, in a random order);
2. ``run``: the embedded runtime learns feature after feature and, after every model change, republishes the
   hashed leaf encodings of the unlabelled samples to ``encodings.jsonl``;
3. feed: the labels of those samples arrive later, in a random order (here: the held-out test labels); each
   sample's latest encoding joined with its label (:func:`streamforest.connectors.river.iter_encodings`) goes
   through River's progressive validation of a ``LogisticRegression``, which prints its ROCAUC.

For context, the same River model on the raw features (standardised) of the same samples in the same order, and
the engine's own predictions for them, are scored too.

    python -m scenarios.river_downstream [--dataset MagicTelescope] [--trees 10] [--out results/river_downstream]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import orjson
from river import evaluate, linear_model, metrics, optim, preprocessing

from streamforest.connectors.river import iter_encodings, read_records
from streamforest.datasets import bundled_dir, read_manifest
from streamforest.encoding import DEFAULT_N_COMPONENTS
from streamforest.engine.core import EngineConfig
from streamforest.engine.produce import produce_messages
from streamforest.engine.runtime import OUTPUT_FILES, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="MagicTelescope", help="a bundled dataset (see streamforest/data)")
    ap.add_argument("--test-fraction", type=float, default=0.25, help="share of samples sent unlabelled")
    ap.add_argument("--trees", type=int, default=10, help="trees per generation in the engine's forests")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate of the downstream LogisticRegression")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("results/river_downstream"))
    args = ap.parse_args(argv)

    rows = {r["name"]: r for r in read_manifest(bundled_dir())}
    if args.dataset not in rows:
        print(f"no bundled dataset {args.dataset!r}; bundled: {sorted(rows)}", file=sys.stderr)
        return 1
    row = rows[args.dataset]
    msgs, test, data = produce_messages(
        bundled_dir() / row["file"], row["target_col"] if row["target_col"] in ("target", "class") else "target",
        "downstream", seed=args.seed, test_fraction=args.test_fraction,
        nominal={c for c in row["nominal_cols"].split(";") if c})
    args.out.mkdir(parents=True, exist_ok=True)
    source = args.out / "input.jsonl"
    source.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    print(f"produce: {args.dataset}, {data.n} samples ({len(test)} unlabelled), {data.d} features -> {source}")

    config = EngineConfig(forest={"trees_per_generation": args.trees, "random_state": args.seed},
                          encoding="leaves", n_components=DEFAULT_N_COMPONENTS)
    run(str(source), str(args.out / "engine"), config)
    encodings = args.out / "engine" / OUTPUT_FILES["encoding"]
    print(f"run: encodings of every model version in {encodings} ({encodings.stat().st_size / 1e6:.1f} MB)")

    # The labels the engine never saw: the test rows', in the order the engine published them.
    labels = {str(i): bool(data.y[i] == data.y.max()) for i in test.tolist()}
    pairs = list(iter_encodings(read_records(args.out / "engine"), labels))
    order = [int(sid) for sid in _latest_ids(args.out / "engine")]
    # The engine publishes in sample order, and bundled files are often sorted by class: in that order a model
    # that merely tracks the recent label rate would score high. The labels arrive in a random order instead.
    perm = np.random.default_rng(args.seed).permutation(len(pairs))
    pairs, order = [pairs[k] for k in perm], [order[k] for k in perm]
    print(f"feed: {len(pairs)} (encoding, label) pairs, each sample's latest model version, in a random order")

    scores = {}
    downstream = linear_model.LogisticRegression(optimizer=optim.SGD(args.lr))
    scores["LogisticRegression on the engine's encodings"] = evaluate.progressive_val_score(
        pairs, downstream, metrics.ROCAUC())
    raw = [({name: float(col[i]) for name, col in data.columns.items()}, labels[str(i)]) for i in order]
    scores["StandardScaler | LogisticRegression on the raw features"] = evaluate.progressive_val_score(
        raw, preprocessing.StandardScaler() | linear_model.LogisticRegression(), metrics.ROCAUC())
    engine_auc = metrics.ROCAUC()
    for sid, p in _latest_predictions(args.out / "engine").items():
        engine_auc.update(labels[sid], p)
    scores["the engine's own predictions (no learning downstream)"] = engine_auc
    for name, metric in scores.items():
        print(f"  {metric}  {name}")
    return 0


def _latest_ids(directory: Path) -> list[str]:
    """Sample ids in the order :func:`iter_encodings` yields them (their latest records)."""
    newest: dict[str, int] = {}
    for r in read_records(directory):
        if r["type"] == "encoding" and r["model_version"] >= newest.get(r["id"], -1):
            newest.pop(r["id"], None)
            newest[r["id"]] = r["model_version"]
    return list(newest)


def _latest_predictions(directory: Path) -> dict[str, float]:
    """Each sample's probability of the positive class under the last model version."""
    out: dict[str, tuple[int, float]] = {}
    for r in read_records(directory / OUTPUT_FILES["prediction"]):
        proba = r["proba"]
        positive = max(proba, key=lambda c: float(c) if _is_number(c) else c)
        if r["model_version"] >= out.get(r["id"], (-1, 0.0))[0]:
            out[r["id"]] = (r["model_version"], float(proba[positive]))
    return {sid: p for sid, (_, p) in out.items()}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
