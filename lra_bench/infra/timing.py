"""Timing: a callable with warm-up and repeats (median and spread), and the trainer's per-step timer."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class StepTimer:
    """Wall time of training steps; the first ``warmup`` steps of every process are excluded.

    Call ``start``/``stop`` per step. A run resumed from a checkpoint is a new process: its first steps run with
    glibc's default allocator and then grow the heap again (``AllocatorReuse``), at several times a steady step's
    cost, so they are excluded after every resume as after the start, and ``excluded`` counts them all.
    """

    device: torch.device
    warmup: int
    durations: list[float] = field(default_factory=list)
    _seen: int = 0  # steps over every process of the run
    _this_process: int = 0  # steps since this process started (or loaded the timer's state)
    _t0: float | None = None

    def start(self) -> None:
        synchronize(self.device)
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        assert self._t0 is not None, "StepTimer.stop() without start()"
        synchronize(self.device)
        elapsed = time.perf_counter() - self._t0
        self._t0 = None
        self._seen += 1
        self._this_process += 1
        if self._this_process > self.warmup:
            self.durations.append(elapsed)

    def state_dict(self) -> dict[str, object]:
        return {"durations": list(self.durations), "seen": self._seen}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore a checkpoint's timer; this process's warm-up starts again (its steps are not yet timed)."""
        self.durations, self._seen = list(state["durations"]), int(state["seen"])
        self._this_process = 0

    @property
    def excluded(self) -> int:
        """Steps not timed, over every process of the run (each process's warm-up)."""
        return self._seen - len(self.durations)

    @property
    def timed_steps(self) -> int:
        return len(self.durations)

    @property
    def timed_seconds(self) -> float:
        return float(sum(self.durations))

    def steps_per_second(self) -> float | None:
        return self.timed_steps / self.timed_seconds if self.durations and self.timed_seconds > 0 else None


@dataclass
class Timing:
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    repeats: int
    warmup: int


def timed_runs(fn: Callable[[], Any], device: torch.device, repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn``, each synchronised on CUDA."""
    durations = []
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        durations.append(time.perf_counter() - t0)
    return durations


def summarize(durations: list[float], warmup: int) -> Timing:
    """Median, quartiles and minimum of timed steps (``warmup``: the untimed steps that came before them)."""
    if not durations:
        raise ValueError("no timed steps to summarize")
    q = statistics.quantiles(durations, n=4) if len(durations) > 1 else [durations[0]] * 3
    return Timing(median_s=statistics.median(durations), q1_s=q[0], q3_s=q[2], min_s=min(durations),
                  repeats=len(durations), warmup=warmup)


def time_callable(fn: Callable[[], Any], device: torch.device, warmup: int, repeats: int) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed (synchronised on CUDA)."""
    if repeats < 1 or warmup < 0:
        raise ValueError("need repeats >= 1 and warmup >= 0")
    for _ in range(warmup):
        fn()
    return summarize(timed_runs(fn, device, repeats), warmup)
