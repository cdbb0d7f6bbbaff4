"""What every benchmark records about the machine it ran on, so that its numbers can be read in context."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numba
import numpy as np

import streamforest


def environment(versions: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """Python, machine, cores, numba's threads and layer, the load at the time, and library versions."""
    try:
        layer = str(numba.threading_layer())
    except ValueError:
        layer = "not yet chosen"
    return {
        "python": platform.python_version(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(), "numba_threading_layer": layer,
        "load_average": list(os.getloadavg()), **extra,
        "versions": {"streamforest": streamforest.__version__, "numpy": np.__version__, "numba": numba.__version__,
                     **(versions or {})},
    }


def machine_reference() -> dict[str, float]:
    """Seconds of a fixed workload on one core: a pure-Python loop of 10 million additions, and numpy sorting 20
    million floats. This machine's speed moves from day to day (the feature-arrival benchmark's peers, scikit-learn
    and LightGBM, have run 2-3 times slower on one day than on another), so runs of different days compare by it.
    """
    start = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    python = time.perf_counter() - start
    values = np.random.default_rng(0).random(20_000_000)
    start = time.perf_counter()
    np.sort(values)
    return {"python_loop_s": round(python, 3), "numpy_sort_s": round(time.perf_counter() - start, 3)}


def reference_line(reference: dict[str, float]) -> str:
    """:func:`machine_reference`'s figures as a benchmark prints them."""
    return (f"machine reference: Python loop {reference['python_loop_s']:.2f} s, numpy sort "
            f"{reference['numpy_sort_s']:.2f} s (a fixed workload: runs of different days compare by it)")


def int_list(text: str) -> tuple[int, ...]:
    """A comma-separated list of integers (an option's value)."""
    try:
        return tuple(int(v) for v in text.split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_window_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ours' windows: ``--long-window`` (``long_window``, a number above 1; default: one window) and
    ``--window-growth`` (``window_growth``; default: the estimator's)."""

    def above_one(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not value > 1:
            raise argparse.ArgumentTypeError(f"expected a number above 1, got {text!r}")
        return value

    ap.add_argument("--long-window", type=above_one, default=None,
                    help="ours' long_window: a second forest on a window this many times as long, the one with fewer "
                         "recent errors predicting (default: one window)")
    ap.add_argument("--window-growth", type=float, default=None,
                    help="ours' window_growth: how far the window may grow while the forest is not stale "
                         "(default: the estimator's)")


def window_options(args: argparse.Namespace) -> dict[str, Any]:
    """Ours' options from :func:`add_window_arguments`'s arguments (those left at their default are not passed)."""
    options: dict[str, Any] = {"long_window": args.long_window}
    if args.window_growth is not None:
        options["window_growth"] = args.window_growth
    return options


def stream_arguments(doc: str, argv: list[str] | None, streams: Iterable[str], out: Path, check: str,
                     one_draw: str, extra: Callable[[argparse.ArgumentParser], Any] | None = None,
                     default: str | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The options of a benchmark of both models on named streams (``--reps``, ``--data-seeds``, ``--only``,
    ``--out``, ``--check``: ``check`` says what it checks, ``one_draw`` which streams have one draw; ``extra`` adds a
    benchmark's own; ``default`` says which streams run without ``--only`` when not all of them), parsed and
    checked, and the streams chosen (all of them without ``--only``)."""
    streams = list(streams)
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if extra is not None:
        extra(ap)
    ap.add_argument("--reps", type=int, default=3, help="model seeds 1..reps, both models (default 3)")
    ap.add_argument("--data-seeds", type=int_list, default=(1,),
                    help=f"the generators' seeds, one row each (default 1; {one_draw} one row)")
    ap.add_argument("--only", help=f"comma-separated streams among {', '.join(streams)} (default: {default or 'all'})")
    ap.add_argument("--out", type=Path, default=out)
    ap.add_argument("--check", action="store_true", help=check)
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error(f"--reps must be a positive integer, got {args.reps}")
    names = streams if not args.only else [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in streams]
    if unknown:
        ap.error(f"unknown streams {unknown}; choose among {streams}")
    if not args.data_seeds:
        ap.error("--data-seeds needs at least one seed")
    return args, names


def stream_draws(names: list[str], data_seeds: tuple[int, ...], one_draw: Iterable[str]) -> Iterator[tuple[str, int]]:
    """Each stream of ``names`` with each data seed; those of ``one_draw`` (bundled datasets) with the first only."""
    one_draw = set(one_draw)
    for name in names:
        for data_seed in data_seeds[:1] if name in one_draw else data_seeds:
            yield name, data_seed


def stream_outcome(args: argparse.Namespace, versions: dict[str, str], record: dict[str, Any], missed: list[str],
                   target: str) -> int:
    """Write a benchmark on named streams to ``args.out`` (``record`` after the environment of the run), name the
    rows that missed the ``target``, and return the exit code (1 under ``--check`` when a row missed it)."""
    record = {"environment": environment(versions, reps=args.reps, data_seeds=list(args.data_seeds)), **record}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")
    if missed:
        print(f"target missed ({target}): {missed}")
    return 1 if args.check and missed else 0
