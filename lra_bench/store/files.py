"""Hashing and atomic writes: the one place for both.

* ``stable_hash(obj)``: sha256 of an object's canonical JSON (sorted keys) -- config hashes, cache keys, dataset
  fingerprints, record checksums.
* ``file_sha256(path)``: sha256 of a file's bytes, read in chunks -- source files, checkpoints.
* ``atomic_open`` / ``write_json_atomic``: a temporary file in the target's folder, flushed and fsynced, then renamed
  over the target. A crash, a kill or a full disk leaves either the previous complete file or the new complete one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import resource
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from lra_bench.errors import ConfigError, DiskFullError, StorageError

NEAR_FULL_BYTES = 1 << 20  # a failed write with less than this free is reported as a full disk


def stable_hash(obj: Any, strict: bool = False) -> str:
    """sha256 hex of ``obj`` as JSON with sorted keys. ``strict``: only JSON values (no NaN, no ``str()`` fallback
    for other objects) -- what a stored record may hold."""
    if strict:
        text = json.dumps(obj, sort_keys=True, allow_nan=False)
    else:
        text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    """sha256 hex of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def inside(root: Path, *names: str) -> Path:
    """``root/name/...`` after checking that every name is one plain file or folder name (no separator, not ``.``,
    ``..``, empty or hidden), so the path stays inside ``root`` whatever a config says."""
    for name in names:
        if (not isinstance(name, str) or not name or name.startswith(".") or os.sep in name
                or (os.altsep and os.altsep in name) or "\0" in name):
            raise ConfigError(f"{name!r} cannot name a folder inside {root}: a name must be non-empty, without "
                              f"'/', and not start with '.'")
    return Path(root).joinpath(*names)


FOLDER_FIX = "point LRA_RESULTS_DIR / LRA_CACHE_DIR (paths.results_dir / paths.cache_dir) at a folder you can write"


def _errnos(error: BaseException) -> set[int]:
    return {e.errno for e in (error, error.__cause__, error.__context__) if isinstance(e, OSError) and e.errno}


def write_error(target: Path, what: str, error: BaseException, written: int | None = None) -> StorageError | None:
    """One line naming ``target`` and what to do, for a write of ``what`` that failed with ``error``: a full disk
    (``disk_full_error``), the file-size limit (``ulimit -f``; Python ignores SIGXFSZ, so the write fails with EFBIG,
    or torch's zip writer with no errno at all), a folder that is not writable, a file where a folder must be.
    ``written``: the bytes the failed file reached (for errors without an errno). None when ``error`` is none of
    these."""
    target = Path(target)
    codes = _errnos(error)
    if (full := disk_full_error(target.parent, what, error)) is not None:
        return full
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    reached = written if written is not None else _size(target)
    if errno.EFBIG in codes or (not codes and soft != resource.RLIM_INFINITY and reached >= soft > 0):
        return StorageError(errno.EFBIG, f"writing {what} to {target} passed this process's file-size limit "
                                         f"({soft} bytes, `ulimit -f`): raise it (`ulimit -f unlimited`) and rerun "
                                         "the same command; earlier files are kept")
    if codes & {errno.EACCES, errno.EPERM, errno.EROFS}:
        return StorageError(errno.EACCES, f"cannot write {what} to {target}: permission denied or a read-only file "
                                          f"system; make that folder writable, or {FOLDER_FIX}")
    if codes & {errno.ENOTDIR, errno.EEXIST}:
        return StorageError(errno.ENOTDIR, f"cannot write {what} to {target}: a file is where a folder must be "
                                           f"({blocking_file(target) or target}); move or remove it, or {FOLDER_FIX}")
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def blocking_file(path: Path) -> Path | None:
    """The first part of ``path`` (itself or a parent) that exists and is not a folder, or None."""
    for part in [*reversed(Path(path).parents), Path(path)]:
        if part.exists() and not part.is_dir():
            return part
        if not part.exists():
            return None
    return None


def check_folder(folder: Path, what: str) -> None:
    """Before a run writes into ``folder``: a ``StorageError`` naming the path and the fix when a file stands where
    the folder or one of its parents must be, or when the nearest existing folder cannot be written (a read-only
    file system, missing permissions). Creates nothing."""
    folder = Path(folder)
    if (blocker := blocking_file(folder)) is not None:
        raise StorageError(errno.ENOTDIR, f"{what} {folder} cannot be created: {blocker} is a file where a folder "
                                          f"must be; move or remove it, or {FOLDER_FIX}")
    existing = next(p for p in [folder, *folder.parents] if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise StorageError(errno.EACCES, f"{what} {folder} is not writable ({existing}: permission denied or a "
                                         f"read-only file system); make it writable, or {FOLDER_FIX}")


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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise (write_error(path, path.name, e) or e) from e
    try:
        with os.fdopen(fd, "w", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, StorageError) and (failed := write_error(
                path, path.name, e)) is not None:
            raise failed from e
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_stale_temps(*folders: Path) -> None:
    """Remove the temporary files (``.*.tmp``) that killed atomic writes left in ``folders``. Only for a process
    that owns the folders (it holds the run's lock): another writer's temporary file would vanish under it."""
    for folder in folders:
        for path in Path(folder).glob(".*.tmp"):
            path.unlink(missing_ok=True)


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as JSON to ``path`` via ``atomic_open`` (sorted keys, no NaN, trailing newline)."""
    with atomic_open(path) as f:
        json.dump(payload, f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")
