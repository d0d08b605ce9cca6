"""Memory measurement: peak memory (CUDA or the process's resident peak), OOM classification, allocator reuse.

CPU peak memory is the process's high-water mark of resident memory (VmHWM), reset by writing
``5`` to ``/proc/self/clear_refs`` (Linux). CUDA peak memory is ``max_memory_allocated`` after
``reset_peak_memory_stats``. Both are reset at the start of the measured region.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(key: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_bytes() -> int | None:
    """Current resident set size of this process in bytes (None where /proc is unavailable)."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024


def reset_peak_memory(device: torch.device) -> bool:
    """Reset the peak-memory counter of ``device``; returns whether a reset was possible."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return True
    try:
        _CLEAR_REFS.write_text("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def peak_memory_bytes(device: torch.device) -> int | None:
    """Peak memory since the last reset: CUDA max allocated, or the CPU process's VmHWM."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    kib = _status_kib("VmHWM")
    return None if kib is None else kib * 1024


def peak_memory_of(fn: Callable[[], Any], device: torch.device) -> dict[str, int | None]:
    """Peak memory while running ``fn`` once, relative to memory held just before (inputs, weights)."""
    before = torch.cuda.memory_allocated(device) if device.type == "cuda" else rss_bytes()
    reset_peak_memory(device)
    fn()
    peak = peak_memory_bytes(device)
    return {"peak_bytes": peak, "before_bytes": before,
            "peak_delta_bytes": None if peak is None or before is None else max(0, peak - before)}


def tensor_peak_of(fn: Callable[[], Any]) -> int | None:
    """Peak bytes of CPU tensor memory allocated while ``fn`` runs once, over what was allocated just before: the
    profiler's allocation events (+ size on allocation, - size on free) summed in time order, their maximum. Exact
    and the same on every run and machine with the same ops, unlike a resident set's growth (glibc's caching, trims
    and page mapping moved a first step's RSS growth by 10 % and more between runs): the CPU counterpart of CUDA's
    ``max_memory_allocated``. Run it on a step that allocates as every step does (not the first, which also creates
    what later steps reuse). None when the profiler records no CPU allocation."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    sizes: list[tuple[int, int, int]] = []  # (start ns, order seen, signed bytes)
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            sizes.append((event.start_time_ns, len(sizes), int(event.extra_fields.alloc_size)))
        stack.extend(event.children)
    if not any(size > 0 for *_, size in sizes):
        return None
    held = peak = 0
    for *_, size in sorted(sizes):
        held += size
        peak = max(peak, held)
    return peak


def memory_kind(device: torch.device) -> str:
    return "cuda_max_allocated" if device.type == "cuda" else "cpu_peak_rss"


def is_oom(exc: BaseException) -> bool:
    """Whether an exception means out of memory: CUDA OOM, MemoryError, or the CPU allocator's failure."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


def _mallopt(*settings: tuple[int, int]) -> bool:
    """glibc ``mallopt`` for each (parameter, value); False where there is no glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return all(bool(libc.mallopt(param, value)) for param, value in settings)
    except (OSError, AttributeError):
        return False


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def reuse_freed_memory() -> bool:
    """Make glibc keep freed blocks for reuse instead of returning every block over its mmap threshold
    (at most 32 MiB) to the kernel and page-faulting it back in on the next step.

    Without this, any tensor above 32 MiB costs fresh zeroed pages on every CPU step, which bends time-vs-N
    curves upwards at the length where a variant's tensors cross 32 MiB (measured: Performer's 4K step
    0.68 s -> 0.35 s). Call it after memory has been measured: with it, resident memory no longer falls
    when tensors are freed. The benchmark's cells and the training loop (after its first step) both use it.
    Returns whether it applied (glibc on Linux only).
    """
    return _mallopt((M_MMAP_THRESHOLD, 1 << 30), (M_TRIM_THRESHOLD, 1 << 31))


def restore_allocator() -> bool:
    """Undo ``reuse_freed_memory``: glibc's thresholds at their adaptive defaults' ceiling (mmap above 32 MiB,
    trim above 64 MiB), and the memory kept so far handed back. Returns whether it applied."""
    done = _mallopt((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 64 << 20))
    if done:
        release_freed_memory(torch.device("cpu"))
    return done


def release_freed_memory(device: torch.device) -> bool:
    """Hand memory that tensors have freed back to the system: ``malloc_trim`` on CPU (glibc), the caching
    allocator's free blocks on CUDA. A benchmark worker that waits while others are timed calls it, so that parked
    workers hold only their weights and inputs; its next step page-faults (or ``cudaMalloc``\\ s) again and is not
    timed. Returns whether it applied."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        return True
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        ctypes.CDLL(name).malloc_trim(0)  # returns whether pages went back; applied either way
        return True
    except (OSError, AttributeError):
        return False


class AllocatorReuse:
    """The benchmark's allocator setting for a training loop: ``with AllocatorReuse(device) as a:`` and
    ``a.after_step()`` after every step. On CPU the first step runs with glibc's defaults (its peak memory is
    measured as the benchmark's cell measures it), then ``reuse_freed_memory`` applies, so that no later step pays
    page faults for the memory the previous one freed; leaving the block restores the defaults. ``applied`` says
    whether it took effect (the run record keeps it)."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.applied, self._done = device, False, device.type != "cpu"

    def __enter__(self) -> AllocatorReuse:
        return self

    def after_step(self) -> None:
        if not self._done:
            self._done = True
            self.applied = reuse_freed_memory()

    def __exit__(self, *exc: object) -> None:
        if self.applied:
            restore_allocator()
