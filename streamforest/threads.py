"""How many threads the numba kernels use for a call.

Routing, encoding and growing run in parallel numba loops. A parallel region waits for every worker thread, so on a
loaded machine a tiny batch (one sample) could wait milliseconds for a thread to be scheduled (measured: 7 to 30 ms
per call with the other cores busy) for microseconds of work. Callers that learn or predict one sample at a time
(the River adapter) run those calls on their own thread alone with :func:`single_thread`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
