"""Which tasks of the redone curated sweep (results/cpu/runs_next, issue 46) have all their records: the docs quote
the redo's figures for exactly those tasks, so a task whose last record lands fails the tests that hold those
quotes until the docs gain its row."""

from __future__ import annotations

from pathlib import Path

from lra_bench.store.records import read_records
from tests.conftest import ROOT

RUNS_NEXT = ROOT / "results" / "cpu" / "runs_next"
#: the tasks in the docs' order and names, with the seeds scripts/sweep_cpu.sh runs them at
TASKS = {"listops": ("ListOps", range(6)), "text": ("Text", range(4)), "image": ("Image", range(4)),
         "pathfinder": ("Pathfinder", range(4))}


def mixers() -> list[str]:
    """Every registered mixer (one config per name in configs/attention)."""
    return sorted(p.stem for p in (ROOT / "configs" / "attention").glob("*.yaml"))


def complete_tasks(runs_dir: Path = RUNS_NEXT) -> list[str]:
    """The docs' names of the tasks whose ok `quick` records cover every registered mixer at every seed the sweep
    runs it at."""
    want = set(mixers())
    done = []
    for task, (name, seeds) in TASKS.items():
        have = {(r["attention"], int(r["seed"])) for r in read_records(runs_dir / task)
                if r["status"] == "ok" and r["profile"] == "quick"} if (runs_dir / task).is_dir() else set()
        if {(m, s) for m in want for s in seeds} <= have:
            done.append(name)
    return done
