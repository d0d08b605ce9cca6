"""Regenerate the curated results in ``results/`` from the raw results store (run from the repository root):

    python scripts/report.py                       # records in results/runs, benchmark cells in results/bench
    python scripts/report.py --profile cpu --overlay-paper
    python scripts/report.py --size popularity --popularity-csv my_counts.csv   # columns attention,value,source

Writes into --out: table1.md / .csv (LRA Table 1), accuracy.png / .svg (per-task bars), table2_<mode>.md / .csv
and scaling_<mode>.png / .svg (LRA Table 2), bubble.png / .svg / .csv (LRA Figure 3), and REPORT.md, which
embeds them all and states the command that regenerates them. Missing inputs skip their part with a message.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lra_bench.reports.accuracy_plots import accuracy_plots  # noqa: E402
from lra_bench.reports.bubble import SIZES, XS, bubble_chart, read_popularity  # noqa: E402
from lra_bench.reports.efficiency import load_cells, scaling_plot, table2  # noqa: E402
from lra_bench.reports.table1 import load_runs, pick_profile, table1  # noqa: E402


def say(msg: str) -> None:
    print(msg, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs-dir", type=Path, default=Path("results/runs"), help="run records (default results/runs)")
    ap.add_argument("--bench-dir", type=Path, default=Path("results/bench"),
                    help="benchmark cells (default results/bench)")
    ap.add_argument("--out", type=Path, default=Path("results"), help="where to write (default results)")
    ap.add_argument("--profile", default=None,
                    help="profile for Table 1, the accuracy plot and the chart (default: Table 1 shows every "
                         "profile; the plots use the one with the most results)")
    ap.add_argument("--size", choices=SIZES, default="memory", help="what circle area shows (default memory)")
    ap.add_argument("--popularity-csv", type=Path, default=None,
                    help="CSV with columns attention,value,source for --size popularity")
    ap.add_argument("--overlay-paper", action="store_true", help="add the paper's own points as hollow circles")
    ap.add_argument("--x", choices=XS, default="examples_per_s", help="chart x axis (default examples_per_s)")
    ap.add_argument("--title", default=None, help="chart title (default says the device and profile)")
    args = ap.parse_args(argv)
    if args.size == "popularity":
        try:
            read_popularity(args.popularity_csv)
        except ValueError as e:
            ap.error(str(e))
    given = argv if argv is not None else sys.argv[1:]
    command = " ".join(["python scripts/report.py", *(shlex.quote(str(a)) for a in given)])
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.simplefilter("default")
    written: list[str] = []
    sections: list[str] = []
    skipped: list[str] = []

    # Table 1 and the accuracy bars from the run records
    runs = load_runs(args.runs_dir)
    profile = args.profile or pick_profile(runs)
    t1, md1 = table1(runs, args.profile)
    if t1.empty:
        skipped.append(f"Table 1 and accuracy plot: {md1} under {args.runs_dir}")
    else:
        t1.to_csv(out / "table1.csv", index=False)
        (out / "table1.md").write_text(f"# LRA Table 1 on this hardware\n\nRegenerate: `{command}`\n\n{md1}\n")
        written += ["table1.md", "table1.csv"]
        sections.append(f"## Table 1: test accuracy\n\n{md1}")
        fig = accuracy_plots(runs, out / "accuracy.png", profile)
        plt.close(fig)
        written += ["accuracy.png", "accuracy.svg"]
        sections.append(f"![Per-task test accuracy, profile {profile}](accuracy.png)\n")

    # Table 2 from the benchmark cells
    cells = load_cells(args.bench_dir)
    if cells.empty:
        skipped.append(f"Table 2 and bubble chart: no benchmark cells under {args.bench_dir} "
                       "(run python scripts/benchmark.py first)")
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

    # Figure 3
    if not t1.empty and not cells.empty:
        try:
            fig = bubble_chart(t1, cells, out / "bubble.png", size=args.size, popularity_csv=args.popularity_csv,
                               overlay_paper=args.overlay_paper, x=args.x, profile=profile, title=args.title)
        except ValueError as e:
            skipped.append(f"bubble chart: {e}")
        else:
            omitted = fig.bubble_omitted
            plt.close(fig)
            written += ["bubble.png", "bubble.svg", "bubble.csv"]
            note = ("" if not omitted else "Not plotted: " + "; ".join(f"{a} ({r})" for a, r in omitted.items())
                    + ".\n\n")
            sections.insert(2,  # after Table 1 and the accuracy bars
                            f"## Figure 3: score, speed and {args.size}\n\n![LRA bubble chart](bubble.png)\n\n"
                            f"{note}Plotted values: [bubble.csv](bubble.csv).\n")
    elif not cells.empty:
        skipped.append("bubble chart: no run records, so no LRA score")

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
    print(f"wrote {', '.join(written)} into {out}; regenerate with: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
