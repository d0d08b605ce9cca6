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
  ``paper.LATER_WORK`` (S4D, S5, LRU, ...) as dotted horizontal lines at their five-task mean (gid ``"later"``):
  published accuracy without a speed measured like Table 2.

:func:`bubble_chart` returns the Figure; the plotted numbers are in ``fig.bubble_data`` (one row per circle:
source, attention, x, y, size_value, area) and the left-out attentions with reasons in ``fig.bubble_omitted``.
The "ours" and "paper" circles are the PathCollections whose gid is ``"ours"`` / ``"paper"``.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lra_bench.reports import paper
from lra_bench.reports.efficiency import with_ratios
from lra_bench.reports.figures import save_png_svg
from lra_bench.reports.noise import MARK, NOISY_IQR, busy
from lra_bench.reports.sweep_speed import LEFT_OUT
from lra_bench.reports.sweep_speed import SOURCE as FROM_RECORDS
from lra_bench.reports.table1 import SCORE_COLUMNS, TASK_LABELS, attention_color, attention_order, lra_scores

SIZES = ("memory", "params", "popularity")
XS = ("examples_per_s", "speed_vs_softmax")
MAX_AREA = 2400.0  # points^2 of the largest circle
SETTING = ["device", "profile", "batch"]
POINT_COLUMNS = ["attention", "x", "y", "n_tasks", "size_value", "x_lo", "x_hi", "y_lo", "y_hi", "tied", "seeds",
                 "seeds_max", "repeats", "noisy"]
