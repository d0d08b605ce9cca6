"""Table 1's four marks, the confidence sets for the best, collapsed runs and tasks at chance, the detectable gap,
the chart's bars, emphasis and caption, and the rank reliability, on a results store of simulated records that keep
their per-example test predictions (3 seeds x 2,000 examples), beside older records without them."""

from __future__ import annotations

import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from lra_bench.reports import significance as sig
from lra_bench.reports.bubble import FADED, bubble_chart, caption, majority_rate
from lra_bench.reports.efficiency import load_cells
from lra_bench.reports.reliability import rank_reliability
from lra_bench.reports.significance import sample
from lra_bench.reports.table1 import AVG5, load_runs, lra_scores, table1, task_cells
from lra_bench.reports.task_vs_paper import task_scores
from lra_bench.store import predictions
from tests.test_report import record, signed, write

N = 2000
#: true accuracy per variant; "old" has records without predictions (written before they were kept)
TRUE = {"softmax": 0.50, "linear": 0.58, "performer": 0.575, "local": 0.50, "reformer": 0.42, "old": 0.50}
TASKS = ("listops", "image")


def make_store(root):
    rng = np.random.default_rng(0)
    runs = root / "runs"
    for task in TASKS:
        labels = rng.integers(0, 10, N)
        inputs = rng.integers(1, 30, (N, 16)).astype(np.uint8)
        fingerprint = predictions.test_fingerprint(inputs, labels)
        easy = rng.normal(0, 1.5, N)  # shared difficulty: what makes pairing pay
        for att, p in TRUE.items():
            for seed in range(3):
                logit = np.log(p / (1 - p)) + 1.2 * easy + rng.normal(0, 0.5, N) - 0.0
                right = rng.random(N) < 1 / (1 + np.exp(-(logit - np.mean(logit) + np.log(p / (1 - p)))))
                predicted = np.where(right, labels, (labels + 1) % 10)
                rec = record(task, att, seed, acc=float(right.mean()))
                rec["test_examples"] = N
                if att != "old":
                    rec[predictions.FIELD] = predictions.encode(predicted, labels, fingerprint)
                write(runs, rec)
    bench = root / "bench"
    bench.mkdir(parents=True)
    for i, att in enumerate(TRUE):
        median = 0.1 * (i + 1)
        cell = {"attention": att, "task": "text", "mode": "model", "n": 4096, "batch": 4, "device": "cpu-test",
                "profile": "cpu", "status": "ok", "median_s": median, "q1_s": 0.9 * median, "q3_s": 1.2 * median,
                "repeats": 10, "peak_delta_bytes": (i + 1) * 2**20, "created_at": "2026-01-01T00:00:00"}
        (bench / f"cell{i}.json").write_text(json.dumps(signed(cell)))
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("sig"))


def test_four_marks_against_the_reference_and_the_confidence_set_for_the_best(store):
    t, md = table1(load_runs(store / "runs"), "cpu")
    t = t.set_index("attention")
    for task in TASKS:
        assert t.loc["linear", f"{task}_vs_ref"] == "better" and t.loc["linear", f"{task}_method"] == "paired"
        assert t.loc["reformer", f"{task}_vs_ref"] == "worse"
        # local (true 50 = softmax): neither shown different nor shown within 2 points (its gap's interval reaches
        # past -2 on ListOps): not resolved
        assert t.loc["local", f"{task}_vs_ref"] == "not resolved"
        assert t.loc["old", f"{task}_method"] == "welch"  # no predictions: over seeds only
        # linear (58) and performer (57.5) cannot be told apart from the best; softmax (50) and reformer (42) are
        # shown below them
        assert t.loc["linear", f"{task}_best"] and t.loc["performer", f"{task}_best"]
        assert not t.loc["softmax", f"{task}_best"] and not t.loc["reformer", f"{task}_best"]
        assert t.loc["linear", f"{task}_p_rank1"] + t.loc["performer", f"{task}_p_rank1"] == pytest.approx(1.0)
        assert t.loc["linear", f"{task}_interval"] == "seeds + test examples" and t.loc["linear", f"{task}_n"] == 3
        assert t.loc["old", f"{task}_interval"] == "seeds + binomial test sampling"
    assert t.loc["local", "listops_lower"] < -2
    # on the average of two tasks the gap of local is within 2 points with room to spare: equivalence is shown
    assert t.loc["local", "avg_vs_ref"] == "equivalent" and t.loc["local", AVG5].endswith(" ≈")
    assert t.loc["linear", "ListOps"].endswith("(3 seeds) ▲ ★") and t.loc["softmax", "ListOps"].endswith("ref")
    assert t.loc["local", "ListOps"].endswith("(3 seeds) ?")
    assert t.loc["reformer", AVG5].endswith("▼") and t.loc["linear", "avg_vs_ref"] == "better"
    assert t.loc["old", "avg_vs_ref"] in ("not resolved", "equivalent", "better", "worse")  # tested, over seeds
    assert "Tests made against the reference: " in md and "paired" in md
    assert "No paired comparison is possible for 2 cell(s)" in md and "old/image, old/listops" in md
    assert "ListOps (2 of 6): " in md and "Detectable gap" in md and "ListOps 5.4 points" in md


