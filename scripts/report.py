"""Tables and charts from run records and benchmark cells (run from the repository root).

    python scripts/report.py                      # your results: $LRA_RESULTS_DIR (default results/runs) and
                                                  # $LRA_BENCH_DIR (default results/bench) -> results/report/
    python scripts/report.py --profile cpu --overlay-paper --out my_report
    python scripts/report.py --curated cpu        # regenerate the committed results/cpu/ from its committed records
    python scripts/report.py --size popularity --popularity-csv my_counts.csv   # columns attention,value,source

Writes into --out: table1.md / .csv (LRA Table 1), accuracy.png / .svg (per-task bars), val_curves.png / .svg
(validation accuracy during training), table2_<mode>.md / .csv
and scaling_<mode>.png / .svg (LRA Table 2), bubble.png / .svg / .csv (LRA Figure 3), and REPORT.md, which
embeds them all and states the command that regenerates them. Missing inputs skip their part with a message;
files of an earlier report there that this one does not write again are removed (a folder never mixes two reports).
Each warning is printed once and listed once in REPORT.md. Nothing to report (no record, no benchmark cell), an
unknown --profile ends with an error (exit code 1 or 2); a --runs-dir or --bench-dir that is not a folder is
named in a warning.
Records of several training protocols (self-pretrained runs, ``pretrain=mlm|causal``, beside runs from scratch) get
one Table 1 and one chart each (table1_<protocol>.md, bubble_<protocol>.png; the files without a suffix are the
runs from scratch) and protocols.md / .csv: per variant and task, pretrained - scratch and pretrained - the
compute-matched control with their paired intervals, and the spread between variants under each protocol.
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
from lra_bench.reports.identical import identical_note
from lra_bench.reports.paper import TASKS
from lra_bench.reports.protocols import SCRATCH, by_protocol, effects_markdown, protocol_effects, protocol_spread, slug
from lra_bench.reports.reliability import rank_reliability
from lra_bench.reports.significance import MARGIN
from lra_bench.reports.sweep_speed import cells_from_runs, draw_with_speed
from lra_bench.reports.table1 import REFERENCE, conflicts, load_runs, pick_profile, table1, task_cells
from lra_bench.reports.task_vs_paper import task_scores, task_vs_paper
from lra_bench.reports.verdicts import AVG

CURATED = "CURATED"  # marker file of a curated results folder; its "options:" line holds the report options
DEFAULT_OUT = Path("results/report")
#: every file a report may write (a file matching one of these that this run did not write is an earlier report's)
OUTPUTS = ("REPORT.md", "table1.md", "table1.csv", "table1_*_vs_paper.md", "table1_*_vs_paper.csv", "accuracy.png",
           "accuracy.svg", "val_curves.png", "val_curves.svg", "table2_*.md", "table2_*.csv", "scaling_*.png",
           "scaling_*.svg", "bubble.png", "bubble.svg", "bubble.csv")
ENV_DIRS = {"runs_dir": ("LRA_RESULTS_DIR", "results/runs"), "bench_dir": ("LRA_BENCH_DIR", "results/bench")}


def say(msg: str) -> None:
    print(msg, file=sys.stderr)


class Once(logging.Handler):
    """Every warning of the report (a log record or ``warnings.warn``) printed once, and kept for REPORT.md."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def note(self, message: str, where: str = "") -> None:
        text = " ".join(str(message).split())
        if text not in self.messages:
            self.messages.append(text)
            print(f"warning{f' ({where})' if where else ''}: {text}", file=sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.note(record.getMessage(), record.name)

    def showwarning(self, message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        self.note(str(message))


def remove_stale(out: Path, written: list[str]) -> list[str]:
    """Remove the files of an earlier report in ``out`` (``OUTPUTS``) that this one did not write."""
    stale = sorted({p.name for pattern in OUTPUTS for p in out.glob(pattern) if p.is_file()} - set(written))
    for name in stale:
        (out / name).unlink()
    return stale


def curated_name(folder: Path) -> str:
    """The NAME of ``--curated NAME`` for a curated folder: its path under results/ (e.g. cpu, gpu/protocols)."""
    parts = folder.resolve().parts
    if "results" not in parts:
        return folder.name
    last = len(parts) - 1 - parts[::-1].index("results")  # the innermost folder named results
    return "/".join(parts[last + 1:])


def curated_options(folder: Path) -> list[str]:
    """The report options stored in ``folder/CURATED`` (its line ``options: ...``)."""
    for line in (folder / CURATED).read_text().splitlines():
        if line.startswith("options:"):
            return shlex.split(line.removeprefix("options:"))
    return []


def scored_tasks(t1, profile: str | None) -> list[str] | None:
    """The tasks the LRA score of ``profile`` covers (those at chance for every variant left out), from Table 1; when
    every task is at chance, all of them (the chart then shows their mean accuracy beside this chance line)."""
    verdicts = t1.attrs.get("verdicts", {}).get(profile)
    return (verdicts[AVG]["tasks"] or verdicts[AVG]["left_out"]) if verdicts else None


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
    ap.add_argument("--margin", type=float, default=MARGIN,
                    help="equivalence margin in accuracy points: a variant is marked ≈ the reference only when the "
                         f"two one-sided tests show the difference within +-margin (default {MARGIN:g})")
    args = ap.parse_args(given)
    if not args.margin > 0:
        ap.error(f"--margin {args.margin}: the equivalence margin must be a positive number of points")
    if args.curated is not None:
        folder = Path("results") / args.curated
        if not (folder / CURATED).is_file():
            ap.error(f"{folder} is not a curated results folder (no {folder / CURATED}); the curated sets are: "
                     + ", ".join(sorted(p.parent.relative_to("results").as_posix()
                                        for p in Path("results").rglob(CURATED))))
        if args.runs_dir or args.bench_dir:
            ap.error("--curated reads only the committed results/NAME/runs and results/NAME/bench")
        args = ap.parse_args([*curated_options(folder), *given])  # the stored options, then what was given
        args.runs_dir, args.bench_dir = folder / "runs", folder / "bench"
        args.out = args.out or folder
        command = f"python scripts/report.py --curated {shlex.quote(args.curated)}"
    else:
        from_env = []  # folders the environment chose: named in the regenerate command, which may run elsewhere
        for key, (env, default) in ENV_DIRS.items():
            if getattr(args, key) is None and os.environ.get(env) == "":
                ap.error(f"{env} is set but empty: unset it (default {default}) or set it to a folder")
            if getattr(args, key) is None and os.environ.get(env):
                from_env += [f"--{key.replace('_', '-')}", os.environ[env]]
            setattr(args, key, getattr(args, key) or Path(os.environ.get(env) or default))
        args.out = args.out or DEFAULT_OUT
        if (args.out / CURATED).exists():
            ap.error(f"{args.out} holds curated results ({args.out / CURATED}); regenerate them with `python "
                     f"scripts/report.py --curated {curated_name(args.out)}`, or write elsewhere with --out DIR")
        command = " ".join(["python scripts/report.py", *(shlex.quote(str(a)) for a in [*from_env, *given])])
    if args.size == "popularity":
        try:
            read_popularity(args.popularity_csv)
        except ValueError as e:
            ap.error(str(e))
    out = args.out
    once = Once()
    logging.getLogger().addHandler(once)
    logging.getLogger().setLevel(logging.WARNING)
    warnings.simplefilter("default")
    warnings.showwarning = once.showwarning
    written: list[str] = []
    sections: list[str] = []
    skipped: list[str] = []

    for flag, folder in (("--runs-dir", args.runs_dir), ("--bench-dir", args.bench_dir)):
        if not folder.is_dir():
            once.note(f"{flag} {folder} is not a folder: nothing read from it")

    # Table 1 and the accuracy bars from the run records
    every_run = load_runs(args.runs_dir)
    cells = load_cells(args.bench_dir)
    if every_run.empty and cells.empty:
        say(f"error: nothing to report: no run record under {args.runs_dir} and no benchmark cell under "
            f"{args.bench_dir} (python run.py writes records; --runs-dir / LRA_RESULTS_DIR say where they are)")
        return 1
    if args.profile is not None and not every_run.empty and args.profile not in set(every_run.profile):
        ap.error(f"--profile {args.profile!r}: no record of that profile under {args.runs_dir}; it has "
                 f"{', '.join(sorted(set(every_run.profile)))}")
    protocols = by_protocol(every_run)
    if left := sum(len(conflicts(r, args.profile)) for r in protocols.values()):  # within each protocol's tables
        once.note(f"{left} set(s) of records left out of Table 1: another configuration or test set than the one "
                  "their cell uses (Table 1's 'Left out' list names them)")
    out.mkdir(parents=True, exist_ok=True)
    if not every_run.empty and args.reference not in set(every_run.attention):
        guess = closest(args.reference, sorted(set(every_run.attention)))
        ap.error(f"--reference {args.reference!r}: no record of that attention under {args.runs_dir}"
                 + (f"; did you mean {guess!r}?" if guess else
                    f"; it has {', '.join(sorted(set(every_run.attention)))}"))
    main = SCRATCH if SCRATCH in protocols or not protocols else next(iter(protocols))
    runs = protocols.get(main, every_run)
    about = f" (protocol: {main})" if len(protocols) > 1 or main != SCRATCH else ""
    profile = args.profile or pick_profile(runs)
    scored = task_cells(runs, args.profile)  # once: decoding every record's predictions is the slow part
    t1, md1 = table1(runs, args.profile, reference=args.reference, margin=args.margin, cells=scored)
    if same := identical_note(scored):  # one result under several names (bigbird, longformer = flash)
        md1 = f"{md1}\n{same}"
    if t1.empty:
        skipped.append(f"Table 1 and accuracy plot: {md1} under {args.runs_dir}")
    else:
        t1.to_csv(out / "table1.csv", index=False)
        (out / "table1.md").write_text(f"# LRA Table 1 on this hardware{about}\n\nRegenerate: `{command}`\n\n{md1}\n")
        written += ["table1.md", "table1.csv"]
        sections.append(f"## Table 1: test accuracy\n\n{md1}")
        sections.append(rank_reliability(scored)[1])
        if args.score_task:
            tvp, md_tvp = task_vs_paper(t1, args.score_task, profile)
            name = f"table1_{args.score_task}_vs_paper"
            tvp.to_csv(out / f"{name}.csv", index=False)
            (out / f"{name}.md").write_text(f"# {args.score_task} beside the paper\n\nRegenerate: `{command}`\n\n"
                                            f"{md_tvp}")
            written += [f"{name}.md", f"{name}.csv"]
            sections.append(md_tvp)
        fig = accuracy_plots(runs, out / "accuracy.png", profile, cells=scored)
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

    # Figure 3: speed from the benchmark cells, else (none, or none plottable) from the run records themselves
    if not t1.empty and not (cells.empty and cells_from_runs(runs, profile).empty):
        try:
            scores = t1 if args.score_task is None else task_scores(t1, args.score_task, profile)
            fig, stood_in = draw_with_speed(
                lambda speed: bubble_chart(scores, speed, out / "bubble.png", size=args.size,
                                           popularity_csv=args.popularity_csv, overlay_paper=args.overlay_paper,
                                           x=args.x, profile=profile, title=args.title, score_task=args.score_task,
                                           chance=majority_rate(runs, profile, args.score_task,
                                                                scored_tasks(t1, profile))),
                cells, runs, profile)
        except ValueError as e:
            skipped.append(f"bubble chart: {e}")
        else:
            omitted, meta = fig.bubble_omitted, fig.bubble_meta
            plt.close(fig)
            written += ["bubble.png", "bubble.svg", "bubble.csv"]
            note = ("" if not omitted else "Not plotted: " + "; ".join(f"{a} ({r})" for a, r in omitted.items())
                    + ".\n\n")
            if same_here := identical_note(scored[scored.profile == profile], chart=True):
                note += f"{same_here}\n"
            if stood_in:
                note += (f"The benchmark cells under `{args.bench_dir}` gave no point ({stood_in}), so the run records "
                         "stand in for them.\n\n")
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

    # the other protocols: one Table 1 and one chart each, and what pretraining changes
    for label, subset in protocols.items():
        if label == main:
            continue
        name = slug(label)
        scored_here = task_cells(subset, args.profile)
        tp, mdp = table1(subset, args.profile, reference=args.reference, margin=args.margin, cells=scored_here)
        if same := identical_note(scored_here):
            mdp = f"{mdp}\n{same}"
        if tp.empty:
            skipped.append(f"Table 1 of protocol {label}: {mdp}")
            continue
        tp.to_csv(out / f"table1_{name}.csv", index=False)
        (out / f"table1_{name}.md").write_text(f"# LRA Table 1 on this hardware (protocol: {label})\n\n"
                                               f"Regenerate: `{command}`\n\n{mdp}\n")
        written += [f"table1_{name}.md", f"table1_{name}.csv"]
        section = f"## Protocol: {label}\n\n{mdp}\n"
        try:
            scores = tp if args.score_task is None else task_scores(tp, args.score_task, profile)
            chance = majority_rate(subset, profile, args.score_task, scored_tasks(tp, profile))
            fig, stood_in = draw_with_speed(
                lambda speed, scores=scores, name=name, label=label, chance=chance: bubble_chart(
                    scores, speed, out / f"bubble_{name}.png", size=args.size, popularity_csv=args.popularity_csv,
                    overlay_paper=args.overlay_paper, x=args.x, profile=profile, title=args.title,
                    score_task=args.score_task, protocol=label, chance=chance),
                cells, subset, profile)
        except ValueError as e:
            skipped.append(f"bubble chart of protocol {label}: {e}")
        else:
            plt.close(fig)
            written += [f"bubble_{name}.png", f"bubble_{name}.svg", f"bubble_{name}.csv"]
            section += (f"![LRA bubble chart, protocol {label}](bubble_{name}.png)\n\nScore: this protocol's; speed: "
                        "the same per-step training throughput as every protocol's chart (the benchmark's, or the "
                        "fine-tune's own from the records): the pretraining's cost is not on this axis but in the "
                        "protocol-effect table.\n")
            if stood_in:
                section += (f"\nThe benchmark cells gave no point ({stood_in}), so this chart's speed is the run "
                            "records' own.\n")
        sections.append(section)
    if any(label != SCRATCH for label in protocols):
        effects, spread = protocol_effects(every_run, args.profile), protocol_spread(every_run, args.profile)
        md_effects = effects_markdown(effects, spread)
        effects.to_csv(out / "protocols.csv", index=False)
        spread.to_csv(out / "protocols_spread.csv", index=False)
        (out / "protocols.md").write_text(f"# What self-pretraining changes\n\nRegenerate: `{command}`\n\n"
                                          f"{md_effects}\n")
        written += ["protocols.md", "protocols.csv", "protocols_spread.csv"]
        sections.append(f"## Protocol effect: pretrained - from scratch\n\n{md_effects}\n")

    for s in skipped:
        say(f"skipped: {s}")
    report = ["# LRA reproduction report", "",
              f"Regenerate everything in this folder from the repository root with:\n\n```bash\n{command}\n```\n",
              f"Inputs: run records `{args.runs_dir}`, benchmark cells `{args.bench_dir}`.\n"]
    if skipped:
        report.append("Skipped:\n\n" + "\n".join(f"- {s}" for s in skipped) + "\n")
    if once.messages:
        report.append("Warnings (each once):\n\n" + "\n".join(f"- {m}" for m in once.messages) + "\n")
    report += sections
    (out / "REPORT.md").write_text("\n".join(report) + "\n")
    written.append("REPORT.md")
    stale = remove_stale(out, written)
    print(f"wrote {', '.join(written)} into {out}"
          + (f" (removed an earlier report's {', '.join(stale)})" if stale else "")
          + f"; inputs: {args.runs_dir}, {args.bench_dir}; regenerate with: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