FADED = 0.18  # alpha of the circles significantly below the best (when ties were tested)


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
    (attention, profile, score, n_tasks, params, score_lo, score_hi, tied, seeds; NaN / False where not given)."""
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
                         ("score_hi", np.nan), ("tied", False), ("seeds", np.nan)):
        if col not in out.columns:
            out[col] = default
    if "seeds_max" not in out.columns:  # one number of seeds per point (one task's score)
        out["seeds_max"] = out["seeds"]
    return out[SCORE_COLUMNS]


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


def _place_labels(ax, items: list[dict]) -> None:
    """Annotate each circle right of its edge, nudging labels up/down in steps until no two overlap."""
    fig = ax.figure
    to_px = ax.transData.transform
    pt = fig.dpi / 72.0
    placed: list[tuple[float, float, float, float]] = []
    for it in items:  # the circles themselves are obstacles too
        cx, cy = to_px((it["x"], it["y"]))
        r = math.sqrt(it["area"]) / 2 * pt
        placed.append((cx - r, cy - r, cx + r, cy + r))

    def overlaps(box):
        return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed)

    for it in sorted(items, key=lambda d: (-d["y"], d["x"])):
        x0, y0 = to_px((it["x"], it["y"]))
        dx = math.sqrt(it["area"]) / 2 + 3
        w, h = 0.62 * it["fontsize"] * len(it["text"]) * pt, 1.25 * it["fontsize"] * pt
        for dy in [0, *[s * k * it["fontsize"] * 1.2 for k in range(1, 12) for s in (-1, 1)]]:
            left, bottom = x0 + dx * pt, y0 + dy * pt - h / 2
            box = (left, bottom, left + w, bottom + h)
            if not overlaps(box):
                break
        placed.append(box)
        ax.annotate(it["text"], (it["x"], it["y"]), xytext=(dx, dy), textcoords="offset points", va="center",
                    fontsize=it["fontsize"], color=it.get("color", "black"), style=it.get("style", "normal"),
                    zorder=5, arrowprops={"arrowstyle": "-", "color": "gray", "lw": 0.5} if dy else None,
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.6, "edgecolor": "none"})


def bubble_data(scores, efficiency: pd.DataFrame | None, size: str = "memory", popularity_csv=None,
                x: str = "examples_per_s", profile: str | None = None) -> tuple[pd.DataFrame, dict, dict]:
    """The points of the chart (POINT_COLUMNS: x with the interquartile range x_lo..x_hi of the benchmark cell's
    timed steps, y with its 95 % interval y_lo..y_hi, tied with the best, seeds, the cell's repeats), the omitted
    attentions with reasons, and the setting used (profile, device, batch, n, task, ties_tested)."""
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
                     "y_hi": float(first["score_hi"]), "tied": bool(first["tied"]), "seeds": float(first["seeds"]),
                     "seeds_max": float(first["seeds_max"]),
                     "repeats": float(pd.to_numeric(cell.get("repeats"), errors="coerce")), "noisy": noisy})
    if popularity is not None:
        meta["popularity_source"] = sorted(set(pd.read_csv(popularity_csv)["source"].astype(str)))
    meta["ties_tested"] = bool(sc["tied"].astype(bool).any())
    return pd.DataFrame(rows, columns=POINT_COLUMNS), omitted, meta


def machine_text(cells: pd.DataFrame) -> str:
    """The machine the cells were timed on, as their ``machine`` fields name it ('' for cells without them)."""
    if "machine.cpu" not in cells.columns or cells["machine.cpu"].isna().all():
        return ""
    first = cells[cells["machine.cpu"].notna()].iloc[0]
    threads = int(first["machine.threads"])
    return (f"{first['machine.cpu']}, {int(first['machine.usable_cores'])} usable cores, {threads} "
            f"thread{'s' if threads != 1 else ''}")


def majority_rate(runs: pd.DataFrame, profile: str | None, score_task: str | None = None) -> float | None:
    """The chance line of the chart's score, in %: the test sets' majority-class rate of ``score_task``, or its mean
    over the tasks with records (what always guessing the commonest class would score on the LRA average)."""
    from lra_bench.reports.table1 import scored_runs

    kept = scored_runs(runs, profile)
    if kept.empty:
        return None
    per_task = kept.groupby("task")["test_majority_rate"].mean().dropna()
    if score_task is not None:
        per_task = per_task[per_task.index == score_task]
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


def _draw_later_work(ax, score_task: str | None) -> None:
    """Later work as dotted horizontal lines (gid "later"): published accuracy, but no speed measured like Table 2."""
    for name, y in later_work_levels(score_task):
        line = ax.axhline(y, color="teal", linestyle=":", linewidth=1.2, zorder=1)
        line.set_gid("later")
        ax.annotate(f"{name} {y:.1f} (later work)", xy=(0.005, y), xycoords=("axes fraction", "data"),
                    fontsize=7.5, color="teal", va="bottom")


def _title(meta: dict, device: str | None, score_task: str | None = None) -> str:
    device = device or str(meta.get("device", ""))
    scale = "CPU-scale" if "cpu" in device.lower() else "GPU-scale" if device else ""
    where = f"{scale} runs on {device}" if device else "this harness's runs"  # the layout of LRA's figure, not
    # a reproduction of its numbers (the README says so too)
    prof = f", profile {meta['scores_profile']}" if meta.get("scores_profile") else ""
    what = f" with {TASK_LABELS[score_task]} accuracy" if score_task else ""
    return f"LRA Figure 3 layout{what}, {where}{prof}"


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
    """Three lines: what the vertical bars are and how many seeds are behind them, the horizontal bars, and what the
    emphasis means."""
    what = f"{TASK_LABELS[score_task]} accuracy" if score_task else "LRA score"
    fewest, most = data["seeds"].dropna(), data.get("seeds_max", data["seeds"]).dropna()  # over tasks and points
    per = "" if score_task else " per task"
    wilson = "Wilson" + ("" if score_task else " per task, combined over the tasks")
    if fewest.empty:
        how = "seeds unknown"
    elif (lo := int(fewest.min())) == (hi := int(max(most.max(), fewest.max()))) == 1:
        how = f"1 seed{per}: test sampling only ({wilson})"
    elif lo > 1:
        how = (f"{lo} seeds{per}" if lo == hi else f"{lo} to {hi} seeds{per}") + ": Student t over seeds"
    else:
        how = f"1 to {hi} seeds{per}: Student t over seeds; where 1 seed, test sampling only ({wilson})"
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
                     "unreliable; " + ("rerun it on an idle machine" if meta.get("speed_source") != FROM_RECORDS
                                       else "time it with scripts/benchmark.py"))
    if meta.get("ties_tested"):
        lines.append(f"Bold circles: statistically tied with the best {what} (paired test over seeds and examples, "
                     "or Welch over seeds; Holm-corrected); faded: significantly below it.")
    else:
        lines.append(f"Ties with the best {what} not tested: a test needs 2 or more seeds per cell, so no circle is "
                     "emphasised.")
    return "\n".join(lines)


def bubble_chart(scores, efficiency: pd.DataFrame | None, path: Path | str | None = None, size: str = "memory",
                 popularity_csv: Path | str | None = None, overlay_paper: bool = False, x: str = "examples_per_s",
                 profile: str | None = None, title: str | None = None, device: str | None = None,
                 xscale: str = "auto", score_task: str | None = None, chance: float | None = None):
    """Draw the bubble chart; save ``path`` (PNG) and the SVG beside it when ``path`` is given.

    ``scores``: a Table 1 frame (:func:`lra_bench.reports.table1.table1`), a frame with attention, score
    [, n_tasks, params], or a Series/dict attention -> score. ``efficiency``: benchmark cells
    (:func:`lra_bench.reports.efficiency.load_cells`). ``score_task``: the scores are that one task's test
    accuracy (:func:`lra_bench.reports.task_vs_paper.task_scores`), not an LRA average; the axis and the paper's
    overlaid points say so. ``chance``: the majority-class rate (%) on the score's scale, drawn as a dashed line
    (``majority_rate`` computes it from the records). Raises ValueError when nothing can be plotted.
    """
    data, omitted, meta = bubble_data(scores, efficiency, size, popularity_csv, x, profile)
    if data.empty:
        why = "; ".join(f"{a}: {r}" for a, r in omitted.items()) or "no scores"
        raise ValueError(f"no attention has both an LRA score and an ok benchmark cell ({why})")
    scale = MAX_AREA / data["size_value"].max()
    data["area"] = data["size_value"] * scale
    data["source"] = "ours"
    names = attention_order(set(data.attention) | (set(paper.TABLE2_STEPS) if overlay_paper else set()))
    color = {a: attention_color(a) for a in names}

    fig, ax = plt.subplots(figsize=(12, 7))
    partial = (data["n_tasks"] < 5) & (score_task is None)  # "[k/5] tasks present" marks: LRA averages only
    ties = bool(meta["ties_tested"])  # tied with the best: full colour, bold edge; the rest faded
    face = [(*color[a][:3], (0.7 if t else FADED) if ties else 0.6) for a, t in zip(data.attention, data.tied,
                                                                                    strict=True)]
    ours = ax.scatter(data["x"], data["y"], s=data["area"], c=face, zorder=3,
                      edgecolors=["black" if t or not ties else "gray" for t in data.tied],
                      linewidths=[2.0 if t and ties else 0.8 for t in data.tied])
    ours.set_gid("ours")
    _error_bars(ax, data)
    labels = [{"x": r.x, "y": r.y, "area": r.area, "fontsize": 9,
               "text": (f"{MARK} " if r.noisy else "") + r.attention + (f" [{r.n_tasks}/5]" if part else "")
               + (" (model=ssm)" if r.attention in meta["ssm_block"] else "")}
              for r, part in zip(data.itertuples(), partial, strict=True)]
    frames = [data]
    if overlay_paper:
        pp = paper_points(x, score_task)
        pp["area"] = pp["size_value"] * (MAX_AREA / pp["size_value"].max())
        pp["source"] = "paper"
        theirs = ax.scatter(pp["x"], pp["y"], s=pp["area"], facecolors="none",
                            edgecolors=[color[a] for a in pp.attention], linewidths=1.6, linestyle="--", zorder=2)
        theirs.set_gid("paper")
        labels += [{"x": r.x, "y": r.y, "area": r.area, "fontsize": 8, "text": f"{r.attention} (paper)",
                    "color": "dimgray", "style": "italic"} for r in pp.itertuples()]
        frames.append(pp)
    plotted = pd.concat(frames, ignore_index=True).reindex(
        columns=["source", "attention", "x", "y", "n_tasks", "size_value", "area", "y_lo", "y_hi", "x_lo", "x_hi",
                 "seeds", "tied"])

    xs = plotted["x"].to_numpy(float)
    if xscale == "auto":
        xscale = "log" if xs.min() > 0 and xs.max() / xs.min() > 20 else "linear"
    ax.set_xscale(xscale)
    ys = pd.concat([plotted["y"], plotted["y_lo"], plotted["y_hi"], pd.Series([chance], dtype=float)]).dropna()
    ys = ys.to_numpy(float)
    if overlay_paper:
        ys = np.concatenate([ys, [y for _, y in later_work_levels(score_task)]])
    if chance is not None and math.isfinite(chance):
        ax.axhline(chance, ls="--", color="gray", lw=1, zorder=1, gid="chance")
        ax.annotate(f"majority-class rate {chance:.1f} % (always guessing the commonest class)", (0.005, chance),
                    xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points", fontsize=7.5,
                    color="dimgray", va="bottom")
    pad = max(2.0, 0.12 * (ys.max() - ys.min()))
    ax.set_ylim(ys.min() - pad, ys.max() + pad)
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
    elif partial.any():
        ax.set_ylabel("LRA score (%): mean test acc. over the 5 tasks;\n[k/5] = mean over the k tasks present only")
    else:
        ax.set_ylabel("LRA score (%): mean test accuracy over the 5 tasks")
    ax.grid(True, alpha=0.3)
    fig.suptitle(title or _title(meta, device, score_task), fontsize=12)
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
        _draw_later_work(ax, score_task)
        ax.add_artist(size_legend)
        ours_label = f"these runs ({meta['device']},\nbatch {batch}, N={n})"  # never two devices unlabelled
        kinds = [ax.scatter([], [], s=120, color="gray", alpha=0.6, edgecolors="black", label=ours_label),
                 ax.scatter([], [], s=120, facecolors="none", edgecolors="gray", linestyle="--",
                            label="LRA paper (TPU, N=4K,\nbatch 32; area ∝ its\n4K memory, own scale)"),
                 Line2D([], [], color="teal", linestyle=":", label="later work (published;\nno speed comparable)")]
        ax.legend(handles=kinds, loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8)
    fig.tight_layout(rect=(0, 0.12 if omitted else 0.09, 1, 1))
    _place_labels(ax, labels)
    fig.text(0.01, 0.045 if omitted else 0.01, caption(data, meta, score_task), fontsize=7.5, va="bottom")
    if omitted:
        note = "not plotted: " + "; ".join(f"{a} ({r})" for a, r in omitted.items())
        fig.text(0.01, 0.01, note, fontsize=7, color="dimgray", wrap=True)
    fig.bubble_data = plotted
    fig.bubble_omitted = omitted
    fig.bubble_meta = meta
    if path is not None:
        save_png_svg(fig, path, dpi=120)
        plotted.to_csv(path.with_suffix(".csv"), index=False)
    return fig
