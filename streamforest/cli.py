"""The ``streamforest`` command: produce messages from a CSV, run the engine, inspect checkpoints, a demo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import orjson

EXAMPLES = """\
examples:
  streamforest produce data.csv --target class --stream s1 > messages.jsonl
  streamforest run --input messages.jsonl --output out/ --checkpoint-dir ckpt/ --metrics-port 9108
  streamforest inspect ckpt/
  streamforest demo
"""


def cmd_produce(args: argparse.Namespace) -> int:
    nominal = set(args.nominal.split(",")) if args.nominal else set()
    from streamforest.engine.produce import produce_messages

    msgs, _, _ = produce_messages(Path(args.csv), args.target, args.stream, args.seed, args.test_fraction,
                                  args.order, nominal, args.chunk)
    out = sys.stdout.buffer
    for m in msgs:
        out.write(orjson.dumps(m) + b"\n")
    out.flush()
    return 0


def _engine_config(args: argparse.Namespace):
    from streamforest.engine.core import EngineConfig

    forest: dict[str, Any] = {"random_state": args.seed}
    for kv in args.forest_param or []:
        if "=" not in kv:
            raise ValueError(f"--forest-param expects key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        try:
            forest[k] = json.loads(v)
        except json.JSONDecodeError:
            forest[k] = v  # a bare word: a string parameter such as policy=baseline
    return EngineConfig(forest=forest, publish=args.publish, encoding=args.encoding,
                        n_components=args.n_components, encoding_values=args.encoding_values)


def cmd_run(args: argparse.Namespace) -> int:
    from streamforest.engine.runtime import run

    config = _engine_config(args)
    from streamforest.engine.core import Engine

    engine = Engine(config)
    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_host, registry=engine.metrics.registry)
    if args.input != "-" and not Path(args.input).exists():
        print(f"streamforest run: no input file {args.input}", file=sys.stderr)
        return 1
    run(args.input, args.output, config, args.checkpoint_dir, args.checkpoint_every, engine=engine,
        progress=args.progress and sys.stderr.isatty())
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from streamforest.engine.checkpoint import Checkpointer

    path = Path(args.checkpoint)
    if not (path / "manifest.json").exists():
        print(f"streamforest inspect: no checkpoint in {path} (no manifest.json)", file=sys.stderr)
        return 1
    streams, manifest = Checkpointer(path).load()
    pos = manifest["position"]
    print(f"checkpoint {path}: input {pos['source']} up to line {pos['line']} (byte {pos['offset']})")
    for name, st in streams.items():
        n_lab = sum(lab is not None for lab in st.labels)
        print(f"\nstream {name!r}: {st.n_samples} samples ({n_lab} labelled), {len(st.columns)} features")
        if st.pending:
            print(f"  features waiting for parts: {sorted(st.pending)}")
        f = st.forest
        if f is None:
            print("  no forest yet (needs features and labels of two classes)")
            continue
        print(f"  model version {f.model_version_}, {f.n_trees_} trees in {len(f.generations_)} generations")
        print("  generation  forced feature(s)              weight share  trees")
        for g in f.generations_:
            forced = ",".join(g["forced"]) or "(offline)"
            print(f"  {g['id']:>10}  {forced[:30]:<30} {g['weight_share']:>12.4f}  {g['n_trees']:>5}")
        print("  importances (top 15):")
        importances = zip(f.feature_names_in_, f.feature_importances_.tolist(), strict=True)
        for k, v in sorted(importances, key=lambda kv: -kv[1])[:15]:
            print(f"    {k:<30} {v:.4f}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from streamforest.demo import demo

    return demo(Path(args.out), args.dataset, args.seed)


def build_parser() -> argparse.ArgumentParser:
    from streamforest.encoding import DEFAULT_N_COMPONENTS
    from streamforest.engine.runtime import OUTPUT_FILES

    ap = argparse.ArgumentParser(
        prog="streamforest",
        description="An online random forest for streams of features: every arriving feature grows a generation "
                    "of trees; the engine republishes predictions, per-feature feedback and hashed encodings.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("produce", help="print the messages of a CSV dataset (samples, then one feature per column)",
                       description="Print the JSONL messages of a dataset: one 'samples' message with the ids and "
                                   "labels (test rows unlabelled), then one 'feature' message per column. Sample "
                                   "ids are the 0-based CSV row numbers, as strings.")
    p.add_argument("csv", help="the CSV file (header row; empty cells are missing values), or the name of a "
                               "dataset bundled with the package (e.g. MagicTelescope)")
    p.add_argument("--target", required=True, help="the label column")
    p.add_argument("--stream", required=True, help="the stream id (the learning task)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and of the random feature order")
    p.add_argument("--test-fraction", type=float, default=1 / 3, help="share of rows sent unlabelled (stratified)")
    p.add_argument("--order", choices=("file", "random"), default="random", help="feature order")
    p.add_argument("--nominal", help="comma-separated columns to declare nominal (text columns always are)")
    p.add_argument("--chunk", type=int, default=0, help="split feature columns into parts of at most N values")
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("run", help="run the engine on JSONL messages (embedded runtime, no service needed)",
                       description="Read messages (one JSON object per line) from a file or stdin, learn, and "
                                   f"write {', '.join(OUTPUT_FILES.values())} to a directory (or every record "
                                   "to stdout). With --checkpoint-dir, a restarted run resumes where the last "
                                   "checkpoint left off.")
    p.add_argument("--input", required=True, help="JSONL file, or - for stdin")
    p.add_argument("--output", required=True, help="output directory, or - for stdout")
    p.add_argument("--checkpoint-dir", help="where to checkpoint state (and resume from)")
    p.add_argument("--checkpoint-every", type=int, default=1000, help="messages between checkpoints "
                   "(a checkpoint also follows every model change)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    p.add_argument("--metrics-host", default="127.0.0.1", help="address the metrics server binds to")
    p.add_argument("--seed", type=int, default=0, help="the forests' random_state")
    p.add_argument("--forest-param", action="append", metavar="KEY=VALUE",
                   help="a FeatureStreamForest parameter, e.g. trees_per_generation=30 (repeatable)")
    p.add_argument("--publish", choices=("unlabelled", "all", "none"), default="unlabelled",
                   help="which samples get predictions/encodings after each model change")
    p.add_argument("--encoding", choices=("leaves", "paths", "none"), default="leaves",
                   help="publish leaf encodings (one entry per tree), full node-path encodings, or none")
    p.add_argument("--n-components", type=int, default=DEFAULT_N_COMPONENTS, help="width of the hashed encodings")
    p.add_argument("--encoding-values", choices=("binary", "weighted"), default="binary")
    p.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("inspect", help="show a checkpoint: features, alive generations and weights, importances",
                       description="Show what a checkpoint directory holds: the input position it covers and, per "
                                   "stream, its samples, features, alive generations with their weight shares, "
                                   "and the feature importances.")
    p.add_argument("checkpoint", help="a checkpoint directory")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("demo", help="a bundled dataset through produce -> run, with a plot and the baseline",
                       description="Run a dataset shipped with the package through produce -> run (the embedded "
                                   "runtime), with a few bad lines mixed in: one line per arriving feature (weight "
                                   "share, out-of-bag AUC before -> after, test AUC), the dead letters, the final "
                                   "test AUC against the baseline policy, and a PNG plot of the score per feature.")
    p.add_argument("--out", default="results/demo", help="where inputs, outputs and the plot go")
    p.add_argument("--dataset", default="diabetes_37.csv", help="a CSV bundled with the package")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"streamforest {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