def test_equivalence_marks_are_holm_corrected_across_the_family():
    """Ten variants each 0.5 points from the reference with a standard error that gives each TOST a p of about
    0.02: one alone is shown equivalent; ten at once are not (Holm over the family: 0.02 x 10 > 5 %)."""
    from lra_bench.reports.significance import EQUIVALENT, UNRESOLVED, family
    from lra_bench.stats.paired import tost

    se = 1.5 / 2.0  # (2 - 0.5) / se = 2: t_inf one-sided p 0.023
    assert float(tost(0.5, se, np.inf, 2.0)) == pytest.approx(0.0228, abs=1e-3)
    one = family("ref", {"a": (0.5, se, np.inf, "paired")})
    assert one["a"]["verdict"] == EQUIVALENT
    ten = family("ref", {f"v{i}": (0.5, se, np.inf, "paired") for i in range(10)})
    assert {v["verdict"] for n, v in ten.items() if n != "ref"} == {UNRESOLVED}


def test_collapsed_runs_and_a_task_at_chance_left_out_of_the_average(tmp_path):
    """Runs that predict one class, or score within their own interval of the majority rate, are counted as
    collapsed in their cell; a task where every cell is at chance is shown but left out of the LRA average, and the
    notes and the chart say so."""
    labels = np.arange(1000) % 2  # majority rate 0.5
    runs = tmp_path / "runs"
    for att, accs in (("softmax", [0.60, 0.61, 0.62]), ("linear", [0.70, 0.71, 0.72])):
        _cell_records(runs, "listops", att, accs, labels, "L", majority=0.5)
    for att in ("softmax", "linear"):  # pathfinder: every run predicts class 0 (accuracy = majority rate)
        for seed in range(3):
            rec = record("pathfinder", att, seed, acc=0.5)
            rec.update(test_examples=1000, test_majority_rate=0.5)
            rec[predictions.FIELD] = predictions.encode(np.zeros(1000, int), labels, "P")
            write(runs, rec)
    _cell_records(runs, "image", "softmax", [0.30, 0.31, 0.32], labels, "I", majority=0.5)
    _cell_records(runs, "image", "linear", [0.50, 0.70, 0.71, 0.70, 0.71, 0.70], labels, "I", majority=0.5)  # 1 at 50
    frame, md = table1(load_runs(runs), "cpu")
    t = frame.set_index("attention")
    assert t.loc["softmax", "pathfinder_collapsed"] == 3 and t.loc["softmax", "pathfinder_at_chance"]
    assert "(3 seeds; 3 collapsed)" in t.loc["softmax", "Pathfinder"]
    assert t.loc["linear", "image_collapsed"] == 1 and not t.loc["linear", "image_at_chance"]
    assert "(6 seeds; 1 collapsed)" in t.loc["linear", "Image"]
    # the average covers ListOps and Image only: (70 + 71 + 72) / 3 and (50 + 70 + 71 + 70 + 71 + 70) / 6
    assert t.loc["linear", "n_tasks"] == 2
    assert t.loc["linear", "avg_present"] == pytest.approx((71.0 + 67.0) / 2)
    assert "left out of the LRA average, the average's marks and its best set" in md and "chance): Pathfinder" in md
    assert "Collapsed runs" in md and "Pathfinder 6 of 6" in md and "Image 1 of 9" in md
    scores = lra_scores(frame, "cpu")  # what the chart plots, and what its caption says about it
    assert scores.attrs["tasks"] == ["listops", "image"] and scores.attrs["left_out"] == ["pathfinder"]
    assert scores.set_index("attention").loc["linear", "collapsed"] == 1
    points = scores.assign(noisy=False, repeats=3.0, x_lo=np.nan)
    text = caption(points, {"best_tested": True, **scores.attrs}, None)
    assert "Pathfinder: every variant at chance, so left out of the LRA score" in text
    assert "the score is the mean over ListOps, Image" in text and "(k collapsed)" in text
    assert majority_rate(load_runs(runs), "cpu", tasks=scores.attrs["tasks"]) == pytest.approx(50.0)


