"""The budget study's evidence (lra_bench/reports/budget.py, tools/budget_curves.py): the last quarter's gain of a
run, its interval over seeds, and the committed results/budget/ regenerating exactly from its records."""

from __future__ import annotations

import math
import re
import runpy
import sys
from pathlib import Path

import pandas as pd
import pytest

from lra_bench.reports.budget import (
    last_quarter_gain,
    last_quarter_markdown,
    last_quarter_table,
    over_mixers,
    over_mixers_markdown,
)
from lra_bench.stats.intervals import t_interval

ROOT = Path(__file__).resolve().parents[1]


def evals(accs: dict[int, float]) -> list[dict]:
    return [{"step": s, "val_acc": a} for s, a in accs.items()]


def test_the_gain_is_taken_over_each_runs_own_last_quarter():
    run = evals({150 * k: 0.30 + 0.01 * k for k in range(1, 17)})  # 150 ... 2,400
    steps, at_end, gain, drawn = last_quarter_gain(run)
    assert steps == 2400 and at_end == pytest.approx(46.0) and gain == pytest.approx(4.0) and not drawn  # vs 1,800
    tenths = evals({300 * k: 0.30 + 0.01 * k * k for k in range(1, 11)})  # profile=cpu's ListOps: every 300 of 3,000
    steps, _, gain, drawn = last_quarter_gain(tenths)  # 2,250 between 2,100 and 2,400: the straight line
    assert steps == 3000 and drawn and gain == pytest.approx(100 * (1.00 - (0.49 + 0.64) / 2))
    far = last_quarter_gain(evals({200: 0.3, 400: 0.35, 600: 0.4}))  # 400 and 600 further apart than 600 / 8
    assert math.isnan(far[2]) and not far[3]
    assert math.isnan(last_quarter_gain(evals({500: 0.3, 600: 0.4}))[2])  # nothing before 450


def test_the_table_pools_seeds_with_a_t_interval_and_keeps_budgets_apart():
    flat = {150 * k: 0.40 for k in range(1, 17)}
    rising = [{**flat, 1800: 0.40 - d, 2400: 0.40} for d in (0.01, 0.02, 0.06)]
    runs = pd.DataFrame([{"task": "listops", "attention": "softmax", "status": "ok", "evals": evals(e)}
                         for e in rising]
                        + [{"task": "listops", "attention": "softmax", "status": "ok",
                            "evals": evals({200: 0.3, 400: 0.35, 600: 0.4, 450: 0.38})},
                           {"task": "listops", "attention": "softmax", "status": "failed", "evals": evals(flat)}])
    table = last_quarter_table(runs)
    assert list(table.steps) == [600, 2400] and list(table.seeds) == [1, 3]
    m, lo, hi, _ = t_interval([1.0, 2.0, 6.0])
    row = table[table.steps == 2400].iloc[0]
    assert (row.gain, row.lo, row.hi) == pytest.approx((m, lo, hi))
    text = last_quarter_markdown(table, {"listops": 12.6})
    assert "(one seed)" in text and f"{m:+.2f} [{lo:+.2f}, {hi:+.2f}]" in text
    assert ("below the gap (upper bound)" in text) == (hi < 12.6)
    assert "not shown below the gap" in last_quarter_markdown(table, {"listops": 1.0})


@pytest.mark.parametrize("folder, args", [
    ("budget", ["--runs-dir", "results/budget/runs", "--gaps-from", "results/cpu/runs_before"]),  # 600-step gaps
    ("budget/cpu", ["--runs-dir", "results/cpu_ssm/runs", "--gaps-from", "results/cpu_ssm/runs", "--title",
                    "Validation accuracy at profile=cpu (results/cpu_ssm: softmax, s4d, lru)"]),
], ids=["quick", "cpu"])
def test_the_committed_budget_study_regenerates_exactly(tmp_path, monkeypatch, folder, args):
    """results/budget (quick: softmax and lru past the budget) and results/budget/cpu (profile=cpu's own budget, from
    the curated results/cpu_ssm records) regenerate from their records, and the docs quote every row's gain."""
    committed = ROOT / "results" / folder
    if not (ROOT / args[1]).is_dir():
        pytest.skip(f"no committed {args[1]}")
    argv = [a if not a.startswith("results/") else str(ROOT / a) for a in args]
    monkeypatch.setattr(sys, "argv", ["budget_curves.py", *argv, "--out", str(tmp_path)])
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    runpy.run_path(str(ROOT / "tools" / "budget_curves.py"), run_name="__main__")
    made = (tmp_path / "last_quarter.md").read_text().splitlines()
    kept = (committed / "last_quarter.md").read_text().splitlines()
    assert made[4:] == kept[4:]  # the Regenerate line names the folders given
    assert re.search(rf"--gaps-from {re.escape(args[args.index('--gaps-from') + 1])}[ `]", kept[2])  # the same gaps
    assert (tmp_path / "curves.png").is_file() and (committed / "curves.png").is_file()
    docs = " ".join((ROOT / "docs" / "benchmark.md").read_text().split())  # line breaks do not matter
    for line in kept:
        if line.startswith("| ") and not line.startswith(("| task", "|:")):
            cells = [c.strip() for c in line.split("|")]
            quote = f"`{cells[2]}` {cells[6]}" if folder == "budget" else f"{cells[1]} `{cells[2]}` {cells[6]}"
            assert quote in docs, quote  # docs quote every row's gain as the table has it
    if folder == "budget/cpu":  # and the gaps that table is judged against
        rows = (line.split("|") for line in kept if line.startswith("| ") and "---" not in line)
        gaps = {c[1].strip(): c[7].strip() for c in rows}
        assert f"({gaps['ListOps']} points on ListOps, {gaps['Image']} on image)" in docs


