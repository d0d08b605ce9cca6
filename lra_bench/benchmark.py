"""Benchmark primitives: time a callable with warm-up and repeats (median and spread), and measure
its peak memory in a fresh process so that one configuration's allocations never leak into another's.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from lra_bench.measure import peak_memory_bytes, reset_peak_memory, rss_bytes, synchronize


@dataclass
class Timing:
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    repeats: int
    warmup: int


def time_callable(fn: Callable[[], Any], device: torch.device, warmup: int, repeats: int) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed (synchronised on CUDA)."""
    if repeats < 1 or warmup < 0:
        raise ValueError("need repeats >= 1 and warmup >= 0")
    for _ in range(warmup):
        fn()
    durations = []
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        durations.append(time.perf_counter() - t0)
    q = statistics.quantiles(durations, n=4) if len(durations) > 1 else [durations[0]] * 3
    return Timing(median_s=statistics.median(durations), q1_s=q[0], q3_s=q[2], min_s=min(durations),
                  repeats=repeats, warmup=warmup)


def peak_memory_of(fn: Callable[[], Any], device: torch.device) -> dict[str, int | None]:
    """Peak memory while running ``fn`` once, relative to memory held just before (inputs, weights)."""
    before = torch.cuda.memory_allocated(device) if device.type == "cuda" else rss_bytes()
    reset_peak_memory(device)
    fn()
    peak = peak_memory_bytes(device)
    return {"peak_bytes": peak, "before_bytes": before,
            "peak_delta_bytes": None if peak is None or before is None else max(0, peak - before)}


def _limit_address_space(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_isolated(module: str, payload: dict[str, Any], timeout: float,
                 memory_limit_bytes: int | None = None) -> dict[str, Any]:
    """Run ``python -m module`` in a fresh process with ``payload`` as JSON on stdin; parse its JSON stdout.

    Errors come back as ``{"status": "oom" | "failed" | "timeout", "message": ...}`` instead of raising,
    so one bad cell never stops a benchmark. ``memory_limit_bytes`` caps the child's address space
    (Linux RLIMIT_AS): a CPU stand-in for a device with that much memory.
    """
    limit = None if memory_limit_bytes is None else (lambda: _limit_address_space(memory_limit_bytes))
    try:
        proc = subprocess.run([sys.executable, "-m", module], input=json.dumps(payload), capture_output=True,
                              text=True, timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"exceeded {timeout:.0f}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    err = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
    oom = proc.returncode in (-9, 137) or "out of memory" in proc.stderr.lower() or "MemoryError" in proc.stderr
    return {"status": "oom" if oom else "failed", "message": err[0][-500:]}


__all__ = ["Timing", "asdict", "peak_memory_of", "run_isolated", "time_callable"]
