"""Running the paper's datasets in worker processes: where the datasets are, and one numba thread per process.

Shared by :mod:`scenarios.paper_reproduction`, :mod:`scenarios.low_dimensional` and
:mod:`scenarios.induced_features`, which each run one task per dataset (all of its seeds) and collect the rows.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The paper's 242 datasets live in ``shared/`` beside the repository.
SHARED = REPO.parent / "shared"
#: The seeds of the paper's protocol (one stratified split and forest per seed).
SEEDS = tuple(range(2101, 2111))


def worker_init() -> None:
    """Make this process use one numba thread: one process per core, and numba's own threads would only
    oversubscribe (or take every core of a shared machine)."""
    # Once numba is imported its thread count is read: changing the environment variable then would make the next
    # compilation refuse the new count ("Cannot set NUMBA_NUM_THREADS ... once the threads have been launched"), so
    # only a process that has not imported numba yet sets it; every process limits its parallel regions to one.
    if "numba" not in sys.modules:
        os.environ["NUMBA_NUM_THREADS"] = "1"
    import numba

    numba.set_num_threads(1)


def run_all_tasks(run: Any, tasks: list[Any], workers: int) -> list[dict]:
    """``run(task)`` (a list of rows) for every task, in ``workers`` processes of one numba thread each."""
    from tqdm import tqdm

    rows: list[dict] = []
    if workers <= 1:
        for task in tqdm(tasks, desc="datasets", unit="ds"):
            rows.extend(run(task))
        return rows
    # Spawned, not forked: the parent has run numba's OpenMP threads by now, and a fork of a process using GNU OpenMP
    # aborts ("fork() called from a process already using GNU OpenMP"); a spawned worker also sets its numba thread
    # count before importing numba.
    with ProcessPoolExecutor(max_workers=workers, initializer=worker_init,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run, t): t for t in tasks}
        for fut in tqdm(as_completed(futures), total=len(futures), desc="datasets", unit="ds"):
            rows.extend(fut.result())
    return rows