def test_the_docs_600_and_2400_step_figures_are_the_records():
    """docs/benchmark.md's ListOps test accuracies at 600 steps (the curated sweep) and 2,400 (the budget study),
    per seed, and lru's lead at each, recomputed from the committed records."""
    from lra_bench.store.records import read_records

    def accs(folder: str, attention: str) -> list[float]:
        rows = sorted((r["seed"], 100 * r["test_acc"]) for r in read_records(ROOT / folder / "listops" / attention))
        return [a for _, a in rows]

    docs = " ".join((ROOT / "docs" / "benchmark.md").read_text().split())
    lead = []
    for folder in ("results/cpu/runs_before", "results/budget/runs"):  # 600 steps (quick before its re-sizing), 2,400
        s, lr = accs(folder, "softmax"), accs(folder, "lru")
        assert len(s) == len(lr) == 3
        for values in (s, lr):
            assert " / ".join(f"{a:.1f}" for a in values) in docs
        lead.append(sum(lr) / 3 - sum(s) / 3)
    assert f"from {lead[0]:+.1f} to {lead[1]:+.1f} points" in docs


def test_over_mixers_the_mixers_are_the_units_and_budgets_stay_apart():
    """Per task the mean of the mixers' mean gains with a t interval over the mixers (not over runs: a mixer's seeds
    share its effect), the largest mixer and the highest upper bound of a mixer's own interval named, another budget
    its own row."""
    flat = {600 * k: 0.40 for k in range(1, 5)}
    gains = {"softmax": (0.01, 0.01, 0.01, 0.01), "lru": (0.02, 0.04), "mega": (0.05, 0.07, 0.06)}
    rows = [{"task": "listops", "attention": a, "status": "ok", "evals": evals({**flat, 1800: 0.40 - d})}
            for a, ds in gains.items() for d in ds]
    rows.append({"task": "listops", "attention": "softmax", "status": "ok",
                 "evals": evals({300: 0.3, 450: 0.3, 600: 0.32})})  # another budget
    summary = over_mixers(last_quarter_table(pd.DataFrame(rows)))
    assert list(summary.steps) == [2400, 600] and list(summary.results) == [3, 1]
    row = summary.iloc[0]
    m, lo, hi, _ = t_interval([1.0, 3.0, 6.0])  # the mixers' means, in points
    assert (row.gain, row.lo, row.hi) == pytest.approx((m, lo, hi)) and row.largest == "mega"
    runs_interval = t_interval([1.0] * 4 + [2.0, 4.0] + [5.0, 7.0, 6.0])
    assert (row.lo, row.hi) != pytest.approx(runs_interval[1:3])  # not the runs as units
    assert row.highest == "lru" and row.highest_hi == pytest.approx(t_interval([2.0, 4.0])[2])  # 2 seeds: widest
    text = over_mixers_markdown(summary)
    assert f"+{m:.2f} [{lo:+.2f}, {hi:+.2f}]" in text
    assert "1,800 to 2,400" in text and "mega +6.00" in text and "| +2.00 " in text  # one mixer: no interval


def test_the_plateau_tool_judges_one_protocol_and_says_what_is_missing(tmp_path, monkeypatch, capsys):
    """tools/plateau.py: a fine-tune's records (pretrain=mlm) and the compute-matched controls never enter the scratch
    budget's rows, and a folder without records, or without the protocol asked for, is a one-line error."""
    runs = ROOT / "results" / "cpu_protocols" / "runs"
    if not runs.is_dir():
        pytest.skip("no committed results/cpu_protocols")
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    main = runpy.run_path(str(ROOT / "tools" / "plateau.py"))["main"]
    assert main(["--runs-dir", str(runs)]) == 0
    scratch = capsys.readouterr().out
    assert main(["--runs-dir", str(runs), "--protocol", "mlm"]) == 0
    mlm = capsys.readouterr().out
    row = [line for line in mlm.splitlines() if line.startswith("| ListOps")]
    assert row and row[0].split("|")[4].strip() == "1" and row[0] not in scratch  # softmax's fine-tunes alone
    assert "| ListOps | 3,000" in scratch and "| Image   | 4,000" in scratch
    assert "| Image   | 8,000" not in scratch  # the compute-matched controls are not the scratch budget's runs...
    assert main(["--runs-dir", str(runs), "--protocol", "scratch, compute-matched"]) == 0
    assert "| Image   | 8,000" in capsys.readouterr().out  # ...but their own protocol's
    assert main(["--runs-dir", str(runs), "--protocol", "causal"]) == 1
    err = capsys.readouterr().err
    assert "no ok record of protocol 'causal'" in err and "'scratch, compute-matched'" in err  # what there is
    assert main(["--runs-dir", str(tmp_path / "none")]) == 2
    assert "pass the run records' folder" in capsys.readouterr().err
