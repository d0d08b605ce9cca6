"""The report figures, read back from matplotlib after drawing: one palette for every plot and every mixer, titles that
name the seeds found, legends outside the axes, y limits fitted to the data (reference levels named, never limits),
the bubble chart's labels without overlap and its leaders without crossings (on the committed 25-mixer sweep), the
names beside the curves likewise, and exponents fitted over >= 3 lengths with their interval (refused, with the
reason, below that)."""

from __future__ import annotations

import itertools
import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text

from lra_bench.attention import list_attentions
from lra_bench.reports import efficiency, paper
from lra_bench.reports.accuracy_plots import accuracy_plots
from lra_bench.reports.bubble import bubble_chart, majority_rate
from lra_bench.reports.curves import val_curves
from lra_bench.reports.efficiency import load_cells, scaling_plot, table2
from lra_bench.reports.figures import PALETTE, SPARE, mixer_color, seeds_text
from lra_bench.reports.labels import stack
from lra_bench.reports.table1 import load_runs, table1
from tests.conftest import ROOT
from tests.test_report import record, signed, write

MIXERS = ("softmax", "linear", "performer")
SEEDS = (3, 7)
LISTOPS = {"softmax": (0.34, 0.38), "linear": (0.30, 0.33), "performer": (0.36, 0.37)}  # the paper: 36.37
TEXT = {"softmax": (0.52, 0.55), "linear": (0.50, 0.53), "performer": (0.54, 0.56)}  # the paper: 64.27, far above


def _store(root, seeds=SEEDS, lengths=(1024, 2048, 4096), memory=lambda n, p: 1e3 * n**p, tasks=("listops", "text")):
    """Records with evaluations (``tasks`` of listops, text; MIXERS x ``seeds``) and model-mode cells at ``lengths``."""
    for task, accs in (("listops", LISTOPS), ("text", TEXT)):
        if task not in tasks:
            continue
        for att, pair in accs.items():
            for i, seed in enumerate(seeds):
                acc = pair[i % 2]
                rec = record(task, att, seed, acc=acc)
                rec["evals"] = [{"step": 50, "val_acc": acc - 0.04}, {"step": 100, "val_acc": acc - 0.01},
                                {"step": 150, "val_acc": acc}]
                write(root / "runs", rec)
    bench = root / "bench"
    bench.mkdir(parents=True)
    for att in MIXERS:
        p = 2.0 if att == "softmax" else 1.0
        for n in lengths:
            t = 1e-7 * n**p
            cell = {"attention": att, "task": "text", "mode": "model", "n": n, "batch": 4, "device": "cpu-test",
                    "profile": "cpu", "status": "ok", "median_s": t, "q1_s": t * 0.98, "q3_s": t * 1.02,
                    "repeats": 5, "peak_delta_bytes": memory(n, p), "created_at": "2026-01-01T00:00:00"}
            (bench / f"{att}-{n}.json").write_text(json.dumps(signed(cell)))
    return root


@pytest.fixture
def store(tmp_path):
    return _store(tmp_path / "results")


@pytest.fixture(scope="module")
def curated():
    """The committed CPU sweep (25 mixers x 4 tasks x 3 seeds, its benchmark cells): the crowded case."""
    folder = ROOT / "results" / "cpu"
    runs = load_runs(folder / "runs")
    return runs, load_cells(folder / "bench"), table1(runs)[0]


def _captured(monkeypatch):
    """scaling_plot saves and closes its figure: keep it for the test."""
    kept = []
    real = efficiency.save_png_svg

    def keep(fig, path, dpi):
        kept.append(fig)
        return real(fig, path, dpi)

    monkeypatch.setattr(efficiency, "save_png_svg", keep)
    return kept


