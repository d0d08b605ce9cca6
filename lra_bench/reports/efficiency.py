"""LRA Table 2 from benchmark cells: steps/s and peak memory against length, ratios to softmax (the paper's
baseline) and to flash (exact attention on fused kernels, the baseline a GPU user has), the length at which each
variant overtakes flash, fitted log-log exponents with their 95 % intervals (over >= 3 lengths, refused with the
reason below that), the paper's numbers beside ours, and the rank agreement with the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy import stats

from lra_bench.reports import paper
from lra_bench.reports.figures import mixer_color, save_png_svg
from lra_bench.reports.labels import COLUMN_GAP_PT, column, column_height_pt, text_size
from lra_bench.reports.noise import BUSY_MARK, MARK, NOISY_IQR, busy_note, noise_note, rerun_command, with_noise
from lra_bench.reports.store import flatten, read_json_tree

GROUP = ["device", "profile", "batch", "mode", "block"]  # block: the model's, "transformer" or "ssm" (model=ssm)


def load_cells(bench_dir: Path) -> pd.DataFrame:
    rows, _ = read_json_tree(bench_dir)
    df = flatten(rows)
    if df.empty:
        return df
    df["block"] = df["block"].fillna("transformer") if "block" in df.columns else "transformer"  # older cells
    df = df.sort_values("created_at").drop_duplicates(["attention", *GROUP, "n"], keep="last")
    ok = df["status"] == "ok"
    df["steps_per_s"] = np.where(ok, 1.0 / df.get("median_s", np.nan), np.nan)
    df["memory_bytes"] = np.where(ok, df.get("peak_delta_bytes", np.nan), np.nan)
    return df.reset_index(drop=True)


MIN_LENGTHS = 3  # an exponent is fitted over at least this many lengths: two points always lie on a line


@dataclass(frozen=True)
class Exponent:
    """The slope b of log(value) = a + b log(n) with its 95 % interval (Student t, lengths - 2 degrees of freedom),
    or NaN with the reason it was not fitted (``why``)."""

    value: float
    lo: float
    hi: float
    lengths: int
    why: str = ""

    def text(self) -> str:
        """"2.03 [1.60, 2.47]", or "- (2 lengths; needs >= 3)"."""
        return f"{self.value:.2f} [{self.lo:.2f}, {self.hi:.2f}]" if not self.why else f"- ({self.why})"


def fit_exponent(ns: np.ndarray, values: np.ndarray) -> Exponent:
    """Least squares of log(value) on log(n) over the finite, positive points at distinct lengths; refused (NaN,
    with the reason) with fewer than MIN_LENGTHS of them."""
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    keep = np.isfinite(values) & (values > 0)
    k = len(np.unique(ns[keep]))
    if k < MIN_LENGTHS:
        return Exponent(math.nan, math.nan, math.nan, k, f"{k} length{'s' if k != 1 else ''}; needs >= {MIN_LENGTHS}")
    fit = stats.linregress(np.log(ns[keep]), np.log(values[keep]))
    half = float(stats.t.ppf(0.975, int(keep.sum()) - 2) * fit.stderr)
    return Exponent(float(fit.slope), float(fit.slope) - half, float(fit.slope) + half, k)


BASELINES = ("softmax", "flash")  # ratio columns: the paper's baseline, and exact attention on fused kernels


def with_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Add speed and memory ratios to softmax and to flash measured in the same setting (device, profile, batch,
    mode, n; the baselines' Transformer block, also for model=ssm cells): ``speed_vs_softmax``,
    ``memory_vs_softmax``, ``speed_vs_flash``, ``memory_vs_flash`` (NaN where the baseline was not measured or did
    not run)."""
    out = df
    same = [g for g in GROUP if g != "block"]  # model=ssm cells are compared with the Transformer's baselines
    for name in BASELINES:
        base = df[(df.attention == name) & (df.get("block", "transformer") == "transformer")]
        base = base.set_index([*same, "n"])[["steps_per_s", "memory_bytes"]]
        base = base.rename(columns={"steps_per_s": f"{name}_steps_per_s", "memory_bytes": f"{name}_memory_bytes"})
        out = out.join(base, on=[*same, "n"])
        out[f"speed_vs_{name}"] = out["steps_per_s"] / out[f"{name}_steps_per_s"]
        out[f"memory_vs_{name}"] = out["memory_bytes"] / out[f"{name}_memory_bytes"]
    return out


