"""Command-line option helpers shared by the ``streamforest`` commands, whichever package defines the command.

The engine's options (:mod:`streamforest.engine.options`), the relational loop's (:mod:`streamforest.relational.cli`)
and the Kafka connector's (``streamforest.connectors.kafka.cli``) are defined and parsed here where they are shared,
so that one option means one thing in every command: integers in a range, ``--forest-param KEY=VALUE``, the options
that connect to Kafka brokers (plain argparse: nothing here imports a Kafka client), and defaults from
``STREAMFOREST_<OPTION>`` environment variables.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable
from typing import Any

#: Every option of a command that calls :func:`env_defaults` can be set as ``STREAMFOREST_<DEST>``.
ENV_PREFIX = "STREAMFOREST_"
#: What a flag's environment variable takes for true (anything else is false).
TRUE = ("1", "true", "yes", "on")
#: The Kafka client settings :func:`add_connection_options` adds besides ``--bootstrap-servers``.
CLIENT_SETTINGS = ("security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                   "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password")


def bounded_int(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer in ``low..high``, refused when the command starts.

    Examples
    --------
    >>> bounded_int(1, 10)("0x0a"), bounded_int(1)("1_000")
    (10, 1000)
    """

    def parse(text: str) -> int:
        try:
            value = int(text, 0)  # 0x..., 1_000 and plain decimals
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            span = f"at least {low}" if high is None else f"in {low}..{high}"
            raise argparse.ArgumentTypeError(f"must be {span}, got {value}")
        return value

    return parse


def forest_params(pairs: Iterable[str] | None) -> dict[str, Any]:
    """The ``--forest-param KEY=VALUE`` options as forest parameters: each value read as JSON, or as a string when it
    is not JSON (``policy=baseline``); ``ValueError`` for an option that is not ``KEY=VALUE``.

    Examples
    --------
    >>> forest_params(["trees_per_generation=30", "policy=baseline", "max_depth=null"])
    {'trees_per_generation': 30, 'policy': 'baseline', 'max_depth': None}
    >>> forest_params(["=3"])
    Traceback (most recent call last):
    ...
    ValueError: --forest-param expects key=value, got '=3'
    """
    params: dict[str, Any] = {}
    for kv in pairs or []:
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise ValueError(f"--forest-param expects key=value, got {kv!r}")
        try:
            params[k] = json.loads(v)
        except json.JSONDecodeError:
            params[k] = v  # a bare word: a string parameter such as policy=baseline
    return params


def add_connection_options(p: argparse.ArgumentParser | Any) -> None:
    """The options that reach Kafka brokers (``--bootstrap-servers`` and the client's security settings), on a
    parser or an argument group; :func:`client_settings` reads them back."""
    p.add_argument("--bootstrap-servers", default="localhost:9092", help="host:port[,host:port...] of the brokers")
    p.add_argument("--security-protocol", choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
                   help="passed to kafka-python")
    p.add_argument("--sasl-mechanism", help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER")
    p.add_argument("--sasl-plain-username")
    p.add_argument("--sasl-plain-password")
    p.add_argument("--ssl-cafile")
    p.add_argument("--ssl-certfile")
    p.add_argument("--ssl-keyfile")
    p.add_argument("--ssl-password")


def client_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The client settings given by the options of :func:`add_connection_options` (those that were set)."""
    return {n: getattr(args, n) for n in CLIENT_SETTINGS if getattr(args, n, None) is not None}


def env_defaults(p: argparse.ArgumentParser) -> None:
    """Defaults from ``STREAMFOREST_<DEST>``, converted like the command line would; a bad value is reported when
    the command runs (:func:`check_env`), not while every command's parser is built.

    A flag takes ``1``/``true``/``yes``/``on``; a repeatable option takes values separated by whitespace; the
    command line wins.
    """
    errors = []
    for action in p._actions:
        if not action.option_strings or action.dest == "help":
            continue
        raw = os.environ.get(ENV_PREFIX + action.dest.upper())
        if raw is None:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            value: Any = raw.strip().lower() in TRUE
        elif isinstance(action, argparse._AppendAction):
            value = raw.split()
        else:
            try:
                value = action.type(raw) if action.type else raw
            except ValueError:
                errors.append(f"{ENV_PREFIX}{action.dest.upper()}={raw!r} is not a valid {action.type.__name__}")
                continue
            if action.choices is not None and value not in action.choices:
                errors.append(f"{ENV_PREFIX}{action.dest.upper()}={raw!r}: expected one of {list(action.choices)}")
                continue
        p.set_defaults(**{action.dest: value})
        action.required = False
    p.set_defaults(env_errors=errors)


def check_env(args: argparse.Namespace) -> None:
    """``ValueError`` naming the environment variables :func:`env_defaults` could not read, if any."""
    if getattr(args, "env_errors", None):
        raise ValueError("; ".join(args.env_errors))
