"""The planning table (``scripts/plan.py``): whole-run wall time measured from full runs, projected from probes; and
the power plan (``scripts/plan.py --power``): seeds and test examples for a target detectable gap, and their cost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lra_bench.reports.detectable import detectable, task_noise
from lra_bench.reports.planning import Protocol, planning_markdown, planning_table, whole_run_seconds
from lra_bench.reports.power_plan import BUDGET_DESIGNS, plan_task, run_time
from lra_bench.reports.table1 import load_runs, task_cells
from lra_bench.run.runner import run
from lra_bench.stats.power import detectable_gap, power
from lra_bench.store.records import read_tree
from tests.helpers.markdown import assert_block_quotes
from tests.helpers.redo import RUNS, RUNS_BEFORE, complete_tasks
from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def probe_record(attention: str = "flash", steps: int = 100, max_steps: int = 100, **over) -> dict:
    record = {
        "status": "ok", "task": "listops", "attention": attention, "device": "H200", "compiled": True,
        "config": {"trainer": {"max_steps": max_steps, "eval_every": 50}}, "steps": steps,
        "throughput": {"steps_per_s": 10.0}, "wall_time_s": 25.0, "finished_at": "2026-12-01T00:00:00",
        "phases": {"data_s": 5.0, "train_loop_s": 17.0, "val_eval_s": 4.0, "val_evals": 2, "test_eval_s": 1.0},
    }
    return {**record, **over}


def test_projection_adds_every_phase_at_full_scale():
    # loop 17 s = 100 steps x 0.1 s + 2 evals x 2 s + 3 s fixed; other = 25 - 5 - 17 - 1 = 2 s
    seconds, how = whole_run_seconds(probe_record(), Protocol(max_steps=1000, eval_every=50))
    assert how == "projected from 100 steps"
    assert seconds == pytest.approx(5 + 3 + 1000 * 0.1 + 20 * 2 + 1 + 2)
    assert Protocol(1000, 50).evals == 20 and Protocol(1010, 50).evals == 21


def test_a_full_run_is_measured_and_preferred_over_a_probe():
    protocol = Protocol(max_steps=100, eval_every=50)
    full = probe_record(finished_at="2026-01-01T00:00:00")
    assert whole_run_seconds(full, protocol) == (25.0, "measured")
    newer_probe = probe_record(steps=20, max_steps=20, finished_at="2026-12-24T00:00:00")
    table = planning_table([full, newer_probe, probe_record("linformer", status="oom")], {"listops": protocol})
    assert table.to_dict("records")[0]["how"] == "measured" and len(table) == 1
    md = planning_markdown(table)
    assert re.search(r"\|\s*listops\s*\|\s*flash\s*\|", md) and "fits in one night" in md


def test_a_self_pretrained_run_is_not_a_measure_of_the_protocol_from_scratch():
    protocol = Protocol(max_steps=100, eval_every=50)
    pretrained = probe_record(finished_at="2026-12-24T00:00:00", wall_time_s=50.0)
    pretrained["config"] = {**pretrained["config"], "pretrain": {"name": "mlm", "max_steps": 100}}
    table = planning_table([probe_record(finished_at="2026-01-01T00:00:00"), pretrained], {"listops": protocol})
    assert table.to_dict("records")[0]["hours"] == pytest.approx(25.0 / 3600) and len(table) == 1


def test_tasks_that_need_a_cluster_are_named():
    table = planning_table([probe_record(a) for a in ("flash", "softmax", "bigbird")],
                           {"listops": Protocol(max_steps=200_000, eval_every=50)})
    assert (table.hours > 5).all()
    assert "needs 2 nights on one device, or a cluster (`hydra/launcher=slurm`)" in planning_markdown(table)


@pytest.mark.slow
def test_plan_script_from_a_real_probe(smoke_cfg, tmp_path):
    """A shortened smoke run records its phases; plan.py projects the smoke protocol from it."""
    record = run(smoke_cfg("trainer.max_steps=10", "trainer.eval_every=5"))
    ph = record["phases"]
    assert ph["val_evals"] == len(record["evals"]) == 2
    assert 0 < ph["val_eval_s"] < ph["train_loop_s"] and ph["test_eval_s"] > 0 and ph["data_s"] > 0
    assert ph["data_s"] + ph["train_loop_s"] + ph["test_eval_s"] <= record["wall_time_s"]
    out = tmp_path / "planning.md"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "plan.py"), "--runs-dir", str(tmp_path / "runs"),
                           "--profile", "smoke", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert re.search(r"\|\s*listops\s*\|\s*softmax\s*\|", text) and "projected from 10 steps" in text
    assert out.with_suffix(".csv").is_file()


def _plan_module():
    """scripts/plan.py loaded in this process (its main(argv) without a Python start-up)."""
    return load_script("scripts/plan.py", "lra_plan_script")


def test_run_time_splits_what_grows_with_the_test_set():
    """The test evaluation, and validation when it ran on as many examples as the test, scale with the test set;
    the rest of the wall time does not."""
    same = {"status": "ok", "test_examples": 1000, "val_examples": 1000, "wall_time_s": 100.0,
            "phases": {"test_eval_s": 4.0, "val_eval_s": 6.0}}
    apart = {**same, "val_examples": 500}
    t = run_time([same])
    assert (t.fixed_s, t.per_example_s) == pytest.approx((90.0, 0.01)) and t.seconds(3000) == pytest.approx(120.0)
    t = run_time([apart])
    assert (t.fixed_s, t.per_example_s) == pytest.approx((96.0, 0.004))
    assert run_time([{**same, "status": "oom"}]) is None


def test_power_plan_from_the_committed_state_space_records():
    """results/cpu_ssm: the current design's detectable gap is the one Table 1 prints; every design offered reaches
    the target gap with the fewest test examples (2 % fewer fall short), and its hours are the runs' own timings."""
    runs = load_runs(ROOT / "results" / "cpu_ssm" / "runs")
    cells = task_cells(runs, "cpu")
    g = cells[cells.task == "listops"]
    samples = dict(zip(g.attention, g["sample"], strict=True))
    records = [r for _, r in read_tree(ROOT / "results" / "cpu_ssm" / "runs", "record.json")[0]
               if r["task"] == "listops"]
    plan = plan_task("listops", samples, records, "softmax", 4.0, max_seeds=8)
    current = plan.iloc[0]
    assert current.design == "current" and (current.seeds, current.test_examples) == (3, 1000)
    assert current.detectable_gap == pytest.approx(detectable(samples, "listops", "softmax").gap)
    noise, _, _, comparisons = task_noise(samples, "softmax")
    timing = run_time(records)
    options = plan[~plan.design.isin(BUDGET_DESIGNS)]
    assert list(plan.design[: len(BUDGET_DESIGNS)]) == list(BUDGET_DESIGNS)
    more, twice = plan.iloc[1], plan.iloc[2]  # the variance budget's two options: one more seed, twice the examples
    assert (more.seeds, more.test_examples) == (4, 1000) and (twice.seeds, twice.test_examples) == (3, 2000)
    assert more.detectable_gap < current.detectable_gap and twice.detectable_gap < current.detectable_gap
    assert current.seed_sd == pytest.approx(100 * noise.components.seed ** 0.5)
    assert len(options) and options.design.str.endswith("(cheapest)").sum() == 1
    for r in options.itertuples():
        assert r.detectable_gap <= 4.0 + 0.01
        assert power(0.04, noise, r.seeds, int(r.test_examples * 0.98), comparisons) < 0.8
        assert r.hours == pytest.approx(3 * r.seeds * (timing.fixed_s + timing.per_example_s * r.test_examples) / 3600)
    cheapest = options[options.design.str.endswith("(cheapest)")].iloc[0]
    assert cheapest.hours == options.hours.min()