def crossover(ns: np.ndarray, speed: np.ndarray, base: np.ndarray) -> tuple[float, str]:
    """Where a variant's steps/s overtakes the baseline's for good: (length, text).

    ``speed``/``base``: steps/s at the sorted lengths ``ns``, NaN where the cell did not run (OOM, timeout): a
    variant that did not run is slower, a baseline that did not run is slower than any variant that did. The
    length is interpolated log-log between the last measured length where the variant is slower and the first
    from which it stays faster. Returns (nan, "not up to N") when it is still slower at the longest length,
    (ns[0], "<= N") when it is faster everywhere.
    """
    ns = np.asarray(ns, float)
    ratio = np.where(np.isnan(speed), 0.0, np.where(np.isnan(base), np.inf, speed / np.where(np.isnan(base), 1, base)))
    faster = ratio > 1.0
    if len(ns) == 0 or not faster[-1]:
        return float("nan"), f"not up to {int(ns[-1]) if len(ns) else '?'}"
    i = len(faster) - int(np.argmin(faster[::-1])) if not faster.all() else 0  # first of the final run of True
    if i == 0:
        return float(ns[0]), f"<= {int(ns[0])}"
    lo, hi = ratio[i - 1], ratio[i]
    if lo <= 0 or not np.isfinite(hi):  # a cell that did not run: no interpolation
        return float(ns[i]), f"{int(ns[i - 1])}-{int(ns[i])}"
    t = -np.log(lo) / (np.log(hi) - np.log(lo))
    n_star = float(np.exp(np.log(ns[i - 1]) + t * (np.log(ns[i]) - np.log(ns[i - 1]))))
    return n_star, f"~{n_star:,.0f}"


def exponents(df: pd.DataFrame) -> pd.DataFrame:
    """Per attention and setting: the time and memory exponents (``time_exponent``, ``memory_exponent``: value or
    NaN) and the :class:`Exponent` behind each (``time_fit``, ``memory_fit``)."""
    rows = []
    for (attention, *group), g in df.groupby(["attention", *GROUP]):
        time = fit_exponent(g.n, g.median_s.where(g.status == "ok"))
        memory = fit_exponent(g.n, g.memory_bytes)
        rows.append({"attention": attention, **dict(zip(GROUP, group, strict=True)), "time_exponent": time.value,
                     "memory_exponent": memory.value, "time_fit": time, "memory_fit": memory})
    return pd.DataFrame(rows)


def spearman(a: pd.Series, b: pd.Series) -> float:
    """Spearman rank correlation (average ranks for ties) of two aligned series; NaN (undefined) with fewer than 3
    shared rows or when either side is constant (every rank tied)."""
    both = pd.concat([a, b], axis=1).dropna()
    ranks = both.rank()
    if len(both) < 3 or (ranks.nunique() < 2).any():
        return float("nan")
    return float(np.corrcoef(ranks.iloc[:, 0], ranks.iloc[:, 1])[0, 1])


def rank_text(rho: float) -> str:
    """A rank correlation for prose: two decimals, or why it is undefined."""
    return f"{rho:.2f}" if np.isfinite(rho) else "undefined (fewer than 3 shared rows, or one side all tied)"


def cell_text(row: pd.Series, value: str, ratios: list[str], fmt: str, noisy: bool = False,
              busy: bool = False) -> str:
    """"value (r1x / r2x)" for an ok cell (a ratio with no baseline shows as "-"), the status otherwise."""
    if row["status"] != "ok":
        return str(row["status"]).upper()
    shown = " / ".join("-" if pd.isna(row[r]) else f"{row[r]:.2f}x" for r in ratios)
    return f"{row[value]:{fmt}} ({shown})" + (f" {MARK}" if noisy else "") + (f" {BUSY_MARK}" if busy else "")


