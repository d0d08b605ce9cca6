"""Tables and charts from run records and benchmark cells (run from the repository root).

    python scripts/report.py                      # your results: $LRA_RESULTS_DIR (default results/runs) and
                                                  # $LRA_BENCH_DIR (default results/bench) -> results/report/
    python scripts/report.py --profile cpu --overlay-paper --out my_report
    python scripts/report.py --curated cpu        # regenerate the committed results/cpu/ from its committed records
    python scripts/report.py --size popularity --popularity-csv my_counts.csv   # columns attention,value,source

Writes into --out: table1.md / .csv (LRA Table 1), accuracy.png / .svg (per-task bars), val_curves.png / .svg
(validation accuracy during training), table2_<mode>.md / .csv
and scaling_<mode>.png / .svg (LRA Table 2), bubble.png / .svg / .csv (LRA Figure 3), and REPORT.md, which
embeds them all and states the command that regenerates them. Missing inputs skip their part with a message.
Without benchmark cells the bubble chart takes speed and memory from the run records themselves (the training
throughput and peak memory each run measured, for the task most variants ran), and says so on the chart.

Curated results (what the README shows) live in ``results/<name>/`` beside their raw inputs ``runs/`` and
``bench/``, marked by a ``CURATED`` file that holds the report options. Only ``--curated <name>`` writes there, and
it reads nothing but the committed inputs, so every curated number regenerates from the repository; any other
``--out`` that holds a ``CURATED`` file is refused.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # this command writes files only; the library leaves the backend to its caller
import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)
import matplotlib.pyplot as plt

from lra_bench.checks import closest
from lra_bench.reports.accuracy_plots import accuracy_plots
from lra_bench.reports.bubble import SIZES, XS, bubble_chart, majority_rate, read_popularity
from lra_bench.reports.curves import val_curves
from lra_bench.reports.efficiency import load_cells, scaling_plot, table2
from lra_bench.reports.paper import TASKS
from lra_bench.reports.reliability import rank_reliability
from lra_bench.reports.sweep_speed import cells_from_runs
from lra_bench.reports.table1 import REFERENCE, load_runs, pick_profile, table1, task_cells
from lra_bench.reports.task_vs_paper import task_scores, task_vs_paper

CURATED = "CURATED"  # marker file of a curated results folder; its "options:" line holds the report options
DEFAULT_OUT = Path("results/report")


def say(msg: str) -> None:
    print(msg, file=sys.stderr)


def curated_options(folder: Path) -> list[str]:
    """The report options stored in ``folder/CURATED`` (its line ``options: ...``)."""
    for line in (folder / CURATED).read_text().splitlines():
        if line.startswith("options:"):
            return shlex.split(line.removeprefix("options:"))
    return []


def main(argv: list[str] | None = None) -> int:
    given = list(argv if argv is not None else sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", type=Path, default=None,
                    help="run records (default $LRA_RESULTS_DIR, else results/runs)")
    ap.add_argument("--bench-dir", type=Path, default=None,
                    help="benchmark cells (default $LRA_BENCH_DIR, else results/bench)")
    ap.add_argument("--out", type=Path, default=None, help=f"where to write (default {DEFAULT_OUT})")
    ap.add_argument("--curated", metavar="NAME", default=None,
                    help="regenerate results/NAME/ from results/NAME/runs and results/NAME/bench with the options "
                         f"in results/NAME/{CURATED} (with --out: write elsewhere, e.g. to compare)")
    ap.add_argument("--profile", default=None,
                    help="profile for Table 1, the accuracy plot and the chart (default: Table 1 shows every "
                         "profile; the plots use the one with the most results)")
    ap.add_argument("--size", choices=SIZES, default="memory", help="what circle area shows (default memory)")
    ap.add_argument("--popularity-csv", type=Path, default=None,
                    help="CSV with columns attention,value,source for --size popularity")
    ap.add_argument("--overlay-paper", action="store_true", help="add the paper's own points as hollow circles")
    ap.add_argument("--x", choices=XS, default="examples_per_s", help="chart x axis (default examples_per_s)")
    ap.add_argument("--title", default=None, help="chart title (default says the device and profile)")
    ap.add_argument("--score-task", choices=TASKS, default=None,
                    help="one task's accuracy as the chart's y (not the LRA average) and its Table 1 column beside "
                         "the paper's with the difference per row and the rank agreement, e.g. a ListOps-only sweep")
    ap.add_argument("--reference", default=REFERENCE,
                    help=f"the variant every other is tested against in Table 1 (default {REFERENCE})")
    args = ap.parse_args(given)
    if args.curated is not None:
        folder = Path("results") / args.curated
        if not (folder / CURATED).is_file():
            ap.error(f"{folder} is not a curated results folder (no {folder / CURATED}); the curated sets are: "
                     + ", ".join(sorted(p.parent.name for p in Path("results").glob(f"*/{CURATED}"))))
        if args.runs_dir or args.bench_dir:
            ap.error("--curated reads only the committed results/NAME/runs and results/NAME/bench")
        args = ap.parse_args([*curated_options(folder), *given])  # the stored options, then what was given
        args.runs_dir, args.bench_dir = folder / "runs", folder / "bench"
        args.out = args.out or folder
        command = f"python scripts/report.py --curated {shlex.quote(args.curated)}"
    else:
        args.runs_dir = args.runs_dir or Path(os.environ.get("LRA_RESULTS_DIR") or "results/runs")
        args.bench_dir = args.bench_dir or Path(os.environ.get("LRA_BENCH_DIR") or "results/bench")
        args.out = args.out or DEFAULT_OUT
        if (args.out / CURATED).exists():
            ap.error(f"{args.out} holds curated results ({args.out / CURATED}); regenerate them with "
                     f"`python scripts/report.py --curated {args.out.name}`, or write elsewhere with --out DIR")
        command = " ".join(["python scripts/report.py", *(shlex.quote(str(a)) for a in given)])
    if args.size == "popularity":
        try:
            read_popularity(args.popularity_csv)
        except ValueError as e:
            ap.error(str(e))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.simplefilter("default")
    written: list[str] = []
    sections: list[str] = []
    skipped: list[str] = []

    # Table 1 and the accuracy bars from the run records
    runs = load_runs(args.runs_dir)
    if not runs.empty and args.reference not in set(runs.attention):
        guess = closest(args.reference, sorted(set(runs.attention)))
        ap.error(f"--reference {args.reference!r}: no record of that attention under {args.runs_dir}"
                 + (f"; did you mean {guess!r}?" if guess else f"; it has {', '.join(sorted(set(runs.attention)))}"))
    profile = args.profile or pick_profile(runs)
    t1, md1 = table1(runs, args.profile, reference=args.reference)
    if t1.empty:
        skipped.append(f"Table 1 and accuracy plot: {md1} under {args.runs_dir}")
    else:
        t1.to_csv(out / "table1.csv", index=False)
        (out / "table1.md").write_text(f"# LRA Table 1 on this hardware\n\nRegenerate: `{command}`\n\n{md1}\n")
        written += ["table1.md", "table1.csv"]
        sections.append(f"## Table 1: test accuracy\n\n{md1}")
        sections.append(rank_reliability(task_cells(runs, args.profile))[1])
        if args.score_task:
            tvp, md_tvp = task_vs_paper(t1, args.score_task, profile)
            name = f"table1_{args.score_task}_vs_paper"
            tvp.to_csv(out / f"{name}.csv", index=False)
            (out / f"{name}.md").write_text(f"# {args.score_task} beside the paper\n\nRegenerate: `{command}`\n\n"
                                            f"{md_tvp}")
            written += [f"{name}.md", f"{name}.csv"]
            sections.append(md_tvp)
        fig = accuracy_plots(runs, out / "accuracy.png", profile)
        plt.close(fig)
        written += ["accuracy.png", "accuracy.svg"]
        sections.append(f"![Per-task test accuracy, profile {profile}](accuracy.png)\n")
        try:
            fig = val_curves(runs, out / "val_curves.png", profile)
        except ValueError as e:
            skipped.append(f"validation curves: {e}")
        else:
            plt.close(fig)
            written += ["val_curves.png", "val_curves.svg"]
            sections.append(f"![Validation accuracy during training, profile {profile}](val_curves.png)\n")

    # Table 2 from the benchmark cells
    cells = load_cells(args.bench_dir)
    if cells.empty:
        skipped.append(f"Table 2: no benchmark cells under {args.bench_dir} (python scripts/benchmark.py measures "
                       "them; without them the bubble chart uses the run records' own training speed and memory)")
    else:
        for mode in sorted(cells["mode"].unique()):
            table, markdown = table2(cells, mode)
            table.to_csv(out / f"table2_{mode}.csv", index=False)
            (out / f"table2_{mode}.md").write_text(f"# LRA Table 2 on this hardware ({mode} mode)\n\n"
                                                   f"Regenerate: `{command}`\n\n{markdown}\n")
            scaling_plot(cells, out / f"scaling_{mode}.png", mode)
            written += [f"table2_{mode}.md", f"table2_{mode}.csv", f"scaling_{mode}.png", f"scaling_{mode}.svg"]
            sections.append(f"## Table 2: efficiency ({mode} mode)\n\n{markdown}\n"
                            f"![Cost against length, {mode} mode](scaling_{mode}.png)\n")

    # Figure 3: speed from the benchmark cells, else from the run records themselves
    speed = cells if not cells.empty else cells_from_runs(runs, profile)
    if not t1.empty and not speed.empty:
        try:
            scores = t1 if args.score_task is None else task_scores(t1, args.score_task, profile)
            fig = bubble_chart(scores, speed, out / "bubble.png", size=args.size, popularity_csv=args.popularity_csv,
                               overlay_paper=args.overlay_paper, x=args.x, profile=profile, title=args.title,
                               score_task=args.score_task, chance=majority_rate(runs, profile, args.score_task))
        except ValueError as e:
            skipped.append(f"bubble chart: {e}")
        else:
            omitted, meta = fig.bubble_omitted, fig.bubble_meta
            plt.close(fig)
            written += ["bubble.png", "bubble.svg", "bubble.csv"]
            note = ("" if not omitted else "Not plotted: " + "; ".join(f"{a} ({r})" for a, r in omitted.items())
                    + ".\n\n")
            if meta.get("busy_left_out"):
                note += (f"{meta['busy_left_out']} benchmark cell(s) at N={meta['n']} were timed while other work "
                         "used the cores and are left out (Table 2 marks them; `machine.other_cores` in each "
                         "cell).\n\n")
            if meta["speed_source"] == "records":
                note += (f"Speed and memory: the runs' own training throughput and peak memory (task {meta['task']}, "
                         f"N={meta['n']}, profile {meta['profile']}, batch {meta['batch']}), not the benchmark's "
                         "protocol; `python scripts/benchmark.py` measures that.\n\n")
            sections.insert(4 if args.score_task else 3,  # after Table 1, rank reliability and the accuracy bars
                            f"## Figure 3: score, speed and {args.size}\n\n![LRA bubble chart](bubble.png)\n\n"
                            f"{note}Plotted values: [bubble.csv](bubble.csv).\n")
    elif t1.empty:
        skipped.append("bubble chart: no run records, so no LRA score")
    else:
        skipped.append("bubble chart: no benchmark cells and no ok run record with a measured speed")

    for s in skipped:
        say(f"skipped: {s}")
    report = ["# LRA reproduction report", "",
              f"Regenerate everything in this folder from the repository root with:\n\n```bash\n{command}\n```\n",
              f"Inputs: run records `{args.runs_dir}`, benchmark cells `{args.bench_dir}`.\n"]
    if skipped:
        report.append("Skipped:\n\n" + "\n".join(f"- {s}" for s in skipped) + "\n")
    report += sections
    (out / "REPORT.md").write_text("\n".join(report) + "\n")
    written.append("REPORT.md")
    print(f"wrote {', '.join(written)} into {out}; inputs: {args.runs_dir}, {args.bench_dir}; "
          f"regenerate with: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