def test_plan_script_power_mode(tmp_path, capsys):
    """`python scripts/plan.py --power GAP` writes the plan and its CSV; a gap that is not positive is refused."""
    module = _plan_module()
    out = tmp_path / "power_plan.md"
    assert module.main(["--power", "4", "--runs-dir", str(ROOT / "results" / "cpu_ssm" / "runs"), "--out", str(out),
                        "--max-seeds", "5"]) == 0
    text = out.read_text()
    assert "4-point gap (profile `cpu`)" in text and "**ListOps**" in text and "**Image**" in text
    assert "| current " in text and "(cheapest)" in text and out.with_suffix(".csv").is_file()
    with pytest.raises(SystemExit):
        module.main(["--power", "0", "--runs-dir", str(tmp_path)])
    assert "must be a positive number" in capsys.readouterr().err


def test_a_given_design_is_planned_from_the_same_components(tmp_path, capsys):
    """--design TASK=SxN adds that design's detectable gap (issue 46: what quick's re-sized test sets buy), computed
    like every other row; a design past the full split, with one seed, or malformed is refused."""
    runs = load_runs(ROOT / "results" / "cpu_ssm" / "runs")
    cells = task_cells(runs, "cpu")
    g = cells[cells.task == "listops"]
    samples = dict(zip(g.attention, g["sample"], strict=True))
    plan = plan_task("listops", samples, [], "softmax", 4.0, max_seeds=4, designs=((3, 10_000), (5, 1000)))
    given = plan[plan.design.str.startswith("given")].set_index("design")
    noise, _, _, comparisons = task_noise(samples, "softmax")
    assert list(given.index) == ["given 3 x 10,000", "given 5 x 1,000"]
    assert given.detectable_gap.iloc[0] == pytest.approx(100 * detectable_gap(noise, 3, 10_000, comparisons))
    assert given.detectable_gap.iloc[0] < plan.detectable_gap.iloc[0]  # more test examples, a smaller gap
    with pytest.raises(ValueError, match="the test split holds 10,000"):
        plan_task("image", samples, [], "softmax", 4.0, max_seeds=4, designs=((3, 20_000),))
    with pytest.raises(ValueError, match=">= 2 seeds"):
        plan_task("listops", samples, [], "softmax", 4.0, max_seeds=4, designs=((1, 5000),))
    module = _plan_module()
    out = tmp_path / "plan.md"
    assert module.main(["--power", "4", "--runs-dir", str(ROOT / "results" / "cpu_ssm" / "runs"), "--out", str(out),
                        "--max-seeds", "4", "--design", "listops=3x10,000"]) == 0
    assert "| given 3 x 10,000 " in out.read_text()
    with pytest.raises(SystemExit):
        module.main(["--power", "4", "--runs-dir", str(tmp_path), "--design", "listop=3x10000"])
    assert "expected TASK=SEEDSxEXAMPLES" in capsys.readouterr().err


