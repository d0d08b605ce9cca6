"""The machine a measurement ran on, and whether other work used its cores while it ran.

A speed measured while other processes kept the cores busy is slower than the code: such a measurement is marked
``busy`` and left out of the chart (issue 41). What is kept, per benchmark cell and per run record:

* ``cpu`` (the CPU's model name), ``usable_cores`` (the cores this process may run on: its affinity), ``threads``
  (torch's intra-op threads: the cores the measurement itself keeps busy);
* ``loadavg_before`` / ``loadavg_after``: the 1, 5 and 15-minute load averages at the start and the end;
* ``other_cores``: how many cores other processes kept busy on average during the timed work: the busy time of the
  usable cores (``/proc/stat``: user, nice, system, irq, softirq and steal, which is time the hypervisor gave to
  other machines) minus this process's own CPU time, over the wall time. Unlike the load average (a one-minute
  moving average that counts this process too) it covers exactly the timed interval;
* ``tick_cores``: what ``/proc/stat``'s tick accounting cannot resolve. It counts whole clock ticks (1/100 s): each
  measured interval can gain up to one tick per core at its edges (a core woken from idle is charged the whole
  tick), so short bursts read as other work on an idle machine (2 s of 5 ms bursts: 0.6 "other" cores). The bound
  is intervals x usable cores x one tick / wall time;
* ``busy``: ``other_cores`` exceeded the cores the measurement left spare (``usable_cores - threads``) by more
  than ``BUSY_MARGIN`` plus ``tick_cores``. None where ``/proc/stat`` cannot be read (not Linux): unknown, never
  "idle".
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BUSY_MARGIN = 0.25  # cores: other work above the spare cores by more than this marks a measurement busy
_STAT = Path("/proc/stat")
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (idle 3 and iowait 4 are not busy)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where affinity is unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@functools.cache
def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (None where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def busy_core_seconds() -> float | None:
    """Busy seconds summed over the usable cores since boot (``/proc/stat``), or None where unreadable."""
    try:
        lines = _STAT.read_text().splitlines()
    except OSError:
        return None
    cores = {f"cpu{i}" for i in os.sched_getaffinity(0)}
    ticks = 0
    for line in lines:
        name, *values = line.split()
        if name in cores:
            ticks += sum(int(values[i]) for i in _BUSY_FIELDS if i < len(values))
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class CoreUse:
    """Other processes' use of the usable cores over one or more measured intervals (``measuring``)."""

    threads: int
    wall_s: float = 0.0
    busy_s: float | None = 0.0  # busy core-seconds of the usable cores (None: unreadable)
    own_s: float = 0.0  # this process's CPU seconds (all its threads)
    intervals: int = 0  # measured intervals (each can gain a tick per core in /proc/stat: tick_cores)
    loadavg_before: list[float] | None = None
    loadavg_after: list[float] | None = None
    cores: int = field(default_factory=usable_cores)

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        """Count the wrapped interval (call it around each timed burst; parked time between bursts is not counted)."""
        if self.loadavg_before is None:
            self.loadavg_before = load_average()
        busy0, own0, t0 = busy_core_seconds(), time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            busy1, own1, t1 = busy_core_seconds(), time.process_time(), time.perf_counter()
            self.wall_s += t1 - t0
            self.intervals += 1
            self.own_s += own1 - own0
            self.busy_s = None if None in (busy0, busy1, self.busy_s) else self.busy_s + busy1 - busy0
            self.loadavg_after = load_average()

    @property
    def other_cores(self) -> float | None:
        if self.busy_s is None or self.wall_s <= 0:
            return None
        return max(0.0, self.busy_s - self.own_s) / self.wall_s

    @property
    def tick_cores(self) -> float:
        """The other cores that /proc/stat's tick accounting cannot tell from none over these intervals."""
        return self.intervals * self.cores / os.sysconf("SC_CLK_TCK") / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> dict[str, object]:
        """The fields a cell or record keeps (see the module docstring)."""
        other = self.other_cores
        spare = max(0, self.cores - self.threads)
        return {"cpu": cpu_name(), "usable_cores": self.cores, "threads": self.threads,
                "loadavg_before": self.loadavg_before, "loadavg_after": self.loadavg_after,
                "other_cores": None if other is None else round(other, 3), "tick_cores": round(self.tick_cores, 3),
                "busy": None if other is None else bool(other > spare + BUSY_MARGIN + self.tick_cores)}