def test_every_task_at_chance_gives_no_lra_score_but_a_chart_of_mean_accuracy_that_says_so(tmp_path):
    """A smoke sweep: every variant at chance on its one task. Table 1's average stays empty (nothing ranks them);
    the chart's y is their mean accuracy, labelled as such, beside the majority-class rate of those tasks."""
    labels = np.arange(1000) % 2
    runs = tmp_path / "runs"
    for att, acc in (("softmax", 0.5), ("linear", 0.5)):
        for seed in range(2):
            rec = record("listops", att, seed, acc=acc)
            rec.update(test_examples=1000, test_majority_rate=0.5)
            rec[predictions.FIELD] = predictions.encode(np.zeros(1000, int), labels, "L")
            write(runs, rec)
    frame, md = table1(load_runs(runs), "cpu")
    assert frame["avg_present"].isna().all() and frame["n_tasks"].eq(0).all()
    scores = lra_scores(frame, "cpu")
    assert scores.attrs["tasks"] == [] and scores.attrs["left_out"] == ["listops"] and scores.attrs["all_at_chance"]
    got = scores.set_index("attention")
    assert got["score"].tolist() == [50.0, 50.0] and not got["best"].any() and got["collapsed"].tolist() == [2, 2]
    assert got["seeds"].tolist() == [2, 2] and got["n_tasks"].tolist() == [1, 1]
    points = scores.assign(noisy=False, repeats=3.0, x_lo=np.nan, y_lo=np.nan, seeds_max=scores["seeds_max"])
    text = caption(points, {"best_tested": False, **scores.attrs}, None)
    assert "Every variant is at chance on every task here (ListOps): no LRA score ranks them" in text
    assert "left out of the LRA score" not in text and "interval of the mean accuracy" in text
    assert majority_rate(load_runs(runs), "cpu", tasks=scores.attrs["left_out"]) == pytest.approx(50.0)


def test_a_cell_pairs_only_with_predictions_that_match_its_accuracies():
    labels = np.arange(8) % 2
    field = predictions.encode(labels, labels, "f")  # all right
    assert sample([100.0, 100.0], [field, field]).correct.shape == (2, 8)
    assert sample([100.0, 50.0], [field, field]).why_unpaired == "per-example predictions disagree with test_acc"
    other = predictions.encode(labels, labels, "g")
    assert sample([100.0, 100.0], [field, other]).why_unpaired == "seeds evaluated on different test sets"
    assert "1 of 2 record(s) without" in sample([100.0, 100.0], [field, None]).why_unpaired


