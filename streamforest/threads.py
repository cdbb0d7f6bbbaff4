"""How many threads the numba kernels use for a call.

Routing, encoding and growing run in parallel numba loops. A parallel region waits for every worker thread, so on a
loaded machine a tiny batch (one sample) could wait milliseconds for a thread to be scheduled (measured: 7 to 30 ms
per call with the other cores busy) for microseconds of work. Callers that learn or predict one sample at a time
(the River adapter) run those calls on their own thread alone with :func:`single_thread`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numba

#: Batches with fewer samples than this are routed by a serial kernel (or on one thread, see :func:`threads_for`).
SERIAL_BELOW = 16
#: Below this many sample-tree pairs a kernel runs on one thread: a parallel region costs little on an idle machine,
#: but waits for a busy core to schedule its other thread (measured: a Mutagenesis fold, 170 samples and 30-tree
#: generations, took 6.1-8.6 s with two threads against 3.6-4.4 s with one while another job used a core).
SMALL_WORK = 16_384


@contextmanager
def single_thread() -> Iterator[None]:
    """Run the parallel kernels called in this block on the calling thread alone.

    With one thread a parallel region does not wait for the others, which matters when the work is small and the
    machine busy. Numba's thread count is per calling thread, so other threads are not affected.

    Examples
    --------
    >>> import numba
    >>> with single_thread():
    ...     numba.get_num_threads()
    1
    """
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


@contextmanager
def threads_for(n_samples: int, n_trees: int) -> Iterator[None]:
    """:func:`single_thread` when the work is small: a batch of fewer than :data:`SERIAL_BELOW` samples, or fewer
    than :data:`SMALL_WORK` sample-tree pairs (growing, routing or encoding them takes a millisecond or so).

    Examples
    --------
    >>> import numba
    >>> with threads_for(n_samples=170, n_trees=30):   # a small relational problem: one thread
    ...     numba.get_num_threads()
    1
    """
    if n_samples >= SERIAL_BELOW and n_samples * n_trees >= SMALL_WORK:
        yield
        return
    with single_thread():
        yield


#: :class:`ThreadChoice` tries the slower way again after this many timed blocks (doubling while it stays slower, up
#: to :data:`PROBE_MAX`): the machine's load changes, and a block on the wrong count costs one block's extra time.
PROBE_FIRST = 8
PROBE_MAX = 64
#: Weight of the newest block in :class:`ThreadChoice`'s running cost of each way.
COST_WEIGHT = 0.5


class ThreadChoice:
    """Runs blocks of parallel kernels on one thread or on numba's threads, whichever has cost less of late.

    On an idle machine a generation of 30 trees on a window of 2,000 samples grows nearly twice as fast on two
    threads; with the other core busy, the parallel region waits for it and the block takes twice as long as on
    one thread. Which holds is not known in advance, so each block is timed, per unit of ``work`` (samples x
    trees), as a running cost of each way; the cheaper runs, and the other is tried again now and then
    (:data:`PROBE_FIRST`, :data:`PROBE_MAX`). The results do not depend on the choice: the kernels give the same
    trees and sums on any number of threads. Blocks of less than :data:`SMALL_WORK` run on one thread, untimed;
    a block inside a block runs on its choice.

    Examples
    --------
    >>> import numba
    >>> choice = ThreadChoice()
    >>> with choice(work=100):            # small: one thread
    ...     numba.get_num_threads()
    1
    >>> with choice(work=60_000):         # the first large block tries numba's threads, the next one thread
    ...     numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    True
    >>> with choice(work=60_000):
    ...     numba.get_num_threads()
    1
    """

    def __init__(self) -> None:
        self._cost: dict[bool, float] = {}  # parallel or not -> running seconds per unit of work
        self._since_probe = 0
        self._probe_every = PROBE_FIRST
        self._inside = False

    def _choose(self) -> tuple[bool, bool]:
        """Whether the next block runs on numba's threads, and whether that tries again the way that cost more."""
        if len(self._cost) < 2:
            return True not in self._cost, False
        best = self._cost[True] < self._cost[False]
        self._since_probe += 1
        if self._since_probe < self._probe_every:
            return best, False
        self._since_probe = 0
        return not best, True

    def _record(self, parallel: bool, cost: float, probe: bool) -> None:
        before = self._cost.get(parallel)
        # A probe's earlier cost is from blocks ago, under another load: the probe replaces it.
        self._cost[parallel] = cost if before is None or probe else before + COST_WEIGHT * (cost - before)
        if probe:
            slower = self._cost[parallel] >= self._cost[not parallel]
            self._probe_every = min(2 * self._probe_every, PROBE_MAX) if slower else PROBE_FIRST

    @contextmanager
    def __call__(self, work: int) -> Iterator[None]:
        if self._inside:
            yield
            return
        self._inside = True
        try:
            if work < SMALL_WORK or numba.get_num_threads() == 1:
                with single_thread():
                    yield
                return
            parallel, probe = self._choose()
            start = time.perf_counter()
            with nullcontext() if parallel else single_thread():
                yield
            self._record(parallel, (time.perf_counter() - start) / work, probe)
        finally:
            self._inside = False
