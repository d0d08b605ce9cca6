"""The reporting layer on a hand-made results store: Table 1 numbers, the bubble chart read back from the
matplotlib figure, the accuracy plot, scripts/report.py end to end, and notebooks/results.ipynb executed."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lra_bench.attention import list_attentions
from lra_bench.reports import paper
from lra_bench.reports.accuracy_plots import accuracy_plots
from lra_bench.reports.bubble import MAX_AREA, bubble_chart, read_popularity
from lra_bench.reports.efficiency import load_cells
from lra_bench.reports.table1 import AVG5, AVG6, load_runs, pick_profile, table1
from lra_bench.store.records import checksum

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20

#: test accuracy of seeds 0 and 1 per attention and task (None = no such run); hand-computed means below
ACCS = {
    "softmax": {"listops": (0.36, 0.38), "text": (0.64, 0.66), "retrieval": (0.56, 0.58), "image": (0.42, 0.44),
                "pathfinder": (0.70, 0.72)},
    "linear": {"listops": (0.16, 0.18), "text": (0.65, 0.67), "retrieval": (0.52, 0.54), "image": (0.41, 0.43),
               "pathfinder": (0.74, 0.76)},
    "local": {"listops": (0.15, 0.17), "text": (0.52, 0.54), "retrieval": (0.53, 0.55), "image": (0.40, 0.42),
              "pathfinder": (0.66, 0.68)},
    "performer": {"listops": (0.18, 0.20), "text": (0.64, 0.66), "retrieval": (0.53, 0.55)},
    "reformer": {"listops": (0.37, 0.39), "text": (0.55, 0.57), "retrieval": (0.53, 0.55), "image": (0.37, 0.39)},
}
PARAMS = {"softmax": 100_000, "linear": 90_000, "local": 80_000, "performer": 120_000, "reformer": 110_000}
#: bench cells at the longest length N=4096, batch 4: median step seconds and peak memory growth
BENCH_4K = {"softmax": (0.5, 400 * MiB), "linear": (0.1, 50 * MiB), "performer": (0.125, 60 * MiB),
            "local": (0.2, 80 * MiB), "reformer": None}  # reformer: OOM at 4096


def record(task, attention, seed, status="ok", acc=None, profile="cpu", synthetic=False, finished="2026-01-02T00:00",
           config_hash=None):
    h = config_hash or hashlib.sha256(repr((task, attention, seed, profile, synthetic)).encode()).hexdigest()
    return {
        "run_id": f"{profile}-seed{seed}-{h[:10]}", "attention": attention, "task": task, "profile": profile,
        "seed": seed, "config": {"task": {"source": "synthetic" if synthetic else "generate"}}, "config_hash": h,
        "status": status, "message": "" if status == "ok" else f"simulated {status}", "best_val_acc": acc,
        "best_step": 10, "test_acc": acc, "test_examples": 100, "test_majority_rate": 0.2,
        "throughput": {"steps_per_s": 5.0, "examples_per_s": 160.0, "batch_size": 32, "seq_len": 128},
        "memory": {"peak_bytes": 500 * MiB, "kind": "cpu_peak_rss"}, "params": PARAMS.get(attention, 1000),
        "device": "cpu", "torch_version": "2.x", "git_commit": "abc", "dataset_fingerprint": "f",
        "wall_time_s": 1.0, "synthetic": synthetic, "started_at": finished, "finished_at": finished,
    }


def write(runs: Path, rec: dict, folder: str | None = None) -> Path:
    folder = folder or f"{rec['profile']}-seed{rec['seed']}-{rec['config_hash'][:10]}"
    d = runs / rec["task"] / rec["attention"] / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "record.json").write_text(json.dumps(signed(rec)))
    return d / "record.json"


def signed(result: dict) -> dict:
    """``result`` with the checksum every result lra-bench writes carries (the readers reject one without)."""
    return {**result, "checksum": checksum(result)}


def make_store(root: Path) -> Path:
    runs, bench = root / "runs", root / "bench"
    for att, tasks in ACCS.items():
        for task, accs in tasks.items():
            for seed, acc in enumerate(accs):
                write(runs, record(task, att, seed, acc=acc))
    write(runs, record("pathx", "softmax", 0, status="oom"))                       # Path-X OOM -> OOM cell, 50
    write(runs, record("pathx", "local", 0, acc=0.55))                             # Path-X ok, 1 seed
    write(runs, record("image", "performer", 0, status="diverged"))                # only a diverged run -> DIV
    write(runs, record("pathfinder", "reformer", 0, acc=0.68))                     # 1 ok seed + 1 failed
    write(runs, record("pathfinder", "reformer", 1, status="failed"))
    write(runs, record("listops", "softmax", 2, acc=0.99, synthetic=True))         # must never count
    write(runs, record("listops", "softmax", 0, acc=0.20, profile="smoke"))       # other profile
    latest = record("text", "softmax", 0, acc=0.64)                    # an older record, same hash, misfiled
    write(runs, {**latest, "test_acc": 0.10, "finished_at": "2025-12-01T00:00"}, folder="cpu-seed0-old")
    corrupt = runs / "listops" / "linear" / "cpu-seed7-deadbeef00" / "record.json"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text('{"task": "listops", "attention": "linear", "status": "o')  # truncated
    bench.mkdir(parents=True)
    i = 0
    for att, at4k in BENCH_4K.items():
        for n in (1024, 2048, 4096):
            cell = {"attention": att, "task": "listops", "mode": "model", "n": n, "batch": 4, "device": "cpu-test",
                    "profile": "cpu", "status": "ok", "median_s": 0.01 * n / 1024, "peak_delta_bytes": n * 1000,
                    "created_at": "2026-01-01T00:00:00"}
            if n == 4096:
                cell = ({**cell, "status": "oom", "median_s": None, "peak_delta_bytes": None} if at4k is None
                        else {**cell, "median_s": at4k[0], "peak_delta_bytes": at4k[1]})
            (bench / f"cell{i}.json").write_text(json.dumps(signed(cell)))
            i += 1
        attn_cell = {"attention": att, "task": "listops", "mode": "attention", "n": 4096, "batch": 4,
                     "device": "cpu-test", "profile": "cpu", "status": "ok", "median_s": 0.001,
                     "peak_delta_bytes": 10, "created_at": "2026-01-01T00:00:00"}
        (bench / f"cell{i}.json").write_text(json.dumps(signed(attn_cell)))
        i += 1
    return root


@pytest.fixture
def store(tmp_path):
    return make_store(tmp_path / "results")


@pytest.fixture
def runs(store, caplog):
    with caplog.at_level(logging.WARNING), pytest.warns(UserWarning, match="skipped 2 unreadable"):
        df = load_runs(store / "runs")
    assert any("cpu-seed7-deadbeef00" in r.getMessage() for r in caplog.records)
    assert any("cpu-seed0-old" in r.getMessage() and "does not match its folder" in r.getMessage()
               for r in caplog.records)
    return df


def seeds_binomial(a: float, b: float, n: int = 100) -> tuple[float, float, float, float]:
    """(low, high, se in points, df) of a 2-seed cell whose records keep no per-example predictions: the seeds'
    spread plus the binomial p (1 - p) / n, t with the Welch-Satterthwaite df of the two terms (1 and n - 1)."""
    p = (a + b) / 2
    seed, example = np.var([a, b], ddof=1) / 2, p * (1 - p) / n
    df = (seed + example) ** 2 / (seed**2 / 1 + example**2 / (n - 1))
    half = stats.t.ppf(0.975, df) * math.sqrt(seed + example)
    return 100 * (p - half), 100 * (p + half), 100 * math.sqrt(seed + example), df


def mean_std(a, b):
    return (a + b) * 50, abs(a - b) * 100 / math.sqrt(2)


def test_load_runs_skips_corrupt_and_keeps_latest_per_config(runs):
    assert not runs.path.str.contains("deadbeef00").any()
    soft_text = runs[(runs.attention == "softmax") & (runs.task == "text") & (runs.seed == 0)]
    assert soft_text.test_acc.tolist() == [0.64]  # the older record with the same config_hash (misfiled) is dropped
    assert runs.synthetic.sum() == 1
    assert pick_profile(runs) == "cpu"


def test_table1_values_against_hand_computation(runs):
    t, md = table1(runs, "cpu")
    t = t.set_index("attention")
    assert list(t.index) == ["softmax", "local", "reformer", "linear", "performer"]  # the paper's row order
    soft = t.loc["softmax"]
    # ListOps: seeds 36 and 38 (the synthetic 99 must not count): mean 37, std sqrt(2) = 1.41
    assert soft["listops_mean"] == pytest.approx(37.0) and soft["listops_n"] == 2
    assert soft["listops_std"] == pytest.approx(math.sqrt(2))
    # 95 % interval without per-example predictions: the seeds' spread plus the binomial bound of test sampling,
    # se^2 = var(36, 38) / 2 + 0.37 x 0.63 / 100, t with Welch-Satterthwaite df (1 and 99) = [27.21, 46.79]; the
    # reference; in the confidence set for the best with reformer's 38 (Welch over 2 seeds each: these records keep
    # no per-example predictions)
    lo, hi, se, df = seeds_binomial(0.36, 0.38)
    assert (soft["listops_lo"], soft["listops_hi"]) == pytest.approx((lo, hi)) and (lo, hi) == pytest.approx(
        (27.21, 46.79), abs=0.005)
    assert soft["listops_se"] == pytest.approx(se) and soft["listops_df"] == pytest.approx(df)
    assert soft["listops_interval"] == "seeds + binomial test sampling"
    assert soft["ListOps"] == "37.00 [27.21, 46.79] (2 seeds) ref ★"
    assert soft["Text"] == "65.00 [55.32, 74.68] (2 seeds) ref ★"  # 64 and 66: the stale 10 % record is superseded
    assert soft["Path-X"] == "OOM"
    # 5-task mean (37 + 65 + 57 + 43 + 71) / 5 = 54.6; 6-task with Path-X OOM = 50: 323 / 6 = 53.83
    # its interval: the 5 task standard errors / 5, Welch-Satterthwaite df over their terms
    parts = [seeds_binomial(*ACCS["softmax"][task]) for task in paper.TASKS]
    avg_se = math.sqrt(sum(p[2] ** 2 for p in parts)) / 5
    avg_df = (avg_se**2) ** 2 / sum((p[2] / 5) ** 4 / p[3] for p in parts)
    assert soft["avg5"] == pytest.approx(54.6) and soft[AVG5] == "54.60 [50.28, 58.92] ref ★"
    assert soft["avg_hi"] - 54.6 == pytest.approx(stats.t.ppf(0.975, avg_df) * avg_se)
    assert soft["avg6"] == pytest.approx(323 / 6) and soft[AVG6] == "53.83"
    lin = t.loc["linear"]  # (17 + 66 + 53 + 42 + 75) / 5 = 50.6; Path-X never run -> 50, marked *
    assert lin["avg5"] == pytest.approx(50.6) and lin[AVG6] == "50.50*" and lin["Path-X"] == ""
    loc = t.loc["local"]  # (16 + 53 + 54 + 41 + 67) = 231; Path-X ok at 55 (1 seed): (231 + 55) / 6
    # one seed: the Wilson interval of 55 right of 100 test examples, labelled
    assert loc["Path-X"] == "55.00 [45.24, 64.39] (1 seed: test sampling only)"
    assert loc["avg6"] == pytest.approx(286 / 6)
    assert loc["ListOps"].endswith("▼") and loc["listops_vs_ref"] == "worse" and loc["listops_method"] == "welch"
    # 15 % and 17 % of 100 test examples: each within its Wilson interval of the 20 % majority rate, collapsed
    assert loc["ListOps"].startswith("16.00 [8.43, 23.57] (2 seeds; 2 collapsed)") and loc["listops_collapsed"] == 2
    assert loc["avg5"] == pytest.approx(46.2)
    perf = t.loc["performer"]  # 19, 65, 54 present; Image only diverged; Pathfinder never run
    assert perf["Image"] == "DIV" and perf["Pathfinder"] == ""
    assert math.isnan(perf["avg5"]) and perf["avg_present"] == pytest.approx(46.0) and perf["n_tasks"] == 3
    assert perf[AVG5] == "46.00 [40.67, 51.33] (partial: 3/5 tasks)" and perf[AVG6] == ""
    ref = t.loc["reformer"]  # Pathfinder: one ok seed (68) and one failed run
    assert ref["Pathfinder"] == "68.00 [58.34, 76.33] (1 seed: test sampling only; 1 FAIL)"
    assert ref["pathfinder_vs_ref"] == "untested"  # one seed: no test
    assert ref["avg5"] == pytest.approx((38 + 56 + 54 + 38 + 68) / 5)
    for att, row in t.iterrows():
        for task, (a, b) in ACCS[att].items():
            m, s = mean_std(a, b)
            assert row[f"{task}_mean"] == pytest.approx(m) and row[f"{task}_std"] == pytest.approx(s)
        assert row["paper_avg5"] == paper.paper_lra_score(att)
        assert row["params"] == PARAMS[att]
    assert "| softmax" in md and "54.60" in md and "OOM" in md and "paper avg (5)" in md and "51.39" not in md
    assert "None of the 24 cells' records kept per-example test predictions" in md
    assert "ListOps (2 of 5): " in md and "reformer" in md  # the confidence set for the best: softmax, reformer
    assert t.loc["reformer", "listops_best"] and t.loc["softmax", "listops_best"] and not t.loc["local", "listops_best"]
    assert "Collapsed runs" in md and "ListOps 6 of 10" in md
    both, md_all = table1(runs)
    assert set(both.profile) == {"cpu", "smoke"} and "Profile `smoke`" in md_all
    assert both.set_index(["profile", "attention"]).loc[("smoke", "softmax"), "ListOps"] == \
        "20.00 [13.34, 28.88] (1 seed: test sampling only; 1 collapsed) ref"  # 20 % = the majority rate


def ours_and_paper(fig):
    ax = fig.axes[0]
    by_gid = {c.get_gid(): c for c in ax.collections if c.get_gid()}
    return by_gid.get("ours"), by_gid.get("paper")


def test_bubble_chart_coordinates_and_areas_read_from_the_figure(runs, store, tmp_path):
    t, _ = table1(runs)
    cells = load_cells(store / "bench")
    fig = bubble_chart(t, cells, tmp_path / "bubble.png", size="memory", profile="cpu")
    ours, paper_pts = ours_and_paper(fig)
    assert paper_pts is None
    offsets, sizes = np.asarray(ours.get_offsets()), np.asarray(ours.get_sizes())
    # expected: x = steps/s x batch 4 at N=4096, y = 5-task mean (performer: mean of its 3 tasks), size = memory
    expected = {"softmax": (2 * 4, 54.6, 400 * MiB), "linear": (10 * 4, 50.6, 50 * MiB),
                "performer": (8 * 4, 46.0, 60 * MiB), "local": (5 * 4, 46.2, 80 * MiB)}
    assert len(offsets) == len(expected) == len(sizes)
    got = {}
    for (xv, yv), s in zip(offsets, sizes, strict=True):
        name = min(expected, key=lambda a: abs(expected[a][0] - xv))
        got[name] = (xv, yv, s)
    for name, (xv, yv, mem) in expected.items():
        assert got[name][0] == pytest.approx(xv) and got[name][1] == pytest.approx(yv)
        assert got[name][2] == pytest.approx(MAX_AREA * mem / (400 * MiB))  # area ∝ memory, largest = MAX_AREA
    assert fig.bubble_omitted == {"reformer": "OOM at N=4096"}
    labels = {t.get_text() for t in fig.axes[0].texts}
    # every circle labelled, with its collapsed runs (ListOps at 15-19 % of 100 examples, majority rate 20 %)
    assert {"softmax", "linear (2 collapsed)", "local (2 collapsed)", "performer [3/5] (2 collapsed)"} <= labels
    legend = fig.axes[0].get_legend()  # the size legend: 3 reference circles on the same area scale
    assert "peak memory" in legend.get_title().get_text() and "N=4096" in legend.get_title().get_text()
    assert [t.get_text() for t in legend.get_texts()] == ["400 MiB", "100 MiB", "20 MiB"]
    ref_sizes = [h.get_sizes()[0] for h in legend.legend_handles]
    assert ref_sizes == pytest.approx([MAX_AREA * v / 400 for v in (400, 100, 20)])
    assert "CPU-scale" in fig._suptitle.get_text() and "cpu-test" in fig._suptitle.get_text()
    data = fig.bubble_data.set_index("attention")
    assert data.loc["linear", "x"] == pytest.approx(40.0)
    assert (tmp_path / "bubble.png").stat().st_size > 10_000 and (tmp_path / "bubble.svg").exists()
    plt.close(fig)


def test_bubble_chart_ratio_x_params_size_and_paper_overlay(runs, store):
    t, _ = table1(runs, "cpu")
    cells = load_cells(store / "bench")
    fig = bubble_chart(t, cells, None, size="params", overlay_paper=True, x="speed_vs_softmax")
    ours, theirs = ours_and_paper(fig)
    xs = sorted(np.asarray(ours.get_offsets())[:, 0])
    assert xs == pytest.approx([1.0, 2.5, 4.0, 5.0])  # 0.5 s / 0.2, 0.125, 0.1 s per step
    data = fig.bubble_data[fig.bubble_data.source == "ours"]
    np.testing.assert_allclose(np.asarray(ours.get_sizes()) / data.size_value.to_numpy(), MAX_AREA / 120_000)
    assert theirs is not None
    p_off = np.asarray(theirs.get_offsets())
    expected = {a: (paper.TABLE2_STEPS[a][-1] / paper.TABLE2_STEPS["softmax"][-1], paper.paper_lra_score(a))
                for a in paper.TABLE2_STEPS}
    assert len(p_off) == len(expected) == 9
    for (xv, yv), exp in zip(p_off, expected.values(), strict=True):
        assert (xv, yv) == pytest.approx(exp)
    assert np.all(theirs.get_facecolors()[:, 3] == 0)  # hollow
    mem = np.array([paper.TABLE2_MEMORY_GB[a][-1] for a in expected])
    np.testing.assert_allclose(theirs.get_sizes(), MAX_AREA * mem / mem.max())
    assert "performer (paper)" in {t.get_text() for t in fig.axes[0].texts}
    plt.close(fig)


def test_later_work_rows_average_as_printed_and_are_drawn_apart_from_the_paper(runs, store):
    for name, row in paper.LATER_WORK.items():
        assert len(row.scores) == len(paper.LATER_TASKS) == 6
        assert round(sum(row.scores) / 6, 2) == pytest.approx(row.avg6, abs=0.006), name
        assert "https://arxiv.org/abs/" in row.source, name
        assert row.attention is None or row.attention in list_attentions()
    t, _ = table1(runs, "cpu")
    fig = bubble_chart(t, load_cells(store / "bench"), None, overlay_paper=True)
    assert paper.LATER_WORK["S4D-LegS"].avg5 == pytest.approx(83.47)
    # the scores (46-58 %) and the paper's points (46-55 %) set the axis; the later work (83-86 %) is named above it,
    # in the order of its levels, not drawn: an annotation, not a limit
    ax = fig.axes[0]
    assert ax.get_ylim()[1] < min(r.avg5 for r in paper.LATER_WORK.values())
    assert not [ln for ln in ax.lines if ln.get_gid() == "later"]
    note = next(x.get_text() for x in ax.texts if x.get_gid() == "above")
    levels = sorted(((r.avg5, name) for name, r in paper.LATER_WORK.items()), reverse=True)
    assert note == "↑ above the axis: later work " + ", ".join(f"{name} {y:.1f}" for y, name in levels)
    plt.close(fig)
    # scores up there: the later work drawn as lines inside the axis, each named once at the left edge
    high = pd.Series({"softmax": 85.0, "linear": 80.0, "local": 88.0, "performer": 84.0})
    fig = bubble_chart(high, load_cells(store / "bench"), None, overlay_paper=True)
    ax = fig.axes[0]
    lines = [ln for ln in ax.lines if ln.get_gid() == "later"]
    assert sorted(ln.get_ydata()[0] for ln in lines) == pytest.approx(sorted(r.avg5 for r in paper.LATER_WORK.values()))
    names = {x.get_text() for x in ax.texts}
    assert {f"{name} {r.avg5:.1f} (later work)" for name, r in paper.LATER_WORK.items()} <= names
    assert not [x for x in ax.texts if x.get_gid() == "above"]
    plt.close(fig)
    plain = bubble_chart(t, load_cells(store / "bench"), None)
    assert not [ln for ln in plain.axes[0].lines if ln.get_gid() == "later"]
    plt.close(plain)


def test_popularity_csv_errors_and_use(runs, store, tmp_path):
    t, _ = table1(runs, "cpu")
    cells = load_cells(store / "bench")
    with pytest.raises(ValueError, match="needs popularity_csv"):
        bubble_chart(t, cells, None, size="popularity")
    with pytest.raises(ValueError, match="does not exist"):
        read_popularity(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("attention,count\nsoftmax,3\n")
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['value', 'source'\]"):
        read_popularity(bad)
    bad.write_text("attention,value,source\nsoftmax,lots,me\n")
    with pytest.raises(ValueError, match="positive number"):
        read_popularity(bad)
    good = tmp_path / "pop.csv"
    good.write_text("attention,value,source\nsoftmax,1000,made up\nlinear,250,made up\nlocal,100,made up\n")
    fig = bubble_chart(t, cells, None, size="popularity", popularity_csv=good)
    ours, _ = ours_and_paper(fig)
    np.testing.assert_allclose(sorted(ours.get_sizes()), sorted(MAX_AREA * np.array([1000, 250, 100]) / 1000))
    assert fig.bubble_omitted["performer"] == "no popularity value"
    plt.close(fig)


def test_bubble_chart_without_bench_cells_says_so(runs):
    t, _ = table1(runs, "cpu")
    with pytest.raises(ValueError, match="no model-mode benchmark cells"):
        bubble_chart(t, pd.DataFrame(), None)


def test_accuracy_plot(runs, tmp_path):
    fig = accuracy_plots(runs, tmp_path / "accuracy.png")
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 6  # 5 tasks + Path-X
    data = fig.accuracy_data.set_index(["attention", "task"])
    assert data.loc[("softmax", "listops"), "mean"] == pytest.approx(37.0)
    listops_ax = next(ax for ax in fig.axes if ax.get_title() == "ListOps")
    heights = sorted(p.get_height() for p in listops_ax.patches)
    assert heights == pytest.approx(sorted([37.0, 17.0, 16.0, 19.0, 38.0]))
    image_ax = next(ax for ax in fig.axes if ax.get_title() == "Image")
    assert "DIV" in {t.get_text() for t in image_ax.texts}
    assert (tmp_path / "accuracy.png").stat().st_size > 10_000
    plt.close(fig)


def run_report(*args, cwd=ROOT):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


def test_report_script_end_to_end(store, tmp_path, report_script):
    """The script itself, as a user runs it (the other report tests call its main() in-process)."""
    out = tmp_path / "out"
    res = run_report("--runs-dir", store / "runs", "--bench-dir", store / "bench", "--out", out, "--overlay-paper",
                     "--profile", "cpu")
    assert res.returncode == 0, res.stderr
    for name in ("table1.md", "table1.csv", "table2_model.md", "table2_model.csv", "table2_attention.md",
                 "scaling_model.png", "bubble.png", "bubble.svg", "bubble.csv", "accuracy.png", "REPORT.md"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    report = (out / "REPORT.md").read_text()
    assert "python scripts/report.py --runs-dir" in report and "--overlay-paper" in report
    for link in ("bubble.png", "accuracy.png", "scaling_model.png"):
        assert f"]({link})" in report
    assert "54.60" in report and "reformer (OOM at N=4096)" in report
    assert "softmax" in (out / "table1.md").read_text()
    bubble = pd.read_csv(out / "bubble.csv")
    assert set(bubble.source) == {"ours", "paper"}
    assert "**Rank reliability**" in report and "| [0, 1] " in report  # 2 seeds: one split, seed 0 against seed 1
    res = report_script("--runs-dir", store / "runs", "--bench-dir", store / "bench", "--out", out, "--reference",
                        "sofmax")
    assert res.returncode == 2 and "--reference 'sofmax': no record of that attention" in res.stderr
    assert "did you mean 'softmax'?" in res.stderr


def test_one_task_beside_the_paper_and_its_chart(store, tmp_path, report_script):
    """The GPU ListOps path (issue 13): one task's column against the paper's, and a chart whose y is that task."""
    out = tmp_path / "out"
    res = report_script("--runs-dir", store / "runs", "--bench-dir", store / "bench", "--out", out, "--overlay-paper",
                        "--profile", "cpu", "--score-task", "listops")
    assert res.returncode == 0, res.stderr
    rows = pd.read_csv(out / "table1_listops_vs_paper.csv").set_index("attention")
    ours = {a: sum(accs["listops"]) * 50 for a, accs in ACCS.items()}  # mean of the two seeds, in %
    for att, mean in ours.items():
        assert rows.loc[att, "ours_mean"] == pytest.approx(mean)
        assert rows.loc[att, "paper"] == paper.TABLE1[att][0]
        assert rows.loc[att, "diff"] == pytest.approx(mean - paper.TABLE1[att][0])
    order = sorted(ours, key=ours.get)  # ranks: ours vs the paper's ListOps column
    theirs = sorted(ours, key=lambda a: paper.TABLE1[a][0])
    rho = 1 - 6 * sum((order.index(a) - theirs.index(a)) ** 2 for a in ours) / (5 * (25 - 1))
    assert rows["rank_agreement"].iloc[0] == pytest.approx(rho)
    md = (out / "table1_listops_vs_paper.md").read_text()
    assert f"Spearman rank agreement over them: {rho:.2f}" in md and "+0.63" in md  # softmax 37.00 vs 36.37
    assert "5 of its 11 rows have a result here (missing: bigbird, linformer, longformer, sinkhorn, strided, " \
           "synthesizer)" in md
    bubble = pd.read_csv(out / "bubble.csv")
    mine = bubble[bubble.source == "ours"].set_index("attention")
    assert mine.loc["softmax", "y"] == pytest.approx(ours["softmax"])
    theirs_pts = bubble[bubble.source == "paper"].set_index("attention")
    assert theirs_pts.loc["performer", "y"] == paper.TABLE1["performer"][0]
    assert "ListOps test accuracy (%)" in (out / "bubble.svg").read_text()


def test_report_script_with_nothing_to_report(tmp_path, report_script):
    out = tmp_path / "out"
    (tmp_path / "none").mkdir()  # issue 40: nothing to report is an error, not an empty REPORT.md
    res = report_script("--runs-dir", tmp_path / "none", "--bench-dir", tmp_path / "none", "--out", out)
    assert res.returncode == 1 and "nothing to report" in res.stderr, res.stderr
    assert not (out / "REPORT.md").exists()
    res = report_script("--size", "popularity", "--out", out)
    assert res.returncode == 2 and "popularity_csv" in res.stderr


def test_report_script_records_without_bench_cells_draws_the_chart_from_the_records(store, tmp_path, report_script):
    out = tmp_path / "out"
    res = report_script("--runs-dir", store / "runs", "--bench-dir", tmp_path / "none", "--out", out)
    assert res.returncode == 0, res.stderr
    assert (out / "table1.md").is_file() and (out / "bubble.png").is_file()
    assert "no benchmark cells" in res.stderr and not (out / "table2_model.md").exists()
    svg = (out / "bubble.svg").read_text()
    assert "the sweep's own training runs" in svg and "not LRA's 4K benchmark protocol" in svg
    assert "training the task-" in svg  # the x axis names the model and length it comes from
    assert "Speed and memory: the runs' own training throughput" in (out / "REPORT.md").read_text()


def test_notebook_runs_on_the_fixture(store, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = ROOT / "notebooks" / "results.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    monkeypatch.setenv("LRA_REPORT_DIR", str(store))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = "".join(str(o) for c in nb.cells for o in c.get("outputs", []))
    assert "54.60" in outputs  # Table 1 of the fixture
    assert f"showing {store} (LRA_REPORT_DIR)" in outputs  # it says which results it shows
    assert "image/png" in outputs  # the figures were drawn
    assert "Traceback" not in outputs


def test_validation_curves_from_the_records_evals(store, tmp_path):
    from lra_bench.reports.curves import val_curves

    for seed, (a, b) in enumerate([(0.30, 0.36), (0.32, 0.40)]):  # softmax on ListOps: two seeds, two evaluations
        rec = record("listops", "softmax", seed, acc=b, finished="2026-02-01T00:00")
        write(store / "runs", {**rec, "evals": [{"step": 50, "val_acc": a}, {"step": 100, "val_acc": b}]})
    with pytest.warns(UserWarning, match="skipped 2 unreadable"):
        df = load_runs(store / "runs")
    fig = val_curves(df, tmp_path / "val_curves.png", profile="cpu")
    data = fig.curve_data.set_index(["attention", "task", "step"])
    assert data.loc[("softmax", "listops", 100), "val_acc"] == pytest.approx(38.0)
    assert data.loc[("softmax", "listops", 50), "seeds"] == 2
    assert set(fig.curve_data.task) == {"listops"}  # the fixture's other records have no evaluations
    ax = fig.axes[0]
    assert ax.get_title() == "ListOps"
    assert fig._suptitle.get_text() == ("Validation accuracy during training, profile cpu, seeds 0, 1 (2 seeds per "
                                        "variant)")
    labels = [t.get_text() for t in fig.legends[0].texts]
    assert labels == ["mean over the seeds", "one seed", "majority class of the test set",
                      "paper's Transformer, test accuracy (Tay et al. 2020)"]
    names = [t.get_text() for t in fig.texts]  # the column of names beside the panel
    assert names.count("softmax") == 1  # one per variant
    # the curves span 30-40 %: the paper's 36.4 % is drawn and named, the 20 % majority rate is named at the edge
    assert ax.get_ylim()[0] > 20 and "paper Transformer (test) 36.4 %" in names
    assert "↓ majority class (test) 20.0 %" in names
    assert (tmp_path / "val_curves.png").stat().st_size > 10_000 and (tmp_path / "val_curves.svg").is_file()
    plt.close(fig)
    with pytest.raises(ValueError, match="no ok run with evaluations"):
        val_curves(df, profile="smoke")


def test_saved_figures_are_byte_stable(tmp_path):
    """The same figure saved twice gives the same PNG and SVG bytes: a curated report regenerated from unchanged
    records changes nothing in git (the SVG had a creation date and random element ids)."""
    import matplotlib.pyplot as plt

    from lra_bench.reports.figures import save_png_svg

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    first = save_png_svg(fig, tmp_path / "a" / "f.png", dpi=50)
    second = save_png_svg(fig, tmp_path / "b" / "f.png", dpi=50)
    plt.close(fig)
    for suffix in (".png", ".svg"):
        assert first.with_suffix(suffix).read_bytes() == second.with_suffix(suffix).read_bytes(), suffix


def test_the_notebook_shows_your_own_results_when_there_are_any_and_says_so(tmp_path):
    from lra_bench.reports.store import report_source

    runs, bench, line = report_source(tmp_path, {})
    assert (runs, bench) == (tmp_path / "results/cpu/runs", tmp_path / "results/cpu/bench")
    assert line.startswith(f"showing the curated CPU-scale set {tmp_path / 'results/cpu'}: there are no records")
    write(tmp_path / "results" / "runs", record("listops", "softmax", 0))
    runs, bench, line = report_source(tmp_path, {})
    assert (runs, bench) == (tmp_path / "results/runs", tmp_path / "results/bench")
    assert line.startswith("showing your own results")
    mine = tmp_path / "elsewhere"
    write(mine, record("listops", "softmax", 0))
    runs, _, line = report_source(tmp_path, {"LRA_RESULTS_DIR": str(mine)})
    assert runs == mine and str(mine) in line
    runs, bench, line = report_source(tmp_path, {"LRA_REPORT_DIR": str(tmp_path / "r"), "LRA_RESULTS_DIR": str(mine)})
    assert (runs, bench) == (tmp_path / "r/runs", tmp_path / "r/bench")
    assert line == f"showing {tmp_path / 'r'} (LRA_REPORT_DIR)"


def test_benchmark_cells_all_timed_busy_leave_the_chart_to_the_run_records(store, tmp_path, report_script,
                                                                           monkeypatch):
    """On a busy machine every benchmark cell is left out of the chart; the report then draws it from the run records'
    own speed and says why, instead of drawing nothing (and removing the records-based chart it drew before). The
    folders come from LRA_RESULTS_DIR / LRA_BENCH_DIR here: the regenerate command names them."""
    for path in (store / "bench").glob("cell*.json"):
        cell = json.loads(path.read_text())
        cell.pop("checksum")
        cell["machine"] = {"busy": True, "other_cores": 1.8, "usable_cores": 2, "threads": 2, "cpu": "test cpu"}
        path.write_text(json.dumps(signed(cell)))
    out = tmp_path / "out"
    monkeypatch.setenv("LRA_RESULTS_DIR", str(store / "runs"))
    monkeypatch.setenv("LRA_BENCH_DIR", str(store / "bench"))
    res = report_script("--out", out, "--profile", "cpu")
    assert res.returncode == 0, res.stderr
    report = (out / "REPORT.md").read_text()
    assert (f"python scripts/report.py --runs-dir {store / 'runs'} --bench-dir {store / 'bench'} --out {out} "
            "--profile cpu\n") in report
    assert "![LRA bubble chart](bubble.png)" in report and (out / "bubble.png").stat().st_size > 0
    assert f"The benchmark cells under `{store / 'bench'}` gave no point (" in report
    assert "other work used" in report and "Speed and memory: the runs' own training throughput" in report
    points = pd.read_csv(out / "bubble.csv")
    assert set(points[points.source == "ours"].attention) >= {"softmax", "linear"}
