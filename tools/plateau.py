"""Is a sweep's budget at a plateau, per task over its mixers? From run records with at least two validations
each (the redone `quick` validates four times): the last quarter's gain of every mixer (mean over its seeds), then
per task the mean over mixers with its 95 % t interval over them, the mixer that gains most and the highest upper
bound of a mixer's own interval (``lra_bench.reports.budget.over_mixers``), on the records
``lra_bench.reports.budget.plateau_runs`` keeps: one training protocol (``--protocol``, default scratch) and profile
(``--profile``, default the records' own), one result under several names once, no cell at chance or with a
collapsed run. Prints a Markdown table; docs/benchmark.md quotes it.

Run:  python tools/plateau.py --runs-dir results/cpu/runs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _repo  # this checkout's lra_bench first (tools/_repo.py)

from lra_bench.reports.budget import last_quarter_table, over_mixers, over_mixers_markdown, plateau_runs
from lra_bench.reports.protocols import report_labels
from lra_bench.reports.table1 import REFERENCE, load_runs

ROOT = _repo.ROOT


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "results" / "cpu" / "runs")
    ap.add_argument("--protocol", default="scratch",
                    help="the training protocol whose budget is judged, as the report labels it (a fine-tune's gain is "
                         "another question; the compute-matched controls: 'scratch, compute-matched')")
    ap.add_argument("--profile", default=None, help="the profile judged (default: the records' own)")
    ap.add_argument("--reference", default=REFERENCE,
                    help="the name one result under several names is counted under, when it is one of them")
    args = ap.parse_args(argv)
    if not args.runs_dir.is_dir():
        print(f"error: no folder {args.runs_dir}: pass the run records' folder (--runs-dir)", file=sys.stderr)
        return 2
    every = load_runs(args.runs_dir)
    runs = plateau_runs(every, args.protocol, args.profile, args.reference)
    table = last_quarter_table(runs) if len(runs) else runs
    if table.empty:
        there = sorted(set(report_labels(every))) if len(every) else []
        print(f"error: no ok record of protocol {args.protocol!r} under {args.runs_dir} with a last quarter to "
              f"measure (two or more validations, not at chance); the protocols there: {there}", file=sys.stderr)
        return 1
    print(over_mixers_markdown(over_mixers(table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
