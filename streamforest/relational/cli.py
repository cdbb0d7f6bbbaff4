"""``streamforest relational``: the propositionalization loop from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamforest.cli_options import add_connection_options, env_defaults, forest_params

if TYPE_CHECKING:
    from streamforest.relational.tables import Database

#: Opens the exploration and final-stream transports over Kafka from the parsed options:
#: ``(args, exploration engine config, final engine config, progress) -> (transport, final transport)``. The Kafka
#: connector provides it (``streamforest.connectors.kafka.transport.transports``) and the ``streamforest`` command
#: passes it to :func:`register`: the library does not import a connector.
KafkaTransports = Callable[[argparse.Namespace, dict[str, Any], dict[str, Any], Any], tuple[Any, Any]]

EXAMPLES = """\
examples:
  streamforest relational run --schema schema.json --budget 300 --out out/ --seed 0
  streamforest relational run --documents data.json --label mutagenic --budget 300 --out out/
  streamforest relational run --documents data.json --label mutagenic --out out/ --bootstrap-servers localhost:9092
"""


def register(subparsers: Any, kafka_transports: KafkaTransports | None = None) -> None:
    """Add the ``relational`` command group to the ``streamforest`` parser; ``--transport kafka`` opens its
    transports with ``kafka_transports`` (``None``: the Kafka transport is not available)."""
    p = subparsers.add_parser("relational", help="find features in relational data with the engine's feedback",
                              description="The propositionalization feedback loop: candidate aggregates of child "
                                          "tables go to the engine as features; its feedback decides what to try "
                                          "next.",
                              epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="relational_command", required=True)
    r = sub.add_parser("run", help="run the loop on a schema.json or on nested JSON documents",
                       description="Run the loop and write features.csv, predictions.csv (the unlabelled target "
                                   "rows), candidates.jsonl and loop.png to --out; progress on stderr. Every "
                                   "option of the Kafka transport can also be set as STREAMFOREST_<OPTION>.",
                       parents=[_kafka_options()])
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--schema", help="a schema.json (tables as CSV or Parquet, paths relative to it)")
    src.add_argument("--documents", help="a JSON list of nested documents (list fields are child tables)")
    r.add_argument("--label", help="with --documents: the label field of the documents")
    r.add_argument("--name", default="root", help="with --documents: the name of the documents' table")
    r.add_argument("--key", help="with --documents: a field holding each document's id (default: its position)")
    r.add_argument("--budget", type=int, default=100, help="most candidates sent to the engine")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--max-depth", type=int, default=2, help="longest path of one-to-many steps below the target")
    r.add_argument("--rebase-after", type=int, default=20,
                   help="rejections after which the exploration stream restarts with the accepted features")
    r.add_argument("--near-misses", type=int, default=None,
                   help="rejected candidates of the largest positive gains that join the accepted ones in the final "
                        "set and features.csv (default: 10 when the exploration has at most 1,000 labelled rows, "
                        "else 3; 0: the accepted ones only)")
    r.add_argument("--explore-rows", type=int, default=10_000,
                   help="labelled rows the exploration looks at (a stratified sample beyond that)")
    r.add_argument("--transport", choices=("inprocess", "jsonl", "kafka"),
                   help="the engine in this process, `streamforest run` as a child process over JSON lines, or a "
                        "`streamforest kafka run` worker (default: kafka with --bootstrap-servers, else inprocess)")
    r.add_argument("--forest-param", action="append", metavar="KEY=VALUE",
                   help="a FeatureStreamForest parameter of the loop's streams (repeatable)")
    r.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for the engine's feedback on one feature before giving up")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.set_defaults(func=cmd_run, kafka_transports=kafka_transports)


def _kafka_options() -> argparse.ArgumentParser:
    """The Kafka transport's options (those of ``streamforest kafka``, environment variables included)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("over Kafka", "the loop's messages go to a `streamforest kafka run` worker started "
                                           "separately (with the options the loop prints)")
    add_connection_options(g)
    g.add_argument("--input-topic", default="streamforest.input", help="the exploration worker's input topic")
    g.add_argument("--topic-prefix", default="streamforest", help="the exploration worker's output prefix")
    g.add_argument("--final-input-topic",
                   help="input topic of the worker that grows the final stream with the final forest's parameters "
                        "(default: the exploration worker's: then its parameters grow the final stream)")
    g.add_argument("--final-topic-prefix", help="output prefix of that worker (default: --topic-prefix)")
    g.add_argument("--run-id", help="prefix of this run's stream ids on the topics (default: a random one)")
    p.set_defaults(bootstrap_servers=None)  # its presence selects the Kafka transport
    env_defaults(p)
    return p