def _box(bbox):
    return (bbox.x0, bbox.y0, bbox.x1, bbox.y1)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(s, t) -> bool:
    """Segments s and t ((x0, y0), (x1, y1)) properly intersect or touch (an independent orientation test)."""
    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return 0 if abs(v) < 1e-9 else (1 if v > 0 else -1)

    def within(a, b, c):
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])

    (p, q), (r, u) = s, t
    o1, o2, o3, o4 = orient(p, q, r), orient(p, q, u), orient(r, u, p), orient(r, u, q)
    if o1 != o2 and o3 != o4:
        return True
    return any(o == 0 and within(a, b, c) for o, a, b, c in ((o1, p, q, r), (o2, p, q, u), (o3, r, u, p),
                                                             (o4, r, u, q)))


def _through(segment, box) -> bool:
    """The segment enters the box (sampled finely: an independent check)."""
    (x0, y0), (x1, y1) = segment
    return any(box[0] < x0 + (x1 - x0) * f < box[2] and box[1] < y0 + (y1 - y0) * f < box[3]
               for f in np.linspace(0, 1, 400))


# ------------------------------------------------------------------------------------------------------- palette


def test_every_mixer_has_its_own_colour_in_one_palette():
    names = [*list_attentions(), "mega", "mamba"]  # the 23 of the zoo and the two announced
    assert len(list_attentions()) >= 23
    missing = [n for n in names if n not in PALETTE]
    assert not missing, f"no colour for {missing}: add them to lra_bench/reports/figures.py PALETTE"
    assert len(set(PALETTE.values())) == len(PALETTE), "two mixers share a colour"
    assert all(mixer_color(n) == PALETTE[n] for n in names)
    assert not set(SPARE) & set(PALETTE.values())
    assert mixer_color("my_own_mixer") in SPARE and mixer_color("my_own_mixer") == mixer_color("my_own_mixer")


def test_every_plot_draws_each_mixer_in_its_palette_colour(store, monkeypatch, tmp_path):
    runs, cells = load_runs(store / "runs"), load_cells(store / "bench")
    want = {a: to_rgb(PALETTE[a]) for a in MIXERS}
    fig = accuracy_plots(runs)
    for ax in fig.axes:
        if ax.get_visible():
            names = [t.get_text() for t in ax.get_xticklabels()]
            assert [to_rgb(p.get_facecolor()) for p in ax.patches] == [want[a] for a in names]
    plt.close(fig)
    fig = val_curves(runs, profile="cpu")
    for ax in fig.axes:
        means = {ln.get_gid(): to_rgb(ln.get_color()) for ln in ax.lines if ln.get_gid() in want}
        assert means == want
    plt.close(fig)
    kept = _captured(monkeypatch)
    scaling_plot(cells, tmp_path / "scaling.png")
    for ax in kept[0].axes:
        assert {ln.get_gid(): to_rgb(ln.get_color()) for ln in ax.lines if ln.get_gid() in want} == want
    t, _ = table1(runs, "cpu")
    fig = bubble_chart(t, cells, None, profile="cpu", overlay_paper=True)
    ours = next(c for c in fig.axes[0].collections if c.get_gid() == "ours")
    data = fig.bubble_data[fig.bubble_data.source == "ours"]
    np.testing.assert_allclose(ours.get_facecolors()[:, :3], [want[a] for a in data.attention])
    theirs = next(c for c in fig.axes[0].collections if c.get_gid() == "paper")
    pp = fig.bubble_data[fig.bubble_data.source == "paper"]
    np.testing.assert_allclose(theirs.get_edgecolors()[:, :3], [to_rgb(PALETTE[a]) for a in pp.attention])
    plt.close(fig)


# --------------------------------------------------------------------------------------------------------- titles


