"""Live progress bars (tqdm) for a person at a terminal, and nowhere else.

A bar is drawn only when stderr is a terminal and the process is not a sweep job (Hydra multirun: every
job runs in its own child process, marked by ``SWEEP_JOB_ENV``, see run.py) nor a DDP rank other than 0;
logs, pipes, SLURM and CI get the periodic log lines only. ``LRA_PROGRESS=1`` forces bars on,
``LRA_PROGRESS=0`` off. While a bar is shown, log lines are printed above it. Bars only display: nothing
measured or recorded depends on them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from lra_bench.errors import ConfigError

SWEEP_JOB_ENV = "LRA_BENCH_JOB_CHILD"  # set by run.py in the process of every multirun job
PROGRESS_ENV = "LRA_PROGRESS"
ON, OFF = ("1", "true", "on", "yes"), ("0", "false", "off", "no")
FALLBACK_SIZE = (100, 24)  # columns, rows
TRAIN_FORMAT = "{desc} {percentage:3.0f}%|{bar}| step {n_fmt}/{total_fmt} | {rate_noinv_fmt} | ETA {remaining}{postfix}"

T = TypeVar("T")
log = logging.getLogger(__name__)
LONG_S = 15 * 60  # an estimate above this says how to make the work shorter
LOG_EVERY_S = 60.0  # progress lines in logs (no bar) at most this often
_stop_checks: list[Callable[[], None]] = []  # called by every ``tracked`` loop between items (see ``stop_checked``)


def duration(seconds: float) -> str:
    """A duration for a sentence: ``clock`` up to two days, then hours and days (``1,234 h (51 days)``)."""
    if seconds < 48 * 3600:
        return clock(seconds)
    return f"{seconds / 3600:,.0f} h ({seconds / 86400:,.0f} days)"


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour)."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


#: the profiles from the smallest run to the largest (configs/profile); a profile of your own counts as the largest
PROFILE_SIZES = {"smoke": 0, "quick": 1, "cpu": 2, "small": 3, "paper": 4, "s4": 4}
#: what to suggest for a shorter run, largest first: profiles sized for a CPU (configs/profile/*.yaml say how long)
SHORTER_PROFILES = ("cpu", "quick", "smoke")


def smaller_profile(current: str | None) -> str | None:
    """The largest of ``SHORTER_PROFILES`` smaller than ``current`` (never ``current`` itself), or None."""
    size = PROFILE_SIZES.get(str(current), max(PROFILE_SIZES.values()) + 1)
    return next((p for p in SHORTER_PROFILES if PROFILE_SIZES[p] < size), None)


def training_advice(remaining_steps: int, steps_per_s: float, profile: str | None = None) -> str | None:
    """What to do when the rest of a run will take longer than ``LONG_S`` at this speed; None otherwise. The
    profile it names is smaller than ``profile`` (the run's own), never that one."""
    if steps_per_s <= 0 or remaining_steps / steps_per_s <= LONG_S:
        return None
    in_budget = max(1, int(steps_per_s * LONG_S))
    smaller = smaller_profile(profile)
    instead = f"profile={smaller} or " if smaller else ""
    return (f"training needs about {clock(remaining_steps / steps_per_s)} more at {steps_per_s:.2f} steps/s; "
            f"for a shorter run use {instead}trainer.max_steps={in_budget} "
            "(about 15 minutes at this speed); a GPU (trainer.device=cuda) is usually much faster")


def bars_enabled(stream: IO[str] | None = None) -> bool:
    """Whether to draw bars: ``LRA_PROGRESS`` if set, else on when ``stream`` (stderr) is a terminal and
    this process is not a sweep job."""
    setting = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if setting in ON:
        return True
    if setting in OFF:
        return False
    if setting:
        raise ConfigError(f"{PROGRESS_ENV}={setting!r}: use {PROGRESS_ENV}=1 (bars on), {PROGRESS_ENV}=0 (off), "
                          "or leave it unset (on at a terminal, off in logs and sweeps)")
    if os.environ.get(SWEEP_JOB_ENV) or os.environ.get("RANK", "0") != "0":  # a sweep job, or not DDP's rank 0
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def terminal_columns(stream: IO[str]) -> int:
    """The width of the terminal behind ``stream``; 0 when unknown."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


@contextlib.contextmanager
def live_bar(total: int | None, desc: str, unit: str, initial: int = 0, show: bool = True,
             bar_format: str | None = None) -> Iterator[tqdm]:
    """A tqdm bar on stderr (a disabled one when bars are off or ``show`` is False); log lines go above it."""
    enabled = show and bars_enabled()
    sized = terminal_columns(sys.stderr) > 0  # a terminal of unknown size (0 x 0) gets a fixed one
    bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=sized,
               ncols=None if sized else FALLBACK_SIZE[0], nrows=None if sized else FALLBACK_SIZE[1],
               file=sys.stderr, bar_format=bar_format)
    with logging_redirect_tqdm() if enabled else contextlib.nullcontext():
        try:
            yield bar
        finally:
            bar.close()


@contextlib.contextmanager
def stop_checked(check: Callable[[], None]) -> Iterator[None]:
    """While inside, every ``tracked`` loop calls ``check`` before each item, which raises to stop the work.

    A signal handler that raises (``runner.StopSignals``) can lose its exception: Python swallows an exception
    raised while a ``__del__``, gc or weakref callback runs ("Exception ignored in ..."), and a data preparation
    (worker pools, futures) runs many. The handler still records the signal, and this check turns it into the
    stop at the next chunk, batch or image instead of after the whole generation."""
    _stop_checks.append(check)
    try:
        yield
    finally:
        _stop_checks.remove(check)


def tracked(items: Iterable[T], total: int | None, desc: str, unit: str, shorten: str | None = None) -> Iterator[T]:
    """Yield ``items`` while a bar counts them (data preparation: generation, decoding). Without a bar (logs,
    sweeps, SLURM) a progress line with the estimated time left is logged at most every ``LOG_EVERY_S`` seconds.
    When the first items say the whole will take longer than ``LONG_S``, a warning gives the estimate and
    ``shorten`` (how to make it shorter). Before each item the checks of ``stop_checked`` run."""
    start = last = time.monotonic()
    warned = False
    iterator = iter(items)
    try:
        with live_bar(total, desc, unit, show=total != 0) as bar:
            for done, item in enumerate(iterator, 1):
                for check in tuple(_stop_checks):
                    check()
                yield item
                bar.update(1)
                if not total:
                    continue
                now = time.monotonic()
                left = (now - start) / done * (total - done)
                if shorten and not warned and left > LONG_S:
                    log.warning("%s: about %s left at the speed of the first %d %s(s) here; %s", desc, clock(left),
                                done, unit, shorten)
                    warned = True
                if bar.disable and (now - last >= LOG_EVERY_S or done == total):
                    log.info("%s: %d/%d %s(s) (%.0f%%), %s elapsed, ETA %s", desc, done, total, unit,
                             100 * done / total, clock(now - start), clock(left))
                    last = now
    finally:  # left early (a stop check, an error): close a generator such as Executor.map's, which cancels
        close = getattr(iterator, "close", None)  # the work not started yet instead of waiting for all of it
        if close is not None:
            close()