def load(args: argparse.Namespace):
    if args.schema:
        from streamforest.relational.schema import load_schema

        return load_schema(args.schema)
    if not args.label:
        raise ValueError("--documents needs --label (the label field)")
    from streamforest.relational.documents import load_documents

    return load_documents(args.documents, args.label, args.name, args.key)


def _note_unreached(db: Database, max_depth: int) -> None:
    """Say which tables lie deeper below the target than ``--max-depth`` (no feature reads them)."""
    from streamforest.relational.candidates import Generator

    reached = {db.target, *(p[-1].child for p in Generator(db, max_depth=max_depth).paths())}
    for name in sorted(db.below() - reached):
        print(f"streamforest relational: table {name!r} is more than {max_depth} one-to-many steps below "
              f"{db.target!r}: no feature reads it (--max-depth)", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    from streamforest.relational.drivers import EngineClient, InProcess, JsonlProcess
    from streamforest.relational.loop import Loop, engine_config
    from streamforest.relational.outputs import TrialLog, plot_curve, write_features, write_predictions

    forest = forest_params(args.forest_param)
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.near_misses is not None and args.near_misses < 0:
        raise ValueError(f"--near-misses must be >= 0, got {args.near_misses}")
    db = load(args)
    _note_unreached(db, args.max_depth)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config, final = engine_config(args.seed, forest), engine_config(args.seed, final=True)
    progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    kind = args.transport or ("kafka" if args.bootstrap_servers else "inprocess")
    if kind == "inprocess":
        transport, final_transport = InProcess(config), InProcess(final)
    elif kind == "jsonl":
        transport, final_transport = JsonlProcess(config, log=out / "engine"), JsonlProcess(final, out / "final")
    elif args.kafka_transports is None:
        raise ValueError("--transport kafka needs the Kafka connector (streamforest.connectors.kafka)")
    else:
        transport, final_transport = args.kafka_transports(args, config, final, progress)
    log = TrialLog(out / "candidates.jsonl")
    try:
        loop = Loop(db, client=EngineClient(transport, args.timeout),
                    final_client=EngineClient(final_transport, args.timeout),
                    budget=args.budget, seed=args.seed, rebase_after=args.rebase_after,
                    explore_rows=args.explore_rows, max_depth=args.max_depth, forest=forest, on_trial=log,
                    progress=progress,
                    policy_options=None if args.near_misses is None else {"near_misses": args.near_misses})
        result = loop.run()
    except (RuntimeError, TimeoutError) as exc:  # the engine refused a message or went away: say why
        hint = ""
        if kind == "kafka" and isinstance(exc, TimeoutError):
            hint = (f" (is a `streamforest kafka run` worker consuming {args.input_topic}"
                    f"{'' if not args.final_input_topic else ' and ' + args.final_input_topic}?)")
        print(f"streamforest relational: {exc}{hint}", file=sys.stderr)
        return 1
    finally:
        log.close()
        transport.close()
        final_transport.close()
    write_features(out / "features.csv", db, result)
    write_predictions(out / "predictions.csv", db, result)
    plot_curve(out / "loop.png", result, f"{db.target}: {len(result.accepted)} accepted of {len(result.trials)}")
    print(f"relational: {len(result.trials)} candidates tried, {len(result.accepted)} accepted, final out-of-bag "
          f"{result.final_oob if result.final_oob is None else round(result.final_oob, 4)}, "
          f"{len(result.predictions)} rows scored, {result.seconds:.1f} s -> {out}", file=sys.stderr)
    return 0