def test_titles_name_the_seeds_found_in_the_records(store, tmp_path):
    assert [seeds_text(s) for s in ([0], [3, 7], [2, 0, 1], range(10))] == ["seed 0", "seeds 3, 7", "seeds 0, 1, 2",
                                                                            "seeds 0-9"]
    runs = load_runs(store / "runs")
    fig = accuracy_plots(runs)
    assert fig._suptitle.get_text() == "Test accuracy per task, profile cpu, seeds 3, 7 (2 per bar)"
    assert "bar: mean over the seeds" in [t.get_text() for t in fig.legends[0].texts]
    plt.close(fig)
    fig = val_curves(runs, profile="cpu")
    assert fig._suptitle.get_text() == ("Validation accuracy during training, profile cpu, seeds 3, 7 (2 seeds per "
                                        "variant)")
    plt.close(fig)
    one = load_runs(_store(tmp_path / "one", seeds=(5,)) / "runs")  # one seed: no "mean over seeds" anywhere
    fig = accuracy_plots(one)
    assert fig._suptitle.get_text() == "Test accuracy per task, profile cpu, seed 5 (1 per bar)"
    legend = [t.get_text() for t in fig.legends[0].texts]
    assert "bar: the seed's test accuracy" in legend and not any("mean" in x for x in legend)
    assert "error bar: 95 % interval with 1 seed: test sampling only (Wilson)" in legend
    plt.close(fig)
    fig = val_curves(one, profile="cpu")
    assert fig._suptitle.get_text().endswith("profile cpu, seed 5 (1 seed per variant)")
    assert [t.get_text() for t in fig.legends[0].texts][0] == "the seed's validation accuracy"
    plt.close(fig)
    single = load_runs(_store(tmp_path / "single", tasks=("listops",)) / "runs")  # one panel: the title still fits
    for fig in (accuracy_plots(single), val_curves(single, profile="cpu")):
        fig.canvas.draw()
        box = fig._suptitle.get_window_extent()
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width, fig._suptitle.get_text()
        plt.close(fig)


# -------------------------------------------------------------------------------------------------------- legends


def _legends_outside(fig):
    fig.canvas.draw()
    legends = fig.findobj(Legend)
    assert legends, "no legend"
    frames = [_box(ax.get_window_extent()) for ax in fig.axes if ax.get_visible()]
    for legend in legends:
        box = _box(legend.get_window_extent())
        assert not any(_overlap(box, f) for f in frames), f"a legend covers an axes: {box} vs {frames}"


def test_every_legend_and_name_column_sits_outside_the_axes(store, monkeypatch, tmp_path):
    runs, cells = load_runs(store / "runs"), load_cells(store / "bench")
    for fig in (accuracy_plots(runs), val_curves(runs, profile="cpu"),
                bubble_chart(table1(runs, "cpu")[0], cells, None, profile="cpu", overlay_paper=True)):
        _legends_outside(fig)
        frames = [_box(ax.get_window_extent()) for ax in fig.axes if ax.get_visible()]
        for text in fig.texts:  # the names beside the curves, the caption
            assert not any(_overlap(_box(text.get_window_extent()), f) for f in frames), text.get_text()
        plt.close(fig)
    kept = _captured(monkeypatch)
    scaling_plot(cells, tmp_path / "scaling.png")
    _legends_outside(kept[0])


# ----------------------------------------------------------------------------------------------------- the y axis


