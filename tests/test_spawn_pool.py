"""The data generators' worker pool (lra_bench/data/spawn_pool.py): results in order on a normal exit; on an exception
in the caller (a preemption signal raised as ``Preempted``, Ctrl-C) its workers are terminated at once, not left to
finish the work they hold."""

from __future__ import annotations

import time

import pytest

from lra_bench.data.spawn_pool import spawn_pool


def test_results_come_back_in_order_and_the_workers_exit():
    with spawn_pool(2) as pool:
        assert list(pool.map(abs, [-3, 1, -2, 5])) == [3, 1, 2, 5]
        processes = list(pool._processes.values())
    assert processes and not any(p.is_alive() for p in processes)


def test_an_exception_in_the_caller_terminates_busy_workers_at_once():
    class Stop(Exception):
        pass

    with pytest.raises(Stop), spawn_pool(2) as pool:
        results = pool.map(time.sleep, [120] * 6)  # both workers busy for two minutes, four tasks queued
        deadline = time.monotonic() + 60
        while sum(p.is_alive() for p in pool._processes.values()) < 2:  # spawned workers take a moment to start
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.1)
        processes = list(pool._processes.values())
        stopped_at = time.monotonic()
        raise Stop  # as the run's signal handler raises Preempted while the generator waits on `results`
    assert time.monotonic() - stopped_at < 20, "the pool waited for its workers' work instead of terminating them"
    assert not any(p.is_alive() for p in processes)
    del results


def test_no_workers_is_refused():
    with pytest.raises(ValueError, match="at least one worker"), spawn_pool(0):
        pass
