"""The ``streamforest`` command: produce messages from a CSV, run the engine, inspect checkpoints, a demo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from streamforest.cli_options import bounded_int
from streamforest.connectors.kafka import cli as kafka_cli
from streamforest.connectors.kafka.transport import transports as kafka_transports
from streamforest.engine.options import add_engine_options, engine_config

EXAMPLES = """\
examples:
  streamforest produce data.csv --target class --stream s1 > messages.jsonl
  streamforest run --input messages.jsonl --output out/ --checkpoint-dir ckpt/ --metrics-port 9108
  streamforest inspect ckpt/
  streamforest demo
  streamforest datasets
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


def cmd_run(args: argparse.Namespace) -> int:
    from streamforest.engine.core import Engine
    from streamforest.engine.runtime import check_input, run

    config = engine_config(args)  # every option is checked before anything is read or written
    check_input(args.input)
    engine = Engine(config)
    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_host, registry=engine.metrics.registry)
    progress = "none" if args.quiet else args.progress
    run(args.input, args.output, config, args.checkpoint_dir, args.checkpoint_every, engine=engine,
        progress=progress, status_every=args.status_every)
    if progress != "none" and args.output != "-":
        print(_output_sizes(Path(args.output)), file=sys.stderr)
    return 0


def _output_sizes(directory: Path) -> str:
    """One line of output file sizes, and the way out when the encodings are most of it."""
    from streamforest.engine.runtime import OUTPUT_FILES

    sizes = {name: (directory / name).stat().st_size for name in OUTPUT_FILES.values() if (directory / name).exists()}
    line = "streamforest run: wrote " + ", ".join(f"{name} {_mb(n)}" for name, n in sizes.items())
    if sizes.get("encodings.jsonl", 0) > max(10e6, sum(sizes.values()) / 2):
        line += " (the encodings are most of it: --encoding none leaves them out)"
    return line


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def cmd_inspect(args: argparse.Namespace) -> int:
    from streamforest.engine.checkpoint import Checkpointer

    path = Path(args.checkpoint)
    if not (path / "manifest.json").exists():
        print(f"streamforest inspect: no checkpoint in {path} (no manifest.json)", file=sys.stderr)
        return 1
    checkpointer = Checkpointer(path)
    streams, manifest = checkpointer.load()
    for warning in checkpointer.warnings:
        print(f"streamforest inspect: {warning}", file=sys.stderr)
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


def cmd_datasets(args: argparse.Namespace) -> int:
    from streamforest.datasets import bundled_dir, read_manifest

    print(f"{'name':<34} {'samples':>7} {'features':>8} {'positives':>9}  nominal columns")
    for row in read_manifest(bundled_dir()):
        nominal = row["nominal_cols"].replace(";", ", ") or "-"
        print(f"{row['name']:<34} {int(row['n']):>7} {int(row['d']):>8} {float(row['pos_rate']):>9.1%}  {nominal}")
    print("\nbinary tasks, label column 'target'; use a name with `streamforest produce NAME --target target ...`, "
          "`streamforest demo --dataset NAME` and the scenarios' --bundled mode")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from streamforest.engine.runtime import OUTPUT_FILES

    ap = argparse.ArgumentParser(
        prog="streamforest",
        description="An online random forest for streams of features: every arriving feature grows a generation "
                    "of trees; the engine republishes predictions, per-feature feedback and hashed encodings.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    from streamforest import __version__

    ap.add_argument("--version", action="version", version=f"streamforest {__version__}")
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
    p.add_argument("--checkpoint-every", type=bounded_int(1), default=1000, help="messages between "
                   "checkpoints, at least 1 (a checkpoint also follows every model change)")
    p.add_argument("--metrics-port", type=bounded_int(0, 65535), help="serve Prometheus metrics on this port")
    p.add_argument("--metrics-host", default="127.0.0.1", help="address the metrics server binds to")
    add_engine_options(p)
    p.add_argument("--progress", nargs="?", choices=("auto", "bar", "lines", "none"), default="auto", const="bar",
                   help="what stderr shows while it runs: a progress bar, a status line every --status-every "
                        "seconds, or nothing; auto (the default) = a bar on a terminal, lines otherwise; "
                        "--progress alone = bar. Either way, a first run says when numba compiles its kernels")
    p.add_argument("--status-every", type=float, default=10.0, metavar="SECONDS",
                   help="seconds between status lines (--progress lines)")
    p.add_argument("--quiet", action="store_true", help="nothing on stderr but errors (same as --progress none)")
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
    p.add_argument("--dataset", default="diabetes",
                   help="a dataset bundled with the package, by name (`streamforest datasets` lists them)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("datasets", help="list the datasets bundled with the package",
                       description="List the datasets shipped inside the package, by the name that `produce`, "
                                   "`demo --dataset` and the scenarios' --bundled mode take.")
    p.set_defaults(func=cmd_datasets)

    from streamforest.relational.cli import register as register_relational

    register_relational(sub, kafka_transports=kafka_transports)

    kafka_cli.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, ImportError) as exc:
        print(f"streamforest {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