def test_the_y_axis_holds_the_data_and_names_the_reference_levels_outside_it(store):
    runs, cells = load_runs(store / "runs"), load_cells(store / "bench")
    fig = val_curves(runs, profile="cpu")
    names = [t.get_text() for t in fig.texts]
    data = fig.curve_data
    for ax, task in zip(fig.axes, ("listops", "text"), strict=True):
        low, high = ax.get_ylim()
        values = [y for ln in ax.lines if ln.get_gid() in MIXERS for y in ln.get_ydata()]
        assert low <= min(values) and max(values) <= high
        assert high - low < 2 * (max(values) - min(values)) + 1  # fitted: the data fill most of the axis
        assert set(data[data.task == task].val_acc) <= set(values)
    text_ax = fig.axes[1]  # text: 46-56 %, the paper's Transformer 64.27 % far above, the majority rate 20 % below
    assert text_ax.get_ylim()[1] < paper.paper_task_score("softmax", "text")
    assert not [ln for ln in text_ax.lines if ln.get_gid() == "paper"]
    assert "↑ paper Transformer (test) 64.3 %" in names and "↓ majority class (test) 20.0 %" in names
    listops_ax = fig.axes[0]  # ListOps 26-38 %: the paper's 36.37 % inside, drawn and named
    assert [ln.get_ydata()[0] for ln in listops_ax.lines if ln.get_gid() == "paper"] == [36.37]
    assert "paper Transformer (test) 36.4 %" in names
    plt.close(fig)

    fig = accuracy_plots(runs)
    for ax in (a for a in fig.axes if a.get_visible()):
        top = ax.get_ylim()[1]
        marks = [y for ln in ax.lines for y in ln.get_ydata()]  # seeds, the paper's ticks, the majority rate
        assert 0 == ax.get_ylim()[0] and max(marks + [p.get_height() for p in ax.patches]) <= top < 80
    plt.close(fig)

    t, _ = table1(runs, "cpu")
    chance = majority_rate(runs, "cpu")
    fig = bubble_chart(t, cells, None, profile="cpu", overlay_paper=True, chance=chance)
    ax, data = fig.axes[0], fig.bubble_data
    low, high = ax.get_ylim()
    assert low <= data[["y", "y_lo", "y_hi"]].min().min() and data[["y", "y_lo", "y_hi"]].max().max() <= high
    assert high < min(r.avg5 for r in paper.LATER_WORK.values()) and low > chance  # neither is a limit
    notes = {x.get_gid(): x.get_text() for x in ax.texts if x.get_gid() in ("above", "below")}
    below = f"↓ below the axis: majority-class rate {chance:.1f} % (always guessing the commonest class)"
    assert notes["below"] == below
    assert notes["above"].startswith("↑ above the axis: later work Mega 86.2, ")
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- label placement


def _check_labels(ax, n_points):
    """Every point labelled once; no two label texts overlap, none leaves the axes or covers a reference name; no
    two leaders cross and none runs through another label."""
    ax.figure.canvas.draw()
    labels = [a for a in ax.texts if isinstance(a, Annotation)]
    assert len(labels) == n_points
    boxes = [_box(Text.get_window_extent(a)) for a in labels]  # the text alone, not its leader
    frame = _box(ax.get_window_extent())
    for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
        assert not _overlap(a, b), f"{labels[i].get_text()!r} overlaps {labels[j].get_text()!r}"
    for label, box in zip(labels, boxes, strict=True):
        assert frame[0] <= box[0] and box[2] <= frame[2] and frame[1] <= box[1] and box[3] <= frame[3], \
            label.get_text()
    others = [_box(t.get_window_extent()) for t in ax.texts if not isinstance(t, Annotation)]
    assert not any(_overlap(a, b) for a in boxes for b in others)
    leaders = {}
    for i, a in enumerate(labels):
        if a.arrow_patch is not None:
            v = a.arrow_patch.get_path().vertices  # display coordinates
            leaders[i] = (tuple(v[0]), tuple(v[-1]))
    for (i, s), (j, t) in itertools.combinations(leaders.items(), 2):
        assert not _crosses(s, t), f"the leaders of {labels[i].get_text()!r} and {labels[j].get_text()!r} cross"
    for i, s in leaders.items():
        for j, box in enumerate(boxes):
            assert j == i or not _through(s, box), f"{labels[i].get_text()!r}'s leader runs through {labels[j]}"
    return labels, leaders


def test_bubble_labels_never_overlap_and_their_leaders_never_cross(curated):
    runs, cells, t1 = curated
    fig = bubble_chart(t1, cells, None, chance=majority_rate(runs, "quick", tasks=["listops", "text", "image"]))
    _check_labels(fig.axes[0], len(fig.bubble_data))
    plt.close(fig)
    # the notebook's chart: the paper's 9 points beside the 25, in the ratio to softmax
    fig = bubble_chart(t1, cells, None, overlay_paper=True, x="speed_vs_softmax")
    labels, leaders = _check_labels(fig.axes[0], len(fig.bubble_data))
    assert len(labels) == 25 + 9 and leaders  # crowded enough that some labels needed a leader
    for title in (fig._suptitle, fig.axes[0].title):  # the subtitle names the CPU model: it ran past the left edge
        box = title.get_window_extent()
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width, title.get_text()
    plt.close(fig)


