"""Atomic file writes: a temporary file in the target's folder, flushed and fsynced, then renamed over the
target. A crash, a kill or a full disk leaves either the previous complete file or the new complete one."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from lra_bench.errors import DiskFullError

NEAR_FULL_BYTES = 1 << 20  # a failed write with less than this free is reported as a full disk


def disk_full_error(folder: Path, what: str, error: BaseException) -> DiskFullError | None:
    """A ``DiskFullError`` naming ``folder`` when ``error`` (or its cause) is ENOSPC/EDQUOT or the file system
    holding ``folder`` is (nearly) full -- some writers (torch.save's zip writer) do not report the errno."""
    for e in (error, error.__cause__, error.__context__):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            break
    else:
        try:
            if shutil.disk_usage(folder).free >= NEAR_FULL_BYTES:
                return None
        except OSError:
            return None
    return DiskFullError(errno.ENOSPC, f"no space left on {folder} while writing {what}; earlier files there are "
                                       f"kept: free space (or point it elsewhere) and rerun the same command")


@contextlib.contextmanager
def atomic_open(path: Path, newline: str | None = None) -> Iterator[IO[str]]:
    """``with atomic_open(p) as f: f.write(...)`` replaces ``p`` only if the block completes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, DiskFullError) and (full := disk_full_error(
                path.parent, path.name, e)) is not None:
            raise full from e
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
