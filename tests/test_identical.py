"""Variants that repeat another's predictions on every seed are named as one result (BigBird and Longformer run
plain attention at <= 256 tokens, bit-identically to flash: three bubbles, one accuracy), and the statistics count
that result once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lra_bench.reports.budget import last_quarter_table, over_mixers, plateau_runs
from lra_bench.reports.identical import identical_groups, identical_note
from lra_bench.reports.power_plan import plan_task
from lra_bench.reports.reliability import rank_reliability
from lra_bench.reports.significance import SAME, compare, family
from lra_bench.reports.table1 import load_runs, table1, task_cells
from lra_bench.store.predictions import encode
from tests.helpers.scripts import load_script
from tests.test_report import record, write

LABELS = np.arange(40) % 4


def predicted(seed: int, flip: int | None = None) -> np.ndarray:
    p = (LABELS + np.random.default_rng(seed).integers(0, 2, len(LABELS))) % 4  # some right, some wrong
    if flip is not None:
        p[flip] = (p[flip] + 1) % 4
    return p


def with_predictions(task: str, attention: str, seed: int, p: np.ndarray, profile: str = "cpu",
                     fingerprint: str = "the-test-set") -> dict:
    rec = record(task, attention, seed, acc=float(np.mean(p == LABELS)), profile=profile)
    return {**rec, "test_predictions": encode(p, LABELS, fingerprint)}


def same_accuracy_other_predictions(seed: int) -> np.ndarray:
    p = predicted(seed)
    right, wrong = np.flatnonzero(p == LABELS)[0], np.flatnonzero(p != LABELS)[0]
    p[right], p[wrong] = (p[right] + 1) % 4, LABELS[wrong]  # one right made wrong, one wrong made right
    return p


def test_only_variants_with_the_same_predictions_on_every_seed_are_one_result(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        for att in ("flash", "bigbird", "longformer"):  # the same function at this length
            write(runs, with_predictions("listops", att, seed, predicted(seed)))
        write(runs, with_predictions("listops", "softmax", seed, predicted(seed, flip=3)))  # one example differs
        write(runs, with_predictions("listops", "local", seed, predicted(seed, flip=5 if seed else None)))  # seed 1
        write(runs, with_predictions("listops", "sinkhorn", seed, same_accuracy_other_predictions(seed)))
        write(runs, with_predictions("listops", "reformer", 1 - seed, predicted(seed)))  # seeds swapped
        write(runs, with_predictions("listops", "routing", seed, predicted(seed), fingerprint="another-test-set"))
        for att in ("linear", "performer"):  # both collapsed to one class: agreeing for another reason
            write(runs, with_predictions("listops", att, seed, np.zeros_like(LABELS)))
        write(runs, with_predictions("text", "flash", seed, predicted(seed)))  # another task: its own groups
        write(runs, with_predictions("text", "softmax", seed, predicted(seed, flip=0)))
        for att in ("synthesizer", "fnet"):  # another profile: its own groups, named with it
            write(runs, with_predictions("listops", att, seed, predicted(seed + 7), profile="quick"))
    write(runs, with_predictions("listops", "flash", 0, predicted(9), profile="quick"))  # flash of quick: one seed
    df = load_runs(runs)
    cpu = df[(df.profile == "cpu") & (df.task == "listops")]
    accs = {a: sorted(cpu.loc[cpu.attention == a, "test_acc"]) for a in ("sinkhorn", "flash")}
    assert accs["sinkhorn"] == accs["flash"]  # the same accuracies, other predictions: not one result
    assert identical_groups(task_cells(df, "cpu")) == {("cpu", "listops"): [["longformer", "bigbird", "flash"]]}
    assert identical_groups(task_cells(df, None)) == {("cpu", "listops"): [["longformer", "bigbird", "flash"]],
                                          ("quick", "listops"): [["synthesizer", "fnet"]]}
    note = identical_note(task_cells(df, "cpu"))
    assert note.startswith("**The same predictions, example by example, on every seed** (one result under several "
                           "names, not independent ones; at the runs' lengths BigBird's blocks")
    assert note.rstrip().endswith("ListOps (`cpu`): longformer, bigbird, flash.") and "Text" not in note
    other = identical_note(task_cells(df, None), chart=True)  # synthesizer and fnet: no known reason, said so
    assert "their bubbles' heights are one accuracy" in other and "check their configs" in other
    assert "ListOps (`quick`): synthesizer, fnet" in other
    assert identical_note(task_cells(df[~df.attention.isin(["bigbird", "longformer", "synthesizer"])], None)) == ""


# -- the statistics count one result once ---------------------------------------------------------------------------

N = 400
TRUTH = np.arange(N) % 4


def guesses(seed: int, error: float, salt: int = 0) -> np.ndarray:
    """Predictions with about ``error`` of them wrong, drawn per (seed, salt)."""
    wrong = np.random.default_rng(1000 * salt + seed).random(N) < error
    return np.where(wrong, (TRUTH + 1) % 4, TRUTH)


def scored(task: str, attention: str, seed: int, p: np.ndarray) -> dict:
    rec = record(task, attention, seed, acc=float(np.mean(p == TRUTH)))
    return {**rec, "test_examples": N, "test_predictions": encode(p, TRUTH, f"{task}-test-set")}


def one_result_three_names(tmp_path, tasks=("listops",), longformer_differs_on=()):
    """softmax (the reference), flash = bigbird = longformer, local, sinkhorn (clearly better), seeds 0-2."""
    runs = tmp_path / "runs"
    for salt, task in enumerate(tasks):
        for seed in (0, 1, 2):
            plain = guesses(seed, 0.5, salt)
            write(runs, scored(task, "softmax", seed, guesses(seed, 0.52, 10 + salt)))
            for att in ("flash", "bigbird", "longformer"):
                differs = att == "longformer" and task in longformer_differs_on
                write(runs, scored(task, att, seed, guesses(seed, 0.5, 30 + salt) if differs else plain))
            write(runs, scored(task, "local", seed, guesses(seed, 0.49, 20 + salt)))
            write(runs, scored(task, "sinkhorn", seed, guesses(seed, 0.2, 40 + salt)))
    return load_runs(runs)


def test_one_result_under_three_names_is_one_comparison_in_holm_the_best_set_and_the_detectable_gap(tmp_path):
    df = one_result_three_names(tmp_path)
    table, md = table1(df, "cpu")
    verdicts = table.attrs["verdicts"]["cpu"]["listops"]
    vs = verdicts["vs_ref"]
    assert verdicts["same"] == [["bigbird", "flash", "longformer"]]
    assert vs["flash"]["same_as"] == vs["longformer"]["same_as"] == "bigbird" and "same_as" not in vs["bigbird"]
    assert vs["bigbird"]["p_holm"] == vs["longformer"]["p_holm"] == vs["flash"]["p_holm"]
    cells = task_cells(df, "cpu").set_index("attention")["sample"]
    distinct = family("softmax", {a: compare(cells[a], cells["softmax"]) for a in ("bigbird", "local", "sinkhorn")})
    for att in ("bigbird", "local", "sinkhorn"):  # Holm over the three distinct results, not five names
        assert vs[att]["p_holm"] == pytest.approx(distinct[att]["p_holm"], rel=1e-12), att
    assert vs["sinkhorn"]["verdict"] == "better" and vs["sinkhorn"]["p_holm"] == pytest.approx(3 * vs["sinkhorn"]["p"])
    assert verdicts["detectable"].comparisons == 3
    best = verdicts["best"]
    assert best["p_rank1"]["bigbird"] == best["p_rank1"]["flash"] == best["p_rank1"]["longformer"]
    assert sum(best["p_rank1"][a] for a in ("softmax", "bigbird", "local", "sinkhorn")) == pytest.approx(1.0)
    assert "Tests made against the reference: 3 paired" in md and "are one result: each is tested" in md
    assert "ListOps (1 of 4): sinkhorn 1.00" in md  # four distinct results, not six names
    rows = table.set_index("attention")["ListOps"]
    assert rows["bigbird"].split(") ")[1] == rows["flash"].split(") ")[1]  # the same marks


def test_the_reference_s_own_result_under_another_name_is_marked_the_same_not_tested(tmp_path):
    df = one_result_three_names(tmp_path)
    table, md = table1(df, "cpu", reference="flash")
    vs = table.attrs["verdicts"]["cpu"]["listops"]["vs_ref"]
    assert vs["bigbird"]["verdict"] == vs["longformer"]["verdict"] == SAME and vs["bigbird"]["d"] == 0.0
    assert "≡" in table.set_index("attention").loc["bigbird", "ListOps"]
    assert "Tests made against the reference: 3 paired" in md  # softmax, local, sinkhorn
    best = table.attrs["verdicts"]["cpu"]["listops"]["best"]
    names = {"softmax", "flash", "local", "sinkhorn"}
    assert set(best["same_as"]) == {"bigbird", "longformer"} and set(best["p_rank1"]) - set(best["same_as"]) == names
    avg = table.attrs["verdicts"]["cpu"]["avg"]  # the average of one task: the same groups, the same marks
    assert avg["vs_ref"]["bigbird"]["verdict"] == avg["vs_ref"]["longformer"]["verdict"] == SAME
    assert list(table.set_index("attention").loc[["bigbird", "longformer", "softmax"], "avg_same_as"]) == [
        "flash", "flash", ""]


def test_one_seed_is_no_evidence_of_one_result(tmp_path):
    runs = tmp_path / "runs"
    for att in ("flash", "bigbird"):
        write(runs, scored("listops", att, 0, guesses(0, 0.5)))
    for seed in (0, 1):
        write(runs, scored("listops", "softmax", seed, guesses(seed, 0.5, 1)))
    df = load_runs(runs)
    table, md = table1(df, "cpu")
    assert table.attrs["verdicts"]["cpu"]["listops"]["same"] == [] and identical_note(task_cells(df, "cpu")) == ""
    assert "are one result" not in md and set(table.listops_same_as) == {""}


def test_on_the_average_one_result_is_one_only_where_it_is_one_on_every_task(tmp_path):
    df = one_result_three_names(tmp_path, tasks=("listops", "text"), longformer_differs_on=("text",))
    table, md = table1(df, "cpu")
    verdicts = table.attrs["verdicts"]["cpu"]
    assert verdicts["listops"]["same"] == [["bigbird", "flash", "longformer"]]
    assert verdicts["text"]["same"] == [["bigbird", "flash"]]
    assert verdicts["avg"]["same"] == [["bigbird", "flash"]]  # longformer is another result on text
    avg = verdicts["avg"]["vs_ref"]
    assert avg["flash"]["same_as"] == "bigbird" and "same_as" not in avg["longformer"]
    assert avg["bigbird"]["p_holm"] == avg["flash"]["p_holm"]
    assert set(verdicts["avg"]["best"]["p_rank1"]) - set(verdicts["avg"]["best"]["same_as"]) == {
        "softmax", "bigbird", "longformer", "local", "sinkhorn"}


def test_rank_reliability_and_the_planner_count_one_result_once(tmp_path):
    df = one_result_three_names(tmp_path)
    cells = task_cells(df, "cpu")
    table, _ = rank_reliability(cells)
    assert table.variants.tolist() == [4]  # softmax, flash (= bigbird, longformer), local, sinkhorn
    samples = dict(zip(cells.attention, cells["sample"], strict=True))
    distinct = {a: s for a, s in samples.items() if a not in ("bigbird", "longformer")}
    plan = plan_task("listops", distinct, [], "softmax", 3.0, designs=((3, N),), repeats=2)
    given = plan[plan.design == f"given 3 x {N}"].iloc[0]
    assert given.runs == 6 * 3  # six variants run and paid for
    alone = plan_task("listops", samples, [], "softmax", 3.0, designs=((3, N),))
    assert alone[alone.design == f"given 3 x {N}"].iloc[0].detectable_gap > given.detectable_gap  # 5 comparisons
    out = tmp_path / "plan.md"  # scripts/plan.py finds the repeats itself
    plan_script = load_script("scripts/plan.py", "lra_plan_script")
    assert plan_script.main(["--power", "3", "--runs-dir", str(tmp_path / "runs"), "--out", str(out),
                             "--design", f"listops=3x{N}"]) == 0
    printed = pd.read_csv(out.with_suffix(".csv")).set_index("design").loc[f"given 3 x {N}"]
    assert (printed.runs, printed.detectable_gap) == (18, pytest.approx(given.detectable_gap))


def test_the_plateau_counts_one_result_once_and_leaves_out_cells_at_chance(tmp_path):
    """tools/plateau.py's records (budget.plateau_runs): flash = bigbird = longformer enter once, under the reference
    when it is one of them; a cell with a collapsed run, another protocol's records and synthetic ones never."""
    runs = tmp_path / "runs"
    curve = [{"step": s, "val_acc": a} for s, a in ((600, 0.30), (1200, 0.35), (1800, 0.38), (2400, 0.40))]
    for seed in (0, 1, 2):
        plain = guesses(seed, 0.5)
        for att, p in (("flash", plain), ("bigbird", plain), ("longformer", plain),
                       ("softmax", guesses(seed, 0.52, 10)), ("local", guesses(seed, 0.49, 20)),
                       ("linformer", np.zeros(N, int) if seed else guesses(seed, 0.5, 50))):  # 2 of 3 collapsed
            write(runs, {**scored("listops", att, seed, p), "evals": curve})
        fine_tune = scored("listops", "sinkhorn", seed, guesses(seed, 0.4, 60))
        fine_tune["config"] = {**fine_tune["config"], "pretrain": {"name": "mlm"}}
        write(runs, {**fine_tune, "evals": curve})
        write(runs, {**record("listops", "routing", seed, acc=0.4, synthetic=True), "evals": curve})
    df = load_runs(runs)
    kept = plateau_runs(df)
    assert sorted(set(kept.attention)) == ["bigbird", "local", "softmax"]
    assert sorted(set(plateau_runs(df, reference="flash").attention)) == ["flash", "local", "softmax"]
    assert set(plateau_runs(df, protocol="mlm").attention) == {"sinkhorn"}
    assert list(over_mixers(last_quarter_table(kept)).results) == [3]