def test_the_names_beside_the_curves_never_overlap_and_their_leaders_never_cross(curated, monkeypatch, tmp_path):
    runs, cells, _ = curated
    fig = val_curves(runs, profile="quick")
    kept = _captured(monkeypatch)
    scaling_plot(cells, tmp_path / "scaling.png")
    for figure in (fig, kept[0]):
        figure.canvas.draw()
        for ax in figure.axes:
            frame = ax.get_window_extent()
            column = [t for t in figure.texts if abs(t.get_window_extent().x0 - frame.x1 - 16 * figure.dpi / 72) < 2]
            assert len(column) >= 25
            boxes = [_box(t.get_window_extent()) for t in column]
            assert not any(_overlap(a, b) for a, b in itertools.combinations(boxes, 2))
        segments = []
        for line in (a for a in figure.artists if isinstance(a, Line2D)):  # the leaders, in figure fractions
            xy = figure.transFigure.transform(np.column_stack(line.get_data()))
            segments.append([(tuple(a), tuple(b)) for a, b in itertools.pairwise(xy)])
        assert len(segments) >= 2 * 23
        for s, t in itertools.combinations(segments, 2):
            # two curves that end at the same point (longformer's equal flash's) share a leader's start: not a crossing
            assert not any(_crosses(a, b) for a in s for b in t
                           if min(math.dist(p, q) for p in a for q in b) > 1e-6), (s, t)
    plt.close(fig)


def test_stack_keeps_order_room_and_targets():
    targets = [10.0, 50.0, 20.0, 90.0]
    assert stack(targets, [4, 4, 4, 4], 0, 100) == pytest.approx(targets)  # room enough: exactly at the targets
    got = stack([10.0, 11.0, 12.0], [6, 6, 6], 0, 100, gap=1)
    assert got == pytest.approx([4.0, 11.0, 18.0])  # least squares: spread evenly around the middle one
    got = stack([1.0, 1.0, 99.0], [10, 10, 10], 0, 100)
    assert got == pytest.approx([5.0, 15.0, 95.0])  # held inside [0, 100], in the input's order on ties
    with pytest.raises(ValueError, match="need 40 px"):
        stack([50.0] * 4, [10] * 4, 0, 30)


# ----------------------------------------------------------------------------------------------------- exponents


def test_exponents_need_three_lengths_and_come_with_their_interval(tmp_path, monkeypatch):
    # two lengths and 12-20 MiB of memory, as a first benchmark on a laptop
    two = load_cells(_store(tmp_path / "two", lengths=(1024, 2048),
                            memory=lambda n, p: (12 + 8 * (n - 1024) / 1024) * 2**20) / "bench")
    table, md = table2(two, "model")
    rows = table.set_index("attention")
    assert rows["time exp."].isna().all() and (rows["time exp. note"] == "2 lengths; needs >= 3").all()
    assert "| softmax " in md and "- (2 lengths; needs >= 3)" in md
    kept = _captured(monkeypatch)
    scaling_plot(two, tmp_path / "two.png")
    fig = kept[-1]
    names = [t.get_text() for t in fig.texts]
    assert "softmax - (2 lengths; needs >= 3)" in names
    time_ax, memory_ax = fig.axes
    assert memory_ax.get_yscale() == "linear"  # 12-20 MiB: no log axis over less than a factor of 4
    assert time_ax.get_yscale() == "log"  # softmax's quadratic time spans more
    three = load_cells(_store(tmp_path / "three") / "bench")
    table, md = table2(three, "model")
    rows = table.set_index("attention")
    assert rows.loc["softmax", "time exp."] == pytest.approx(2.0) and rows.loc["softmax", "time exp. 95 %"]
    scaling_plot(three, tmp_path / "three.png")
    names = [t.get_text() for t in kept[-1].texts]
    assert "softmax 2.00 [2.00, 2.00]" in names and "linear 1.00 [1.00, 1.00]" in names
    assert "fitted over >= 3 lengths" in kept[-1]._suptitle.get_text()
    for f in kept:
        plt.close(f)
