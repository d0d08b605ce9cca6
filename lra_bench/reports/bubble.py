"""The LRA Figure 3 bubble chart (shared/reference/LRA.md §2.4): x = speed at the benchmark's longest length,
y = LRA score, circle AREA ∝ a size (peak memory at that length, parameters, or a user-supplied popularity).

* x: ``examples_per_s`` = steps/s x batch of the model-mode benchmark cell (``results/bench``) at the longest
  length of the chosen benchmark setting, or ``speed_vs_softmax`` = steps/s / softmax's steps/s there.
* y: the 5-task LRA average of Table 1; when some tasks are missing, the mean over the tasks present (the
  point is labelled "[k/5]" and the axis label says so).
* size: ``memory`` (peak memory growth of that cell), ``params`` (median record params of the attention in
  the profile) or ``popularity`` (a CSV ``attention,value,source`` you supply; none is shipped).
* ``overlay_paper``: the paper's own points as hollow circles (x = 4K steps/s x 32 or its ratio to the
  Transformer, y = its Table 1 average, area ∝ its 4K memory on a scale of its own), and the later work of
  ``paper.LATER_WORK`` (S4D, S5, LRU, ...) at their five-task mean: published accuracy without a speed measured like
  Table 2.

The y axis is fitted to the plotted points and their intervals; reference levels (the majority-class rate, the later
work) are dotted lines (gid ``"chance"`` / ``"later"``) where they fall inside it and are named in a note at the edge
where they fall outside (gid ``"above"`` / ``"below"``): an annotation, never a limit. Colours: one per mixer, the
same in every figure (:data:`lra_bench.reports.figures.PALETTE`); labels placed without overlap and with leaders
that never cross (:func:`lra_bench.reports.labels.place`).

:func:`bubble_chart` returns the Figure; the plotted numbers are in ``fig.bubble_data`` (one row per circle:
source, attention, x, y, size_value, area) and the left-out attentions with reasons in ``fig.bubble_omitted``.
The "ours" and "paper" circles are the PathCollections whose gid is ``"ours"`` / ``"paper"``.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D

from lra_bench.reports import paper
from lra_bench.reports.detectable import caption_line
from lra_bench.reports.efficiency import with_ratios
from lra_bench.reports.figures import fitted_limits, mixer_color, save_png_svg
from lra_bench.reports.labels import PAD_PX, Label, place, stack, text_size
from lra_bench.reports.noise import MARK, NOISY_IQR, busy
from lra_bench.reports.sweep_speed import LEFT_OUT
from lra_bench.reports.sweep_speed import SOURCE as FROM_RECORDS
from lra_bench.reports.table1 import SCORE_COLUMNS, TASK_LABELS, attention_order, lra_scores

SIZES = ("memory", "params", "popularity")
XS = ("examples_per_s", "speed_vs_softmax")
MAX_AREA = 2400.0  # points^2 of the largest circle
HEIGHT, ROOMY_LABELS, HEIGHT_PER_LABEL = 7.0, 30, 0.25  # inches: a chart of more labels than fit in 7 grows taller
SETTING = ["device", "profile", "batch"]
POINT_COLUMNS = ["attention", "x", "y", "n_tasks", "size_value", "x_lo", "x_hi", "y_lo", "y_hi", "best", "p_rank1",
                 "collapsed", "seeds", "seeds_max", "repeats", "noisy", "same_as"]
CAPTION_WIDTH = 185  # characters of a caption line at 7.5 pt across the 12-inch figure
FADED = 0.18  # alpha of the circles outside the confidence set for the best (when it was computed)


def read_popularity(path: Path | str | None) -> pd.Series:
    """attention -> positive value from a CSV with columns attention,value,source; ValueError when unusable."""
    if path is None:
        raise ValueError("size='popularity' needs popularity_csv: a CSV with columns attention,value,source "
                         "(none is shipped; write your own, e.g. citation counts, and say where they come from)")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"popularity CSV {path} does not exist (expected columns attention,value,source)")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"popularity CSV {path} is not readable CSV: {e}") from e
    missing = [c for c in ("attention", "value", "source") if c not in df.columns]
    if missing:
        raise ValueError(f"popularity CSV {path} lacks column(s) {missing}; it has {list(df.columns)} "
                         "(expected attention,value,source)")
    if df.empty:
        raise ValueError(f"popularity CSV {path} has no rows")
    values = pd.to_numeric(df["value"], errors="coerce")
    bad = df.loc[values.isna() | (values <= 0), "attention"].tolist()
    if bad:
        raise ValueError(f"popularity CSV {path}: value must be a positive number; bad rows for {bad}")
    if df["attention"].isna().any():
        raise ValueError(f"popularity CSV {path}: empty attention name")
    dup = df.loc[df["attention"].duplicated(), "attention"].tolist()
    if dup:
        raise ValueError(f"popularity CSV {path}: attention listed twice: {dup}")
    return pd.Series(values.to_numpy(float), index=df["attention"].astype(str), name="popularity")


def _scores(scores, profile: str | None) -> pd.DataFrame:
    """Normalise ``scores`` (a Table 1 frame, a frame with attention+score, a Series or a dict) to SCORE_COLUMNS
    (attention, profile, score, n_tasks, params, score_lo, score_hi, best, p_rank1, seeds, collapsed, same_as; NaN /
    False / '' where not given), with the scores' ``attrs`` (tasks covered, left out, detectable gaps) when they
    have them."""
    if isinstance(scores, dict):
        scores = pd.Series(scores, dtype=float)
    if isinstance(scores, pd.Series):
        scores = pd.DataFrame({"attention": scores.index.astype(str), "score": scores.to_numpy(float), "n_tasks": 5,
                               "params": np.nan, "profile": profile})
    if "avg_present" in scores.columns:  # a Table 1 frame
        if profile is None and scores["profile"].nunique() > 1:
            from lra_bench.reports.table1 import PROFILE_RANK

            counts = scores.groupby("profile")["n_tasks"].sum()
            profile = sorted(counts.index, key=lambda p: (-counts[p], PROFILE_RANK.index(p)
                                                          if p in PROFILE_RANK else 99))[0]
        return lra_scores(scores, profile)
    out = scores.copy()
    for col, default in (("n_tasks", 5), ("params", np.nan), ("profile", profile), ("score_lo", np.nan),
                         ("score_hi", np.nan), ("best", False), ("p_rank1", np.nan), ("seeds", np.nan),
                         ("collapsed", 0), ("same_as", "")):
        if col not in out.columns:
            out[col] = default
    if "seeds_max" not in out.columns:  # one number of seeds per point (one task's score)
        out["seeds_max"] = out["seeds"]
    kept = out[SCORE_COLUMNS].copy()
    kept.attrs = dict(scores.attrs)
    return kept


def pick_setting(cells: pd.DataFrame, profile: str | None) -> dict | None:
    """The model-mode benchmark setting (device, profile, batch) to read speed from: the scores' profile if
    benchmarked, then the one covering most attentions, then the longest length."""
    model = cells[cells["mode"] == "model"] if "mode" in cells.columns else cells.iloc[0:0]
    if model.empty:
        return None
    stats = model.groupby(SETTING).agg(n_att=("attention", "nunique"), longest=("n", "max")).reset_index()
    stats["same_profile"] = stats["profile"] == profile
    best = stats.sort_values(["same_profile", "n_att", "longest"], ascending=False).iloc[0]
    return {k: best[k] for k in SETTING}


def _unit(vmax: float, size: str) -> tuple[str, float]:
    """The display unit (suffix, divisor) for values up to ``vmax``."""
    units = {"memory": (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)), "params": (("M", 1e6), ("k", 1e3))}
    for unit, div in units.get(size, ()):
        if vmax >= div:
            return unit, div
    return ("B", 1.0) if size == "memory" else ("", 1.0)


def _fmt_value(v: float, size: str, unit: tuple[str, float] | None = None) -> str:
    name, div = unit or _unit(v, size)
    sep = " " if size == "memory" else ""
    return f"{v / div:.3g}{sep}{name}"


def _nice(v: float) -> float:
    """v rounded to 1 significant digit (2 when the leading digit is 1)."""
    if v <= 0 or not math.isfinite(v):
        return v
    e = math.floor(math.log10(v))
    lead = v / 10**e
    return round(lead, 1 if lead < 2 else 0) * 10**e


def _reference_values(vmax: float, size: str) -> list[float]:
    """Three round values (in the display unit) for the size legend: about vmax, vmax/4, vmax/16."""
    _, div = _unit(vmax, size)
    return sorted({_nice(vmax / k / div) * div for k in (1, 4, 16)}, reverse=True)


def bubble_data(scores, efficiency: pd.DataFrame | None, size: str = "memory", popularity_csv=None,
                x: str = "examples_per_s", profile: str | None = None) -> tuple[pd.DataFrame, dict, dict]:
    """The points of the chart (POINT_COLUMNS: x with the interquartile range x_lo..x_hi of the benchmark cell's
    timed steps, y with its 95 % interval y_lo..y_hi, in the confidence set for the best and P(rank 1), collapsed
    runs, seeds, the cell's repeats), the omitted attentions with reasons, and the setting used (profile, device,
    batch, n, task, best_tested, and the scores' tasks / left_out / detectable / reference)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    if x not in XS:
        raise ValueError(f"x must be one of {XS}, got {x!r}")
    popularity = read_popularity(popularity_csv) if size == "popularity" else None
    sc = _scores(scores, profile)
    sc = sc[np.isfinite(sc["score"].astype(float))]
    profile = sc["profile"].iloc[0] if len(sc) and profile is None else profile
    cells = efficiency if efficiency is not None else pd.DataFrame()
    left_out = dict(cells.attrs.get(LEFT_OUT, {}))
    setting = pick_setting(cells, profile) if not cells.empty else None
    if setting is None:
        raise ValueError("no model-mode benchmark cells: run python scripts/benchmark.py (results/bench) first, or "
                         "draw speed from the run records (reports.sweep_speed.cells_from_runs)")
    from_records = "source" in cells.columns and bool((cells["source"] == FROM_RECORDS).all())
    sub = cells[(cells["mode"] == "model")]
    for k, v in setting.items():
        sub = sub[sub[k] == v]
    sub = with_ratios(sub)
    if "block" in sub.columns:  # one cell per attention: its Transformer-block cell, else its model=ssm one
        sub = sub.assign(_ssm=sub["block"] != "transformer").sort_values("_ssm", kind="stable")
        sub = sub.drop_duplicates(["attention", "n"], keep="first")
    longest = int(sub["n"].max())
    at = sub[sub["n"] == longest].set_index("attention")
    task = at["task"].dropna().iloc[0] if "task" in at.columns and at["task"].notna().any() else None
    meta = {**setting, "n": longest, "task": task, "scores_profile": profile, "size": size, "x": x,
            "speed_source": FROM_RECORDS if from_records else "benchmark", "busy_left_out": 0,
            "machine": machine_text(at), "ssm_block": sorted(at.index[at["_ssm"]]) if "_ssm" in at.columns else []}
    rows, omitted = [], {}
    busy_cells = busy(at)  # timed while other work used the cores: left out
    for att in attention_order(set(sc["attention"]) | set(at.index)):
        s = sc[sc["attention"] == att]
        if s.empty:
            omitted[att] = "no LRA score"
            continue
        if att not in at.index:
            omitted[att] = left_out.get(att) or (f"no ok run of task {task}" if from_records else
                                                 f"no benchmark cell at N={longest}")
            continue
        cell = at.loc[att]
        if cell["status"] != "ok":
            omitted[att] = f"{str(cell['status']).upper()} at N={longest}"
            continue
        if busy_cells.get(att, False):
            omitted[att] = (f"timed while other work used {cell['machine.other_cores']:.1f} of "
                            f"{cell['machine.usable_cores']:.0f} cores: re-run it on an idle machine")
            meta["busy_left_out"] += 1
            continue
        q1, q3 = (float(pd.to_numeric(cell.get(q), errors="coerce")) for q in ("q1_s", "q3_s"))
        if x == "examples_per_s":
            xv = float(cell["steps_per_s"]) * float(cell["batch"])
            per_s = float(cell["batch"])  # examples/s = batch / step seconds
        else:
            xv = float(cell["speed_vs_softmax"])
            if not math.isfinite(xv):
                omitted[att] = f"no ok softmax cell at N={longest} to divide by"
                continue
            per_s = xv / float(cell["steps_per_s"])  # the ratio = softmax's median step seconds / this cell's
        x_lo, x_hi = per_s / q3, per_s / q1  # the interquartile range of the timed steps, as speed
        noisy = bool((q3 - q1) / float(cell["median_s"]) > NOISY_IQR) if math.isfinite(q3 - q1) else False
        if size == "memory":
            sv = float(cell["memory_bytes"])
        elif size == "params":
            sv = float(s["params"].iloc[0])
        else:
            sv = float(popularity.get(att, np.nan))
        if not (math.isfinite(sv) and sv > 0):
            omitted[att] = f"no {size} value"
            continue
        first = s.iloc[0]
        rows.append({"attention": att, "x": xv, "y": float(first["score"]), "n_tasks": int(first["n_tasks"]),
                     "size_value": sv, "x_lo": x_lo, "x_hi": x_hi, "y_lo": float(first["score_lo"]),
                     "y_hi": float(first["score_hi"]), "best": bool(first["best"]),
                     "p_rank1": float(first["p_rank1"]), "collapsed": int(first["collapsed"]),
                     "seeds": float(first["seeds"]),
                     "seeds_max": float(first["seeds_max"]),
                     "repeats": float(pd.to_numeric(cell.get("repeats"), errors="coerce")), "noisy": noisy,
                     "same_as": str(first["same_as"]) if isinstance(first["same_as"], str) else ""})
    if popularity is not None:
        meta["popularity_source"] = sorted(set(pd.read_csv(popularity_csv)["source"].astype(str)))
    meta["best_tested"] = bool(sc["best"].astype(bool).any())
    meta.update({k: sc.attrs[k] for k in ("tasks", "left_out", "all_at_chance", "detectable", "reference")
                 if k in sc.attrs})
    return pd.DataFrame(rows, columns=POINT_COLUMNS), omitted, meta


def machine_text(cells: pd.DataFrame) -> str:
    """The machine the cells were timed on, as their ``machine`` fields name it ('' for cells without them)."""
    if "machine.cpu" not in cells.columns or cells["machine.cpu"].isna().all():
        return ""
    first = cells[cells["machine.cpu"].notna()].iloc[0]
    threads = int(first["machine.threads"])
    return (f"{first['machine.cpu']}, {int(first['machine.usable_cores'])} usable cores, {threads} "
            f"thread{'s' if threads != 1 else ''}")


def majority_rate(runs: pd.DataFrame, profile: str | None, score_task: str | None = None,
                  tasks: list[str] | None = None) -> float | None:
    """The chance line of the chart's score, in %: the test sets' majority-class rate of ``score_task``, or its mean
    over ``tasks`` (default: every task with records; pass the tasks the LRA score covers) -- what always guessing
    the commonest class would score on that average."""
    from lra_bench.reports.table1 import scored_runs

    kept = scored_runs(runs, profile)
    if kept.empty:
        return None
    per_task = kept.groupby("task")["test_majority_rate"].mean().dropna()
    if score_task is not None:
        per_task = per_task[per_task.index == score_task]
    elif tasks is not None:
        per_task = per_task[per_task.index.isin(tasks)]
    return float(100 * per_task.mean()) if len(per_task) else None


def paper_points(x: str = "examples_per_s", score_task: str | None = None) -> pd.DataFrame:
    """The paper's Figure 3 points: x from Table 2 at 4K, y = Table 1 average (or its ``score_task`` column),
    size = 4K memory (GB)."""
    base = paper.TABLE2_STEPS["softmax"][-1]
    rows = []
    for att in paper.TABLE2_STEPS:
        y = paper.paper_lra_score(att) if score_task is None else paper.paper_task_score(att, score_task)
        ex = paper.paper_examples_per_s_4k(att)
        if y is None or ex is None:
            continue
        xv = ex if x == "examples_per_s" else paper.TABLE2_STEPS[att][-1] / base
        rows.append({"attention": att, "x": xv, "y": y, "n_tasks": 5,
                     "size_value": paper.TABLE2_MEMORY_GB[att][-1] * 1e9})
    return pd.DataFrame(rows)


def later_work_levels(score_task: str | None = None) -> list[tuple[str, float]]:
    """(name, y) of the later-work rows (``paper.LATER_WORK``) on the chart's y axis: their five-task mean (Path-X
    left out, as the axis), or their ``score_task`` accuracy."""
    tasks = paper.LATER_TASKS
    return [(name, row.avg5 if score_task is None else row.scores[tasks.index(score_task)])
            for name, row in paper.LATER_WORK.items() if score_task is None or score_task in tasks]


REF_FONT = 7.5  # the names of the reference levels
NOTE_BOX = {"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "edgecolor": "none"}


def _draw_references(ax, values, references: list[dict], margin: float) -> list:
    """Fit the y axis to ``values`` (the plotted points and intervals) with ``margin`` pixels beyond them, then draw
    the reference levels (dicts: y, name, kind, color, ls, gid): a horizontal line where the level falls inside the
    axis, "name (kind)" at its left edge (stacked so that no two names overlap); the levels outside it named in one
    note per edge ("↑ above the axis: kind name, name, ..." gid "above"; "↓ below the axis: name (kind)" gid
    "below"), for which the axis keeps room.
    Call it once the layout is final; returns the boxes (display pixels) of every name and note drawn."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    frame = ax.get_window_extent()
    pt = ax.figure.dpi / 72.0
    note_h = text_size(ax, "↑", REF_FONT)[1] + 2 * PAD_PX

    def limits(top: float, bottom: float) -> tuple[float, float]:  # data per pixel such that the margins hold
        lo, hi = float(v.min()), float(v.max())
        span = max(hi - lo, 1.0)
        per_px = span / (frame.height - top - bottom)
        return lo - bottom * per_px, lo + span + top * per_px

    lo, hi = limits(margin, margin)
    above, below = any(r["y"] > hi for r in references), any(r["y"] < lo for r in references)
    lo, hi = limits(margin + note_h * above, margin + note_h * below)
    ax.set_ylim(lo, hi)
    outside = {"above": [r for r in references if r["y"] > hi], "below": [r for r in references if r["y"] < lo]}
    boxes, room = [], [frame.y0 + PAD_PX, frame.y1 - PAD_PX]
    for where, rows in outside.items():
        if not rows:
            continue
        top = where == "above"
        color = rows[0]["color"] if len({r["color"] for r in rows}) == 1 else "dimgray"
        rows = sorted(rows, key=lambda r: -r["y"])
        groups = {kind: [r["name"] for r in rows if r["kind"] == kind] for kind in dict.fromkeys(r["kind"]
                                                                                               for r in rows)}
        said = "; ".join(f"{names[0]} ({kind})" if len(names) == 1 else f"{kind} {', '.join(names)}"
                         for kind, names in groups.items())
        note = ax.text(0.005, 0.995 if top else 0.005, f"{'↑' if top else '↓'} {where} the axis: {said}",
                       transform=ax.transAxes, fontsize=REF_FONT, color=color, ha="left", va="top" if top else "bottom",
                       gid=where, zorder=6, bbox=NOTE_BOX)
        ext = note.get_window_extent()
        boxes.append((ext.x0 - 2 * pt, ext.y0 - 2 * pt, ext.x1 + 2 * pt, ext.y1 + 2 * pt))
        room[1 if top else 0] = boxes[-1][1] - PAD_PX if top else boxes[-1][3] + PAD_PX
    inside = [r for r in references if lo <= r["y"] <= hi]
    for r in inside:
        ax.axhline(r["y"], color=r["color"], linestyle=r["ls"], linewidth=1.1, zorder=1, gid=r["gid"])
    if inside:
        texts = [f"{r['name']} ({r['kind']})" for r in inside]
        sizes = [text_size(ax, t, REF_FONT) for t in texts]
        lines = [float(ax.transData.transform((0, r["y"]))[1]) for r in inside]
        centres = stack([y + h / 2 + 1 for y, (_, h) in zip(lines, sizes, strict=True)],  # just above its line
                        [h for _, h in sizes], room[0], room[1], gap=PAD_PX)
        x0 = frame.x0 + 0.005 * frame.width
        for r, text, (w, h), y in zip(inside, texts, sizes, centres, strict=True):
            ax.text(0.005, (y - frame.y0) / frame.height, text, transform=ax.transAxes, fontsize=REF_FONT,
                    color=r["color"], ha="left", va="center", zorder=6, bbox=NOTE_BOX)
            boxes.append((x0, y - h / 2, x0 + w, y + h / 2))
    return boxes


def _error_bar_boxes(ax, data: pd.DataFrame) -> list:
    """The error bars as thin boxes (display pixels): what a point's label should not cover."""
    half = 3 * ax.figure.dpi / 72.0
    to_px = ax.transData.transform
    boxes = []
    for r in data.itertuples():
        if math.isfinite(r.y_lo) and math.isfinite(r.y_hi):
            (x, lo), (_, hi) = to_px((r.x, r.y_lo)), to_px((r.x, r.y_hi))
            boxes.append((x - half, lo, x + half, hi))
        if math.isfinite(r.x_lo) and math.isfinite(r.x_hi):
            (lo, y), (hi, _) = to_px((r.x_lo, r.y)), to_px((r.x_hi, r.y))
            boxes.append((lo, y - half, hi, y + half))
    return boxes


def _seeds_text(data: pd.DataFrame, per: str) -> str:
    """"3 seeds per task" / "1 to 3 seeds per task" from the points' seed counts ('' when unknown)."""
    fewest = data["seeds"].dropna()
    most = data.get("seeds_max", data["seeds"]).dropna()
    if fewest.empty:
        return ""
    lo, hi = int(fewest.min()), int(max(most.max(), fewest.max()))
    return (f"{lo} seed{'s' if lo > 1 else ''}" if lo == hi else f"{lo} to {hi} seeds") + f" per {per}"


def _title(meta: dict, device: str | None, score_task: str | None = None, data: pd.DataFrame | None = None) -> str:
    device = device or str(meta.get("device", ""))
    scale = "CPU-scale" if "cpu" in device.lower() else "GPU-scale" if device else ""
    where = f"{scale} runs on {device}" if device else "this harness's runs"  # the layout of LRA's figure, not
    # a reproduction of its numbers (the README says so too)
    prof = f", profile {meta['scores_profile']}" if meta.get("scores_profile") else ""
    what = f" with {TASK_LABELS[score_task]} accuracy" if score_task else ""
    seeds = _seeds_text(data, "point" if score_task else "task") if data is not None else ""
    return f"LRA Figure 3 layout{what}, {where}{prof}" + (f", {seeds}" if seeds else "")


def _fit_title(fig, ax, rect: tuple[float, float, float, float]) -> None:
    """Wrap the axes' title until it lies inside the figure: it is centred on the axes, and a long machine name
    (the benchmark's CPU model) ran it past the figure's left edge; the layout is redone for the added lines."""
    title = ax.title
    lines = title.get_text().splitlines()
    width = max((len(line) for line in lines), default=0)
    renderer = fig.canvas.get_renderer()
    while width > 40:
        box = title.get_window_extent(renderer)
        if box.x0 >= 0 and box.x1 <= fig.bbox.width:
            return
        width = int(width * 0.9)
        title.set_text("\n".join(textwrap.fill(line, width) for line in lines))
        fig.tight_layout(rect=rect)


def _error_bars(ax, data: pd.DataFrame) -> None:
    """Vertical 95 % intervals of the score and horizontal interquartile ranges of the speed, where known."""
    y = data[np.isfinite(data["y_lo"]) & np.isfinite(data["y_hi"])]
    if len(y):
        ax.errorbar(y["x"], y["y"], yerr=[y["y"] - y["y_lo"], y["y_hi"] - y["y"]], fmt="none", ecolor="black",
                    elinewidth=1.0, capsize=3, zorder=4, gid="score_intervals")
    x = data[np.isfinite(data["x_lo"]) & np.isfinite(data["x_hi"])]
    if len(x):
        ax.errorbar(x["x"], x["y"], xerr=[x["x"] - x["x_lo"], x["x_hi"] - x["x"]], fmt="none", ecolor="dimgray",
                    elinewidth=1.0, capsize=3, zorder=4, gid="speed_iqr")


def caption(data: pd.DataFrame, meta: dict, score_task: str | None) -> str:
    """The caption's lines: what the vertical bars are and how many seeds are behind them, the horizontal bars,
    what the emphasis means, the detectable gap, the tasks left out of the score and the collapsed runs."""
    what = (f"{TASK_LABELS[score_task]} accuracy" if score_task else "mean accuracy" if meta.get("all_at_chance")
            else "LRA score")
    fewest, most = data["seeds"].dropna(), data.get("seeds_max", data["seeds"]).dropna()  # over tasks and points
    per = "" if score_task else " per task"
    wilson = "Wilson" + ("" if score_task else " per task, combined over the tasks")
    both = "over seeds and test examples"
    if fewest.empty:
        how = "seeds unknown"
    elif (lo := int(fewest.min())) == (hi := int(max(most.max(), fewest.max()))) == 1:
        how = f"1 seed{per}: test sampling only ({wilson})"
    elif lo > 1:
        how = (f"{lo} seeds{per}" if lo == hi else f"{lo} to {hi} seeds{per}") + f": {both}"
    else:
        how = f"1 to {hi} seeds{per}: {both}; where 1 seed, test sampling only ({wilson})"
    repeats = sorted({int(r) for r in data["repeats"].dropna()})
    reps = f"{repeats[0]}" if len(repeats) == 1 else f"{repeats[0]} to {repeats[-1]}" if repeats else "?"
    if meta.get("speed_source") == FROM_RECORDS:
        speed = ("Horizontal bars: interquartile range of the training speed over the seeds' runs."
                 if data["x_lo"].notna().any() else
                 "No horizontal bars: one run per variant, whose speed is one measurement (its timed training steps).")
    else:
        speed = (f"Horizontal bars: interquartile range of the speed over the benchmark cell's timed steps "
                 f"({reps} repeats).")
    lines = [f"Vertical bars: 95 % confidence interval of the {what} ({how}).", speed]
    if data["noisy"].astype(bool).any():
        lines.append(f"{MARK} noisy timing (interquartile range > {NOISY_IQR:.0%} of the median): its speed is "
                     "unreliable; " + ("re-time it with more repeats (Table 2's note says whether the machine "
                                        "was idle)" if meta.get("speed_source") != FROM_RECORDS
                                       else "time it with scripts/benchmark.py"))
    if meta.get("best_tested"):
        lines.append(f"Bold circles: in the 95 % confidence set for the best {what} (no other variant shown better "
                     "by one-sided paired tests, Hsu's comparisons with the best), i.e. they cannot be told apart from "
                     "the best at this power; faded: shown below another variant."
                     + (" Plain: not compared (fewer than 2 seeds on a task)." if data["p_rank1"].isna().any()
                        else ""))
    else:
        lines.append(f"No confidence set for the best {what}: a test needs 2 or more seeds per cell, so no circle "
                     "is emphasised.")
    tasks = [score_task] if score_task else meta.get("tasks", [])
    gaps = caption_line(meta.get("detectable", {}), meta.get("reference", "the reference"), tasks)
    if gaps:
        lines.append(gaps)
    if meta.get("all_at_chance") and not score_task:
        names = ", ".join(TASK_LABELS[t] for t in meta["left_out"])
        lines.append(f"Every variant is at chance on every task here ({names}): no LRA score ranks them; the score "
                     "axis is their mean test accuracy, beside the majority-class rate, and only speed and memory are "
                     "results.")
    elif meta.get("left_out") and not score_task:
        names = ", ".join(TASK_LABELS[t] for t in meta["left_out"])
        covered = ", ".join(TASK_LABELS[t] for t in meta.get("tasks", []))
        lines.append(f"{names}: every variant at chance, so left out of the LRA score (shown in Table 1); the score "
                     f"is the mean over {covered}.")
    if data.get("collapsed", pd.Series(dtype=float)).fillna(0).astype(int).any():
        lines.append("(k collapsed): k of the runs behind the score predicted one class or scored within their "
                     "interval of the majority-class rate.")
    return "\n".join(textwrap.fill(line, CAPTION_WIDTH, subsequent_indent="    ") for line in lines)


def bubble_chart(scores, efficiency: pd.DataFrame | None, path: Path | str | None = None, size: str = "memory",
                 popularity_csv: Path | str | None = None, overlay_paper: bool = False, x: str = "examples_per_s",
                 profile: str | None = None, title: str | None = None, device: str | None = None,
                 xscale: str = "auto", score_task: str | None = None, chance: float | None = None,
                 protocol: str | None = None):
    """Draw the bubble chart; save ``path`` (PNG) and the SVG beside it when ``path`` is given.

    ``scores``: a Table 1 frame (:func:`lra_bench.reports.table1.table1`), a frame with attention, score
    [, n_tasks, params], or a Series/dict attention -> score. ``efficiency``: benchmark cells
    (:func:`lra_bench.reports.efficiency.load_cells`). ``score_task``: the scores are that one task's test
    accuracy (:func:`lra_bench.reports.task_vs_paper.task_scores`), not an LRA average; the axis and the paper's
    overlaid points say so. ``chance``: the majority-class rate (%) on the score's scale, drawn as a dashed line
    (``majority_rate`` computes it from the records). ``protocol``: the training protocol of the scores (self-
    pretrained runs, ``reports.protocols``), named in the title; the speed stays the per-step training throughput,
    whatever the protocol. Raises ValueError when nothing can be plotted.
    """
    data, omitted, meta = bubble_data(scores, efficiency, size, popularity_csv, x, profile)
    if data.empty:
        why = "; ".join(f"{a}: {r}" for a, r in omitted.items()) or "no scores"
        raise ValueError(f"no attention has both an LRA score and an ok benchmark cell ({why})")
    scale = MAX_AREA / data["size_value"].max()
    data["area"] = data["size_value"] * scale
    data["source"] = "ours"
    n_labels = len(data) + (len(paper_points(x, score_task)) if overlay_paper else 0)
    fig, ax = plt.subplots(figsize=(12, HEIGHT + HEIGHT_PER_LABEL * max(0, n_labels - ROOMY_LABELS)))
    partial = (data["n_tasks"] < 5) & (score_task is None)  # "[k/5] tasks present" marks: LRA averages only
    common = partial.all() and data["n_tasks"].nunique() == 1  # every point the same k/5: said once, on the axis
    tested = bool(meta["best_tested"])  # in the confidence set for the best: full colour, bold edge; the rest faded
    # a variant left out of the set's comparisons (fewer than 2 seeds on a task: no P(rank 1)) is drawn plain, not
    # faded: it was not shown below anything
    shown = [tested and not math.isnan(p) for p in data.p_rank1.astype(float)]
    face = [(*to_rgb(mixer_color(a)), (0.7 if b else FADED) if c else 0.6)
            for a, b, c in zip(data.attention, data.best, shown, strict=True)]
    ours = ax.scatter(data["x"], data["y"], s=data["area"], c=face, zorder=3,
                      edgecolors=["black" if b or not c else "gray" for b, c in zip(data.best, shown, strict=True)],
                      linewidths=[2.0 if b and c else 0.8 for b, c in zip(data.best, shown, strict=True)])
    ours.set_gid("ours")
    _error_bars(ax, data)
    labels = [Label(r.x, r.y, (f"{MARK} " if r.noisy else "") + r.attention
                    + (f" [{r.n_tasks}/5]" if part and not common else "")
                    + (" (model=ssm)" if r.attention in meta["ssm_block"] else "")
                    + (f" ({r.collapsed} collapsed)" if r.collapsed else ""), radius=math.sqrt(r.area) / 2)
              for r, part in zip(data.itertuples(), partial, strict=True)]
    frames = [data]
    if overlay_paper:
        pp = paper_points(x, score_task)
        pp["area"] = pp["size_value"] * (MAX_AREA / pp["size_value"].max())
        pp["source"] = "paper"
        theirs = ax.scatter(pp["x"], pp["y"], s=pp["area"], facecolors="none",
                            edgecolors=[mixer_color(a) for a in pp.attention], linewidths=1.6, linestyle="--",
                            zorder=2)
        theirs.set_gid("paper")
        labels += [Label(r.x, r.y, f"{r.attention} (paper)", radius=math.sqrt(r.area) / 2, fontsize=8,
                         color="dimgray", style="italic") for r in pp.itertuples()]
        frames.append(pp)
    plotted = pd.concat(frames, ignore_index=True).reindex(
        columns=["source", "attention", "x", "y", "n_tasks", "size_value", "area", "y_lo", "y_hi", "x_lo", "x_hi",
                 "seeds", "best", "p_rank1", "collapsed", "same_as"])

    xs = plotted["x"].to_numpy(float)
    if xscale == "auto":
        xscale = "log" if xs.min() > 0 and xs.max() / xs.min() > 20 else "linear"
    ax.set_xscale(xscale)
    # y fitted to the points and their intervals; the reference levels are annotations, never limits
    ys = pd.concat([plotted["y"], plotted["y_lo"], plotted["y_hi"]]).to_numpy(float)
    ax.set_ylim(*fitted_limits(ys, pad=0.12))
    references = []
    if chance is not None and math.isfinite(chance):
        references.append({"y": chance, "name": f"majority-class rate {chance:.1f} %", "kind": "always guessing the "
                           "commonest class", "color": "dimgray", "ls": "--", "gid": "chance"})
    if overlay_paper:
        references += [{"y": y, "name": f"{name} {y:.1f}", "kind": "later work", "color": "teal", "ls": ":",
                        "gid": "later"} for name, y in later_work_levels(score_task)]
    if xscale == "linear":
        span = max(xs.max() - xs.min(), 0.1 * xs.max())
        ax.set_xlim(max(0.0, xs.min() - 0.15 * span), xs.max() + 0.35 * span)
    else:
        ax.set_xlim(xs.min() / 1.6, xs.max() * 2.5)
    n, batch = meta["n"], meta["batch"]
    where = (f"N={n}, training the task-{meta['task']} model of profile {meta['profile']}"
             if meta["speed_source"] == FROM_RECORDS else f"N={n}, benchmark model of profile {meta['profile']}")
    if x == "examples_per_s":
        ax.set_xlabel(f"Speed (examples per sec) = steps/s x batch {batch} at {where}")
    else:
        ax.set_xlabel(f"Speed relative to softmax at {where} (steps/s ratio)")
    if score_task is not None:
        ax.set_ylabel(f"{TASK_LABELS[score_task]} test accuracy (%)\n(this one task only, not an LRA average)")
    elif meta.get("all_at_chance"):
        covered = ", ".join(TASK_LABELS[t] for t in meta["left_out"])
        ax.set_ylabel(f"Mean test accuracy (%) over {covered}:\nevery variant at chance, not an LRA score")
    elif common and meta.get("tasks"):
        covered = ", ".join(TASK_LABELS[t] for t in meta["tasks"])
        ax.set_ylabel(f"LRA score (%): mean test accuracy over\n{covered} ({int(data['n_tasks'].iloc[0])}/5 tasks)")
    elif partial.any():
        ax.set_ylabel("LRA score (%): mean test acc. over the 5 tasks;\n[k/5] = mean over the k tasks present only")
    else:
        ax.set_ylabel("LRA score (%): mean test accuracy over the 5 tasks")
    ax.grid(True, alpha=0.3)
    fig.suptitle((title or _title(meta, device, score_task, data)) + (f", protocol {protocol}" if protocol else ""),
                 fontsize=12)
    task = f"task {meta['task']}, " if meta.get("task") else ""
    if meta["speed_source"] == FROM_RECORDS:
        ax.set_title(f"speed and memory: the sweep's own training runs, as recorded ({task}device {meta['device']}, "
                     f"profile {meta['profile']}, batch {batch}, N={n});\nnot LRA's 4K benchmark protocol",
                     fontsize=8.5)
    else:
        other = ("" if meta["profile"] == meta.get("scores_profile") else
                 f"\na different model from the profile-{meta.get('scores_profile')} runs the scores come from")
        machine = f" = {meta['machine']}" if meta.get("machine") else ""
        ax.set_title(f"speed and memory: model-mode benchmark ({task}device {meta['device']}{machine}, bench "
                     f"profile {meta['profile']}, batch {batch}, N={n}){other}", fontsize=8.5)

    in_training = ("" if meta["speed_source"] != FROM_RECORDS else "\nin training (record" + (
        ": the process's peak RSS)" if str(meta["device"]).startswith("cpu") else ")"))
    size_titles = {"memory": f"circle area ∝ peak memory\nat N={n}{in_training}", "params": "circle area ∝ "
                   "parameters\n(median over the tasks)", "popularity": "circle area ∝ popularity"}
    if size == "popularity" and meta.get("popularity_source"):
        size_titles["popularity"] += f"\n(source: {', '.join(meta['popularity_source'])})"
    vmax = data["size_value"].max()
    handles = [ax.scatter([], [], s=v * scale, facecolors="lightgray", edgecolors="black", label=_fmt_value(v, size))
               for v in _reference_values(vmax, size)]
    size_legend = ax.legend(handles=handles, title=size_titles[size], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                            labelspacing=2.4, borderpad=1.3, handletextpad=3.2, fontsize=8, title_fontsize=8)
    if overlay_paper:
        ax.add_artist(size_legend)
        ours_label = f"these runs ({meta['device']},\nbatch {batch}, N={n})"  # never two devices unlabelled
        kinds = [ax.scatter([], [], s=120, color="gray", alpha=0.6, edgecolors="black", label=ours_label),
                 ax.scatter([], [], s=120, facecolors="none", edgecolors="gray", linestyle="--",
                            label="LRA paper (TPU, N=4K,\nbatch 32; area ∝ its\n4K memory, own scale)"),
                 Line2D([], [], color="teal", linestyle=":", label="later work (published;\nno speed comparable)")]
        ax.legend(handles=kinds, loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8)
    text = caption(data, meta, score_task)
    line = 7.5 * 1.25 / 72 / fig.get_figheight()  # one caption line, as a fraction of the figure's height
    base = 0.035 if omitted else 0.01
    rect = (0, base + (text.count("\n") + 1) * line + 0.015, 1, 1)
    fig.tight_layout(rect=rect)
    _fit_title(fig, ax, rect)
    margin = (float(np.sqrt(plotted["area"].max())) / 2 + 6) * fig.dpi / 72  # the largest circle fits inside
    obstacles = _draw_references(ax, ys, references, margin)
    soft = _error_bar_boxes(ax, data)
    place(ax, labels, hard=obstacles, soft=soft)
    fig.text(0.01, base, text, fontsize=7.5, va="bottom")
    if omitted:
        note = "not plotted: " + "; ".join(f"{a} ({r})" for a, r in omitted.items())
        fig.text(0.01, 0.01, note, fontsize=7, color="dimgray", wrap=True)
    fig.bubble_data = plotted
    fig.bubble_omitted = omitted
    fig.bubble_meta = meta
    if path is not None:
        save_png_svg(fig, path, dpi=120)
        plotted.to_csv(Path(path).with_suffix(".csv"), index=False)
    return fig
