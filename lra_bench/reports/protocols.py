"""Reports by training protocol: which records make one Table 1, and what self-pretraining changes.

A record's protocol (``records.protocol_of``) is "scratch" or its pretraining objective ("mlm", "causal"). A scratch
run trained for exactly the steps of a pretrained run's pretraining plus its fine-tune, and otherwise configured as
it (same ``table1.pairing`` key), is that run's *compute-matched control*: it is reported under its own label,
``MATCHED``, so that neither it nor the pretrained runs ever share a Table 1 cell with the plain scratch runs.

``protocol_effects`` pairs, per profile, task and variant, each pretrained group (same config, its seeds) with the
scratch group of the same fine-tune budget and with its control, and gives the difference of mean test accuracy
with its 95 % interval from the harness's paired test (``significance.compare``: over seeds and test examples when
every record kept its predictions; over seeds alone otherwise). Holm's correction runs over each column's
comparisons. ``protocol_spread`` gives, per task and protocol, the best and the worst variant and the difference
between them, with its interval: how much the ranking spreads under each protocol. One result under several names
(:mod:`lra_bench.reports.same_predictions`: bigbird and longformer are flash at short lengths) is one comparison in
Holm's family and one variant in the spread's count.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from lra_bench.reports import significance as sig
from lra_bench.reports.chance import collapsed
from lra_bench.reports.same_predictions import drop_repeats, result_key
from lra_bench.reports.table1 import attention_order, task_cells
from lra_bench.reports.tasks import TASK_LABELS, TASKS
from lra_bench.stats.paired import holm_adjusted, p_value

SCRATCH = "scratch"
MATCHED = "scratch, compute-matched"  # scratch runs as long as a pretrained run's two phases together
ORDER = (SCRATCH, "mlm", "causal", MATCHED)
GROUP = ["profile", "attention", "task", "pair_key", "ft_steps", "pt_steps"]


def slug(label: str) -> str:
    """The file-name suffix of a protocol's outputs: "" for scratch (the files every report had), else a word."""
    return {SCRATCH: "", MATCHED: "matched"}.get(label, label)


def report_labels(runs: pd.DataFrame) -> pd.Series:
    """The report protocol of every row: its protocol, or ``MATCHED`` for a scratch run whose budget is a pretrained
    run's pretraining + fine-tune steps (same pair key) and no pretrained run's fine-tune alone."""
    labels = runs["protocol"].astype(str).copy()
    pre = runs[runs["protocol"] != SCRATCH]
    where = ["profile", "attention", "task", "pair_key"]
    totals = {(*k, float(t)) for k, t in zip(pre[where].itertuples(index=False, name=None),
                                             pre["ft_steps"] + pre["pt_steps"], strict=True)}
    fine_tunes = {(*k, float(t)) for k, t in zip(pre[where].itertuples(index=False, name=None), pre["ft_steps"],
                                                 strict=True)}
    for i, row in runs[runs["protocol"] == SCRATCH].iterrows():
        key = (row.profile, row.attention, row.task, row.pair_key, float(row.ft_steps))
        if key in totals and key not in fine_tunes:
            labels[i] = MATCHED
    return labels


