"""One process per run: an exclusive, non-blocking lock beside the run's record.

Two copies of the same configuration (a sweep launched twice, two nodes picking the same job) would share one
checkpoint folder and one record. The first takes ``<run_dir>/run.lock`` with ``flock`` (released by the kernel
when the process ends, however it ends; on NFS, Linux maps it to a POSIX lock); the second gets
``RunInProgress`` naming the holder, and skips the run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from lra_bench.errors import RunInProgress

LOCK_NAME = "run.lock"


@contextlib.contextmanager
def run_lock(folder: Path) -> Iterator[Path]:
    """Hold ``folder/run.lock`` for the block; raise ``RunInProgress`` at once when another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "another process"
            raise RunInProgress(f"{folder.name} is already running ({holder}; lock {path}); skipping it here. "
                                "Rerun the same command after that run ends to pick up its record.") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                      f"{dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race with a waiting process)