def test_the_variance_budget_in_the_docs_is_the_plan_scripts(tmp_path):
    """docs/benchmark.md's variance-budget table (before) is what `python scripts/plan.py --power 3 --runs-dir
    results/cpu/runs_before` prints for the curated records from before `quick` was re-sized."""
    out = tmp_path / "power_plan.md"
    assert _plan_module().main(["--power", "3", "--runs-dir", str(RUNS_BEFORE),
                                "--out", str(out)]) == 0
    text = out.read_text()
    printed = text[text.index("Variance budget"):text.index("Seeds per variant and test examples")].strip()
    docs = (ROOT / "docs" / "benchmark.md").read_text()
    quoted = docs[docs.index("<!-- variance-budget:begin -->") + 30:docs.index("<!-- variance-budget:end -->")]
    assert quoted.strip() == printed
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split("|")[1].strip() for r in rows] == ["ListOps", "Text", "Image", "Pathfinder"]


def test_the_quick_design_table_in_the_docs_is_the_plan_scripts(tmp_path):
    """docs/benchmark.md's "quick re-sized" table (issue 46 item 3): the detectable gap before (the current design)
    and the projected one of the re-sized quick (--design), and the cheapest 3-point design, as plan.py prints them
    for the curated records from before the re-sizing (results/cpu/runs_before)."""
    out = tmp_path / "power_plan.md"
    designs = {"listops": "4x10000", "text": "4x25000", "image": "4x10000", "pathfinder": "4x10000"}
    args = ["--power", "3", "--runs-dir", str(RUNS_BEFORE), "--out", str(out)]
    assert _plan_module().main([*args, *(f"--design={t}={d}" for t, d in designs.items())]) == 0
    plans = pd.read_csv(out.with_suffix(".csv"))
    docs = (ROOT / "docs" / "benchmark.md").read_text()
    block = docs[docs.index("<!-- quick-design:begin -->"):docs.index("<!-- quick-design:end -->")]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in block.splitlines()[3:] if line.startswith("| ")]
    labels = {"ListOps": "listops", "Text": "text", "Image": "image", "Pathfinder": "pathfinder"}
    assert [labels[r[0]] for r in rows] == list(designs)
    for label, before, gap, now, projected, three in rows:
        plan = plans[plans.task == labels[label]]
        cur = plan[plan.design == "current"].iloc[0]
        given = plan[plan.design.str.startswith("given")].iloc[0]
        cheapest = plan[plan.design.str.endswith("(cheapest)")].iloc[0]
        assert before == f"{cur.seeds} x {cur.test_examples:,}" and gap == f"{cur.detectable_gap:.2f}"
        assert now == f"{given.seeds} x {given.test_examples:,}" and projected == f"{given.detectable_gap:.2f}"
        assert three == f"{cheapest.seeds} seeds x {cheapest.test_examples:,}"


