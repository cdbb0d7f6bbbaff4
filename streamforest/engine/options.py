"""The command-line options that configure an engine, shared by every command that runs one (``streamforest run``,
``streamforest kafka run``): one definition, checked when the command starts, before anything is read or written.
"""

from __future__ import annotations

import argparse

from streamforest.cli_options import bounded_int, forest_params
from streamforest.encoding import DEFAULT_N_COMPONENTS, VALUE_MODES
from streamforest.engine.core import (
    ENCODINGS,
    MAX_MESSAGE_BYTES,
    MAX_N_COMPONENTS,
    PUBLISH_POLICIES,
    STARTS,
    EngineConfig,
)


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The options that configure the engine, shared by every command that runs one (``run``, ``kafka run``);
    :func:`engine_config` turns them into an :class:`~streamforest.engine.core.EngineConfig`."""
    parser.add_argument("--seed", type=bounded_int(0, 2**63 - 1), default=0, help="the forests' random_state")
    parser.add_argument("--forest-param", action="append", metavar="KEY=VALUE",
                        help="a FeatureStreamForest parameter, e.g. trees_per_generation=30 (repeatable; the value "
                             "is read as JSON, or as a string when it is not JSON)")
    parser.add_argument("--publish", choices=PUBLISH_POLICIES, default="unlabelled",
                        help="which samples get predictions/encodings after each model change")
    parser.add_argument("--encoding", choices=ENCODINGS, default="leaves",
                        help="publish leaf encodings (one entry per tree), full node-path encodings, or none. The "
                             "encodings are most of the output (MagicTelescope, 6,340 scored samples x 10 "
                             "features: 179 MB of encodings with leaves, 10 MB of predictions); none publishes "
                             "predictions only")
    parser.add_argument("--n-components", type=bounded_int(1, MAX_N_COMPONENTS), default=DEFAULT_N_COMPONENTS,
                        help=f"width of the hashed encodings, 1..2**31-1 "
                             f"(default 2**{DEFAULT_N_COMPONENTS.bit_length() - 1})")
    parser.add_argument("--encoding-values", choices=VALUE_MODES, default="binary")
    parser.add_argument("--max-message-bytes", type=bounded_int(1), default=MAX_MESSAGE_BYTES,
                        help=f"refuse messages longer than this (dead letters keep their first 4 KiB and their "
                             f"length); default {MAX_MESSAGE_BYTES} (16 MiB): send larger feature columns in parts")
    parser.add_argument("--start", choices=STARTS, default="arrival",
                        help="when a stream's forest starts: as soon as it has a feature and labels of two values, "
                             "a generation per feature (arrival), or on a control start message, the offline forest "
                             "on all its features at once (control)")


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The :class:`~streamforest.engine.core.EngineConfig` of the options :func:`add_engine_options` added;
    ``ValueError`` naming the bad option."""
    forest = {"random_state": args.seed, **forest_params(args.forest_param)}
    try:
        return EngineConfig(forest=forest, publish=args.publish, encoding=args.encoding,
                            n_components=args.n_components, encoding_values=args.encoding_values,
                            max_message_bytes=args.max_message_bytes, start=args.start)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"bad engine option: {exc}") from None
