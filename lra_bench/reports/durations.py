"""The durations the README and docs quote, measured: each one a named figure computed from committed run records.

A doc quotes a measured duration as its rounded value followed by a marker naming the figure,
``about 10 min<!-- measured: cpu.listops.softmax.median -->``; ``tests/test_durations.py`` recomputes every marked
figure from the records and fails when the text and the records disagree, and fails on any duration in the docs
that is neither marked nor listed there as a setting, a limit or a tool's own measurement.
``python tools/durations.py`` prints every figure with the records and the machine behind it.

Wall time is the record's ``wall_time_s``: from the start of ``run()`` to the record written (the job's Python
start-up and imports, a few seconds, are not in it); for a run that resumed from a checkpoint, whose ``wall_time_s``
counts only its last process, its phases summed over every process (``store.records.run_wall_seconds``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lra_bench.reports.efficiency import load_cells
from lra_bench.store.records import read_records, run_wall_seconds

# The curated folders whose records the docs quote, and what each holds.
SOURCES = {
    "quick": ("results/cpu/runs", "quick"),  # the CPU-scale sweep of every mixer (scripts/sweep_cpu.sh)
    "quick_before": ("results/cpu/runs_before", "quick"),  # the same sweep at `quick` before its re-sizing (issue 46)
    "cpu": ("results/cpu_ssm", "cpu"),  # the `cpu` profile's runs (softmax, s4d, lru, linear; tuning and hold-outs)
    "protocols": ("results/cpu_protocols/runs", "cpu"),  # from scratch, self-pretrained and compute-matched runs
}
BENCH_SOURCES = {  # the benchmark cells behind each curated Table 2 (the newest cell of each length, as the table)
    "cpu": "results/cpu/bench",
    "cpu_ssm": "results/cpu_ssm/bench",
}
GENERATED_TASKS = ("listops", "pathfinder")  # no download: the overnight sweep runs them on a fresh clone offline
SWEEP_JOBS = 2  # scripts/sweep_cpu.sh runs two single-threaded jobs at a time
SWEEPS = {"quick": "sweep_cpu", "quick_before": "sweep_cpu_before"}  # sources that scripts/sweep_cpu.sh made


@dataclass(frozen=True)
class Figure:
    """One quoted duration: its value in seconds, how it was computed and from how many records on which hosts."""

    seconds: float
    text: str  # what a doc writes: ``human(seconds)`` for a run's wall time, three digits for a step's time
    how: str
    runs: int
    hosts: tuple[str, ...]


def human(seconds: float) -> str:
    """The rounding a doc quotes: seconds under 90 s, minutes under 90 min, hours with one decimal above."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _walls(records: Iterable[dict]) -> list[float]:
    return [w for w in map(run_wall_seconds, records) if w is not None]


def _steps(record: dict) -> int | None:
    trainer = record.get("config", {}).get("trainer", {})
    return int(trainer["max_steps"]) if isinstance(trainer, dict) and trainer.get("max_steps") else None


def _figure(records: list[dict], seconds: float, how: str) -> Figure:
    hosts = tuple(sorted({str(r.get("host")) for r in records}))
    return Figure(seconds=seconds, text=human(seconds), how=how, runs=len(records), hosts=hosts)


def figures_of(name: str, records: list[dict]) -> dict[str, Figure]:
    """The named figures of one source's ok records (``name``: a key of ``SOURCES``): of all runs, per task, per task
    and mixer, per task and protocol (other than from scratch) and per task and step budget."""
    ok = [r for r in records if r.get("status") == "ok" and run_wall_seconds(r) is not None]
    out: dict[str, Figure] = {}
    if not ok:
        return out

    def add(key: str, rows: list[dict]) -> None:
        walls = _walls(rows)
        if not walls:
            return
        out[f"{key}.median"] = _figure(rows, statistics.median(walls), "median wall time of one run")
        out[f"{key}.min"] = _figure(rows, min(walls), "shortest run")
        out[f"{key}.max"] = _figure(rows, max(walls), "longest run")
        out[f"{key}.sum"] = _figure(rows, sum(walls), "all runs' wall time summed (one job at a time)")

    add(f"{name}.run", ok)
    for task in sorted({r["task"] for r in ok}):
        rows = [r for r in ok if r["task"] == task]
        add(f"{name}.{task}", rows)
        for attention in sorted({r["attention"] for r in rows}):
            add(f"{name}.{task}.{attention}", [r for r in rows if r["attention"] == attention])
        for protocol in sorted({str(r.get("protocol")) for r in rows} - {"None", "none", "scratch"}):
            add(f"{name}.{task}.{protocol}", [r for r in rows if str(r.get("protocol")) == protocol])
        for steps in sorted({_steps(r) for r in rows} - {None}):
            add(f"{name}.{task}.steps{steps}", [r for r in rows if _steps(r) == steps])
    if name in SWEEPS:  # scripts/sweep_cpu.sh: the same runs, SWEEP_JOBS at a time
        generated = [r for r in ok if r["task"] in GENERATED_TASKS]
        out[f"{SWEEPS[name]}.offline"] = _figure(generated, sum(_walls(generated)) / SWEEP_JOBS,
                                                 f"the ListOps and Pathfinder runs summed / {SWEEP_JOBS} jobs")
        out[f"{SWEEPS[name]}.all"] = _figure(ok, sum(_walls(ok)) / SWEEP_JOBS,
                                             f"every task's runs summed / {SWEEP_JOBS} jobs")
    return out


def step_figures(name: str, bench_dir: Path) -> dict[str, Figure]:
    """``bench.<name>.<attention>.<mode>.N<n>``: the median training-step time of each ok benchmark cell that its
    Table 2 shows (the newest of each attention, mode and length), quoted to three digits."""
    cells = load_cells(bench_dir)
    out: dict[str, Figure] = {}
    if cells.empty:
        return out
    for cell in cells[cells["status"] == "ok"].itertuples():
        key = f"bench.{name}.{cell.attention}.{cell.mode}.N{cell.n}"
        out[key] = Figure(seconds=float(cell.median_s), text=f"{float(cell.median_s):#.3g} s",
                          how=f"median of {cell.repeats} timed steps, batch {cell.batch}, commit {cell.git_commit[:7]}",
                          runs=1, hosts=(str(cell.device),))
    return out


def measured_figures(root: Path) -> dict[str, Figure]:
    """Every named figure of every source under the repository root ``root``."""
    out: dict[str, Figure] = {}
    for name, (folder, profile) in SOURCES.items():
        records = [r for r in read_records(root / folder) if r.get("profile") == profile]
        out.update(figures_of(name, records))
    for name, folder in BENCH_SOURCES.items():
        out.update(step_figures(name, root / folder))
    return out