def test_chart_bars_and_emphasis(store, tmp_path):
    t, _ = table1(load_runs(store / "runs"), "cpu")
    cells = load_cells(store / "bench")
    for scores, name in ((t, "bubble.png"), (task_scores(t, "listops", "cpu"), "listops.png")):
        fig = bubble_chart(scores, cells, tmp_path / name, profile="cpu", score_task=None if name == "bubble.png"
                           else "listops")
        data = fig.bubble_data.set_index("attention")
        assert (data.y_lo < data.y).all() and (data.y < data.y_hi).all()
        # speed IQR from the cell's quartiles: examples/s = batch / seconds per step
        assert data.loc["softmax", "x_lo"] == pytest.approx(4 / 0.12) and data.loc["softmax", "x_hi"] == pytest.approx(
            4 / 0.09)
        vertical, horizontal = fig.axes[0].containers  # read the bars back from the figure
        segments = vertical.lines[2][0].get_segments()
        got = sorted((float(s[0][1]), float(s[1][1])) for s in segments)
        want = sorted(zip(data.y_lo, data.y_hi, strict=True))
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-6)  # pytest >= 9: no nested approx
        segments = horizontal.lines[2][0].get_segments()
        assert sorted(float(s[0][0]) for s in segments) == pytest.approx(sorted(data.x_lo))
        ours = next(c for c in fig.axes[0].collections if c.get_gid() == "ours")
        alpha = dict(zip(fig.bubble_data.attention, ours.get_facecolors()[:, 3], strict=False))
        assert alpha["linear"] > 0.5 and alpha["reformer"] == pytest.approx(FADED)
        caption = "\n".join(x.get_text() for x in fig.texts)
        assert "3 seeds" in caption and "over seeds and test examples" in caption
        assert "Bold circles: in the 95 % confidence set for the best" in caption
        assert "Detectable gap vs softmax" in caption and "ListOps 5.4" in caption
        assert "interquartile range" in caption and "(10 repeats)" in caption
        plt.close(fig)


def test_a_variant_left_out_of_the_best_sets_comparisons_is_drawn_plain_not_faded(store, tmp_path):
    """One seed per task: no test, no P(rank 1), so the chart may not fade it as "shown below another variant"."""
    import shutil

    root = shutil.copytree(store, tmp_path / "store")
    for task in TASKS:
        write(root / "runs", record(task, "single", 0, acc=0.61))
    cell = {"attention": "single", "task": "text", "mode": "model", "n": 4096, "batch": 4, "device": "cpu-test",
            "profile": "cpu", "status": "ok", "median_s": 0.05, "q1_s": 0.045, "q3_s": 0.06, "repeats": 10,
            "peak_delta_bytes": 2**20, "created_at": "2026-01-01T00:00:00"}
    (root / "bench" / "single.json").write_text(json.dumps(signed(cell)))
    t, _ = table1(load_runs(root / "runs"), "cpu")
    fig = bubble_chart(t, load_cells(root / "bench"), tmp_path / "bubble.png", profile="cpu")
    ours = next(c for c in fig.axes[0].collections if c.get_gid() == "ours")
    alpha = dict(zip(fig.bubble_data.attention, ours.get_facecolors()[:, 3], strict=False))
    assert math.isnan(fig.bubble_data.set_index("attention").loc["single", "p_rank1"])
    assert alpha["single"] == pytest.approx(0.6) and alpha["reformer"] == pytest.approx(FADED)
    assert "Plain: not compared (fewer than 2 seeds on a task)." in " ".join(
        " ".join(x.get_text().split()) for x in fig.texts)
    plt.close(fig)


def test_seeds_whose_data_lay_elsewhere_are_one_cell_but_other_data_is_not(tmp_path):
    """A sweep resumed on another machine reads the same data from another path: its seeds join the cell (the
    identity is the config without task.data_dir, and the test set's fingerprint); data that differs does not."""
    runs = tmp_path / "runs"
    for seed, where, dataset in ((0, "/a/imdb", "f"), (1, "/b/imdb", "f"), (2, "/c/imdb", "g")):
        rec = record("text", "softmax", seed, acc=0.55 + seed / 100)
        rec["config"] = {"task": {"source": "files", "data_dir": where}}
        rec["dataset_fingerprint"] = dataset  # no predictions: the dataset's fingerprint is its test set
        write(runs, rec)
    cells = task_cells(load_runs(runs), "cpu").set_index("attention")
    assert cells.loc["softmax", "seeds"] == [2]  # the newest identity (data g) ...
    _, md = table1(load_runs(runs), "cpu")
    assert "**Left out**" in md  # ... and the seeds on data f, listed, never mixed in
    rec = record("text", "softmax", 2, acc=0.57)
    rec["config"] = {"task": {"source": "files", "data_dir": "/c/imdb"}}
    write(runs, rec)  # seed 2 again (its folder: replaced), on data f, from a third path
    assert task_cells(load_runs(runs), "cpu").set_index("attention").loc["softmax", "seeds"] == [0, 1, 2]


