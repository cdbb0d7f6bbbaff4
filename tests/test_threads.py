"""ThreadChoice: the cheaper of one thread and numba's threads per unit of work, tried again now and then."""

from __future__ import annotations

import time

import numba
import pytest

from streamforest.threads import PROBE_FIRST, PROBE_MAX, SMALL_WORK, ThreadChoice

needs_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread here")


def _block(choice: ThreadChoice, work: int, seconds_on: dict[int, float]) -> int:
    """One block of ``choice`` that takes ``seconds_on[threads]``; returns the threads it ran on."""
    with choice(work):
        threads = numba.get_num_threads()
        time.sleep(seconds_on[min(threads, 2)])
    return threads


@needs_threads
@pytest.mark.parametrize("faster", [1, 2])
def test_the_cheaper_way_runs_and_the_other_is_tried_again_less_often_while_it_stays_dearer(faster):
    choice = ThreadChoice()
    seconds = {faster: 0.001, 3 - faster: 0.02}
    ran = [min(_block(choice, 2 * SMALL_WORK, seconds), 2) for _ in range(2 + PROBE_FIRST * 7)]
    assert ran[:2] == [2, 1]  # each way once
    probes = [i for i, r in enumerate(ran[2:]) if r != faster]
    # Tried again after PROBE_FIRST blocks, then after twice as many each time it stays dearer.
    gaps = [b - a for a, b in zip([-1, *probes], probes, strict=False)]
    assert gaps == [PROBE_FIRST, 2 * PROBE_FIRST, 4 * PROBE_FIRST][: len(gaps)] and len(gaps) == 3
    assert 8 * PROBE_FIRST <= PROBE_MAX


@needs_threads
def test_when_the_dearer_way_becomes_cheaper_a_probe_switches_to_it():
    choice = ThreadChoice()
    busy = {1: 0.001, 2: 0.02}   # the other core busy: one thread is cheaper
    idle = {1: 0.02, 2: 0.001}
    ran = [min(_block(choice, 2 * SMALL_WORK, busy), 2) for _ in range(2 + PROBE_FIRST // 2)]
    assert ran == [2, 1] + [1] * (PROBE_FIRST // 2)
    ran = [min(_block(choice, 2 * SMALL_WORK, idle), 2) for _ in range(PROBE_FIRST + 3)]
    assert ran[-3:] == [2, 2, 2]


def test_small_blocks_and_blocks_inside_a_block_run_untimed():
    choice = ThreadChoice()
    with choice(SMALL_WORK - 1):
        assert numba.get_num_threads() == 1
    assert choice._cost == {}
    with choice(2 * SMALL_WORK):
        outer = numba.get_num_threads()
        with choice(10 * SMALL_WORK):
            assert numba.get_num_threads() == outer
    assert list(choice._cost) == [True]


def test_a_block_that_raises_records_nothing_and_restores_the_threads():
    choice = ThreadChoice()
    before = numba.get_num_threads()
    with pytest.raises(RuntimeError, match="boom"), choice(2 * SMALL_WORK):
        raise RuntimeError("boom")
    assert choice._cost == {} and numba.get_num_threads() == before
    with choice(2 * SMALL_WORK):  # not stuck inside the failed block
        pass
    assert list(choice._cost) == [True]
