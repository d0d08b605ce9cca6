"""Child processes that end with their parent, however the parent ends (SIGKILL included).

Linux delivers a chosen signal to a process when its parent dies if the process asked for it with
``prctl(PR_SET_PDEATHSIG, sig)``; nothing else (no handler, no ``atexit``) runs when the parent is SIGKILLed. Every
process the harness starts asks for it: the data-generation workers of a process pool (``pool_worker_init`` as the
pool's ``initializer``: SIGKILL -- they hold nothing worth saving), a sweep's job process and a benchmark cell
(``die_with_parent`` as ``preexec_fn``: SIGTERM for a job, which then checkpoints and exits for a requeue). A child
whose parent died before the request took effect sees it at once (its parent id changed) and ends itself.

Pool workers also ignore the stop signals (SIGINT, SIGTERM, SIGUSR2): sent to the whole process group (Ctrl-C at a
terminal, ``kill -USR2 -PGID``, a scheduler), they are the parent's to handle -- it stops the pool -- instead of each
worker dying with a traceback of its own. Workers are started inside ``spawning()``, with those signals blocked,
which they inherit: a spawned worker first imports the parent's main module (run.py, whose handlers would otherwise
answer a signal during that import), and unblocks them only once its initializer ignores them.
``start_pool_services`` starts multiprocessing's resource tracker with
those signals blocked (it ignores SIGINT and SIGTERM itself, not SIGUSR2, and a tracker killed by it is relaunched
with a traceback per semaphore); the tracker still ends once its parent and the workers are gone (end of file on its
pipe).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)


def _prctl_pdeathsig(sig: int) -> bool:
    """Ask the kernel for ``sig`` when this process's parent dies; False where that is not available."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """In a child (``preexec_fn``, a pool initializer): receive ``sig`` when the parent dies. ``parent``: the pid
    the child was started by; if it already changed, the parent is gone and ``sig`` is raised at once."""
    _prctl_pdeathsig(sig)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)


def pool_worker_init(parent: int) -> None:
    """A process pool's ``initializer`` (``initargs=(os.getpid(),)``): die with the parent, leave the stop signals
    to it (ignored here; blocked until now by ``spawning``)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    die_with_parent(signal.SIGKILL, parent)


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around what starts pool workers (``pool.map`` submits, and so spawns, at once): the stop signals are blocked
    in this thread meanwhile, and the workers inherit the block; a signal that came in is handled right after."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start_pool_services() -> None:
    """Before a process pool starts: multiprocessing's resource tracker, started with the stop signals blocked."""
    from multiprocessing import resource_tracker

    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def job_preexec(sig: int = signal.SIGTERM):
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when this process dies."""
    parent = os.getpid()
    return lambda: die_with_parent(sig, parent)