FLASH_CPU_NOTE = ("`flash` on a CPU: in training with attention dropout (`attention.attn_dropout` > 0, LRA's 0.1) no "
                  "fused CPU kernel applies, so `scaled_dot_product_attention` runs its math kernel and builds the "
                  "N x N matrix like `softmax` (a run warns once); `attention.attn_dropout=0.0` keeps the fused kernel "
                  "(`python tools/bench_flash.py` measures both).\n")


def flash_note(cells: pd.DataFrame, setting: dict) -> str:
    """The footnote of a CPU table with a ``flash`` row: its dropout falls back to the unfused kernel."""
    return FLASH_CPU_NOTE if str(setting["device"]).startswith("cpu") and (cells.attention == "flash").any() else ""


def table2(df: pd.DataFrame, mode: str = "model") -> tuple[pd.DataFrame, str]:
    """Table 2 layout for one mode: steps/s and memory per length, ratios, exponents, paper columns."""
    sub = with_noise(with_ratios(df[df["mode"] == mode]))
    if sub.empty:
        return pd.DataFrame(), f"(no {mode} cells)"
    exps = exponents(sub).set_index(["attention", *GROUP])
    blocks = []
    for keys, g in sub.groupby(GROUP):
        setting = dict(zip(GROUP, keys, strict=True))
        longest = g.n.max()
        has_flash = (g.attention == "flash").any()
        speed_ratios = ["speed_vs_softmax", "speed_vs_flash"] if has_flash else ["speed_vs_softmax"]
        memory_ratios = ["memory_vs_softmax", "memory_vs_flash"] if has_flash else ["memory_vs_softmax"]
        flash_speed = g[g.attention == "flash"].set_index("n")["steps_per_s"]
        lines = []
        for attention, a in g.sort_values("n").groupby("attention"):
            row = {"attention": attention}
            for _, r in a.iterrows():
                row[f"steps/s N={r.n}"] = cell_text(r, "steps_per_s", speed_ratios, ".3g", bool(r.noisy), bool(r.busy))
            for _, r in a.iterrows():
                mib = r.copy()
                mib["memory_mib"] = r["memory_bytes"] / 2**20 if r["status"] == "ok" else np.nan
                row[f"peak MiB N={r.n}"] = cell_text(mib, "memory_mib", memory_ratios, ".0f")
            if has_flash:
                both = a.set_index("n")["steps_per_s"].to_frame("v").join(flash_speed.rename("f"), how="inner")
                row["overtakes flash at N"] = ("" if attention == "flash"
                                               else crossover(both.index.to_numpy(), both.v.to_numpy(),
                                                              both.f.to_numpy())[1])
            e = exps.loc[(attention, *keys)]
            for name, fit in (("time exp.", e.time_fit), ("mem. exp.", e.memory_fit)):
                row[name] = round(fit.value, 2)
                row[f"{name} 95 %"] = "" if fit.why else f"[{fit.lo:.2f}, {fit.hi:.2f}]"
                row[f"{name} note"] = fit.why
            row["noisy timings at N"] = ", ".join(str(n) for n in a.n[a.noisy])  # IQR > NOISY_IQR x median
            steps = paper.TABLE2_STEPS.get(attention)
            base4k = paper.TABLE2_STEPS["softmax"][-1]
            row["paper steps/s 4K"] = f"{steps[-1]} ({steps[-1] / base4k:.1f}x)" if steps else ""
            mem = paper.TABLE2_MEMORY_GB.get(attention)
            row["paper GB 4K"] = mem[-1] if mem else ""
            row["_ours_longest"] = a.loc[a.n == longest, "steps_per_s"].squeeze() if (a.n == longest).any() else np.nan
            lines.append(row)
        t = pd.DataFrame(lines)
        ours = t.set_index("attention")["_ours_longest"]
        theirs = pd.Series({k: v[-1] for k, v in paper.TABLE2_STEPS.items()})
        rho = spearman(ours, theirs)
        t = t.drop(columns="_ours_longest").assign(**setting)
        blocks.append((setting, longest, rho, t, noise_note(g) + busy_note(g) + flash_note(g, setting)))
    md = []
    for setting, longest, rho, t, note in blocks:
        ratios = ("(x / x) = ratio to softmax / to flash at the same length; \"overtakes flash at N\" = the "
                  "length from which the variant is faster than flash, interpolated log-log between measured lengths"
                  if "overtakes flash at N" in t else "(x) = ratio to softmax at the same length")
        block = "" if setting["block"] == "transformer" else f", the `model={setting['block']}` block"
        md.append(f"**{mode}** mode, device `{setting['device']}`, profile `{setting['profile']}`{block}, batch "
                  f"{setting['batch']}. Steps/s = 1 / median step time; memory = peak growth over weights and "
                  f"inputs during a training step; {ratios}; exp. = the log-log slope against N with its 95 % "
                  f"interval (Student t, lengths - 2 degrees of freedom), fitted only over >= {MIN_LENGTHS} "
                  f"lengths. Spearman rank agreement of steps/s at N={longest} with the paper's 4K column: "
                  f"{rank_text(rho)}.\n")
        shown = t.drop(columns=[*GROUP, "noisy timings at N"])
        for name in ("time exp.", "mem. exp."):
            shown[name] = [f"{v:.2f} {ci}" if ci else f"- ({why})" for v, ci, why in
                           zip(t[name], t[f"{name} 95 %"], t[f"{name} note"], strict=True)]
            shown = shown.drop(columns=[f"{name} 95 %", f"{name} note"])
        shown.loc[t["noisy timings at N"] != "", "time exp."] = [
            f"{v} {MARK}" for v in shown.loc[t["noisy timings at N"] != "", "time exp."]]
        md.append(shown.to_markdown(index=False))
        md.append("")
        if note:
            md.append(note)
    return pd.concat([b[3] for b in blocks], ignore_index=True), "\n".join(md)