def by_protocol(runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The runs split by report protocol (``report_labels``), in ``ORDER`` (others after, by name)."""
    if runs.empty:
        return {}
    labels = report_labels(runs)
    present = sorted(set(labels), key=lambda x: (ORDER.index(x) if x in ORDER else len(ORDER), x))
    return {label: runs[labels == label].reset_index(drop=True) for label in present}


def _groups(runs: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """The ok, non-synthetic runs by (profile, attention, task, pair_key, ft_steps, pt_steps, protocol), the latest
    record per seed."""
    ok = runs[(runs.status == "ok") & runs.test_acc.notna() & ~runs.synthetic.astype(bool)]
    ok = ok.sort_values(["finished_at", "path"], kind="stable").assign(_seed=ok.seed.astype(str))
    ok = ok.drop_duplicates([*GROUP, "protocol", "_seed"], keep="last")
    return {key: g.sort_values("_seed") for key, g in ok.groupby([*GROUP, "protocol"], sort=True)}


def _sample(g: pd.DataFrame | None) -> sig.Sample | None:
    return None if g is None else sig.sample((g.test_acc * 100).tolist(), g.predictions.tolist(),
                                                g.test_fingerprint.tolist())


def _result(g: pd.DataFrame | None, sample: sig.Sample | None) -> tuple | None:
    """The group's ``same_predictions.result_key`` (None: not known to be one result with any other group)."""
    if g is None:
        return None
    fell = any(collapsed(r.test_acc, r.test_examples, r.test_majority_rate, r.predictions) for r in g.itertuples())
    return result_key(sample, g._seed.tolist(), fell)


def _holm_distinct(p: np.ndarray, comparisons: list[tuple | None]) -> np.ndarray:
    """Holm-adjusted ``p`` where rows with one (not None) comparison key are one test: the family counts it once
    and each of its rows gets its adjusted p (one result under several names, ``same_predictions``)."""
    first: dict[tuple, int] = {}
    index = [first.setdefault(key, i) if key is not None else i for i, key in enumerate(comparisons)]
    tests = sorted(set(index))
    adjusted = dict(zip(tests, holm_adjusted(p[tests]), strict=True)) if tests else {}
    return np.array([adjusted[i] for i in index], dtype=float)


def _interval(result: tuple[float, float, float, str] | None, a: sig.Sample | None = None,
              b: sig.Sample | None = None) -> dict:
    """d, its 95 % interval and p from ``significance.compare``'s (d, se, df, method). Untestable (fewer than 2 seeds
    a side, or different test sets): the difference of the means ``a`` - ``b`` when both are given, with no interval
    and the reason as the method; NaNs without them."""
    if result is None:
        untested = {"lo": math.nan, "hi": math.nan, "p": math.nan}
        if a is None or b is None or not len(a.accs) or not len(b.accs):
            return {"d": math.nan, **untested, "method": ""}
        why = ("untested: fewer than 2 seeds a side" if min(len(a.accs), len(b.accs)) < 2
               else "untested: different test sets")
        return {"d": float(a.accs.mean() - b.accs.mean()), **untested, "method": why}
    d, se, df, method = result
    q = stats.norm.ppf(0.975) if math.isinf(df) else stats.t.ppf(0.975, df)
    return {"d": d, "lo": d - q * se, "hi": d + q * se, "p": float(p_value(d, se, df)), "method": method}


EFFECT_COLUMNS = ["profile", "task", "attention", "protocol", "ft_steps", "pt_steps", "n_pretrained", "n_scratch",
                  "n_control", "pretrained", "scratch", "control", "effect", "effect_lo", "effect_hi", "effect_p",
                  "effect_p_holm", "effect_method", "vs_control", "vs_control_lo", "vs_control_hi", "vs_control_p",
                  "vs_control_p_holm", "vs_control_method", "pretrain_metric", "pretrain_s", "fine_tune_s",
                  "control_s"]


def protocol_effects(runs: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """One row per pretrained group: mean test accuracy (%) pretrained, from scratch (same fine-tune budget) and of
    the compute-matched control, the differences with 95 % intervals and Holm-corrected p-values, and the cost
    (mean seconds of the pretraining loop, of the fine-tune loop, of the control's loop)."""
    if runs.empty or "protocol" not in runs:
        return pd.DataFrame(columns=EFFECT_COLUMNS)
    if profile is not None:
        runs = runs[runs.profile == profile]
    groups = _groups(runs)
    rows, comparisons = [], {"effect": [], "vs_control": []}
    for key, g in groups.items():
        *where, protocol = key
        if protocol == SCRATCH:
            continue
        prof, att, task, pair, ft, pt = where
        scratch = groups.get((prof, att, task, pair, ft, 0.0, SCRATCH))
        control = groups.get((prof, att, task, pair, ft + pt, 0.0, SCRATCH))
        s_pre, s_scr, s_ctl = _sample(g), _sample(scratch), _sample(control)
        for column, other, s_other in (("effect", scratch, s_scr), ("vs_control", control, s_ctl)):
            sides = (_result(g, s_pre), _result(other, s_other))
            comparisons[column].append(None if None in sides else (prof, task, protocol, ft, pt, *sides))
        effect = _interval(sig.compare(s_pre, s_scr) if s_scr is not None else None, s_pre, s_scr)
        vs_control = _interval(sig.compare(s_pre, s_ctl) if s_ctl is not None else None, s_pre, s_ctl)
        metric = [p.get("val_acc") if p.get("val_acc") is not None else p.get("val_mae") for p in g.pretraining
                  if isinstance(p, dict)]
        rows.append({
            "profile": prof, "task": task, "attention": att, "protocol": protocol, "ft_steps": ft, "pt_steps": pt,
            "n_pretrained": len(g), "n_scratch": 0 if scratch is None else len(scratch),
            "n_control": 0 if control is None else len(control), "pretrained": float(g.test_acc.mean() * 100),
            "scratch": math.nan if scratch is None else float(scratch.test_acc.mean() * 100),
            "control": math.nan if control is None else float(control.test_acc.mean() * 100),
            **{f"effect{'' if k == 'd' else '_' + k}": v for k, v in effect.items()},
            **{f"vs_control{'' if k == 'd' else '_' + k}": v for k, v in vs_control.items()},
            "pretrain_metric": float(np.mean(metric)) if metric else math.nan,
            "pretrain_s": float(g.pretrain_s.mean()), "fine_tune_s": float(g.train_loop_s.mean()),
            "control_s": math.nan if control is None else float(control.train_loop_s.mean()),
        })
    table = pd.DataFrame(rows, columns=EFFECT_COLUMNS)
    for column in ("effect", "vs_control"):
        table[f"{column}_p_holm"] = _holm_distinct(table[f"{column}_p"].to_numpy(float), comparisons[column])
    order = {a: i for i, a in enumerate(attention_order(table.attention.unique()))}
    table["_t"], table["_a"] = table.task.map(TASKS.index), table.attention.map(order)
    return table.sort_values(["profile", "_t", "_a", "protocol"]).drop(columns=["_t", "_a"]).reset_index(drop=True)


SPREAD_COLUMNS = ["profile", "task", "protocol", "n_variants", "best", "best_mean", "worst", "worst_mean", "spread",
                  "spread_lo", "spread_hi", "spread_p", "method"]


def protocol_spread(runs: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """Per profile, task and report protocol: the best and the worst variant (mean test accuracy over seeds) and
    best - worst with its 95 % interval (``significance.compare``). One result under several names is one variant,
    named by its alphabetically first name (``same_predictions.drop_repeats``: "flash" for flash and softmax)."""
    rows = []
    for label, subset in by_protocol(runs).items():
        cells = drop_repeats(task_cells(subset, profile))  # one result under several names: one variant
        for (prof, task), c in cells[cells.n > 0].groupby(["profile", "task"]):
            best, worst = c.loc[c["mean"].idxmax()], c.loc[c["mean"].idxmin()]
            spread = _interval(sig.compare(best["sample"], worst["sample"]) if len(c) > 1 else None)
            rows.append({"profile": prof, "task": task, "protocol": label, "n_variants": len(c),
                         "best": best.attention, "best_mean": best["mean"], "worst": worst.attention,
                         "worst_mean": worst["mean"], "spread": best["mean"] - worst["mean"],
                         "spread_lo": spread["lo"], "spread_hi": spread["hi"], "spread_p": spread["p"],
                         "method": spread["method"]})
    table = pd.DataFrame(rows, columns=SPREAD_COLUMNS)
    rank = {p: i for i, p in enumerate(ORDER)}
    table["_t"], table["_p"] = table.task.map(TASKS.index), table.protocol.map(lambda p: rank.get(p, len(ORDER)))
    return table.sort_values(["profile", "_t", "_p"]).drop(columns=["_t", "_p"]).reset_index(drop=True)


def _difference(d: float, lo: float, hi: float, p_holm: float, method: str = "") -> str:
    if not math.isfinite(d):
        return ""
    if not math.isfinite(lo):
        return f"{d:+.2f} ({method or 'untested'}: no interval)"
    return f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}] p={p_holm:.2g}"


def _mean(value: float, n: int) -> str:
    return "" if not math.isfinite(value) else f"{value:.2f} ({n})"


def effects_markdown(effects: pd.DataFrame, spread: pd.DataFrame) -> str:
    """The protocol-effect table and the spread table as Markdown, with how to read them."""
    if effects.empty:
        return "(no pretrained run records: nothing to compare with training from scratch)\n"
    lines = ["Test accuracy (%): mean over seeds (how many in brackets). *effect* = pretrained - from scratch with the "
             "same fine-tune budget; *vs control* = pretrained - from scratch trained for the pretraining's steps "
             "plus the fine-tune's (compute-matched). Each difference: [95 % interval], p Holm-corrected over the "
             "column (the harness's paired test: over seeds and the shared test examples). A difference whose "
             "interval holds 0 cannot be told apart from none at this power. Pretraining: the final validation "
             "masked-token accuracy (ce) or mean absolute error in grey levels (l1), and the mean seconds of the "
             "pretraining loop / the fine-tune loop / the control's loop (the pretrained run's training compute is "
             "the sum of the first two).\n"]
    table = pd.DataFrame({
        "task": effects.task.map(TASK_LABELS), "variant": effects.attention, "protocol": effects.protocol,
        "steps (pre + fine-tune)": [f"{int(p)} + {int(f)}" for p, f in zip(effects.pt_steps, effects.ft_steps,
                                                                          strict=True)],
        "scratch": [_mean(v, n) for v, n in zip(effects.scratch, effects.n_scratch, strict=True)],
        "pretrained": [_mean(v, n) for v, n in zip(effects.pretrained, effects.n_pretrained, strict=True)],
        "effect": [_difference(r.effect, r.effect_lo, r.effect_hi, r.effect_p_holm, r.effect_method)
                   for r in effects.itertuples()],
        "control": [_mean(v, n) for v, n in zip(effects.control, effects.n_control, strict=True)],
        "vs control": [_difference(r.vs_control, r.vs_control_lo, r.vs_control_hi, r.vs_control_p_holm,
                                   r.vs_control_method)
                       for r in effects.itertuples()],
        "pretraining": [f"{m:.3g}; {p:.0f} / {f:.0f}" + (f" / {c:.0f} s" if math.isfinite(c) else " s")
                        for m, p, f, c in zip(effects.pretrain_metric, effects.pretrain_s, effects.fine_tune_s,
                                              effects.control_s, strict=True)],
    })
    for prof in sorted(effects.profile.unique()):
        lines += [f"**Profile `{prof}`**\n", table[effects.profile.to_numpy() == prof].to_markdown(index=False), ""]
    if not spread.empty:
        lines.append("Spread between the variants under each protocol: best - worst mean test accuracy (%) per task, "
                     "[95 % interval] of that difference (paired test, not corrected for choosing the extremes: it "
                     "overstates how surely they differ).\n")
        st = pd.DataFrame({
            "profile": spread.profile, "task": spread.task.map(TASK_LABELS), "protocol": spread.protocol,
            "variants": spread.n_variants, "best": [f"{b} {m:.2f}" for b, m in zip(spread.best, spread.best_mean,
                                                                                   strict=True)],
            "worst": [f"{w} {m:.2f}" for w, m in zip(spread.worst, spread.worst_mean, strict=True)],
            "best - worst": [_difference(r.spread, r.spread_lo, r.spread_hi, r.spread_p) if r.n_variants > 1 else ""
                             for r in spread.itertuples()]})
        lines += [st.to_markdown(index=False), ""]
    return "\n".join(lines)