def test_rank_reliability_over_every_split_of_the_seeds(store):
    table, md = rank_reliability(task_cells(load_runs(store / "runs"), "cpu"))
    assert list(table.task) == list(TASKS) and (table.variants == len(TRUE)).all()
    assert (table.seeds == "[0, 1, 2]").all() and (table.splits == 3).all()
    assert (table.tau > 0.3).all(), table  # 8-point gaps at 2,000 examples: the order mostly reproduces
    assert (table.tau_lo < table.tau).all() and (table.tau < table.tau_hi).all()
    assert (table.reliability > 0.8).all() and (table.same_top1 > 0.3).all()
    assert "Kendall's tau" in md and "reliability of the 3-seed mean" in md and "P(same top-3 set)" in md


def test_bubble_caption_counts_the_seeds_of_every_task():
    """A score averaged over a 3-seed task and a 1-seed task is not '1 seed per task' (the fewest alone said so)."""
    from lra_bench.reports.bubble import caption

    def points(fewest, most):
        return pd.DataFrame({"seeds": fewest, "seeds_max": most, "x_lo": [np.nan] * len(fewest),
                             "noisy": [False] * len(fewest), "repeats": [3.0] * len(fewest)})

    meta = {"best_tested": False}
    assert "(1 seed per task: test sampling only" in caption(points([1.0, 1.0], [1.0, 1.0]), meta, None)
    mixed = caption(points([1.0, 1.0], [3.0, 1.0]), meta, None)
    assert "1 to 3 seeds per task: over seeds and test examples; where 1 seed, test sampling only" in mixed
    assert "3 seeds per task: over seeds and test examples" in caption(points([3.0], [3.0]), meta, None)
    assert "2 to 3 seeds per task" in caption(points([2.0, 3.0], [3.0, 3.0]), meta, None)
    assert "(1 seed: test sampling only (Wilson))" in caption(points([1.0], [1.0]), meta, "listops")


def _cell_records(runs, task, att, accs, labels, fingerprint, seed0=0, profile="cpu", majority=0.2):
    """Records of one cell whose per-example predictions are right on the first round(acc * N) examples."""
    for seed, acc in enumerate(accs, start=seed0):
        right = np.arange(len(labels)) < round(acc * len(labels))
        rec = record(task, att, seed, acc=float(right.mean()), profile=profile)
        rec["test_examples"] = len(labels)
        rec["test_majority_rate"] = majority
        rec[predictions.FIELD] = predictions.encode(np.where(right, labels, (labels + 1) % 10), labels, fingerprint)
        write(runs, rec)


def test_cells_on_different_test_sets_are_not_compared(tmp_path):
    """Both cells kept predictions, but on different test sets: no paired test and no Welch fallback either (their
    accuracies measure different things); the note names the cell."""
    labels = np.arange(400) % 10
    runs = tmp_path / "runs"
    _cell_records(runs, "listops", "softmax", [0.40, 0.42, 0.44], labels, "test-set-A")
    _cell_records(runs, "listops", "linear", [0.60, 0.62, 0.64], labels, "test-set-A")
    _cell_records(runs, "listops", "local", [0.60, 0.62, 0.64], labels, "test-set-B")
    t, md = table1(load_runs(runs), "cpu")
    t = t.set_index("attention")
    assert t.loc["linear", "listops_vs_ref"] == "better" and t.loc["linear", "listops_method"] == "paired"
    assert t.loc["local", "listops_vs_ref"] == "untested" and t.loc["local", "listops_method"] == ""
    assert "whose predictions are on a different test set: local/listops" in md
    a = sample([40.0, 42.0], [predictions.encode(labels, labels, "x")] * 2)  # mismatching accs: unpaired
    assert a.correct is None and "disagree" in a.why_unpaired
    _cell_records(runs, "image", "softmax", [0.40, 0.42], labels, "img")
    _cell_records(runs, "image", "linear", [0.40, 0.42], labels, "img")
    rec = record("image", "rfa", 0, acc=0.5)  # an older record, no predictions: named as such
    write(runs, rec)
    write(runs, record("image", "rfa", 1, acc=0.5))
    _, md = table1(load_runs(runs), "cpu")
    assert "lack per-example test predictions (older records): rfa/image" in md