FONT = 7.0  # the names beside the panels
PANEL_W, LEFT, GAP, TOP, BOTTOM = 5.0, 0.8, 0.95, 0.75, 1.1  # inches: panel width and the margins around them
LOG_SPAN = 4.0  # a log y axis only when the panel's values span at least this factor


def scaling_plot(df: pd.DataFrame, path: Path, mode: str = "model") -> Path:
    """Time and memory against N per variant (log-2 x; log y where the values span >= LOG_SPAN), each line named
    beside its panel with its fitted exponent and 95 % interval (or why none was fitted: fewer than MIN_LENGTHS
    lengths), a red ring on each noisy timing, a black x where a variant overtakes flash (when flash was measured);
    the legend below the panels; model=ssm cells are their own lines, labelled. PNG (and SVG beside it)."""
    every = df[df["mode"] == mode].copy()
    ssm = every["block"] != "transformer"  # model=ssm cells: their own lines, labelled
    every["attention"] = every["attention"].where(~ssm, every["attention"] + " (model=" + every["block"] + ")")
    sub = with_noise(every[every.status == "ok"])
    exps = exponents(sub).groupby("attention").first()
    groups = sorted(sub.groupby("attention"), key=lambda kv: kv[0])
    texts = {a: (f"{a} {exps.loc[a].time_fit.text()}" + (f" {MARK}" if g.noisy.any() else ""),
                 f"{a} {exps.loc[a].memory_fit.text()}") for a, g in groups}
    probe = Figure().add_subplot()  # measures the names before the figure is laid out (not pyplot's: never shown)
    label_w = max([text_size(probe, t, FONT)[0] / probe.figure.dpi for pair in texts.values() for t in pair] or [1.0])
    col_w = COLUMN_GAP_PT / 72 + label_w + 0.1
    panel_h = max(3.8, column_height_pt(len(groups), FONT) / 72)
    fig = plt.figure(figsize=(LEFT + 2 * (PANEL_W + col_w) + GAP, TOP + panel_h + BOTTOM))
    w_in, h_in = fig.get_figwidth(), fig.get_figheight()
    axes = [fig.add_axes(((LEFT + i * (PANEL_W + col_w + GAP)) / w_in, BOTTOM / h_in, PANEL_W / w_in, panel_h / h_in))
            for i in range(2)]
    flash = every[every.attention == "flash"].set_index("n")["steps_per_s"]
    crossings = 0
    entries: list[list[dict]] = [[], []]
    for attention, g in groups:
        g = g.sort_values("n")
        if not flash.empty and attention != "flash":
            speed = every[every.attention == attention].set_index("n")["steps_per_s"]
            both = speed.to_frame("v").join(flash.rename("f"), how="inner").sort_index()
            n_star, _ = crossover(both.index.to_numpy(), both.v.to_numpy(), both.f.to_numpy())
            known = both.f.dropna()
            if np.isfinite(n_star) and n_star > both.index.min() and len(known) >= 2:  # crossing on flash's line
                log_n = np.log(known.index.to_numpy(float))
                t_star = np.exp(np.interp(np.log(n_star), log_n, np.log(1 / known.values)))  # flash's time there
                axes[0].scatter([n_star], [t_star], marker="x", s=70, color="black", zorder=6)
                crossings += 1
        color = mixer_color(attention.split(" (model=")[0])  # a model=ssm line in its mixer's colour
        style = dict(marker="o", ms=4, color=color, lw=2.5 if attention in BASELINES else 1.2)
        axes[0].plot(g.n, g.median_s, gid=attention, **style)
        axes[0].scatter(g.n[g.noisy], g.median_s[g.noisy], s=160, facecolors="none", edgecolors="red",
                        linewidths=1.5, zorder=5)
        memory = g.memory_bytes / 2**20
        axes[1].plot(g.n, memory, gid=attention, **style)
        for i, values in enumerate((g.median_s, memory)):
            last = values.dropna()
            if len(last):
                entries[i].append({"text": texts[attention][i], "color": color,
                                   "x": float(g.n[last.index[-1]]), "y": float(last.iloc[-1])})
    for ax, ylabel, values in zip(axes, ["median step time (s)", "peak memory growth (MiB)"],
                                  [sub.median_s, sub.memory_bytes / 2**20], strict=True):
        ax.set_xscale("log", base=2)
        v = values[np.isfinite(values) & (values > 0)]
        if len(v) and v.max() / v.min() >= LOG_SPAN:
            ax.set_yscale("log")
        ax.set_xlabel("sequence length N")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{ylabel.split(' (')[0]}: exponent [95 % interval] beside each line", fontsize=9)
    for ax, names in zip(axes, entries, strict=True):
        if names:
            column(ax, names, FONT)
    first = sub.iloc[0] if len(sub) else None
    setting = f", {first.device}, batch {first.batch}" if first is not None else ""
    lengths = sorted(sub.n.unique())
    span = f", {len(lengths)} lengths N = {lengths[0]}-{lengths[-1]}" if len(lengths) > 1 else ""
    fig.suptitle(f"Cost against length ({mode} mode{setting}{span}); exponent = log-log slope, fitted over >= "
                 f"{MIN_LENGTHS} lengths", y=1 - 0.2 / h_in, va="top")
    baselines = [b for b in BASELINES if b in texts]
    kinds = [Line2D([], [], color="dimgray", lw=2.5, marker="o", ms=4, label="thick: the baseline"
                    + "s" * (len(baselines) > 1) + " " + " and ".join(baselines))] if baselines else []
    if crossings:
        kinds.append(Line2D([], [], color="black", marker="x", ls="none", ms=8, label="x: where a variant overtakes "
                            "flash"))
    noisy = sub[sub.noisy]
    if not noisy.empty:
        kinds.append(Line2D([], [], color="red", marker="o", mfc="none", ls="none", ms=10, mew=1.5,
                            label=f"{MARK} red ring: noisy timing (interquartile range > {NOISY_IQR:.0%} of the "
                                  "median)"))
        fig.text(0.01, 0.01, f"{MARK} noisy timings: their exponents are unreliable. Re-run them:\n"
                 f"{rerun_command(noisy)}", fontsize=7, color="red")
    if kinds:
        fig.legend(handles=kinds, loc="lower center", ncol=len(kinds), fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 0.28 / h_in if not noisy.empty else 0.0))
    path = save_png_svg(fig, path, dpi=120)
    plt.close(fig)
    return path
