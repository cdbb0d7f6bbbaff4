"""Command-line option helpers shared by the ``streamforest`` commands, whichever package defines the command.

The engine's options (:mod:`streamforest.engine.options`), the relational loop's (:mod:`streamforest.relational.cli`)
and the Kafka connector's (``streamforest.connectors.kafka.cli``) parse their values here, so that one option means
one thing in every command.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any


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