def test_the_best_set_is_made_of_testable_cells(tmp_path):
    """A single-seed cell cannot be tested against anything: the confidence set for the best is made of the cells
    with 2+ seeds (the one-seed cell, however high, is neither in it nor able to push the others out)."""
    labels = np.arange(1000) % 10
    runs = tmp_path / "runs"
    _cell_records(runs, "listops", "softmax", [0.40, 0.41, 0.42], labels, "A")
    _cell_records(runs, "listops", "linear", [0.50, 0.51, 0.52], labels, "A")
    _cell_records(runs, "listops", "local", [0.30, 0.31, 0.32], labels, "A")
    _cell_records(runs, "listops", "performer", [0.90], labels, "A")  # one seed, far ahead
    t, md = table1(load_runs(runs), "cpu")
    t = t.set_index("attention")
    assert t.loc["linear", "listops_best"] and not t.loc["local", "listops_best"]
    assert not t.loc["performer", "listops_best"] and t.loc["performer", "listops_n"] == 1
    assert "ListOps (1 of 3): linear" in md


def test_the_average_is_tested_only_over_the_reference_tasks(tmp_path):
    """A variant with a task the reference lacks shows an average over other tasks than the reference's: marking it
    against the reference would describe a number the table does not show."""
    labels = np.arange(1000) % 10
    runs = tmp_path / "runs"
    for att, acc in (("softmax", 0.40), ("linear", 0.60), ("local", 0.60)):
        _cell_records(runs, "listops", att, [acc, acc + 0.01, acc + 0.02], labels, "A")
    _cell_records(runs, "image", "local", [0.10, 0.11, 0.12], labels, "B")  # only local has image
    t, _ = table1(load_runs(runs), "cpu")
    t = t.set_index("attention")
    assert t.loc["linear", "avg_vs_ref"] == "better"
    assert t.loc["local", "avg_vs_ref"] == "untested" and t.loc["local", "listops_vs_ref"] == "better"


def test_the_equivalence_margin_is_an_option(store, report_script, tmp_path):
    """--margin sets the TOST margin: local (true 50 = softmax) is not shown within 2 points on ListOps, but is within
    10; a margin that is not positive is refused."""
    runs = load_runs(store / "runs")
    assert table1(runs, "cpu")[0].set_index("attention").loc["local", "listops_vs_ref"] == "not resolved"
    wide, md = table1(runs, "cpu", margin=10.0)
    assert wide.set_index("attention").loc["local", "listops_vs_ref"] == "equivalent" and "±10 points" in md
    res = report_script("--runs-dir", store / "runs", "--bench-dir", tmp_path / "none", "--out", tmp_path / "out",
                        "--margin", "0")
    assert res.returncode == 2 and "--margin 0.0: the equivalence margin must be a positive number" in res.stderr


def test_cells_scored_on_different_test_sets_are_never_compared_even_without_predictions():
    """Welch's test over seeds (a cell without per-example predictions) still needs one test set: two cells whose
    records name different test fingerprints, or a cell whose seeds do, are untested; unknown ones (older records
    with neither) are compared over seeds as before. Predictions without a fingerprint are not paired."""
    labels = np.array([0, 1, 1, 0])
    field = predictions.encode(np.array([0, 1, 0, 0]), labels, "a" * 64)  # 75 %
    with_preds = sig.sample([75.0, 75.0], [field, field], ["a" * 64] * 2)
    old_same, old_other = (sig.sample([60.0, 64.0], [None, None], [t, t]) for t in ("a" * 64, "b" * 64))
    unknown = sig.sample([60.0, 64.0], [None, None], ["", None])
    assert sig.compare(with_preds, old_same)[3] == "welch" and sig.compare(with_preds, unknown)[3] == "welch"
    assert sig.compare(with_preds, old_other) is None and sig.compare(old_other, old_same) is None
    mixed = sig.sample([60.0, 64.0], [None, None], ["a" * 64, "b" * 64])
    assert mixed.test_set == sig.MIXED and sig.compare(mixed, old_same) is None
    bare = {k: v for k, v in field.items() if k != "test_fingerprint"}
    unpaired = sig.sample([75.0, 75.0], [bare, bare])
    assert unpaired.correct is None and unpaired.why_unpaired == "predictions without a test fingerprint"
