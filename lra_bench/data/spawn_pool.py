"""A pool of spawned worker processes for data generation that stops at once when the run stops.

The generators (ListOps chunks, Pathfinder batches) hand work to a few processes. When the run is stopped during
generation (a preemption signal raised as ``Preempted`` in the main process, Ctrl-C, an error) the workers are
terminated. A plain ``ProcessPoolExecutor`` shutdown lets them finish the work they hold, and on a loaded machine a
preempted ListOps generation kept its two workers busy for 97 s after the run's SIGTERM. Nothing is lost by
terminating: generation is deterministic, and the Pathfinder batches already written are kept and reused.

``ProcessPoolExecutor`` (not ``multiprocessing.Pool``) because a worker killed from outside (out of memory) makes it
raise ``BrokenProcessPool``, where ``multiprocessing.Pool`` would wait for the lost task forever.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

JOIN_TIMEOUT_S = 10.0  # a terminated worker that has not exited by then is killed


@contextlib.contextmanager
def spawn_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """``workers`` processes started with spawn, not fork (the caller may hold threads, torch's, that a forked child
    would inherit broken). On a normal exit, work not yet started is cancelled and running work finishes; on any
    exception, the workers are terminated at once with their work, then the exception goes on."""
    if workers < 1:
        raise ValueError(f"spawn_pool needs at least one worker, got {workers}")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    except BaseException:
        terminate_workers(pool)
        raise
    pool.shutdown(wait=True, cancel_futures=True)  # work never asked for is dropped


def terminate_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the worker processes now (Python 3.14 has ``pool.terminate_workers()``; before
    it the executor's process table is the only handle on them)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # pid -> Process, read before shutdown
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()
