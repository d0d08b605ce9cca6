"""The budget study's evidence: validation curves of runs trained past a profile's budget, and per task and mixer
the last quarter's gain (mean over seeds, 95 % t interval) beside the detectable gap of the curated table
(``lra_bench.reports.budget``). Writes curves.png/.svg and last_quarter.md into --out.

Run:  python tools/budget_curves.py --runs-dir results/budget/runs --out results/budget [--gaps-from results/cpu/runs]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _repo  # this checkout's lra_bench first (tools/_repo.py)

from lra_bench.reports.budget import last_quarter_markdown, last_quarter_table, plateau_runs
from lra_bench.reports.curves import val_curves
from lra_bench.reports.detectable import detectable
from lra_bench.reports.same_predictions import drop_repeats
from lra_bench.reports.table1 import REFERENCE, load_runs, task_cells
from lra_bench.store.files import atomic_open

ROOT = _repo.ROOT
TITLE = "Validation accuracy past the quick budget (the budget study)"


def detectable_gaps(runs_dir: Path) -> dict[str, float]:
    """Each task's detectable gap (points) in the curated table of ``runs_dir``."""
    runs = load_runs(runs_dir)
    profile = runs.profile.mode().iloc[0]
    cells = drop_repeats(task_cells(runs, profile), REFERENCE)  # as Table 1: one result under several names once
    gaps = {}
    for task, g in cells[cells.n > 0].groupby("task", sort=False):
        found = detectable(dict(zip(g.attention, g["sample"], strict=True)), task, REFERENCE)
        if found is not None:
            gaps[task] = found.gap
    return gaps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "results" / "budget" / "runs")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "budget")
    ap.add_argument("--gaps-from", type=Path, default=ROOT / "results" / "cpu" / "runs",
                    help="the curated runs whose detectable gaps the gains are compared with")
    ap.add_argument("--title", default=TITLE, help="the figure's title")
    args = ap.parse_args()
    runs = plateau_runs(load_runs(args.runs_dir))  # scratch, the records' profile, one result once, none at chance
    val_curves(runs, args.out / "curves", title=args.title)
    table = last_quarter_table(runs)
    gaps = detectable_gaps(args.gaps_from)
    def rel(p: Path) -> Path:
        return p.resolve().relative_to(ROOT) if p.resolve().is_relative_to(ROOT) else p

    text = (f"# The last quarter's gain\n\nRegenerate: `python tools/budget_curves.py --runs-dir {rel(args.runs_dir)} "
            f"--out {rel(args.out)} --gaps-from {rel(args.gaps_from)}"
            + (f" --title \"{args.title}\"" if args.title != TITLE else "")
            + "`\n\nValidation accuracy (points) at each run's last step minus at three quarters of it (between two "
            "evaluations, the straight line between them), mean over seeds with its 95 % t interval; detectable "
            "gap: the curated table's (80 % power, Holm). A gain whose upper bound is below the gap is a plateau for "
            "that table.\n\n"
            + last_quarter_markdown(table, gaps) + "\n")
    with atomic_open(args.out / "last_quarter.md") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
