"""The curated CPU sweep's records, redone at the re-sized `quick` (results/cpu/runs, issue 46), and those from
before (results/cpu/runs_before: 3 seeds, the old budgets and test sets), and which tasks of the redo have all their
records: the docs quote the redo's figures for exactly those tasks (all four since it finished), so a task that
lost a record fails the tests that hold those quotes."""

from __future__ import annotations

from pathlib import Path

from lra_bench.store.records import read_records
from tests.conftest import ROOT

RUNS = ROOT / "results" / "cpu" / "runs"  # the redo (500 records)
RUNS_BEFORE = ROOT / "results" / "cpu" / "runs_before"  # the sweep at `quick` before its re-sizing (300 records)
#: the tasks in the docs' order and names, with the seeds scripts/sweep_cpu.sh runs them at
TASKS = {"listops": ("ListOps", range(6)), "text": ("Text", range(4)), "image": ("Image", range(6)),
         "pathfinder": ("Pathfinder", range(4))}

#: the 25 mixers registered at the sweep's commit, 6ebdfac (its `attention=glob(*)`); a mixer added since is not in it
MIXERS = ("bigbird", "compressed", "efficient", "flash", "fnet", "global", "gmlp", "linear", "linformer", "local",
          "longformer", "lru", "mamba", "mega", "mlp_mixer", "nystromformer", "performer", "reformer", "rfa", "routing",
          "s4d", "sinkhorn", "softmax", "strided", "synthesizer")


def complete_tasks(runs_dir: Path = RUNS) -> list[str]:
    """The docs' names of the tasks whose ok `quick` records cover every mixer of the sweep at every seed it runs
    (a seed compared as written, as the reports do: 0 and "0" are one seed, 0.5 is none)."""
    if not runs_dir.is_dir():  # loud: the tests that quote the redo must not pass on no records
        raise FileNotFoundError(f"{runs_dir}: the redo's records are not there (moved? point the tests that read "
                                "them there: tests/helpers/redo.py)")
    done = []
    for task, (name, seeds) in TASKS.items():
        have = {(r["attention"], str(r["seed"])) for r in read_records(runs_dir / task)
                if r["status"] == "ok" and r["profile"] == "quick"} if (runs_dir / task).is_dir() else set()
        if {(m, str(s)) for m in MIXERS for s in seeds} <= have:
            done.append(name)
    return done