def _redo_seeds_0_to_3(task: str, tmp_path: Path) -> Path:
    """A runs folder holding the redo's ``task`` records of seeds 0-3 only."""
    import shutil

    runs = RUNS / task
    four = tmp_path / "four" / task
    for record in runs.rglob("record.json"):
        if json.loads(record.read_text())["seed"] <= 3:
            (four / record.parent.relative_to(runs)).mkdir(parents=True)
            shutil.copy(record, four / record.relative_to(runs))
    return four.parent


def _current(folder: Path, out: Path, task: str, *design: str) -> pd.DataFrame:
    """plan.py --power 3 on ``folder``: the task's rows."""
    args = ["--power", "3", "--runs-dir", str(folder), "--out", str(out)]
    assert _plan_module().main(args + [a for d in design for a in ("--design", d)]) == 0
    plan = pd.read_csv(out.with_suffix(".csv"))
    return plan[plan.task == task]


def test_the_redos_measured_listops_gaps_in_the_docs_are_the_plan_scripts(tmp_path):
    """docs/benchmark.md: the redo's own ListOps records give the detectable gap quoted for 4 seeds (seeds 0-3) and
    for the 6 the sweep now runs, with the seed sd of the first."""
    plans = {"four": _current(_redo_seeds_0_to_3("listops", tmp_path), tmp_path / "four.md", "listops"),
             "six": _current(RUNS, tmp_path / "six.md", "listops")}
    figures = {name: plan[plan.design == "current"].iloc[0] for name, plan in plans.items()}
    assert (figures["four"].seeds, figures["six"].seeds) == (4, 6)
    docs = " ".join((ROOT / "docs" / "benchmark.md").read_text().split())
    assert f"the seed sd is {figures['four'].seed_sd:.2f} points" in docs
    assert f"the detectable gap of 4 seeds x 10,000 is {figures['four'].detectable_gap:.2f}" in docs
    assert f"6 x 10,000 (150 records) detects {figures['six'].detectable_gap:.2f} points" in docs


def test_the_redos_measured_image_gap_and_its_six_seed_projection_in_the_docs_are_the_plan_scripts(tmp_path):
    """docs/benchmark.md: the redo's image records of seeds 0-3 give the seed sd and detectable gap quoted (why image
    runs at 6 seeds), and the planner's projection for 6 x 10,000 from them."""
    plan = _current(_redo_seeds_0_to_3("image", tmp_path), tmp_path / "four.md", "image", "image=6x10000")
    now, given = plan[plan.design == "current"].iloc[0], plan[plan.design == "given 6 x 10,000"].iloc[0]
    assert (now.seeds, now.test_examples, now.runs) == (4, 10000, 100)
    docs = " ".join((ROOT / "docs" / "benchmark.md").read_text().split())
    assert (f"its seeds 0-3 ({now.runs} records) have a seed sd of {now.seed_sd:.2f} points and 4 seeds x 10,000 "
            f"detect {now.detectable_gap:.2f}") in docs
    assert f"the planner projects 6 x 10,000 to detect {given.detectable_gap:.2f}" in docs
    assert f"for {given.runs - now.runs} more runs" in docs


def test_the_variance_budget_after_in_the_docs_is_the_plan_scripts_on_the_redo(tmp_path):
    """docs/benchmark.md's "variance budget after" rows are what `python scripts/plan.py --power 3 --runs-dir
    results/cpu/runs` prints for the redo's committed records (issue 46: the detectable gap and minutes per run
    after), for the tasks whose records are all in (tests/helpers/redo.py), all four since the redo finished."""
    out = tmp_path / "power_plan.md"
    assert _plan_module().main(["--power", "3", "--runs-dir", str(RUNS), "--out", str(out)]) == 0
    text = out.read_text()
    docs = (ROOT / "docs" / "benchmark.md").read_text()
    assert_block_quotes(docs, "variance-budget-after", text[text.index("Variance budget"):text.index("Seeds per")],
                        "python scripts/plan.py --power 3 --runs-dir results/cpu/runs", complete_tasks())
