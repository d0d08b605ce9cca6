"""Errors the harness raises on bad input (each message says what is wrong and how to fix it), and the exit codes a
run ends with. Imports only ``signal``: ``run.py`` reads the codes before its signal handlers and slow imports."""

import signal

EXIT_FAILED, EXIT_CONFIG, EXIT_BUSY, EXIT_PREEMPTED = 1, 2, 3, 75  # 75 = EX_TEMPFAIL: rerun to resume
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C, stopped on purpose (checkpointed; not a requeue)


def exit_code_for(signal_name: str | None) -> int:
    """The exit code of a run or sweep stopped by ``signal_name``: 130 for Ctrl-C, 75 (requeue) otherwise."""
    return EXIT_INTERRUPTED if signal_name == "SIGINT" else EXIT_PREEMPTED


class LRABenchError(Exception):
    """Base class: caught by ``run.py`` and printed without a traceback."""


class ConfigError(LRABenchError, ValueError):
    """A configuration value is unknown, of the wrong type or out of range."""


class DataError(LRABenchError):
    """Data is missing, unreadable or malformed (the message names the file and the fix)."""


class StorageError(LRABenchError, OSError):
    """A file or folder could not be written: not writable, a file where a folder must be, a full disk, the
    file-size limit (the message names the path and what to do)."""


class DiskFullError(StorageError):
    """A write failed because its file system is full (the message names the folder; earlier files are kept)."""


class RunFailed(LRABenchError):
    """Something inside a run ended it (an exception outside training, or an exit such as ``SystemExit``); its
    failed record is written, the process exits non-zero."""


class RunInProgress(LRABenchError):
    """Another process holds this run's lock (the same config is running elsewhere); this one skips it."""


class JobFailed(LRABenchError):
    """A sweep job did not end ok (raised in the sweep's parent once the job's record is stored): Hydra runs the
    remaining jobs, then the sweep exits with code 1."""


class CheckpointMismatch(LRABenchError):
    """The run's checkpoint folder holds a checkpoint of another configuration or of other code (the message says
    what differs, and how to start over or resume it anyway)."""
